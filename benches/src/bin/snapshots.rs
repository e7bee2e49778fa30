//! What snapshots cost: `ttrace_snapshots::trigger` on the caller's thread (merged into a
//! pending snapshot, or granted: the saver thread woken), next to a
//! bare `rdtsc` of the same run; the time to save a full default device and a full
//! 16 x 1,048,576-slot one; and what following rules costs (`ttrace-reader watch`, and a
//! program's rules thread): the CPU a follower with a `latency request > 5ms` matcher uses,
//! polling as `watch` does, idle and with a writer at 1 M and 10 M events/s.
//!
//! `cargo run --release -p ttrace-benches --bin snapshots [-- --quick]` (`--quick`: fewer
//! calls, and no 16 x 1M device, which takes about 1.3 GB of `/dev/shm` and as much disk).

use std::process::Command;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--trigger-cost") {
        trigger_cost(&args[i + 1], args.iter().any(|a| a == "--quick"));
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let rdtsc = rdtsc_ns();
    println!("bare rdtsc: {rdtsc:.2} ns");
    println!(
        "ttrace_snapshots::trigger on the caller's thread (median of 5 runs; each its own process):"
    );
    for (mode, what) in [
        ("merged", "merged into the pending snapshot"),
        (
            "granted",
            "granted: claims the rate, wakes the saver thread (after: 5 ms)",
        ),
    ] {
        let runs: Vec<f64> = (0..5).map(|_| child(mode, quick)).collect();
        let mut sorted = runs.clone();
        sorted.sort_by(f64::total_cmp);
        let median = sorted[2];
        println!(
            "  {what}: {median:.0} ns ({:.1}x rdtsc; min {:.0}, max {:.0})",
            median / rdtsc,
            sorted[0],
            sorted[4]
        );
    }
    let every = every_100ms(quick);
    println!("{every}");
    let idle = child("idle", quick);
    println!(
        "  the saver, idle once it exists (a snapshot granted and saved): {:.3} % of a CPU",
        idle / 1e7
    );
    println!("save a full device (ttrace_snapshots::save_now, into /tmp):");
    save_time(
        "default: 2 CPUs x 16,384 slots, 256 KiB aux",
        2,
        16384,
        256 << 10,
        5,
    );
    if !quick {
        save_time(
            "16 CPUs x 1,048,576 slots, 16 MiB aux",
            16,
            1 << 20,
            16 << 20,
            3,
        );
    }
    println!("following rules (a Follower and a Matcher of `latency request > 5ms`, 2 ms polls backing off to 100 ms idle, on CPU 1; the writer on CPU 0, 262,144-slot rings):");
    for (rate, copy) in [(0.0, false), (1e6, false), (10e6, false), (10e6, true)] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let run = Duration::from_secs(if quick { 1 } else { 3 });
        let Watched {
            cpu,
            events,
            lost,
            matches: fired,
            ..
        } = watch_at(&tmp.path().join("dev"), rate, run, false, copy);
        println!(
            "  {}{}: {:.1} % of a CPU ({:.0} ns per event), {events} events followed, {lost} lost, {fired} matches (a pair made long by a preemption of the writer)",
            match rate {
                0.0 => "idle".to_string(),
                r => format!("{:.0} M events/s", r / 1e6),
            },
            match copy {
                true => ", keeping watch's copy (--before 50ms)",
                false => "",
            },
            cpu.as_secs_f64() * 100.0 / run.as_secs_f64(),
            match events {
                0 => 0.0,
                n => cpu.as_nanos() as f64 / n as f64,
            }
        );
    }
    // The slow request among them: does the rule catch it, every time?
    let runs = 10;
    let mut caught = 0;
    let (mut events, mut lost) = (0, 0);
    let (mut held, mut saves) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let tmp = tempfile::tempdir().expect("tempdir");
        let w = watch_at(
            &tmp.path().join("dev"),
            10e6,
            Duration::from_secs(1),
            true,
            true,
        );
        caught += w.caught as usize;
        (events, lost) = (events + w.events, lost + w.lost);
        held.extend(w.held_ms);
        saves.extend(w.save_ms);
    }
    held.sort_by(f64::total_cmp);
    saves.sort_by(f64::total_cmp);
    println!(
        "  one request of 10 ms among 10 M events/s, {runs} runs of 1 s: caught {caught} of {runs} ({events} events followed, {lost} lost in all); its snapshot, saved from the copy 5 ms after (--before 50ms), holds the writer's ring from {} ms before the match (the device's rings: 26 ms); each save took {} ms on the follower's thread",
        held.iter().map(|h| format!("{h:.1}")).collect::<Vec<_>>().join(", "),
        saves.iter().map(|h| format!("{h:.0}")).collect::<Vec<_>>().join(", ")
    );
}

