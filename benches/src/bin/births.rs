//! What a thread's and a process's first event cost, next to a steady event and a bare
//! `rdtsc` of the same run.
//!
//! - A thread's first event registers its name (the metadata lock, its owner identity read
//!   from `/proc/thread-self/stat` once, a name record, now and then a compaction of the
//!   names area).
//! - A process's first event also attaches the device and registers the tracepoint and the
//!   process's name; it is measured in fresh child processes (`births --child DIR`).
//! - Many more threads than the names area can name while their events are all in the
//!   rings (a thread-per-connection server): 150,000 short-lived threads, one event each,
//!   into 2 CPUs of 1,048,576-slot rings, in a child process of its own (`births
//!   --many-child DIR N`). It must take less than a minute (a compaction per thread would
//!   take hours), and each event must show its own thread's name or be counted unnamed in
//!   `dump`'s footer: both are checked.
//!
//! `cargo run --release -p ttrace-benches --bin births [-- --quick] [--threads N] [--many N]`

use std::time::Instant;
use ttrace_core::{point, tracepoint};
use ttrace_reader::decode::{dump, TimeFormat};
use ttrace_reader::merge::Filter;

tracepoint!(static BORN: Start = "born", "i={i}");

/// Nanoseconds `f` takes, measured with `Instant` (whose own cost, some 20 ns, is included:
/// compare rows with each other).
fn ns(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_nanos() as f64
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * p) as usize]
}

fn config(dir: &std::path::Path) -> ttrace_core::Config {
    ttrace_core::Config {
        calibration: std::time::Duration::from_millis(2),
        ..ttrace_core::Config::at(dir)
    }
}

/// In a child: attach, first event, second event, in ns, on one line.
fn child(dir: &str) {
    let attach = ns(|| {
        ttrace_core::init(&config(dir.as_ref())).expect("attach");
    });
    let first = ns(|| point!(BORN, 0u64));
    let second = ns(|| point!(BORN, 1u64));
    println!("{attach} {first} {second}");
}

/// Slots of each ring of the device of [`many`].
const MANY_RING_SLOTS: u64 = 1 << 20;

/// Threads of [`many`] alive at once (started together, then joined).
const MANY_WAVE: u64 = 16;

/// `threads` short-lived threads, [`MANY_WAVE`] alive at a time, each named `b<i>` and
/// running `f(i)`; the seconds they took.
fn waves(threads: u64, f: fn(u64)) -> f64 {
    let t = Instant::now();
    for wave in (0..threads).step_by(MANY_WAVE as usize) {
        let handles: Vec<_> = (wave..threads.min(wave + MANY_WAVE))
            .map(|i| {
                std::thread::Builder::new()
                    .name(format!("b{i}"))
                    .spawn(move || f(i))
                    .expect("thread")
            })
            .collect();
        for h in handles {
            h.join().expect("thread");
        }
    }
    t.elapsed().as_secs_f64()
}

/// In a child: a tenth as many threads that record nothing (the bare cost of a thread),
/// then `threads` short-lived threads each writing one event
/// `born(i=<i>)` ([`waves`]) into a device of 2 CPUs of [`MANY_RING_SLOTS`]-slot rings at
/// `dir`; prints the seconds of each, then the names area's compactions, names evicted and
/// dropped, and the slowest first event in ns (one that compacted), on one line.
fn many(dir: &str, threads: u64) {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    static SLOWEST: AtomicU64 = AtomicU64::new(0);
    let bare = waves(threads / 10, |i| {
        std::hint::black_box(i);
    }) * 10.0;
    let dev = ttrace_core::init(&ttrace_core::Config {
        ring_slots: MANY_RING_SLOTS,
        cpus: Some(2),
        ..config(dir.as_ref())
    })
    .expect("device");
    let secs = waves(threads, |i| {
        // Relaxed: a maximum, read once every thread was joined.
        SLOWEST.fetch_max(ns(|| point!(BORN, i)) as u64, Relaxed);
    });
    let h = dev.device().mapping().header();
    println!(
        "{bare} {secs} {} {} {} {}",
        h.names_generation.load(Relaxed),
        dev.device().reader().metadata().names_evicted,
        h.names_dropped.load(Relaxed),
        SLOWEST.load(Relaxed)
    );
}

