//! Threads in the exports: a tid the kernel gave a dead thread's successor does not join the
//! two threads' halves into one pair, and uftrace shows each thread's event texts on that
//! thread, however the threads' events interleave.

use std::path::Path;
use ttrace_core::{Kind, Writer};
use ttrace_tests::{define_kind, reader, uftrace, viewer};

/// A later thread with a reused id, as exports show it: `tid + 2^22`.
const LATER: u64 = 1 << 22;

fn export(format: &str, source: &Path, out: &Path) {
    let (source, out) = (source.to_str().unwrap(), out.to_str().unwrap());
    reader!("export", "--format", format, source, "-o", out).ok();
}

/// Thread 1/2, `first`, enters `call` and starts a `job`, and dies in both; the kernel gives
/// tid 2 to a new thread, `second`, whose first events end a `job` and leave a `call` (begun
/// before it traced). Nothing is lost: the halves are unpaired only because they are two
/// threads'.
fn reused_tid(dir: &Path) -> Writer {
    let w = Writer::open(&ttrace_tests::config(dir, 64, 1)).unwrap();
    let call = define_kind(&w, "call", Kind::Entry, "n={n}");
    let call_done = define_kind(&w, "call_done", Kind::Exit, "n={n}");
    let job_start = define_kind(&w, "job_start", Kind::Start, "n={n}");
    let job_done = define_kind(&w, "job_done", Kind::Stop, "n={n}");
    let ctx = 1 << 32 | 2;
    w.device().note_process(1, "app").unwrap();
    w.device().note_thread(1, 2, "first").unwrap();
    assert!(w.emit(call, ctx, &[1]));
    assert!(w.emit(job_start, ctx, &[1]));
    w.device().note_thread(1, 2, "second").unwrap();
    assert!(w.emit(job_done, ctx, &[2]));
    assert!(w.emit(call_done, ctx, &[2]));
    w
}

#[test]
fn an_entry_left_open_by_a_dead_thread_is_not_closed_by_the_next_thread_with_its_tid() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = tmp.path().join("dev");
    let _w = reused_tid(&dev);

    // Chrome: no slice and no start/stop span; each half is an async slice of its own
    // thread that says which half is missing.
    let json = tmp.path().join("t.json");
    export("chrome", &dev, &json);
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let slices: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" || e["cat"] == "start/stop")
        .collect();
    assert!(slices.is_empty(), "{slices:?}");
    // What each half misses, by its slice's id: on the `b` of an entry's (start's) half,
    // on the `e` of an exit's (stop's).
    let missing: std::collections::HashMap<u64, &str> = events
        .iter()
        .filter(|e| e["cat"] == "unpaired")
        .filter_map(|e| Some((e["id"].as_u64()?, e["args"]["missing"].as_str()?)))
        .collect();
    let unpaired: Vec<(&str, u64, &str)> = events
        .iter()
        .filter(|e| e["cat"] == "unpaired" && e["ph"] == "b")
        .map(|e| {
            (
                e["name"].as_str().unwrap(),
                e["tid"].as_u64().unwrap(),
                missing[&e["id"].as_u64().unwrap()],
            )
        })
        .collect();
    // The start and stop, like the entry and exit, are halves of their own threads.
    assert_eq!(
        unpaired,
        [
            ("job_done", 2 + LATER, "start"),
            ("call_done", 2 + LATER, "entry"),
            ("call", 2, "exit"),
            ("job_start", 2, "stop")
        ]
    );

    // uftrace: the first thread's task holds the entry, never closed; the second's an exit
    // of its own tracepoint (an exit whose entry is not in the trace), not of `call`.
    let out = tmp.path().join("u");
    export("uftrace", &dev, &out);
    let data = uftrace::read(&out).unwrap();
    let calls = |tid: u64| -> Vec<(String, String, u32)> {
        data.threads[&(tid as u32)]
            .iter()
            .filter(|r| r.name.contains("call"))
            .map(|r| {
                let (_, kind, name, depth) = r.dump_line();
                (kind, name, depth)
            })
            .collect()
    };
    assert_eq!(calls(2), [("entry".into(), "call".into(), 0)]);
    assert_eq!(calls(2 + LATER), [("exit".into(), "call_done".into(), 0)]);
}

