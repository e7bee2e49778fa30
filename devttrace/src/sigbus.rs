//! Reading a file that shrinks under its mapping.
//!
//! A reader maps the device's files; if another process truncates one of them, touching a
//! page past the new end raises `SIGBUS`, which kills the reader. A reader must survive a
//! hostile device, so read-only mappings are *watched*: a `SIGBUS` handler checks whether the
//! faulting address lies in a watched mapping and, if so, replaces that page with a private
//! zero page (`mmap` with `MAP_FIXED`), counts the fault and returns. The faulting load is
//! retried and reads zeros, which every reader already treats as an empty slot or a
//! malformed record; the reader then sees the count ([`Watch::faults`]) and reports the file
//! as shrunk. No `longjmp`, no unwinding through a signal frame: the handler only loads
//! atomics, makes one system call and stores an atomic.
//!
//! A fault outside every watched mapping goes to the handler installed before ours (Rust's
//! own handler detects stack overflows with `SIGBUS` too), or to the default action.
//!
//! Writers' mappings are not watched: a traced program keeps whatever `SIGBUS` handling it
//! has, and a process truncating the device under a live writer is outside the protocol.

use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering::*};

/// How many mappings can be watched at once (a device has `cpus + 3`); beyond that a
/// mapping is left unwatched ([`watch`] returns `None`).
const RANGES: usize = 1024;

/// A watched address range, `[start, end)`. `start == 0` marks a free entry; `end == 0` an
/// entry being filled or emptied, which matches no address.
struct Range {
    start: AtomicUsize,
    end: AtomicUsize,
    faults: AtomicU64,
}

static WATCHED: [Range; RANGES] = [const {
    Range {
        start: AtomicUsize::new(0),
        end: AtomicUsize::new(0),
        faults: AtomicU64::new(0),
    }
}; RANGES];

/// The action that was installed for `SIGBUS` before ours (set once, before ours is).
static PREVIOUS: AtomicPtr<libc::sigaction> = AtomicPtr::new(core::ptr::null_mut());

/// The page size, set before the handler is installed.
static PAGE: AtomicUsize = AtomicUsize::new(0);

/// A watched mapping; unwatched on drop (which must come before the unmapping).
#[derive(Debug)]
pub struct Watch {
    index: usize,
}

impl Watch {
    /// How many of the mapping's pages faulted (were found beyond the end of the file).
    pub fn faults(&self) -> u64 {
        // Relaxed: a counter; the reader checks it after the loads it is about, which the
        // handler's stores precede in this same thread (a signal runs in the faulting thread).
        WATCHED[self.index].faults.load(Relaxed)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let r = &WATCHED[self.index];
        // SeqCst (see `on_sigbus`): the entry stops matching before it is freed for another
        // mapping.
        r.end.store(0, SeqCst);
        r.start.store(0, SeqCst);
    }
}

/// Watches `len` bytes mapped at `ptr`: from now on a `SIGBUS` in them is survived and
/// counted. Returns `None` if every entry is in use or the handler cannot be installed.
pub fn watch(ptr: *const u8, len: usize) -> Option<Watch> {
    let start = ptr as usize;
    if start == 0 || len == 0 || !install() {
        return None;
    }
    let index = WATCHED.iter().position(|r| {
        // SeqCst (see `on_sigbus`); Relaxed on failure: the entry is in use and not looked at.
        r.start.compare_exchange(0, start, SeqCst, Relaxed).is_ok()
    })?;
    let r = &WATCHED[index];
    // Relaxed: nothing can fault in the range before `watch` returns to the caller.
    r.faults.store(0, Relaxed);
    // SeqCst (see `on_sigbus`): publishes `start` and `faults` to a handler that sees it.
    r.end.store(start.saturating_add(len), SeqCst);
    Some(Watch { index })
}

/// Installs the handler once; whether it is installed.
fn install() -> bool {
    static INSTALLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *INSTALLED.get_or_init(|| {
        // SAFETY: sysconf has no memory effects.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if page <= 0 {
            return false;
        }
        // Relaxed: stored before `sigaction` installs the handler, which therefore runs only
        // after this store (the installing system call orders it, in every thread).
        PAGE.store(page as usize, Relaxed);
        // SAFETY: a zeroed sigaction is a valid value (no handler, empty mask, no flags).
        let mut new: libc::sigaction = unsafe { core::mem::zeroed() };
        new.sa_sigaction = on_sigbus as *const () as usize;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
        // SAFETY: as above.
        let old = Box::into_raw(Box::new(unsafe { core::mem::zeroed::<libc::sigaction>() }));
        // Release: the handler reads the previous action through this pointer.
        PREVIOUS.store(old, Release);
        // SAFETY: `new` is a valid action whose handler is async-signal-safe (see
        // `on_sigbus`); `old` points to writable memory that lives forever (leaked).
        unsafe { libc::sigemptyset(&mut new.sa_mask) };
        // SAFETY: as above.
        unsafe { libc::sigaction(libc::SIGBUS, &new, old) == 0 }
    })
}

