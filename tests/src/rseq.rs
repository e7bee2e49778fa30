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
//!
//! From outside, a process can be caught inside a section: stopped ([`stop_child`]), its
//! instruction pointer ([`stopped_ip`]) compared with the bounds of its sections, which it
//! reads from its own descriptors ([`sections`]). A stopped thread has not been moved to the
//! abort handler yet (the kernel does that on its way back to user space, after the stop);
//! continued, it aborts the section and retries; killed, it never runs again, and the
//! section's stores made before the stop stay, its commit never made.

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

/// One of ttrace's restartable critical sections, as the descriptor the kernel reads (a
/// `struct rseq_cs` in the `__rseq_cs` section, which `ttrace_core::rseq` emits for every
/// section it assembles) bounds it: a thread interrupted with its instruction pointer in
/// `start..end` (from the section's first instruction up to, not including, the one after
/// its commit store) is moved to `abort` before it runs again in user space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Section {
    /// `start_ip`.
    pub start: usize,
    /// `start_ip + post_commit_offset`.
    pub end: usize,
    /// `abort_ip`.
    pub abort: usize,
}

impl Section {
    /// Whether the kernel counts `ip` as inside the section (its own test: `ip - start_ip <
    /// post_commit_offset`, unsigned).
    pub fn contains(&self, ip: usize) -> bool {
        ip.wrapping_sub(self.start) < self.end - self.start
    }

    /// `sections` as one line of text, for another process ([`Section::parse_line`]):
    /// `start-end` in hexadecimal, separated by spaces.
    pub fn line(sections: &[Section]) -> String {
        let ranges: Vec<String> = sections
            .iter()
            .map(|s| format!("{:x}-{:x}", s.start, s.end))
            .collect();
        ranges.join(" ")
    }

    /// The sections of a [`Section::line`] (their `abort` left 0), or `None` if the text is
    /// not one.
    pub fn parse_line(line: &str) -> Option<Vec<Section>> {
        line.split_whitespace()
            .map(|r| {
                let (a, b) = r.split_once('-')?;
                let (start, end) = (
                    usize::from_str_radix(a, 16).ok()?,
                    usize::from_str_radix(b, 16).ok()?,
                );
                (start < end).then_some(Section {
                    start,
                    end,
                    abort: 0,
                })
            })
            .collect()
    }
}

/// The kernel's `struct rseq_cs`, as `ttrace_core::rseq` emits it (`.balign 32`, then
/// `.long version, flags; .quad start, post_commit_offset, abort`).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[repr(C, align(32))]
struct RseqCs {
    version: u32,
    flags: u32,
    start_ip: u64,
    post_commit_offset: u64,
    abort_ip: u64,
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
extern "C" {
    // Defined by the linker for the orphan section `__rseq_cs`, which holds the descriptors
    // of every restartable section linked into this executable.
    static __start___rseq_cs: u8;
    static __stop___rseq_cs: u8;
}

/// The restartable critical sections of this executable (none where ttrace has none: other
/// than x86-64 Linux), read from their descriptors; each is checked to be one of ttrace's
/// (version and flags 0, its abort address one of [`is_abort_address`]). As
/// [`is_abort_address`], an executable that calls it must contain such sections.
pub fn sections() -> Vec<Section> {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        // Only the addresses of the linker-defined symbols are taken.
        let (start, stop) = (
            core::ptr::addr_of!(__start___rseq_cs) as usize,
            core::ptr::addr_of!(__stop___rseq_cs) as usize,
        );
        let size = core::mem::size_of::<RseqCs>();
        assert!(
            start % size == 0 && (stop - start) % size == 0,
            "__rseq_cs is not an array of 32-byte descriptors: {start:#x}..{stop:#x}"
        );
        (start..stop)
            .step_by(size)
            .map(|at| {
                // SAFETY: `at..at + 32` lies inside the section (checked above), which is
                // mapped, aligned for an `RseqCs`, and written only by the dynamic loader's
                // relocations, before `main`.
                let cs = unsafe { core::ptr::read(at as *const RseqCs) };
                let section = Section {
                    start: cs.start_ip as usize,
                    end: (cs.start_ip + cs.post_commit_offset) as usize,
                    abort: cs.abort_ip as usize,
                };
                assert!(
                    (cs.version, cs.flags) == (0, 0)
                        && cs.post_commit_offset > 0
                        && is_abort_address(section.abort),
                    "not one of ttrace's rseq descriptors at {at:#x}: {section:x?}"
                );
                section
            })
            .collect()
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    Vec::new()
}

/// Stops process `pid`, a child of this process, with SIGSTOP, and waits until it has
/// stopped (its stop reported to `waitpid`): from then until it is continued or killed it
/// runs no instruction. An error if it could not be signalled or ended instead (it is
/// reaped then).
pub fn stop_child(pid: libc::pid_t) -> io::Result<()> {
    // SAFETY: kill only sends a signal.
    if unsafe { libc::kill(pid, libc::SIGSTOP) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut status = 0;
    loop {
        // SAFETY: waitpid writes the status of child `pid` to a valid int.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED) };
        if rc == pid {
            break;
        }
        let e = io::Error::last_os_error();
        if rc < 0 && e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    if libc::WIFSTOPPED(status) && libc::WSTOPSIG(status) == libc::SIGSTOP {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "process {pid} ended instead of stopping (wait status {status:#x})"
        )))
    }
}

/// Sends `signal` to process `pid`.
pub fn signal_process(pid: libc::pid_t, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: kill only sends a signal.
    if unsafe { libc::kill(pid, signal) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The user-space instruction pointer at which the main thread of process `pid`, stopped
/// ([`stop_child`]), will go on: the last field of `/proc/<pid>/syscall`, which the kernel
/// reads from the registers saved when the thread entered the kernel (`-1 <sp> <pc>` if it
/// was interrupted outside a system call), after waiting until the thread is off its CPU.
/// An error if the thread is running, or the file cannot be read (it needs ptrace access to
/// the process, which a parent has unless a security module forbids it).
pub fn stopped_ip(pid: libc::pid_t) -> io::Result<usize> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/syscall"))?;
    text.split_whitespace()
        .last()
        .and_then(|pc| pc.strip_prefix("0x"))
        .and_then(|pc| usize::from_str_radix(pc, 16).ok())
        .filter(|_| text.split_whitespace().count() >= 3)
        .ok_or_else(|| io::Error::other(format!("/proc/{pid}/syscall: {:?}", text.trim())))
}
