//! `ttrace-reader watch`: a rule that matches saves the device, with the moment in it; its
//! rate and merging are counted; a rule with a mistake is one line and exit status 1. The
//! writer (`ttrace-test-pairs`) records what the test asks when it asks, so that which pair
//! is long, and which event comes when, is the test's doing, never the scheduler's.

use std::path::Path;
use std::time::Duration;
use ttrace_tests::cli::Running;
use ttrace_tests::{pairs_writer, reader};

/// How long a line may take before the test gives up (a bound on failure, not a way to
/// order anything: every step waits for the line that says it happened).
const PATIENCE: Duration = Duration::from_secs(60);

/// A writer of the device `dir`, its tracepoints registered by a few pairs.
fn writer(dir: &Path) -> Running {
    let mut w = pairs_writer!(dir).start_talking();
    w.send("pairs 3", PATIENCE);
    w.send("failed 0 /warm-up", PATIENCE);
    w
}

/// `watch` of `dir` into `snaps` with `args`, once it follows the device.
fn watch(dir: &Path, snaps: &Path, args: &[&str]) -> Running {
    let mut w = reader!("watch", dir, "-o", snaps, "--interval-ms", "2")
        .args(args)
        .start();
    w.until("the watching line", PATIENCE, |l| {
        l.starts_with("# watching ")
    });
    w
}

/// The file a snapshot line names: `TIME RULE (WHAT) -> FILE: N events`.
fn file_of(line: &str) -> String {
    let after = line.split(" -> ").nth(1).expect(line);
    after.rsplit_once(": ").expect(line).0.to_string()
}

/// Ends `w` by SIGTERM, as Ctrl-C would: its footer line.
fn stop(w: &mut Running) -> String {
    // SAFETY: sends SIGTERM to our own child, which has not been reaped (it is waited for
    // only by `Running`'s drop, after this).
    unsafe { libc::kill(w.child.id() as i32, libc::SIGTERM) };
    w.until("the footer", PATIENCE, |l| l.starts_with("# watch:"))
}

