//! The device's files on disk: creating them atomically, opening them with the checks that
//! keep another user's files out, and mapping them.

use crate::config::{configured_cpus, meta_bytes_for, Config};
use crate::error::{bad, io, Error, FileKind, Problem, Result};
use memmap2::{Mmap, MmapMut, MmapOptions};
use std::fs::{DirBuilder, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use ttrace_layouts::device::{self as layout, DeviceHeader, HEADER_BYTES};
use ttrace_layouts::meta::{MetaHeader, META_HEADER_BYTES};
use ttrace_layouts::ring::{num_rings, ring_file_bytes, ring_name, RingHeader, RING_HEADER_BYTES};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

/// How a device's files are opened and mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Opened read-write and mapped shared and writable ([`map_writable`]): writers, and
    /// control commands.
    ReadWrite,
    /// Opened read-only and mapped read-only ([`map_read_only`]): a reader, which needs no
    /// write permission, cannot change the device (a store faults), and sees every update
    /// (its pages are the page cache's).
    ReadOnly,
}

/// Whose devices a process accepts to open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trust {
    /// Only a device that belongs to the calling user: directory and files owned by the
    /// effective user, none writable by group or others, the directory not a symlink (as ssh
    /// treats its keys). The default: a device in a shared directory could otherwise be one
    /// planted by another user, to read what is recorded or to feed readers a hostile file.
    Own,
    /// Any device the operating system lets this process open (an explicit opt-in, to read
    /// another user's trace).
    Any,
}

/// Checks that `meta` (of `path`) is the calling user's and writable by nobody else.
pub(crate) fn check_trust(
    path: &Path,
    meta: &std::fs::Metadata,
    trust: Trust,
    uid: u32,
) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    if trust == Trust::Any {
        return Ok(());
    }
    if meta.file_type().is_symlink() {
        return Err(bad(path, Problem::Symlink));
    }
    if meta.uid() != uid {
        return Err(bad(
            path,
            Problem::Owner {
                owner: meta.uid(),
                user: uid,
            },
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(bad(
            path,
            Problem::Writable {
                mode: meta.mode() & 0o7777,
            },
        ));
    }
    Ok(())
}

/// The effective user id.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no arguments and no memory effects.
    unsafe { libc::geteuid() }
}

/// Opens a file of an existing device, refusing one that is not the user's (see [`Trust`]).
pub(crate) fn open_existing(path: &Path, access: Access, trust: Trust) -> Result<File> {
    let file = open_file(path, None, access).map_err(|e| match e {
        // O_NOFOLLOW refuses a symlink with ELOOP.
        Error::Io { path, source } if source.raw_os_error() == Some(libc::ELOOP) => {
            bad(&path, Problem::Symlink)
        }
        e => e,
    })?;
    check_trust(path, &file.metadata().map_err(io(path))?, trust, euid())?;
    Ok(file)
}

fn open_file(path: &Path, create_len: Option<u64>, access: Access) -> Result<File> {
    let mut opts = OpenOptions::new();
    opts.read(true).write(access == Access::ReadWrite);
    if create_len.is_some() {
        opts.create_new(true).mode(0o600);
    }
    let file = open_regular(path, &mut opts, false)?;
    if let Some(len) = create_len {
        file.set_len(len).map_err(io(path))?;
    }
    Ok(file)
}