/// The watched range that holds `addr`, if one does. Async-signal-safe (atomic loads only).
fn watching(addr: usize) -> Option<&'static Range> {
    WATCHED.iter().find(|r| {
        // SeqCst, off the hot path: `end` read twice around `start`. `watch` stores `start`
        // before `end`, and `Watch::drop` clears `end` before `start`, so equal reads of
        // `end` around a nonzero `start` give a range that was watched as a whole (if the
        // entry was reused meanwhile with the same end, `start` is the old or the new one,
        // each with that end).
        let end = r.end.load(SeqCst);
        let start = r.start.load(SeqCst);
        start != 0 && r.end.load(SeqCst) == end && (start..end).contains(&addr)
    })
}

/// Whether a `SIGBUS` at `addr` is one a reader survives: the address lies in a watched
/// mapping, whose page this module's handler replaces. Async-signal-safe: for another
/// `SIGBUS` handler of the process (a fatal-signal recorder) to leave such a fault to it.
pub fn survives_sigbus(addr: usize) -> bool {
    watching(addr).is_some()
}

/// The `SIGBUS` handler. Async-signal-safe: atomic loads and stores, `mmap` (a plain system
/// call on Linux), `sigaction` and a call of the previous handler.
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    // Relaxed: stored once before the handler was installed (see `install`).
    let page = PAGE.load(Relaxed);
    if let Some(r) = watching(addr) {
        let base = addr & !(page - 1);
        // SAFETY: the page lies in a mapping this process made and is watching (so it is
        // still mapped); replacing it with a private zero page changes only what that
        // mapping reads, which readers access through atomics and validate. Read-only, as
        // the mapping it replaces a page of (`crate::files::map_read_only`).
        let p = unsafe {
            libc::mmap(
                base as *mut libc::c_void,
                page,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            // Relaxed: read later by this same thread (see `Watch::faults`) or after a
            // synchronising join by another.
            r.faults.fetch_add(1, Relaxed);
            return;
        }
    }
    // Not ours (or the page could not be replaced): what would have happened without us.
    let prev = PREVIOUS.load(Acquire);
    // SAFETY: set (to a leaked, valid sigaction) before this handler was installed.
    let prev = unsafe { &*prev };
    let h = prev.sa_sigaction;
    // SAFETY: as at the top.
    let sent = unsafe { (*info).si_code } <= 0; // by kill() or raise(), not by a fault
    if h == libc::SIG_IGN && sent {
        return;
    }
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        // Restore the default action. On return, a fault recurs and takes it (a SIGBUS from
        // a bad access cannot be ignored); a sent signal is sent again, and taken when this
        // handler returns and unblocks it.
        // SAFETY: a zeroed sigaction with SIG_DFL is valid.
        let mut dfl: libc::sigaction = unsafe { core::mem::zeroed() };
        dfl.sa_sigaction = libc::SIG_DFL;
        // SAFETY: valid action, no old action wanted; raise is async-signal-safe.
        unsafe {
            libc::sigaction(libc::SIGBUS, &dfl, core::ptr::null_mut());
            if sent {
                libc::raise(libc::SIGBUS);
            }
        }
    } else if prev.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous handler was installed with SA_SIGINFO, so it has this type.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { core::mem::transmute(h) };
        f(sig, info, ctx);
    } else {
        // SAFETY: a handler installed without SA_SIGINFO takes the signal number only.
        let f: extern "C" fn(libc::c_int) = unsafe { core::mem::transmute(h) };
        f(sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_watched_mapping_survives_its_file_shrinking_and_counts_the_faults() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&[7u8; 3 * 4096]).unwrap();
        // SAFETY: the file is private to this test; it is truncated below on purpose.
        let map = unsafe {
            memmap2::MmapOptions::new()
                .map_copy_read_only(&file)
                .unwrap()
        };
        let w = watch(map.as_ptr(), map.len()).expect("watched");
        let read = |at: usize| {
            // SAFETY: in bounds of the live mapping; a volatile read, since the page may be
            // replaced under us.
            unsafe { core::ptr::read_volatile(map.as_ptr().add(at)) }
        };
        assert_eq!((read(0), read(8192), w.faults()), (7, 7, 0));
        file.set_len(4096).unwrap();
        assert_eq!(read(0), 7, "the first page is still in the file");
        assert_eq!(
            (read(4096), read(8192)),
            (0, 0),
            "pages past the end read as zeros"
        );
        assert_eq!(w.faults(), 2);
        drop(w);
    }

    #[test]
    fn a_fault_outside_every_watched_mapping_still_kills_with_sigbus() {
        let mut watched = tempfile::tempfile().unwrap();
        let mut other = tempfile::tempfile().unwrap();
        watched.write_all(&[1u8; 4096]).unwrap();
        other.write_all(&[2u8; 8192]).unwrap();
        // SAFETY: private test files, truncated on purpose.
        let (wm, om) = unsafe {
            (
                memmap2::MmapOptions::new()
                    .map_copy_read_only(&watched)
                    .unwrap(),
                memmap2::MmapOptions::new()
                    .map_copy_read_only(&other)
                    .unwrap(),
            )
        };
        let _w = watch(wm.as_ptr(), wm.len()).expect("watched");
        other.set_len(0).unwrap();
        // Everything is set up before the fork: the child only reads and exits.
        // SAFETY: the child calls only async-signal-safe functions (a load, _exit).
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: in bounds of the mapping; the page is past the file's end.
            let v = unsafe { core::ptr::read_volatile(om.as_ptr().add(4096)) };
            // SAFETY: _exit is async-signal-safe.
            unsafe { libc::_exit(v as i32) };
        }
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGBUS,
            "status {status:#x}"
        );
    }
}
