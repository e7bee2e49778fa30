//! The device interface: what a reader gets from `devttrace` for a device written elsewhere.

use devttrace::{Error, Follower, Problem, Reader};
use ttrace_layouts::aux::AuxTag;
use ttrace_layouts::entry::TypeWord;

fn writer(dir: &std::path::Path, slots: u64) -> ttrace_core::Writer {
    ttrace_core::Writer::open(&ttrace_tests::config(dir, slots, 2)).unwrap()
}

fn define(dev: &ttrace_core::Writer, name: &'static str) -> u64 {
    ttrace_tests::define(dev, name, "n={n}")
}

/// Writes `n` (and `pid << 32 | 1`) into ring `ring` directly, `ticks` after the device
/// was created (a time in its life), from the ring's CPU.
fn put(dev: &ttrace_core::Writer, ring: usize, word: u64, ticks: u64, n: u64) {
    let cpu = ring as u32 % dev.device().mapping().num_cpus();
    dev.device()
        .mapping()
        .ring(ring)
        .write(
            at(dev, ticks),
            7,
            &[TypeWord(word).with_cpu(cpu).0, 7 << 32 | 1, n, 0, 0, 0, 0],
        )
        .unwrap();
}

/// The time `ticks` after the device was created.
fn at(dev: &ttrace_core::Writer, ticks: u64) -> u64 {
    dev.device().mapping().header().anchor_tsc + ticks
}

#[test]
fn version_is_the_header_as_a_value() {
    let tmp = tempfile::tempdir().unwrap();
    let w = writer(&tmp.path().join("dev"), 64);
    let dev = Reader::open(w.device().reader().dir()).unwrap();
    let v = dev.version();
    assert_eq!((v.num_cpus, v.ring_slots), (2, 64));
    assert_eq!(v.header_version, ttrace_layouts::device::HEADER_VERSION);
    assert_eq!(v.aux_size, w.device().mapping().header().aux_size);
    assert_eq!(v.creator_pid, std::process::id());
    assert_eq!(v.clock.hz, w.device().mapping().header().tsc_hz);
    // The anchor converts back to the creation time.
    assert_eq!(
        v.clock.realtime_ns(v.clock.anchor_ticks),
        w.device().mapping().header().anchor_realtime_ns
    );
}

#[test]
fn cpu_snapshots_are_time_ordered_counted_and_filterable() {
    let tmp = tempfile::tempdir().unwrap();
    let w = writer(&tmp.path().join("dev"), 8);
    let word = define(&w, "n");
    // Ring 0: 12 entries into 8 slots, timestamps out of position order at the end.
    for i in 0..10 {
        put(&w, 0, word, 1000 + 10 * i, i);
    }
    put(&w, 0, word, 1200, 11);
    put(&w, 0, word, 1150, 10);
    let dev = Reader::open(w.device().reader().dir()).unwrap();
    let s = dev.cpu(0).unwrap();
    let ns: Vec<u64> = s.events.iter().map(|e| e.args()[0]).collect();
    assert_eq!(
        ns,
        vec![4, 5, 6, 7, 8, 9, 10, 11],
        "oldest 4 overwritten; sorted by time"
    );
    assert_eq!((s.head, s.committed, s.lost, s.claimed), (12, 8, 4, 0));
    let newer = dev.cpu_newer_than(0, at(&w, 1080)).unwrap();
    assert_eq!(
        newer.events.iter().map(|e| e.args()[0]).collect::<Vec<_>>(),
        vec![9, 10, 11]
    );
    assert_eq!(
        (newer.older, newer.lost),
        (5, 4),
        "counts describe the whole ring"
    );
    assert!(dev.cpu(1).unwrap().events.is_empty());
    assert!(matches!(
        dev.cpu(4),
        Err(Error::NoSuchCpu { cpu: 4, rings: 4 }),
    ));
}

