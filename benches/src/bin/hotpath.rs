//! Costs of the writer's hot path and of its building blocks, each in its own tight loop,
//! next to a bare `rdtsc` measured in the same run.
//!
//! `cargo run --release -p ttrace-benches --bin hotpath [-- --quick]`

use std::hint::black_box;
use ttrace_benches::{measure, Figure};
use ttrace_core::{point, tracepoint, Config};

tracepoint!(static P0: Start = "bench_p0", "");
tracepoint!(static P1: Start = "bench_p1", "a={a}");
tracepoint!(static P5: Start = "bench_p5", "a={a} b={b} c={c} d={d} e={e}");
tracepoint!(static P12: Start = "bench_p12", "{a}{b}{c}{d}{e}{f}{g}{h}{i}{j}{k}{l}");
tracepoint!(static PS: Start = "bench_str", "s={s:s}");
tracepoint!(static OFF: Start = "bench_off", "a={a}");

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
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

    let mut rows: Vec<(String, Figure)> = Vec::new();
    let mut row = |name: &str, f: Figure| {
        rows.push((name.to_string(), f));
    };
    let base = measure(iters, reps, |_| {
        black_box(ttrace_core::clock::rdtsc());
    });
    row("bare rdtsc", base);
    row(
        "rdtscp",
        measure(iters, reps, |_| {
            let mut aux = 0;
            // SAFETY: rdtscp exists on every x86-64 CPU this runs on (checked by the kernel's cpuinfo).
            black_box(unsafe { core::arch::x86_64::__rdtscp(&mut aux) });
            black_box(aux);
        }),
    );
    row(
        "lfence; rdtsc",
        measure(iters, reps, |_| {
            // SAFETY: lfence and rdtsc have no memory effects.
            unsafe { core::arch::x86_64::_mm_lfence() };
            black_box(ttrace_core::clock::rdtsc());
        }),
    );
    row(
        "clock_gettime(MONOTONIC)",
        measure(iters / 4, reps, |_| {
            black_box(ttrace_core::clock::monotonic_ns());
        }),
    );
    for source in ttrace_core::cpu::available() {
        use ttrace_core::cpu::{read, CpuSource::*};
        let f = match source {
            Rseq => measure(iters, reps, |_| {
                black_box(read(Rseq));
            }),
            Rdpid => measure(iters, reps, |_| {
                black_box(read(Rdpid));
            }),
            SchedGetcpu => measure(iters, reps, |_| {
                black_box(read(SchedGetcpu));
            }),
        };
        row(&format!("cpu id: {source:?}"), f);
    }
    let ctx = 1 << 32 | 1;
    let w5 = ttrace_layouts::entry::TypeWord::new(ttrace_core::Kind::Start, 5, 0).0;
    row(
        "Device::emit, 5 words (no tracepoint)",
        measure(iters, reps, |i| {
            dev.emit(w5, ctx, &[i, i, i, i, i]);
        }),
    );
    row(
        "empty loop",
        measure(iters * 4, reps, |i| {
            black_box(i);
        }),
    );
    row(
        "disabled point",
        measure(iters * 4, reps, |i| point!(OFF, black_box(i))),
    );
    row(
        "enabled point, 0 words",
        measure(iters, reps, |_| point!(P0)),
    );
    row(
        "enabled point, 1 word",
        measure(iters, reps, |i| point!(P1, i)),
    );
    row(
        "enabled point, 5 words",
        measure(iters, reps, |i| point!(P5, i, i, i, i, i)),
    );
    row(
        "point + continuation, 12 words",
        measure(iters, reps, |i| {
            point!(P12, i, i, i, i, i, i, i, i, i, i, i, i)
        }),
    );
    let s64 = "x".repeat(64);
    row(
        "point with a 64-byte aux string",
        measure(iters / 4, reps, |_| point!(PS, s64.as_str())),
    );

    println!(
        "cpu source in use: {:?}; clock: {:?} at {} Hz",
        ttrace_core::cpu::source(),
        dev.clock(),
        dev.header().tsc_hz
    );
    println!(
        "{:<36} {:>9} {:>9} {:>9} {:>8}",
        "path", "median ns", "min", "max", "x rdtsc"
    );
    for (name, f) in &rows {
        println!(
            "{name:<36} {:>9.2} {:>9.2} {:>9.2} {:>7.2}x",
            f.median,
            f.min,
            f.max,
            f.median / base.median
        );
    }
}