/// What [`watch_at`] measured.
struct Watched {
    /// The follower's CPU time.
    cpu: Duration,
    /// The events it was given.
    events: u64,
    /// The entries it lost.
    lost: u64,
    /// The rule's matches.
    matches: usize,
    /// Whether the rule caught the slow request.
    caught: bool,
    /// How long before the slow request's match the snapshot saved from the copy holds
    /// the writer's ring (ms), where one was saved.
    held_ms: Option<f64>,
    /// How long that save took on the follower's thread (ms).
    save_ms: Option<f64>,
}

/// A writer on CPU 0 recording request pairs at `rate` events a second (paced in batches
/// of 256; none if 0) for `run`, and a rules follower on CPU 1, as `watch` runs (with
/// `copy`, keeping its copy of the rings for `--before 50ms`). The writer's pairs are
/// immediate: a match is a pair a preemption made long. With `slow`, one request of
/// another thread lasts 10 ms, from the middle of the run: the results say whether the
/// rule caught it and, with `copy`, how far back the copy saved 5 ms after it holds.
fn watch_at(dir: &std::path::Path, rate: f64, run: Duration, slow: bool, copy: bool) -> Watched {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use ttrace_core::{Config, Definition, Kind, Writer};
    let w = Writer::open(&Config {
        ring_slots: 1 << 18,
        cpus: Some(2),
        ..Config::at(dir)
    })
    .expect("device");
    let define = |name, kind| {
        w.device()
            .register_tracepoint(&Definition::untyped(name, kind, 1, "id={id}"))
            .expect("tracepoint")
            .1
    };
    let (entry, exit) = (
        define("request", Kind::Entry),
        define("request_done", Kind::Exit),
    );
    let dev = devttrace::Reader::open(dir).expect("reader");
    let rule: ttrace_reader::rules::Rule = "latency request > 5ms".parse().expect("rule");
    let mut matcher = ttrace_reader::matcher::Matcher::new(vec![rule]);
    let mut f = devttrace::Follower::new(&dev);
    // As `watch --before 50ms` does: --before, --after (5 ms) and the reorder window.
    let (before, after_ms) = (Duration::from_millis(50), Duration::from_millis(5));
    if copy {
        let window = before + after_ms + Duration::from_nanos(devttrace::DEFAULT_WINDOW_NS);
        f.keep_copy(window.as_nanos() as u64, 512 << 20);
    }
    let clock = dev.version().clock;
    let saved = dir.with_extension("moment.ttrace");
    // The slow request's match, and when its snapshot is due.
    let mut due: Option<(u64, u64)> = None;
    let mut matched_at = None;
    let mut save_ms = None;
    let (mut events, mut lost, mut matches) = (0u64, 0u64, 0usize);
    // The slow request's entry was stamped between these two times (device clock).
    let (after, before_entry) = (AtomicU64::new(u64::MAX), AtomicU64::new(0));
    let begin = (run.as_secs_f64() * rate / 2.0) as u64;
    let end = begin + (rate * 0.010) as u64;
    let batch = |n| {
        if slow && (n..n + 256).contains(&begin) {
            // Relaxed: read after the writer thread is joined.
            after.store(w.now(), Relaxed);
            w.emit(entry, 1 << 32 | 3, &[u64::MAX]);
            before_entry.store(w.now(), Relaxed);
        }
        if slow && (n..n + 256).contains(&end) {
            w.emit(exit, 1 << 32 | 3, &[u64::MAX]);
        }
        for i in 0..128 {
            w.emit(entry, 1 << 32 | 2, &[n + i]);
            w.emit(exit, 1 << 32 | 2, &[n + i]);
        }
    };
    let mut fired = Vec::new();
    let cpu0 = ttrace_benches::thread_cpu();
    // Polls as `watch` does with its default interval.
    ttrace_benches::paced_and_polled(run, rate, batch, Duration::from_millis(2), || {
        let p = f.poll().expect("poll");
        let now = matcher.poll(&p, dev.now());
        matches += now.len();
        for m in now {
            if let Some(b) = m.begin {
                fired.push(b);
                // Relaxed: `after` is stored before the entry is emitted, and the entry was
                // read (its pair matched): a stale 0 only delays this to a later match.
                let slow_begin = after.load(Relaxed)..=before_entry.load(Relaxed);
                if copy && due.is_none() && matched_at.is_none() && slow_begin.contains(&b) {
                    due = Some((m.stamp, m.stamp + clock.ns_to_ticks(5_000_000)));
                    f.keep_moment(Some(m.stamp));
                }
            }
        }
        events += p
            .snapshot
            .cpus
            .iter()
            .map(|c| c.events.len() as u64)
            .sum::<u64>();
        lost += p.lost.iter().sum::<u64>();
        let (active, released) = (p.active, p.released_through);
        f.recycle(p);
        // Due, as `watch` saves it: from the copy, on the follower's thread.
        if let Some((stamp, _)) = due.filter(|&(_, at)| released >= at) {
            let cause = ttrace_layouts::snapshot::Cause::new(
                ttrace_layouts::snapshot::CauseKind::Rule,
                "latency request > 5ms",
            );
            let t = Instant::now();
            dev.save_shadow(&saved, &cause, f.copy_around(stamp).expect("a copy"))
                .expect("the snapshot");
            save_ms = Some(t.elapsed().as_secs_f64() * 1e3);
            (due, matched_at) = (None, Some(stamp));
        }
        active
    });
    let cpu = ttrace_benches::thread_cpu() - cpu0;
    // Relaxed: the writer thread was joined.
    let slow_begin = after.load(Relaxed)..=before_entry.load(Relaxed);
    let caught = fired.iter().any(|b| slow_begin.contains(b));
    let held_ms = matched_at.map(|stamp| {
        let snap = devttrace::Reader::open(&saved).expect("the snapshot");
        let ring = snap.cpu(0).expect("the writer's ring");
        let oldest = ring.events.iter().map(|e| e.stamp).min().unwrap_or(stamp);
        clock.ticks_to_ns(stamp.saturating_sub(oldest)) as f64 / 1e6
    });
    Watched {
        cpu,
        events,
        lost,
        matches,
        caught,
        held_ms,
        save_ms,
    }
}

