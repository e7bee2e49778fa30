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
//! From outside, a process can be caught inside a section: traced, and trapped by a hardware
//! watchpoint just after a chosen store ([`Traced`]), its instruction pointer compared with
//! the bounds of its sections, which it reads from its own descriptors ([`sections`]). A
//! stopped thread has not been moved to the abort handler yet (the kernel does that on its
//! way back to user space, after the stop); continued, it aborts the section and retries;
//! killed, it never runs again, and the section's stores made before the stop stay, its
//! commit never made.

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

/// A child process traced with `ptrace` (seized: it runs on until stopped), so that it can
/// be stopped *by construction* at the instruction just after a chosen store: a hardware
/// watchpoint ([`Traced::watch_writes`]) traps the thread right after the store to the
/// watched word completes, before its next instruction, and the trap stops it for the
/// tracer ([`Traced::wait_trap`]). Stopped so inside a restartable critical section, its
/// instruction pointer is still inside it (the kernel moves it to the abort handler only on
/// its way back to user space, after the stop); killed there, it never runs again.
///
/// The kernel kills the child if the tracer (this process) exits first
/// (`PTRACE_O_EXITKILL`).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub struct Traced {
    pid: libc::pid_t,
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
impl Traced {
    /// Attaches to child `pid` (`PTRACE_SEIZE`), which goes on running, and stops it
    /// (`PTRACE_INTERRUPT`): from then until [`Traced::resume`] it runs no instruction.
    pub fn seize(pid: libc::pid_t) -> io::Result<Traced> {
        let t = Traced { pid };
        t.ptrace(libc::PTRACE_SEIZE, 0, libc::PTRACE_O_EXITKILL as usize)?;
        t.ptrace(libc::PTRACE_INTERRUPT, 0, 0)?;
        match t.wait()? {
            Some(s) if s >> 16 == libc::PTRACE_EVENT_STOP => Ok(t),
            other => Err(io::Error::other(format!(
                "process {pid} did not stop for its tracer: {other:x?}"
            ))),
        }
    }

    /// `ptrace(request, pid, addr, data)`.
    fn ptrace(&self, request: libc::c_uint, addr: usize, data: usize) -> io::Result<()> {
        // SAFETY: the requests made here (seize, interrupt, cont, pokeuser of a debug
        // register) take integers, not pointers into this process.
        let rc = unsafe { libc::ptrace(request, self.pid, addr, data) };
        if rc == -1 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Waits for the child's next stop: its wait status (`None` if it ended: it is reaped).
    fn wait(&self) -> io::Result<Option<libc::c_int>> {
        let mut status = 0;
        loop {
            // SAFETY: waitpid writes the status of child `pid` to a valid int.
            let rc = unsafe { libc::waitpid(self.pid, &mut status, libc::__WALL) };
            if rc == self.pid {
                break;
            }
            let e = io::Error::last_os_error();
            if rc < 0 && e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        Ok(libc::WIFSTOPPED(status).then_some(status))
    }

    /// Sets debug register `i` (0 to 3) of the stopped child to watch the 8 bytes at
    /// `addr` (aligned, in the child's address space) for writes, replacing what it
    /// watched; a write there traps the child just after the store.
    pub fn watch_writes(&self, i: usize, addr: usize) -> io::Result<()> {
        assert!(
            i < 4 && addr % 8 == 0,
            "debug register {i}, address {addr:#x}"
        );
        let dr = |n: usize| {
            core::mem::offset_of!(libc::user, u_debugreg) + n * core::mem::size_of::<u64>()
        };
        // DR7: local enable (bit 2i), write-only (R/W = 01) and 8 bytes (LEN = 10) in the
        // four bits at 16 + 4i. Disabled while its address changes.
        let control = 1 << (2 * i) | 0b1001 << (16 + 4 * i);
        self.ptrace(libc::PTRACE_POKEUSER, dr(7), 0)?;
        self.ptrace(libc::PTRACE_POKEUSER, dr(i), addr)?;
        self.ptrace(libc::PTRACE_POKEUSER, dr(7), control)
    }

    /// Lets the stopped child go on.
    pub fn resume(&self) -> io::Result<()> {
        self.ptrace(libc::PTRACE_CONT, 0, 0)
    }

    /// Waits until the child stops at a watchpoint's trap, or `deadline` passes (an error:
    /// it never wrote the watched word), or it ends (an error). Returns its instruction
    /// pointer. (A bounded poll of `waitpid`: the child may never trap, and the deadline
    /// must still fail the test rather than hang it.)
    pub fn wait_trap(&self, deadline: std::time::Instant) -> io::Result<usize> {
        let mut status = 0;
        loop {
            // SAFETY: waitpid writes the status of child `pid` to a valid int.
            let rc = unsafe { libc::waitpid(self.pid, &mut status, libc::__WALL | libc::WNOHANG) };
            if rc == self.pid {
                break;
            }
            if rc < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            if std::time::Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "process {} never wrote the watched word",
                    self.pid
                )));
            }
            std::thread::yield_now();
        }
        if !libc::WIFSTOPPED(status) || libc::WSTOPSIG(status) != libc::SIGTRAP {
            return Err(io::Error::other(format!(
                "process {} stopped or ended otherwise than at a watchpoint (wait status \
                 {status:#x})",
                self.pid
            )));
        }
        // SAFETY: a zeroed user_regs_struct is valid; PTRACE_GETREGS fills it.
        let mut regs: libc::user_regs_struct = unsafe { core::mem::zeroed() };
        // SAFETY: PTRACE_GETREGS writes a user_regs_struct to the pointer given, which is
        // valid and writable.
        let rc = unsafe {
            libc::ptrace(
                libc::PTRACE_GETREGS,
                self.pid,
                0usize,
                &mut regs as *mut libc::user_regs_struct,
            )
        };
        if rc == -1 {
            return Err(io::Error::last_os_error());
        }
        Ok(regs.rip as usize)
    }
}
