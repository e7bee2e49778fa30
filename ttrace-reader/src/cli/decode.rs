//! `ttrace-reader decode`: raw entries (a mounted device's `cpuN` files, or copies) decoded
//! to the lines `dump` prints, merged in time order.

use super::open::open;
use super::select::time_format;
use crate::decode::Decoder;
use crate::merge::{Filter, Merge};
use crate::output::quiet_pipe;
use crate::Error;
use devttrace::Reader;
use std::io::Write;
use std::path::PathBuf;

/// The device that raw entries belong to: `device`, else the directory of the first file;
/// a mounted device (`version` has a `source` line) stands for the device it serves.
fn entries_device(device: Option<PathBuf>, files: &[PathBuf]) -> Result<Reader, Error> {
    let dir = match device {
        Some(d) => d,
        None => match files.first() {
            Some(f) if f.as_os_str() != "-" => f
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."))
                .to_path_buf(),
            _ => return Err(Error::StdinNeedsDevice),
        },
    };
    match crate::mount::source_of(&dir) {
        Some(source) => open(Some(source)),
        None => open(Some(dir)),
    }
}

/// Prints the events of `files`, entries of `device` (see [`entries_device`]).
pub(super) fn run(device: Option<PathBuf>, files: Vec<PathBuf>, utc: bool) -> Result<(), Error> {
    use std::io::Read;
    let dev = entries_device(device, &files)?;
    let limits = crate::raw::Limits::of(&dev.version());
    let mut all = Vec::with_capacity(files.len());
    for f in &files {
        let mut bytes = Vec::new();
        let read = if f.as_os_str() == "-" {
            std::io::stdin().lock().read_to_end(&mut bytes)
        } else {
            std::fs::File::open(f).and_then(|mut file| file.read_to_end(&mut bytes))
        };
        read.map_err(|source| Error::File {
            path: f.clone(),
            source,
        })?;
        let mut events =
            crate::raw::parse(&bytes, &limits).map_err(|source| Error::NotEntries {
                path: f.clone(),
                source,
            })?;
        // Each file in time order (a file may be several CPUs' entries one after another).
        events.sort_by_key(|e| e.stamp);
        all.push(events);
    }
    let snap = crate::raw::snapshot(&dev, all);
    let mut out = std::io::stdout().lock();
    let written = Decoder::new(&snap, time_format(utc))
        .write_all(Merge::snapshot(&snap, &Filter::default()), &mut out)
        .and_then(|_| out.flush());
    quiet_pipe(written)
}
