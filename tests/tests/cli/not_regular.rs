//! A device whose files were replaced by things that are no regular files: every reader
//! command refuses at once, naming the file and what it is, instead of blocking on a FIFO
//! or reading a directory's size as a file's.

use std::path::{Path, PathBuf};
use std::time::Duration;
use ttrace_tests::reader;

/// A small device with one event, at `dir`.
fn make(dir: &Path) {
    let w = ttrace_core::Writer::open(&ttrace_tests::config(dir, 64, 2)).unwrap();
    let word = ttrace_tests::define(&w, "hello", "n={n}");
    w.emit(word, 1 << 32 | 2, &[7]);
}

/// Replaces `path` with a FIFO.
fn fifo(path: &Path) {
    std::fs::remove_file(path).unwrap();
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo only creates a file.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// Replaces `path` with an empty directory.
fn directory(path: &Path) {
    std::fs::remove_file(path).unwrap();
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(path).unwrap();
}

/// Every reader command, on `dev`, writing what it writes under `out`.
fn commands(dev: &Path, out: &Path) -> Vec<Vec<PathBuf>> {
    let p = |s: &str| PathBuf::from(s);
    vec![
        vec![p("dump"), dev.into()],
        vec![p("stats"), dev.into()],
        vec![p("report"), dev.into()],
        vec![p("snapshot"), dev.into(), p("-o"), out.join("snap")],
        vec![
            p("export"),
            p("--format"),
            p("chrome"),
            dev.into(),
            p("-o"),
            out.join("c.json"),
        ],
        vec![
            p("export"),
            p("--format"),
            p("uftrace"),
            dev.into(),
            p("-o"),
            out.join("u"),
        ],
        vec![
            p("export"),
            p("--format"),
            p("ctf"),
            dev.into(),
            p("-o"),
            out.join("ctf"),
        ],
        vec![p("follow"), dev.into()],
        vec![p("follow"), p("--wait"), dev.into()],
    ]
}

/// Each command fails at once (within the limit: a blocked open would be killed there and
/// fail the test) with one line that names `file` and says it is `what`.
fn all_refuse(dev: &Path, file: &Path, what: &str) {
    let out = tempfile::tempdir().unwrap();
    for args in commands(dev, out.path()) {
        let err = reader!()
            .args(&args)
            .within(Duration::from_secs(20))
            .fails();
        assert!(err.contains(&file.display().to_string()), "{args:?}: {err}");
        assert!(err.contains(what), "{args:?}: {err}");
        assert!(err.contains("not a regular file"), "{args:?}: {err}");
    }
}

#[test]
fn a_fifo_in_place_of_a_ring_file_is_refused_by_every_command_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = tmp.path().join("dev");
    make(&dev);
    fifo(&dev.join("cpu0"));
    all_refuse(&dev, &dev.join("cpu0"), "is a FIFO");
}

#[test]
fn a_fifo_in_place_of_the_header_is_refused_by_every_command_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = tmp.path().join("dev");
    make(&dev);
    fifo(&dev.join("header"));
    all_refuse(&dev, &dev.join("header"), "is a FIFO");
}

#[test]
fn a_directory_in_place_of_a_ring_file_is_named_as_one_not_by_its_size() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = tmp.path().join("dev");
    make(&dev);
    directory(&dev.join("cpu0"));
    all_refuse(&dev, &dev.join("cpu0"), "is a directory");
}

#[test]
fn a_fifo_given_as_the_device_is_neither_a_device_nor_a_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("pipe");
    std::fs::write(&path, b"").unwrap();
    fifo(&path);
    for cmd in ["dump", "stats", "report", "follow"] {
        let err = reader!(cmd, &path).within(Duration::from_secs(20)).fails();
        assert!(err.contains(&path.display().to_string()), "{cmd}: {err}");
        assert!(err.contains("is a FIFO"), "{cmd}: {err}");
        assert!(err.contains("a device is a directory"), "{cmd}: {err}");
    }
}

/// The library says the same, typed.
#[test]
fn the_reader_api_refuses_a_fifo_with_a_typed_error() {
    use devttrace::{Error, FileKind, Problem, Reader};
    let tmp = tempfile::tempdir().unwrap();
    let dev = tmp.path().join("dev");
    make(&dev);
    fifo(&dev.join("meta"));
    match Reader::open(&dev) {
        Err(Error::Invalid {
            path,
            problem: Problem::NotAFile(FileKind::Fifo),
        }) => assert_eq!(path, dev.join("meta")),
        other => panic!("{:?}", other.err()),
    }
    // Writers attaching read-write refuse it too.
    assert!(matches!(
        devttrace::Device::attach(&dev),
        Err(Error::Invalid {
            problem: Problem::NotAFile(FileKind::Fifo),
            ..
        })
    ));
}
