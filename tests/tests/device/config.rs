//! Configuring a device from the environment (`TTRACE_RING_SLOTS`, `TTRACE_AUX_SIZE`,
//! `TTRACE_MASK`, `TTRACE_DISABLED`), and a size asked for that an existing device does not
//! have: a typed error, never a silent success.

use std::path::Path;
use ttrace_core::{Config, Error, Writer};
use ttrace_tests::cli::Cli;
use ttrace_tests::{config, env_writer, reader};

/// The environment-configured program on `dir` with `vars` set.
fn with(dir: &Path, vars: &[(&str, &str)]) -> Cli {
    vars.iter()
        .fold(env_writer!(dir), |cmd, (k, v)| cmd.env(k, v))
}

fn events(dir: &Path) -> usize {
    reader!("dump", &dir)
        .ok()
        .lines()
        .filter(|l| l.ends_with("env_point(n=7)"))
        .count()
}

#[test]
fn ring_slots_and_aux_size_come_from_the_environment_and_stats_shows_them() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let out = with(
        &dir,
        &[("TTRACE_RING_SLOTS", "128"), ("TTRACE_AUX_SIZE", "32k")],
    )
    .ok();
    assert!(out.starts_with("slots 128 aux 32768 "), "{out}");
    let stats = reader!("stats", &dir).ok();
    let meta = std::fs::metadata(dir.join("meta")).unwrap().len();
    assert!(
        stats.contains(&format!(
            "sizes: 128 slots per ring ({} rings), aux 32768 bytes per ring, meta {meta} bytes\n",
            2 * devttrace::config::configured_cpus()
        )),
        "{stats}"
    );
    // The same sizes again attach; others are refused, naming both and the way out.
    with(&dir, &[("TTRACE_RING_SLOTS", "128")]).ok();
    let err = with(&dir, &[("TTRACE_RING_SLOTS", "256")]).fails();
    assert!(
        err.contains("the device has 128 slots per ring, not the 256 asked for")
            && err.contains("TTRACE_DIR")
            && err.contains("rm -r"),
        "{err}"
    );
    let err = with(&dir, &[("TTRACE_AUX_SIZE", "0x10000")]).fails();
    assert!(
        err.contains("the device has 32768 aux bytes per ring, not the 65536 asked for"),
        "{err}"
    );
    assert_eq!(events(&dir), 2, "the refused runs recorded nothing");
}

/// A program that asks for no size keeps an existing device's (one an older version made
/// with its defaults, or one made with `TTRACE_BUFFER`), and says so once on standard error
/// (unless `TTRACE_QUIET=1`); `stats` says it too, with what the defaults would make.
#[test]
fn a_device_of_other_sizes_is_kept_and_said() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let made = with(&dir, &[("TTRACE_RING_SLOTS", "128")]).succeeds();
    assert!(!made.stderr.contains("keeps the sizes"), "{}", made.stderr);
    let cpus = devttrace::config::configured_cpus();
    let note = devttrace::config::other_sizes(cpus, 128).unwrap();
    let kept = with(&dir, &[]).succeeds();
    let said: Vec<&str> = kept.stderr.lines().filter(|l| l.contains(&note)).collect();
    assert_eq!(said.len(), 1, "{}", kept.stderr);
    assert!(said[0].starts_with("ttrace: "), "{}", said[0]);
    assert!(
        said[0].ends_with("(TTRACE_QUIET=1 says nothing)"),
        "{}",
        said[0]
    );
    let quiet = with(&dir, &[("TTRACE_QUIET", "1")]).succeeds();
    assert!(!quiet.stderr.contains(&note), "{}", quiet.stderr);
    let stats = reader!("stats", &dir).ok();
    assert!(
        stats.contains(&format!("note: the device {note}\n")),
        "{stats}"
    );
}

#[test]
fn the_mask_and_disabled_come_from_the_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    // The point's class is the default class (bit 0): a mask without it records nothing.
    let out = with(&dir, &[("TTRACE_MASK", "0x4")]).ok();
    assert!(out.ends_with("mask 0x4\n"), "{out}");
    assert_eq!(events(&dir), 0);
    assert!(reader!("ctl", &dir).ok().starts_with("setmask 0x4 "));
    let out = with(&dir, &[("TTRACE_MASK", "0xffffffffffffffff")]).ok();
    assert!(out.ends_with("mask 0xffffffffffffffff\n"), "{out}");
    assert_eq!(events(&dir), 1);

    let out = with(&dir, &[("TTRACE_DISABLED", "1")]).ok();
    assert!(out.ends_with("mask 0x0\n"), "{out}");
    assert_eq!(events(&dir), 1, "nothing recorded while disabled");
    // Without the variables the device keeps its mask (it is the device's, not the run's).
    let out = with(&dir, &[]).ok();
    assert!(out.ends_with("mask 0x0\n"), "{out}");
    assert_eq!(events(&dir), 1);
    with(&dir, &[("TTRACE_DISABLED", "0"), ("TTRACE_MASK", "1")]).ok();
    assert_eq!(events(&dir), 2);
}

#[test]
fn invalid_values_are_one_clear_error_naming_the_variable() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    for (var, value, why) in [
        ("TTRACE_RING_SLOTS", "lots", "not a number"),
        ("TTRACE_RING_SLOTS", "100", "power of two"),
        ("TTRACE_RING_SLOTS", "1", "power of two"),
        ("TTRACE_RING_SLOTS", "99999999999999999999", "not a number"),
        ("TTRACE_AUX_SIZE", "1k", "power of two"),
        ("TTRACE_AUX_SIZE", "64q", "not a size"),
        ("TTRACE_AUX_SIZE", "0xffffffffffffffffk", "not a size"),
        ("TTRACE_MASK", "-1", "not a number"),
        ("TTRACE_DISABLED", "yes", "must be 1"),
    ] {
        let err = with(&dir, &[(var, value)]).fails();
        assert!(
            err.contains(&format!("{var}={value:?}")) && err.contains(why),
            "{var}={value}: {err}"
        );
        assert!(!dir.exists(), "{var}={value}: a device was made");
    }
}

#[test]
fn opening_an_existing_device_with_other_sizes_is_a_typed_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    Writer::open(&config(&dir, 16384, 2)).unwrap();
    match Writer::open(&config(&dir, 65536, 2)) {
        Err(Error::SizeMismatch {
            what,
            asked,
            found,
            path,
        }) => {
            assert_eq!((what, asked, found), ("slots per ring", 65536, 16384));
            assert_eq!(path, dir);
        }
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("a size asked for and silently not given"),
    }
    assert!(matches!(
        Writer::open(&config(&dir, 16384, 4)),
        Err(Error::SizeMismatch {
            what: "cpus",
            asked: 4,
            found: 2,
            ..
        })
    ));
    // Sizes left at their defaults accept the device's.
    let dev = Writer::open(&Config::at(&dir)).unwrap();
    assert_eq!(dev.device().mapping().ring_slots(), 16384);
}