/// Nanoseconds of one bare `rdtsc`.
fn rdtsc_ns() -> f64 {
    let n = 10_000_000u64;
    let start = Instant::now();
    for _ in 0..n {
        std::hint::black_box(devttrace::clock::rdtsc());
    }
    start.elapsed().as_nanos() as f64 / n as f64
}

/// A directory for a device where ttrace puts devices by default: under `/dev/shm`, a
/// tmpfs (on a disk's file system, writes to pages the kernel wrote back fault, and a
/// trigger or a point would measure the file system).
fn device_tempdir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    match shm.is_dir() {
        true => tempfile::tempdir_in(shm),
        false => tempfile::tempdir(),
    }
    .expect("a directory for the device")
}

/// Runs this program as a child measuring `mode`; its nanoseconds per trigger.
fn child(mode: &str, quick: bool) -> f64 {
    let tmp = device_tempdir();
    // Merged: the first trigger's snapshot stays pending for the hour, every later one
    // merges into it.
    let after = match mode {
        "merged" => "3600s",
        _ => "5ms",
    };
    let mut cmd = Command::new(std::env::current_exe().expect("this program"));
    cmd.args(["--trigger-cost", mode])
        .env("TTRACE_DIR", tmp.path().join("dev"))
        .env("TTRACE_SNAPSHOT_DIR", tmp.path().join("snapshots"))
        .env("TTRACE_SNAPSHOT_AFTER", after)
        .env("TTRACE_SNAPSHOT_INTERVAL", "0s")
        .env("TTRACE_SNAPSHOT_KEEP", "2");
    if quick {
        cmd.arg("--quick");
    }
    let out = cmd.output().expect("the child");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("nanoseconds")
}

