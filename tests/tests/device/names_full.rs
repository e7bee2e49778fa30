//! A names area that every name still needed would overflow (more threads with events in
//! the rings than a half can name): new names go in at a bounded cost, the oldest needed
//! ones are evicted, and each event's thread shows its own name or is counted unnamed in
//! the footer; a compaction never runs per new thread.
//!
//! Atomics here are loaded and stored Relaxed: the device's counters are read by the thread
//! that made the calls that changed them, or after joining the threads that did; the test's
//! own counters only pace the threads (what they pace is read through the device's
//! protocol, whose orderings are its own).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Barrier};
use ttrace_core::{Config, Writer};
use ttrace_layouts::meta::{record_bytes, records_offset, split};
use ttrace_tests::reader;

/// A device of 2 CPUs of 16,384-slot rings (nothing here wraps them) whose names area has
/// halves of `half` bytes.
fn config(dir: &std::path::Path, half: u64) -> Config {
    let max_tracepoints = devttrace::config::DEFAULT_MAX_TRACEPOINTS;
    let cfg = Config {
        meta_bytes: records_offset(max_tracepoints) + 4 * half,
        ..ttrace_tests::config(dir, 16384, 2)
    };
    assert_eq!(split(max_tracepoints, cfg.meta_bytes).2, half);
    cfg
}

/// What `ttrace-reader dump <dir>` shows: per event of `names_event(i=N)`, `N` and the
/// name its thread shows (`?` if unnamed); and the footer's events and unnamed counts.
fn dumped(dir: &std::path::Path) -> (Vec<(u64, String)>, u64, u64) {
    let text = reader!("dump", dir).ok();
    let events = text
        .lines()
        .filter(|l| l.contains(" names_event(i="))
        .map(|l| {
            let name = &l[l.find(" (").expect("name") + 2..l.find(") names").expect("name")];
            let i = &l[l.find("(i=").unwrap() + 3..l.rfind(')').unwrap()];
            (i.parse().unwrap(), name.to_string())
        })
        .collect();
    let footer = text.lines().last().expect("a footer");
    let count = |after: &str| -> u64 {
        footer
            .split(", ")
            .find_map(|part| part.strip_suffix(after)?.parse().ok())
            .unwrap_or(0)
    };
    let total = footer
        .trim_start_matches("# ")
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no event count in {footer}"));
    (events, total, count(" events of unnamed threads"))
}

/// Checks that each event shows its writer's name (`t<i>`) or none, and that the footer
/// counts every one named or unnamed; returns how many were named.
fn check_names(dir: &std::path::Path, threads: u64) -> u64 {
    let (events, total, unnamed) = dumped(dir);
    assert_eq!(events.len() as u64, threads, "every event is in the rings");
    assert_eq!(total, threads, "the footer counts every event");
    let mut named = 0;
    for (i, name) in &events {
        if name != "?" {
            assert_eq!(
                name,
                &format!("t{i}"),
                "event {i} shows another thread's name"
            );
            named += 1;
        }
    }
    assert_eq!(
        named + unnamed,
        total,
        "{named} events named, {unnamed} counted unnamed in the footer, of {total}"
    );
    named
}

