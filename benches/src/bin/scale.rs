//! Does recording scale across CPUs? Every writer path runs on 1, 2, 4, 8, ... threads up to
//! all the CPUs this process may use (and that exact count when it is not a power of two),
//! thread `k` pinned to the `k`-th of those CPUs, so that each writes its own CPU's ring.
//! A bare `rdtsc` loop runs at every thread count in the same run: it is the floor of any
//! point that takes a timestamp, and it shows what the machine itself does to a loop when
//! more of its CPUs are busy (SMT siblings, a shared host, frequency).
//!
//! `cargo run --release -p ttrace-benches --bin scale [-- --quick] [--json]
//! [--max-threads N] [--rounds N]`
//!
//! Each cell (a row at a thread count) is one repetition of `threads_on`: every thread warms
//! up, waits for the others, then times its own loop while they run theirs; the cell's figure
//! is the slowest thread's ns per iteration, the per-thread cost. A first pass runs every cell
//! once as a warm-up and sets its iteration count (the row's own, fewer if one repetition
//! would take more than a fixed time, as the contended rows do on many threads). Then each
//! round runs every cell once, thread count by thread count, so that the machine's slow
//! moments fall on all rows alike. How to read the tables:
//!
//! - first table: the median over the rounds, in ns, and its ratio to the bare `rdtsc` at the
//!   same thread count (`1.14x`: the point costs 14 % more than reading the clock);
//! - second table: the same median over the same row's on 1 thread (`1.00x`: the path scales
//!   perfectly; `2.00x`: each thread runs at half speed). Compare with the `rdtsc` row's: what
//!   the floor loses, the machine lost, not the tracer.
//!
//! The `model` row is what a ring write can cost at best: a per-thread ring (no sharing, so
//! no locked instruction), a timestamp, the slot marked as being written, seven words and the
//! stamp published by a Release store. The gap between it and the `enabled point, 5 words`
//! row is the price of what ttrace does besides: per-CPU rings that any thread on the CPU may
//! write (a restartable sequence, or on the shared rings a locked reservation and a locked
//! claim), the tracepoint's enabled word and the thread's context. The first line says which
//! rings this run's points write; `TTRACE_NO_RSEQ=1` measures the shared ones.

use serde::Serialize;
use std::cell::Cell;
use std::hint::black_box;
use std::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::Release};
use ttrace_benches::{threads_on, Figure};
use ttrace_core::{point, tracepoint};

tracepoint!(static P0: Start = "bench_p0", "");
tracepoint!(static P1: Start = "bench_p1", "a={a}");
tracepoint!(static P5: Start = "bench_p5", "a={a} b={b} c={c} d={d} e={e}");
tracepoint!(static P12: Start = "bench_p12", "{a}{b}{c}{d}{e}{f}{g}{h}{i}{j}{k}{l}");
tracepoint!(static PS: Start = "bench_str", "s={s:s}");
tracepoint!(static OFF: Start = "bench_off", "a={a}");

const USAGE: &str = "usage: scale [--quick] [--json] [--max-threads N] [--rounds N]";

/// Iterations of a 1-thread row whose iteration costs about one `rdtsc` (other rows scale it).
const ITERS: u64 = 5_000_000;
const QUICK_ITERS: u64 = 100_000;
/// The most one repetition of a cell may take (its iteration count is cut to fit).
const BUDGET_NS: f64 = 100e6;
const QUICK_BUDGET_NS: f64 = 5e6;

/// The command line.
struct Options {
    quick: bool,
    json: bool,
    max_threads: Option<usize>,
    rounds: Option<usize>,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        quick: false,
        json: false,
        max_threads: None,
        rounds: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--json" => o.json = true,
            "--max-threads" => o.max_threads = Some(count(&a, args.next())?),
            "--rounds" => o.rounds = Some(count(&a, args.next())?),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(format!("unknown argument {a:?}")),
        }
    }
    Ok(o)
}

/// The positive number that follows `flag`.
fn count(flag: &str, value: Option<String>) -> Result<usize, String> {
    match value.as_deref().map(str::parse::<usize>) {
        Some(Ok(n)) if n > 0 => Ok(n),
        _ => Err(format!("{flag} needs a positive number")),
    }
}

