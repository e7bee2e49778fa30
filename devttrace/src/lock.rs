//! A lock word in shared memory, with a recovery rule for an owner that died.
//!
//! The word is `0` when free and the owner's [`lock_id`] (`tid << 32 | start_tag`) when held.
//! It guards only a few dozen instructions (aux reservations, metadata appends, control
//! changes), so waiters spin, then yield; every 2 ms a waiter checks whether the owner is
//! still alive ([`lock_owner_alive`]: the tid gone, a zombie, or a thread with another start
//! time) and, if not, takes the lock over with a compare-and-exchange from the dead owner's
//! word, so one waiter wins. What the code relies on, argued in `docs/DESIGN.md` (*Locks in
//! shared memory*): each critical section leaves the shared state consistent after each of
//! its stores, so the new owner needs no repair beyond what the caller does when told it
//! [`recovered`](Guard::recovered) the lock. (The `spin` crate's locks can neither live in a
//! file mapped by several processes nor recover from a dead owner.)

use crate::thread::{lock_id, lock_owner_alive};
use core::sync::atomic::{AtomicU64, Ordering::*};
use crossbeam_utils::Backoff;
use std::time::{Duration, Instant};

/// How long a waiter waits between checks that the owner is alive.
const LIVENESS_CHECK: Duration = Duration::from_millis(2);

/// A held lock; released on drop.
#[must_use]
pub struct Guard<'a> {
    word: &'a AtomicU64,
    recovered: bool,
}

impl Guard<'_> {
    /// Whether the lock was taken over from a dead owner (whose critical section may have
    /// stopped half way).
    pub fn recovered(&self) -> bool {
        self.recovered
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        // Release: publishes the critical section's stores to the next owner.
        self.word.store(0, Release);
    }
}

/// Takes the lock, waiting (and recovering it from a dead owner) as needed.
///
/// Returns `None` if the calling thread already holds it: a trace point in a signal handler
/// that interrupted this thread's own critical section. Waiting would deadlock, so the caller
/// gives up (and counts what it could not record).
pub fn lock(word: &AtomicU64) -> Option<Guard<'_>> {
    let me = lock_id();
    // Acquire: the critical section sees everything the previous owner published. Relaxed on
    // failure: the owner's word read is only compared and checked, nothing is read through it.
    match word.compare_exchange(0, me, Acquire, Relaxed) {
        Ok(_) => Some(Guard {
            word,
            recovered: false,
        }),
        Err(owner) if owner == me => None,
        Err(_) => Some(lock_contended(word, me)),
    }
}

