//! ttrace-snapshots: snapshots a traced program takes of its device at the moment that
//! matters.
//!
//! A ring keeps the last moments of a busy CPU; the slow request, the error, the panic are
//! overwritten long before a person can type `ttrace-reader snapshot`. A program that names
//! this crate saves its device when the moment comes:
//!
//! - [`trigger`]: records a `trigger` event and asks for a snapshot of a window around it,
//!   which a background thread saves into the snapshot directory; [`settle_snapshots`]
//!   before exiting waits for it.
//! - [`install_panic_hook`]: a panic's message and location recorded, and a snapshot saved
//!   at once.
//! - [`apply_snapshot_rules`]: the rules installed in the device with `ttrace-reader ctl on
//!   'latency request > 5ms'` applied by a thread of the program ([`installed`]).
//! - [`save_snapshot`]: a snapshot at once, on the calling thread.
//!
//! The writer (`ttrace-core`) does not depend on this crate: a program that takes no
//! snapshots carries none of it. The rules, their matcher and the snapshot directory are the
//! readers' (`ttrace_reader::{rules, matcher, store, policy}`); what this crate adds is the
//! program's side: its saver ([`Saver`]: the rate, merges, the copy on time, the writing in
//! the background) and the thread that applies installed rules.
//!
//! ```
//! # let tmp = tempfile::tempdir().unwrap();
//! # std::env::set_var("TTRACE_SNAPSHOT_DIR", tmp.path().join("snapshots"));
//! ttrace_core::init(&ttrace_core::Config::at(tmp.path().join("dev")))?;
//! ttrace_snapshots::trigger("slow request"); // returns at once; saved in the background
//! ttrace_snapshots::settle_snapshots(); // before exiting: the snapshot is written
//! # let files: Vec<_> = std::fs::read_dir(tmp.path().join("snapshots")).unwrap().collect();
//! # assert_eq!(files.len(), 1);
//! # Ok::<(), ttrace_core::Error>(())
//! ```
//!
//! Modules are listed from the bottom up: each one uses only modules listed before it.

#![deny(missing_docs)]

pub mod error;
pub mod saver;
pub mod installed;
pub mod program;

pub use error::{Error, Result};
pub use program::{
    apply_snapshot_rules, install_panic_hook, save_snapshot, save_snapshot_to, settle_snapshots,
    trigger,
};
pub use saver::{Asked, Saver};
pub use ttrace_layouts::snapshot::{Cause, CauseKind};
pub use ttrace_reader::policy::Policy;
pub use ttrace_reader::store::{save_as, save_now, SaveInfo, Store};
