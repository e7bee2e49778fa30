//! `ttrace-reader clear`: a cleared device shows nothing recorded before the clear, counts
//! the clear, shows what is recorded after it, and never a torn or invented event, even
//! when a writer runs through the clear. And the dump's header names the writing processes.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use ttrace_tests::{config, define, mix, reader, test_app};

/// The dump of `dir`: its header line and its event lines.
fn dump(dir: &Path) -> (String, Vec<String>) {
    let text = reader!("dump", dir).ok();
    let mut lines = text.lines();
    let header = lines.next().unwrap().to_string();
    let events = lines
        .filter(|l| !l.starts_with('#'))
        .map(String::from)
        .collect();
    (header, events)
}

fn stats(dir: &Path) -> String {
    reader!("stats", dir).ok()
}

#[test]
fn clear_empties_the_trace_counts_the_clear_and_keeps_what_comes_after() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = ttrace_core::Writer::open(&config(&dir, 64, 2)).unwrap();
    let word = define(&dev, "before_or_after", "n={n}");
    let ctx = devttrace::thread::context();
    let msg = |text: &str| assert!(ttrace_tests::message(&dev, ctx, text));
    for n in 0..200 {
        dev.emit(word, ctx, &[n]);
    }
    msg("a message before");
    let (_, events) = dump(&dir);
    assert!(events.len() > 10, "{events:?}");
    assert!(stats(&dir).contains("cleared: never\n"));

    reader!("clear", &dir).ok();
    let (header, events) = dump(&dir);
    assert_eq!(events, Vec::<String>::new(), "nothing shows after a clear");
    assert!(header.ends_with("; no events since the clear"), "{header}");
    let s = stats(&dir);
    assert!(s.contains("cleared: 1 times, last at "), "{s}");
    // The ring had wrapped: what it lost before the clear is cleared, not lost.
    assert!(s.contains(" 0 entries lost,"), "{s}");

    for n in 1000..1005 {
        dev.emit(word, ctx, &[n]);
    }
    msg("a message after");
    let (_, events) = dump(&dir);
    let texts: Vec<&str> = events
        .iter()
        .map(|l| l.split_once(") ").unwrap().1)
        .collect();
    assert_eq!(
        texts,
        [
            "before_or_after(n=1000)",
            "before_or_after(n=1001)",
            "before_or_after(n=1002)",
            "before_or_after(n=1003)",
            "before_or_after(n=1004)",
            "info(\"a message after\")"
        ]
    );
    reader!("clear", &dir).ok();
    assert!(stats(&dir).contains("cleared: 2 times"));
    assert_eq!(dump(&dir).1, Vec::<String>::new());
}