#[test]
fn aux_and_metadata_come_with_the_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let w = writer(&tmp.path().join("dev"), 64);
    let word = define(&w, "str");
    w.device().note_thread(7, 1, "the-thread").unwrap();
    w.device().note_process(7, "the-process").unwrap();
    let off = w
        .aux_write(AuxTag::String, 7 << 32 | 1, b"hello aux")
        .unwrap();
    w.emit(word, 7 << 32 | 1, &[off]);
    let snap = Reader::open(w.device().reader().dir())
        .unwrap()
        .snapshot()
        .unwrap();
    assert_eq!(snap.events(), 1);
    let e = snap.cpus.iter().flat_map(|c| &c.events).next().unwrap();
    let rec = snap.aux.get(e.args()[0]).unwrap();
    assert_eq!(rec.bytes, b"hello aux");
    assert_eq!(rec.timestamp, 0, "a string is timed by its entry");
    // Counted by a shared ring's buffer (a restartable one cannot keep that count).
    let (buffer, _) = ttrace_layouts::aux::aux_ref_parts(off).unwrap();
    assert_eq!(snap.status.aux_records, u64::from(buffer >= 2));
    assert_eq!(snap.meta.tracepoints[0].name, "str");
    assert_eq!(snap.meta.thread_name(7, 1), Some("the-thread"));
    assert_eq!(snap.meta.process_name(7), Some("the-process"));
    assert_eq!(snap.enabled, vec![true]);
    assert_eq!(snap.status.tracepoints, 1);
}

#[test]
fn ctl_needs_control_access_and_rejects_malformed_commands() {
    let tmp = tempfile::tempdir().unwrap();
    let w = writer(&tmp.path().join("dev"), 64);
    define(&w, "alpha");
    define(&w, "beta");
    // A reader cannot change the device: it has no control methods at all (a
    // `compile_fail` example on `devttrace::Reader` checks that it does not build).
    let ro = Reader::open(w.device().reader().dir()).unwrap();
    let ctl = devttrace::Device::attach(w.device().reader().dir()).unwrap();
    assert_eq!(ctl.apply_text("disable a*").unwrap(), 1, "beta is still on");
    assert!(
        !ro.enabled(0) && ro.enabled(1),
        "the read-only view sees the change"
    );
    for bad in ["", "setmask 1", "setbits x", "enable", "frob 1"] {
        assert!(
            matches!(ctl.apply_text(bad), Err(Error::BadCommand(_))),
            "{bad:?}"
        );
    }
    assert_eq!(
        ctl.reader().ctl(),
        "setmask 0xffffffffffffffff 0xffffffffffffffff\ndisable a*\n"
    );
    assert_eq!(ctl.apply_text("setmask 0 1").unwrap(), 0);
    assert_eq!(ro.status().mask, !1);
}

#[test]
fn opening_reports_what_is_wrong_with_which_file() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nothing");
    assert!(matches!(Reader::open(&missing), Err(Error::Missing(p)) if p == missing));
    let w = writer(&tmp.path().join("dev"), 64);
    std::fs::OpenOptions::new()
        .write(true)
        .open(w.device().reader().dir().join("aux"))
        .unwrap()
        .set_len(10)
        .unwrap();
    match Reader::open(w.device().reader().dir()) {
        Err(Error::Invalid { path, problem }) => {
            assert_eq!(path, w.device().reader().dir().join("aux"));
            assert!(matches!(problem, Problem::Length { found: 10, .. }));
        }
        other => panic!("{:?}", other.err()),
    }
}

#[test]
fn the_follower_reports_each_event_once_and_counts_what_it_missed() {
    let tmp = tempfile::tempdir().unwrap();
    let w = writer(&tmp.path().join("dev"), 64);
    let word = define(&w, "n");
    put(&w, 0, word, 10, 0);
    let dev = Reader::open(w.device().reader().dir()).unwrap();
    let mut f = Follower::new(&dev);
    let p = f.poll().unwrap();
    assert_eq!(
        (p.snapshot.events(), p.lost.clone()),
        (0, vec![0; 4]),
        "the baseline is not new"
    );
    for n in 1..=10 {
        put(&w, 1, word, 100 + n, n);
    }
    let p = f.poll().unwrap();
    let got: Vec<u64> = p.snapshot.cpus[1]
        .events
        .iter()
        .map(|e| e.args()[0])
        .collect();
    assert_eq!(got, (1..=10).collect::<Vec<_>>());
    // 200 entries between two polls on 64-slot ring 0: 136 were overwritten unseen, and the
    // poll that finds them says so.
    for n in 0..200 {
        put(&w, 0, word, 1000 + n, n);
    }
    let p = f.poll().unwrap();
    assert_eq!(p.snapshot.cpus[0].events.len(), 64);
    assert_eq!(p.lost, vec![136, 0, 0, 0]);
    let p = f.poll().unwrap();
    assert_eq!(
        (p.snapshot.events(), p.lost, p.active),
        (0, vec![0; 4], false),
        "nothing is repeated, and the loss is reported once"
    );
}

