//! What can go wrong taking snapshots from a program.

/// What can go wrong taking snapshots from a program.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The snapshot could not be saved, or its directory made or read, or a setting used.
    #[error(transparent)]
    Snapshot(#[from] ttrace_reader::snapshot_error::SnapshotError),
    /// The device could not be copied, or the snapshot written.
    #[error(transparent)]
    Device(#[from] devttrace::Error),
    /// A thread could not be started.
    #[error("no {what} thread: {source}")]
    Thread {
        /// Which thread.
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
}

/// A result of this crate.
pub type Result<T> = std::result::Result<T, Error>;