/// Per request id, the duration in ns of its pair `name`, as `report --by id` measures it in
/// `dev`.
fn durations(dev: &Path, name: &str) -> std::collections::HashMap<String, u64> {
    let out = reader!("report", dev, "--by", "id", "--json").ok();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["durations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["name"] == name)
        .map(|d| {
            assert_eq!(d["count"], 1, "{d}");
            (
                d["group"].as_str().unwrap().to_string(),
                d["max_ns"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_watcher_waiting_for_the_device_catches_the_first_event_of_its_rule() {
    // Started before the device exists: it waits for the device, then for the rule's
    // tracepoints, which the program registers with the very request the rule is to catch.
    let tmp = tempfile::tempdir().unwrap();
    let (dev, snaps) = (tmp.path().join("dev"), tmp.path().join("snaps"));
    let mut watcher = reader!(
        "watch",
        &dev,
        "--wait",
        "-o",
        &snaps,
        "--interval-ms",
        "2",
        "--on",
        "latency slow_request > 5ms",
        "--count",
        "1"
    )
    .start();
    watcher.until("the waiting line", PATIENCE, |l| {
        l.starts_with("# waiting for ")
    });
    let mut w = pairs_writer!(&dev).start_talking();
    // The first slow request registers its pair: followed from the device's start, the
    // watcher reads it all the same.
    w.send("long 1 10", PATIENCE);
    let line = watcher.until("the snapshot line", PATIENCE, |l| l.contains(" -> "));
    assert!(line.contains(" latency slow_request > 5ms ("), "{line}");
    let dump = reader!("dump", file_of(&line)).ok();
    assert!(
        dump.lines().any(|l| l.ends_with(" slow_request(id=1)")),
        "{dump}"
    );
}

#[test]
fn a_rule_waiting_for_a_name_close_to_one_the_device_has_asks_if_it_was_meant() {
    let tmp = tempfile::tempdir().unwrap();
    let (dev, snaps) = (tmp.path().join("dev"), tmp.path().join("snaps"));
    let _w = writer(&dev);
    let mut watcher = reader!(
        "watch",
        &dev,
        "--wait",
        "-o",
        &snaps,
        "--on",
        "latency reqest > 5ms"
    )
    .start();
    let line = watcher.until("the hint", PATIENCE, |l| l.contains("did you mean"));
    assert_eq!(
        line,
        "# latency reqest > 5ms: no reqest yet; did you mean request?"
    );
}

#[test]
fn watch_saves_the_slow_request_with_its_entry_and_exit() {
    let tmp = tempfile::tempdir().unwrap();
    let (dev, snaps) = (tmp.path().join("dev"), tmp.path().join("snaps"));
    let mut w = writer(&dev);
    // The slow request is a pair of its own, `slow_request` (the quick ones are `request`):
    // the rule matches it and nothing else, however long a preemption makes a quick pair.
    // A first one, done before the watch follows (so never seen by it), registers its
    // tracepoints for the rule to name.
    w.send("long 1 0", PATIENCE);
    let mut watcher = watch(
        &dev,
        &snaps,
        &["--on", "latency slow_request > 5ms", "--count", "1"],
    );
    w.send("pairs 200", PATIENCE);
    w.send("long 7 20", PATIENCE);
    w.send("pairs 200", PATIENCE);
    let line = watcher.until("the snapshot line", PATIENCE, |l| l.contains(" -> "));
    assert!(line.contains(" latency slow_request > 5ms ("), "{line}");
    assert!(line.ends_with(" events"), "{line}");
    let footer = watcher.until("the footer", PATIENCE, |l| l.starts_with("# watch:"));
    assert!(
        footer.starts_with("# watch: 1 matches, 1 snapshots, 0 merged, 0 put off"),
        "{footer}"
    );
    let file = file_of(&line);
    assert!(Path::new(&file).starts_with(&snaps), "{file}");

    let dump = reader!("dump", &file).ok();
    let has = |what: &str| dump.lines().any(|l| l.ends_with(what));
    assert!(
        has(" slow_request(id=7)") && has(" slow_request_done(id=7)"),
        "{dump}"
    );
    // 20 ms by the device's clock from after the entry's stamp (`ttrace-test-pairs`).
    let took = durations(Path::new(&file), "slow_request")["id=7"];
    assert!(took >= 20_000_000, "{took} ns");
    // Its header says why it was taken, and when.
    let saved = devttrace::Reader::open_with(&file, devttrace::Trust::Own).unwrap();
    let cause = saved.cause().expect("a cause");
    assert_eq!(cause.kind, ttrace_layouts::snapshot::CauseKind::Rule as u32);
    assert!(
        cause.reason().starts_with("latency slow_request > 5ms: "),
        "{cause:?}"
    );
    assert!(
        cause.trigger_stamp > 0 && cause.after_ns == 5_000_000,
        "{cause:?}"
    );
}

#[test]
fn watch_rules_with_mistakes_fail_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = tmp.path().join("dev");
    let _w = writer(&dev);
    for (args, says) in [
        (
            &["--on", "latncy request > 5ms"][..],
            "latncy: a rule begins with event, latency or lost",
        ),
        (
            &["--on", "latency request > 5 parsecs"],
            "\"5parsecs\" is not a duration",
        ),
        (
            &["--on", "event nosuch"],
            "no tracepoint nosuch; the device has request, request_done, request_failed",
        ),
        (
            &["--on", "latency request_done > 5ms"],
            "no pair request_done",
        ),
        (
            &["--on", "event request_failed if code == 1"],
            "has no argument code; it has path, status",
        ),
        (
            &["--on", "event request_failed if path == 1"],
            "path is a string",
        ),
        (
            &["--on", "event request", "--after", "soon"],
            "watch --after \"soon\": not a duration",
        ),
        (
            &["--on", "event request", "--max-bytes", "lots"],
            "watch --max-bytes \"lots\": not a size",
        ),
    ] {
        let err = reader!("watch", &dev).args(args).fails();
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn watch_event_if_fires_on_that_value_only_and_merges_what_the_snapshot_covers() {
    let tmp = tempfile::tempdir().unwrap();
    let (dev, snaps) = (tmp.path().join("dev"), tmp.path().join("snaps"));
    let mut w = writer(&dev);
    // Two rules that match the same event: the second is merged into the first's snapshot.
    let mut watcher = watch(
        &dev,
        &snaps,
        &[
            "--on",
            "event request_failed if status == -3",
            "--on",
            "event request_failed if path == \"/c\"",
            "--count",
            "1",
        ],
    );
    for (status, path) in [(1, "/a"), (-2, "/b"), (-3, "/c"), (4, "/d")] {
        w.send(&format!("failed {status} {path}"), PATIENCE);
    }
    let line = watcher.until("the snapshot line", PATIENCE, |l| l.contains(" -> "));
    assert!(
        line.contains(" event request_failed if status == -3 (status=-3) -> "),
        "{line}"
    );
    let footer = watcher.until("the footer", PATIENCE, |l| l.starts_with("# watch:"));
    assert!(
        footer.starts_with("# watch: 2 matches, 1 snapshots, 1 merged, 0 put off"),
        "{footer}"
    );
}

#[test]
fn watch_latency_max_fires_on_new_maxima_only() {
    let tmp = tempfile::tempdir().unwrap();
    let (dev, snaps) = (tmp.path().join("dev"), tmp.path().join("snaps"));
    let mut w = writer(&dev);
    let mut watcher = watch(
        &dev,
        &snaps,
        &["--on", "latency request max", "--interval", "0s"],
    );
    // Pair 2 inside pair 1: it closes first and sets the maximum; pair 1, longer by
    // construction, is a new one. The quick pairs after (ids 1003 to 1007, the warm-up took
    // 1000 to 1002) may or may not be: the trace says.
    for line in ["enter 1", "enter 2", "exit 2", "exit 1", "pairs 5"] {
        w.send(line, PATIENCE);
    }
    let footer = stop(&mut watcher);
    let took = durations(&dev, "request");
    let mut order = vec!["id=2".to_string(), "id=1".to_string()];
    order.extend((1003..1008).map(|id| format!("id={id}")));
    let (mut max, mut maxima) = (None, 0);
    for id in &order {
        let d = took[id];
        if max.is_some_and(|m| d > m) {
            maxima += 1;
        }
        max = Some(max.map_or(d, |m: u64| m.max(d)));
    }
    assert!(took["id=1"] > took["id=2"]);
    assert!(maxima >= 1);
    assert!(
        footer.starts_with(&format!("# watch: {maxima} matches, ")),
        "{footer} ({took:?})"
    );
    assert!(
        footer.ends_with(" 0 entries lost by the follower"),
        "{footer}"
    );
    let fired: Vec<&String> = watcher.seen.iter().filter(|l| l.contains(" -> ")).collect();
    assert!(fired[0].contains(" latency request max ("), "{fired:?}");
    assert!(fired[0].contains(" (max before "), "{fired:?}");
}

#[test]
fn watch_puts_off_a_match_within_the_interval_and_runs_exec() {
    let tmp = tempfile::tempdir().unwrap();
    let (dev, snaps) = (tmp.path().join("dev"), tmp.path().join("snaps"));
    let mut w = writer(&dev);
    let mut watcher = watch(
        &dev,
        &snaps,
        &[
            "--on",
            "event request_failed",
            "--interval",
            "3600s",
            "--after",
            "0s",
            "--exec",
            "printf '%s' \"$TTRACE_RULE\" > \"$TTRACE_SNAPSHOT.rule\"",
        ],
    );
    w.send("failed 1 /a", PATIENCE);
    let line = watcher.until("the snapshot line", PATIENCE, |l| l.contains(" -> "));
    // Saved. The next match is within the interval: put off to an interval after the
    // first (saved when the watch ends, an hour sooner); the third merged into it.
    w.send("failed 2 /b", PATIENCE);
    w.send("failed 3 /c", PATIENCE);
    let footer = stop(&mut watcher);
    assert!(
        footer.starts_with("# watch: 3 matches, 2 snapshots, 1 merged, 1 put off"),
        "{footer}"
    );
    let second = watcher
        .seen
        .iter()
        .filter(|l| l.contains(" -> "))
        .map(|l| file_of(l))
        .nth(1)
        .expect("the snapshot put off");
    let dump = reader!("dump", &second).ok();
    assert!(
        dump.contains("path=\"/b\"") && dump.contains("path=\"/c\""),
        "{dump}"
    );
    // --exec ran (watch waits for it before its footer), with the file and the rule.
    let rule = std::fs::read_to_string(format!("{}.rule", file_of(&line))).unwrap();
    assert_eq!(rule, "event request_failed");
}
