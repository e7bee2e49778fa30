//! Costs of the writer's hot path, of its building blocks, and of the tracers users would
//! pick instead, each in its own tight loop, next to a bare `rdtsc` measured in the same run.
//!
//! `cargo run --release -p ttrace-benches --bin hotpath [-- --quick] [--json] [--chrome]`
//!
//! `--chrome` measures `tracing-chrome` instead of the rest (beside a bare `rdtsc` and the
//! ring subscriber): once its layer has been used, every later `tracing` callsite check of
//! the process costs more (a disabled event 3.3 ns instead of 0.25), so it runs alone.

use std::hint::black_box;
use ttrace_benches::{peers, threads_once, Bench};
use ttrace_core::{point, tracepoint};

tracepoint!(static P0: Start = "bench_p0", "");
tracepoint!(static P1: Start = "bench_p1", "a={a}");
tracepoint!(static P5: Start = "bench_p5", "a={a} b={b} c={c} d={d} e={e}");
tracepoint!(static P12: Start = "bench_p12", "{a}{b}{c}{d}{e}{f}{g}{h}{i}{j}{k}{l}");
tracepoint!(static PS: Start = "bench_str", "s={s:s}");
tracepoint!(static OFF: Start = "bench_off", "a={a}");

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(bad) = args
        .iter()
        .find(|a| !matches!(a.as_str(), "--quick" | "--json" | "--chrome"))
    {
        eprintln!("hotpath: unknown argument {bad:?} (use --quick, --json, --chrome)");
        std::process::exit(2);
    }
    let (quick, json) = (
        args.iter().any(|a| a == "--quick"),
        args.iter().any(|a| a == "--json"),
    );
    let (iters, reps) = if quick { (20_000, 3) } else { (5_000_000, 7) };
    let dev = ttrace_benches::device();
    point!(OFF, 0);
    dev.device().apply_text("disable bench_off").expect("ctl");
    dev.device()
        .apply_text(&format!("clrbits {:#x}", ttrace_tracing::CLASS_TRACE))
        .expect("ctl");

    let notes = format!(
        "cpu source in use: {:?}; clock: {:?} at {} Hz; {} CPUs; {reps} rounds",
        ttrace_core::cpu::source(),
        dev.device().mapping().clock(),
        dev.device().mapping().header().tsc_hz,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let mut b = Bench::default();
    b.add("bare rdtsc", iters, |_| {
        black_box(ttrace_core::clock::rdtsc());
    });
    if args.iter().any(|a| a == "--chrome") {
        b.add_rep(
            "tracing: ring subscriber, 5 fields",
            with_subscriber(
                || peers::RingSubscriber,
                iters,
                |i| tracing::info!(a = i, b = i, c = i, d = i, e = i),
            ),
        );
        chrome_rows(&mut b, iters);
        let t = b.run(reps);
        return match json {
            true => println!("{}", t.json()),
            false => print!("{}", t.text()),
        };
    }
    b.add("rdtscp", iters, |_| {
        let mut aux = 0;
        // SAFETY: rdtscp exists on every x86-64 CPU this runs on (the kernel's cpuinfo).
        black_box(unsafe { core::arch::x86_64::__rdtscp(&mut aux) });
        black_box(aux);
    });
    b.add("lfence; rdtsc", iters, |_| {
        // SAFETY: lfence and rdtsc have no memory effects.
        unsafe { core::arch::x86_64::_mm_lfence() };
        black_box(ttrace_core::clock::rdtsc());
    });
    b.add("clock_gettime(MONOTONIC)", iters / 4, |_| {
        black_box(ttrace_core::clock::monotonic_ns());
    });
    for source in ttrace_core::cpu::available() {
        b.add(format!("cpu id: {source:?}"), iters, move |_| {
            black_box(ttrace_core::cpu::read(source));
        });
    }
    let ctx = 1 << 32 | 1;
    let w5 = ttrace_layouts::entry::TypeWord::new(ttrace_core::Kind::Start, 5, 0).0;
    b.add("Writer::emit, 5 words", iters, move |i| {
        dev.emit(w5, ctx, &[i, i, i, i, i]);
    });
    b.add("empty loop", iters * 4, |i| {
        black_box(i);
    });
    b.add("disabled point", iters * 4, |i| point!(OFF, black_box(i)));
    b.add("enabled point, 0 words", iters, |_| point!(P0));
    b.add("enabled point, 1 word", iters, |i| point!(P1, i));
    b.add("enabled point, 5 words", iters, |i| {
        point!(P5, i, i, i, i, i)
    });
    b.add("point + continuation, 12 words", iters, |i| {
        point!(P12, i, i, i, i, i, i, i, i, i, i, i, i)
    });
    for len in [16, 64, 1024] {
        let s = "x".repeat(len);
        let n = if len > 64 { iters / 16 } else { iters / 4 };
        b.add(format!("point + aux string, {len} bytes"), n, move |_| {
            point!(PS, s.as_str())
        });
    }

    // Two threads on two CPUs, each timing its own loop while the other runs: the per-thread
    // cost (of the slower thread).
    b.add_rep("2 threads: bare rdtsc", move || {
        threads_once(2, iters, &|_| {
            |_| {
                black_box(ttrace_core::clock::rdtsc());
            }
        })
    });
    b.add_rep("2 threads: enabled point, 5 words", move || {
        threads_once(2, iters, &|_| |i| point!(P5, i, i, i, i, i))
    });
    b.add_rep("2 threads: point + continuation", move || {
        threads_once(2, iters, &|_| {
            |i| point!(P12, i, i, i, i, i, i, i, i, i, i, i, i)
        })
    });
    b.add_rep("2 threads: point + 64-byte string", move || {
        threads_once(2, iters / 4, &|_| {
            let s = "x".repeat(64);
            move |_| point!(PS, s.as_str())
        })
    });

    peer_rows(&mut b, iters);

    let mut t = b.run(reps);
    t.notes.push(notes);
    if json {
        println!("{}", t.json());
    } else {
        print!("{}", t.text());
    }
}

