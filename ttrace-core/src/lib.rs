//! ttrace-core: the writer front end of ttrace, an always-on flight recorder whose hot path
//! costs about one timestamp read.
//!
//! Define tracepoints with [`tracepoint!`], record them with [`point!`]; events go into
//! per-CPU overwrite rings of 64-byte entries in a memory-mapped device directory (default
//! `/dev/shm/ttrace-<uid>`, or `$TTRACE_DIR`), where readers in other processes find them,
//! live or after this process died. Strings go to a wrapping aux buffer; names, formats and
//! thread names go to the metadata, so the trace describes itself.
//!
//! ```
//! # let tmp = tempfile::tempdir().unwrap();
//! use ttrace_core::{point, tracepoint, Config};
//!
//! tracepoint!(static REQUEST: Start = "request", "id={id} size={size}");
//!
//! ttrace_core::init(&Config::at(tmp.path().join("dev")))?; // optional: else $TTRACE_DIR or the default
//! point!(REQUEST, 42, 1500);
//! # Ok::<(), ttrace_core::Error>(())
//! ```
//!
//! The device itself (its files, the protocols, the readers) is the `devttrace` crate; the
//! layouts are [`ttrace_layouts`]. The hot path, from `point!` to the commit, is
//! [`writer`]; the restartable sections it runs are [`rseq`].
//!
//! Modules are listed from the bottom up: each one uses only modules listed before it.

#![deny(missing_docs)]

pub mod rseq;
pub mod cpu;
#[doc(hidden)]
pub mod values;
pub mod check;
pub mod args;
#[doc(hidden)]
pub mod tracepoint;
pub mod switches;
pub mod writer;
pub mod fatal;

pub use args::{Arg, Args};
pub use devttrace::clock;
pub use devttrace::config::{
    default_dir, DEFAULT_BUFFER_BYTES, DEFAULT_MAX_TRACEPOINTS, ENV_AUX_SIZE, ENV_BUFFER, ENV_DIR,
    ENV_DISABLED, ENV_MASK, ENV_RING_SLOTS, ENV_SCHED,
};
pub use devttrace::{
    Config, Definition, Error, Level, Problem, Result, Role, Trust, ValueTable, ValuesKind,
};
pub use fatal::install_fatal_handlers;
pub use rseq::ENV_NO_RSEQ;
pub use tracepoint::{Tracepoint, WordRef, CLASS_DEFAULT, UNREGISTERED};
pub use ttrace_layouts::device::CLASS_MESSAGES;
pub use ttrace_layouts::entry::Kind;
pub use ttrace_layouts::format::count_args;
pub use ttrace_layouts::meta::ArgType;
pub use writer::{
    device, device_or_init, info, init, rename_thread, thread_context, Writer, ENV_QUIET,
};