#[test]
fn clear_while_a_writer_writes_shows_only_whole_events_written_after_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = ttrace_core::Writer::open(&config(&dir, 65536, 2)).unwrap();
    let word = define(
        &dev,
        "twelve",
        "{a} {b} {c} {d} {e} {f} {g} {h} {i} {j} {k} {l}",
    );
    // Sequence numbers of the events the writer has committed (all of them, at or below).
    let done = AtomicU64::new(0);
    // The writer writes events up to this sequence number, then waits for it to move (a
    // bound by count, not time): at most `PAST` past the last one committed before the clear
    // began, until the clear returned, then at least `AFTER` past the last one committed by
    // then (and at most `PAST + AFTER` past the one before the clear).
    let limit = AtomicU64::new(WARM_UP);
    // Set once `limit` will not move again: the writer ends when it reaches it.
    let finished = AtomicBool::new(false);
    // Events written before the clear (at least one of which it must hide), events the
    // writer may write while it runs, and events written after it returned. Each ring holds
    // 32768 of these events (two slots each): the last event committed before the clear
    // began has at most `PAST + AFTER` events after it in all the rings, so it is still in
    // its ring at the end, whatever the scheduler did and however long the clear took.
    const WARM_UP: u64 = 10_000;
    const PAST: u64 = 16_384;
    const AFTER: u64 = 1000;
    const _: () = assert!(PAST + AFTER < 32_768);
    let (before, after, last) = std::thread::scope(|s| {
        s.spawn(|| {
            let ctx = devttrace::thread::context();
            let mut seq = 1;
            let mut paced = std::time::Instant::now();
            loop {
                // Read before the limit: once it is set, the limit read next is the last.
                let end = finished.load(SeqCst);
                if seq > limit.load(SeqCst) {
                    if end {
                        break;
                    }
                    // Waits for the limit to move (or for the end), leaving the CPU to the
                    // clear.
                    std::thread::yield_now();
                    continue;
                }
                // At most one event per 2 µs (a pace, not a synchronization): the writer
                // still writes while the clear runs, not all of its `PAST` events before.
                while paced.elapsed() < std::time::Duration::from_micros(2) {
                    std::hint::spin_loop();
                }
                paced = std::time::Instant::now();
                let mut args = [0u64; 12];
                args[0] = seq;
                for (k, a) in args.iter_mut().enumerate().skip(1) {
                    *a = mix(1, seq, k as u64);
                }
                dev.emit(word, ctx, &args);
                done.store(seq, SeqCst);
                seq += 1;
            }
        });
        while done.load(SeqCst) < WARM_UP {
            std::thread::yield_now();
        }
        // Every event up to `before` was committed before the clear began. On a busy
        // machine the writer may not run while one clear does: clear again until it did
        // (each clear hides what came before it; the last one is the one checked).
        let (mut before, mut after) = (0, 0);
        for _ in 0..1000 {
            before = done.load(SeqCst);
            // The writer is at or below `limit`, which is at most `before + PAST` (it was
            // set so by the try before, from a `done` at or below `before`).
            limit.store(before + PAST, SeqCst);
            reader!("clear", &dir).ok();
            after = done.load(SeqCst);
            if after > before {
                break;
            }
        }
        // At least `AFTER` more (the writer may be past `after` by now, up to the limit):
        // the last limit, never below what the writer may have written.
        let last = limit.fetch_max(after + AFTER, SeqCst).max(after + AFTER);
        finished.store(true, SeqCst);
        (before, after, last)
    });
    assert!(after > before, "the writer ran through the clear");
    // The rings, read without regard to the clear, still hold events from before it.
    let hidden = (0..dev.device().mapping().num_rings())
        .flat_map(|r| dev.device().mapping().ring(r).reader().snapshot().events)
        .filter(|e| e.args()[0] <= before)
        .count();
    assert!(hidden > 0, "the clear hid nothing: the test proves nothing");
    let (_, events) = dump(&dir);
    let mut seqs = Vec::new();
    for line in &events {
        let text = line.split_once(") ").unwrap().1;
        let args: Vec<u64> = text
            .strip_prefix("twelve(")
            .and_then(|t| t.strip_suffix(')'))
            .unwrap_or_else(|| panic!("not a whole event: {line}"))
            .split(' ')
            .map(|a| a.parse().unwrap())
            .collect();
        assert_eq!(args.len(), 12, "{line}");
        let seq = args[0];
        for (k, &a) in args.iter().enumerate().skip(1) {
            assert_eq!(a, mix(1, seq, k as u64), "a torn or invented event: {line}");
        }
        seqs.push(seq);
    }
    seqs.sort_unstable();
    // Nothing committed before the clear began shows (the events written while it ran may
    // or may not: it takes effect at one moment in between).
    assert!(seqs[0] > before, "{} was written before the clear", seqs[0]);
    // Every event written after the clear returned is there, each once.
    let tail: Vec<u64> = seqs.iter().copied().filter(|&n| n > after).collect();
    assert_eq!(tail, (after + 1..=last).collect::<Vec<_>>());
    seqs.dedup();
    assert_eq!(seqs.len(), events.len(), "no event twice");
}

#[test]
fn the_dump_header_names_the_processes_that_wrote_the_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let mut pids = Vec::new();
    for _ in 0..2 {
        pids.push(test_app!(&dir, 3).succeeds().pid);
    }
    pids.sort_unstable();
    let (header, _) = dump(&dir);
    let written = header.split_once("; written by ").expect(&header).1;
    let expected: Vec<String> = pids
        .iter()
        .map(|p| format!("{p} (ttrace-test-app)"))
        .collect();
    assert_eq!(written, expected.join(", "), "{header}");
}
