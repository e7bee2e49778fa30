//! Snapshots taken by programs, read back: every reader says which trigger made a snapshot
//! file, `stats` shows the device's snapshot counters.

use devttrace::{Counter, Reader};
use std::path::Path;
use ttrace_core::{Config, Writer};
use ttrace_layouts::device::ClockSource;
use ttrace_layouts::snapshot::{Cause, CauseKind};
use ttrace_tests::reader;

/// A device on the nanosecond clock, with a few `step(n=..)` events.
fn device(dir: &Path) -> Writer {
    let dev = Writer::open(&Config {
        clock: Some(ClockSource::MonotonicNs),
        ..ttrace_tests::config(dir, 64, 2)
    })
    .unwrap();
    let word = ttrace_tests::define(&dev, "step", "n={n}");
    dev.device().note_thread(1, 2, "worker").unwrap();
    for n in 0..5 {
        dev.emit(word, 1 << 32 | 2, &[n]);
    }
    dev
}

/// The cause of a trigger "slow request" by pid 4242, 12.345678901 s after the device of
/// `dev` was created, with a window of 1 s before and 5 ms after, and 2 triggers merged.
fn slow_request(dev: &Writer) -> Cause {
    let mut cause = Cause::new(CauseKind::Trigger, "slow request");
    cause.pid = 4242;
    cause.trigger_stamp = dev.device().reader().version().clock.anchor_ticks + 12_345_678_901;
    cause.before_ns = 1_000_000_000;
    cause.after_ns = 5_000_000;
    cause.merged = 2;
    cause
}

/// The line every reader shows of [`slow_request`]'s snapshot of `dev`: what it holds is
/// whole from the device's creation (no ring lost an entry), its last event (written just
/// after the device was created) 12.3 s before the trigger.
fn slow_request_line(dev: &Writer) -> String {
    let clock = dev.device().reader().version().clock;
    let utc = ttrace_reader::decode::utc(clock.anchor_realtime_ns + 12_345_678_901);
    let snap = devttrace::Reader::open(dev.device().reader().dir())
        .unwrap()
        .snapshot()
        .unwrap();
    let last = snap
        .cpus
        .iter()
        .flat_map(|r| &r.events)
        .map(|e| e.stamp)
        .max()
        .unwrap();
    let before = 12_345_678_901 - clock.since_anchor_ns(last) as u64;
    format!(
        "snapshot taken by trigger \"slow request\" (pid 4242) at 12.345678901 ({utc}); holds \
         {} before it (from the device's start), its last event {} before; 2 more triggers \
         merged",
        ttrace_reader::rules::approx(12_345_678_901),
        ttrace_reader::rules::approx(before)
    )
}

#[test]
fn every_reader_says_which_trigger_took_a_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = device(&tmp.path().join("dev"));
    let file = tmp.path().join("slow.ttrace");
    dev.device()
        .reader()
        .save_because(&file, &slow_request(&dev))
        .unwrap();
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
        ttrace_reader::decode::utc(
            dev.device().reader().version().clock.anchor_realtime_ns + 12_345_678_901
        )
    );
    assert_eq!(taken["before_ns"], 1_000_000_000u64);
    assert_eq!(taken["after_ns"], 5_000_000u64);
    assert_eq!(taken["merged"], 2);

    let chrome = tmp.path().join("trace.json");
    reader!("export", "--format", "chrome", &file, "-o", &chrome).ok();
    let chrome: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&chrome).unwrap()).unwrap();
    // The Chrome export's copy of the cause.
    for key in [
        "kind",
        "reason",
        "pid",
        "at",
        "at_utc",
        "before_ns",
        "after_ns",
        "merged",
        "held_before_ns",
        "last_event_after_ns",
        "interval_whole",
        "summary",
    ] {
        assert_eq!(chrome["otherData"]["snapshot"][key], taken[key], "{key}");
    }
    // What the snapshot holds around its trigger, as `report` says it.
    assert!(taken["held_before_ns"].is_u64(), "{taken}");
}

#[test]
fn a_device_and_a_snapshot_asked_for_say_nothing_of_a_trigger() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = device(&dir);
    let file = tmp.path().join("asked.ttrace");
    dev.device().reader().save(&file).unwrap();
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
            == "snapshots: 0 triggers (0 merged, 0 put off), 0 saved, 0 failed, 0 files removed"),
        "{stats}"
    );
    for (counter, n) in [
        (Counter::Triggers, 7),
        (Counter::Merged, 3),
        (Counter::PutOff, 2),
        (Counter::Saved, 2),
        (Counter::Failed, 1),
        (Counter::Removed, 4),
    ] {
        dev.device().count_snapshots(counter, n);
    }
    let stats = reader!("stats", &dir).ok();
    assert!(
        stats.lines().any(|l| l
            == "snapshots: 7 triggers (3 merged, 2 put off), 2 saved, 1 failed, 4 files removed"),
        "{stats}"
    );
}