/// Runs [`many`] in a child process and checks what `dump` shows of it; prints its row.
fn many_case(exe: &str, threads: u64) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("many");
    let t = Instant::now();
    let out = std::process::Command::new(exe)
        .arg("--many-child")
        .arg(&dir)
        .arg(threads.to_string())
        .output()
        .expect("child");
    let wall = t.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8_lossy(&out.stdout);
    let v: Vec<f64> = line
        .split_whitespace()
        .map(|w| w.parse().expect("number"))
        .collect();
    let (bare, secs) = (v[0], v[1]);
    let (compactions, evicted, dropped) = (v[2] as u64, v[3] as u64, v[4] as u64);
    let slowest = v[5] / 1e6;
    // What a reader shows: every event, each named as its own thread or counted unnamed.
    let t = Instant::now();
    let reader = devttrace::Reader::open(&dir).expect("reader");
    let view = devttrace::View::of(&reader, 0).expect("view");
    let mut text = Vec::new();
    dump(
        &view,
        &Filter::default(),
        TimeFormat::Relative,
        None,
        &mut text,
    )
    .expect("dump");
    let dumped = t.elapsed().as_secs_f64();
    let text = String::from_utf8(text).expect("text");
    let (mut events, mut named, mut unnamed) = (0u64, 0u64, 0u64);
    for l in text.lines().filter(|l| l.contains(" born(i=")) {
        let name = &l[l.find(" (").expect("name") + 2..l.find(") born").expect("name")];
        let i = &l[l.find("(i=").expect("i") + 3..l.rfind(')').expect("i")];
        events += 1;
        if name == "?" {
            unnamed += 1;
        } else {
            assert_eq!(
                name,
                format!("b{i}"),
                "an event shows another thread's name"
            );
            named += 1;
        }
    }
    let footer = text.lines().last().expect("footer");
    let counted = |what: &str| -> u64 {
        footer
            .split(", ")
            .find_map(|p| p.strip_suffix(what)?.parse().ok())
            .unwrap_or(0)
    };
    let total: u64 = footer
        .trim_start_matches("# ")
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("the footer's events");
    assert_eq!(
        (events, total),
        (threads, threads),
        "every event read: {footer}"
    );
    assert_eq!(counted(" events of unnamed threads"), unnamed, "{footer}");
    assert_eq!(named + unnamed, total);
    assert!(wall < 60.0, "{threads} threads took {wall:.1} s");
    let us = |s: f64| s * 1e6 / threads as f64;
    println!(
        "# many threads: {threads} threads ({MANY_WAVE} at a time), one event each, into 2 CPUs \
         x {MANY_RING_SLOTS} slots: {secs:.1} s ({:.1} us a thread; {:.1} us a bare thread), \
         {wall:.1} s with the child's start and device; {compactions} compactions (slowest \
         first event {slowest:.1} ms), {evicted} names evicted, {dropped} dropped; dump \
         {dumped:.1} s: {named} events named as their thread, {unnamed} counted unnamed; \
         footer: {footer}",
        us(secs),
        us(bare)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, dir] = args.as_slice() {
        if flag == "--child" {
            return child(dir);
        }
    }
    if let [_, flag, dir, n] = args.as_slice() {
        if flag == "--many-child" {
            return many(dir, n.parse().expect("threads"));
        }
    }
    let quick = args.iter().any(|a| a == "--quick");
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("dev");
    let dev = ttrace_core::init(&config(&dir)).expect("device");
    // The bare floor and a steady event, in this run.
    let reps = if quick { 100_000 } else { 10_000_000 };
    let rdtsc = ns(|| {
        for _ in 0..reps {
            // SAFETY: rdtsc has no preconditions on x86-64.
            std::hint::black_box(unsafe { core::arch::x86_64::_rdtsc() });
        }
    }) / reps as f64;
    point!(BORN, 0u64);
    let steady = ns(|| {
        for i in 0..reps {
            point!(BORN, i);
        }
    }) / reps as f64;
    // Threads, one alive at a time (the kernel reuses their tids as it would).
    let threads = args
        .iter()
        .position(|a| a == "--threads")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(if quick { 2_000 } else { 100_000 });
    let mut first = Vec::with_capacity(threads);
    let mut second = Vec::with_capacity(threads);
    for _ in 0..threads {
        let (a, b) = std::thread::spawn(|| (ns(|| point!(BORN, 1u64)), ns(|| point!(BORN, 2u64))))
            .join()
            .expect("thread");
        first.push(a);
        second.push(b);
    }
    let slowest = first.iter().copied().fold(0f64, f64::max);
    let mean = first.iter().sum::<f64>() / first.len() as f64;
    let h = dev.device().mapping().header();
    let compactions = h
        .names_generation
        .load(std::sync::atomic::Ordering::Relaxed);
    // Processes, one at a time.
    let procs = if quick { 20 } else { 200 };
    let (mut attach, mut pfirst, mut psecond) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..procs {
        let out = std::process::Command::new(&args[0])
            .arg("--child")
            .arg(&dir)
            .output()
            .expect("child");
        let line = String::from_utf8_lossy(&out.stdout);
        let v: Vec<f64> = line
            .split_whitespace()
            .map(|w| w.parse().expect("ns"))
            .collect();
        attach.push(v[0]);
        pfirst.push(v[1]);
        psecond.push(v[2]);
    }
    println!("# births: {threads} threads, {procs} processes; ns (median, p99); ratio to a bare rdtsc ({rdtsc:.1} ns)");
    println!("| what | median ns | p99 ns | median / rdtsc |");
    println!("|---|---:|---:|---:|");
    let row = |what: &str, v: &mut Vec<f64>| {
        let (m, p) = (pct(v, 0.5), pct(v, 0.99));
        println!("| {what} | {m:.0} | {p:.0} | {:.0}x |", m / rdtsc);
    };
    println!(
        "| steady event (loop) | {steady:.1} | - | {:.2}x |",
        steady / rdtsc
    );
    row("thread: first event (names the thread)", &mut first);
    row("thread: second event", &mut second);
    row("process: attach the device", &mut attach);
    row(
        "process: first event (tracepoint, process and thread names)",
        &mut pfirst,
    );
    row("process: second event", &mut psecond);
    println!("# threads' first events: mean {mean:.0} ns, slowest {slowest:.0} ns (a compaction)");
    println!(
        "# names area: {compactions} compactions, {} names reclaimed, {} evicted, {} dropped",
        h.names_reclaimed.load(std::sync::atomic::Ordering::Relaxed),
        dev.device().reader().metadata().names_evicted,
        h.names_dropped.load(std::sync::atomic::Ordering::Relaxed)
    );
    let many = args
        .iter()
        .position(|a| a == "--many")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(if quick { 20_000 } else { 150_000 });
    many_case(&args[0], many);
}
