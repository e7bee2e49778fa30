//! ttrace-trigger: snapshots of a ttrace device taken at the moment that matters.
//!
//! A ring keeps the last few milliseconds of a busy CPU; the slow request, the error, the
//! panic are overwritten long before a person can type `ttrace-reader snapshot`. This crate
//! saves the device when the moment comes:
//!
//! - [`Saver`]: a program's own saver. [`Saver::trigger`] asks for a snapshot of a window
//!   around now (what the rings hold before, plus [`Policy::after`] for the consequences),
//!   which a background thread writes into the snapshot directory; the rate and the
//!   triggers merged or put off are counted in the device header (`ttrace-reader stats`).
//!   [`Saver::save_now`] saves at once, on the calling thread.
//! - [`Store`]: the snapshot directory: file names that say when and why, and the
//!   retention limits (newest kept).
//! - [`Policy`]: the window, the rate and the retention, from the environment or set.
//! - [`Rule`] and [`Matcher`]: the snapshot rules (`latency request > 5ms`), parsed, and
//!   evaluated over the events a [`devttrace::Follower`] releases (by `ttrace-reader
//!   watch`, and by a program's saver for the rules installed through `ctl`:
//!   [`installed`]).
//!
//! `ttrace-core` gives programs these as `ttrace_core::trigger`, `save_snapshot` and
//! `install_panic_hook`; `ttrace-reader watch` takes snapshots by rules from outside.
//!
//! ```
//! # let tmp = tempfile::tempdir().unwrap();
//! use ttrace_trigger::{Policy, Store};
//! let dev = devttrace::Device::open(&devttrace::Config::at(tmp.path().join("dev")))?;
//! let store = Store::new(tmp.path().join("snapshots"));
//! let saved = ttrace_trigger::save_now(&dev, &store, &Policy::default(), "by hand")?;
//! assert!(saved.path.starts_with(tmp.path().join("snapshots")));
//! assert_eq!(store.list()?.len(), 1);
//! # Ok::<(), ttrace_trigger::Error>(())
//! ```
//!
//! Modules are listed from the bottom up: each one uses only modules listed before it.

pub mod error;
pub mod policy;
pub mod store;
pub mod saver;
pub mod rules;
pub mod matcher;
pub mod installed;

pub use error::{Error, Result};
pub use matcher::{Fired, Matcher};
pub use policy::Policy;
pub use rules::{Rule, RuleError};
pub use saver::{save_as, save_now, Asked, SaveInfo, Saver};
pub use store::{Listed, Store};
pub use ttrace_layouts::snapshot::{Cause, CauseKind};