/// 1, 2, 4, ... up to `max`, and `max` itself.
fn thread_counts(max: usize) -> Vec<usize> {
    let mut v: Vec<usize> = std::iter::successors(Some(1), |&n| Some(n * 2))
        .take_while(|&n| n <= max)
        .collect();
    if v.last() != Some(&max) {
        v.push(max);
    }
    v
}

// ---- the model: a ring write without sharing ----

/// Slots in the model ring: as many as in each of the device's rings (set in `main` before any
/// thread writes), so that both write over the same memory footprint. A power of two.
static MODEL_SLOTS: AtomicUsize = AtomicUsize::new(0);

/// A 64-byte slot: a stamp word, then seven payload words.
#[derive(Default)]
#[repr(C, align(64))]
struct ModelSlot([AtomicU64; 8]);

/// The thread's own ring and its next position.
struct ModelRing {
    slots: Box<[ModelSlot]>,
    mask: usize,
    next: Cell<u64>,
}

impl ModelRing {
    fn new() -> ModelRing {
        // Relaxed: `main` stores the size before it spawns the threads that read it, and the
        // spawn orders the store before the thread's first instruction.
        let n = MODEL_SLOTS.load(Relaxed);
        assert!(n.is_power_of_two(), "the model ring's size is set first");
        ModelRing {
            slots: (0..n).map(|_| ModelSlot::default()).collect(),
            mask: n - 1,
            next: Cell::new(0),
        }
    }
}

thread_local! {
    static MODEL: ModelRing = ModelRing::new();
}

/// Marks a slot as being written (no timestamp is all ones).
const WRITING: u64 = u64::MAX;

/// One event into the thread's model ring: a timestamp, 8 plain stores (the mark, then the
/// seven payload words), and the Release store of the stamp that publishes them.
#[inline(always)]
fn model_write(words: &[u64; 7]) {
    MODEL.with(|ring| {
        let pos = ring.next.get();
        ring.next.set(pos + 1);
        let slot = &ring.slots[pos as usize & ring.mask].0;
        let stamp = ttrace_core::clock::rdtsc();
        slot[0].store(WRITING, Relaxed);
        // Orders the mark before the payload (a compiler barrier on x86-64).
        fence(Release);
        for (dst, &w) in slot[1..].iter().zip(words) {
            dst.store(w, Relaxed);
        }
        slot[0].store(stamp, Release);
    })
}

// ---- the rows ----

/// One repetition of a row on threads pinned to these CPUs, with this many iterations per
/// thread; returns the slowest thread's ns per iteration.
type Rep = Box<dyn Fn(&[usize], u64) -> f64>;

/// A writer path, measured at every thread count.
struct Row {
    path: String,
    /// Iterations per repetition (before the time budget cuts them).
    iters: u64,
    rep: Rep,
}