/// 4,000 threads (forged ids, dead once named, sharing 500 tids as a kernel with a small
/// `pid_max` would give them) each write one event that stays in the rings, into a names
/// area whose half holds about 400 of their names. Every name goes in (none is dropped);
/// the oldest are evicted, a quarter of the half at a time, so the compactions number a
/// few per quarter-half of new names, not one per thread; every event shows its own
/// thread's name or is counted unnamed, and the newest threads are all named.
#[test]
fn a_names_area_full_of_needed_names_evicts_the_oldest_and_counts_their_events() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let half = 16 << 10;
    let dev = Writer::open(&config(&dir, half)).unwrap();
    let word = ttrace_tests::define(&dev, "names_event", "i={i}");
    let pid = std::process::id();
    let tid = |i: u64| 3_000_000 + (i % 500) as u32;
    let threads = 4_000u64;
    for i in 0..threads {
        dev.device()
            .note_thread(pid, tid(i), &format!("t{i}"))
            .unwrap();
        assert!(dev.emit(word, (pid as u64) << 32 | tid(i) as u64, &[i]));
    }
    let h = dev.device().mapping().header();
    assert_eq!(h.names_dropped.load(Relaxed), 0, "every name went in");
    let compactions = h.names_generation.load(Relaxed);
    // A compaction leaves a quarter of the half free: then at least that many bytes of
    // names (of 40 bytes each) are appended before the next.
    let per_compaction = (half / 4) / record_bytes("t3999".len());
    assert!(
        compactions >= 1 && compactions <= threads / per_compaction + 2,
        "{compactions} compactions for {threads} threads"
    );
    let meta = dev.device().reader().metadata();
    eprintln!(
        "{threads} threads: {compactions} compactions, {} names evicted",
        meta.names_evicted
    );
    assert!(meta.names_evicted > 0 && meta.names_evicted_before > 0);
    assert_eq!(
        meta.threads.len() as u64 + meta.names_evicted + h.names_reclaimed.load(Relaxed),
        threads,
        "each name is kept, evicted or reclaimed"
    );
    let named = check_names(&dir, threads);
    // What a compaction keeps (three quarters of a half, less the record of the
    // evictions) at least, the newest among them.
    assert!(
        named >= (half / 2) / record_bytes(5),
        "{named} events named"
    );
    let (events, _, _) = dumped(&dir);
    let newest = events
        .iter()
        .filter(|(i, _)| *i >= threads - per_compaction);
    assert!(newest.clone().count() as u64 == per_compaction);
    for (i, name) in newest {
        assert_eq!(name, &format!("t{i}"), "a new thread's name was evicted");
    }
}

/// Live threads' names fill more than three quarters of a half, so no compaction can free a
/// quarter: after one that could not, names that do not fit are dropped (and counted)
/// without compacting, until a quarter of a half's worth more were dropped; the live
/// threads keep their names throughout.
#[test]
fn live_names_filling_the_area_do_not_make_each_new_name_compact() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let half = 4096;
    let dev = Arc::new(Writer::open(&config(&dir, half)).unwrap());
    let live = 90;
    let named = Arc::new(Barrier::new(live + 1));
    let done = Arc::new(Barrier::new(live + 1));
    let handles: Vec<_> = (0..live)
        .map(|k| {
            let (dev, named, done) = (dev.clone(), named.clone(), done.clone());
            std::thread::Builder::new()
                .name(format!("live-{k:02}"))
                .spawn(move || {
                    let ctx = devttrace::thread::context();
                    dev.device()
                        .note_thread((ctx >> 32) as u32, ctx as u32, &devttrace::thread::name())
                        .unwrap();
                    named.wait();
                    // Alive until the main thread has checked.
                    done.wait();
                    ctx as u32
                })
                .unwrap()
        })
        .collect();
    named.wait();
    let h = dev.device().mapping().header();
    let before = h.names_generation.load(Relaxed);
    // Names of dead ids with no event: reclaimed by each compaction, but the live names
    // alone leave less than a quarter of the half free.
    let births = 2_000u64;
    let mut dropped = 0;
    for i in 0..births {
        match dev.device().note_thread(4_000_000, i as u32, "dead") {
            Ok(()) => {}
            Err(ttrace_core::Error::MetadataFull) => dropped += 1,
            Err(e) => panic!("{e}"),
        }
    }
    let compactions = h.names_generation.load(Relaxed) - before;
    // Per compaction in vain: the names that fill what is free, then a quarter of a half's
    // worth of names (of 48 bytes) dropped.
    let quiet = (half / 4) / record_bytes(15);
    assert!(
        compactions >= 1 && compactions <= births / quiet + 1,
        "{compactions} compactions for {births} names"
    );
    eprintln!("{births} names: {compactions} compactions, {dropped} dropped");
    assert!(dropped >= births / 2, "{dropped} dropped");
    assert_eq!(h.names_dropped.load(Relaxed), dropped);
    let meta = dev.device().reader().metadata();
    assert_eq!(
        meta.names_evicted, 0,
        "a live thread's name is never evicted"
    );
    done.wait();
    let pid = std::process::id();
    for (k, handle) in handles.into_iter().enumerate() {
        let tid = handle.join().unwrap();
        assert_eq!(
            meta.thread_name(pid, tid),
            Some(format!("live-{k:02}").as_str())
        );
    }
}

