//! `info()` messages are controlled as a tracepoint named `info` of class
//! `ttrace_core::CLASS_MESSAGES` is; a rule that matches nothing known is kept, with a note.

use std::path::Path;
use std::process::{Command, Output};

const READER: &str = env!("CARGO_BIN_EXE_ttrace-reader-cli");
const ENV_APP: &str = env!("CARGO_BIN_EXE_ttrace-test-env");

/// A new writer process on `dir` recording `env_point(n=7)`, then what `args` ask.
fn write(dir: &Path, args: &[&str]) {
    let out =
        ttrace_tests::without_config_env(Command::new(ENV_APP).env("TTRACE_DIR", dir).args(args))
            .output()
            .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn reader(args: &[&str]) -> Output {
    ttrace_tests::without_config_env(Command::new(READER).args(args))
        .output()
        .unwrap()
}

/// `ctl` with `args`, which must succeed; its stderr.
fn ctl(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["ctl", dir.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = reader(&all);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "ctl {args:?}: {err}");
    err
}

/// The messages of the dump, as their text.
fn messages(dir: &Path) -> Vec<String> {
    let out = reader(&["dump", dir.to_str().unwrap()]);
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            l.split_once(" info(\"")
                .map(|(_, m)| m.trim_end_matches("\")").to_string())
        })
        .collect()
}

/// Bytes written to the device's aux buffers since it was created.
fn aux_bytes(dir: &Path) -> u64 {
    devttrace::Reader::open(dir).unwrap().status().aux_bytes
}

#[test]
fn ctl_disable_info_stops_messages_and_enable_brings_them_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    write(&dir, &["info=one"]);
    assert_eq!(messages(&dir), ["one"]);

    // `info` is a name the device knows: no note.
    let err = ctl(&dir, &["disable", "info"]);
    assert!(err.is_empty(), "{err}");
    let before = aux_bytes(&dir);
    write(&dir, &["info=two", "x=1"]);
    assert_eq!(messages(&dir), ["one"], "a message while disabled");
    assert_eq!(aux_bytes(&dir), before, "a disabled message took aux space");
    let out = reader(&["dump", dir.to_str().unwrap()]);
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .any(|l| l.ends_with("x_point(n=1)")));

    ctl(&dir, &["enable", "info"]);
    write(&dir, &["info=three"]);
    assert_eq!(messages(&dir), ["one", "three"]);

    // A wildcard that covers `info` works as for any tracepoint.
    ctl(&dir, &["disable", "*"]);
    write(&dir, &["info=four"]);
    ctl(&dir, &["reset"]);
    write(&dir, &["info=five"]);
    assert_eq!(messages(&dir), ["one", "three", "five"]);
}

#[test]
fn clearing_the_info_class_bit_stops_messages() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    write(&dir, &["info=one"]);
    let bit = format!("{:#x}", ttrace_core::CLASS_MESSAGES);
    assert_eq!(bit, "0x8000000000000000");

    ctl(&dir, &["clrbits", &bit]);
    let before = aux_bytes(&dir);
    write(&dir, &["info=two"]);
    assert_eq!(messages(&dir), ["one"]);
    assert_eq!(aux_bytes(&dir), before);
    // The other classes are untouched: the point still records.
    let out = reader(&["dump", dir.to_str().unwrap()]);
    let dump = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        dump.lines()
            .filter(|l| l.ends_with("env_point(n=7)"))
            .count(),
        2,
        "{dump}"
    );

    ctl(&dir, &["setbits", &bit]);
    write(&dir, &["info=three"]);
    assert_eq!(messages(&dir), ["one", "three"]);

    // The class bit alone: every other class off, messages still on.
    ctl(&dir, &["setmask", &bit, "0xffffffffffffffff"]);
    write(&dir, &["info=four"]);
    assert_eq!(messages(&dir), ["one", "three", "four"]);
}

#[test]
fn a_rule_that_matches_nothing_is_kept_with_a_note() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    write(&dir, &[]);

    let err = ctl(&dir, &["disable", "nomatch*"]);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("ttrace-reader: ctl: note: `nomatch*` matches nothing yet"),
        "{err}"
    );
    let out = reader(&["ctl", dir.to_str().unwrap()]);
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .contains("\ndisable nomatch*\n"));

    // Names the device knows: no note.
    for pattern in ["env_*", "info", "*"] {
        let err = ctl(&dir, &["enable", pattern]);
        assert!(err.is_empty(), "{pattern}: {err}");
    }
}

#[test]
fn info_records_nothing_while_disabled() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = ttrace_core::init(&ttrace_tests::config(&tmp.path().join("dev"), 64, 1)).unwrap();
    assert!(dev.info_enabled());
    assert!(ttrace_core::info("on"));
    dev.apply_text("disable info").unwrap();
    assert!(!dev.info_enabled());
    assert!(!ttrace_core::info("off"), "recorded while disabled");
    dev.apply_text("enable in*").unwrap();
    assert!(ttrace_core::info("on again"));
    dev.apply_text("clrbits 0x8000000000000000").unwrap();
    assert!(!ttrace_core::info("off"));
    dev.apply_text("setbits 0x8000000000000000").unwrap();
    assert!(ttrace_core::info("on"));
}