#[test]
fn a_view_is_a_copy_that_writers_cannot_change() {
    let tmp = tempfile::tempdir().unwrap();
    let w = writer(&tmp.path().join("dev"), 8);
    let word = define(&w, "n");
    for n in 0..8 {
        put(&w, 0, word, 100 + n, n);
    }
    let dev = Reader::open(w.device().reader().dir()).unwrap();
    let view = devttrace::View::of(&dev, 0).unwrap();
    assert_eq!(view.cpus[0].events.len(), 8);
    // Three entries overwrite the three oldest after the view was taken: the view copied
    // the ring, so it still holds all eight, and never the newer entries.
    for n in 8..11 {
        put(&w, 0, word, 100 + n, n);
    }
    let got: Vec<u64> = view.events(0).map(|e| e.args()[0]).collect();
    assert_eq!(got, (0..8).collect::<Vec<u64>>());
    assert_eq!(view.cpus[0].lost, 0);
}

/// A copy that a writer overtakes (it writes more, between two chunks of the copy, than the
/// copy has ahead of it): what it shows is exactly the entries it reached before they were
/// overwritten, oldest first with the hole where the writer passed it, and every position is
/// counted: shown, lost (overwritten before the copy reached it) or written while reading.
#[test]
fn a_copy_overtaken_by_a_writer_shows_what_it_reached_and_counts_the_rest() {
    const N: u64 = 16_384;
    let tmp = tempfile::tempdir().unwrap();
    let w = writer(&tmp.path().join("dev"), N);
    let word = define(&w, "n");
    // Two laps: the ring holds positions N .. 2N, the oldest in slot 0.
    for n in 0..2 * N {
        put(&w, 0, word, 100 + n, n);
    }
    let dev = Reader::open(w.device().reader().dir()).unwrap();
    let ring = dev.ring(0).unwrap();
    let mut calls = 0;
    // After the first chunk (4,096 slots) is copied, the writer writes 8,192 more: over
    // the 4,096 slots copied, then over the next 4,096, which the copy has not reached.
    let copy = devttrace::RingCopy::of(&ring, |_| {
        calls += 1;
        if calls == 1 {
            for n in 2 * N..2 * N + 8192 {
                put(&w, 0, word, 100 + n, n);
            }
        }
    });
    let keep = devttrace::Keep::newer_than(0, devttrace::clear::Cleared::default());
    let snap = copy.walk::<devttrace::Event>(&keep);
    let shown: Vec<u64> = snap.events.iter().map(|e| e.args()[0]).collect();
    let expected: Vec<u64> = (N..N + 4096).chain(N + 8192..2 * N).collect();
    assert_eq!(shown, expected);
    assert_eq!(snap.head, 2 * N, "the cut: the head before the copy");
    assert_eq!(
        snap.after_cut, 8192,
        "written while reading: every position since the cut"
    );
    assert_eq!(
        snap.lost,
        N + 4096,
        "the first lap, and what the writer passed"
    );
    assert_eq!(
        snap.head,
        snap.skipped + snap.committed + snap.claimed + snap.lost + snap.damaged
    );
}

#[test]
fn a_follower_started_during_writes_reports_no_false_losses() {
    const N: u64 = 40_000;
    let tmp = tempfile::tempdir().unwrap();
    let w = writer(&tmp.path().join("dev"), 1 << 16);
    let word = define(&w, "n");
    let dev = Reader::open(w.device().reader().dir()).unwrap();
    let (started, wait_started) = std::sync::mpsc::channel();
    let (following, wait_following) = std::sync::mpsc::channel();
    let mut reported = Vec::new();
    let mut lost = 0;
    std::thread::scope(|s| {
        let w = &w;
        let writing = s.spawn(move || {
            // The first half races with the follower's first scan...
            for n in 0..N / 2 {
                if n == N / 20 {
                    started.send(()).unwrap();
                }
                put(w, 0, word, 1000 + n, n);
            }
            // ...the second is written once it follows.
            wait_following.recv().unwrap();
            for n in N / 2..N {
                put(w, 0, word, 1000 + n, n);
            }
        });
        wait_started.recv().unwrap();
        let mut f = Follower::new(&dev);
        following.send(()).unwrap();
        // Poll while the writer runs, then twice more once it is done.
        let mut after = 0;
        while after < 2 {
            if writing.is_finished() {
                after += 1;
            }
            let p = f.poll().unwrap();
            lost += p.lost.iter().sum::<u64>();
            reported.extend(p.snapshot.cpus[0].events.iter().map(|e| e.args()[0]));
        }
    });
    assert_eq!(
        lost, 0,
        "the ring never wrapped: nothing can have been lost"
    );
    let distinct: std::collections::BTreeSet<u64> = reported.iter().copied().collect();
    assert_eq!(distinct.len(), reported.len(), "nothing reported twice");
    assert!(
        (N / 2..N).all(|n| distinct.contains(&n)),
        "every event written after following began is reported"
    );
}

