//! Does recording scale across CPUs? One thread, then two threads pinned to two CPUs, each
//! running the same loop: `Ring::write` on its own ring, `Device::emit`, and `point!`.
//! `cargo run --release -p ttrace-benches --example scale`

use ttrace_benches::{pin, threads_once};
use ttrace_core::{point, tracepoint};

tracepoint!(static P5: Start = "bench_p5", "a={a} b={b} c={c} d={d} e={e}");

fn main() {
    let dev = ttrace_benches::device();
    let w5 = ttrace_layouts::entry::TypeWord::new(ttrace_core::Kind::Start, 5, 0).0;
    let iters = 5_000_000;
    let row = |name: &str, one: f64, two: f64| {
        println!(
            "{name:<28} 1 thread {one:6.2} ns, 2 threads {two:6.2} ns per thread ({:.2}x)",
            two / one
        )
    };
    // Best of 5: the quiet moments of a shared machine.
    let best = |f: &dyn Fn() -> f64| (0..5).map(|_| f()).fold(f64::MAX, f64::min);
    let one = |make: &(dyn Fn(usize) -> Box<dyn FnMut(u64) + Send> + Sync)| {
        pin(0);
        best(&|| threads_once(1, iters, make))
    };
    let two = |make: &(dyn Fn(usize) -> Box<dyn FnMut(u64) + Send> + Sync)| {
        best(&|| threads_once(2, iters, make))
    };
    let ring: &(dyn Fn(usize) -> Box<dyn FnMut(u64) + Send> + Sync) = &|k| {
        Box::new(move |i| {
            let _ = dev.ring(k).write(i, 1, &[w5, 1, i, i, i, i, i]);
        })
    };
    row("Ring::write, own ring", one(ring), two(ring));
    let emit: &(dyn Fn(usize) -> Box<dyn FnMut(u64) + Send> + Sync) = &|_| {
        Box::new(move |i| {
            let _ = dev.emit(w5, 1, &[i, i, i, i, i]);
        })
    };
    row("Device::emit", one(emit), two(emit));
    let pt: &(dyn Fn(usize) -> Box<dyn FnMut(u64) + Send> + Sync) =
        &|_| Box::new(|i| point!(P5, i, i, i, i, i));
    row("enabled point, 5 words", one(pt), two(pt));
}
