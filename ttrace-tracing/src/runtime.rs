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
//! When a parked task was woken is not a hook's to tell: in a program built with
//! `RUSTFLAGS="--cfg tokio_unstable"` and tokio's `tracing` feature, the layer records each
//! wake as `task_wake` ([`crate::wake`]).
//!
//! Tokio keeps one hook of each kind: a program that sets its own calls [`on_start`],
//! [`on_park`] and [`on_unpark`] from it instead.

use ttrace_core::{point, tracepoint};

tracepoint!(
    /// A worker found no task to run and parks.
    static PARK: Stop = "tokio_worker_park", ""
);
tracepoint!(
    /// A worker wakes from its park.
    static UNPARK: Start = "tokio_worker_unpark", ""
);

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
        .on_thread_unpark(on_unpark)
}
