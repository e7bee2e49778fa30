//! What recording context switches costs (`ttrace_core::switches`, `TTRACE_SCHED=1`): the
//! same workload with switches recorded and without, in child processes of the same run,
//! alternated.
//!
//! The workload: `--threads` traced threads (5) each sleeping 1 ms in a loop for
//! `--seconds` (3): about 1,000 sleeps a second each, every sleep a switch out and a switch
//! in, so 10,000 switches a second in all. Measured, per mode, from the kernel's own
//! accounting (`/proc/self/task/*/schedstat`: time on the CPU, in ns):
//! - the workload threads' CPU per sleep (what the kernel's writing of the records adds to
//!   each switch, and the first event's `perf_event_open`);
//! - the drain thread's CPU, as a share of one CPU, and per switch it recorded;
//! - the switches recorded (`sched_out` and `sched_in` events in the device).
//!
//! Memory per observed thread: one descriptor and a mapping of (1 + `DATA_PAGES`) pages.
//!
//! `cargo run --release -p ttrace-benches --bin switches [-- --quick] [--threads N] [--seconds S] [--rounds R]`

use std::time::{Duration, Instant};
use ttrace_core::{point, switches, tracepoint};

tracepoint!(static MARK: Start = "bench_switch_thread", "i={i}");

/// CPU time of the thread `tid` of this process so far, in ns (`schedstat`'s first field).
fn cpu_ns(tid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The tid of this process's thread named `name`, if any.
fn thread_named(name: &str) -> Option<String> {
    std::fs::read_dir("/proc/self/task").ok()?.find_map(|t| {
        let tid = t.ok()?.file_name().into_string().ok()?;
        let comm = std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).ok()?;
        (comm.trim() == name).then_some(tid)
    })
}

/// One mode's figures.
#[derive(Clone, Copy, Debug, Default)]
struct Figures {
    /// Workload threads' CPU per sleep, ns.
    per_sleep_ns: f64,
    /// Sleeps a second, all threads.
    sleeps_per_s: f64,
    /// Switches recorded a second.
    switches_per_s: f64,
    /// The drain thread's CPU, as a share of one CPU.
    drain_cpu: f64,
    /// The drain thread's CPU per switch recorded, ns.
    drain_per_switch_ns: f64,
}

/// The workload in this process, switches recorded or not: prints its figures as one line.
fn child(on: bool, threads: usize, seconds: f64) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = ttrace_core::Config {
        calibration: Duration::from_millis(20),
        switches: on,
        cpus: None,
        ..ttrace_core::Config::at(tmp.path().join("dev"))
    };
    let dev = ttrace_core::init(&config).expect("device");
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let drain_before = std::sync::OnceLock::new();
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            std::thread::spawn(move || {
                point!(MARK, i as u64); // named, observed
                                        // SAFETY: gettid has no memory effects.
                let tid = unsafe { libc::gettid() }.to_string();
                let before = cpu_ns(&tid);
                let mut sleeps = 0u64;
                while Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(1));
                    sleeps += 1;
                }
                (cpu_ns(&tid) - before, sleeps)
            })
        })
        .collect();
    // The drain starts with the first observed thread.
    let drain = loop {
        if !on || start.elapsed() > Duration::from_secs(1) {
            break None;
        }
        if let Some(t) = thread_named("ttrace-switches") {
            break Some(t);
        }
        std::thread::yield_now();
    };
    if let Some(t) = &drain {
        let _ = drain_before.set(cpu_ns(t));
    }
    let drain_start = Instant::now();
    let (mut cpu, mut sleeps) = (0u64, 0u64);
    for h in handles {
        let (c, s) = h.join().expect("worker");
        cpu += c;
        sleeps += s;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let drain_ns = drain
        .as_ref()
        .map_or(0, |t| cpu_ns(t) - drain_before.get().copied().unwrap_or(0));
    let drain_elapsed = drain_start.elapsed().as_secs_f64();
    switches::flush();
    let meta = dev.device().reader().metadata();
    let recorded = (0..dev.device().mapping().num_rings())
        .flat_map(|r| dev.device().mapping().ring(r).reader().snapshot().events)
        .filter(|e| {
            meta.tracepoints
                .get(e.type_word.tracepoint() as usize)
                .is_some_and(|t| t.name == "sched_out" || t.name == "sched_in")
        })
        .count() as f64;
    let f = Figures {
        per_sleep_ns: cpu as f64 / sleeps.max(1) as f64,
        sleeps_per_s: sleeps as f64 / elapsed,
        switches_per_s: recorded / elapsed,
        drain_cpu: drain_ns as f64 / 1e9 / drain_elapsed,
        drain_per_switch_ns: drain_ns as f64 / recorded.max(1.0),
    };
    println!(
        "{} {} {} {} {}",
        f.per_sleep_ns, f.sleeps_per_s, f.switches_per_s, f.drain_cpu, f.drain_per_switch_ns
    );
}

