//! The runtime's view (feature `tokio`): what a tokio runtime's workers do between the
//! spans, recorded beside them, so that readers can tell a request waiting in the runtime
//! from one waiting on its future.
//!
//! [`instrument`] installs the hooks on a [`tokio::runtime::Builder`] in one call:
//! - **a worker starts**: it is named in the device at once (and, where the writer records
//!   context switches, `ttrace_core::switches`, observed from its first instruction rather
//!   than from its first event);
//! - **a worker parks** (no task to run: it sleeps until one is woken) and **unparks**: the
//!   events `tokio_worker_park` (kind stop) and `tokio_worker_unpark` (kind start) on its
//!   thread. A request's span idle while its worker ran other tasks waited in the queue; one
//!   idle while its worker was parked waited on its future.
//!
//! - **with `--cfg tokio_unstable`**, tokio's task hooks too: a task **spawned**
//!   (`tokio_task_spawn`: its id, the file and line that spawned it), each **poll** (the
//!   call `tokio_task_poll`, entry and exit on the worker, with the task's id: `report`
//!   gives its durations and, with switches recorded, where each poll's time went), and its
//!   **end** (`tokio_task_terminate`).
//!
//! When a parked task was woken is not a hook's to tell: in a program built with
//! `RUSTFLAGS="--cfg tokio_unstable"` and tokio's `tracing` feature, the layer records each
//! wake as `task_wake` ([`crate::wake`]).
//!
//! Tokio keeps one hook of each kind: a program that sets its own calls [`on_start`],
//! [`on_park`] and [`on_unpark`] (and the task hooks' functions) from it instead.

use ttrace_core::{point, tracepoint};

tracepoint!(
    /// A worker found no task to run and parks.
    static PARK: Stop = "tokio_worker_park", ""
);
tracepoint!(
    /// A worker wakes from its park.
    static UNPARK: Start = "tokio_worker_unpark", ""
);

#[cfg(tokio_unstable)]
tracepoint!(
    /// A task was spawned: its id, where.
    static TASK_SPAWN: Start = "tokio_task_spawn", "task={task} file={file:s} line={line}"
);
#[cfg(tokio_unstable)]
tracepoint!(
    /// A worker begins to poll a task.
    static TASK_POLL: Entry = "tokio_task_poll", "task={task}"
);
#[cfg(tokio_unstable)]
tracepoint!(
    /// The poll ended.
    static TASK_POLLED: Exit = "tokio_task_poll", "task={task}"
);
#[cfg(tokio_unstable)]
tracepoint!(
    /// A task ended.
    static TASK_TERMINATE: Stop = "tokio_task_terminate", "task={task}"
);

/// What tokio's task hooks record (`--cfg tokio_unstable`).
#[cfg(tokio_unstable)]
pub mod task {
    use super::*;
    use tokio::runtime::TaskMeta;

    /// The task's id as a number: tokio prints it, and only that is stable.
    fn id(meta: &TaskMeta<'_>) -> u64 {
        meta.id().to_string().parse().unwrap_or(0)
    }

    /// A task was spawned.
    pub fn on_spawn(meta: &TaskMeta<'_>) {
        let at = meta.spawned_at();
        point!(TASK_SPAWN, id(meta), at.file(), at.line());
    }

    /// A worker begins to poll a task.
    pub fn on_before_poll(meta: &TaskMeta<'_>) {
        point!(TASK_POLL, id(meta));
    }

    /// The poll ended.
    pub fn on_after_poll(meta: &TaskMeta<'_>) {
        point!(TASK_POLLED, id(meta));
    }

    /// A task ended.
    pub fn on_terminate(meta: &TaskMeta<'_>) {
        point!(TASK_TERMINATE, id(meta));
    }
}

/// What a worker does as it starts: it is named (and observed) at once.
pub fn on_start() {
    if let Ok(w) = ttrace_core::device_or_init() {
        ttrace_core::thread_context(w);
    }
}

/// What a worker does as it parks.
pub fn on_park() {
    point!(PARK);
}

/// What a worker does as it unparks.
pub fn on_unpark() {
    point!(UNPARK);
}

/// Installs ttrace's hooks on `builder`: each worker named (and observed) as it starts, its
/// parks and unparks recorded.
///
/// ```
/// let mut builder = tokio::runtime::Builder::new_multi_thread();
/// let runtime = ttrace_tracing::runtime::instrument(&mut builder)
///     .enable_all()
///     .build()?;
/// runtime.block_on(async { /* the service */ });
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn instrument(builder: &mut tokio::runtime::Builder) -> &mut tokio::runtime::Builder {
    builder
        .on_thread_start(on_start)
        .on_thread_park(on_park)
        .on_thread_unpark(on_unpark);
    #[cfg(tokio_unstable)]
    builder
        .on_task_spawn(task::on_spawn)
        .on_before_task_poll(task::on_before_poll)
        .on_after_task_poll(task::on_after_poll)
        .on_task_terminate(task::on_terminate);
    builder
}
