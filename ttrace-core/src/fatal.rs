//! Fatal signals: a `fatal_signal` event naming the signal and the fault address, recorded
//! in the signal handler, then the action that would have happened without it (the default
//! one: the process dies, with a core dump); the device stays for post-mortem reading.
//!
//! [`install_fatal_handlers`] (which `install_panic_hook`, in `snapshots`,
//! calls) installs one handler for `SIGSEGV`, `SIGBUS`, `SIGILL`, `SIGABRT` and `SIGFPE`.
//!
//! **Async-signal-safe.** The handler allocates nothing and takes no lock. It loads the
//! process's writer pointer ([`device`]: one atomic load), the tracepoint's word (two atomic
//! loads; the tracepoint was registered when the handlers were installed, never in the
//! handler), the thread's context word if the thread was named (one thread-local load; a
//! thread that never recorded is not named here, which allocates and locks: its context is
//! made of `getpid` and `gettid`), then writes one entry with [`Writer::emit`](crate::writer::Writer::emit) (a restartable
//! section, which the kernel aborted if the signal interrupted one of this thread's, or the
//! shared ring's lock-free protocol), and calls `sigaction` and `raise`.
//!
//! **Chaining.** Each handler replaces another (Rust's stack-overflow check on `SIGSEGV` and
//! `SIGBUS`, a reader's `SIGBUS` handler, the program's own), kept as it was. After the event
//! is recorded the previous action is put back: a fault (the signal sent by the kernel for
//! the instruction) then recurs when the handler returns and is taken by that action; a sent
//! signal (`abort`, `kill`) is raised again, and taken once the handler returns. A `SIGBUS`
//! in a mapping a reader of this process watches ([`devttrace::survives_sigbus`]: a device
//! file shrank under it) is not fatal: it goes to the previous handler (devttrace's), and
//! nothing is recorded. The handlers are installed with `SA_RESETHAND` (a fault inside the
//! handler takes the default action instead of recursing), except `SIGBUS`'s, which must
//! stay installed when it leaves a reader's fault to devttrace.

use crate::tracepoint::UNREGISTERED;
use crate::writer::{device, device_or_init, named_context};
use core::sync::atomic::{AtomicPtr, Ordering::*};
use ttrace_layouts::meta::ArgType;

crate::values!(
    /// The fatal signals, by number (how readers show `fatal_signal`'s `signal`).
    pub static SIGNALS: enum = {
        SIGILL = libc::SIGILL,
        SIGABRT = libc::SIGABRT,
        SIGBUS = libc::SIGBUS,
        SIGFPE = libc::SIGFPE,
        SIGSEGV = libc::SIGSEGV,
    }
);

crate::tracepoint!(
    /// The event a fatal signal records: the signal, the address it names (the faulting
    /// access for `SIGSEGV` and `SIGBUS`, the instruction for `SIGILL` and `SIGFPE`), and its
    /// `si_code` (0 or less: sent by a process, as `abort` and `kill` do).
    pub static FATAL_SIGNAL: Start = "fatal_signal", "signal={signal:SIGNALS} addr={addr:x} code={code:d}", SIGNALS
);

/// The types of [`FATAL_SIGNAL`]'s arguments.
const TYPES: &[ArgType] = &[ArgType::I32, ArgType::Unsigned, ArgType::I32];

/// The signals handled.
const FATAL: [libc::c_int; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGABRT,
    libc::SIGFPE,
];

/// The action installed before ours, per signal of [`FATAL`] (null: ours is not installed).
static PREVIOUS: [AtomicPtr<libc::sigaction>; FATAL.len()] =
    [const { AtomicPtr::new(core::ptr::null_mut()) }; FATAL.len()];

