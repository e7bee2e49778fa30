//! `info()` messages are controlled as a tracepoint named `info` of class
//! `ttrace_core::CLASS_MESSAGES` is; a rule that matches nothing known is kept, with a note.

use std::path::Path;
use ttrace_tests::{env_writer, reader};

/// A new writer process on `dir` recording `env_point(n=7)`, then what `args` ask.
fn write(dir: &Path, args: &[&str]) {
    env_writer!(dir).args(args).succeeds();
}

/// `ctl` with `args`, which must succeed; its stderr.
fn ctl(dir: &Path, args: &[&str]) -> String {
    reader!("ctl", dir).args(args).succeeds().stderr
}

/// The messages of the dump, as their text.
fn messages(dir: &Path) -> Vec<String> {
    let out = reader!("dump", dir).run();
    assert!(out.status.success());
    out.stdout
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
    let out = reader!("dump", &dir).run();
    assert!(out.stdout.lines().any(|l| l.ends_with("x_point(n=1)")));

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
    let out = reader!("dump", &dir).run();
    let dump = out.stdout;
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
    let out = reader!("ctl", &dir).run();
    assert!(out.stdout.contains("\ndisable nomatch*\n"));

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
    assert!(dev.device().reader().info_enabled());
    assert!(ttrace_core::info("on"));
    dev.device().apply_text("disable info").unwrap();
    assert!(!dev.device().reader().info_enabled());
    assert!(!ttrace_core::info("off"), "recorded while disabled");
    dev.device().apply_text("enable in*").unwrap();
    assert!(ttrace_core::info("on again"));
    dev.device()
        .apply_text("clrbits 0x8000000000000000")
        .unwrap();
    assert!(!ttrace_core::info("off"));
    dev.device()
        .apply_text("setbits 0x8000000000000000")
        .unwrap();
    assert!(ttrace_core::info("on"));
}
