//! `ttrace-reader mount` and `umount`: where they mount, and whose devices they open (the
//! file system is [`crate::mount`]'s).

use super::open::trust;
use crate::mount::default_mountpoint;
use crate::Error;
use std::path::PathBuf;

/// Serves `device` (the default device if none) at `mountpoint` (default as
/// [`default_mountpoint`] says) until unmounted.
pub(super) fn mount(device: Option<PathBuf>, mountpoint: Option<PathBuf>) -> Result<(), Error> {
    crate::mount::mount(
        &device.unwrap_or_else(devttrace::default_dir),
        &mountpoint.unwrap_or_else(default_mountpoint),
        trust(),
    )
}

/// Unmounts `mountpoint` (default as [`default_mountpoint`] says).
pub(super) fn umount(mountpoint: Option<PathBuf>) -> Result<(), Error> {
    crate::mount::umount(&mountpoint.unwrap_or_else(default_mountpoint))
}