/// A snapshot directory holding, oldest first: a trigger's snapshot of `dev`, one the
/// program saved, and a file named like a snapshot that is none; and a file of another name.
fn directory(dev: &Writer, dir: &Path) -> Vec<std::path::PathBuf> {
    let store = ttrace_reader::store::Store::new(dir);
    // 2026-11-24 10:15:12.345 UTC, then a second later.
    let t = 1_795_515_312_345_000_000;
    let slow = store
        .path_for(t, CauseKind::Trigger, "slow request", 4242)
        .unwrap();
    dev.device()
        .reader()
        .save_because(&slow, &slow_request(dev))
        .unwrap();
    let saved = store
        .path_for(t + 1_000_000_000, CauseKind::Saved, "by hand", 4242)
        .unwrap();
    dev.device()
        .reader()
        .save_because(&saved, &Cause::new(CauseKind::Saved, "by hand"))
        .unwrap();
    let bad = store
        .path_for(t + 2_000_000_000, CauseKind::Trigger, "bad", 1)
        .unwrap();
    std::fs::write(&bad, b"not a snapshot").unwrap();
    std::fs::write(dir.join("notes.txt"), b"not listed").unwrap();
    vec![slow, saved, bad]
}

fn file_name(p: &Path) -> &str {
    p.file_name().unwrap().to_str().unwrap()
}

#[test]
fn snapshots_lists_a_directory_oldest_first_with_why_and_what() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = device(&tmp.path().join("dev"));
    let dir = tmp.path().join("snaps");
    let files = directory(&dev, &dir);
    let out = reader!("snapshots", &dir).ok();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    let bytes = |p: &Path| std::fs::metadata(p).unwrap().len();
    assert!(
        lines[0].contains(&format!(
            "  trigger \"slow request\"  {} bytes  5 events  window ",
            bytes(&files[0])
        )) && lines[0].ends_with(&format!(" s  2 merged  {}", file_name(&files[0]))),
        "{out}"
    );
    assert!(
        lines[1].contains(&format!(
            "  saved \"by hand\"  {} bytes  5 events  ",
            bytes(&files[1])
        )) && lines[1].ends_with(&format!("  0 merged  {}", file_name(&files[1]))),
        "{out}"
    );
    assert!(
        lines[2].starts_with(&format!("{}: cannot be read: ", file_name(&files[2]))),
        "{out}"
    );

    let json: serde_json::Value =
        serde_json::from_str(&reader!("snapshots", &dir, "--json").ok()).unwrap();
    let all = json.as_array().unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(all[0]["file"], file_name(&files[0]));
    assert_eq!(all[0]["kind"], "trigger");
    assert_eq!(all[0]["reason"], "slow request");
    assert_eq!(all[0]["events"], 5);
    assert_eq!(all[0]["merged"], 2);
    assert_eq!(all[0]["bytes"], bytes(&files[0]));
    assert_eq!(all[0]["snapshot"]["summary"], slow_request_line(&dev));
    assert_eq!(all[1]["kind"], "saved");
    assert!(all[2]["error"].as_str().is_some(), "{json}");
}

#[test]
fn snapshots_finds_the_directory_of_a_device_or_says_there_is_none() {
    let tmp = tempfile::tempdir().unwrap();
    let dev_dir = tmp.path().join("dev");
    let dev = device(&dev_dir);
    let beside = tmp.path().join("dev.snapshots");
    let files = directory(&dev, &beside);
    let out = reader!("snapshots", "--device", &dev_dir)
        .env("TTRACE_SNAPSHOT_DIR", "")
        .ok();
    assert!(out.contains(file_name(&files[0])), "{out}");
    let out = reader!("snapshots")
        .env("TTRACE_SNAPSHOT_DIR", &beside)
        .ok();
    assert_eq!(out.lines().count(), 3, "{out}");
    let missing = tmp.path().join("none");
    let err = reader!("snapshots", &missing).fails();
    assert_eq!(
        err.trim(),
        format!(
            "ttrace-reader: {}: no snapshot directory here (no snapshot was saved yet?)",
            missing.display()
        )
    );
}