/// Opens `path` as `opts` says, never waiting, and only if it is a regular file (else
/// [`Problem::NotAFile`], naming what it is); a symlink is followed only if `follow` (a
/// device's files are opened `O_NOFOLLOW`, see [`Trust`]).
///
/// `O_NONBLOCK` makes the open of a FIFO return at once instead of waiting for a writer
/// (which would hang the reader), and `fstat` then refuses it, as it refuses a directory, a
/// socket or a device node: a device's files and snapshots are regular files, and reading
/// anything else would block, fail late, or read something that is not a trace. On a
/// regular file the flag changes nothing (reads and mappings of regular files never block).
pub(crate) fn open_regular(path: &Path, opts: &mut OpenOptions, follow: bool) -> Result<File> {
    let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
    let file = opts
        .custom_flags(nofollow | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            // A directory opened for writing, a socket: say what it is.
            Some(libc::EISDIR | libc::ENXIO) => match std::fs::metadata(path) {
                Ok(m) if FileKind::of(&m) != FileKind::File => {
                    bad(path, Problem::NotAFile(FileKind::of(&m)))
                }
                _ => io(path)(e),
            },
            _ => io(path)(e),
        })?;
    let meta = file.metadata().map_err(io(path))?;
    match FileKind::of(&meta) {
        FileKind::File => Ok(file),
        kind => Err(bad(path, Problem::NotAFile(kind))),
    }
}

/// The options that map `file` (of `path`), once its length is checked to be `expected_len`.
fn options(path: &Path, file: &File, expected_len: u64) -> Result<MmapOptions> {
    let len = file.metadata().map_err(io(path))?.len();
    if len != expected_len {
        return Err(bad(
            path,
            Problem::Length {
                found: len,
                expected: expected_len,
            },
        ));
    }
    // The length checked, not the file's length now: a file cut in between still gives a
    // mapping of the size the layout needs (its lost pages fault; see `sigbus`).
    let mut opts = MmapOptions::new();
    opts.len(expected_len as usize);
    Ok(opts)
}

/// Maps the device file `file` (of `path`, `expected_len` bytes long) shared and writable,
/// for a role that changes the device (opened with [`Access::ReadWrite`]).
pub(crate) fn map_writable(path: &Path, file: &File, expected_len: u64) -> Result<MmapMut> {
    let opts = options(path, file, expected_len)?;
    // SAFETY: the file is a device file shared with other ttrace processes; they only change
    // it through atomics, and nothing truncates it while it is mapped (a process that did
    // would be outside the device protocol; the mapping would fault, not corrupt).
    unsafe { opts.map_mut(file) }.map_err(io(path))
}

/// Maps the device file `file` (of `path`, `expected_len` bytes long) shared and read-only
/// (`PROT_READ`), for a reader (opened with [`Access::ReadOnly`]): nothing done through the
/// mapping can reach the file, and every store a writer makes to it is seen.
pub(crate) fn map_read_only(path: &Path, file: &File, expected_len: u64) -> Result<Mmap> {
    let opts = options(path, file, expected_len)?;
    // SAFETY: as in `map_writable`; others change the file only through atomics, which this
    // process reads only with loads (`crate::sync`), and a file cut under the mapping faults
    // into the SIGBUS watch the caller sets (`crate::sigbus`), never into wrong bytes.
    unsafe { opts.map(file) }.map_err(io(path))
}

