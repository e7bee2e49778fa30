//! Costs of the writer's hot path, of its building blocks, and of the tracers users would
//! pick instead, each in its own tight loop, next to a bare `rdtsc` measured in the same run.
//!
//! `cargo run --release -p ttrace-benches --bin hotpath [-- --quick] [--json]`

use std::hint::black_box;
use ttrace_benches::{measure, measure_threads, peers, Figure, Table};
use ttrace_core::{point, tracepoint, Config};

tracepoint!(static P0: Start = "bench_p0", "");
tracepoint!(static P1: Start = "bench_p1", "a={a}");
tracepoint!(static P5: Start = "bench_p5", "a={a} b={b} c={c} d={d} e={e}");
tracepoint!(static P12: Start = "bench_p12", "{a}{b}{c}{d}{e}{f}{g}{h}{i}{j}{k}{l}");
tracepoint!(static PS: Start = "bench_str", "s={s:s}");
tracepoint!(static OFF: Start = "bench_off", "a={a}");

/// The slowest thread's figure: per-thread cost when all run at once.
fn slowest(figures: Vec<Figure>) -> Figure {
    figures
        .into_iter()
        .max_by(|a, b| a.median.total_cmp(&b.median))
        .expect("a thread")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(bad) = args
        .iter()
        .find(|a| !matches!(a.as_str(), "--quick" | "--json"))
    {
        eprintln!("hotpath: unknown argument {bad:?} (use --quick, --json)");
        std::process::exit(2);
    }
    let (quick, json) = (
        args.iter().any(|a| a == "--quick"),
        args.iter().any(|a| a == "--json"),
    );
    let (iters, reps) = if quick { (20_000, 3) } else { (5_000_000, 7) };
    let tmp = tempfile::tempdir().expect("tempdir");
    let dev = ttrace_core::init(&Config {
        cpus: None,
        ..Config::at(tmp.path().join("dev"))
    })
    .expect("device");
    ttrace_core::cpu::detect();
    point!(OFF, 0);
    dev.apply_text("disable bench_off").expect("ctl");

    let mut t = Table::default();
    t.notes.push(format!(
        "cpu source in use: {:?}; clock: {:?} at {} Hz; {} CPUs",
        ttrace_core::cpu::source(),
        dev.clock(),
        dev.header().tsc_hz,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    ));
    let base = measure(iters, reps, |_| {
        black_box(ttrace_core::clock::rdtsc());
    });
    t.row("bare rdtsc", base);
    t.row(
        "rdtscp",
        measure(iters, reps, |_| {
            let mut aux = 0;
            // SAFETY: rdtscp exists on every x86-64 CPU this runs on (the kernel's cpuinfo).
            black_box(unsafe { core::arch::x86_64::__rdtscp(&mut aux) });
            black_box(aux);
        }),
    );
    t.row(
        "lfence; rdtsc",
        measure(iters, reps, |_| {
            // SAFETY: lfence and rdtsc have no memory effects.
            unsafe { core::arch::x86_64::_mm_lfence() };
            black_box(ttrace_core::clock::rdtsc());
        }),
    );
    t.row(
        "clock_gettime(MONOTONIC)",
        measure(iters / 4, reps, |_| {
            black_box(ttrace_core::clock::monotonic_ns());
        }),
    );
    for source in ttrace_core::cpu::available() {
        let f = measure(iters, reps, |_| {
            black_box(ttrace_core::cpu::read(source));
        });
        t.row(format!("cpu id: {source:?}"), f);
    }
    let ctx = 1 << 32 | 1;
    let w5 = ttrace_layouts::entry::TypeWord::new(ttrace_core::Kind::Start, 5, 0).0;
    t.row(
        "Device::emit, 5 words",
        measure(iters, reps, |i| {
            dev.emit(w5, ctx, &[i, i, i, i, i]);
        }),
    );
    t.row(
        "empty loop",
        measure(iters * 4, reps, |i| {
            black_box(i);
        }),
    );
    t.row(
        "disabled point",
        measure(iters * 4, reps, |i| point!(OFF, black_box(i))),
    );
    t.row(
        "enabled point, 0 words",
        measure(iters, reps, |_| point!(P0)),
    );
    t.row(
        "enabled point, 1 word",
        measure(iters, reps, |i| point!(P1, i)),
    );
    t.row(
        "enabled point, 5 words",
        measure(iters, reps, |i| point!(P5, i, i, i, i, i)),
    );
    t.row(
        "point + continuation, 12 words",
        measure(iters, reps, |i| {
            point!(P12, i, i, i, i, i, i, i, i, i, i, i, i)
        }),
    );
    for len in [16, 64, 1024] {
        let s = "x".repeat(len);
        let n = if len > 64 { iters / 16 } else { iters / 4 };
        t.row(
            format!("point + aux string, {len} bytes"),
            measure(n, reps, |_| point!(PS, s.as_str())),
        );
    }

    // Two threads on two CPUs, each timing its own loop while the other runs: the per-thread
    // cost (of the slower thread).
    t.row(
        "2 threads: bare rdtsc",
        slowest(measure_threads(2, iters, reps, |_| {
            |_| {
                black_box(ttrace_core::clock::rdtsc());
            }
        })),
    );
    t.row(
        "2 threads: enabled point, 5 words",
        slowest(measure_threads(2, iters, reps, |_| {
            |i| point!(P5, i, i, i, i, i)
        })),
    );
    t.row(
        "2 threads: point + continuation",
        slowest(measure_threads(2, iters, reps, |_| {
            |i| point!(P12, i, i, i, i, i, i, i, i, i, i, i, i)
        })),
    );
    let s64 = "x".repeat(64);
    t.row(
        "2 threads: point + 64-byte string",
        slowest(measure_threads(2, iters / 4, reps, |_| {
            let s = s64.clone();
            move |_| point!(PS, s.as_str())
        })),
    );

    peer_rows(&mut t, iters, reps);

    if json {
        println!("{}", t.json());
    } else {
        print!("{}", t.text());
    }
}

/// The peers, measured by the same harness.
fn peer_rows(t: &mut Table, iters: u64, reps: usize) {
    use tracing::subscriber::with_default;
    // Disabled first, while no other subscriber exists: what a program that does not
    // subscribe to these events pays.
    t.row(
        "tracing: disabled event",
        with_default(peers::OffSubscriber, || {
            measure(iters * 4, reps, |i| {
                tracing::trace!(a = black_box(i), b = i, c = i, d = i, e = i)
            })
        }),
    );
    t.row(
        "tracing: ring subscriber, 5 fields",
        with_default(peers::RingSubscriber, || {
            measure(iters, reps, |i| {
                tracing::info!(a = i, b = i, c = i, d = i, e = i)
            })
        }),
    );
    t.row(
        "tracing: fmt subscriber to a sink",
        with_default(peers::fmt_subscriber(), || {
            measure(iters / 50, reps, |i| {
                tracing::info!(a = i, b = i, c = i, d = i, e = i)
            })
        }),
    );
    peers::fastrace_init();
    t.row(
        "fastrace: local span",
        measure(
            iters,
            reps,
            peers::fastrace_rooted(|_| {
                let _span = fastrace::local::LocalSpan::enter_with_local_parent("bench_span");
            }),
        ),
    );
    t.row(
        "fastrace: event",
        measure(
            iters,
            reps,
            peers::fastrace_rooted(|_| {
                fastrace::local::LocalSpan::add_event(fastrace::Event::new("bench_event"));
            }),
        ),
    );
}
