//! A follower's own copy of the rings (`devttrace::Shadow`, what `watch` saves): saved after
//! the device's rings have moved on, it holds what the rings held when the follower began
//! and what the follower read since — every event at its position, with its strings — and
//! counts lost only what the follower lost. Given a window, it holds more than the rings.

use devttrace::{Follower, Reader};
use std::path::Path;
use ttrace_layouts::snapshot::{Cause, CauseKind};

/// `dump`'s event lines of the device or snapshot at `path`.
fn lines(path: &Path) -> Vec<String> {
    let (lines, _) = ttrace_tests::typed::dumped(&Reader::open(path).unwrap());
    lines
}

/// `dump`'s footer of the device or snapshot at `path`.
fn footer(path: &Path) -> Vec<String> {
    let (_, footer) = ttrace_tests::typed::dumped(&Reader::open(path).unwrap());
    footer
}

/// The events of `write_pinned`'s writer of CPU `cpu`, `range` of them, as dump ends them.
fn written(cpu: usize, range: std::ops::Range<u64>) -> Vec<String> {
    range
        .flat_map(|i| {
            [
                format!("one(i={i})"),
                format!("five(a={i} b=0xff c=3 d=4 s=\"s{cpu}-{i}\")"),
            ]
        })
        .collect()
}

/// The texts of dump's event lines (what follows the thread).
fn texts(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .map(|l| {
            l.split_once(") ")
                .map_or(l.as_str(), |(_, t)| t)
                .to_string()
        })
        .collect()
}

/// A device of two 64-slot rings (32 events of two entries fill one) in a temporary
/// directory: the directory, the device's path and its writer.
fn device() -> (tempfile::TempDir, std::path::PathBuf, ttrace_core::Writer) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = ttrace_core::Writer::open(&ttrace_tests::config(&dir, 64, 2)).unwrap();
    (tmp, dir, dev)
}

/// An hour: a window that keeps every event of a test.
const HOUR_NS: u64 = 3_600_000_000_000;

#[test]
fn a_shadow_saved_after_the_rings_moved_on_holds_what_its_follower_read() {
    let (tmp, dir, dev) = device();
    ttrace_tests::write_pinned(&dev, 0, 0..4, false);
    // Following from here: the four events before are the device's past, in the copy too.
    let reader = Reader::open(&dir).unwrap();
    let mut follower = Follower::new(&reader);
    // No window: a ring's worth.
    follower.keep_copy(0, 0);
    ttrace_tests::write_pinned(&dev, 0, 4..20, false);
    follower.finish().unwrap();
    // The rings move on: three laps the follower never reads.
    ttrace_tests::write_pinned(&dev, 0, 20..116, false);
    let file = tmp.path().join("shadow.ttrace");
    let cause = Cause::new(CauseKind::Rule, "test");
    reader
        .save_shadow(&file, &cause, follower.copy().unwrap())
        .unwrap();
    // It holds exactly what the rings held and what the follower read, strings resolved;
    // the device now holds only the last lap.
    assert_eq!(texts(&lines(&file)), written(0, 0..20));
    assert_eq!(texts(&lines(&dir)), written(0, 84..116));
    // Nothing lost: the positions written since it last read are past its cut.
    let total = footer(&file).last().unwrap().clone();
    assert!(total.contains(" 0 entries lost,"), "{total}");
    assert!(total.starts_with("# 40 events"), "{total}");

    // What the follower lost, the copy counts lost: a follower that reads again now finds
    // the three laps gone but the last.
    follower.finish().unwrap();
    let file = tmp.path().join("behind.ttrace");
    reader
        .save_shadow(&file, &cause, follower.copy().unwrap())
        .unwrap();
    assert_eq!(texts(&lines(&file)), written(0, 84..116));
    // The follower lost the laps between its reads; the copy, as a ring does, counts every
    // position it no longer holds: all but the last lap's 64.
    assert_eq!(
        follower.totals().iter().map(|t| t.counts.lost).sum::<u64>(),
        2 * (84 - 20),
        "the follower's own count"
    );
    let total = footer(&file).last().unwrap().clone();
    assert!(
        total.contains(&format!(" {} entries lost,", 2 * 116 - 64)),
        "{total}"
    );
}

