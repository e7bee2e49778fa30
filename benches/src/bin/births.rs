//! What a thread's and a process's first event cost, next to a steady event and a bare
//! `rdtsc` of the same run.
//!
//! - A thread's first event registers its name (the metadata lock, its owner identity read
//!   from `/proc/thread-self/stat` once, a name record, now and then a compaction of the
//!   names area).
//! - A process's first event also attaches the device and registers the tracepoint and the
//!   process's name; it is measured in fresh child processes (`births --child DIR`).
//!
//! `cargo run --release -p ttrace-benches --bin births [-- --quick] [--threads N]`

use std::time::Instant;
use ttrace_core::{point, tracepoint};

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

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, dir] = args.as_slice() {
        if flag == "--child" {
            return child(dir);
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
    let h = dev.mapping().header();
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
        "# names area: {compactions} compactions, {} names reclaimed, {} dropped",
        h.names_reclaimed.load(std::sync::atomic::Ordering::Relaxed),
        h.names_dropped.load(std::sync::atomic::Ordering::Relaxed)
    );
}