/// Four spawners each start 600 short-lived named threads, each of which names itself as
/// a thread does and writes one event, into a names area whose half holds about 100 names;
/// meanwhile a reader takes snapshots (each spawner waits for a new one after every 100
/// threads, so reads overlap the evictions by construction). In every snapshot each event
/// shows its own thread's name or none; at the end the footer counts each event named or
/// unnamed.
#[test]
fn snapshots_taken_while_threads_evict_names_show_each_event_its_own_name_or_none() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = Arc::new(Writer::open(&config(&dir, 4096)).unwrap());
    let word = ttrace_tests::define(&dev, "names_event", "i={i}");
    let (spawners, each) = (4u64, 600u64);
    let snapshots = Arc::new(AtomicU64::new(0));
    let writing = Arc::new(AtomicU64::new(spawners));
    let workers: Vec<_> = (0..spawners)
        .map(|s| {
            let (dev, snapshots, writing) = (dev.clone(), snapshots.clone(), writing.clone());
            std::thread::spawn(move || {
                for n in 0..each {
                    let i = s * each + n;
                    let dev = dev.clone();
                    std::thread::Builder::new()
                        .name(format!("t{i}"))
                        .spawn(move || {
                            let ctx = devttrace::thread::context();
                            let name = devttrace::thread::name();
                            // A full area drops no name here: each compaction can evict.
                            dev.device()
                                .note_thread((ctx >> 32) as u32, ctx as u32, &name)
                                .unwrap();
                            assert!(dev.emit(word, ctx, &[i]));
                        })
                        .unwrap()
                        .join()
                        .unwrap();
                    if n % 100 == 99 {
                        let seen = snapshots.load(Relaxed);
                        while snapshots.load(Relaxed) == seen {
                            std::thread::yield_now();
                        }
                    }
                }
                writing.fetch_sub(1, Relaxed);
            })
        })
        .collect();
    let reader = devttrace::Reader::open(&dir).unwrap();
    let mut checked = 0u64;
    loop {
        // Read before the snapshot: a snapshot taken after every writer finished.
        let last = writing.load(Relaxed) == 0;
        let snap = reader.snapshot().unwrap();
        let index = devttrace::TaskIndex::threads(&snap.meta);
        for ring in &snap.cpus {
            for e in &ring.events {
                let i = e.args()[0];
                if let Some(c) = index.at(e.ctx, e.stamp) {
                    let name = &snap.meta.threads[c.index].name;
                    assert_eq!(name, &format!("t{i}"), "event {i} shows another's name");
                }
                checked += 1;
            }
        }
        snapshots.fetch_add(1, Relaxed);
        if last {
            break;
        }
    }
    for w in workers {
        w.join().unwrap();
    }
    let total = spawners * each;
    // Each spawner waited for a snapshot after each hundred threads.
    assert!(
        snapshots.load(Relaxed) > each / 100,
        "snapshots overlapped writes"
    );
    assert!(checked >= total, "{checked} events checked");
    let meta = dev.device().reader().metadata();
    assert!(meta.names_evicted > 0, "names were evicted");
    check_names(&dir, total);
}
