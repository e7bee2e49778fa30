//! ttrace-reader: decode ttrace devices to text, follow them live, control them.
//!
//! The library turns what [`devttrace`] reads into lines: [`merge::Merge`] puts the events of
//! every CPU (and the free-form messages) in one time order, [`decode::Decoder`] writes each
//! as `time cpu pid/tid (thread) tracepoint(arguments)`, with the arguments rendered by the
//! tracepoint's format string (decimal, hex, strings from the aux buffer).
//!
//! ```
//! use ttrace_reader::{decode::{Decoder, TimeFormat}, merge::{Filter, Merge}};
//! # let tmp = tempfile::tempdir()?;
//! # let dir = tmp.path().join("dev");
//! # ttrace_core::tracepoint!(static REQUEST: Start = "request", "id={id}");
//! # ttrace_core::init(&ttrace_core::Config::at(&dir))?;
//! # ttrace_core::point!(REQUEST, 42);
//! // A device a program wrote (`devttrace::Reader::open_default()`: the default one).
//! let dev = devttrace::Reader::open(&dir)?;
//! let view = devttrace::View::of(&dev, 0)?;
//! let items = Merge::view(&view, &Filter::default());
//! let mut text = Vec::new();
//! Decoder::new(&view, TimeFormat::Relative).write_all(items, &mut text)?;
//! assert!(String::from_utf8(text)?.contains("request(id=42)"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]

// Bottom up: each module uses only those listed before it. Text appends, dates and format
// strings; the snapshot directory (its errors, its policy, its files) and the snapshot rules
// with their matcher; parts of a job done on every core in order; the loser tree; the merged
// stream and its lines, and why a snapshot was taken; raw entries; the exports and the
// report built on them; then, for the `ttrace-reader` program (feature `cli`), the demo
// workload, what the commands need (their error, times, outputs, the signals that end them,
// the stats text, the mounted file system) and the commands last.
pub mod append;
pub mod calendar;
pub mod format;
pub mod snapshot_error;
pub mod policy;
pub mod store;
pub mod rules;
pub mod matcher;
pub mod ordered;
pub mod tournament;
pub mod merge;
pub mod decode;
pub mod cause;
pub mod raw;
pub mod export;
pub mod report;
#[cfg(feature = "cli")]
pub mod demo;
#[cfg(feature = "cli")]
mod error;
#[cfg(feature = "cli")]
mod when;
#[cfg(feature = "cli")]
mod output;
#[cfg(feature = "cli")]
mod signals;
#[cfg(feature = "cli")]
mod stats;
#[cfg(feature = "cli")]
pub mod mount;
#[cfg(feature = "cli")]
pub mod cli;

#[cfg(feature = "cli")]
pub use error::Error;
