//! The measurement harness: tight loops timed with a monotonic clock, repeated (every row
//! once per round, so that noise falls on all rows alike), summarized as median, min and max,
//! printed as a table of ratios to a bare `rdtsc` of the same run; and the peer tracers set
//! up the way their users would for the cheapest recording.

pub mod peers;
pub mod full;

use serde::Serialize;
use std::time::Instant;

/// Median, minimum and maximum nanoseconds per iteration over the repetitions.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Figure {
    /// Median ns per iteration.
    pub median: f64,
    /// Fastest repetition.
    pub min: f64,
    /// Slowest repetition.
    pub max: f64,
}

impl Figure {
    /// The figure of per-repetition timings (ns per iteration).
    pub fn of(mut v: Vec<f64>) -> Figure {
        v.sort_by(|a, b| a.total_cmp(b));
        Figure {
            median: v[v.len() / 2],
            min: v[0],
            max: v[v.len() - 1],
        }
    }
}

/// One repetition of `f` on `threads` threads at once, thread `k` pinned to CPU `k` (as far
/// as the machine has CPUs) and running `make(k)`: each thread warms up, waits for the
/// others, then times `iters` calls. Returns the slowest thread's ns per call: the per-thread
/// cost while all run.
pub fn threads_once<F>(threads: usize, iters: u64, make: &(dyn Fn(usize) -> F + Sync)) -> f64
where
    F: FnMut(u64) + Send,
{
    // The machine's CPUs, not the calling thread's affinity (which may be one CPU).
    let cpus = devttrace::config::configured_cpus() as usize;
    let on: Vec<usize> = (0..threads).map(|k| k % cpus).collect();
    threads_on(&on, iters, make)
}

/// One repetition of `f` on one thread per entry of `cpus`, thread `k` pinned to CPU
/// `cpus[k]` and then running `make(k)`: each thread warms up (`iters / 8` calls), waits for
/// the others, then times `iters` calls. Returns the slowest thread's ns per call: the
/// per-thread cost while all run.
pub fn threads_on<F>(cpus: &[usize], iters: u64, make: &(dyn Fn(usize) -> F + Sync)) -> f64
where
    F: FnMut(u64) + Send,
{
    let barrier = std::sync::Barrier::new(cpus.len());
    std::thread::scope(|s| {
        let handles: Vec<_> = cpus
            .iter()
            .enumerate()
            .map(|(k, &cpu)| {
                let barrier = &barrier;
                s.spawn(move || {
                    // Pinned first, so that what `make` allocates is first touched there.
                    pin(cpu);
                    let mut f = make(k);
                    for i in 0..iters / 8 {
                        f(i);
                    }
                    barrier.wait();
                    let t = Instant::now();
                    for i in 0..iters {
                        f(i);
                    }
                    t.elapsed().as_nanos() as f64 / iters as f64
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("bench thread"))
            .fold(0.0, f64::max)
    })
}

/// Calls `batch(n)` for `run`, paced so that by each moment `rate` x the time elapsed
/// events have been written, each call writing 256 events numbered from `n`; with a rate of
/// 0, writes nothing and idles. The writer side of the follower benchmarks.
pub fn paced(run: std::time::Duration, rate: f64, mut batch: impl FnMut(u64)) {
    let start = std::time::Instant::now();
    let mut n = 0u64;
    while start.elapsed() < run {
        if rate == 0.0 {
            std::thread::sleep(std::time::Duration::from_millis(10));
        } else if (n as f64) < start.elapsed().as_secs_f64() * rate {
            batch(n);
            n += 256;
        } else {
            std::hint::spin_loop();
        }
    }
}

/// A writer and a follower, as the follower benchmarks run them: `batch` paced at `rate`
/// for `run` on CPU 0 ([`paced`]), while on CPU 1 (the calling thread) `poll` runs as a
/// live reader polls: every `interval` while it finds events (it says whether it did),
/// backing off to 100 ms while it finds none, until the writer is done and a poll finds
/// nothing more.
pub fn paced_and_polled(
    run: std::time::Duration,
    rate: f64,
    batch: impl FnMut(u64) + Send,
    interval: std::time::Duration,
    mut poll: impl FnMut() -> bool,
) {
    use std::sync::atomic::{AtomicBool, Ordering::*};
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            pin(0);
            paced(run, rate, batch);
            // Release: the writer's events are written before the follower's last poll.
            done.store(true, Release);
        });
        pin(1);
        let mut sleep = interval;
        loop {
            // Acquire: pairs with the Release store above.
            let finished = done.load(Acquire);
            let active = poll();
            if finished && !active {
                return;
            }
            sleep = match active {
                true => interval,
                false => (sleep * 2).min(std::time::Duration::from_millis(100)),
            };
            std::thread::sleep(sleep);
        }
    })
}

