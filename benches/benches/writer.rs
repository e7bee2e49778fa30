//! Criterion benchmarks of every writer path: `cargo bench -p ttrace-benches`.
//!
//! The summary with ratios to a bare `rdtsc` is `cargo run --release -p ttrace-benches --bin
//! hotpath`; these give criterion's statistics and history for the same paths.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::{Duration, Instant};
use ttrace_core::{point, tracepoint, Config};

tracepoint!(static OFF: Start = "bench_off", "a={a}");
tracepoint!(static P0: Start = "bench_p0", "");
tracepoint!(static P1: Start = "bench_p1", "a={a}");
tracepoint!(static P5: Start = "bench_p5", "a={a} b={b} c={c} d={d} e={e}");
tracepoint!(static P12: Start = "bench_p12", "{a}{b}{c}{d}{e}{f}{g}{h}{i}{j}{k}{l}");
tracepoint!(static PS: Start = "bench_str", "s={s:s}");
tracepoint!(static FIRST: Start = "bench_first", "a={a}");

fn device() -> &'static ttrace_core::Writer {
    let dev = ttrace_benches::device();
    point!(OFF, 0);
    dev.device().apply_text("disable bench_off").expect("ctl");
    dev
}

fn writer_paths(c: &mut Criterion) {
    device();
    let mut g = c.benchmark_group("writer");
    g.bench_function("rdtsc", |b| {
        b.iter(|| black_box(ttrace_core::clock::rdtsc()))
    });
    g.bench_function("disabled point", |b| {
        b.iter(|| point!(OFF, black_box(1u64)))
    });
    g.bench_function("enabled point, 0 words", |b| b.iter(|| point!(P0)));
    g.bench_function("enabled point, 1 word", |b| {
        b.iter(|| point!(P1, black_box(1u64)))
    });
    g.bench_function("enabled point, 5 words", |b| {
        b.iter(|| {
            let i = black_box(7u64);
            point!(P5, i, i, i, i, i)
        })
    });
    g.bench_function("point + continuation, 12 words", |b| {
        b.iter(|| {
            let i = black_box(7u64);
            point!(P12, i, i, i, i, i, i, i, i, i, i, i, i)
        })
    });
    for len in [16, 64, 1024] {
        let s = "x".repeat(len);
        g.bench_function(format!("aux string, {len} bytes"), |b| {
            b.iter(|| point!(PS, black_box(s.as_str())))
        });
    }
    g.finish();
}

fn registration(c: &mut Criterion) {
    device();
    let mut g = c.benchmark_group("registration");
    // Each sample gets a fresh device large enough for its iterations, so that no sample
    // pays for a compaction of the names area (`--bin births` measures those).
    g.bench_function("thread name registration", |b| {
        b.iter_custom(|iters| {
            let tmp = tempfile::tempdir().expect("tempdir");
            let meta = (iters * 64 + (1 << 20)).next_power_of_two();
            let d = ttrace_core::Writer::open(&Config {
                meta_bytes: meta,
                cpus: Some(1),
                ring_slots: 64,
                ..Config::at(tmp.path().join("dev"))
            })
            .expect("device");
            let t = Instant::now();
            for i in 0..iters {
                black_box(
                    d.device()
                        .note_thread(1, i as u32, "worker-thread-name")
                        .is_ok(),
                );
            }
            t.elapsed()
        })
    });
    // The first point of a thread registers it (its name goes to the names area).
    g.bench_function("first point of a new thread", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    std::thread::spawn(|| {
                        let t = Instant::now();
                        point!(FIRST, 1u64);
                        t.elapsed()
                    })
                    .join()
                    .expect("thread")
                })
                .sum::<Duration>()
        })
    });
    g.finish();
}

criterion_group!(benches, writer_paths, registration);
criterion_main!(benches);
