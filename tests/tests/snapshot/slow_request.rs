//! The one slow request in a million, caught: two threads serve 1,000,000 requests of about
//! a microsecond, one of them taking 20 ms; the program's `trigger` and its panic hook each
//! leave a snapshot in which `dump` shows that request's entry and exit and the events just
//! before it, and `report` measures it.
//!
//! The rings here hold 262,144 entries, about 140 ms of a thread at this rate, so that
//! whether the saver copies the rings in time does not depend on how busy the machine
//! running the tests is; with the default rings (16,384 entries, about 9 ms) the same
//! program is measured, not tested (`docs/BENCHMARKS.md`, *Catching the slow request*).

use std::path::{Path, PathBuf};
use ttrace_tests::{reader, requests};

/// The request that takes 20 ms: the one in the middle.
const SLOW: u64 = 500_000;

/// Slots per ring (see the module's doc).
const RING_SLOTS: &str = "262144";

/// Checks that the snapshot `file` holds the slow request whole, with what its thread did
/// just before, and that `report` measures it at 20 ms or more; else says what it lacks.
fn holds_the_slow_request(file: &Path) -> Result<(), String> {
    let dump = reader!("dump", file).ok();
    let lines: Vec<&str> = dump.lines().collect();
    let entry = format!(" request(id={SLOW})");
    let name = file.display();
    let at = lines
        .iter()
        .position(|l| l.ends_with(&entry))
        .ok_or_else(|| format!("{name}: no{entry}"))?;
    let exit = format!(" request_done(id={SLOW})");
    if !lines[at..].iter().any(|l| l.ends_with(&exit)) {
        return Err(format!("{name}: no{exit} after the entry"));
    }
    // Just before it, on the same thread: the exit of the request it served before.
    let thread = lines[at]
        .split_whitespace()
        .nth(2)
        .expect("a thread column");
    let before = format!(" request_done(id={})", SLOW - 2);
    let just_before = lines[..at]
        .iter()
        .rev()
        .find(|l| l.split_whitespace().nth(2) == Some(thread));
    if !just_before.is_some_and(|l| l.ends_with(&before)) {
        return Err(format!("{name}: the event before the slow request on its thread is not{before}: {just_before:?}"));
    }
    let report: serde_json::Value =
        serde_json::from_str(&reader!("report", "--json", file).ok()).unwrap();
    let max = report["durations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "request")
        .and_then(|d| d["max_ns"].as_u64())
        .ok_or_else(|| format!("{name}: no request durations: {report}"))?;
    match max >= 20_000_000 {
        true => Ok(()),
        false => Err(format!("{name}: the slowest request measured {max} ns")),
    }
}

/// The snapshot files of `dir` whose names contain `part`.
fn snapshots(dir: &Path, part: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(part))
        .collect();
    found.sort();
    found
}

#[test]
fn a_trigger_from_the_program_keeps_the_slow_request() {
    // Alone: each program pins its two threads to the same two CPUs.
    let _turn = ttrace_tests::turn("requests-trigger");
    let tmp = tempfile::tempdir().unwrap();
    let snaps = tmp.path().join("snapshots");
    // Every slow request triggers (a long preemption may make one): none may be refused
    // for the rate before the one the test looks for.
    let ran = requests!(tmp.path().join("dev"), "trigger", &snaps)
        .env("TTRACE_RING_SLOTS", RING_SLOTS)
        .env("TTRACE_SNAPSHOT_INTERVAL", "0s")
        .env("TTRACE_SNAPSHOT_KEEP", "100")
        .succeeds();
    assert!(
        ran.stdout.contains(&format!("slow {SLOW}\n")),
        "{}",
        ran.stdout
    );
    // Its snapshot, or the one of an earlier slow request (a preemption) it merged into.
    let found = snapshots(&snaps, "-trigger-slow-request-");
    let checked: Vec<_> = found.iter().map(|f| holds_the_slow_request(f)).collect();
    assert!(
        checked.iter().any(Result::is_ok),
        "{checked:#?}\nin {:?}\nits stdout: {}\nits stderr: {}",
        std::fs::read_dir(&snaps).map(|d| d.map(|e| e.unwrap().file_name()).collect::<Vec<_>>()),
        ran.stdout,
        ran.stderr
    );
}

#[test]
fn the_panic_hook_keeps_the_slow_request() {
    let _turn = ttrace_tests::turn("requests-panic");
    let tmp = tempfile::tempdir().unwrap();
    let snaps = tmp.path().join("snapshots");
    let ran = requests!(tmp.path().join("dev"), "panic", &snaps)
        .env("TTRACE_RING_SLOTS", RING_SLOTS)
        .run();
    assert!(!ran.status.success(), "it was to panic: {}", ran.stdout);
    // The hook before it (Rust's) still ran.
    assert!(ran.stderr.contains("panicked at"), "{}", ran.stderr);
    assert!(
        ran.stderr
            .contains(&format!("request {SLOW} took over 15 ms")),
        "{}",
        ran.stderr
    );
    let found = snapshots(&snaps, "-panic-");
    assert_eq!(found.len(), 1, "{found:?}\n{}", ran.stderr);
    let dump = reader!("dump", &found[0]).ok();
    assert!(
        dump.lines().any(|l| l.contains(&format!(
            " panic(\"request {SLOW} took over 15 ms\" at \"tests/src/bin/ttrace-test-requests.rs:"
        ))),
        "no panic event with its message and location"
    );
    holds_the_slow_request(&found[0]).unwrap();
}
