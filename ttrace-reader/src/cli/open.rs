//! Opening devices as `--any-owner` says: whose devices this run opens, and the refusal
//! that tells how to open a device of another user.

use crate::Error;
use devttrace::{Device, Reader, Trust};
use std::path::{Path, PathBuf};

/// Whose devices this run opens (`--any-owner`).
static TRUST: std::sync::OnceLock<Trust> = std::sync::OnceLock::new();

/// Sets whose devices this run opens: any user's with `--any-owner`, else only its own.
pub(super) fn set_trust(any_owner: bool) {
    let _ = TRUST.set(if any_owner { Trust::Any } else { Trust::Own });
}

/// Whose devices this run opens.
pub(super) fn trust() -> Trust {
    *TRUST.get().unwrap_or(&Trust::Own)
}

/// Opens `device` (the default device if none) to read; names on standard error each
/// damaged extent of a snapshot file ([`announce`]).
pub(super) fn open(device: Option<PathBuf>) -> Result<Reader, Error> {
    let dev = Reader::open_with(device.unwrap_or_else(devttrace::default_dir), trust())
        .map_err(refusal)?;
    announce(&dev);
    Ok(dev)
}

/// Says on standard error, one line each, which extents of the snapshot file `dev` reads
/// were damaged: left out, the rest read (their entries are counted as damaged).
pub(super) fn announce(dev: &Reader) {
    for line in crate::decode::damaged_extents(dev) {
        eprintln!("ttrace-reader: {line}");
    }
}

/// Attaches to `device` (the default device if none) to control it; a snapshot file is
/// refused with `snapshot` (it never changes).
pub(super) fn open_control(
    device: Option<PathBuf>,
    snapshot: fn(PathBuf) -> Error,
) -> Result<Device, Error> {
    let dir = device.unwrap_or_else(devttrace::default_dir);
    changeable(&dir, snapshot)?;
    Device::attach_with(&dir, trust()).map_err(refusal)
}

/// Refuses a file at `dir`: a snapshot with `snapshot`, any other as no device.
pub(super) fn changeable(dir: &Path, snapshot: fn(PathBuf) -> Error) -> Result<(), Error> {
    if !dir.is_file() {
        return Ok(());
    }
    match Reader::open_with(dir, trust()) {
        Ok(_) => Err(snapshot(dir.to_path_buf())),
        Err(e) => Err(refusal(e)),
    }
}

/// An open error; a device refused for whom it belongs to says how to open it.
pub(super) fn refusal(e: devttrace::Error) -> Error {
    use devttrace::Problem::{Owner, Symlink, Writable};
    match e {
        devttrace::Error::Invalid {
            problem: Owner { .. } | Writable { .. } | Symlink,
            ..
        } => Error::Untrusted(e),
        e => Error::Device(e),
    }
}

/// Whether an open failed only because no device is there (yet).
pub(super) fn absent(e: &devttrace::Error) -> bool {
    matches!(
        e,
        devttrace::Error::Missing(_)
            | devttrace::Error::NotADevice(_)
            | devttrace::Error::Invalid {
                problem: devttrace::Problem::Missing,
                ..
            }
    )
}