#[test]
fn the_follower_releases_events_in_time_order_while_writers_migrate() {
    // Four threads move between the CPUs every 250 events while a follower polls: three
    // write restartably, one through the shared rings. Every event comes out once; each
    // thread's in the order it wrote them; all in time order but those counted late.
    let tmp = tempfile::tempdir().unwrap();
    let w = std::sync::Arc::new(writer(&tmp.path().join("dev"), 1 << 14));
    let word = define(&w, "seq");
    let dev = Reader::open(w.device().reader().dir()).unwrap();
    let mut f = Follower::with_window(&dev, 20_000_000);
    const EACH: u64 = 3000;
    let writers: Vec<_> = (0..4u64)
        .map(|k| {
            let w = w.clone();
            std::thread::spawn(move || {
                let ctx = 7 << 32 | k;
                for i in 0..EACH {
                    if i % 250 == 0 {
                        ttrace_tests::pin((k + i / 250) as usize);
                    }
                    match k {
                        3 => assert!(w.emit_shared(word, ctx, &[i])),
                        _ => assert!(w.emit(word, ctx, &[i])),
                    }
                }
            })
        })
        .collect();
    let mut got: Vec<(u64, u64, u64)> = Vec::new();
    let (mut late, mut counted_late) = (0, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut done = false;
    while got.len() < 4 * EACH as usize {
        assert!(std::time::Instant::now() < deadline, "{} events", got.len());
        done |= writers.iter().all(|t| t.is_finished());
        let p = f.poll().unwrap();
        assert_eq!(p.lost.iter().sum::<u64>(), 0);
        let mut batch: Vec<(u64, u64, u64)> = p
            .snapshot
            .cpus
            .iter()
            .flat_map(|c| c.events.iter().map(|e| (e.stamp, e.ctx, e.args()[0])))
            .collect();
        batch.sort_unstable();
        for &(stamp, ..) in &batch {
            if stamp < p.released_before {
                late += 1;
            } else {
                let last = got.iter().map(|g| g.0).max().unwrap_or(0);
                assert!(stamp >= last, "released out of time order");
            }
        }
        counted_late += p.late;
        got.extend(batch);
        if done && !p.active {
            break;
        }
    }
    for t in writers {
        t.join().unwrap();
    }
    assert_eq!(late, counted_late);
    assert_eq!(got.len(), 4 * EACH as usize, "every event, once");
    for k in 0..4u64 {
        let seqs: Vec<u64> = got
            .iter()
            .filter(|g| g.1 == 7 << 32 | k)
            .map(|g| g.2)
            .collect();
        assert_eq!(seqs, (0..EACH).collect::<Vec<_>>(), "thread {k} in order");
    }
}

#[test]
fn a_stalled_writer_holds_later_events_for_the_window_then_comes_out_late() {
    use std::sync::atomic::Ordering::{Relaxed, Release};
    use ttrace_layouts::entry::Stamp;
    let tmp = tempfile::tempdir().unwrap();
    let w = writer(&tmp.path().join("dev"), 64);
    let word = define(&w, "n");
    let dev = Reader::open(w.device().reader().dir()).unwrap();
    let window = std::time::Duration::from_millis(5);
    let mut f = Follower::with_window(&dev, window.as_nanos() as u64);
    // The same, with a window of an hour: what holds an event, with no time passing that
    // could release it (a preemption longer than 5 ms would, for `f`).
    let mut g = Follower::with_window(&dev, 3_600_000_000_000);
    // The window in the device's ticks, as the follower counts it.
    let window_ticks = dev.version().clock.ns_to_ticks(window.as_nanos() as u64);
    // A writer of CPU 0's shared ring takes its time, reserves its position, and stalls.
    let map = w.device().mapping();
    let ring = map.shared_ring(0);
    let t0 = w.now();
    let pos = map
        .ring_header(map.shared_ring_index(0))
        .head
        .fetch_add(1, Relaxed);
    // A later event, on CPU 1's shared ring, waits for it...
    let t1 = w.now();
    let tw = TypeWord(word).with_cpu(1).0;
    w.device()
        .mapping()
        .shared_ring(1)
        .write(t1, 7, &[tw, 7 << 32 | 2, 1, 0, 0, 0, 0])
        .unwrap();
    let p = g.poll().unwrap();
    assert_eq!(
        p.snapshot.events(),
        0,
        "held: an older event may still come"
    );
    assert!(p.active);
    // ... for the window, no longer: a poll that began a window after it was stamped
    // releases it; one that ended before did not.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let released = loop {
        let began = w.now();
        let p = f.poll().unwrap();
        let ended = w.now();
        if p.snapshot.events() > 0 {
            assert!(
                ended.saturating_sub(t1) >= window_ticks,
                "released before the window passed"
            );
            break p;
        }
        assert!(
            began.saturating_sub(t1) < window_ticks,
            "held after the window passed"
        );
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    assert_eq!(released.late, 0);
    // The stalled writer commits its older event: out at once, marked late.
    let slot = &ring.slots()[(pos & 63) as usize].words;
    slot[0].store(Stamp::claim(7, pos).0, Relaxed);
    let entry = [
        TypeWord(word).with_cpu(0).with_position(pos).0,
        7 << 32 | 1,
        0,
    ];
    for (k, v) in entry.into_iter().enumerate() {
        slot[1 + k].store(v, Relaxed);
    }
    slot[0].store(Stamp::next_after(t0, Stamp::EMPTY).0, Release);
    let p = f.poll().unwrap();
    let e = &p.snapshot.cpus[2].events; // cpu0.shared
    assert_eq!((e.len(), p.late), (1, 1), "{:?}", p.snapshot.cpus);
    assert!(e[0].stamp < p.released_before);
    assert_eq!(e[0].args(), [0]);
}

#[test]
fn where_switches_are_recorded_a_late_switch_is_held_in_order_not_late() {
    use std::sync::atomic::Ordering::Relaxed;
    let tmp = tempfile::tempdir().unwrap();
    let w = writer(&tmp.path().join("dev"), 64);
    let word = define(&w, "n");
    // A writer of the device records context switches (`ttrace_core::switches`): they
    // arrive a drain period after they happened.
    w.device()
        .mapping()
        .header()
        .switch_threads
        .store(1, Relaxed);
    let dev = Reader::open(w.device().reader().dir()).unwrap();
    // A window of an hour: no time passing in this test can release what it holds.
    let mut f = Follower::with_window(&dev, 3_600_000_000_000);
    // Even: a committed entry's stamp has bit 0 clear.
    let t_switch = w.now() & !1;
    let t_event = (w.now() | 1) + 1;
    let tw = |cpu| TypeWord(word).with_cpu(cpu).0;
    // An event committed now, with no position still being written anywhere: held all the
    // same, since a switch older than it may still come...
    w.device()
        .mapping()
        .shared_ring(1)
        .write(t_event, 7, &[tw(1), 7 << 32 | 2, 1, 0, 0, 0, 0])
        .unwrap();
    let p = f.poll().unwrap();
    assert_eq!(p.snapshot.events(), 0, "held for the window");
    // ... and it does: the drain writes it, stamped when it happened.
    w.device()
        .mapping()
        .shared_ring(0)
        .write(t_switch, 7, &[tw(0), 7 << 32 | 1, 2, 0, 0, 0, 0])
        .unwrap();
    let p = f.poll().unwrap();
    assert_eq!((p.snapshot.events(), p.late), (0, 0));
    // Released in time order, none late, when the follower stops.
    let p = f.finish().unwrap();
    let mut stamps: Vec<u64> = p
        .snapshot
        .cpus
        .iter()
        .flat_map(|r| r.events.iter().map(|e| e.stamp))
        .collect();
    stamps.sort();
    assert_eq!(stamps, [t_switch, t_event]);
    assert_eq!(p.late, 0);
}
