//! A lock word in shared memory, with a recovery rule for an owner that died.
//!
//! The word is `0` when free and the owner's `pid << 32 | tid` when held. It guards only a
//! few dozen instructions (aux reservations, metadata appends, control changes), so waiters
//! spin, then yield. A lock in a file shared by processes can outlive its owner (SIGKILL), so
//! a waiter that has waited a while checks whether the owner thread still exists
//! (`/proc/<pid>/task/<tid>`); if not, it takes the lock over with a compare-and-exchange from
//! the dead owner's id, so only one waiter can succeed. Every critical section guarded by
//! these locks leaves the shared state consistent after each of its stores (see
//! `docs/DESIGN.md`), so the new owner needs no repair beyond what the caller does when told
//! it [`recovered`](Guard::recovered) the lock.
//!
//! The `spin` crate's locks cannot live in a file mapped by several processes, and cannot
//! recover from a dead owner; this is the equivalent lock word.

use core::sync::atomic::{AtomicU64, Ordering::*};
use crossbeam_utils::Backoff;
use std::time::{Duration, Instant};

/// How long a waiter waits between checks that the owner is alive.
const LIVENESS_CHECK: Duration = Duration::from_millis(2);

thread_local! {
    /// The calling thread's `pid << 32 | tid`, once known (0 before, and in a forked child).
    static OWNER: core::cell::Cell<u64> = const { core::cell::Cell::new(0) };
}

/// `pid << 32 | tid` of the calling thread (cached: `gettid` is a system call).
#[inline]
pub fn owner_id() -> u64 {
    let id = OWNER.with(core::cell::Cell::get);
    if id != 0 {
        return id;
    }
    crate::thread::watch_forks();
    let pid = std::process::id() as u64;
    // SAFETY: gettid has no arguments and cannot fail.
    let tid = unsafe { libc::gettid() } as u32 as u64;
    OWNER.with(|o| o.set(pid << 32 | tid));
    pid << 32 | tid
}

/// In the child of a fork: the thread has a new pid and tid.
pub(crate) fn forget_owner_after_fork() {
    OWNER.with(|o| o.set(0));
}

/// Whether the thread `pid << 32 | tid` still exists. Unknown answers count as alive: the
/// lock is never taken from an owner that might be running.
pub fn owner_alive(owner: u64) -> bool {
    let (pid, tid) = ((owner >> 32) as i32, owner as u32 as i32);
    if pid <= 0 {
        return false;
    }
    match std::fs::metadata(format!("/proc/{pid}/task/{tid}")) {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // The thread is gone. If /proc itself is missing, fall back to the process.
            if std::path::Path::new("/proc/self").exists() {
                false
            } else {
                // SAFETY: signal 0 only checks for the process's existence.
                !(unsafe { libc::kill(pid, 0) } == -1
                    && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH))
            }
        }
        Err(_) => true,
    }
}

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
    let me = owner_id();
    // Acquire: the critical section sees everything the previous owner published.
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
        match word.compare_exchange(0, me, Acquire, Relaxed) {
            Ok(_) => {
                return Guard {
                    word,
                    recovered: false,
                }
            }
            Err(owner) => {
                if Instant::now() >= next_check {
                    if !owner_alive(owner)
                        && word.compare_exchange(owner, me, Acquire, Relaxed).is_ok()
                    {
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

    #[test]
    fn lock_excludes_and_releases() {
        let word = AtomicU64::new(0);
        let g = lock(&word).unwrap();
        assert_eq!(word.load(Relaxed), owner_id());
        assert!(!g.recovered());
        assert!(lock(&word).is_none(), "re-entry must not deadlock");
        drop(g);
        assert_eq!(word.load(Relaxed), 0);
    }

    #[test]
    fn lock_held_by_a_dead_thread_is_recovered() {
        // A thread that has exited: its id can never be alive again in this process
        // (tids are not reused while the process keeps running and the ids are fresh).
        let dead = std::thread::spawn(owner_id).join().unwrap();
        assert!(!owner_alive(dead));
        let word = AtomicU64::new(dead);
        let g = lock(&word).unwrap();
        assert!(g.recovered());
        assert_eq!(word.load(Relaxed), owner_id());
    }

    #[test]
    fn a_live_owner_is_never_robbed() {
        let word = std::sync::Arc::new(AtomicU64::new(0));
        let g = lock(&word).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let w2 = word.clone();
        let waiter = std::thread::spawn(move || {
            tx.send(()).unwrap();
            let g = lock(&w2).unwrap();
            g.recovered()
        });
        rx.recv().unwrap();
        // The waiter is spinning and checking liveness; we are alive, so it must wait until
        // we release, and then it gets the lock normally.
        assert!(owner_alive(owner_id()));
        drop(g);
        assert!(!waiter.join().unwrap());
    }
}
