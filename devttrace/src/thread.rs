//! The calling thread's identity, as the device names it, and whether a thread named so is
//! still alive.
//!
//! Two words name a thread, each computed once per thread and cached (`gettid` is a
//! system call):
//!
//! - its *context*, `pid << 32 | tid`: what every entry and aux record carries as its
//!   writer ([`context`]);
//! - its *lock id*, `tid << 32 | start_tag`: what a lock word in shared memory holds while
//!   the thread owns it ([`lock_id`]); the start tag (the low 32 bits of the thread's start
//!   time, field 22 of `/proc/<tid>/stat`) tells a dead owner from a new thread that was
//!   given its tid (see [`crate::lock`]).
//!
//! A forked child's one thread has a new pid and tid: a `pthread_atfork` handler, installed
//! with the first id computed, forgets both in the child, which computes its own.
//!
//! Liveness ([`alive`], [`lock_owner_alive`]) is read from `/proc`; an unknown answer counts
//! as alive, so that nothing is ever taken from a thread that might still be running.

use core::cell::Cell;
use std::ffi::OsStr;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Once, OnceLock};

/// Bytes of a `stat` file that are read. Field 22 ends well within them: the pid, a command
/// name of at most 64 bytes with its parentheses, and 20 numbers of at most 20 digits (only
/// the comm can hold a `)`, so the last one in this prefix is the comm's).
const STAT_BYTES: usize = 1024;

/// The calling thread's two ids, once known (0 before, and in a forked child).
struct Ids {
    /// `pid << 32 | tid`.
    context: Cell<u64>,
    /// `tid << 32 | start_tag`.
    lock: Cell<u64>,
}

thread_local! {
    static IDS: Ids = const {
        Ids {
            context: Cell::new(0),
            lock: Cell::new(0),
        }
    };
}

static ATFORK: Once = Once::new();

/// What else a forked child must forget: the functions given to [`on_fork`].
static FORK_HOOKS: [OnceLock<fn()>; 4] = [const { OnceLock::new() }; 4];

/// Makes sure a forked child forgets the ids cached for its parent's thread.
fn watch_forks() {
    ATFORK.call_once(|| {
        // SAFETY: `after_fork` only stores to thread-local Cells and calls the hooks, which
        // (`on_fork`'s contract) do no more: async-signal-safe enough for an atfork child
        // handler.
        unsafe { libc::pthread_atfork(None, None, Some(after_fork)) };
    });
}

/// In the child of a fork: the one thread there has a new pid, tid and start time.
extern "C" fn after_fork() {
    IDS.with(|ids| {
        ids.context.set(0);
        ids.lock.set(0);
    });
    // Set before the fork, by this process: the child sees them as they were.
    for forget in FORK_HOOKS.iter().filter_map(OnceLock::get) {
        forget();
    }
}

/// Makes a forked child call `forget` too, when it forgets this thread's ids: for a cache
/// of its own that holds the parent's thread's identity (the writer's named context, say).
/// `forget` must only store to thread-local cells or atomics. Call it once per cache (at
/// most four are kept); returns false if there was no room.
pub fn on_fork(forget: fn()) -> bool {
    watch_forks();
    FORK_HOOKS.iter().any(|hook| hook.set(forget).is_ok())
}

/// The calling thread's context word, `pid << 32 | tid`: the writer every entry and aux
/// record names.
///
/// ```
/// let ctx = devttrace::thread::context();
/// assert_eq!(ctx >> 32, std::process::id() as u64);
/// ```
#[inline(always)]
pub fn context() -> u64 {
    let id = IDS.with(|ids| ids.context.get());
    if id != 0 {
        return id;
    }
    new_context()
}

#[cold]
#[inline(never)]
fn new_context() -> u64 {
    watch_forks();
    let pid = std::process::id() as u64;
    // SAFETY: gettid has no arguments and cannot fail.
    let tid = unsafe { libc::gettid() } as u32 as u64;
    IDS.with(|ids| ids.context.set(pid << 32 | tid));
    pid << 32 | tid
}