#[cold]
fn lock_contended(word: &AtomicU64, me: u64) -> Guard<'_> {
    let backoff = Backoff::new();
    let mut next_check = Instant::now() + LIVENESS_CHECK;
    loop {
        // Acquire and Relaxed on failure: as in `lock`.
        match word.compare_exchange(0, me, Acquire, Relaxed) {
            Ok(_) => {
                return Guard {
                    word,
                    recovered: false,
                }
            }
            Err(owner) => {
                if Instant::now() >= next_check {
                    let alive = lock_owner_alive(owner);
                    #[cfg(test)]
                    tests::on_check(owner, alive);
                    // Acquire: whatever the dead owner published before it died is seen.
                    // Relaxed on failure: someone else took or released it; go on waiting.
                    if !alive && word.compare_exchange(owner, me, Acquire, Relaxed).is_ok() {
                        return Guard {
                            word,
                            recovered: true,
                        };
                    }
                    next_check = Instant::now() + LIVENESS_CHECK;
                }
            }
        }
        backoff.snooze();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thread::{lock_word, thread_start_tag};
    use std::cell::RefCell;
    use std::sync::{mpsc::channel, Arc};

    /// Called with each liveness check a waiter makes: `(owner, alive)`.
    type OnCheck = Box<dyn FnMut(u64, bool)>;

    thread_local! {
        /// What a waiter on this thread calls at each liveness check.
        static CHECKS: RefCell<Option<OnCheck>> = const { RefCell::new(None) };
    }

    pub(super) fn on_check(owner: u64, alive: bool) {
        CHECKS.with(|c| {
            if let Some(f) = c.borrow_mut().as_mut() {
                f(owner, alive)
            }
        });
    }

    fn gettid() -> u32 {
        // SAFETY: gettid has no arguments and cannot fail.
        unsafe { libc::gettid() as u32 }
    }

    /// A nonzero tag other than `tag`.
    fn other_tag(tag: u32) -> u32 {
        match tag.wrapping_add(1) {
            0 => 1,
            t => t,
        }
    }

    #[test]
    fn lock_excludes_and_releases() {
        let word = AtomicU64::new(0);
        let g = lock(&word).unwrap();
        // Relaxed: this thread stored it.
        assert_eq!(word.load(Relaxed), lock_id());
        assert!(!g.recovered());
        assert!(lock(&word).is_none(), "re-entry must not deadlock");
        drop(g);
        // Relaxed: as above.
        assert_eq!(word.load(Relaxed), 0);
    }

    #[test]
    fn lock_held_by_a_dead_thread_is_recovered() {
        // A thread that has exited: neither its tid (not reused this soon) nor its tag is
        // alive. (Right after the join its task may still be on its way out, listed in /proc
        // for a moment: the waiter finds it gone at one of its checks.)
        let dead = std::thread::spawn(lock_id).join().unwrap();
        let word = AtomicU64::new(dead);
        let g = lock(&word).unwrap();
        assert!(g.recovered());
        assert!(!lock_owner_alive(dead));
        // Relaxed: this thread stored it.
        assert_eq!(word.load(Relaxed), lock_id());
    }

    #[test]
    fn a_reused_tid_with_another_start_tag_is_recovered() {
        // A live thread, blocked: its tid stands for one reused after the lock's owner died.
        let word = Arc::new(AtomicU64::new(0));
        let (id_tx, id_rx) = channel();
        let (go_tx, go_rx) = channel::<()>();
        let w = word.clone();
        let live = std::thread::spawn(move || {
            id_tx.send(lock_id()).unwrap();
            go_rx.recv().unwrap();
            lock(&w).map(|g| g.recovered())
        });
        let id = id_rx.recv().unwrap();
        let (tid, tag) = ((id >> 32) as u32, id as u32);
        assert_ne!(tag, 0, "the start time is readable here");
        assert_eq!(
            thread_start_tag(tid),
            Some(tag),
            "thread-self and <tid> agree"
        );
        assert!(lock_owner_alive(id));

        // The dead owner's word: the live thread's tid, but another start.
        let reused = lock_word(tid, other_tag(tag));
        assert!(!lock_owner_alive(reused));
        // Relaxed: nothing else uses the word until the live thread is told to go.
        word.store(reused, Relaxed);
        let g = lock(&word).unwrap();
        assert!(g.recovered());
        // Relaxed: this thread stored it.
        assert_eq!(word.load(Relaxed), lock_id());
        drop(g);

        // The same with this thread's own tid: a previous thread's lock, not a re-entry.
        let mine = lock_word(gettid(), other_tag(lock_id() as u32));
        // Relaxed: only this thread uses the word now.
        word.store(mine, Relaxed);
        let g = lock(&word).expect("not taken for a re-entry");
        assert!(g.recovered());
        drop(g);

        // The live thread was never disturbed, and takes the lock normally.
        go_tx.send(()).unwrap();
        assert_eq!(live.join().unwrap(), Some(false));
    }

    #[test]
    fn a_live_owner_is_never_robbed() {
        let word = Arc::new(AtomicU64::new(0));
        let (held_tx, held_rx) = channel();
        let (release_tx, release_rx) = channel::<()>();
        let w = word.clone();
        let holder = std::thread::spawn(move || {
            let g = lock(&w).unwrap();
            held_tx.send(lock_id()).unwrap();
            release_rx.recv().unwrap();
            drop(g);
        });
        let owner = held_rx.recv().unwrap();
        // Relaxed: the channel orders the holder's store before this load.
        assert_eq!(word.load(Relaxed), owner);
        let tid = (owner >> 32) as u32;
        assert_eq!(
            thread_start_tag(tid),
            Some(owner as u32),
            "its right start tag"
        );

        let (check_tx, check_rx) = channel();
        let w = word.clone();
        let waiter = std::thread::spawn(move || {
            CHECKS.with(|c| {
                *c.borrow_mut() = Some(Box::new(move |owner, alive| {
                    let _ = check_tx.send((owner, alive));
                }))
            });
            lock(&w).unwrap().recovered()
        });
        // The waiter checks the owner every 2 ms, finds it alive each time, and waits.
        for _ in 0..3 {
            assert_eq!(check_rx.recv().unwrap(), (owner, true));
        }
        release_tx.send(()).unwrap();
        holder.join().unwrap();
        // Then it gets the lock normally.
        assert!(!waiter.join().unwrap());
        // Relaxed: the join orders the waiter's release before this load.
        assert_eq!(word.load(Relaxed), 0);
    }
}
