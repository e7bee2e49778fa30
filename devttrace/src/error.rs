//! What can go wrong creating, opening, reading, writing or controlling a device: one error
//! type for every role, each variant naming the file (or ring) at fault.

use std::path::PathBuf;

/// What went wrong with a device.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// There is no device at the path (a reader opening it; a writer creates it instead).
    #[error("{}: no ttrace device here", .0.display())]
    Missing(PathBuf),
    /// A directory that holds no device: it has no `header` file (`/tmp`, a typo'd path).
    #[error("{}: not a ttrace device (this directory has no `header` file)", .0.display())]
    NotADevice(PathBuf),
    /// A device or a snapshot file of a pre-release ttrace, recognised by its magic: a
    /// layout older than this one, never read (nor written into).
    #[error("{}", pre_release_line(.path, *.what))]
    PreRelease {
        /// The device directory, or the snapshot file.
        path: PathBuf,
        /// Which of the two.
        what: PreRelease,
    },
    /// A snapshot file that cannot be read (cut short, damaged, of another version).
    #[error("{}: not a usable ttrace snapshot: {problem}", path.display())]
    BadSnapshot {
        /// The snapshot file.
        path: PathBuf,
        /// What is wrong with it.
        problem: Problem,
    },
    /// A file operation failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The directory exists but does not hold a device this version can use.
    #[error("{}: not a usable ttrace device: {problem}", path.display())]
    Invalid {
        /// The file at fault.
        path: PathBuf,
        /// What is wrong with it.
        problem: Problem,
    },
    /// A configuration value is out of range.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The device exists with another size than the one asked for; nothing was changed.
    #[error(
        "{}: the device has {found} {what}, not the {asked} asked for; use another device \
         directory (TTRACE_DIR or Config::at) or remove this one (rm -r {}) to create it anew",
        path.display(),
        path.display()
    )]
    SizeMismatch {
        /// The device directory.
        path: PathBuf,
        /// Which size (`slots per ring`, `aux bytes per ring`, ...).
        what: &'static str,
        /// The size asked for.
        asked: u64,
        /// The size the device has.
        found: u64,
    },
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
    /// A writer front end already installed another device as this process's.
    #[error("a ttrace device is already installed in this process ({})", .0.display())]
    AlreadyInstalled(PathBuf),
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
        source: AuxError,
    },
}

/// What is wrong with a file that is not part of a usable device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// The device header is not one this code can use (magic, byte order, version, sizes).
    #[error("{0}")]
    Header(#[from] ttrace_layouts::device::HeaderError),
    /// The file does not have the length the device header implies.
    #[error("is {found} bytes, expected {expected}")]
    Length {
        /// Its length.
        found: u64,
        /// The length it must have.
        expected: u64,
    },
    /// The file is missing from the device directory.
    #[error("missing")]
    Missing,
    /// The device directory or a file of it is a symbolic link (refused: one planted in a
    /// shared directory could lead anywhere).
    #[error("is a symbolic link (refused; open it by its real path, or trust any owner)")]
    Symlink,
    /// The file belongs to another user (refused unless any owner is trusted explicitly).
    #[error("is owned by uid {owner}, not by this user (uid {user}); refused unless any owner is trusted")]
    Owner {
        /// Its owner.
        owner: u32,
        /// The calling user.
        user: u32,
    },
    /// Group or others may write the file (refused, as ssh refuses such keys).
    #[error("is writable by group or others (mode {mode:o}); refused unless any owner is trusted")]
    Writable {
        /// Its permission bits.
        mode: u32,
    },
    /// The file's own header contradicts the device header.
    #[error("its header does not match the device header")]
    Mismatch,
    /// The file shrank while it was mapped: part of it is gone (another process truncated
    /// it). What was read from the lost pages was zeros, and is not trusted.
    #[error("shrank while being read (truncated by another process)")]
    Shrunk,
    /// A snapshot file's extent (the bytes of part of the device image) at this byte offset
    /// is malformed: cut short, outside the image, overlapping another, or not where the
    /// header says the extents end.
    #[error("holds a malformed extent at byte {offset}")]
    Extent {
        /// Its offset in the file.
        offset: u64,
    },
    /// A snapshot file's part that everything after it depends on (its header page, an
    /// extent's head, the device header) does not match its checksum: the file was damaged
    /// after it was written.
    #[error("is damaged at byte {offset}: {what} does not match its checksum")]
    Damaged {
        /// Where the part is in the file.
        offset: u64,
        /// Which part.
        what: &'static str,
    },
    /// The mapping is not aligned for the layout (it cannot happen with page-aligned maps).
    #[error("misaligned mapping")]
    Misaligned,
    /// The file is not a regular file (a FIFO, a directory, a socket, a device node): a
    /// device's files and snapshots are regular files, so something replaced it. Refused
    /// before anything is read from it (a FIFO would block every reader).
    #[error("is a {0}, not a regular file: a device's files are regular files (was it replaced?)")]
    NotAFile(FileKind),
    /// The path given as a device is neither a directory nor a regular file (a snapshot).
    #[error("is a {0}: a device is a directory, a snapshot a regular file")]
    NotADeviceOrSnapshot(FileKind),
}

