//! `ttrace-reader stats`: the device's counts, sizes and tracepoints (the text is
//! [`crate::stats`]'s).

use super::open::open;
use crate::output::quiet_pipe;
use crate::Error;
use std::io::Write;
use std::path::PathBuf;

/// Prints the statistics of `device`.
pub(super) fn run(device: Option<PathBuf>) -> Result<(), Error> {
    let text = crate::stats::text(&open(device)?)?;
    quiet_pipe(std::io::stdout().lock().write_all(text.as_bytes()))
}
