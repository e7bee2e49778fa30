//! The context word of the calling thread, and its name in the metadata.

use crate::device::Device;
use core::cell::Cell;
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::Once;

thread_local! {
    /// `pid << 32 | tid` once this thread has traced into the global device, else 0.
    static CTX: Cell<u64> = const { Cell::new(0) };
}

/// The pid whose process record the global device holds (0: none yet, or forked since).
static NOTED_PID: AtomicU32 = AtomicU32::new(0);
static ATFORK: Once = Once::new();

/// The calling thread's context word, registering the thread (and after a fork, the
/// process) with `dev` the first time.
#[inline(always)]
pub(crate) fn ctx(dev: &Device) -> u64 {
    let ctx = CTX.with(Cell::get);
    if ctx != 0 {
        return ctx;
    }
    register(dev)
}

/// Makes sure a forked child forgets the ids cached for its parent's thread.
pub(crate) fn watch_forks() {
    ATFORK.call_once(|| {
        // SAFETY: `after_fork` is a plain function that only touches atomics and
        // thread-local Cells, which is async-signal-safe enough for an atfork child handler.
        unsafe { libc::pthread_atfork(None, None, Some(after_fork)) };
    });
}

#[cold]
#[inline(never)]
fn register(dev: &Device) -> u64 {
    let owner = crate::lock::owner_id();
    let (pid, tid) = ((owner >> 32) as u32, owner as u32);
    // Relaxed: a lost race only records the process name twice.
    if NOTED_PID.swap(pid, Relaxed) != pid {
        let _ = dev.note_process(pid, &crate::meta::current_process_name());
    }
    // A full metadata area only loses the name; the thread still traces.
    let _ = dev.note_thread(pid, tid, &crate::meta::current_thread_name());
    let ctx = (pid as u64) << 32 | tid as u64;
    CTX.with(|c| c.set(ctx));
    ctx
}

/// In the child of a fork: the one thread there has a new pid and tid.
extern "C" fn after_fork() {
    CTX.with(|c| c.set(0));
    crate::lock::forget_owner_after_fork();
    NOTED_PID.store(0, Relaxed);
}

/// The calling thread's context word for events written into `dev` (`pid << 32 | tid`),
/// naming the thread (and after a fork, the process) in `dev` the first time: what a trace
/// point of another front end (the `tracing` layer) passes to [`Device::emit`].
#[inline(always)]
pub fn thread_context(dev: &Device) -> u64 {
    ctx(dev)
}

/// Records a new name for the calling thread (after it renamed itself, say).
pub fn rename_thread(dev: &Device, name: &str) -> crate::Result<()> {
    let ctx = ctx(dev);
    dev.note_rename((ctx >> 32) as u32, ctx as u32, name)
}
