//! What a new user trips on (issue 16): times given back to `--since`/`--until`, mistyped
//! `ctl` commands, errors that name what the user gave, and one policy for output paths.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use ttrace_tests::reader;

/// Runs and expects exit status 1 and one line on standard error, which names the reader:
/// that line.
fn fails(args: &[&str]) -> String {
    let err = reader!().args(args).fails();
    assert!(err.starts_with("ttrace-reader: "), "{err}");
    err
}

/// A device written by the demo workload.
fn device(tmp: &Path) -> PathBuf {
    let dir = tmp.join("dev");
    reader!("demo", "--device", &dir)
        .args(["--threads", "2", "--requests", "10"])
        .ok();
    dir
}

/// The event lines of a dump, split into (time column, the rest).
fn events(dump: &str) -> Vec<(String, String)> {
    dump.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (time, rest) = l.trim_start().split_once(' ').unwrap();
            (time.to_string(), rest.to_string())
        })
        .collect()
}

/// Nanoseconds of a time column as `dump` prints it (`12.000345678`).
fn ns(time: &str) -> i64 {
    let (s, f) = time.split_once('.').unwrap();
    s.parse::<i64>().unwrap() * 1_000_000_000 + f.parse::<i64>().unwrap()
}

#[test]
fn since_and_until_take_the_times_dump_prints_utc_times_and_spans_before_the_end() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = device(tmp.path());
    let d = dir.to_str().unwrap();
    let all = events(&reader!("dump", d).ok());
    let wall = events(&reader!("dump", d, "--utc").ok());
    assert_eq!(all.len(), wall.len());
    assert!(all.len() > 20, "{}", all.len());
    // Different events at distinct times, so that a cut shows which side each falls on.
    let k = (all.len() / 3..all.len())
        .find(|&k| all[k - 1].0 != all[k].0)
        .unwrap();
    let (rel_k, utc_k) = (&all[k].0, &wall[k].0);
    let from_k: Vec<_> = all.iter().filter(|e| ns(&e.0) >= ns(rel_k)).collect();
    let to_k: Vec<_> = all.iter().filter(|e| ns(&e.0) <= ns(rel_k)).collect();
    assert!(from_k.len() < all.len() && to_k.len() < all.len());

    // A UTC time printed by `dump --utc`, given back, selects from that event on.
    let since_utc = events(&reader!("dump", d, "--since", utc_k).ok());
    assert_eq!(since_utc.iter().collect::<Vec<_>>(), from_k);
    assert_eq!(since_utc[0].1, all[k].1);
    // So does the relative time of the same event, and `--utc` output stays in UTC.
    assert_eq!(
        events(&reader!("dump", d, "--since", rel_k).ok()),
        since_utc
    );
    let utc_from_k = events(&reader!("dump", d, "--utc", "--since", rel_k).ok());
    assert_eq!(utc_from_k[0].0, *utc_k);
    assert_eq!(utc_from_k.len(), from_k.len());

    // --until keeps events up to and including that time, in either form.
    let until = events(&reader!("dump", d, "--until", rel_k).ok());
    assert_eq!(until.iter().collect::<Vec<_>>(), to_k);
    assert_eq!(events(&reader!("dump", d, "--until", utc_k).ok()), until);
    // Both: exactly the events at that time.
    let at_k = events(&reader!("dump", d, "--since", utc_k, "--until", rel_k).ok());
    assert!(
        !at_k.is_empty() && at_k.iter().all(|e| e.0 == *rel_k),
        "{at_k:?}"
    );

    // A span before the newest event: the last ten seconds are all of this short trace; a
    // span that reaches back exactly to event k starts there.
    assert_eq!(events(&reader!("dump", d, "--since", "-10s").ok()), all);
    let back = ns(&all.last().unwrap().0) - ns(rel_k);
    let span = format!("-{back}ns");
    assert_eq!(
        events(&reader!("dump", d, "--since", &span).ok()),
        since_utc
    );
    let secs = format!("-{}.{:09}", back / 1_000_000_000, back % 1_000_000_000);
    assert_eq!(
        events(&reader!("dump", d, "--since", &secs).ok()),
        since_utc
    );
    assert!(events(&reader!("dump", d, "--until", "-10s").ok()).is_empty());

    // The other commands that take them.
    let report = reader!("report", d, "--since", utc_k, "--until", "-0s", "--json").ok();
    assert!(report.starts_with('{'), "{report}");
    let chrome = reader!("export", "--format", "chrome", d, "-o", "-", "--since", rel_k).ok();
    let json: serde_json::Value = serde_json::from_str(&chrome).unwrap();
    let whole: serde_json::Value =
        serde_json::from_str(&reader!("export", "--format", "chrome", d, "-o", "-").ok()).unwrap();
    let count = |v: &serde_json::Value| v["traceEvents"].as_array().unwrap().len();
    assert!(count(&json) < count(&whole), "--since cut the export");

    // A malformed time is one line and a failure, on each command.
    for bad in [
        "yesterday",
        "12x",
        "1.2.3",
        "-",
        "--5s",
        "2026-13-01T00:00:00Z",
        "2026-11-22T15:47",
        "2026-11-22T15:47:37.581+01:00",
    ] {
        for (cmd, flag) in [
            ("dump", "--since"),
            ("dump", "--until"),
            ("report", "--since"),
        ] {
            let err = fails(&[cmd, d, flag, bad]);
            assert!(
                err.contains(&format!("{flag} {bad:?}: not a time")),
                "{err}"
            );
        }
        let err = fails(&["export", "--format", "chrome", d, "-o", "-", "--until", bad]);
        assert!(err.contains("not a time"), "{err}");
    }
}

