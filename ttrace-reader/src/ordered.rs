//! Parts of a job done on every core, their results taken in order.
//!
//! Decoding a trace to text is the same work for every event and depends on no event before
//! it, so a trace cut into parts by time (`Merge::split`) can be formatted on all cores at
//! once, as long as the parts' text is written out in their order. So can an export's
//! batches of the event model's steps (`crate::export::pipeline`), which arrive one by one
//! from the thread that runs the model. [`in_order`] runs the parts, in the order their
//! source gives them, on a worker per core, and hands each result to the caller, on the
//! calling thread, as soon as every part before it has been handed over. Workers run at
//! most [`AHEAD`] parts per worker ahead of the caller, so memory stays bounded however
//! slow the output is.
//!
//! A part's index is its place in the source: a worker takes the next part and its index
//! under one lock (`Source`), so indices follow the source's order whichever worker
//! takes what.

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex, MutexGuard};

/// How many parts per worker may wait, done, for the caller.
pub const AHEAD: usize = 2;

/// What the workers and the caller share.
struct Shared<R> {
    /// The index the next part taken gets.
    next: usize,
    /// How many parts there are, once the source has run dry.
    ended: Option<usize>,
    /// The results done and not yet taken by the caller, by part index.
    done: BTreeMap<usize, R>,
    /// How many results the caller has taken.
    taken: usize,
    /// Set when the caller stops early or a worker panicked: no worker takes another part,
    /// and the caller stops waiting.
    stop: bool,
}

/// Sets `stop` if the worker holding it unwinds, so that no one waits for its part.
struct StopOnPanic<'a, R>(&'a Mutex<Shared<R>>, &'a Condvar);

impl<R> Drop for StopOnPanic<'_, R> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            lock(self.0).stop = true;
            self.1.notify_all();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A worker that panicked held no invariant half-done under the lock: every update
    // under it is a single assignment or insertion, and a source half-advanced gives its
    // next part or none.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The parts not yet taken: held under a lock of their own, so that a worker waiting for
/// the next part (a channel's) does not hold up the results.
struct Source<I>(Mutex<Option<I>>);

impl<I: Iterator> Source<I> {
    /// The next part and its index, or `None` once the source is dry or dropped (which
    /// `shared` then records). Lock order: the source, then the shared state.
    fn take<R>(&self, shared: &Mutex<Shared<R>>) -> Option<(usize, I::Item)> {
        let mut parts = lock(&self.0);
        let part = parts.as_mut().and_then(|p| p.next());
        let mut g = lock(shared);
        let i = g.next;
        match part {
            Some(p) => {
                g.next += 1;
                Some((i, p))
            }
            None => {
                g.ended = Some(i);
                None
            }
        }
    }
}

/// Runs `work` over each of `parts`, on up to one thread per core, each worker with its own
/// state from `state`; hands the results to `take` in the order of `parts`. Stops at the
/// first error of `take` and returns it (then drops the parts not taken, a channel's
/// receiver included, so that its sender learns of it); a panic of `work` is resumed on the
/// calling thread.
///
/// ```
/// use ttrace_reader::ordered::in_order;
/// let mut out = Vec::new();
/// in_order(0..10, || (), |_, p: u32| p * p, |r| {
///     out.push(r);
///     Ok::<(), ()>(())
/// })
/// .unwrap();
/// assert_eq!(out, [0, 1, 4, 9, 16, 25, 36, 49, 64, 81]);
/// ```
pub fn in_order<P: Send, S, R: Send, E>(
    parts: impl IntoIterator<Item = P, IntoIter: Send>,
    state: impl Fn() -> S + Sync,
    work: impl Fn(&mut S, P) -> R + Sync,
    take: impl FnMut(R) -> Result<(), E>,
) -> Result<(), E> {
    let parts = parts.into_iter();
    let cores = std::thread::available_parallelism().map_or(1, |t| t.get());
    let workers = parts.size_hint().1.map_or(cores, |n| n.min(cores));
    in_order_on(workers, parts, state, work, take)
}

