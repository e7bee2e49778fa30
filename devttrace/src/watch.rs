//! Noticing that the device at a path was removed, or replaced by another one created there.
//!
//! A reader maps a device's files: when the directory is removed, the mappings stay, and a
//! new device created at the same path is a different set of files. A [`Watch`] tells the
//! two apart by the device's identity, the header's creation facts (creator pid, clock
//! anchor), checked again only when the `header` file at the path is another file (its
//! device, inode or change time differ), so that a check costs one `stat`.

use crate::reader::Reader;
use crate::version::Version;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use ttrace_layouts::device::{DeviceHeader, HEADER_BYTES};
use zerocopy::FromBytes;

/// What is at the watched path now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// The device that was opened.
    Same,
    /// No device: the directory or its header is gone (or is no device header).
    Removed,
    /// Another device, created at the path since: its header as a value.
    Replaced(Version),
}

/// Watches the path of an opened device.
pub struct Watch {
    dir: PathBuf,
    version: Version,
    /// The `header` file last found to be the opened device's: device, inode, change time.
    file: Option<(u64, u64, i64, i64)>,
    /// A snapshot file: nothing to watch.
    inert: bool,
}

/// The header of the device at `dir` now, if there is one: read from the file, not mapped.
///
/// ```
/// # let tmp = tempfile::tempdir().unwrap();
/// # let dir = tmp.path().join("dev");
/// assert!(devttrace::version_at(&dir).is_none());
/// let w = devttrace::Device::open(&devttrace::Config { ring_slots: 64, cpus: Some(1), ..devttrace::Config::at(&dir) })?;
/// assert_eq!(devttrace::version_at(&dir).unwrap().creator_pid, std::process::id());
/// # Ok::<(), devttrace::Error>(())
/// ```
pub fn version_at(dir: &Path) -> Option<Version> {
    let mut buf = vec![0u8; HEADER_BYTES];
    // Never waits: a FIFO put in the header's place is no header.
    crate::files::open_regular(
        &dir.join("header"),
        std::fs::OpenOptions::new().read(true),
        false,
    )
    .ok()?
    .read_exact(&mut buf)
    .ok()?;
    let h = DeviceHeader::read_from_bytes(&buf).ok()?;
    h.check().ok()?;
    Some(Version::of(&h))
}

fn file_key(dir: &Path) -> Option<(u64, u64, i64, i64)> {
    let m = std::fs::symlink_metadata(dir.join("header")).ok()?;
    Some((m.dev(), m.ino(), m.ctime(), m.ctime_nsec()))
}

impl Watch {
    /// Watches the path `dev` was opened at (a snapshot file never changes: nothing to do).
    pub fn new(dev: &Reader) -> Watch {
        Watch {
            dir: dev.dir().to_path_buf(),
            version: dev.version(),
            file: None,
            inert: !dev.dir().is_dir(),
        }
    }

    /// What is at the path now. Costs one `stat` while the header file is the one seen last.
    pub fn check(&mut self) -> Change {
        if self.inert {
            return Change::Same;
        }
        let Some(key) = file_key(&self.dir) else {
            return Change::Removed;
        };
        if self.file == Some(key) {
            return Change::Same;
        }
        match version_at(&self.dir) {
            None => Change::Removed,
            Some(v) if v == self.version => {
                self.file = Some(key);
                Change::Same
            }
            Some(v) => Change::Replaced(v),
        }
    }
}
