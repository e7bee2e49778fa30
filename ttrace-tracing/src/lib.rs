//! `tracing` into ttrace: a [`tracing_subscriber::Layer`] ([`layer`]) and a subscriber of
//! its own ([`subscriber`], for programs that compose no other layer): every program
//! instrumented with `tracing` gets the flight recorder, readable by `ttrace-reader` from
//! another process and after a crash.
//!
//! ```
//! # let tmp = tempfile::tempdir().unwrap();
//! # std::env::set_var("TTRACE_DIR", tmp.path().join("dev"));
//! use tracing_subscriber::prelude::*;
//! tracing_subscriber::registry()
//!     .with(ttrace_tracing::layer())
//!     .with(tracing_subscriber::fmt::layer())
//!     .init();
//! tracing::info!(bytes = 512u64, path = "/srv/a", "request done");
//! // fmt printed it; the device holds it too, for `ttrace-reader dump` from any process:
//! let dev = devttrace::Reader::open(tmp.path().join("dev"))?;
//! assert_eq!(dev.snapshot()?.events(), 1);
//! # Ok::<(), devttrace::Error>(())
//! ```
//!
//! - **The layer never changes what the other layers see.** What ttrace does not record
//!   (a level or a name `ctl` turned off, `TTRACE_DISABLED`, no device, a device it cannot
//!   use) is filtered by the layer's own per-layer filter: `fmt` and any other layer of the
//!   registry get every event and span they get without it, whichever order the layers
//!   are in. In a registry with no other layer, `tracing` skips what ttrace disables at the
//!   cost of a disabled level ([`TtraceLayer`]).
//! - **Each callsite** becomes ttrace tracepoints named `target::name` (an event without a
//!   name of its own: `target::` and its message's first words, `tower_http::trace::
//!   on_request::started_processing_request`, decided at its first event: the same on every
//!   machine and after every edit of the file), its fields the argument names, typed from
//!   the values seen (a field seen with another type gets a second tracepoint of the same
//!   name; a field not recorded, declared `Empty`, shows as `name=<unset>`), and its level a
//!   class bit ([`CLASS_ERROR`] .. [`CLASS_TRACE`]). So `ttrace-reader ctl level info` (or
//!   `ctl disable DEBUG`) stops DEBUG and TRACE, and `ctl disable 'hyper::*'` a crate, in
//!   every process at once. Readers show the level of each event.
//! - **Each event** costs `tracing`'s dispatch, one load, and ttrace's write: integers,
//!   floats and bools are argument words, `&str` goes to the aux buffer, a `Debug` value
//!   (the message too) is formatted into a [`DEBUG_BYTES`] buffer (longer: cut, ending `…`,
//!   counted). No allocation, no lock. Past 12 words, the last (`dropped_fields`) counts
//!   the fields left out.
//! - **Each span instance** is recorded as its steps ([`ttrace_layouts::role`]): `new` (its
//!   id, its parent's, its fields), `enter` and `exit` (each poll of an instrumented future,
//!   on the thread that polls it), `record`, `follows`, and `close`; ids and words, nothing
//!   formatted. Readers rebuild each instance: `report` gives per span name the lifetime
//!   (new to close), busy time (its polls) and idle time, and the polls apart; the Chrome
//!   export draws an async slice per instance with its polls inside, on their threads;
//!   `dump` marks each step. The re-entry `tracing` makes when an instrumented future is
//!   dropped is recognised by readers and not counted as a poll. `#[instrument]` works.
//! - **Control**: a callsite the device's mask or rules disable is of no interest to the
//!   layer (to the subscriber: to `tracing`, which then skips it as a disabled level); a
//!   `ctl` change is followed within [`interest::POLL`] by a thread of the process
//!   ([`interest`]), or at once after [`sync_interest`]. An event named by its message
//!   follows the rules from its first event.
//! - **Snapshots on errors** (feature `snapshots`, on by default):
//!   `TtraceLayer::snapshot_on(Level::ERROR)` asks for a snapshot
//!   (`ttrace_snapshots::trigger`) at every ERROR event, its message the reason.
//! - **`log` records**: install `tracing_log::LogTracer` and they arrive as events (fields
//!   `message`, `log.target`, `log.module_path`, `log.file`, `log.line`).
//! - **The runtime's view** (feature `tokio`): `runtime::instrument` installs hooks on a
//!   tokio runtime builder: each worker named (and its context switches observed, where
//!   they are recorded) as it starts, its parks and unparks recorded.
//! - **The tasks' wakes**: in a program built with `RUSTFLAGS="--cfg tokio_unstable"` and
//!   tokio's `tracing` feature, each task is a span `runtime.spawn`, and each wake of a task
//!   is recorded as the built-in event `task_wake` naming that span's instance ([`wake`]):
//!   readers tell a task waiting for a worker from one waiting on its future.

#![deny(missing_docs)]

// Listed from the bottom up: each module uses only modules listed before it.
mod name;
#[cfg(feature = "snapshots")]
mod reason;
pub mod interest;
mod fields;
pub mod wake;
mod callsite;
mod span_ids;
mod record;
mod layer;
mod spans;
mod subscriber;
#[cfg(feature = "tokio")]
pub mod runtime;

use std::sync::atomic::Ordering::Relaxed;

pub use callsite::level_class;
pub use fields::DEBUG_BYTES;
pub use layer::{layer, layer_into, TtraceLayer};
pub use subscriber::{subscriber, subscriber_into, TtraceSubscriber};

/// Class bit of `ERROR` callsites.
pub const CLASS_ERROR: u64 = ttrace_core::Level::Error.class();
/// Class bit of `WARN` callsites.
pub const CLASS_WARN: u64 = ttrace_core::Level::Warn.class();
/// Class bit of `INFO` callsites.
pub const CLASS_INFO: u64 = ttrace_core::Level::Info.class();
/// Class bit of `DEBUG` callsites.
pub const CLASS_DEBUG: u64 = ttrace_core::Level::Debug.class();
/// Class bit of `TRACE` callsites.
pub const CLASS_TRACE: u64 = ttrace_core::Level::Trace.class();

/// What the layer could not record as it was, since the process started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// `Debug` values cut to [`DEBUG_BYTES`].
    pub debug_truncated: u64,
    /// Fields past the 12th (or the 11th, with `dropped_fields`) left out.
    pub fields_dropped: u64,
    /// Strings the aux buffer refused (shown as lost).
    pub strings_dropped: u64,
}

/// The layer's counters in this process.
pub fn stats() -> Stats {
    Stats {
        debug_truncated: fields::DEBUG_TRUNCATED.load(Relaxed),
        fields_dropped: fields::FIELDS_DROPPED.load(Relaxed),
        strings_dropped: fields::STRINGS_DROPPED.load(Relaxed),
    }
}

/// Has `tracing` ask every callsite again whether the layer records it, as the device's
/// control now says (the `ttrace-interest` thread does it within [`interest::POLL`] of a
/// `ctl` change; a program or a test that changed the control itself can do it at once).
/// It asks with the subscriber the layer was last made part of as the thread's default
/// while that subscriber lives, else under the calling thread's default ([`interest`]).
pub fn sync_interest() {
    interest::rebuild(false);
}