/// A program tracing 500 k events/s (one in 8 with a 12-byte string, as a service's
/// request with its uri) into a device of the default sizes, that triggers a snapshot every
/// 100 ms with the default policy (one a second, 1 s before, 5 ms after): the bytes each
/// snapshot takes and the CPU its saver's threads use, a second of the run. Its own
/// process (`--trigger-cost every`).
fn every_100ms(quick: bool) -> String {
    let tmp = device_tempdir();
    let out = Command::new(std::env::current_exe().expect("this program"))
        .args(["--trigger-cost", "every"])
        .args(quick.then_some("--quick"))
        .env("TTRACE_DIR", tmp.path().join("dev"))
        .env("TTRACE_SNAPSHOT_DIR", tmp.path().join("snapshots"))
        .env("TTRACE_SNAPSHOT_KEEP", "1000")
        .env("TTRACE_SNAPSHOT_BYTES", "64g")
        .output()
        .expect("the child");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let figures: Vec<f64> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|w| w.parse().expect("a figure"))
        .collect();
    let [secs, cpu_ns, files, bytes, events] = figures[..] else {
        panic!("the child said {figures:?}")
    };
    format!(
        "a trigger every 100 ms, 500 k events/s, default sizes and policy: {files} snapshots in {secs:.1} s, {:.1} MiB each; the saver's threads used {:.2} % of a CPU ({:.0} ms a snapshot); {:.0} k events/s written",
        bytes / files / (1 << 20) as f64,
        cpu_ns / secs / 1e7,
        cpu_ns / files / 1e6,
        events / secs / 1e3
    )
}

/// CPU time (ns) the threads of this process named `ttrace-saver...` have used.
fn saver_cpu_ns() -> u64 {
    let mut ns = 0;
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let dir = task.expect("a task").path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.starts_with("ttrace-saver") {
            let stat = std::fs::read_to_string(dir.join("schedstat")).unwrap_or_default();
            ns += stat
                .split_whitespace()
                .next()
                .and_then(|w| w.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    ns
}

/// In the child, for [`every_100ms`]: the seconds it ran, the saver's CPU ns, the
/// snapshots saved, their bytes, and the events written.
fn trigger_every(quick: bool) {
    use ttrace_core::{Definition, Kind};
    let w = ttrace_core::init(&ttrace_core::Config::from_env().expect("config")).expect("device");
    let (_, word) = w
        .device()
        .register_tracepoint(&Definition::untyped(
            "request",
            Kind::Entry,
            2,
            "id={id} uri={uri:s}",
        ))
        .expect("tracepoint");
    let run = Duration::from_secs(if quick { 2 } else { 6 });
    let start = Instant::now();
    let written = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            ttrace_benches::pin(0);
            let mut written = 0u64;
            ttrace_benches::paced(run, 500e3, |n| {
                for i in 0..256 {
                    let id = n + i;
                    if id % 8 == 0 {
                        let uri = format!("/work/{:06}", id % 1_000_000);
                        let mut strings = ttrace_core::args::Strings::new();
                        strings.pass();
                        strings.push(uri.as_bytes());
                        w.emit_strings(word, 1 << 32 | 2, &[id, 0], &strings);
                    } else {
                        w.emit(word, 1 << 32 | 2, &[id, 0]);
                    }
                }
                written += 256;
            });
            written
        });
        ttrace_benches::pin(1);
        while start.elapsed() < run {
            std::thread::sleep(Duration::from_millis(100));
            ttrace_snapshots::trigger("every 100 ms");
        }
        writer.join().expect("the writer")
    });
    ttrace_snapshots::settle_snapshots();
    let secs = start.elapsed().as_secs_f64();
    let cpu = saver_cpu_ns();
    let dir = std::env::var_os("TTRACE_SNAPSHOT_DIR").expect("TTRACE_SNAPSHOT_DIR");
    let (mut files, mut bytes) = (0u64, 0u64);
    for f in std::fs::read_dir(dir).expect("the snapshots") {
        let f = f.expect("a file");
        if f.path().extension().is_some_and(|x| x == "ttrace") {
            files += 1;
            bytes += f.metadata().expect("its size").len();
        }
    }
    println!("{secs} {cpu} {files} {bytes} {written}");
}

