//! Errors of the writer side.

use std::path::PathBuf;

/// What went wrong creating, attaching to or writing a device.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file operation failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The directory exists but does not hold a device this version can use.
    #[error("{}: not a usable ttrace device: {why}", path.display())]
    BadDevice {
        /// The file at fault.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// A configuration value is out of range.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The tracepoint table is full.
    #[error("tracepoint table full ({0} tracepoints)")]
    TooManyTracepoints(u32),
    /// The metadata area is full; the record was dropped (and counted).
    #[error("metadata area full")]
    MetadataFull,
    /// A control command was malformed; nothing was changed.
    #[error("bad control command: {0}")]
    BadCommand(String),
    /// The lock needed is held by the calling thread itself (a trace point in a signal
    /// handler that interrupted a metadata change); nothing was done.
    #[error("lock held by the calling thread (re-entered from a signal handler)")]
    Reentered,
    /// A change was asked of a device attached read-only.
    #[error("{}: attached read-only; control needs read-write access", .0.display())]
    ReadOnly(PathBuf),
    /// A global device is already installed.
    #[error("a ttrace device is already installed in this process ({})", .0.display())]
    AlreadyInstalled(PathBuf),
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |source| Error::Io { path, source }
}