/// CPU time the calling thread has used.
pub fn thread_cpu() -> std::time::Duration {
    cpu_time(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time every thread of the process has used.
pub fn process_cpu() -> std::time::Duration {
    cpu_time(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// The time of the CPU-time clock `clock`.
fn cpu_time(clock: libc::clockid_t) -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; `clock` is one of the constants above.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The CPUs the calling thread may run on (its affinity mask, in increasing order): the
/// CPUs a benchmark can pin its threads to. Call it before pinning the thread.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes inside it.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return (0..devttrace::config::configured_cpus() as usize).collect();
        }
        set
    };
    (0..8 * std::mem::size_of::<libc::cpu_set_t>())
        // SAFETY: CPU_ISSET reads inside the set, `cpu` being below its size in bits.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// One repetition of a row: returns ns per iteration.
type Rep = Box<dyn FnMut() -> f64>;

/// A set of measurements run together: each repetition runs every row once, in turn, so
/// that the machine's slow moments (these machines are shared) fall on all rows alike and
/// the ratios to the first row, the floor, hold.
#[derive(Default)]
pub struct Bench {
    rows: Vec<(String, Rep)>,
}

impl Bench {
    /// A row timing `iters` calls of `f` per repetition.
    pub fn add(&mut self, path: impl Into<String>, iters: u64, mut f: impl FnMut(u64) + 'static) {
        self.rows.push((
            path.into(),
            Box::new(move || {
                let t = Instant::now();
                for i in 0..iters {
                    f(i);
                }
                t.elapsed().as_nanos() as f64 / iters as f64
            }),
        ));
    }

    /// A row whose repetition is `rep` (which returns its ns per iteration).
    pub fn add_rep(&mut self, path: impl Into<String>, rep: impl FnMut() -> f64 + 'static) {
        self.rows.push((path.into(), Box::new(rep)));
    }

    /// Runs one warm-up repetition of every row, then `reps` rounds, and returns the table
    /// (ratios to the first row).
    pub fn run(mut self, reps: usize) -> Table {
        for (_, rep) in &mut self.rows {
            rep();
        }
        let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(reps); self.rows.len()];
        for _ in 0..reps {
            for ((_, rep), t) in self.rows.iter_mut().zip(&mut times) {
                t.push(rep());
            }
        }
        let mut table = Table::default();
        for ((path, _), t) in self.rows.into_iter().zip(times) {
            table.row(path, Figure::of(t));
        }
        table
    }
}

pub use ttrace_reader::demo::pin;

/// Installs the process's device in a fresh temporary directory (kept for the life of the
/// process), with the default sizes and one ring per CPU, and detects the CPU-id source.
pub fn device() -> &'static ttrace_core::Writer {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| tempfile::tempdir().expect("tempdir"));
    let dev = ttrace_core::init(&ttrace_core::Config::at(dir.path().join("dev"))).expect("device");
    ttrace_core::cpu::detect();
    dev
}

/// One row of a results table.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// What was measured.
    pub path: String,
    /// The figures, ns per event (per thread for multi-threaded rows).
    #[serde(flatten)]
    pub figure: Figure,
    /// Median over the bare `rdtsc` median of the same run.
    pub x_rdtsc: f64,
}

/// A results table: rows, each with its ratio to the run's bare `rdtsc` row.
#[derive(Debug, Default, Serialize)]
pub struct Table {
    /// The run's facts (CPU source, clock).
    pub notes: Vec<String>,
    /// The rows, in order.
    pub rows: Vec<Row>,
    #[serde(skip)]
    floor: Option<f64>,
}

impl Table {
    /// Adds a row; the first one is the floor the ratios refer to.
    pub fn row(&mut self, path: impl Into<String>, figure: Figure) {
        let floor = *self.floor.get_or_insert(figure.median);
        self.rows.push(Row {
            path: path.into(),
            figure,
            x_rdtsc: figure.median / floor,
        });
    }

    /// The table as text: `path  median ns  min  max  x rdtsc` (the format of
    /// `benches/peers/lttng.sh` too).
    pub fn text(&self) -> String {
        let mut s: String = self.notes.iter().map(|n| format!("{n}\n")).collect();
        s += &format!(
            "{:<36}{:>10}{:>10}{:>10}{:>9}\n",
            "path", "median ns", "min", "max", "x rdtsc"
        );
        for r in &self.rows {
            s += &format!(
                "{:<36}{:>10.2}{:>10.2}{:>10.2}{:>8.2}x\n",
                r.path, r.figure.median, r.figure.min, r.figure.max, r.x_rdtsc
            );
        }
        s
    }

    /// The table as JSON.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a table serializes")
    }
}
