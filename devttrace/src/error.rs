//! What can go wrong reading or controlling a device.

use std::path::PathBuf;
pub use ttrace_core::Problem;

/// Errors of the device interface. Each names the file (or ring) at fault.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// There is no device at the path.
    #[error("{}: no ttrace device here", .0.display())]
    Missing(PathBuf),
    /// A directory that holds no device: it has no `header` file (`/tmp`, a typo'd path).
    #[error("{}: not a ttrace device (this directory has no `header` file)", .0.display())]
    NotADevice(PathBuf),
    /// A snapshot file that cannot be read (cut short, damaged, of another version).
    #[error("{}: not a usable ttrace snapshot: {problem}", path.display())]
    BadSnapshot {
        /// The snapshot file.
        path: PathBuf,
        /// What is wrong with it.
        problem: Problem,
    },
    /// A file could not be opened, sized or mapped.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file is not part of a device this version can read.
    #[error("{}: not a usable ttrace device: {problem}", path.display())]
    Invalid {
        /// The file at fault.
        path: PathBuf,
        /// What is wrong with it.
        problem: Problem,
    },
    /// The device has no such ring.
    #[error("no ring cpu{cpu}: the device has {rings}")]
    NoSuchCpu {
        /// The ring asked for.
        cpu: usize,
        /// How many rings the device has.
        rings: usize,
    },
    /// The aux buffer could not be copied.
    #[error("{}: {source}", path.display())]
    Aux {
        /// The aux file.
        path: PathBuf,
        /// Why.
        source: ttrace_core::aux::AuxError,
    },
    /// A control command was malformed; nothing was changed.
    #[error("{0}")]
    BadCommand(String),
    /// A control command was given to a device opened read-only.
    #[error("{}: opened read-only; control needs Device::open_for_control", .0.display())]
    ReadOnly(PathBuf),
    /// Another failure of the writer-side library (a full rule area, a busy lock).
    #[error(transparent)]
    Core(ttrace_core::Error),
}

impl From<ttrace_core::Error> for Error {
    fn from(e: ttrace_core::Error) -> Error {
        use ttrace_core::Error as E;
        match e {
            E::Io { path, source } if source.kind() == std::io::ErrorKind::NotFound => {
                Error::Missing(path)
            }
            E::Io { path, source } => Error::Io { path, source },
            E::BadDevice { path, problem } => Error::Invalid { path, problem },
            E::BadCommand(why) => Error::BadCommand(why),
            E::ReadOnly(path) => Error::ReadOnly(path),
            other => Error::Core(other),
        }
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