/// A row whose thread `k` runs `make(k)` in its loop (each row monomorphized: no call through
/// a pointer in the timed loop).
fn row<F>(path: impl Into<String>, iters: u64, make: impl Fn(usize) -> F + Sync + 'static) -> Row
where
    F: FnMut(u64) + Send,
{
    Row {
        path: path.into(),
        iters,
        rep: Box::new(move |cpus, iters| threads_on(cpus, iters, &make)),
    }
}

/// The rows, the floor first. `n` is the iteration count of an `rdtsc`-sized row.
///
/// Each loop body is `#[inline(always)]`: the point is inlined into the timed loop, as into
/// the user's code (LLVM would otherwise call the bigger bodies, and a call costs more than
/// a disabled point).
fn rows(n: u64) -> Vec<Row> {
    let w5 = ttrace_layouts::entry::TypeWord::new(ttrace_core::Kind::Start, 5, 0).0;
    let mut v = vec![
        row("bare rdtsc", n, |_| {
            #[inline(always)]
            |_| {
                black_box(ttrace_core::clock::rdtsc());
            }
        }),
        row("model: own ring, 5 words", n, move |k| {
            #[inline(always)]
            move |i| model_write(&[w5, k as u64, i, i, i, i, i])
        }),
        row("disabled point", n * 4, |_| {
            #[inline(always)]
            |i| point!(OFF, black_box(i))
        }),
        row("enabled point, 0 words", n, |_| {
            #[inline(always)]
            |_| point!(P0)
        }),
        row("enabled point, 1 word", n, |_| {
            #[inline(always)]
            |i| point!(P1, i)
        }),
        row("enabled point, 5 words", n, |_| {
            #[inline(always)]
            |i| point!(P5, i, i, i, i, i)
        }),
        row("point + continuation, 12 words", n, |_| {
            #[inline(always)]
            |i| point!(P12, i, i, i, i, i, i, i, i, i, i, i, i)
        }),
    ];
    for len in [16, 64, 1024] {
        let iters = if len > 64 { n / 16 } else { n / 4 };
        v.push(row(
            format!("point + aux string, {len} bytes"),
            iters,
            move |_| {
                let s = "x".repeat(len);
                #[inline(always)]
                move |_| point!(PS, s.as_str())
            },
        ));
    }
    v
}

// ---- the measurement ----

/// ns per iteration of every cell, `[row][thread count][round]`.
type Times = Vec<Vec<Vec<f64>>>;

/// The warm-up pass: runs every cell once and returns its iteration count, `[row][thread
/// count]`: the row's own, or fewer where one repetition would take more than `budget_ns`.
fn warm_up(rows: &[Row], counts: &[usize], cpus: &[usize], budget_ns: f64) -> Vec<Vec<u64>> {
    rows.iter()
        .map(|r| {
            counts
                .iter()
                .map(|&t| {
                    let ns = (r.rep)(&cpus[..t], r.iters);
                    let fit = (budget_ns / ns.max(0.01)) as u64;
                    fit.clamp(r.iters.min(1_000), r.iters)
                })
                .collect()
        })
        .collect()
}

/// `rounds` rounds, each running every cell once, thread count by thread count.
fn measure(
    rows: &[Row],
    counts: &[usize],
    cpus: &[usize],
    iters: &[Vec<u64>],
    rounds: usize,
) -> Times {
    let mut times: Times = vec![vec![Vec::with_capacity(rounds); counts.len()]; rows.len()];
    for _ in 0..rounds {
        for (c, &t) in counts.iter().enumerate() {
            for (r, row) in rows.iter().enumerate() {
                times[r][c].push((row.rep)(&cpus[..t], iters[r][c]));
            }
        }
    }
    times
}

// ---- the report ----

/// What the figures were measured on.
#[derive(Serialize)]
struct Machine {
    cpu_model: String,
    /// CPUs this process may run on (the most threads a row runs on).
    cpus: usize,
    configured_cpus: u32,
    cpu_source: String,
    /// The rings the points write: `restartable` (rseq) or `shared` (atomic).
    rings: String,
    clock: String,
    tsc_hz: u64,
}

/// One row at one thread count.
#[derive(Serialize)]
struct CellReport {
    threads: usize,
    /// Iterations per thread and repetition.
    iters: u64,
    /// ns per iteration of the slowest thread: median, fastest and slowest round.
    #[serde(flatten)]
    figure: Figure,
    /// Median over the bare `rdtsc` median at the same thread count.
    x_rdtsc: f64,
    /// Median over the same row's median on 1 thread.
    x_1thread: f64,
}

#[derive(Serialize)]
struct RowReport {
    path: String,
    cells: Vec<CellReport>,
}

#[derive(Serialize)]
struct Report {
    machine: Machine,
    rounds: usize,
    threads: Vec<usize>,
    rows: Vec<RowReport>,
}

/// The model name of the first CPU in `/proc/cpuinfo`.
fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("model name")?.split_once(':'))
        .map_or("unknown CPU".into(), |(_, m)| m.trim().to_string())
}

fn machine(dev: &ttrace_core::Writer, cpus: usize) -> Machine {
    Machine {
        cpu_model: cpu_model(),
        cpus,
        configured_cpus: devttrace::config::configured_cpus(),
        cpu_source: format!("{:?}", ttrace_core::cpu::detect()),
        rings: if dev.restartable() {
            "restartable"
        } else {
            "shared"
        }
        .into(),
        clock: format!("{:?}", dev.device().mapping().clock()),
        tsc_hz: dev.device().mapping().header().tsc_hz,
    }
}

/// The figures of every cell, with their ratios to the floor (row 0) and to 1 thread
/// (column 0).
fn report(
    machine: Machine,
    rows: &[Row],
    counts: &[usize],
    iters: &[Vec<u64>],
    times: Times,
    rounds: usize,
) -> Report {
    let figures: Vec<Vec<Figure>> = times
        .into_iter()
        .map(|row| row.into_iter().map(Figure::of).collect())
        .collect();
    let floor = &figures[0];
    let rows = rows
        .iter()
        .zip(&figures)
        .zip(iters)
        .map(|((row, figs), iters)| RowReport {
            path: row.path.clone(),
            cells: (0..counts.len())
                .map(|c| CellReport {
                    threads: counts[c],
                    iters: iters[c],
                    figure: figs[c],
                    x_rdtsc: figs[c].median / floor[c].median,
                    x_1thread: figs[c].median / figs[0].median,
                })
                .collect(),
        })
        .collect();
    Report {
        machine,
        rounds,
        threads: counts.to_vec(),
        rows,
    }
}

