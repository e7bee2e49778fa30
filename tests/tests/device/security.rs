//! Devices that are not the user's own are refused, unless any owner is trusted explicitly.

use devttrace::{Error, Problem, Reader, Trust};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use ttrace_tests::reader;

fn make(dir: &Path) {
    let w = ttrace_core::Writer::open(&ttrace_tests::config(dir, 64, 2)).unwrap();
    let word = ttrace_tests::define(&w, "hello", "n={n}");
    w.emit(word, 1 << 32 | 2, &[7]);
}

fn problem(r: Result<Reader, Error>) -> (std::path::PathBuf, Problem) {
    match r {
        Err(Error::Invalid { path, problem }) => (path, problem),
        other => panic!("expected a refusal, got {:?}", other.err()),
    }
}

/// `dump` without and with `--any-owner`: (refused with this message, then accepted).
fn cli_refuses_then_accepts(dir: &Path, why: &str) {
    let out = reader!("dump", dir).run();
    let err = out.stderr;
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(why) && err.lines().count() == 1, "{err}");
    assert!(
        err.contains("--any-owner"),
        "the refusal names the way in: {err}"
    );
    let out = reader!("dump", "--any-owner", dir).run();
    assert!(out.status.success(), "{}", out.stderr);
    assert!(out.stdout.contains("hello(n=7)"));
}

#[test]
fn a_file_others_may_write_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    make(&dir);
    std::fs::set_permissions(dir.join("aux"), std::fs::Permissions::from_mode(0o620)).unwrap();
    let (path, p) = problem(Reader::open(&dir));
    assert_eq!(path, dir.join("aux"));
    assert_eq!(p, Problem::Writable { mode: 0o620 });
    assert!(Reader::open_with(&dir, Trust::Any).is_ok());
    cli_refuses_then_accepts(
        &dir,
        "aux: not a usable ttrace device: is writable by group or others (mode 620)",
    );
}

#[test]
fn a_directory_others_may_write_is_refused_by_writers_too() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    make(&dir);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (path, p) = problem(Reader::open(&dir));
    assert_eq!((path, p), (dir.clone(), Problem::Writable { mode: 0o777 }));
    // A writer would otherwise record into a device another user controls.
    match ttrace_core::Writer::open(&ttrace_tests::config(&dir, 64, 2)) {
        Err(ttrace_core::Error::Invalid { problem, .. }) => {
            assert_eq!(problem, Problem::Writable { mode: 0o777 })
        }
        other => panic!("a writer attached: {:?}", other.err()),
    }
}

#[test]
fn a_device_reached_through_a_symlink_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    make(&real);
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let (path, p) = problem(Reader::open(&link));
    assert_eq!((path, p), (link.clone(), Problem::Symlink));
    cli_refuses_then_accepts(
        &link,
        "link: not a usable ttrace device: is a symbolic link",
    );
    // A writer neither attaches through it nor creates a device behind it.
    assert!(ttrace_core::Writer::open(&ttrace_tests::config(&link, 64, 2)).is_err());
    let dangling = tmp.path().join("dangling");
    std::os::unix::fs::symlink(tmp.path().join("nowhere"), &dangling).unwrap();
    assert!(ttrace_core::Writer::open(&ttrace_tests::config(&dangling, 64, 2)).is_err());
    assert!(
        !tmp.path().join("nowhere").exists(),
        "nothing was created behind the link"
    );
}

#[test]
fn a_file_of_the_device_replaced_by_a_symlink_is_refused_even_when_trusting_any_owner() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    make(&dir);
    std::fs::rename(dir.join("cpu1"), tmp.path().join("elsewhere")).unwrap();
    std::os::unix::fs::symlink(tmp.path().join("elsewhere"), dir.join("cpu1")).unwrap();
    for trust in [Trust::Own, Trust::Any] {
        let (path, p) = problem(Reader::open_with(&dir, trust));
        assert_eq!((path, p), (dir.join("cpu1"), Problem::Symlink));
    }
}

#[test]
fn a_device_of_another_user_is_refused() {
    // SAFETY: geteuid has no arguments and no memory effects.
    let me = unsafe { libc::geteuid() };
    let tmp = tempfile::tempdir().unwrap();
    if me == 0 {
        // Root can give a device away: it is then another user's.
        let dir = tmp.path().join("dev");
        make(&dir);
        std::os::unix::fs::chown(&dir, Some(4242), None).unwrap();
        let (path, p) = problem(Reader::open(&dir));
        assert_eq!(
            (path, p),
            (
                dir.clone(),
                Problem::Owner {
                    owner: 4242,
                    user: 0
                }
            )
        );
        cli_refuses_then_accepts(&dir, "is owned by uid 4242, not by this user (uid 0)");
    } else {
        // Anyone else finds a directory of root's that holds no device: that is said first,
        // before whom it belongs to.
        assert!(matches!(Reader::open("/"), Err(Error::NotADevice(p)) if p == Path::new("/")));
    }
}
