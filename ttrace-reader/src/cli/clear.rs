//! `ttrace-reader clear`: empty the trace, as ftrace's `echo > trace` does.

use super::open::open_control;
use crate::Error;
use std::path::PathBuf;

/// Clears `device`, and says so on standard error; a snapshot file is refused (it never
/// changes).
pub(super) fn run(device: Option<PathBuf>) -> Result<(), Error> {
    let dev = open_control(device, Error::SnapshotNotCleared)?;
    let clears = dev.clear().map_err(|source| Error::NotCleared {
        path: dev.reader().dir().to_path_buf(),
        source,
    })?;
    eprintln!("{}: cleared (clear {clears})", dev.reader().dir().display());
    Ok(())
}