/// In the child: nanoseconds per `trigger` call of `mode` (the first call, which makes the
/// saver and grants, is not counted but for `granted`, whose median call it gives), or,
/// for `idle`, nanoseconds of CPU a second of an idle process whose saver exists.
fn trigger_cost(mode: &str, quick: bool) {
    if mode == "every" {
        return trigger_every(quick);
    }
    ttrace_core::init(&ttrace_core::Config::from_env().expect("config")).expect("device");
    let expect = match mode {
        "merged" => ttrace_snapshots::Asked::Merged,
        _ => ttrace_snapshots::Asked::Granted,
    };
    if mode == "granted" {
        // Each granted call alone: the saver settled (nothing pending) before each. The
        // median call: a call the scheduler interrupted (one in a hundred, for hundreds of
        // microseconds) says nothing of what a trigger costs.
        let n = if quick { 21 } else { 201 };
        let mut calls = Vec::with_capacity(n);
        for _ in 0..n {
            ttrace_snapshots::settle_snapshots();
            // The saver parked again, as it is when a trigger comes after a quiet spell.
            std::thread::sleep(Duration::from_millis(2));
            let start = Instant::now();
            let asked = ttrace_snapshots::trigger("bench");
            calls.push(start.elapsed());
            assert_eq!(asked, expect);
        }
        calls.sort();
        println!("{}", calls[n / 2].as_nanos());
        return;
    }
    if mode == "idle" {
        // The saver exists (a snapshot was granted and saved); the process does nothing
        // else: its CPU time is the saver's looks for a pending snapshot.
        assert_eq!(ttrace_snapshots::trigger("first"), expect);
        ttrace_snapshots::settle_snapshots();
        let span = Duration::from_secs(if quick { 1 } else { 3 });
        let before = ttrace_benches::process_cpu();
        std::thread::sleep(span);
        let used = ttrace_benches::process_cpu() - before;
        println!("{}", used.as_nanos() as f64 / span.as_secs_f64());
        return;
    }
    assert_eq!(
        ttrace_snapshots::trigger("first"),
        ttrace_snapshots::Asked::Granted
    );
    let n = if quick { 10_000 } else { 200_000 };
    let start = Instant::now();
    for _ in 0..n {
        let asked = ttrace_snapshots::trigger("bench");
        debug_assert_eq!(asked, expect);
        std::hint::black_box(asked);
    }
    let ns = start.elapsed().as_nanos() as f64 / n as f64;
    assert_eq!(ttrace_snapshots::trigger("last"), expect);
    println!("{ns}");
}

/// Fills a device of `cpus` x `slots` and times `reps` saves of it.
fn save_time(what: &str, cpus: u32, slots: u64, aux: u64, reps: usize) {
    let tmp = device_tempdir();
    let out = tempfile::tempdir().expect("a directory for the snapshots");
    let dir = tmp.path().join("dev");
    let (rings, aux_bytes) = ttrace_benches::full::fill(&dir, cpus, slots, aux);
    let dev = devttrace::Device::attach(&dir).expect("the device");
    let store = ttrace_snapshots::Store::new(out.path());
    let policy = ttrace_snapshots::Policy {
        max_files: 1,
        ..Default::default()
    };
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..reps {
        let start = Instant::now();
        let info = ttrace_snapshots::save_now(&dev, &store, &policy, "bench").expect("a save");
        times.push(start.elapsed().as_secs_f64() * 1e3);
        bytes = info.saved.bytes;
    }
    times.sort_by(f64::total_cmp);
    println!(
        "  {what}: {:.1} ms median (min {:.1}, max {:.1}) for {:.1} MiB of rings and {:.1} MiB of aux in use, a {:.1} MiB file",
        times[reps / 2],
        times[0],
        times[reps - 1],
        rings as f64 / (1 << 20) as f64,
        aux_bytes as f64 / (1 << 20) as f64,
        bytes as f64 / (1 << 20) as f64
    );
}