/// [`in_order`] on `workers` threads (on this one, if fewer than two): for a source of
/// parts that keeps a core busy itself.
pub fn in_order_on<P: Send, S, R: Send, E>(
    workers: usize,
    parts: impl IntoIterator<Item = P, IntoIter: Send>,
    state: impl Fn() -> S + Sync,
    work: impl Fn(&mut S, P) -> R + Sync,
    mut take: impl FnMut(R) -> Result<(), E>,
) -> Result<(), E> {
    let parts = parts.into_iter();
    if workers <= 1 {
        let mut s = state();
        return parts.into_iter().try_for_each(|p| take(work(&mut s, p)));
    }
    let source = Source(Mutex::new(Some(parts)));
    let shared = Mutex::new(Shared {
        next: 0,
        ended: None,
        done: BTreeMap::new(),
        taken: 0,
        stop: false,
    });
    // Signalled whenever a result is done, the source runs dry, the caller takes one, or
    // `stop` is set.
    let changed = Condvar::new();
    let wait = |g| changed.wait(g).unwrap_or_else(|e| e.into_inner());
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let _guard = StopOnPanic(&shared, &changed);
                    let mut s = state();
                    loop {
                        let mut g = lock(&shared);
                        while !g.stop && g.ended.is_none() && g.next >= g.taken + AHEAD * workers {
                            g = wait(g);
                        }
                        if g.stop || g.ended.is_some() {
                            return;
                        }
                        drop(g);
                        let Some((i, part)) = source.take(&shared) else {
                            changed.notify_all();
                            return;
                        };
                        let r = work(&mut s, part);
                        lock(&shared).done.insert(i, r);
                        changed.notify_all();
                    }
                })
            })
            .collect();
        // The caller's own `take` may panic too: the workers must not wait for it then.
        let _guard = StopOnPanic(&shared, &changed);
        let mut result = Ok(());
        for i in 0.. {
            let mut g = lock(&shared);
            let r = loop {
                if let Some(r) = g.done.remove(&i) {
                    break Some(r);
                }
                if g.stop || g.ended.is_some_and(|n| i >= n) {
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
        // next part, and the parts not taken are dropped, so that a sender blocked on a
        // channel of them returns.
        lock(&shared).stop = true;
        changed.notify_all();
        drop(lock(&source.0).take());
        // A worker's panic, resumed as it was (its message, not the scope's).
        for h in handles {
            if let Err(p) = h.join() {
                std::panic::resume_unwind(p);
            }
        }
        result
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::sync_channel;

    /// Work that takes longer for some parts than for others (no sleep: a sum).
    fn uneven(p: u64) -> u64 {
        (0..(p % 7) * 10_000).fold(p, |a, i| a.wrapping_add(std::hint::black_box(i)))
    }

    #[test]
    fn parts_from_a_channel_come_back_in_the_order_they_were_sent() {
        let (send, parts) = sync_channel::<u64>(2);
        std::thread::scope(|s| {
            s.spawn(move || (0..500).try_for_each(|p| send.send(p)));
            let mut out = Vec::new();
            let done = in_order_on(
                3,
                parts,
                || 0u64,
                |n, p| {
                    *n += 1;
                    (p, uneven(p))
                },
                |r| {
                    out.push(r);
                    Ok::<(), ()>(())
                },
            );
            assert_eq!(done, Ok(()));
            let want: Vec<(u64, u64)> = (0..500).map(|p| (p, uneven(p))).collect();
            assert_eq!(out, want);
        });
    }

    #[test]
    fn an_error_of_the_caller_stops_the_sender_of_the_parts() {
        let (send, parts) = sync_channel::<u64>(1);
        std::thread::scope(|s| {
            // Would block for ever on its full channel if the parts were kept.
            let sender = s.spawn(move || (0..).try_for_each(|p| send.send(p)));
            let mut taken = 0;
            let done = in_order_on(
                3,
                parts,
                || (),
                |(), p| p,
                |p| {
                    taken += 1;
                    if p == 10 {
                        Err(p)
                    } else {
                        Ok(())
                    }
                },
            );
            assert_eq!(done, Err(10));
            assert_eq!(taken, 11);
            assert!(sender.join().unwrap().is_err(), "the sender learnt of it");
        });
    }

    #[test]
    fn a_panic_of_the_work_is_resumed_on_the_caller() {
        let panicked = std::panic::catch_unwind(|| {
            in_order_on(
                2,
                0..100u32,
                || (),
                |(), p| {
                    assert_ne!(p, 37, "part 37");
                    p
                },
                |_| Ok::<(), ()>(()),
            )
        });
        let message = panicked.unwrap_err();
        let message = message.downcast_ref::<String>().map(String::as_str);
        assert!(
            message.is_some_and(|m| m.contains("part 37")),
            "{message:?}"
        );
    }
}
