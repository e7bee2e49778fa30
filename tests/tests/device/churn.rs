//! An always-on device under thread and process churn: names as of each event's time when
//! ids are reused, and a names area that never fills up.

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Barrier};
use ttrace_core::{Config, Writer};
use ttrace_tests::{reader, test_writer};

/// `ttrace-reader dump <dir>`'s event lines as (pid, tid, thread name, i), from lines like
/// `... cpu1 7/12 (t42) churn_event(i=42)`.
fn dumped(dir: &std::path::Path) -> Vec<(u32, u32, String, u64)> {
    let text = reader!("dump", dir).ok();
    text.lines()
        .filter(|l| l.contains(" churn_event(i="))
        .map(|l| {
            let who = l.split_whitespace().nth(2).expect("pid/tid");
            let (pid, tid) = who.split_once('/').expect("pid/tid");
            let name = &l[l.find(" (").expect("name") + 2..l.find(") churn").expect("name")];
            let i = &l[l.find("(i=").unwrap() + 3..l.rfind(')').unwrap()];
            (
                pid.parse().unwrap(),
                tid.parse().unwrap(),
                name.to_string(),
                i.parse().unwrap(),
            )
        })
        .collect()
}

/// `ttrace-reader export --format <format> <dir> -o <out>`, which must succeed.
fn export(format: &str, dir: &std::path::Path, out: &std::path::Path) {
    reader!("export", "--format", format, dir, "-o", out).ok();
}

fn small(dir: &std::path::Path, meta_bytes: u64) -> Config {
    Config {
        meta_bytes,
        ..ttrace_tests::config(dir, 1024, 2)
    }
}

/// 100,000 threads, 64 alive at a time, share 300 thread ids (as TIDs are reused by a
/// kernel whose `pid_max` is small): each registers its name through the public API as a
/// new thread does, then writes one event. The names area is small, so it is compacted
/// over and over while old names are still named by events in the rings.
#[test]
fn every_event_shows_the_name_its_writer_had_when_tids_are_reused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = Writer::open(&small(&dir, 1 << 20)).unwrap();
    let word = ttrace_tests::define(&dev, "churn_event", "i={i}");
    let pid = std::process::id();
    // Ids no live thread has: each forged thread is dead once it wrote its event.
    let tid = |i: u64| 3_000_000 + (i % 300) as u32;
    for i in 0..100_000u64 {
        dev.device()
            .note_thread(pid, tid(i), &format!("t{i}"))
            .unwrap();
        assert!(dev.emit(word, (pid as u64) << 32 | tid(i) as u64, &[i]));
    }
    let h = dev.device().mapping().header();
    assert!(
        h.names_generation.load(Relaxed) > 10,
        "the names area was compacted"
    );
    assert_eq!(h.names_dropped.load(Relaxed), 0, "no name dropped");
    assert!(h.names_reclaimed.load(Relaxed) > 90_000);
    let events = dumped(&dir);
    assert!(events.len() >= 1024, "{} events", events.len());
    for (p, t, name, i) in &events {
        assert_eq!((*p, *t), (pid, tid(*i)));
        assert_eq!(
            name,
            &format!("t{i}"),
            "event {i} shows another thread's name"
        );
    }
}

/// Real threads, 64 alive at a time, each named, registering and writing as the global
/// device's threads do. Where `pid_max` is below the number of threads (as on a default
/// kernel), TIDs repeat and the test checks they did.
#[test]
fn real_threads_churning_are_each_named_as_they_were() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = Arc::new(Writer::open(&small(&dir, 1 << 20)).unwrap());
    let word = ttrace_tests::define(&dev, "churn_event", "i={i}");
    let threads = 40_000u64;
    let mut tids = HashMap::new();
    for batch in 0..threads / 64 {
        let start = Arc::new(Barrier::new(64));
        let handles: Vec<_> = (0..64)
            .map(|k| {
                let (dev, start) = (dev.clone(), start.clone());
                let i = batch * 64 + k;
                std::thread::Builder::new()
                    .name(format!("t{i}"))
                    .spawn(move || {
                        // All 64 alive at once.
                        start.wait();
                        let ctx = devttrace::thread::context();
                        let name = devttrace::thread::name();
                        dev.device()
                            .note_thread((ctx >> 32) as u32, ctx as u32, &name)
                            .unwrap();
                        assert!(dev.emit(word, ctx, &[i]));
                        ctx as u32
                    })
                    .unwrap()
            })
            .collect();
        for (k, h) in handles.into_iter().enumerate() {
            tids.insert(batch * 64 + k as u64, h.join().unwrap());
        }
    }
    let distinct: std::collections::HashSet<u32> = tids.values().copied().collect();
    let pid_max: u64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    eprintln!(
        "{threads} threads, {} distinct tids (pid_max {pid_max})",
        distinct.len()
    );
    if pid_max < threads {
        assert!((distinct.len() as u64) < threads, "tids repeated");
    }
    assert_eq!(
        dev.device().mapping().header().names_dropped.load(Relaxed),
        0
    );
    assert!(
        dev.device()
            .mapping()
            .header()
            .names_generation
            .load(Relaxed)
            > 0
    );
    let events = dumped(&dir);
    assert!(events.len() >= 1024, "{} events", events.len());
    for (_, t, name, i) in &events {
        assert_eq!(*t, tids[i]);
        assert_eq!(
            name,
            &format!("t{i}"),
            "event {i} shows another thread's name"
        );
    }
}