/// Runs one mode in a child process.
fn run(on: bool, threads: usize, seconds: f64) -> Figures {
    let out = std::process::Command::new(std::env::current_exe().expect("this program"))
        .args([
            "--child",
            if on { "on" } else { "off" },
            &threads.to_string(),
            &seconds.to_string(),
        ])
        .output()
        .expect("child");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Vec<f64> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|w| w.parse().expect("a figure"))
        .collect();
    Figures {
        per_sleep_ns: v[0],
        sleeps_per_s: v[1],
        switches_per_s: v[2],
        drain_cpu: v[3],
        drain_per_switch_ns: v[4],
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        let on = args.get(1).map(String::as_str) == Some("on");
        let threads = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(5);
        let seconds = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(3.0);
        child(on, threads, seconds);
        return;
    }
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map(|v| {
                v.parse::<f64>().unwrap_or_else(|_| {
                    eprintln!("switches: {name} {v}: not a number");
                    std::process::exit(2)
                })
            })
    };
    let quick = args.iter().any(|a| a == "--quick");
    let threads = value("--threads").unwrap_or(5.0) as usize;
    let seconds = value("--seconds").unwrap_or(if quick { 0.5 } else { 3.0 });
    let rounds = value("--rounds").unwrap_or(if quick { 1.0 } else { 5.0 }) as usize;
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        off.push(run(false, threads, seconds));
        on.push(run(true, threads, seconds));
    }
    let m = |v: &[Figures], f: fn(&Figures) -> f64| median(v.iter().map(f).collect());
    println!(
        "{threads} threads sleeping 1 ms in a loop, {seconds} s, {rounds} rounds alternated (medians)"
    );
    println!("{:<28}{:>16}{:>16}", "", "switches off", "switches on");
    println!(
        "{:<28}{:>16.0}{:>16.0}",
        "sleeps a second",
        m(&off, |f| f.sleeps_per_s),
        m(&on, |f| f.sleeps_per_s)
    );
    println!(
        "{:<28}{:>16.0}{:>16.0}",
        "thread CPU per sleep, ns",
        m(&off, |f| f.per_sleep_ns),
        m(&on, |f| f.per_sleep_ns)
    );
    println!(
        "{:<28}{:>16}{:>16.0}",
        "switches recorded a second",
        "-",
        m(&on, |f| f.switches_per_s)
    );
    println!(
        "{:<28}{:>16}{:>15.2}%",
        "drain thread CPU",
        "-",
        100.0 * m(&on, |f| f.drain_cpu)
    );
    println!(
        "{:<28}{:>16}{:>16.0}",
        "drain CPU per switch, ns",
        "-",
        m(&on, |f| f.drain_per_switch_ns)
    );
    // SAFETY: sysconf has no memory effects.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    println!(
        "memory per observed thread: one descriptor and {} KiB mapped ({} pages of records and one of control)",
        (1 + switches::DATA_PAGES) * page / 1024,
        switches::DATA_PAGES
    );
}
