//! What can go wrong saving or listing snapshot files.

use std::path::PathBuf;

/// What can go wrong saving or listing snapshots.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The device could not be copied, or the snapshot written.
    #[error(transparent)]
    Device(#[from] devttrace::Error),
    /// The snapshot directory could not be made or read.
    #[error("snapshot directory {path}: {source}")]
    Directory {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A setting in the environment is not one that can be used.
    #[error("{name}={value:?}: {why}")]
    Setting {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

/// A result of saving or listing snapshots.
pub type Result<T> = std::result::Result<T, SnapshotError>;