/// Creates the device `config` describes at `dir`, atomically: every file is built in a
/// temporary directory beside it, which is then renamed into place without replacing
/// anything. Returns `false`, having changed nothing, if a device appeared at `dir` first
/// (another process won the race): the caller attaches to that one.
pub(crate) fn create(dir: &Path, config: &Config) -> Result<bool> {
    let cpus = config.cpus.unwrap_or_else(configured_cpus);
    let clock = config.clock.unwrap_or_else(crate::clock::best_source);
    let cal = crate::clock::calibrate(clock, config.calibration);
    let mut h = DeviceHeader::new_zeroed();
    h.magic = layout::MAGIC;
    h.header_version = layout::HEADER_VERSION;
    h.shared_data_version = layout::SHARED_DATA_VERSION;
    h.percpu_data_version = layout::PERCPU_DATA_VERSION;
    h.num_cpus = cpus;
    h.ring_slots = config.resolved_ring_slots();
    h.aux_size = config.resolved_aux_bytes();
    h.aux_mask = h.aux_size.wrapping_sub(1);
    h.meta_size = match config.meta_bytes {
        0 => meta_bytes_for(cpus, h.ring_slots, config.max_tracepoints),
        n => n,
    };
    h.max_tracepoints = config.max_tracepoints;
    h.clock = clock as u32;
    h.tsc_hz = cal.hz;
    h.anchor_tsc = cal.anchor_ticks;
    h.anchor_realtime_ns = cal.anchor_realtime_ns;
    h.anchor_monotonic_ns = cal.anchor_monotonic_ns;
    h.creator_pid = std::process::id();
    *h.type_mask.get_mut() = u64::MAX;
    h.check().map_err(|e| Error::Config(e.to_string()))?;

    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = dir
        .file_name()
        .ok_or_else(|| Error::Config(format!("{} is not a directory name", dir.display())))?;
    let nanos = crate::clock::monotonic_ns();
    let tmp = parent.join(format!(
        ".{}.tmp-{}-{nanos}",
        name.to_string_lossy(),
        std::process::id()
    ));
    // The temporary name is ours, not the user's: a failure here (a missing parent, no
    // permission) names the directory they asked for.
    DirBuilder::new()
        .mode(0o700)
        .create(&tmp)
        .map_err(io(dir))?;
    match build(&tmp, &mut h).and_then(|()| publish(&tmp, dir)) {
        Ok(()) => Ok(true),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            match e {
                Error::Io { ref source, .. }
                    if matches!(
                        source.raw_os_error(),
                        Some(libc::EEXIST) | Some(libc::ENOTEMPTY)
                    ) =>
                {
                    Ok(false)
                }
                e => Err(e),
            }
        }
    }
}

/// Writes every file of a new device into `tmp`.
fn build(tmp: &Path, h: &mut DeviceHeader) -> Result<()> {
    let path = tmp.join("header");
    let mut hmap = map_writable(
        &path,
        &open_file(&path, Some(HEADER_BYTES as u64), Access::ReadWrite)?,
        HEADER_BYTES as u64,
    )?;
    let n = num_rings(h.num_cpus);
    for r in 0..n {
        let path = tmp.join(ring_name(r, h.num_cpus));
        let len = ring_file_bytes(h.ring_slots);
        let mut m = map_writable(&path, &open_file(&path, Some(len), Access::ReadWrite)?, len)?;
        let rh = RingHeader::mut_from_bytes(&mut m[..RING_HEADER_BYTES])
            .map_err(|_| bad(&path, Problem::Misaligned))?;
        rh.identify(r, h.num_cpus, h.ring_slots);
    }
    let path = tmp.join("aux");
    open_file(&path, Some(h.aux_size * n as u64), Access::ReadWrite)?;
    let path = tmp.join("meta");
    let mut m = map_writable(
        &path,
        &open_file(&path, Some(h.meta_size), Access::ReadWrite)?,
        h.meta_size,
    )?;
    m[..META_HEADER_BYTES as usize]
        .copy_from_slice(MetaHeader::new(h.max_tracepoints, h.meta_size).as_bytes());
    // The header goes last, magic included, though nothing can see the directory before
    // it is renamed into place.
    hmap.copy_from_slice(h.as_mut_bytes());
    Ok(())
}

/// Renames the finished directory into place, never replacing anything.
fn publish(tmp: &Path, dir: &Path) -> Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| Error::Config(format!("{} contains NUL", p.display())))
    };
    let (from, to) = (c(tmp)?, c(dir)?);
    // SAFETY: both are valid NUL-terminated paths; renameat2 only renames.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    if matches!(err.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EINVAL)) {
        // No RENAME_NOREPLACE on this file system: rename(2) still refuses a non-empty
        // target, and a device directory is never empty.
        return std::fs::rename(tmp, dir).map_err(io(dir));
    }
    Err(Error::Io {
        path: dir.to_path_buf(),
        source: err,
    })
}