/// The calling thread's lock id, `tid << 32 | start_tag`: what a lock word holds while this
/// thread owns it (see the [module docs](self) and [`crate::lock`]).
///
/// Computed on the thread's first call (a system call and a read of
/// `/proc/thread-self/stat`), then cached; a forked child computes its own.
///
/// ```
/// use devttrace::thread::{lock_id, lock_word, thread_start_tag};
///
/// let id = lock_id();
/// let tid = (id >> 32) as u32;
/// // The tag is the thread's start time as anyone can read it, or 0 where it cannot be read.
/// assert_eq!(id, lock_word(tid, thread_start_tag(tid).unwrap_or(0)));
/// ```
#[inline]
pub fn lock_id() -> u64 {
    let id = IDS.with(|ids| ids.lock.get());
    if id != 0 {
        return id;
    }
    new_lock_id()
}

#[cold]
#[inline(never)]
fn new_lock_id() -> u64 {
    watch_forks();
    // SAFETY: gettid has no arguments and cannot fail.
    let tid = unsafe { libc::gettid() } as u32;
    let mut buf = [0u8; STAT_BYTES];
    let tag = read_stat(Path::new("/proc/thread-self/stat"), &mut buf)
        .ok()
        .and_then(|len| parse_stat(&buf[..len]))
        .map_or(0, |stat| stat.start_time as u32);
    let id = lock_word(tid, tag);
    IDS.with(|ids| ids.lock.set(id));
    id
}

/// The lock word naming thread `tid` started at `start_tag` (`0`: unknown).
///
/// ```
/// assert_eq!(devttrace::thread::lock_word(7, 9), 7 << 32 | 9);
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

/// Whether the thread named by a context word `pid << 32 | tid` ([`context`]) still exists
/// (`/proc/<pid>/task/<tid>`): the writer of an aux record still being written. Unknown
/// answers count as alive. For a lock word, see [`lock_owner_alive`].
pub fn alive(owner: u64) -> bool {
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

/// The name of the calling thread as the kernel knows it (`comm`, at most 15 bytes).
pub fn name() -> String {
    let mut buf = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes, NUL included, into the buffer.
    let rc = unsafe {
        libc::prctl(
            libc::PR_GET_NAME,
            buf.as_mut_ptr() as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The name of this process: the file name of `argv[0]`, else the kernel's `comm`.
pub fn process_name() -> String {
    std::fs::read("/proc/self/cmdline")
        .ok()
        .and_then(|c| {
            let arg0 = c.split(|&b| b == 0).next()?.to_vec();
            let arg0 = String::from_utf8_lossy(&arg0).into_owned();
            let base = arg0.rsplit('/').next()?.to_string();
            (!base.is_empty()).then_some(base)
        })
        .or_else(|| {
            std::fs::read_to_string("/proc/self/comm")
                .ok()
                .map(|s| s.trim_end().to_string())
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gettid() -> u32 {
        // SAFETY: gettid has no arguments and cannot fail.
        unsafe { libc::gettid() as u32 }
    }

    #[test]
    fn lock_id_is_the_tid_and_start_tag_and_owner_id_is_unchanged() {
        let tid = gettid();
        let tag = thread_start_tag(tid).expect("/proc/<tid>/stat is readable here");
        assert_eq!(lock_id(), lock_word(tid, tag));
        assert_eq!(lock_id(), lock_word(tid, tag), "cached");
        assert_eq!(context(), (std::process::id() as u64) << 32 | tid as u64);
        assert!(lock_owner_alive(lock_id()));
        assert!(
            lock_owner_alive(lock_word(tid, 0)),
            "unknown tag: the tid exists"
        );
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
        assert_ne!(context(), 0);
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
                && context() == (std::process::id() as u64) << 32 | tid as u64;
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
