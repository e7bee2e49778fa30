//! Work over the rings spread across the machine's cores.
//!
//! Copying and indexing a ring reads every slot of it once, and the rings are independent of
//! each other: with one thread per core, a device of many rings is read in the time of a few.
//! Small rings are read on the calling thread, where a thread's start would cost more than the
//! work.

use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

/// Below this many slots in all, the rings are read on the calling thread.
const SERIAL_SLOTS: usize = 1 << 16;

/// `f(0)`, …, `f(n - 1)` in that order; run on up to one thread per core when `slots` (the
/// slots of all `n` rings) makes that worth it.
pub fn each_ring<T: Send>(n: usize, slots: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |t| t.get())
        .min(n);
    if threads <= 1 || slots < SERIAL_SLOTS {
        return (0..n).map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<Option<T>>> = Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|s| {
        let work = || loop {
            // Relaxed: the counter only hands out indices; each is taken once by the atomic
            // increment, and the results are published by the mutex and the scope's join.
            let i = next.fetch_add(1, Relaxed);
            if i >= n {
                break;
            }
            let r = f(i);
            done.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
        };
        for _ in 1..threads {
            s.spawn(work);
        }
        work();
    });
    done.into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every index was taken by a worker"))
        .collect()
}
