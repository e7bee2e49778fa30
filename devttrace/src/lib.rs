//! devttrace: the ttrace device in shared memory, beneath the writer and the reader.
//!
//! A device is a directory of memory-mapped files (after the Akaros kernel's `#ttrace`
//! device): a header, per-CPU rings of 64-byte entries, aux buffers of variable-length
//! records, and the metadata that names everything. Any process that links `ttrace-core`
//! writes into it; any process may read it, live or after the writers died. This crate
//! holds the device's files, both halves of every protocol over its words, and two roles:
//!
//! - a [`Reader`] maps a device read-only (`PROT_READ`; or a snapshot file) and copies it
//!   consistently: [`Reader::snapshot`], a [`View`] read in two passes, a [`Follower`] that
//!   reads only what is new. Its rings and aux buffers are the reader halves of the
//!   protocols, [`ring::Ring`] and [`aux::Aux`], which only load: a reader has no way to
//!   write, and a store through its mapping would fault rather than reach, or silently fork
//!   from, the live device;
//! - a [`Device`] maps it shared and writable to change it: create it, register
//!   tracepoints, name threads, control what is recorded, clear it. It reads only through
//!   the reader it names, [`Device::reader`] (it is not a `Reader`).
//!
//! The writer halves, [`ring::RingWriter`] and [`aux::AuxWriter`], come only from the
//! writable [`Mapping`] ([`Device::mapping`]), through which the writer's hot path
//! (`ttrace-core`'s `Writer`, which holds a `Device`) records. How each protocol works and
//! why it is correct, and which role can do what: `docs/DESIGN.md`.
//!
//! ```
//! # let tmp = tempfile::tempdir().unwrap();
//! # devttrace::Device::open(&devttrace::Config::at(tmp.path().join("dev")))?;
//! // The device a program writes: `Reader::open_default()`, or the directory it names.
//! let dev = devttrace::Reader::open(tmp.path().join("dev"))?;
//! let snap = dev.snapshot()?;
//! for (r, ring) in snap.cpus.iter().enumerate() {
//!     println!("{}: {} events, {} lost", dev.ring_name(r), ring.events.len(), ring.lost);
//! }
//! # Ok::<(), devttrace::Error>(())
//! ```
//!
//! Modules are listed from the bottom up: each one uses only modules listed before it.

#![deny(missing_docs)]

// Foundations: atomic words, errors, clocks, the calling thread, locks in shared memory,
// metadata records, configuration.
pub mod sync;
pub mod parallel;
pub mod error;
pub mod clock;
pub mod thread;
pub mod lock;
mod sigbus;
pub mod values;
pub mod meta;
pub mod config;
// The protocols, each over the words of one part of the device.
pub mod event;
pub mod clear;
pub mod ring;
pub mod walk;
pub mod copy;
// not `aux.rs`: a name Windows reserves, which a package may not hold.
#[path = "aux_buffer.rs"]
pub mod aux;
pub mod restartable;
pub mod names;
pub mod rules;
pub mod registry;
pub mod control;
pub mod triggers;
// The device's files and their mapping; a device saved to one file.
mod files;
pub mod mapping;
pub mod damaged_extent;
pub mod shadow;
pub mod image;
// What readers get, and the roles.
pub mod version;
pub mod status;
pub mod snapshot;
pub mod damage;
pub mod reader;
pub mod device;
pub mod view;
pub mod counts;
pub mod follow;
pub mod watch;

pub use aux::{AuxExtent, AuxRecord, AuxSnapshot, AuxSnapshots};
pub use clock::Clock;
pub use config::{default_dir, Config};
pub use copy::RingCopy;
pub use counts::{Counts, RingCounts};
pub use damage::Check;
pub use damaged_extent::DamagedExtent;
pub use device::Device;
pub use error::{Error, FileKind, PreRelease, Problem, Result};
pub use event::{Accounting, Counted, Event, Mark, RingSnapshot};
pub use files::Trust;
pub use follow::{Follower, Poll, DEFAULT_WINDOW_NS};
pub use mapping::Mapping;
pub use meta::{Definition, Metadata, TaskIndex, TaskInfo, TracepointInfo};
pub use reader::Reader;
pub use ring::{event_at, SlotRead};
pub use shadow::Shadow;
pub use sigbus::survives_sigbus;
pub use snapshot::Snapshot;
pub use status::Status;
pub use triggers::{Counter, Grant, SnapshotCounts};
pub use ttrace_layouts::entry::Kind;
pub use ttrace_layouts::level::Level;
pub use ttrace_layouts::meta::ArgType;
pub use ttrace_layouts::role::Role;
pub use values::{ValueTable, ValuesKind};
pub use version::Version;
pub use view::View;
pub use walk::Keep;
pub use watch::{version_at, Change, Watch};
