//! Snapshots taken by programs, read back: every reader says which trigger made a snapshot
//! file, `stats` shows the device's snapshot counters.

use devttrace::{Counter, Reader};
use std::path::Path;
use ttrace_core::{Config, Device};
use ttrace_layouts::device::ClockSource;
use ttrace_layouts::snapshot::{Cause, CauseKind};
use ttrace_tests::reader;

/// A device on the nanosecond clock, with a few `step(n=..)` events.
fn device(dir: &Path) -> Device {
    let dev = Device::open(&Config {
        clock: Some(ClockSource::MonotonicNs),
        ..ttrace_tests::config(dir, 64, 2)
    })
    .unwrap();
    let word = ttrace_tests::define(&dev, "step", "n={n}");
    dev.note_thread(1, 2, "worker").unwrap();
    for n in 0..5 {
        dev.emit(word, 1 << 32 | 2, &[n]);
    }
    dev
}

/// The cause of a trigger "slow request" by pid 4242, 12.345678901 s after the device of
/// `dev` was created, with a window of 1 s before and 5 ms after, and 2 triggers merged.
fn slow_request(dev: &Device) -> Cause {
    let mut cause = Cause::new(CauseKind::Trigger, "slow request");
    cause.pid = 4242;
    cause.trigger_stamp = dev.version().clock.anchor_ticks + 12_345_678_901;
    cause.before_ns = 1_000_000_000;
    cause.after_ns = 5_000_000;
    cause.merged = 2;
    cause
}

/// The line every reader shows of [`slow_request`]'s snapshot of `dev`.
fn slow_request_line(dev: &Device) -> String {
    let utc = ttrace_reader::decode::utc(dev.version().clock.anchor_realtime_ns + 12_345_678_901);
    format!(
        "snapshot taken by trigger \"slow request\" (pid 4242) at 12.345678901 ({utc}), \
         window 1s before, 5ms after; 2 more triggers merged"
    )
}

#[test]
fn every_reader_says_which_trigger_took_a_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = device(&tmp.path().join("dev"));
    let file = tmp.path().join("slow.ttrace");
    dev.save_because(&file, &slow_request(&dev)).unwrap();
    let line = format!("# {}", slow_request_line(&dev));

    let dump = reader!("dump", &file).ok();
    assert_eq!(dump.lines().last(), Some(line.as_str()), "{dump}");
    assert_eq!(dump.matches("step(n=").count(), 5, "{dump}");
    let stats = reader!("stats", &file).ok();
    assert!(stats.lines().any(|l| l == line), "{stats}");
    let report = reader!("report", &file).ok();
    assert!(report.lines().any(|l| l == line), "{report}");

    let json: serde_json::Value =
        serde_json::from_str(&reader!("report", &file, "--json").ok()).unwrap();
    let taken = &json["snapshot"];
    assert_eq!(taken["kind"], "trigger");
    assert_eq!(taken["reason"], "slow request");
    assert_eq!(taken["pid"], 4242);
    assert_eq!(taken["at"], "12.345678901");
    assert_eq!(
        taken["at_utc"],
        ttrace_reader::decode::utc(dev.version().clock.anchor_realtime_ns + 12_345_678_901)
    );
    assert_eq!(taken["before_ns"], 1_000_000_000u64);
    assert_eq!(taken["after_ns"], 5_000_000u64);
    assert_eq!(taken["merged"], 2);

    let chrome = tmp.path().join("trace.json");
    reader!("export", "--format", "chrome", &file, "-o", &chrome).ok();
    let chrome: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&chrome).unwrap()).unwrap();
    assert_eq!(chrome["otherData"]["snapshot"], *taken);
}

#[test]
fn a_device_and_a_snapshot_asked_for_say_nothing_of_a_trigger() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = device(&dir);
    let file = tmp.path().join("asked.ttrace");
    dev.save(&file).unwrap();
    assert!(Reader::open(&file).unwrap().cause().is_none());
    for source in [dir.as_path(), file.as_path()] {
        for out in [
            reader!("dump", source).ok(),
            reader!("stats", source).ok(),
            reader!("report", source).ok(),
        ] {
            assert!(!out.contains("snapshot taken by"), "{out}");
        }
        let json: serde_json::Value =
            serde_json::from_str(&reader!("report", source, "--json").ok()).unwrap();
        assert!(json.get("snapshot").is_none(), "{json}");
    }
}

#[test]
fn stats_shows_the_snapshot_counters_of_a_live_device() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = device(&dir);
    let stats = reader!("stats", &dir).ok();
    assert!(
        stats.lines().any(|l| l
            == "snapshots: 0 triggers (0 merged, 0 refused), 0 saved, 0 failed, 0 files removed"),
        "{stats}"
    );
    for (counter, n) in [
        (Counter::Triggers, 7),
        (Counter::Merged, 3),
        (Counter::Refused, 2),
        (Counter::Saved, 2),
        (Counter::Failed, 1),
        (Counter::Removed, 4),
    ] {
        dev.count_snapshots(counter, n);
    }
    let stats = reader!("stats", &dir).ok();
    assert!(
        stats.lines().any(|l| l
            == "snapshots: 7 triggers (3 merged, 2 refused), 2 saved, 1 failed, 4 files removed"),
        "{stats}"
    );
}