/// Times `iters` calls of `f` under the subscriber `make()` (set for this thread only).
fn with_subscriber<S>(
    make: impl Fn() -> S + 'static,
    iters: u64,
    mut f: impl FnMut(u64) + 'static,
) -> impl FnMut() -> f64
where
    S: tracing::Subscriber + Send + Sync + 'static,
{
    move || {
        tracing::subscriber::with_default(make(), || {
            let t = std::time::Instant::now();
            for i in 0..iters {
                f(i);
            }
            t.elapsed().as_nanos() as f64 / iters as f64
        })
    }
}

/// Times `iters` enters and exits of one span under the subscriber `make()`.
fn span_rep<S>(make: impl Fn() -> S + 'static, iters: u64) -> impl FnMut() -> f64
where
    S: tracing::Subscriber + Send + Sync + 'static,
{
    move || {
        tracing::subscriber::with_default(make(), || {
            let span = tracing::info_span!("bench_span", a = 1u64);
            let t = std::time::Instant::now();
            for _ in 0..iters {
                let _in = span.enter();
            }
            t.elapsed().as_nanos() as f64 / iters as f64
        })
    }
}

/// `tracing-chrome`, measured alone (see the module's documentation).
fn chrome_rows(b: &mut Bench, iters: u64) {
    b.add_rep(
        "tracing-chrome, 5 fields",
        peers::chrome_rep(iters / 10, |i| {
            tracing::info!(a = i, b = i, c = i, d = i, e = i)
        }),
    );
    b.add_rep(
        "tracing-chrome, span enter+exit",
        peers::chrome_rep(iters / 10, {
            let mut span = None;
            move |_| {
                let span = span.get_or_insert_with(|| tracing::info_span!("bench_span", a = 1u64));
                let _in = span.enter();
            }
        }),
    );
}

/// The rows of each `tracing` subscriber measured: an event of 5 fields, a span's enter
/// and exit, a span's whole life (new, enter, exit, close), under `make()`.
fn subscriber_rows<S>(b: &mut Bench, who: &str, make: impl Fn() -> S + Copy + 'static, iters: u64)
where
    S: tracing::Subscriber + Send + Sync + 'static,
{
    b.add_rep(
        format!("tracing: {who}, 5 fields"),
        with_subscriber(make, iters, |i| {
            tracing::info!(a = i, b = i, c = i, d = i, e = i)
        }),
    );
    b.add_rep(
        format!("tracing: {who}, span enter+exit"),
        span_rep(make, iters),
    );
    b.add_rep(
        format!("tracing: {who}, span life (new, enter, exit, close)"),
        // A span's life: made, entered, exited, closed.
        with_subscriber(make, iters / 4, |i| {
            tracing::info_span!("bench_life", a = i).in_scope(|| ())
        }),
    );
}

/// The peers, measured by the same harness.
fn peer_rows(b: &mut Bench, iters: u64) {
    b.add_rep(
        "tracing: disabled event",
        with_subscriber(
            || peers::OffSubscriber,
            iters * 4,
            |i| tracing::trace!(a = black_box(i), b = i, c = i, d = i, e = i),
        ),
    );
    b.add_rep(
        "tracing: ring subscriber, 5 fields",
        with_subscriber(
            || peers::RingSubscriber,
            iters,
            |i| tracing::info!(a = i, b = i, c = i, d = i, e = i),
        ),
    );
    // The ttrace layer, in a registry as programs use it.
    let dev = ttrace_benches::device();
    let layered = move || {
        use tracing_subscriber::prelude::*;
        tracing_subscriber::registry().with(ttrace_tracing::layer_into(dev))
    };
    // What a registry with a layer that does nothing costs: the floor of any layer.
    let empty = || {
        use tracing_subscriber::prelude::*;
        tracing_subscriber::registry().with(peers::EmptyLayer)
    };
    subscriber_rows(b, "registry + empty layer", empty, iters);
    subscriber_rows(b, "ttrace layer", layered, iters);
    // ttrace's own subscriber: no registry.
    let own = move || ttrace_tracing::subscriber_into(dev);
    subscriber_rows(b, "ttrace subscriber", own, iters);
    b.add_rep(
        "tracing: ttrace subscriber, disabled by ctl",
        with_subscriber(own, iters * 4, |i| {
            tracing::trace!(a = black_box(i), b = i, c = i, d = i, e = i)
        }),
    );
    b.add_rep(
        "tracing: ttrace layer, 32-byte &str",
        with_subscriber(layered, iters, |_| {
            tracing::info!(s = black_box("0123456789abcdef0123456789abcdef"))
        }),
    );
    b.add_rep(
        "tracing: ttrace layer, Debug field",
        with_subscriber(layered, iters, |i| tracing::info!(d = ?(i, black_box("x")))),
    );
    // TRACE is switched off in the device (`ctl clrbits`): the layer's disabled cost.
    b.add_rep(
        "tracing: ttrace layer, disabled by ctl",
        with_subscriber(layered, iters * 4, |i| {
            tracing::trace!(a = black_box(i), b = i, c = i, d = i, e = i)
        }),
    );
    b.add_rep(
        "tracing: ttrace layer, above its max level",
        with_subscriber(
            move || {
                use tracing_subscriber::prelude::*;
                tracing_subscriber::registry().with(
                    ttrace_tracing::layer_into(dev)
                        .with_max_level(tracing::level_filters::LevelFilter::DEBUG),
                )
            },
            iters * 4,
            |i| tracing::trace!(a = black_box(i), b = i, c = i, d = i, e = i),
        ),
    );
    b.add_rep(
        "tracing: fmt subscriber to a sink",
        with_subscriber(peers::fmt_subscriber, iters / 50, |i| {
            tracing::info!(a = i, b = i, c = i, d = i, e = i)
        }),
    );
    let recorder = tracing_flight_recorder::FlightRecorder::new(16_384);
    let flight = move || {
        use tracing_subscriber::prelude::*;
        tracing_subscriber::registry().with(tracing_flight_recorder::FlightRecorderLayer::new(
            recorder.clone(),
        ))
    };
    b.add_rep(
        "tracing-flight-recorder, 5 fields",
        with_subscriber(flight.clone(), iters / 10, |i| {
            tracing::info!(a = i, b = i, c = i, d = i, e = i)
        }),
    );
    b.add_rep(
        "tracing-flight-recorder, span enter+exit",
        span_rep(flight, iters / 10),
    );
    peers::fastrace_init();
    b.add_rep(
        "fastrace: local span",
        peers::fastrace_rep(iters, |_| {
            let _span = fastrace::local::LocalSpan::enter_with_local_parent("bench_span");
        }),
    );
    b.add_rep(
        "fastrace: event",
        peers::fastrace_rep(iters, |_| {
            fastrace::local::LocalSpan::add_event(fastrace::Event::new("bench_event"));
        }),
    );
}
