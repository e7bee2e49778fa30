//! The `ttrace-reader` command line: one file per command, each named after it, above the
//! helpers they share (opening a device, choosing what to show) and below the parser that
//! runs them ([`main`]).

// Bottom up: each module uses only those listed before it.
mod open;
mod select;
mod dump;
mod follow;
mod watch;
mod stats;
mod ctl;
mod clear;
mod report;
mod export;
mod snapshot;
mod snapshots;
mod decode;
mod mount;
mod demo;
mod command_line;

pub use command_line::{main, main_with};
