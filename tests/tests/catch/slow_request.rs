//! The slow request, caught: two threads serve 100,000 requests of about a microsecond,
//! one of them taking 20 ms; the program's `trigger` and its panic hook each leave a
//! snapshot in which `dump` shows that request's entry and exit and the events just before
//! it, and `report` measures it; so do `watch` started before the program, and the same
//! rule installed with `ctl on` and applied by the program's own saver.
//!
//! The rings here hold 131,072 entries, more than a thread writes in the whole run (each
//! thread is pinned to a CPU of its own and writes 100,000): no ring wraps, so what the
//! tests see does not depend on how fast the machine running them is, on whether a
//! follower kept up or on when a copy was made. A preemption of over 15 ms makes a request
//! slow too; every such snapshot is kept (`KEEP`, `MAX_BYTES`), so the slow request's is
//! never the one retention removes. Under load (a million requests, the default rings,
//! rings that wrap every few milliseconds) the same program is measured, not tested
//! (`docs/BENCHMARKS.md`, *Catching the slow request*).

use std::path::{Path, PathBuf};
use ttrace_tests::cli::Running;
use ttrace_tests::{reader, requests};

/// Requests served, by two threads.
const REQUESTS: u64 = 100_000;

/// The request that takes 20 ms: the one in the middle.
const SLOW: u64 = REQUESTS / 2;

/// Slots per ring: more than the entries a thread writes (see the module's doc).
const RING_SLOTS: &str = "131072";

/// Snapshot files and bytes kept: every snapshot a run can make (see the module's doc).
const KEEP: &str = "1000";
const MAX_BYTES: &str = "64g";

/// How long a line may take before the test gives up (a bound on failure, not a way to
/// order anything).
const PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);

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

/// The test program on the device `dev` in `mode`, sized and with the snapshot policy of
/// the module's doc (every slow request may trigger: none is refused for the rate), its
/// snapshots going to `snaps`.
fn requests(dev: &Path, mode: &str, snaps: &Path) -> ttrace_tests::cli::Cli {
    requests!(dev, mode, snaps)
        .arg(REQUESTS.to_string())
        .env("TTRACE_RING_SLOTS", RING_SLOTS)
        .env("TTRACE_SNAPSHOT_INTERVAL", "0s")
        .env("TTRACE_SNAPSHOT_KEEP", KEEP)
        .env("TTRACE_SNAPSHOT_BYTES", MAX_BYTES)
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
    let ran = requests(&tmp.path().join("dev"), "trigger", &snaps).succeeds();
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
    let ran = requests(&tmp.path().join("dev"), "panic", &snaps).run();
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

/// Checks that one of `files` holds the slow request (see [`holds_the_slow_request`]).
fn one_holds_the_slow_request(files: &[PathBuf], stderr: &str) {
    let checked: Vec<_> = files.iter().map(|f| holds_the_slow_request(f)).collect();
    assert!(
        checked.iter().any(Result::is_ok),
        "{checked:#?}\nin {files:?}\nits stderr: {stderr}"
    );
}

#[test]
fn a_watcher_started_before_the_program_keeps_the_slow_request() {
    let _turn = ttrace_tests::turn("requests-watch");
    let tmp = tempfile::tempdir().unwrap();
    let (dev, snaps) = (tmp.path().join("dev"), tmp.path().join("snapshots"));
    // Before the program: no device yet, the watcher waits for it and for its tracepoints.
    // Every request over 15 ms (a long preemption may make one) is kept.
    let mut watcher = reader!(
        "watch",
        &dev,
        "--wait",
        "--on",
        "latency request > 15ms",
        "-o",
        &snaps,
        "--interval",
        "0s",
        "--keep",
        KEEP,
        "--max-bytes",
        MAX_BYTES,
        "--interval-ms",
        "2"
    )
    .start();
    watcher.until("the waiting line", PATIENCE, |l| {
        l.starts_with("# waiting for ")
    });
    // The program opens its device and registers its tracepoints, then waits until the
    // watcher follows them.
    let program = requests(&dev, "none", &tmp.path().join("unused"));
    let seen = Running::run_watched(program, &mut watcher, PATIENCE);
    assert!(
        seen.iter().any(|l| *l == format!("slow {SLOW}")),
        "{seen:#?}"
    );
    let files = watcher.stop_watch(PATIENCE);
    for f in &files {
        let cause = devttrace::Reader::open(f)
            .unwrap()
            .cause()
            .unwrap()
            .reason()
            .to_string();
        assert!(cause.starts_with("latency request > 15ms: "), "{cause}");
    }
    one_holds_the_slow_request(&files, "");
}

#[test]
fn rules_installed_with_ctl_are_applied_by_the_program_and_keep_the_slow_request() {
    let _turn = ttrace_tests::turn("requests-rules");
    let tmp = tempfile::tempdir().unwrap();
    let (dev, snaps) = (tmp.path().join("dev"), tmp.path().join("snapshots"));
    // Installed before the program runs (ctl creates the device, sized as the program's).
    let ctl = reader!("ctl", &dev, "on", "latency", "request", ">", "15ms")
        .env("TTRACE_RING_SLOTS", RING_SLOTS)
        .ok();
    assert!(
        ctl.lines().any(|l| l == "on latency request > 15ms"),
        "{ctl}"
    );
    let ran = requests(&dev, "rules", &snaps).succeeds();
    assert!(
        ran.stdout.contains(&format!("slow {SLOW}\n")),
        "{}",
        ran.stdout
    );
    let found = snapshots(&snaps, "-rule-latency-request-15ms-");
    one_holds_the_slow_request(&found, &ran.stderr);
    // Each says the rule in its cause.
    for f in &found {
        let r = devttrace::Reader::open(f).unwrap();
        let reason = r.cause().unwrap().reason().to_string();
        assert!(reason.starts_with("latency request > 15ms: "), "{reason}");
    }
    // Taken off, it is gone from the device.
    let ctl = reader!("ctl", &dev, "off", "all").ok();
    assert!(!ctl.contains("on latency"), "{ctl}");
}
