//! A program with the panic hook installed that dies: by a fatal signal, the device shows
//! `fatal_signal` with the signal by name and then the program dies of that signal; by a
//! panic, the snapshot it saved shows the `panic` event, and the previous hook still ran.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use ttrace_tests::cli::{Cli, Ran};
use ttrace_tests::reader;

/// `ttrace-test-fatal <dir> <mode>`, its snapshots in `snaps`.
fn die(dir: &Path, snaps: &Path, mode: &str) -> Ran {
    Cli::new(env!("CARGO_BIN_EXE_ttrace-test-fatal"))
        .arg(dir)
        .arg(mode)
        .env("TTRACE_SNAPSHOT_DIR", snaps)
        .within(std::time::Duration::from_secs(60))
        .run()
}

#[test]
fn a_fatal_signal_is_recorded_by_name_and_still_kills() {
    let tmp = tempfile::tempdir().unwrap();
    for (mode, signal, event) in [
        (
            "segv",
            libc::SIGSEGV,
            "fatal_signal(signal=SIGSEGV addr=0x0 code=1)",
        ),
        (
            "abort",
            libc::SIGABRT,
            "fatal_signal(signal=SIGABRT addr=0x0 code=-6)",
        ),
    ] {
        let dir = tmp.path().join(mode);
        let ran = die(&dir, &tmp.path().join("snaps"), mode);
        assert_eq!(ran.status.signal(), Some(signal), "{mode}: {ran:?}");
        let dump = reader!("dump", &dir).ok();
        let events: Vec<&str> = dump.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(events.len(), 2, "{dump}");
        assert!(events[0].ends_with(" before(n=1)"), "{dump}");
        assert!(events[1].ends_with(&format!(") {event}")), "{mode}: {dump}");
        assert!(events[1].contains(&format!(" {}/", ran.pid)), "{dump}");
    }
}

#[test]
fn a_panic_saves_a_snapshot_with_the_panic_and_the_previous_hook_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, snaps) = (tmp.path().join("dev"), tmp.path().join("snaps"));
    let ran = die(&dir, &snaps, "panic");
    assert_eq!(ran.status.code(), Some(101), "{ran:?}");
    assert!(
        ran.stderr
            .contains("panicked at tests/src/bin/ttrace-test-fatal.rs:")
            && ran.stderr.contains("request 42 failed"),
        "Rust's own hook ran: {}",
        ran.stderr
    );
    let listed: serde_json::Value =
        serde_json::from_str(&reader!("snapshots", &snaps, "--json").ok()).unwrap();
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["kind"], "panic");
    assert_eq!(listed[0]["snapshot"]["pid"], ran.pid);
    let file = snaps.join(listed[0]["file"].as_str().unwrap());
    assert!(
        ran.stderr.contains(&format!(
            "ttrace: panic snapshot saved to {}",
            file.display()
        )),
        "{}",
        ran.stderr
    );
    let dump = reader!("dump", &file).ok();
    let panic = dump
        .lines()
        .find(|l| l.contains(" panic("))
        .unwrap_or_else(|| panic!("no panic event: {dump}"));
    assert!(
        panic.contains(" panic(\"request 42 failed\" at \"tests/src/bin/ttrace-test-fatal.rs:"),
        "{dump}"
    );
    assert!(
        dump.lines()
            .last()
            .unwrap()
            .starts_with("# snapshot taken by panic \"request 42 failed at tests/src/bin/"),
        "{dump}"
    );
}
