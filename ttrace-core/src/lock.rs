//! A lock word in shared memory, with a recovery rule for an owner that died.
//!
//! The word is `0` when free and the owner's [`lock_id`] when held: `tid << 32 | start_tag`,
//! where `start_tag` is the low 32 bits of the owner thread's start time (`starttime`, field
//! 22 of `/proc/<tid>/stat`, in clock ticks since boot), or `0` if that could not be read. The
//! word is never `0` when held, since no thread has tid 0. It guards only a few dozen
//! instructions (aux reservations, metadata appends, control changes), so waiters spin, then
//! yield. A lock in a file shared by processes can outlive its owner (SIGKILL), so a waiter
//! that has waited a while checks whether the owner is still alive ([`lock_owner_alive`]); if
//! not, it takes the lock over with a compare-and-exchange from the dead owner's word, so only
//! one waiter can succeed. Every critical section guarded by these locks leaves the shared
//! state consistent after each of its stores (see `docs/DESIGN.md`), so the new owner needs no
//! repair beyond what the caller does when told it [`recovered`](Guard::recovered) the lock.
//!
//! **Why the start tag.** Thread ids are reused: once the owner is dead, the kernel may give
//! its tid to a new thread of any process. A waiter that only asked whether the tid exists
//! would then wait for that unrelated thread to exit, possibly forever (issue 20). A thread
//! that reuses a tid started after the dead owner did, so its start time differs: the waiter
//! sees the tag mismatch and takes the lock over. The pid is left out of the word: a tid alone
//! names a thread in its pid namespace, and the tag needs the 32 bits. The check can still be
//! fooled, towards waiting, by a tid reused within the same clock tick (the kernel hands out
//! ids in a cycle, so this takes `pid_max` new threads within one tick), or by one reused
//! exactly a multiple of 2^32 ticks later (about 497 days at 100 Hz). A tag of `0` (start time
//! unreadable) falls back to the tid's existence alone. Processes sharing a lock must share a
//! pid namespace (tids) and a time namespace: `/proc/<tid>/stat` shifts `starttime` by the
//! reader's boot-time offset, so a waiter in another time namespace would see every owner's
//! tag as wrong.
//!
//! The `spin` crate's locks cannot live in a file mapped by several processes, and cannot
//! recover from a dead owner; this is the equivalent lock word.

use core::cell::Cell;
use core::sync::atomic::{AtomicU64, Ordering::*};
use crossbeam_utils::Backoff;
use std::ffi::OsStr;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a waiter waits between checks that the owner is alive.
const LIVENESS_CHECK: Duration = Duration::from_millis(2);

/// Bytes of a `stat` file that are read. Field 22 ends well within them: the pid, a command
/// name of at most 64 bytes with its parentheses, and 20 numbers of at most 20 digits (only
/// the comm can hold a `)`, so the last one in this prefix is the comm's).
const STAT_BYTES: usize = 1024;

thread_local! {
    /// The calling thread's `pid << 32 | tid`, once known (0 before, and in a forked child).
    static OWNER: Cell<u64> = const { Cell::new(0) };
    /// The calling thread's [`lock_id`], once known (0 before, and in a forked child).
    static LOCK_ID: Cell<u64> = const { Cell::new(0) };
}