/// A million thread births and a million process starts (`TTRACE_CHURN_BIRTHS` to change
/// the count) on a default-sized device, then a new process registers a new tracepoint: it
/// records, and dump shows its events by name.
#[test]
fn a_million_births_leave_a_device_that_still_names_and_registers() {
    let births: u32 = std::env::var("TTRACE_CHURN_BIRTHS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = Writer::open(&ttrace_tests::config(&dir, 16384, 2)).unwrap();
    // Ids no live process has: all dead once named.
    for i in 0..births {
        dev.device()
            .note_thread(4_000_000 + i / 64, i, "worker-thread")
            .unwrap();
        dev.device()
            .note_process(4_000_000 + i, "cron-job")
            .unwrap();
    }
    let h = dev.device().mapping().header();
    assert_eq!(h.names_dropped.load(Relaxed), 0);
    assert_eq!(h.meta_dropped.load(Relaxed), 0);
    // All but what one half holds were reclaimed.
    let (_, _, half) = ttrace_layouts::meta::split(4096, h.meta_size);
    let names = 2 * births as u64;
    assert!(
        h.names_reclaimed.load(Relaxed) >= names.saturating_sub(half / 40),
        "{names} names"
    );
    eprintln!(
        "{names} names, {} compactions",
        h.names_generation.load(Relaxed)
    );
    let out = test_writer!(&dir, 10, 7).run();
    assert!(out.status.success());
    let text = reader!("dump", &dir).run().stdout;
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("shared_event(tag=7"))
        .collect();
    assert_eq!(lines.len(), 10, "{text}");
    assert!(lines.iter().all(|l| l.contains(" (writer-7) ")), "{text}");
    let done: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("writer_done("))
        .collect();
    assert_eq!(done.len(), 1, "{text}");
}