/// What a path that should be a regular file is instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A named pipe.
    Fifo,
    /// A directory.
    Directory,
    /// A socket.
    Socket,
    /// A character device node.
    CharDevice,
    /// A block device node.
    BlockDevice,
    /// A symbolic link.
    Symlink,
    /// A regular file.
    File,
}

impl FileKind {
    /// The kind of file `meta` describes.
    pub fn of(meta: &std::fs::Metadata) -> FileKind {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_fifo() {
            FileKind::Fifo
        } else if t.is_dir() {
            FileKind::Directory
        } else if t.is_socket() {
            FileKind::Socket
        } else if t.is_char_device() {
            FileKind::CharDevice
        } else if t.is_block_device() {
            FileKind::BlockDevice
        } else if t.is_symlink() {
            FileKind::Symlink
        } else {
            FileKind::File
        }
    }
}

impl core::fmt::Display for FileKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            FileKind::Fifo => "FIFO (named pipe)",
            FileKind::Directory => "directory",
            FileKind::Socket => "socket",
            FileKind::CharDevice => "character device",
            FileKind::BlockDevice => "block device",
            FileKind::Symlink => "symbolic link",
            FileKind::File => "regular file",
        })
    }
}

/// Why an aux snapshot failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuxError {
    /// Writers overwrote the whole buffer during every attempt to copy it.
    #[error("the aux buffer changed too fast to copy")]
    Busy,
    /// `first` and `last` are inconsistent with the buffer size (a damaged device).
    #[error("aux offsets out of range (first {first}, last {last})")]
    Offsets {
        /// `first`.
        first: u64,
        /// `last`.
        last: u64,
    },
}

/// What a pre-release ttrace left ([`Error::PreRelease`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreRelease {
    /// A device directory.
    Device,
    /// A snapshot file.
    Snapshot,
}

/// The one line that says `path` is `what` of a pre-release ttrace, and what to do.
fn pre_release_line(path: &std::path::Path, what: PreRelease) -> String {
    use ttrace_layouts::snapshot::{PRE_RELEASE_FORMAT, SNAPSHOT_VERSION};
    let p = path.display();
    match what {
        PreRelease::Device => format!(
            "{p}: {} — remove it (rm -r {p}) and a writer creates it anew",
            ttrace_layouts::device::HeaderError::PreRelease
        ),
        PreRelease::Snapshot => format!(
            "{p}: a snapshot of a pre-release ttrace (format {PRE_RELEASE_FORMAT}); this \
             ttrace reads format {}",
            SNAPSHOT_VERSION >> 16
        ),
    }
}

/// The error for a device header at `hpath` (of the device `dir`) that failed its check:
/// [`Error::PreRelease`] for a pre-release ttrace's, else [`Error::Invalid`].
pub(crate) fn bad_header(
    dir: &std::path::Path,
    hpath: &std::path::Path,
    e: ttrace_layouts::device::HeaderError,
) -> Error {
    match e {
        ttrace_layouts::device::HeaderError::PreRelease => Error::PreRelease {
            path: dir.to_path_buf(),
            what: PreRelease::Device,
        },
        e => bad(hpath, e.into()),
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A function turning an I/O error into [`Error::Io`] for `path`.
pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |source| Error::Io { path, source }
}

/// [`Error::Invalid`]: `path` is not part of a usable device, as `problem` says.
pub(crate) fn bad(path: &std::path::Path, problem: Problem) -> Error {
    Error::Invalid {
        path: path.into(),
        problem,
    }
}