/// Two threads busy at once, each on its own CPU: `alpha` (1/2) and `beta` (1/3). In each of
/// 10 rounds one thread is inside a `work` call while the other records a `tick` outside any
/// call, and then the other way round; every tick's argument is its own (`1000 + k` for
/// alpha's, `2000 + k` for beta's), so its text `tick(n=...)` names its thread. The stamps
/// are chosen (a nanosecond clock), so the interleaving is the same on every run.
fn two_busy_threads(dir: &Path) -> ttrace_core::Writer {
    use ttrace_layouts::device::ClockSource;
    let dev = ttrace_core::Writer::open(&ttrace_core::Config {
        clock: Some(ClockSource::MonotonicNs),
        ..ttrace_tests::config(dir, 256, 2)
    })
    .unwrap();
    let work = define_kind(&dev, "work", Kind::Entry, "");
    let work_done = define_kind(&dev, "work_done", Kind::Exit, "");
    let tick = define_kind(&dev, "tick", Kind::Start, "n={n}");
    dev.device().note_thread(1, 2, "alpha").unwrap();
    dev.device().note_thread(1, 3, "beta").unwrap();
    let (alpha, beta) = (1u64 << 32 | 2, 1u64 << 32 | 3);
    let put = |ring: usize, t: u64, word: u64, ctx: u64, n: u64| {
        let word = ttrace_layouts::entry::TypeWord(word)
            .with_cpu(ring as u32)
            .0;
        let written = dev
            .device()
            .mapping()
            .ring(ring)
            .write(t, 1, &[word, ctx, n, 0, 0, 0, 0]);
        assert!(written.is_some());
    };
    let base = dev.now();
    for k in 0..10 {
        // Even offsets: a stamp's bit 0 is the slot's state, not time.
        let t = base + 10_000 * (k + 1);
        put(0, t, work, alpha, 0);
        put(1, t + 100, tick, beta, 2000 + 2 * k);
        put(0, t + 200, tick, alpha, 1000 + 2 * k);
        put(0, t + 300, work_done, alpha, 0);
        put(1, t + 400, work, beta, 0);
        put(0, t + 500, tick, alpha, 1001 + 2 * k);
        put(1, t + 600, tick, beta, 2001 + 2 * k);
        put(1, t + 700, work_done, beta, 0);
    }
    dev
}

/// The ticks `uftrace replay` (with `extra` options) shows, as `(tid, n)`: lines
/// `[     2] |   ... tick(n=1000) ...`.
fn replayed_ticks(dir: &Path, extra: &[&str]) -> (Vec<(u64, u64)>, String) {
    let mut args = vec!["replay", "--no-pager", "-f", "tid"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["-d", dir.to_str().unwrap()]);
    let (replay, _) = viewer::run("uftrace", &args);
    let ticks = replay
        .lines()
        .filter_map(|l| {
            let (left, call) = l.split_once(" | ")?;
            let tid = left.trim().strip_prefix('[')?.strip_suffix(']')?.trim();
            let n = call.split_once("tick(n=")?.1.split_once(')')?.0;
            Some((tid.parse().ok()?, n.parse().ok()?))
        })
        .collect();
    (ticks, replay)
}

/// The thread whose tick has argument `n` in [`two_busy_threads`].
fn owner(n: u64) -> u64 {
    if n >= 2000 {
        3
    } else {
        2
    }
}

/// Every tick argument of [`two_busy_threads`], sorted.
fn all_ticks() -> Vec<u64> {
    (1000..1020).chain(2000..2020).collect()
}

#[test]
fn each_threads_event_texts_are_in_its_own_uftrace_stream() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = tmp.path().join("dev");
    let _d = two_busy_threads(&dev);
    let out = tmp.path().join("u");
    export("uftrace", &dev, &out);
    let data = uftrace::read(&out).unwrap();
    let mut texts = Vec::new();
    for (&tid, records) in &data.threads {
        for text in records.iter().filter_map(|r| r.data.as_deref()) {
            let n: u64 = text
                .strip_prefix("tick(n=")
                .and_then(|t| t.strip_suffix(')'))
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{text}"));
            assert_eq!(owner(n), tid as u64, "{text} in {tid}.dat");
            texts.push(n);
        }
    }
    texts.sort_unstable();
    assert_eq!(texts, all_ticks());
}

#[test]
#[ignore = "needs uftrace: apt install uftrace"]
fn uftrace_replay_shows_each_threads_event_texts_under_its_own_tid() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = tmp.path().join("dev");
    let _d = two_busy_threads(&dev);
    let out = tmp.path().join("u");
    export("uftrace", &dev, &out);
    for extra in [&[][..], &["--event-full"][..]] {
        let (ticks, replay) = replayed_ticks(&out, extra);
        for &(tid, n) in &ticks {
            assert_eq!(
                tid,
                owner(n),
                "tick(n={n}) under {tid} ({extra:?}):\n{replay}"
            );
        }
        // Every tick is shown, once.
        let mut shown: Vec<u64> = ticks.iter().map(|&(_, n)| n).collect();
        shown.sort_unstable();
        assert_eq!(shown, all_ticks(), "{extra:?}:\n{replay}");
    }
    // uftrace reads the records, and what they return, as our reader does.
    let dir = out.to_str().unwrap();
    assert_eq!(
        crate::export::uftrace_dump(dir),
        crate::export::uftrace_as_dump(dir)
    );
}