#[test]
fn a_mistyped_ctl_command_is_called_one_and_the_commands_are_listed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = device(tmp.path());
    let in_tmp = |args: &[&str]| reader!().args(args).current_dir(tmp.path()).run();
    let commands = "level, setmask, setbits, clrbits, enable, disable, on, off, reset";
    for args in [
        &["ctl", "disabel", "file_*"][..],
        &["ctl", "dev", "disabel", "file_*"],
    ] {
        let out = in_tmp(args);
        let err = out.stderr;
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert_eq!(
            err,
            format!(
                "ttrace-reader: ctl: `disabel` is not a command (did you mean `disable`?); \
                 the commands are {commands}\n"
            )
        );
    }
    let err = fails(&["ctl", "frobnicate"]);
    assert!(
        err.contains("`frobnicate` is not a command; the commands are"),
        "{err}"
    );
    // A word that names a directory here is a device, as before; one with a slash too.
    assert!(in_tmp(&["ctl", "dev"]).status.success());
    reader!("ctl", &dir, "disable", "file_*").ok();
    assert!(reader!("ctl", &dir).ok().contains("disable file_*"));
    let err = fails(&["ctl", tmp.path().join("nodev").to_str().unwrap()]);
    assert!(err.contains("nodev: no ttrace device here"), "{err}");
}

