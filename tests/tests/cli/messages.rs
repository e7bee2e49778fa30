//! What the reader says when it is asked for something it cannot do, or given a name it does
//! not know (issue 26): each message says what is wrong and what to do, in the user's words;
//! a mistyped name fails naming the known ones. And the outputs `-o` takes as the README
//! says: `-` and `/dev/stdout` for a snapshot too, never a missing directory made up.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;
use ttrace_tests::reader;

/// How long a command that must end by itself may take before the test fails (a bound on a
/// failure, not a way to order anything).
const PATIENCE: Duration = Duration::from_secs(60);

/// A device written by the demo workload.
fn device(tmp: &Path) -> PathBuf {
    let dir = tmp.join("dev");
    reader!("demo", "--device", &dir)
        .args(["--threads", "2", "--requests", "10"])
        .ok();
    dir
}

/// A snapshot of `dir` in `tmp`.
fn snapshot(tmp: &Path, dir: &Path) -> PathBuf {
    let file = tmp.join("app.ttrace");
    reader!("snapshot", dir, "-o", &file).ok();
    file
}

/// The event lines of a dump (its `#` lines left out).
fn events(dump: &str) -> Vec<&str> {
    dump.lines().filter(|l| !l.starts_with('#')).collect()
}

#[test]
fn clear_and_ctl_on_a_snapshot_file_say_that_it_never_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = device(tmp.path());
    let snap = snapshot(tmp.path(), &dir);
    let err = reader!("clear", &snap).fails();
    assert_eq!(
        err,
        format!(
            "ttrace-reader: {}: a snapshot file cannot be cleared: it never changes (clear the \
             device it was taken from)\n",
            snap.display()
        )
    );
    let err = reader!("ctl", &snap, "disable", "file_*").fails();
    assert_eq!(
        err,
        format!(
            "ttrace-reader: {}: a snapshot file cannot be controlled: it never changes (run ctl \
             on the device it was taken from)\n",
            snap.display()
        )
    );
    // Its control state still shows.
    assert!(reader!("ctl", &snap).ok().starts_with("setmask "));
    // A file that is no snapshot is no device.
    let notes = tmp.path().join("notes.txt");
    std::fs::write(&notes, "not a trace\n").unwrap();
    let err = reader!("clear", &notes).fails();
    assert!(err.contains("no ttrace device here"), "{err}");
}

#[test]
fn ctl_reset_with_an_argument_says_that_reset_takes_none() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = device(tmp.path());
    reader!("ctl", &dir, "disable", "file_*").ok();
    let before = reader!("ctl", &dir).ok();
    let err = reader!("ctl", &dir, "reset", "now").fails();
    assert_eq!(
        err,
        "ttrace-reader: ctl: bad control command: `reset` takes no arguments (given: now)\n"
    );
    assert_eq!(reader!("ctl", &dir).ok(), before, "nothing changed");
}

#[test]
fn follow_wait_on_something_that_is_no_device_fails_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("notes.txt");
    std::fs::write(&file, "not a trace\n").unwrap();
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    for (path, what) in [
        (&file, "a file that is no snapshot"),
        (&empty, "a directory with no `header` file"),
    ] {
        let err = reader!("follow", "--wait", path).within(PATIENCE).fails();
        assert_eq!(
            err,
            format!(
                "ttrace-reader: {}: not a ttrace device ({what}); follow --wait waits only where \
                 nothing is yet\n",
                path.display()
            )
        );
    }
}

#[test]
fn follow_of_a_snapshot_file_prints_what_it_holds_and_ends() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = device(tmp.path());
    let snap = snapshot(tmp.path(), &dir);
    let dump = reader!("dump", &snap).ok();
    for wait in [&[][..], &["--wait"]] {
        let out = reader!("follow", &snap)
            .args(wait)
            .within(PATIENCE)
            .succeeds();
        assert_eq!(out.stdout, dump, "{wait:?}");
        assert_eq!(
            out.stderr,
            format!(
                "ttrace-reader: follow: {} is a snapshot file, which never changes: printed what \
                 it holds, as dump does\n",
                snap.display()
            )
        );
    }
    // The options that choose events apply.
    let out = reader!("follow", &snap, "--filter", "file_*", "--limit", "3")
        .within(PATIENCE)
        .ok();
    let filtered = reader!("dump", &snap, "--filter", "file_*").ok();
    assert_eq!(events(&out), events(&filtered)[..3]);
}

#[test]
fn follow_refuses_an_interval_of_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = device(tmp.path());
    for wait in [&[][..], &["--wait"]] {
        let err = reader!("follow", &dir, "--interval-ms", "0")
            .args(wait)
            .within(PATIENCE)
            .fails();
        assert_eq!(
            err,
            "ttrace-reader: follow --interval-ms 0: give at least 1 (the milliseconds between \
             two polls)\n"
        );
    }
}

