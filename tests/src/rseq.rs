//! Helpers for the tests of the restartable (rseq) path: moving threads between CPUs,
//! signalling threads, and telling, in a signal handler, whether the signal interrupted one
//! of ttrace's restartable critical sections.
//!
//! When the kernel delivers a signal to a thread whose instruction pointer is inside a
//! registered critical section, it first moves that pointer to the section's abort address,
//! then saves it in the signal frame: so a handler that finds the interrupted address to be
//! an abort address (one just after the signature in the `__rseq_failure` section, where
//! `ttrace_core::rseq` puts its abort handlers) knows that the signal landed inside a
//! section and aborted it.

use std::io;
use std::process::Command;

/// What a test of the restartable path says when this process does not take it.
pub const RSEQ_REQUIRED: &str =
    "this test exercises the restartable (rseq) path: it needs glibc 2.35 or \
     later with rseq registered (not disabled by GLIBC_TUNABLES=glibc.pthread.rseq=0), an \
     invariant TSC, and TTRACE_NO_RSEQ unset";

/// The signature that precedes every abort address (`ttrace_core::rseq`).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
const RSEQ_SIG: u32 = 0x5305_3053;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
extern "C" {
    // Defined by the linker for the orphan section `__rseq_failure`, which holds the abort
    // handlers of every restartable section linked into this executable.
    static __start___rseq_failure: u8;
    static __stop___rseq_failure: u8;
}

/// Whether `ip` is the abort address of one of ttrace's restartable sections in this
/// executable. Async-signal-safe. (An executable that calls it must contain such sections,
/// that is record events with `ttrace_core`, or it does not link.) Always false where
/// ttrace has no restartable sections (other than x86-64 Linux).
pub fn is_abort_address(ip: usize) -> bool {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        // Only the addresses of the linker-defined symbols are taken.
        let (start, stop) = (
            core::ptr::addr_of!(__start___rseq_failure) as usize,
            core::ptr::addr_of!(__stop___rseq_failure) as usize,
        );
        // SAFETY: `ip - 4 .. ip` lies inside the section (checked first), which is mapped.
        ip >= start + 4
            && ip < stop
            && unsafe { core::ptr::read_unaligned((ip - 4) as *const u32) } == RSEQ_SIG
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        let _ = ip;
        false
    }
}

/// The instruction pointer a signal interrupted, from the context a `SA_SIGINFO` handler
/// receives (0 where this module does not know the context's layout).
///
/// # Safety
///
/// `context` is the third argument of a `SA_SIGINFO` signal handler.
pub unsafe fn interrupted_ip(context: *mut libc::c_void) -> usize {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let uc = context as *const libc::ucontext_t;
        // SAFETY: the kernel passes a valid ucontext_t (the caller's contract).
        unsafe { (*uc).uc_mcontext.gregs[libc::REG_RIP as usize] as usize }
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        let _ = context;
        0
    }
}

/// Installs `handler` for `signal` with `SA_SIGINFO | SA_RESTART`.
pub fn install(
    signal: libc::c_int,
    handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void),
) {
    // SAFETY: a zeroed sigaction with an empty mask and a valid handler is valid.
    let rc = unsafe {
        let mut sa: libc::sigaction = core::mem::zeroed();
        sa.sa_sigaction = handler as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(signal, &sa, core::ptr::null_mut())
    };
    assert_eq!(rc, 0, "sigaction: {}", io::Error::last_os_error());
}

/// The calling thread's id.
pub fn gettid() -> libc::pid_t {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// Sends `signal` to thread `tid` of this process.
pub fn signal_thread(tid: libc::pid_t, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: tgkill only sends a signal; the thread belongs to this process.
    if unsafe { libc::tgkill(libc::getpid(), tid, signal) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Lets thread `tid` (0: the calling thread) run only on the CPUs in `cpus`.
pub fn set_affinity(tid: libc::pid_t, cpus: &[usize]) -> io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_setaffinity only reads it.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = core::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(tid, core::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The CPUs this process may run on (its affinity mask when the test starts).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity fills it.
    unsafe {
        let mut set: libc::cpu_set_t = core::mem::zeroed();
        let rc = libc::sched_getaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &mut set);
        assert_eq!(rc, 0, "sched_getaffinity: {}", io::Error::last_os_error());
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// The CPU the calling thread runs on now, as the kernel says.
pub fn current_cpu() -> usize {
    // SAFETY: sched_getcpu has no arguments.
    let c = unsafe { libc::sched_getcpu() };
    assert!(c >= 0, "sched_getcpu: {}", io::Error::last_os_error());
    c as usize
}

/// The path a writer process is made to take, by its environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum WritePath {
    /// Nothing in the way of restartable sequences (`TTRACE_NO_RSEQ` and `GLIBC_TUNABLES`
    /// removed).
    Restartable,
    /// `TTRACE_NO_RSEQ=1`: the shared rings.
    NoRseqVar,
    /// `GLIBC_TUNABLES=glibc.pthread.rseq=0`: glibc registers no rseq area, so the shared
    /// rings.
    GlibcNoRseq,
}

impl WritePath {
    /// Each of them.
    pub const ALL: [WritePath; 3] = [
        WritePath::Restartable,
        WritePath::NoRseqVar,
        WritePath::GlibcNoRseq,
    ];

    /// Sets `cmd`'s environment for this path.
    pub fn apply(self, cmd: &mut Command) -> &mut Command {
        cmd.env_remove(ttrace_core::ENV_NO_RSEQ)
            .env_remove("GLIBC_TUNABLES");
        match self {
            WritePath::Restartable => cmd,
            WritePath::NoRseqVar => cmd.env(ttrace_core::ENV_NO_RSEQ, "1"),
            WritePath::GlibcNoRseq => cmd.env("GLIBC_TUNABLES", "glibc.pthread.rseq=0"),
        }
    }

    /// Whether a writer on this path uses the restartable rings (`Device::restartable()`).
    pub fn restartable(self) -> bool {
        self == WritePath::Restartable
    }
}