#[test]
fn a_shadow_of_another_device_shape_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    drop(ttrace_core::Writer::open(&ttrace_tests::config(&a, 64, 2)).unwrap());
    drop(ttrace_core::Writer::open(&ttrace_tests::config(&b, 64, 1)).unwrap());
    let (ra, rb) = (Reader::open(&a).unwrap(), Reader::open(&b).unwrap());
    let mut follower = Follower::new(&ra);
    follower.keep_copy(0, 0);
    let refused = rb.save_shadow(
        tmp.path().join("x.ttrace"),
        &Cause::new(CauseKind::Rule, "test"),
        follower.copy().unwrap(),
    );
    assert!(refused.is_err());
}

/// Events the follower read and still holds for its reorder window (a device recording
/// context switches holds every event a window) are in the copy too: saved then, it counts
/// none of their positions lost.
#[test]
fn a_shadow_holds_the_events_its_follower_still_holds() {
    let (tmp, dir, dev) = device();
    // Switches recorded: the follower's watermark stays a window (an hour here) behind.
    let header = dev.device().mapping().header();
    header
        .switch_threads
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let reader = Reader::open(&dir).unwrap();
    let mut follower = Follower::with_window(&reader, HOUR_NS);
    follower.keep_copy(0, 0);
    ttrace_tests::write_pinned(&dev, 0, 0..10, false);
    let poll = follower.poll().unwrap();
    let released: usize = poll.snapshot.cpus.iter().map(|r| r.events.len()).sum();
    assert_eq!(released, 0, "every event read is held");
    let file = tmp.path().join("held.ttrace");
    reader
        .save_shadow(
            &file,
            &Cause::new(CauseKind::Rule, "test"),
            follower.copy().unwrap(),
        )
        .unwrap();
    assert_eq!(texts(&lines(&file)), written(0, 0..10));
    let total = footer(&file).last().unwrap().clone();
    assert!(total.starts_with("# 20 events"), "{total}");
    assert!(total.contains(" 0 entries lost,"), "{total}");
}

/// Given a window longer than the rings hold, the copy grows to hold it: saved, it holds
/// every event its follower read, where the device's rings hold the last 32; with no
/// memory to grow, it holds a ring's worth, as the device does, and what is left of its
/// oldest chunk (here of 64 positions: 80 positions).
#[test]
fn a_copy_with_a_window_holds_more_than_the_rings() {
    let (tmp, dir, dev) = device();
    ttrace_tests::write_pinned(&dev, 0, 0..4, false);
    let reader = Reader::open(&dir).unwrap();
    // An hour's window, in 1 MiB beyond the rings; another copy with none to grow in.
    let mut follower = Follower::new(&reader);
    follower.keep_copy(HOUR_NS, 1 << 20);
    let mut tight = Follower::new(&reader);
    tight.keep_copy(HOUR_NS, 0);
    // Read every 16 events (32 entries, half a ring): the followers lose nothing.
    for from in (4..100).step_by(16) {
        ttrace_tests::write_pinned(&dev, 0, from..from + 16, false);
        follower.poll().unwrap();
        tight.poll().unwrap();
    }
    let cause = Cause::new(CauseKind::Rule, "test");
    let (file, small) = (
        tmp.path().join("window.ttrace"),
        tmp.path().join("ring.ttrace"),
    );
    let copy = follower.copy().unwrap();
    // 208 positions: the copy doubled twice.
    assert_eq!(copy.slots(), 256);
    reader.save_shadow(&file, &cause, copy).unwrap();
    reader
        .save_shadow(&small, &cause, tight.copy().unwrap())
        .unwrap();
    assert_eq!(texts(&lines(&dir)), written(0, 68..100));
    assert_eq!(texts(&lines(&small)), written(0, 64..100));
    // Every event, whole, in order, with its strings (this device's aux buffer holds them
    // all), and nothing lost.
    assert_eq!(texts(&lines(&file)), written(0, 0..100));
    let total = footer(&file).last().unwrap().clone();
    assert!(total.starts_with("# 200 events"), "{total}");
    assert!(total.contains(" 0 entries lost,"), "{total}");
}