/// `pid << 32 | tid` of the calling thread (cached: `gettid` is a system call). This is the
/// trace context word; the lock word is [`lock_id`].
#[inline]
pub fn owner_id() -> u64 {
    let id = OWNER.with(Cell::get);
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

/// The calling thread's lock word, `tid << 32 | start_tag` (see the [module docs](self)).
///
/// Computed on the thread's first call (a system call and a read of
/// `/proc/thread-self/stat`), then cached; a forked child computes its own.
///
/// ```
/// use ttrace_core::lock::{lock_id, lock_word, thread_start_tag};
///
/// let id = lock_id();
/// let tid = (id >> 32) as u32;
/// // The tag is the thread's start time as anyone can read it, or 0 where it cannot be read.
/// assert_eq!(id, lock_word(tid, thread_start_tag(tid).unwrap_or(0)));
/// ```
#[inline]
pub fn lock_id() -> u64 {
    let id = LOCK_ID.with(Cell::get);
    if id != 0 {
        return id;
    }
    new_lock_id()
}

#[cold]
#[inline(never)]
fn new_lock_id() -> u64 {
    crate::thread::watch_forks();
    // SAFETY: gettid has no arguments and cannot fail.
    let tid = unsafe { libc::gettid() } as u32;
    let mut buf = [0u8; STAT_BYTES];
    let tag = read_stat(Path::new("/proc/thread-self/stat"), &mut buf)
        .ok()
        .and_then(|len| parse_stat(&buf[..len]))
        .map_or(0, |stat| stat.start_time as u32);
    let id = lock_word(tid, tag);
    LOCK_ID.with(|c| c.set(id));
    id
}

/// In the child of a fork: the thread has a new pid, tid and start time.
pub(crate) fn forget_owner_after_fork() {
    OWNER.with(|o| o.set(0));
    LOCK_ID.with(|o| o.set(0));
}

/// The lock word naming thread `tid` started at `start_tag` (`0`: unknown).
///
/// ```
/// assert_eq!(ttrace_core::lock::lock_word(7, 9), 7 << 32 | 9);
/// ```
#[inline]
pub const fn lock_word(tid: u32, start_tag: u32) -> u64 {
    (tid as u64) << 32 | start_tag as u64
}

/// The start tag of thread `tid` (the low 32 bits of its start time, read from
/// `/proc/<tid>/stat`), or `None` if there is no such thread or its start time cannot be
/// read.
pub fn thread_start_tag(tid: u32) -> Option<u32> {
    let mut path = [0u8; 32];
    let mut buf = [0u8; STAT_BYTES];
    let len = read_stat(stat_path(tid, &mut path), &mut buf).ok()?;
    parse_stat(&buf[..len]).map(|stat| stat.start_time as u32)
}

/// Whether the thread named by the lock word `word` ([`lock_id`]) may still be running.
/// Unknown answers count as alive: the lock is never taken from an owner that might be
/// running.
///
/// Dead: no thread has the tid (`/proc/<tid>/stat` does not exist while `/proc` does), or the
/// thread that has it is a zombie, or it started at another time than the tag says (the tid
/// was reused), or the word names tid 0 (it is damaged). Alive otherwise, including when
/// `/proc` is missing, unreadable, or its `stat` is malformed.
pub fn lock_owner_alive(word: u64) -> bool {
    let (tid, tag) = ((word >> 32) as u32, word as u32);
    if tid == 0 {
        return false;
    }
    let mut path = [0u8; 32];
    let mut buf = [0u8; STAT_BYTES];
    match read_stat(stat_path(tid, &mut path), &mut buf) {
        Ok(len) => stat_says_alive(&buf[..len], tag),
        // The thread is gone, unless /proc itself is missing: then nothing is known.
        Err(e) if e.kind() == ErrorKind::NotFound => !Path::new("/proc/self").exists(),
        Err(_) => true,
    }
}

/// Whether the thread whose `/proc/<tid>/stat` reads `stat` may be the owner tagged `tag`.
fn stat_says_alive(stat: &[u8], tag: u32) -> bool {
    match parse_stat(stat) {
        // Exited: it will never run again, whoever it is.
        Some(s) if matches!(s.state, b'Z' | b'X' | b'x') => false,
        Some(s) => tag == 0 || s.start_time as u32 == tag,
        None => true,
    }
}

/// Whether the thread named by a context word `pid << 32 | tid` ([`owner_id`]) still exists
/// (`/proc/<pid>/task/<tid>`): the writer of an aux record still being written. Unknown
/// answers count as alive. For a lock word, see [`lock_owner_alive`].
pub fn owner_alive(owner: u64) -> bool {
    let (pid, tid) = ((owner >> 32) as i32, owner as u32 as i32);
    if pid <= 0 {
        return false;
    }
    match std::fs::metadata(format!("/proc/{pid}/task/{tid}")) {
        Ok(_) => true,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            // The thread is gone. If /proc itself is missing, fall back to the process.
            if Path::new("/proc/self").exists() {
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

/// What the lock needs of a `stat` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stat {
    /// Field 3: `R`, `S`, `D`, `Z` (zombie), `X` (dead), ...
    state: u8,
    /// Field 22: clock ticks from boot to the thread's start.
    start_time: u64,
}

/// Parses a `/proc/<tid>/stat` line: `pid (comm) state ...`, where the comm may hold spaces
/// and parentheses, so the fields are counted from its last `)`. `None` if malformed.
fn parse_stat(line: &[u8]) -> Option<Stat> {
    let close = line.iter().rposition(|&b| b == b')')?;
    let mut fields = line[close + 1..]
        .split(u8::is_ascii_whitespace)
        .filter(|f| !f.is_empty());
    let state = fields.next().filter(|f| f.len() == 1)?[0];
    // Fields 4 to 21 come between the state and the start time.
    let start_time = std::str::from_utf8(fields.nth(18)?).ok()?.parse().ok()?;
    Some(Stat { state, start_time })
}

/// `/proc/<tid>/stat`, written into `buf` (no allocation: this may run in a signal handler).
fn stat_path(tid: u32, buf: &mut [u8; 32]) -> &Path {
    let mut rest: &mut [u8] = buf;
    // At most 21 bytes ("/proc/4294967295/stat"): cannot fail.
    let _ = write!(rest, "/proc/{tid}/stat");
    let len = 32 - rest.len();
    Path::new(OsStr::from_bytes(&buf[..len]))
}

/// Reads the start of the file at `path` into `buf` (up to its end or `buf`'s), returning the
/// length read.
fn read_stat(path: &Path, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut file = std::fs::File::open(path)?;
    let mut len = 0;
    // A stat file is one line: stop at its newline rather than read again to find its end.
    while len < buf.len() && !buf[..len].ends_with(b"\n") {
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(len)
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
    fn lock_id_is_the_tid_and_start_tag_and_owner_id_is_unchanged() {
        let tid = gettid();
        let tag = thread_start_tag(tid).expect("/proc/<tid>/stat is readable here");
        assert_eq!(lock_id(), lock_word(tid, tag));
        assert_eq!(lock_id(), lock_word(tid, tag), "cached");
        assert_eq!(owner_id(), (std::process::id() as u64) << 32 | tid as u64);
        assert!(lock_owner_alive(lock_id()));
        assert!(
            lock_owner_alive(lock_word(tid, 0)),
            "unknown tag: the tid exists"
        );
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

    #[test]
    fn stat_is_parsed_after_the_last_paren() {
        // A comm with spaces and parentheses, shaped like the fields that follow it.
        let fields = "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 4294967303 20 21 22\n";
        let line = format!("4242 (a) (b c) Z 9 ) S {fields}");
        let stat = parse_stat(line.as_bytes()).unwrap();
        assert_eq!(
            stat,
            Stat {
                state: b'S',
                start_time: (1 << 32) + 7
            }
        );
        assert!(stat_says_alive(line.as_bytes(), 7), "low 32 bits");
        assert!(stat_says_alive(line.as_bytes(), 0), "unknown tag");
        assert!(!stat_says_alive(line.as_bytes(), 8), "reused tid");
        let zombie = format!("4242 (a) Z {fields}");
        assert!(!stat_says_alive(zombie.as_bytes(), 7), "exited");

        // Malformed: unknown, so alive.
        let bad: [&[u8]; 8] = [
            b"",
            b"4242 (a",
            b"4242 (a) S 1 2 3",
            b"4242 (a) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 x 20",
            b"4242 (a) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 -1 20",
            b"4242 (a) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 99999999999999999999 20",
            b"4242 (a) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 \xff 20",
            b"4242 (a) SS 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 7 20",
        ];
        for b in bad {
            assert_eq!(parse_stat(b), None, "{}", String::from_utf8_lossy(b));
            assert!(stat_says_alive(b, 7));
        }
    }

    #[test]
    fn absent_and_damaged_owners_are_dead() {
        // Beyond the largest pid_max (2^22): no such thread.
        assert_eq!(thread_start_tag(u32::MAX), None);
        assert!(!lock_owner_alive(lock_word(u32::MAX, 1)));
        assert!(!lock_owner_alive(lock_word(0, 1)));
        let mut path = [0u8; 32];
        assert_eq!(
            stat_path(u32::MAX, &mut path),
            Path::new("/proc/4294967295/stat")
        );
    }

    #[test]
    fn lock_id_is_forgotten_after_fork() {
        let parent = lock_id();
        assert_ne!(owner_id(), 0);
        // SAFETY: the child only makes system calls (no allocation, no locks: `lock_id` and
        // `thread_start_tag` read /proc into stack buffers) and leaves by `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
        if pid == 0 {
            let tid = gettid();
            let id = lock_id();
            let ok = id != parent
                && id >> 32 == tid as u64
                && thread_start_tag(tid) == Some(id as u32)
                && owner_id() == (std::process::id() as u64) << 32 | tid as u64;
            // SAFETY: ends the child without running the parent's destructors or handlers.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: `pid` is our child; `status` is a valid out-pointer.
        let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(waited, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    }
}
