//! Parts of a job done on every core, their results taken in order.
//!
//! Decoding a trace to text is the same work for every event and depends on no event before
//! it, so a trace cut into parts by time (`Merge::split`) can be formatted on all cores at
//! once, as long as the parts' text is written out in their order. [`in_order`] runs the
//! parts on a worker per core and hands each result to the caller, on the calling thread, as
//! soon as every part before it has been handed over. Workers run at most [`AHEAD`] parts
//! per worker ahead of the caller, so memory stays bounded however slow the output is.

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex, MutexGuard};

/// How many parts per worker may wait, done, for the caller.
pub const AHEAD: usize = 2;

/// What the workers and the caller share.
struct Shared<P, R> {
    /// The parts not yet taken by a worker (taken in index order).
    parts: Vec<Option<P>>,
    /// The next part a worker takes.
    next: usize,
    /// The results done and not yet taken by the caller, by part index.
    done: BTreeMap<usize, R>,
    /// How many results the caller has taken.
    taken: usize,
    /// Set when the caller stops early or a worker panicked: no worker takes another part,
    /// and the caller stops waiting.
    stop: bool,
}

/// Sets `stop` if the worker holding it unwinds, so that no one waits for its part.
struct StopOnPanic<'a, P, R>(&'a Mutex<Shared<P, R>>, &'a Condvar);

impl<P, R> Drop for StopOnPanic<'_, P, R> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            lock(self.0).stop = true;
            self.1.notify_all();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A worker that panicked held no invariant half-done under the lock: every update
    // under it is a single assignment or insertion.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `work` over each of `parts`, on up to one thread per core, each worker with its own
/// state from `state`; hands the results to `take` in the order of `parts`. Stops at the
/// first error of `take` and returns it; a panic of `work` is resumed on the calling thread.
///
/// ```
/// use ttrace_reader::ordered::in_order;
/// let mut out = Vec::new();
/// in_order((0..10).collect(), || (), |_, p: u32| p * p, |r| {
///     out.push(r);
///     Ok::<(), ()>(())
/// })
/// .unwrap();
/// assert_eq!(out, [0, 1, 4, 9, 16, 25, 36, 49, 64, 81]);
/// ```
pub fn in_order<P: Send, S, R: Send, E>(
    parts: Vec<P>,
    state: impl Fn() -> S + Sync,
    work: impl Fn(&mut S, P) -> R + Sync,
    mut take: impl FnMut(R) -> Result<(), E>,
) -> Result<(), E> {
    let n = parts.len();
    let workers = std::thread::available_parallelism()
        .map_or(1, |t| t.get())
        .min(n);
    if workers <= 1 {
        let mut s = state();
        return parts.into_iter().try_for_each(|p| take(work(&mut s, p)));
    }
    let shared = Mutex::new(Shared {
        parts: parts.into_iter().map(Some).collect(),
        next: 0,
        done: BTreeMap::new(),
        taken: 0,
        stop: false,
    });
    // Signalled whenever a result is done, the caller takes one, or `stop` is set.
    let changed = Condvar::new();
    let wait = |g| changed.wait(g).unwrap_or_else(|e| e.into_inner());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                let _guard = StopOnPanic(&shared, &changed);
                let mut s = state();
                loop {
                    let mut g = lock(&shared);
                    while !g.stop && g.next < n && g.next >= g.taken + AHEAD * workers {
                        g = wait(g);
                    }
                    if g.stop || g.next >= n {
                        return;
                    }
                    let i = g.next;
                    g.next += 1;
                    let part = g.parts[i].take().expect("each part is taken once");
                    drop(g);
                    let r = work(&mut s, part);
                    lock(&shared).done.insert(i, r);
                    changed.notify_all();
                }
            });
        }
        // The caller's own `take` may panic too: the workers must not wait for it then.
        let _guard = StopOnPanic(&shared, &changed);
        let mut result = Ok(());
        for i in 0..n {
            let mut g = lock(&shared);
            let r = loop {
                if let Some(r) = g.done.remove(&i) {
                    break Some(r);
                }
                if g.stop {
                    break None;
                }
                g = wait(g);
            };
            let Some(r) = r else { break };
            g.taken += 1;
            drop(g);
            changed.notify_all();
            if let Err(e) = take(r) {
                result = Err(e);
                break;
            }
        }
        // Early out (an error of `take`, or a worker's panic): the others stop at their
        // next part; the scope joins them and resumes a panic.
        lock(&shared).stop = true;
        changed.notify_all();
        result
    })
}
