//! Snapshots a program asks for: a thousand triggers in a second from two savers sharing
//! a device (as two processes do) keep the snapshot directory within its limits, and every
//! trigger is counted once in the device header, as merged or granted (some of those put
//! off to an interval after the last snapshot); one put off holds its moment. And a trigger
//! within an interval of the last snapshot is not left out: its snapshot, put off, holds it.

use std::time::Duration;
use ttrace_snapshots::{Asked, CauseKind, Policy, Saver, Store};

#[test]
fn a_thousand_triggers_in_a_second_stay_within_the_limits_and_are_counted_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let w: &'static ttrace_core::Writer = Box::leak(Box::new(
        ttrace_core::Writer::open(&ttrace_tests::config(&tmp.path().join("dev"), 4096, 2)).unwrap(),
    ));
    let tp = ttrace_tests::define(w, "work", "n={n}");
    let store = Store::new(tmp.path().join("snapshots"));
    let policy = Policy {
        after: Duration::from_millis(5),
        interval: Duration::from_millis(50),
        max_files: 4,
        max_bytes: 8 << 20,
        ..Policy::default()
    };
    // Two savers of one device: what two processes sharing it have.
    let savers = [
        Saver::new(w.device(), store.clone(), policy.clone()),
        Saver::new(w.device(), store.clone(), policy.clone()),
    ];
    let asked: Vec<Vec<Asked>> = std::thread::scope(|s| {
        let runs: Vec<_> = savers
            .iter()
            .map(|saver| {
                s.spawn(move || {
                    let ctx = w.context();
                    (0..500u64)
                        .map(|i| {
                            w.emit(tp, ctx, &[i]);
                            let asked = saver.trigger(CauseKind::Trigger, "load", w.now());
                            // Pacing, not ordering: 500 triggers over about half a second.
                            std::thread::sleep(Duration::from_millis(1));
                            asked
                        })
                        .collect()
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    savers.iter().for_each(Saver::settle);

    let of = |kind| asked.iter().flatten().filter(|&&a| a == kind).count() as u64;
    let (granted, merged, put_off) = (of(Asked::Granted), of(Asked::Merged), of(Asked::PutOff));
    assert_eq!(granted + merged + put_off, 1000, "{asked:?}");
    assert!(granted >= 1, "{granted} granted, {put_off} put off");
    let counts = w.device().reader().status().snapshots;
    assert_eq!(counts.triggers, 1000);
    assert_eq!(counts.merged, merged);
    assert_eq!(counts.put_off, put_off);
    assert_eq!(counts.saved + counts.failed, granted + put_off);
    assert_eq!(counts.failed, 0);

    let left = store.list().unwrap();
    let bytes: u64 = left.iter().map(|l| l.bytes).sum();
    assert!(left.len() <= 4, "{left:?}");
    assert!(bytes <= 8 << 20, "{bytes} bytes kept");
    assert_eq!(counts.removed, counts.saved - left.len() as u64);
    // Each kept file says why it was taken, and reads as a device.
    for l in &left {
        let r = devttrace::Reader::open(&l.path).unwrap();
        let cause = r.cause().expect("a triggered snapshot has a cause");
        assert_eq!(CauseKind::from_raw(cause.kind), CauseKind::Trigger);
        assert_eq!(cause.reason(), "load");
        assert_eq!(cause.pid, std::process::id());
        assert_eq!(cause.after_ns, 5_000_000);
        assert!(r.snapshot().unwrap().events() > 0);
    }
}

#[test]
fn a_save_at_once_takes_over_the_pending_snapshot_and_counts_each_trigger_once() {
    let tmp = tempfile::tempdir().unwrap();
    let w: &'static ttrace_core::Writer = Box::leak(Box::new(
        ttrace_core::Writer::open(&ttrace_tests::config(&tmp.path().join("dev"), 1024, 2)).unwrap(),
    ));
    let store = Store::new(tmp.path().join("snapshots"));
    // A window that never ends within the test: the trigger's snapshot stays pending.
    let policy = Policy {
        after: Duration::from_secs(3600),
        ..Policy::default()
    };
    let saver = Saver::new(w.device(), store.clone(), policy);
    assert_eq!(
        saver.trigger(CauseKind::Trigger, "slow", w.now()),
        Asked::Granted
    );
    assert_eq!(
        saver.trigger(CauseKind::Trigger, "slow", w.now()),
        Asked::Merged
    );
    // A panic's save: it covers the pending snapshot (the process may end before that
    // one's window does), which is merged into it.
    let info = saver
        .save_at_once(CauseKind::Panic, "boom", w.now())
        .unwrap();
    assert_eq!(
        info.cause.merged, 2,
        "the pending one and the trigger merged into it"
    );
    // Nothing left pending: settling does not wait for the hour.
    saver.settle();
    let counts = w.device().reader().status().snapshots;
    assert_eq!((counts.triggers, counts.merged, counts.put_off), (3, 2, 0));
    // Granted (triggers less merged): one, saved once.
    assert_eq!((counts.saved, counts.failed), (1, 0));
    let left = store.list().unwrap();
    assert_eq!(left.len(), 1, "{left:?}");
    let r = devttrace::Reader::open(&left[0].path).unwrap();
    let cause = r.cause().unwrap();
    assert_eq!(CauseKind::from_raw(cause.kind), CauseKind::Panic);
    assert_eq!((cause.reason(), cause.merged), ("boom", 2));
}

#[test]
fn a_trigger_sooner_than_the_interval_is_put_off_and_its_snapshot_holds_it() {
    let tmp = tempfile::tempdir().unwrap();
    let w: &'static ttrace_core::Writer = Box::leak(Box::new(
        ttrace_core::Writer::open(&ttrace_tests::config(&tmp.path().join("dev"), 1024, 2)).unwrap(),
    ));
    let tp = ttrace_tests::define(w, "request", "id={id}");
    let ctx = w.context();
    let store = Store::new(tmp.path().join("snapshots"));
    // An interval no test waits out: the second snapshot is due an hour after the first,
    // and settling copies it at once.
    let policy = Policy {
        after: Duration::ZERO,
        interval: Duration::from_secs(3600),
        ..Policy::default()
    };
    let saver = Saver::new(w.device(), store.clone(), policy);
    w.emit(tp, ctx, &[1]);
    let first = saver.trigger(CauseKind::Trigger, "slow 1", w.now());
    saver.settle();
    w.emit(tp, ctx, &[2]);
    let second = saver.trigger(CauseKind::Trigger, "slow 2", w.now());
    w.emit(tp, ctx, &[3]);
    let third = saver.trigger(CauseKind::Trigger, "slow 3", w.now());
    assert_eq!(
        (first, second, third),
        (Asked::Granted, Asked::PutOff, Asked::Merged)
    );
    saver.settle();
    let counts = w.device().reader().status().snapshots;
    assert_eq!(
        (counts.triggers, counts.merged, counts.put_off, counts.saved),
        (3, 1, 1, 2)
    );
    // The one put off holds both later requests; the first holds the first only.
    let left = store.list().unwrap();
    assert_eq!(left.len(), 2, "{left:?}");
    let ids = |p: &std::path::Path| -> Vec<u64> {
        let snap = devttrace::Reader::open(p).unwrap().snapshot().unwrap();
        let mut ids: Vec<u64> = snap
            .cpus
            .iter()
            .flat_map(|r| &r.events)
            .filter(|e| e.args().len() == 1)
            .map(|e| e.args()[0])
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(ids(&left[0].path), [1]);
    assert_eq!(ids(&left[1].path), [1, 2, 3]);
    let cause = *devttrace::Reader::open(&left[1].path)
        .unwrap()
        .cause()
        .unwrap();
    assert_eq!((cause.reason(), cause.merged), ("slow 2", 1));
}
