//! Measurement helpers: tight loops timed with a monotonic clock, repeated, summarized.

use std::time::Instant;

/// Median, minimum and maximum nanoseconds per iteration over the repetitions.
#[derive(Clone, Copy, Debug)]
pub struct Figure {
    /// Median ns per iteration.
    pub median: f64,
    /// Fastest repetition.
    pub min: f64,
    /// Slowest repetition.
    pub max: f64,
}

/// Runs `f(i)` `iters` times per repetition, after a warm-up of one repetition, and
/// returns the per-iteration figures over `reps` repetitions.
pub fn measure(iters: u64, reps: usize, mut f: impl FnMut(u64)) -> Figure {
    for i in 0..iters {
        f(i);
    }
    let mut v: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            for i in 0..iters {
                f(i);
            }
            t.elapsed().as_nanos() as f64 / iters as f64
        })
        .collect();
    v.sort_by(|a, b| a.total_cmp(b));
    Figure {
        median: v[v.len() / 2],
        min: v[0],
        max: v[v.len() - 1],
    }
}
