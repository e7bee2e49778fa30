//! Where commands write their outputs: one policy for every command that writes a file or
//! a directory (`snapshot`, `export`), and quiet ends on closed pipes.

use crate::Error;
use std::path::Path;

/// What an output is: a file, or a directory holding this file when it is one written by
/// the same command (only such a directory is replaced by `--force`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// One file.
    File,
    /// A directory, which holds this file once complete.
    Dir(&'static str),
}

/// How an output path is written. One policy for every command that writes one (`snapshot`,
/// `export`): the output is written under a temporary name beside the path and renamed into
/// place when complete, so that a path holds a whole output or none; a path that exists is
/// refused unless `--force` (an empty directory counts as none); one in a directory that
/// does not exist is refused, naming it. Pipes, terminals and devices, and `/dev/stdout` and
/// the like, are written to in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// Nothing is there: renamed into place only while nothing is.
    New,
    /// Something is there, and `--force` replaces it.
    Replace,
    /// Written in place.
    Stream,
}

/// Whether `path` names an open file descriptor (`/dev/stdout`, `/dev/fd/1`,
/// `/proc/self/fd/1`), following symbolic links.
fn is_descriptor(path: &Path) -> bool {
    let mut path = path.to_path_buf();
    for _ in 0..8 {
        let fd_dir = ["/dev/fd/", "/dev/stdout", "/dev/stderr", "/proc/self/fd/"];
        let proc_fd = path
            .strip_prefix("/proc")
            .ok()
            .and_then(|p| p.iter().nth(1))
            .is_some_and(|d| d == "fd");
        if proc_fd || fd_dir.iter().any(|p| path.starts_with(p)) {
            return true;
        }
        match std::fs::read_link(&path) {
            Ok(to) => path = path.parent().unwrap_or(Path::new("/")).join(to),
            Err(_) => return false,
        }
    }
    false
}

/// How `path` is written (see [`Target`]), or why it cannot be.
pub(crate) fn output_target(path: &Path, shape: Shape, force: bool) -> Result<Target, Error> {
    let at = || path.to_path_buf();
    let meta = match std::fs::metadata(path) {
        // Nothing there: its directory must be (it is not made up).
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = match path.parent() {
                Some(dir) if !dir.as_os_str().is_empty() => dir,
                _ => Path::new("."),
            };
            return match std::fs::metadata(dir) {
                Ok(_) => Ok(Target::New),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::NoSuchDirectory {
                    dir: dir.to_path_buf(),
                    path: at(),
                }),
                Err(source) => Err(Error::File {
                    path: dir.to_path_buf(),
                    source,
                }),
            };
        }
        Err(source) => return Err(Error::File { path: at(), source }),
        Ok(meta) => meta,
    };
    let kind = meta.file_type();
    if is_descriptor(path) || !(kind.is_file() || kind.is_dir()) {
        return match shape {
            Shape::File => Ok(Target::Stream),
            Shape::Dir(_) => Err(Error::FormatIsADirectory(at())),
        };
    }
    match (shape, kind.is_dir()) {
        (Shape::File, true) => Err(Error::IsADirectory(at())),
        (Shape::Dir(_), false) => Err(Error::NotADirectory(at())),
        (Shape::Dir(_), true)
            if path
                .read_dir()
                .map_err(|source| Error::File { path: at(), source })?
                .next()
                .is_none() =>
        {
            Ok(Target::New)
        }
        _ if !force => Err(Error::Exists(at())),
        (Shape::Dir(marker), _) if !path.join(marker).exists() => {
            Err(Error::NotAnExport { path: at(), marker })
        }
        _ => Ok(Target::Replace),
    }
}

/// Writes an output through `write` to a temporary name beside `path`, then puts it at
/// `path` as `target` says (see [`Target`]); the temporary is removed on failure.
pub(crate) fn write_output<T>(
    path: &Path,
    target: Target,
    shape: Shape,
    write: impl FnOnce(&Path) -> Result<T, Error>,
) -> Result<T, Error> {
    let file_name = path
        .file_name()
        .ok_or_else(|| Error::NotAFileName(path.to_path_buf()))?;
    let beside = |what: &str| {
        path.with_file_name(format!(
            ".{}.{what}-{}",
            file_name.to_string_lossy(),
            std::process::id()
        ))
    };
    let tmp = beside("tmp");
    let remove = |p: &Path| match shape {
        Shape::File => std::fs::remove_file(p),
        Shape::Dir(_) => std::fs::remove_dir_all(p),
    };
    let placed = write(&tmp).and_then(|written| {
        let put = match (shape, target) {
            (_, Target::Stream) => Err(std::io::ErrorKind::InvalidInput.into()),
            (Shape::File, Target::Replace) => std::fs::rename(&tmp, path),
            // Only where nothing is: a file that appeared meanwhile is not overwritten.
            (Shape::File, Target::New) => match std::fs::hard_link(&tmp, path) {
                Ok(()) => std::fs::remove_file(&tmp),
                // A file system without hard links: rename, having looked once more.
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists && !path.exists() => {
                    std::fs::rename(&tmp, path)
                }
                Err(e) => Err(e),
            },
            // Onto nothing or an empty directory only (a full one fails the rename).
            (Shape::Dir(_), Target::New) => std::fs::rename(&tmp, path),
            (Shape::Dir(_), Target::Replace) => {
                let old = beside("old");
                std::fs::rename(path, &old).and_then(|_| match std::fs::rename(&tmp, path) {
                    Ok(()) => std::fs::remove_dir_all(&old),
                    Err(e) => {
                        let _ = std::fs::rename(&old, path);
                        Err(e)
                    }
                })
            }
        };
        put.map(|_| written).map_err(|source| Error::File {
            path: path.to_path_buf(),
            source,
        })
    });
    if placed.is_err() {
        let _ = remove(&tmp);
    }
    placed
}

/// Output to a closed pipe (`| head`) ends quietly.
pub(crate) fn quiet_pipe(r: std::io::Result<()>) -> Result<(), Error> {
    match r {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Error::Io(e)),
        _ => Ok(()),
    }
}