#[test]
fn errors_name_what_the_user_gave() {
    let tmp = tempfile::tempdir().unwrap();

    // A device whose parent is missing: named as given, not by a temporary name.
    let want = tmp.path().join("missing").join("dev");
    let err = fails(&["demo", "--device", want.to_str().unwrap()]);
    assert_eq!(
        err,
        format!(
            "ttrace-reader: {}: No such file or directory (os error 2)\n",
            want.display()
        )
    );

    // A directory that is no device says so first, before whom it belongs to.
    let err = fails(&["dump", "/tmp"]);
    assert_eq!(
        err,
        "ttrace-reader: /tmp: not a ttrace device (this directory has no `header` file)\n"
    );
    let open = tmp.path().join("open");
    std::fs::create_dir(&open).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    for cmd in ["dump", "stats", "ctl", "report"] {
        let err = fails(&[cmd, open.to_str().unwrap()]);
        assert!(err.contains("open: not a ttrace device"), "{cmd}: {err}");
    }

    // A device refused for whom it belongs to names the option that opens it.
    let dir = device(tmp.path());
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o770)).unwrap();
    let err = fails(&["dump", dir.to_str().unwrap()]);
    assert!(
        err.contains("is writable by group or others") && err.contains("--any-owner"),
        "{err}"
    );
    reader!("dump", "--any-owner", &dir).ok();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();

    // A cut snapshot is a snapshot.
    let snap = tmp.path().join("app.ttrace");
    reader!("snapshot", &dir, "-o", &snap).ok();
    let len = std::fs::metadata(&snap).unwrap().len();
    ttrace_tests::set_len(&snap, len / 2);
    let err = fails(&["dump", snap.to_str().unwrap()]);
    assert_eq!(
        err,
        format!(
            "ttrace-reader: {}: not a usable ttrace snapshot: is {} bytes, expected {len}\n",
            snap.display(),
            len / 2
        )
    );
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn every_output_is_refused_where_something_is_unless_forced_and_then_replaced_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = device(tmp.path());
    let d = dir.to_str().unwrap();
    let out = tmp.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let cases: [(&str, &[&str], &str); 4] = [
        ("app.ttrace", &["snapshot", d], "header"),
        (
            "trace.json",
            &["export", "--format", "chrome", d],
            "traceEvents",
        ),
        ("trace.ctf", &["export", "--format", "ctf", d], "metadata"),
        (
            "uftrace.data",
            &["export", "--format", "uftrace", d],
            "info",
        ),
    ];
    for (name, cmd, _) in &cases {
        let path = out.join(name);
        let p = path.to_str().unwrap();
        reader!().args(*cmd).args(["-o", p]).ok();
        let first = std::fs::metadata(&path).unwrap().modified().unwrap();
        let err = fails(&[*cmd, &["-o", p][..]].concat());
        assert_eq!(
            err,
            format!("ttrace-reader: {p}: exists (--force replaces it)\n"),
            "{name}"
        );
        assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), first);
        reader!().args(*cmd).args(["-o", p, "--force"]).ok();
    }
    // Replaced whole, readable, no temporary left behind.
    assert_eq!(
        names(&out),
        ["app.ttrace", "trace.ctf", "trace.json", "uftrace.data"]
    );
    assert!(reader!("dump", out.join("app.ttrace").to_str().unwrap())
        .ok()
        .contains("request_start"));
    let json = std::fs::read_to_string(out.join("trace.json")).unwrap();
    assert!(serde_json::from_str::<serde_json::Value>(&json).is_ok());
    assert!(names(&out.join("trace.ctf")).contains(&"metadata".to_string()));
    assert!(names(&out.join("uftrace.data")).contains(&"info".to_string()));

    // A directory that is no earlier export is not replaced, even when forced.
    let precious = tmp.path().join("precious");
    std::fs::create_dir(&precious).unwrap();
    std::fs::write(precious.join("notes.txt"), "mine").unwrap();
    for format in ["ctf", "uftrace"] {
        let err = fails(&[
            "export",
            "--format",
            format,
            d,
            "-o",
            precious.to_str().unwrap(),
            "--force",
        ]);
        assert!(err.contains("replaces only an earlier export"), "{err}");
    }
    assert_eq!(names(&precious), ["notes.txt"]);
    assert_eq!(names(tmp.path()), ["dev", "out", "precious"]);
    // An empty directory counts as nothing there.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    reader!("export", "--format", "ctf", d, "-o", &empty).ok();
    assert!(empty.join("metadata").exists());
}

#[test]
fn output_to_dev_stdout_on_a_closed_pipe_ends_quietly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = device(tmp.path());
    for output in ["/dev/stdout", "-"] {
        // A pipe whose reader is gone before the command writes: every write fails EPIPE.
        let (read, write) = std::io::pipe().unwrap();
        drop(read);
        let out = reader!("export", "--format", "chrome", &dir, "-o", output)
            .command()
            .stdout(write)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(out.status.success(), "{output}: {err}");
        assert_eq!(err, "", "{output}");
    }
    // Given an open pipe, it is all there.
    let out = reader!("export", "--format", "chrome", &dir, "-o", "/dev/stdout").ok();
    assert!(serde_json::from_str::<serde_json::Value>(&out).is_ok());
    // A snapshot goes there too, whole (see messages.rs).
    let out = reader!("snapshot", &dir, "-o", "/dev/stdout")
        .command()
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(out.stdout.len() > 4096, "{} bytes", out.stdout.len());
}