/// A tid reused by a second thread, which then renames itself: Chrome JSON shows two
/// threads (the second as `tid + 2^22`), each named as it last was; uftrace gives each its
/// own task; dump names every event as it was at its time.
#[test]
fn exports_give_each_thread_of_a_reused_tid_its_own_track_and_name() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = Writer::open(&ttrace_tests::config(&dir, 1024, 2)).unwrap();
    let word = ttrace_tests::define(&dev, "churn_event", "i={i}");
    let (pid, tid) = (4_000_001u32, 77u32);
    let ctx = (pid as u64) << 32 | tid as u64;
    dev.device().note_process(pid, "app").unwrap();
    dev.device().note_thread(pid, tid, "first").unwrap();
    assert!(dev.emit(word, ctx, &[0]));
    dev.device().note_thread(pid, tid, "second").unwrap();
    assert!(dev.emit(word, ctx, &[1]));
    dev.device().note_rename(pid, tid, "renamed").unwrap();
    assert!(dev.emit(word, ctx, &[2]));
    let names: Vec<(String, u64)> = dumped(&dir)
        .into_iter()
        .map(|(_, _, n, i)| (n, i))
        .collect();
    assert_eq!(
        names,
        [
            ("first".into(), 0),
            ("second".into(), 1),
            ("renamed".into(), 2)
        ]
    );

    let json = tmp.path().join("t.json");
    export("chrome", &dir, &json);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let later = tid as u64 + (1 << 22);
    let thread_names: HashMap<u64, &str> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| {
            (
                e["tid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        thread_names,
        HashMap::from([(tid as u64, "first"), (later, "renamed")])
    );
    let tids: Vec<(u64, u64)> = events
        .iter()
        .filter(|e| e["name"] == "churn_event")
        .map(|e| (e["args"]["i"].as_u64().unwrap(), e["tid"].as_u64().unwrap()))
        .collect();
    assert_eq!(tids, [(0, tid as u64), (1, later), (2, later)]);
    assert!(events
        .iter()
        .any(|e| e["name"] == "process_name" && e["args"]["name"] == "app"));

    let uf = tmp.path().join("uf");
    export("uftrace", &dir, &uf);
    let data = ttrace_tests::uftrace::read(&uf).unwrap();
    let tasks: Vec<u32> = data.threads.keys().copied().collect();
    assert_eq!(tasks, [tid, later as u32]);
    // Each event a call (an entry and an exit) of its point function.
    assert_eq!(data.threads[&tid].len(), 2);
    assert_eq!(data.threads[&(later as u32)].len(), 4);
    assert!(data.sessions.iter().any(|(p, n)| *p == pid && n == "app"));
}

/// A follower polling while threads come and go and the names area is compacted under it:
/// every event it prints carries its own writer's name.
#[test]
fn follow_names_every_event_through_compactions() {
    use ttrace_reader::decode::{Decoder, TimeFormat};
    use ttrace_reader::merge::{Filter, Merge};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = Writer::open(&small(&dir, 1 << 20)).unwrap();
    let word = ttrace_tests::define(&dev, "churn_event", "i={i}");
    let reader = devttrace::Reader::open(&dir).unwrap();
    let mut follower = devttrace::Follower::with_window(&reader, 0);
    let pid = std::process::id();
    let tid = |i: u64| 3_000_000 + (i % 300) as u32;
    let mut printed = Vec::new();
    for i in 0..30_000u64 {
        dev.device()
            .note_thread(pid, tid(i), &format!("t{i}"))
            .unwrap();
        assert!(dev.emit(word, (pid as u64) << 32 | tid(i) as u64, &[i]));
        if i % 500 == 499 {
            let poll = follower.poll().unwrap();
            let mut decoder = Decoder::new(&poll.snapshot, TimeFormat::Relative);
            for item in Merge::snapshot(&poll.snapshot, &Filter::default()) {
                decoder.line(&item, &mut printed);
            }
        }
    }
    assert!(
        dev.device()
            .mapping()
            .header()
            .names_generation
            .load(Relaxed)
            > 3
    );
    let text = String::from_utf8(printed).unwrap();
    let mut n = 0;
    for l in text.lines() {
        let name = &l[l.find(" (").unwrap() + 2..l.find(") churn").unwrap()];
        let i = &l[l.find("(i=").unwrap() + 3..l.rfind(')').unwrap()];
        assert_eq!(name, format!("t{i}"), "{l}");
        n += 1;
    }
    assert!(n >= 10_000, "{n} events followed");
}

/// A forked child is a new process with a new thread: its events carry its own pid and tid,
/// under its own thread's name, not those its parent's thread had before the fork (the
/// writer's cache of the thread's context is forgotten in the child).
#[test]
fn a_forked_childs_events_carry_its_own_ids_and_names() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let out = ttrace_tests::env_writer!(&dir, "x=1", "fork", "x=2").ok();
    let child: u32 = out
        .lines()
        .find_map(|l| l.strip_prefix("child "))
        .expect("the parent names its child")
        .parse()
        .unwrap();
    let text = reader!("dump", &dir).ok();
    let who = |point: &str| {
        let l = text
            .lines()
            .find(|l| l.ends_with(point))
            .unwrap_or_else(|| panic!("no {point} in\n{text}"));
        let ids = l.split_whitespace().nth(2).expect("pid/tid");
        let (pid, tid) = ids.split_once('/').expect("pid/tid");
        let name = &l[l.find(" (").expect("name") + 2..l.find(") ").expect("name")];
        (
            pid.parse::<u32>().unwrap(),
            tid.parse::<u32>().unwrap(),
            name.to_string(),
        )
    };
    let (ppid, ptid, pname) = who("x_point(n=1)");
    let (cpid, ctid, cname) = who("x_point(n=2)");
    assert_eq!((cpid, ctid), (child, child), "the child's own pid and tid");
    assert_ne!(ppid, cpid);
    assert_eq!(ptid, ppid, "the parent's main thread");
    assert_eq!(pname, "ttrace-test-env");
    assert_eq!(cname, "forked-child");
}