/// Width of the path column.
const PATH_WIDTH: usize = 32;

/// The machine line, then two tables: ns and ratio to `rdtsc`, then ratio to 1 thread.
fn text(r: &Report) -> String {
    let mut s = machine_line(&r.machine, r.rounds);
    s += "\nns per iteration and thread (slowest thread, median of the rounds), \
          x bare rdtsc on as many threads\n";
    s += &table(r, 18, |c| {
        format!("{:>10.2} {:>6.2}x", c.figure.median, c.x_rdtsc)
    });
    s += "\nper-thread cost over the same row's on 1 thread\n";
    s += &table(r, 12, |c| format!("{:>11.2}x", c.x_1thread));
    s
}

/// `Intel(R) Xeon(R) ...; 2 CPUs; cpu id Rseq; restartable rings; clock Tsc at 2700.000 MHz;
/// 7 rounds`.
fn machine_line(m: &Machine, rounds: usize) -> String {
    let configured = if m.configured_cpus as usize == m.cpus {
        String::new()
    } else {
        format!(" (of {} configured)", m.configured_cpus)
    };
    format!(
        "{}; {}{configured}; cpu id {}; {} rings; clock {} at {:.3} MHz; {}\n",
        m.cpu_model,
        plural(m.cpus, "CPU"),
        m.cpu_source,
        m.rings,
        m.clock,
        m.tsc_hz as f64 / 1e6,
        plural(rounds, "round"),
    )
}

/// A table with a column `width` wide per thread count, `cell` giving each cell's text.
fn table(r: &Report, width: usize, cell: impl Fn(&CellReport) -> String) -> String {
    let mut s = format!("{:<PATH_WIDTH$}", "path");
    for &t in &r.threads {
        s += &format!("{:>width$}", plural(t, "thread"));
    }
    s += "\n";
    for row in &r.rows {
        s += &format!("{:<PATH_WIDTH$}", row.path);
        for c in &row.cells {
            s += &cell(c);
        }
        s += "\n";
    }
    s
}

/// `1 thread`, `2 threads`.
fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

fn main() {
    let o = parse_args().unwrap_or_else(|e| {
        eprintln!("scale: {e}\n{USAGE}");
        std::process::exit(2);
    });
    // Before anything pins a thread: the CPUs this process may run on.
    let cpus = ttrace_benches::allowed_cpus();
    let max = o.max_threads.unwrap_or(cpus.len());
    if max > cpus.len() {
        eprintln!(
            "scale: --max-threads {max}: this process may run on {} CPUs only",
            cpus.len()
        );
        std::process::exit(2);
    }
    let dev = ttrace_benches::device();
    let slots =
        usize::try_from(dev.device().mapping().ring_slots()).expect("a ring's slots fit memory");
    MODEL_SLOTS.store(slots, Relaxed);
    point!(OFF, 0);
    dev.device().apply_text("disable bench_off").expect("ctl");

    let (n, budget) = if o.quick {
        (QUICK_ITERS, QUICK_BUDGET_NS)
    } else {
        (ITERS, BUDGET_NS)
    };
    let rounds = o.rounds.unwrap_or(if o.quick { 1 } else { 7 });
    let counts = thread_counts(max);
    let rows = rows(n);
    let iters = warm_up(&rows, &counts, &cpus, budget);
    let times = measure(&rows, &counts, &cpus, &iters, rounds);
    let r = report(
        machine(dev, cpus.len()),
        &rows,
        &counts,
        &iters,
        times,
        rounds,
    );
    if o.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&r).expect("a report serializes")
        );
    } else {
        print!("{}", text(&r));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn thread_counts() {
        assert_eq!(super::thread_counts(1), [1]);
        assert_eq!(super::thread_counts(2), [1, 2]);
        assert_eq!(super::thread_counts(6), [1, 2, 4, 6]);
        assert_eq!(super::thread_counts(8), [1, 2, 4, 8]);
    }
}
