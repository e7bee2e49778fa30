//! [`Error`]: why a command of `ttrace-reader` failed, in the words it prints
//! (`ttrace-reader: <error>` on standard error, exit status 1).

use crate::raw::RawError;
use std::path::PathBuf;

/// Why a command failed. Its text is the line the command prints, without the
/// `ttrace-reader: ` before it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The device could not be opened, read or changed (as `devttrace` says it).
    #[error(transparent)]
    Device(#[from] devttrace::Error),
    /// The device belongs to another user, is writable by others, or is reached through a
    /// symbolic link: opened only with `--any-owner`.
    #[error("{0} (--any-owner opens it all the same)")]
    Untrusted(devttrace::Error),
    /// Standard input or output failed (a closed pipe is no error).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A file or directory could not be read, written or created.
    #[error("{}: {source}", path.display())]
    File {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Spans could not be sent to `--otlp-endpoint`.
    #[error(transparent)]
    Post(#[from] crate::export::post::PostError),
    /// `--counter` names no numeric argument of the trace.
    #[error(transparent)]
    Counter(#[from] crate::export::perfetto::CounterError),
    /// `--counter` was given to an export that has no counters.
    #[error("--counter makes Perfetto counter tracks: give it with --format perfetto")]
    CounterNeedsPerfetto,
    /// `--cpu` names a CPU the device does not have.
    #[error("no cpu{cpu}: the device has {cpus} cpus")]
    NoCpu {
        /// The CPU asked for.
        cpu: usize,
        /// How many CPUs the device has.
        cpus: usize,
    },
    /// `--since` or `--until` was given something that is not a time.
    #[error(
        "{flag} {text:?}: not a time; give seconds since the device was created (12.5, 300ms), \
         a UTC time as --utc prints it (2026-11-22T15:47:37.581Z), or a span before the end \
         of the trace (-10s)"
    )]
    NotATime {
        /// The option (`--since`, `--until`).
        flag: &'static str,
        /// What it was given.
        text: String,
    },
    /// A word given to `ctl` is not one of its commands.
    #[error(
        "ctl: `{word}` is not a command{}; the commands are {}",
        .guess.map_or(String::new(), |c| format!(" (did you mean `{c}`?)")),
        .commands.join(", ")
    )]
    NotACommand {
        /// The word.
        word: String,
        /// The command it nearly is.
        guess: Option<&'static str>,
        /// The commands.
        commands: &'static [&'static str],
    },
    /// A `ctl` command with arguments that do not fit it; nothing was changed.
    #[error("ctl: {0}")]
    BadCommand(#[source] devttrace::Error),
    /// `decode -` reads entries from standard input, which names no device.
    #[error("reading standard input needs --device DEVICE")]
    StdinNeedsDevice,
    /// A file given to `decode` does not hold whole entries of the device.
    #[error("{}: {source}", path.display())]
    NotEntries {
        /// The file (`-`: standard input).
        path: PathBuf,
        /// Where and why.
        source: RawError,
    },
    /// The device could not be cleared.
    #[error("{}: {source}", path.display())]
    NotCleared {
        /// The device directory.
        path: PathBuf,
        /// Why.
        source: devttrace::Error,
    },
    /// `snapshot -o -` (or `/dev/stdout`) on a terminal: a snapshot is binary.
    #[error(
        "{}: standard output is a terminal, and a snapshot is binary; redirect it (> app.ttrace) \
         or give -o FILE",
        .0.display()
    )]
    SnapshotToTerminal(PathBuf),
    /// The directory an output is to be written in does not exist.
    #[error(
        "{}: no such directory (to write {} in); create it first",
        dir.display(),
        path.display()
    )]
    NoSuchDirectory {
        /// The missing directory.
        dir: PathBuf,
        /// The output path given.
        path: PathBuf,
    },
    /// `clear` was given a snapshot file.
    #[error(
        "{}: a snapshot file cannot be cleared: it never changes (clear the device it was taken \
         from)",
        .0.display()
    )]
    SnapshotNotCleared(PathBuf),
    /// A `ctl` command was given a snapshot file.
    #[error(
        "{}: a snapshot file cannot be controlled: it never changes (run ctl on the device it \
         was taken from)",
        .0.display()
    )]
    SnapshotNotControlled(PathBuf),
    /// `follow --wait` was given a path where something that is no device is.
    #[error(
        "{}: not a ttrace device ({what}); follow --wait waits only where nothing is yet",
        path.display()
    )]
    NothingToWaitFor {
        /// The path.
        path: PathBuf,
        /// What is there instead.
        what: &'static str,
    },
    /// A snapshot rule that does not parse, or names what the device does not have.
    #[error(transparent)]
    Rule(#[from] crate::rules::RuleError),
    /// A snapshot rule that names what the device read does not have.
    #[error("{}: {error}", device.display())]
    RuleOn {
        /// The device read.
        device: PathBuf,
        /// What is wrong.
        error: crate::rules::RuleError,
    },
    /// A snapshot could not be saved, or the snapshot directory read.
    #[error(transparent)]
    Snapshots(#[from] crate::snapshot_error::SnapshotError),
    /// An option of `watch` given something it cannot use.
    #[error("watch {option} {text:?}: {why}")]
    WatchOption {
        /// The option.
        option: &'static str,
        /// What it was given.
        text: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// `watch` of a snapshot file, which never changes.
    #[error("watch: {} is a snapshot file, which never changes: watch follows a live device", .0.display())]
    WatchSnapshot(PathBuf),
    /// `follow --interval-ms 0`.
    #[error("follow --interval-ms 0: give at least 1 (the milliseconds between two polls)")]
    ZeroInterval,
    /// `report --histogram NAME` names no pair of the trace's tracepoints.
    #[error(
        "report --histogram {name}: no pair of this name; {}",
        known_pairs(pairs)
    )]
    NoSuchPair {
        /// The name given.
        name: String,
        /// The names of the pairs (their entry's or start's).
        pairs: Vec<String>,
    },
    /// `report --by NAME` names no argument of a pair's entry (or start).
    #[error(
        "report --by {name}: no pair's entry (or start) has an argument of this name; --by takes \
         thread, process, cpu{}",
        known_args(args)
    )]
    NoSuchArgument {
        /// The name given.
        name: String,
        /// The arguments of the pairs' entries and starts.
        args: Vec<String>,
    },
    /// A mount point that is not a directory.
    #[error("{}: not a directory: a mount point is an empty directory", .0.display())]
    MountPointNotADirectory(PathBuf),
    /// A mount point that holds something (the mount would hide it).
    #[error(
        "{}: not empty: mounting here would hide what it holds (give an empty or a new \
         directory)",
        .0.display()
    )]
    MountPointNotEmpty(PathBuf),
    /// A device is mounted at the mount point already.
    #[error(
        "{}: a device is mounted here already ({mounted}); `ttrace-reader umount {}` first",
        path.display(),
        path.display()
    )]
    AlreadyMounted {
        /// The mount point.
        path: PathBuf,
        /// What is mounted (`ttrace:DEVICE`).
        mounted: String,
    },
    /// Something else is mounted at the mount point.
    #[error(
        "{}: a mount point already ({fstype} {mounted}): give an empty directory that is not one",
        path.display()
    )]
    MountPointInUse {
        /// The mount point.
        path: PathBuf,
        /// The file system type mounted there.
        fstype: String,
        /// What is mounted there.
        mounted: String,
    },
    /// `umount` of a path where nothing is mounted.
    #[error("{}: nothing is mounted here", .0.display())]
    NotMounted(PathBuf),
    /// `umount` of a path where something other than a ttrace device is mounted.
    #[error(
        "{}: not a ttrace mount ({fstype} {mounted}): umount unmounts only what \
         `ttrace-reader mount` mounted",
        path.display()
    )]
    NotATtraceMount {
        /// The mount point.
        path: PathBuf,
        /// The file system type mounted there.
        fstype: String,
        /// What is mounted there.
        mounted: String,
    },
    /// An output that is a directory (`export --format ctf`, `uftrace`) was given a pipe or
    /// a device.
    #[error("{}: this format is a directory", .0.display())]
    FormatIsADirectory(PathBuf),
    /// The output of a format written to a file names a directory.
    #[error("{}: is a directory", .0.display())]
    IsADirectory(PathBuf),
    /// The output of a format written to a directory names something else.
    #[error("{}: exists and is not a directory", .0.display())]
    NotADirectory(PathBuf),
    /// The output exists, and `--force` was not given.
    #[error("{}: exists (--force replaces it)", .0.display())]
    Exists(PathBuf),
    /// `--force` was given, but the directory there is not an earlier export of the format.
    #[error(
        "{}: exists, and --force replaces only an earlier export of this format (it has no `{marker}`)",
        path.display()
    )]
    NotAnExport {
        /// The directory.
        path: PathBuf,
        /// The file an export of the format has.
        marker: &'static str,
    },
    /// The output path ends in no file name (`..`, `/`).
    #[error("{}: not a file name", .0.display())]
    NotAFileName(PathBuf),
    /// `snapshots` was given a directory that does not exist.
    #[error("{}: no snapshot directory here (no snapshot was saved yet?)", .0.display())]
    NoSnapshotDir(PathBuf),
    /// A mounted device's directory was removed.
    #[error("{}: the device was removed", .0.display())]
    Removed(PathBuf),
    /// FUSE would not mount the device.
    #[error(
        "{}: cannot mount: {source} (FUSE needs /dev/fuse, and root or fusermount3)",
        path.display()
    )]
    CannotMount {
        /// The mount point.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A mount point with a NUL byte in it.
    #[error("{}: a path with a NUL byte", .0.display())]
    NulInPath(PathBuf),
    /// A mount point that stayed busy.
    #[error(
        "{}: busy: a file of it is still open (`fuser -vm {}` lists who has it)",
        .0.display(),
        .0.display()
    )]
    Busy(PathBuf),
    /// `fusermount3 -u` (or `fusermount -u`) failed.
    #[error("{}: {program} -u failed", path.display())]
    UnmountFailed {
        /// The mount point.
        path: PathBuf,
        /// The program that failed.
        program: &'static str,
    },
    /// Unmounting needs `fusermount3`, and there is none.
    #[error(
        "{}: {source}, and no fusermount3 to unmount it (apt install fuse3)",
        path.display()
    )]
    NoFusermount {
        /// The mount point.
        path: PathBuf,
        /// Why unmounting directly failed.
        source: std::io::Error,
    },
}

/// `the pairs are a, b, c` (or that there are none).
fn known_pairs(pairs: &[String]) -> String {
    match pairs {
        [] => "this trace has no pairs (entry/exit or start/stop tracepoints)".to_string(),
        _ => format!("the pairs are {}", pairs.join(", ")),
    }
}

/// `, or an argument: a, b, c` (or nothing when there are none).
fn known_args(args: &[String]) -> String {
    match args {
        [] => " (no pair's entry has arguments)".to_string(),
        _ => format!(", or an argument: {}", args.join(", ")),
    }
}