#[test]
fn report_names_the_pairs_and_arguments_it_knows_when_given_others() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = device(tmp.path());
    let d = dir.to_str().unwrap();
    // The demo's pairs: file_read .. file_read_done (entry/exit), request_start ..
    // request_done (start/stop); latency_histogram is a start no stop closes.
    for name in ["nosuch", "file_read_done", "latency_histogram"] {
        let err = reader!("report", d, "--histogram", name).fails();
        assert_eq!(
            err,
            format!(
                "ttrace-reader: report --histogram {name}: no pair of this name; the pairs are \
                 file_read, request_start\n"
            )
        );
    }
    assert!(reader!("report", d, "--histogram", "file_read")
        .ok()
        .contains("# file_read: "));
    for by in ["nosuch", "arg:nosuch", "threads"] {
        let err = reader!("report", d, "--by", by).fails();
        assert_eq!(
            err,
            format!(
                "ttrace-reader: report --by {}: no pair's entry (or start) has an argument of \
                 this name; --by takes thread, process, cpu, or an argument: fd, id, offset, \
                 path, size\n",
                by.trim_start_matches("arg:")
            )
        );
    }
    for by in ["thread", "process", "cpu", "size", "arg:path"] {
        reader!("report", d, "--by", by).ok();
    }
}

#[test]
fn a_filter_that_matches_no_tracepoint_says_so_and_names_some() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = device(tmp.path());
    let note = "ttrace-reader: note: --filter nomatch matches no tracepoint of this device (nor \
                `info`, its messages); it has file_read, file_read_done, latency_histogram, \
                request_done, request_start\n";
    for cmd in [&["dump"][..], &["report"], &["report", "--json"]] {
        let out = reader!()
            .args(cmd)
            .arg(&dir)
            .args(["--filter", "nomatch"])
            .succeeds();
        assert_eq!(out.stderr, note, "{cmd:?}");
        if cmd == ["dump"] {
            assert!(events(&out.stdout).is_empty());
        }
    }
    for pattern in ["file_*", "info", "*"] {
        let out = reader!("dump", &dir, "--filter", pattern).succeeds();
        assert_eq!(out.stderr, "", "{pattern}");
        assert!(!events(&out.stdout).is_empty(), "{pattern}");
    }
}

/// A child killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn an_interrupted_demo_removes_its_temporary_device() {
    use std::os::unix::process::ExitStatusExt;
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let tmp = tempfile::tempdir().unwrap();
        let mut demo = Killed(
            reader!("demo", "--forever")
                .env("TMPDIR", tmp.path())
                .command()
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        // Its first line says where it records; it is printed once it would clean up.
        let stderr = BufReader::new(demo.0.stderr.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let line = rx
            .recv_timeout(PATIENCE)
            .expect("demo --forever said nothing about where it records");
        let at = line
            .strip_prefix("ttrace-reader: demo: recording into ")
            .and_then(|l| l.strip_suffix(" until interrupted (Ctrl-C)"))
            .unwrap_or_else(|| panic!("{line}"));
        assert!(Path::new(at).starts_with(tmp.path()), "{at}");
        assert!(Path::new(at).join("header").exists(), "{at}");
        // SAFETY: kill only sends a signal, to our own child.
        unsafe { libc::kill(demo.0.id() as i32, signal) };
        let status = demo.0.wait().unwrap();
        assert_eq!(status.signal(), Some(signal), "{status}");
        let left: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(left.is_empty(), "signal {signal}: left {left:?}");
    }
}

#[test]
fn snapshot_to_standard_output_writes_the_snapshot_there() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = device(tmp.path());
    let want = reader!("dump", snapshot(tmp.path(), &dir)).ok();
    for output in ["-", "/dev/stdout"] {
        let out = reader!("snapshot", &dir, "-o", output)
            .current_dir(tmp.path())
            .command()
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(out.status.success(), "{output}: {err}");
        // What it says goes to standard error, out of the snapshot's way.
        assert!(err.starts_with(&format!("{output}: ")), "{output}: {err}");
        assert_eq!(err.lines().count(), 1, "{output}: {err}");
        assert!(!tmp.path().join("-").exists(), "{output}: a file named -");
        let file = tmp.path().join("from-stdout.ttrace");
        std::fs::write(&file, &out.stdout).unwrap();
        let dump = reader!("dump", &file).ok();
        assert_eq!(events(&dump), events(&want), "{output}");
        std::fs::remove_file(&file).unwrap();
    }
    // A closed pipe ends it quietly, as for export.
    for output in ["-", "/dev/stdout"] {
        let (read, write) = std::io::pipe().unwrap();
        drop(read);
        let out = reader!("snapshot", &dir, "-o", output)
            .command()
            .stdout(write)
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(out.status.success(), "{output}: {err}");
        assert_eq!(err, "", "{output}");
    }
}

#[test]
fn an_output_in_a_missing_directory_is_refused_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = device(tmp.path());
    let d = dir.to_str().unwrap();
    let missing = tmp.path().join("missing").join("dir");
    let x = missing.join("x");
    for cmd in [
        &["snapshot", d][..],
        &["export", "--format", "chrome", d],
        &["export", "--format", "ctf", d],
        &["export", "--format", "uftrace", d],
    ] {
        let err = reader!().args(cmd).arg("-o").arg(&x).fails();
        assert_eq!(
            err,
            format!(
                "ttrace-reader: {}: no such directory (to write {} in); create it first\n",
                missing.display(),
                x.display()
            ),
            "{cmd:?}"
        );
        assert!(!tmp.path().join("missing").exists(), "{cmd:?} made it");
    }
}
