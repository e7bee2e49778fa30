//! ttrace-reader: decode ttrace devices to text, follow them live, control them.
//!
//! The library turns what [`devttrace`] reads into lines: [`merge::Merge`] puts the events of
//! every CPU (and the free-form messages) in one time order, [`decode::Decoder`] writes each
//! as `time cpu pid/tid (thread) tracepoint(arguments)`, with the arguments rendered by the
//! tracepoint's format string (decimal, hex, strings from the aux buffer).
//!
//! ```no_run
//! use ttrace_reader::{decode::{Decoder, TimeFormat}, merge::{Filter, Merge}};
//! let dev = devttrace::Reader::open_default()?;
//! let view = devttrace::View::of(&dev, 0)?;
//! let items = Merge::view(&view, &Filter::default());
//! Decoder::new(&view, TimeFormat::Relative).write_all(items, &mut std::io::stdout())?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// Bottom up: each module uses only those listed before it. Text appends and format strings;
// parts of a job done on every core in order; the loser tree; the merged stream and its lines, and why a
// snapshot was taken; raw entries; the exports and the report built on them; the demo
// workload; then what the commands need (their error, times, outputs, the signals that end
// them, the stats text, the mounted file system); the commands last.
pub mod append;
pub mod format;
pub mod ordered;
pub mod tournament;
pub mod merge;
pub mod decode;
pub mod cause;
pub mod raw;
pub mod export;
pub mod report;
pub mod demo;
mod error;
mod when;
mod output;
mod signals;
mod stats;
pub mod mount;
pub mod cli;

pub use error::Error;