/// A copy saved for a moment before its follower lost entries holds the run of events
/// before the loss (which holds the moment), not the one after it: a watcher that fell
/// behind after a match still saves the match.
#[test]
fn a_copy_for_a_moment_before_a_loss_holds_the_events_before_it() {
    let (tmp, dir, dev) = device();
    let reader = Reader::open(&dir).unwrap();
    let mut follower = Follower::new(&reader);
    follower.keep_copy(HOUR_NS, 1 << 20);
    ttrace_tests::write_pinned(&dev, 0, 0..20, false);
    follower.poll().unwrap();
    // The moment, after the 20 events read; then 80 more, unread until the ring lapped.
    let moment = reader.now();
    ttrace_tests::write_pinned(&dev, 0, 20..100, false);
    let poll = follower.poll().unwrap();
    assert_eq!(
        poll.lost[0],
        2 * (68 - 20),
        "the follower lost the laps between its reads"
    );
    let cause = Cause::new(CauseKind::Rule, "test");
    let (around, after) = (
        tmp.path().join("around.ttrace"),
        tmp.path().join("after.ttrace"),
    );
    let copy = follower.copy_around(moment).unwrap();
    reader.save_shadow(&around, &cause, copy).unwrap();
    assert_eq!(texts(&lines(&around)), written(0, 0..20));
    let total = footer(&around).last().unwrap().clone();
    assert!(total.starts_with("# 40 events"), "{total}");
    assert!(total.contains(" 0 entries lost,"), "{total}");
    // For no moment, or one after the loss, the events since the loss.
    reader
        .save_shadow(&after, &cause, follower.copy().unwrap())
        .unwrap();
    assert_eq!(texts(&lines(&after)), written(0, 68..100));
    let later = reader.now();
    reader
        .save_shadow(&after, &cause, follower.copy_around(later).unwrap())
        .unwrap();
    assert_eq!(texts(&lines(&after)), written(0, 68..100));
}

/// A moment kept (a match granted a snapshot, `Follower::keep_moment`) stays in the copy
/// through later losses: a copy that was not told of it keeps only the run before the last
/// loss, which began after the moment.
#[test]
fn a_moment_kept_stays_through_later_losses() {
    let (tmp, dir, dev) = device();
    let reader = Reader::open(&dir).unwrap();
    let (mut told, mut untold) = (Follower::new(&reader), Follower::new(&reader));
    for f in [&mut told, &mut untold] {
        f.keep_copy(HOUR_NS, 1 << 20);
    }
    ttrace_tests::write_pinned(&dev, 0, 0..20, false);
    told.poll().unwrap();
    untold.poll().unwrap();
    let moment = reader.now();
    told.keep_moment(Some(moment));
    // Two losses: each batch laps the ring before the followers read.
    for batch in [20..100, 100..180] {
        ttrace_tests::write_pinned(&dev, 0, batch, false);
        assert!(told.poll().unwrap().lost[0] > 0);
        assert!(untold.poll().unwrap().lost[0] > 0);
    }
    let cause = Cause::new(CauseKind::Rule, "test");
    let file = tmp.path().join("moment.ttrace");
    reader
        .save_shadow(&file, &cause, told.copy_around(moment).unwrap())
        .unwrap();
    assert_eq!(texts(&lines(&file)), written(0, 0..20));
    reader
        .save_shadow(&file, &cause, untold.copy_around(moment).unwrap())
        .unwrap();
    assert_eq!(texts(&lines(&file)), written(0, 68..100));
}