/// Installs the fatal-signal handlers (once per process; later calls do nothing), after
/// registering [`FATAL_SIGNAL`] with the process's device (opened from the environment if
/// none is installed). Returns whether they are installed.
pub fn install_fatal_handlers() -> bool {
    static INSTALLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *INSTALLED.get_or_init(|| {
        if device_or_init().is_err() {
            return false;
        }
        // Registered here, so that the handler finds the word made (or 0 if disabled).
        let word = FATAL_SIGNAL.word();
        if word == UNREGISTERED {
            FATAL_SIGNAL.enabled_word(word, TYPES);
        }
        let mut all = true;
        for (i, &sig) in FATAL.iter().enumerate() {
            // SAFETY: a zeroed sigaction is a valid value (no handler, empty mask, no flags).
            let mut new: libc::sigaction = unsafe { core::mem::zeroed() };
            new.sa_sigaction = on_fatal as *const () as usize;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            if sig != libc::SIGBUS {
                new.sa_flags |= libc::SA_RESETHAND;
            }
            // SAFETY: `new.sa_mask` is a valid sigset to empty.
            unsafe { libc::sigemptyset(&mut new.sa_mask) };
            // SAFETY: as above (zeroed is valid); leaked, so it lives as long as the handler.
            let old = Box::into_raw(Box::new(unsafe { core::mem::zeroed::<libc::sigaction>() }));
            // Release: the handler reads the previous action through this pointer; stored
            // before `sigaction` installs the handler that loads it.
            PREVIOUS[i].store(old, Release);
            // SAFETY: `new` is a valid action whose handler is async-signal-safe (see the
            // module docs); `old` points to writable memory that lives forever (leaked).
            all &= unsafe { libc::sigaction(sig, &new, old) } == 0;
        }
        all
    })
}

/// The context word of the calling thread, without naming it: see the module docs.
fn context() -> u64 {
    match named_context() {
        0 => {
            // SAFETY: getpid and gettid take no arguments, cannot fail, and are
            // async-signal-safe (plain system calls).
            let (pid, tid) = unsafe { (libc::getpid(), libc::gettid()) };
            (pid as u32 as u64) << 32 | tid as u32 as u64
        }
        ctx => ctx,
    }
}

/// Records `fatal_signal` for `sig`, at `addr`, with `code` (if the device and the
/// tracepoint are there and it is enabled).
fn record(sig: libc::c_int, addr: usize, code: libc::c_int) {
    let Some(w) = device() else { return };
    let word = FATAL_SIGNAL.word();
    if word == 0 || word == UNREGISTERED {
        return;
    }
    w.emit(
        word,
        context(),
        &[sig as i64 as u64, addr as u64, code as i64 as u64],
    );
}

/// Calls the action `prev` installed for `sig` as the kernel would have (a handler; the
/// default and ignored actions are left to the caller).
fn call(
    prev: &libc::sigaction,
    sig: libc::c_int,
    info: *mut libc::siginfo_t,
    ctx: *mut libc::c_void,
) {
    let h = prev.sa_sigaction;
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        return;
    }
    if prev.sa_flags & libc::SA_SIGINFO != 0 {
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

/// The handler of the [`FATAL`] signals (see the module docs).
extern "C" fn on_fatal(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let Some(i) = FATAL.iter().position(|&s| s == sig) else {
        return;
    };
    // Acquire: pairs with the Release store made before this handler was installed.
    let prev = PREVIOUS[i].load(Acquire);
    // SAFETY: set to a leaked, valid sigaction before this handler was installed, and
    // never changed or freed.
    let Some(prev) = (unsafe { prev.as_ref() }) else {
        return;
    };
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let (addr, code) = unsafe { ((*info).si_addr() as usize, (*info).si_code) };
    let sent = code <= 0; // by kill(), raise() or abort(), not by a fault
    if sig == libc::SIGBUS && !sent && devttrace::survives_sigbus(addr) {
        // A reader's file shrank: devttrace's handler (installed before ours) survives it.
        call(prev, sig, info, ctx);
        return;
    }
    // A sent signal names no address (the field holds the sender's pid).
    record(sig, if sent { 0 } else { addr }, code);
    // SAFETY: `prev` is a valid action (as the kernel gave it); sigaction and raise are
    // async-signal-safe. A fault recurs when this returns and takes `prev`; a sent signal,
    // blocked while this runs, is taken by `prev` when it returns.
    unsafe {
        libc::sigaction(sig, prev, core::ptr::null_mut());
        if sent {
            libc::raise(sig);
        }
    }
}
