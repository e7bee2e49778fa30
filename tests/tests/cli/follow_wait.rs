//! A reader started before the program it reads: `follow --wait` waits for the device and
//! follows each device created at its path in turn, and `ctl` sets rules on a device no
//! program has created yet (it creates it).

use std::path::Path;
use std::time::Duration;
use ttrace_tests::cli::Running;
use ttrace_tests::{env_writer, reader};

/// How long a line may take before the test gives up (a bound on failure, not a way to
/// order anything: every step waits for the line that says it happened).
const PATIENCE: Duration = Duration::from_secs(60);

/// Runs the environment-configured writer on `dir`, with its arguments (`x=N`,
/// `info=TEXT`), to its end: its pid.
fn run_writer(dir: &Path, args: &[&str]) -> u32 {
    env_writer!(dir).args(args).succeeds().pid
}

/// A running `follow --wait` of `dir`, with `args`.
fn follow(dir: &Path, args: &[&str]) -> Running {
    reader!("follow", dir).args(args).start()
}

#[test]
fn follow_wait_prints_the_events_of_a_program_started_after_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");

    // Without --wait, a missing device is still the one-line error.
    let out = reader!("follow", &dir).run();
    assert_eq!(out.status.code(), Some(1));
    let err = out.stderr;
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no ttrace device here"), "{err}");

    let mut f = follow(&dir, &["--wait", "--interval-ms", "5"]);
    let waiting = f.until("the waiting line", PATIENCE, |l| l.starts_with('#'));
    assert_eq!(
        waiting,
        format!(
            "# waiting for {} to be created (follow --wait)",
            dir.display()
        )
    );
    let pid = run_writer(&dir, &["x=1", "info=hello"]);
    f.until("the following line", PATIENCE, |l| {
        l.starts_with("# following ")
    });
    // Everything the new device holds, from its start: the program ran and exited before
    // the follower may even have opened the device.
    let mut want = vec!["env_point(n=7)", "x_point(n=1)", "info(\"hello\")"];
    while !want.is_empty() {
        let line = f.until("the writer's events", PATIENCE, |l| !l.starts_with('#'));
        assert!(line.contains(&format!(" {pid}/")), "{line}");
        // A message takes its time before it commits: one that committed after the
        // follower read past its time is printed all the same, marked late.
        let line = line.trim_end_matches(" (late)");
        want.retain(|w| !line.ends_with(w));
    }
    assert!(f.seen.iter().all(|l| !l.contains("lost")), "{:#?}", f.seen);
}

#[test]
fn follow_wait_follows_a_device_removed_and_created_again() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    run_writer(&dir, &["x=1"]);

    let mut f = follow(&dir, &["--wait", "--interval-ms", "5"]);
    f.until("the following line", PATIENCE, |l| {
        l.starts_with("# following ")
    });
    // The device exists: only what is written from now on is followed.
    run_writer(&dir, &["x=2"]);
    f.until("x_point(n=2)", PATIENCE, |l| l.ends_with("x_point(n=2)"));

    std::fs::remove_dir_all(&dir).unwrap();
    let pid = run_writer(&dir, &["x=3"]);
    let replaced = f.until("the replaced line", PATIENCE, |l| {
        l.contains(" was replaced ")
    });
    let prefix = format!("# device {} was replaced (created 20", dir.display());
    assert!(replaced.starts_with(&prefix), "{replaced}");
    assert!(
        replaced.ends_with(&format!(" by pid {pid}); following the new one")),
        "{replaced}"
    );
    let mut want = vec!["env_point(n=7)", "x_point(n=3)"];
    while !want.is_empty() {
        let line = f.until("the new device's events", PATIENCE, |l| !l.starts_with('#'));
        assert!(line.contains(&format!(" {pid}/")), "{line}");
        // A message takes its time before it commits: one that committed after the
        // follower read past its time is printed all the same, marked late.
        let line = line.trim_end_matches(" (late)");
        want.retain(|w| !line.ends_with(w));
    }
    assert!(
        !f.seen.iter().any(|l| l.ends_with("x_point(n=1)")),
        "{:#?}",
        f.seen
    );
}

#[test]
fn ctl_on_a_missing_device_creates_it_and_a_later_program_obeys() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let d = dir.to_str().unwrap();

    // A malformed command creates nothing.
    let out = reader!("ctl", d, "disable").run();
    assert_eq!(out.status.code(), Some(1));
    assert!(!dir.exists());

    let out = reader!("ctl", d, "disable", "x*").run();
    let err = out.stderr;
    assert!(out.status.success(), "{err}");
    let created: Vec<&str> = err.lines().filter(|l| l.contains("created it")).collect();
    assert_eq!(created.len(), 1, "{err}");
    assert!(
        created[0].starts_with(&format!(
            "ttrace-reader: ctl: no device at {d}: created it ("
        )),
        "{err}"
    );
    assert!(out.stdout.contains("\ndisable x*\n"));
    assert!(dir.join("header").exists());

    // A program started afterwards opens that device (its sizes are the defaults it would
    // have used) and records only what the rule lets through.
    run_writer(&dir, &["x=1", "x=2"]);
    let out = reader!("dump", d).run();
    assert!(out.status.success());
    let dump = out.stdout;
    assert!(
        dump.lines().any(|l| l.ends_with("env_point(n=7)")),
        "{dump}"
    );
    assert!(!dump.contains("x_point"), "{dump}");

    // A second ctl finds the device there: it says nothing about creating it.
    let out = reader!("ctl", d, "enable", "x*").run();
    assert!(out.status.success());
    let err = out.stderr;
    assert!(err.is_empty(), "{err}");
}
