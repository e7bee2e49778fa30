//! The ttrace device interface for readers, after Akaros's `#ttrace` device: the `version`
//! header, consistent snapshots of the per-CPU rings (`cpuN`) and of the `aux` buffer, the
//! metadata that names everything, and `ctl`, which changes what is recorded.
//!
//! A device is a directory of memory-mapped files written by any process that links
//! `ttrace-core`. [`Device::open`] maps it read-only: it works on a running process and on
//! one that has died, and it checks every file before anything is read from it, so a damaged
//! or foreign directory is a typed [`Error`] naming the file, never a crash.
//!
//! ```no_run
//! let dev = devttrace::Device::open_default()?;
//! let snap = dev.snapshot()?;
//! for (r, ring) in snap.cpus.iter().enumerate() {
//!     println!("{}: {} events, {} lost", dev.ring_name(r), ring.events.len(), ring.lost);
//! }
//! # Ok::<(), devttrace::Error>(())
//! ```

mod device;
mod error;
mod follow;
mod snapshot;
mod version;
mod view;
mod watch;

pub use device::{default_dir, Access, Device, Status, Trust};
pub use error::{Error, Problem, Result};
pub use follow::{Follower, Poll, DEFAULT_WINDOW_NS};
pub use snapshot::Snapshot;
pub use ttrace_core::aux::{AuxRecord, AuxSnapshot, AuxSnapshots};
pub use ttrace_core::meta::{Metadata, TaskIndex, TaskInfo, TracepointInfo};
pub use ttrace_core::ring::{event_at, Event, Mark, RingIndex, RingSnapshot, SlotRead};
pub use version::{Clock, Version};
pub use view::View;
pub use watch::{version_at, Change, Watch};
