//! ttrace-core: the writer side of ttrace, an always-on flight recorder whose hot path costs
//! about one timestamp read.
//!
//! Define tracepoints with [`tracepoint!`], record them with [`point!`]; events go into
//! per-CPU overwrite rings of 64-byte entries in a memory-mapped device directory (default
//! `/dev/shm/ttrace-<uid>`, or `$TTRACE_DIR`), where readers in other processes find them,
//! live or after this process died. Strings go to a wrapping aux buffer; names, formats and
//! thread names go to an append-only metadata area, so the trace describes itself.
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
//! Layouts are in [`ttrace_layouts`]; the protocols and why they are correct are in
//! `docs/DESIGN.md` and in the docs of [`ring`] and [`aux`].

pub mod aux;
mod clear;
pub mod clock;
pub mod control;
pub mod cpu;
pub mod device;
pub mod error;
pub mod format;
mod global;
pub mod lock;
pub mod meta;
pub mod names;
pub mod ring;
pub mod rseq;
pub mod sigbus;
pub mod snapshot;
pub mod sync;
mod thread;
#[doc(hidden)]
pub mod tracepoint;
pub mod values;

pub use device::{default_dir, Config, Device, Trust};
pub use error::{Error, Problem, Result};
pub use global::{device, device_or_init, init};
pub use thread::{rename_thread, thread_context};
pub use tracepoint::{
    count_args, info, Arg, Args, Tracepoint, WordRef, CLASS_DEFAULT, UNREGISTERED,
};
pub use ttrace_layouts::device::CLASS_MESSAGES;
pub use ttrace_layouts::entry::Kind;
pub use ttrace_layouts::meta::ArgType;
pub use values::ValueTable;
