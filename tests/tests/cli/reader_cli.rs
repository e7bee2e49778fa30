//! The `ttrace-reader` binary run as a user runs it, on devices written by other processes.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::Stdio;
use ttrace_tests::{edit, reader, test_app};

/// Runs the test application on `dir`: its pid and the lines it says it recorded, as
/// `(thread name, text)`.
fn run_app(dir: &Path, rounds: u64) -> (u32, Vec<(String, String)>) {
    let out = test_app!(dir, rounds).succeeds();
    let expected = out
        .stdout
        .lines()
        .map(|l| {
            let (name, rest) = l.split_once(' ').unwrap();
            (name.to_string(), rest.to_string())
        })
        .collect();
    (out.pid, expected)
}

/// One event line of a dump.
#[derive(Debug)]
struct Line {
    ns: i64,
    cpu: u32,
    pid: u32,
    tid: u32,
    thread: String,
    text: String,
}

fn parse_line(l: &str) -> Line {
    let mut f = l.split_whitespace();
    let time = f.next().unwrap();
    let (s, frac) = time.split_once('.').unwrap();
    assert_eq!(frac.len(), 9, "{l}");
    let ns = s.parse::<i64>().unwrap() * 1_000_000_000 + frac.parse::<i64>().unwrap();
    let cpu = f
        .next()
        .unwrap()
        .strip_prefix("cpu")
        .unwrap()
        .parse()
        .unwrap();
    let (pid, tid) = f.next().unwrap().split_once('/').unwrap();
    let rest = l.split_once(&format!(" {pid}/{tid} (")).unwrap().1;
    let (thread, text) = rest.split_once(") ").unwrap();
    Line {
        ns,
        cpu,
        pid: pid.parse().unwrap(),
        tid: tid.parse().unwrap(),
        thread: thread.to_string(),
        text: text.to_string(),
    }
}

/// The lines of the rings of a device of two CPUs as a footer (`prefix` `"# "`) or `stats`
/// (`""`) shows them, checked to be: a line for each restartable ring (`cpu0`, `cpu1`; only
/// `cpu<c>`'s with `only` `c`), then one for each shared ring written (of those CPUs). Their
/// events counts, with the lines.
fn ring_lines<'a, S: AsRef<str>>(
    lines: &'a [S],
    prefix: &str,
    only: Option<u32>,
) -> Vec<(u64, &'a str)> {
    let cpus: Vec<u32> = only.map_or(vec![0, 1], |c| vec![c]);
    let mut shared = cpus.iter();
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let l = l.as_ref();
            let name = match cpus.get(i) {
                Some(c) => format!("{prefix}cpu{c}: "),
                None => match shared.find(|&&c| l.starts_with(&format!("{prefix}cpu{c}.shared: ")))
                {
                    Some(c) => format!("{prefix}cpu{c}.shared: "),
                    None => panic!(
                        "not a ring's line, in the order expected: {l:?} in {:?}",
                        lines.iter().map(AsRef::as_ref).collect::<Vec<_>>()
                    ),
                },
            };
            assert!(l.starts_with(&name), "{l:?} is not {name:?}...");
            let n = l[name.len()..].split(' ').next().unwrap().parse().unwrap();
            (n, l)
        })
        .collect()
}

/// The event lines and the comment lines of a dump.
fn dump_lines(out: &str) -> (Vec<Line>, Vec<&str>) {
    let (comments, events): (Vec<&str>, Vec<&str>) = out.lines().partition(|l| l.starts_with('#'));
    (events.into_iter().map(parse_line).collect(), comments)
}

fn dump(args: &[&str]) -> (Vec<Line>, Vec<String>) {
    let out = reader!("dump").args(args).run();
    assert!(out.status.success(), "{}", out.stderr);
    let s = out.stdout;
    let (events, comments) = dump_lines(&s);
    (events, comments.into_iter().map(String::from).collect())
}

#[test]
fn dump_shows_what_another_process_wrote_line_by_line_in_time_order() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let (pid, expected) = run_app(&dir, 60);
    let (lines, comments) = dump(&[dir.to_str().unwrap()]);

    assert!(comments[0].starts_with(&format!("# ttrace {}: 2 cpus x 4096 slots", dir.display())));
    assert!(
        comments[0].ends_with(&format!("by pid {pid}; written by {pid} (ttrace-test-app)")),
        "{}",
        comments[0]
    );
    // The footer: a line per ring (each restartable one, `cpu0` and `cpu1`, then each shared
    // one written), the aux buffers' line and the totals' line.
    let footer: Vec<&String> = comments[1..].iter().collect();
    let rings = ring_lines(&footer[..footer.len() - 2], "# ", None);
    assert!(footer[rings.len()].starts_with("# aux: "), "{footer:?}");
    for (_, f) in &rings {
        assert!(
            f.contains(" 0 entries lost, 0 incomplete, 0 events dropped"),
            "{f}"
        );
    }
    // Each ring counts the events it shows, and the application's CPUs wrote one ring each.
    let pair = ttrace_tests::cpu_pair();
    let written: Vec<u64> = rings.iter().map(|(n, _)| *n).filter(|&n| n > 0).collect();
    assert_eq!(
        written.iter().sum::<u64>(),
        lines.len() as u64,
        "{footer:?}"
    );
    assert_eq!(
        written.len(),
        if pair[0] == pair[1] { 1 } else { 2 },
        "the application on CPUs {pair:?}: {footer:?}"
    );
    // The last line counts the lines printed.
    assert_eq!(
        *footer[rings.len() + 1],
        format!(
            "# {} events ({} trace points, 0 messages); 0 entries lost, 0 events dropped, 0 strings lost",
            lines.len(),
            lines.len()
        )
    );

    // Every event the application recorded, as it says it recorded it; nothing else.
    assert_eq!(lines.len(), expected.len());
    let mut per_thread: HashMap<&str, Vec<&str>> = HashMap::new();
    for l in &lines {
        assert_eq!(l.pid, pid);
        assert!(pair.contains(&(l.cpu as usize)), "{l:?}: not on {pair:?}");
        per_thread.entry(&l.thread).or_default().push(&l.text);
    }
    let mut want: HashMap<&str, Vec<&str>> = HashMap::new();
    for (name, t) in &expected {
        want.entry(name).or_default().push(t);
    }
    // Same events, same order within each thread (continuations, strings, hex, signed).
    assert_eq!(per_thread, want);
    // One tid per thread name.
    let mut tids: HashMap<&str, u32> = HashMap::new();
    for l in &lines {
        assert_eq!(*tids.entry(&l.thread).or_insert(l.tid), l.tid, "{l:?}");
    }
    assert_eq!(tids.len(), 3);

    // Merged order: time never goes back, and the ping-pong (alternating between two
    // threads, on two CPUs when there are two) comes out in its causal order.
    assert!(lines.windows(2).all(|w| w[0].ns <= w[1].ns));
    let seqs: Vec<u64> = lines
        .iter()
        .filter_map(|l| l.text.strip_prefix("pingpong(seq="))
        .map(|r| r.split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(seqs, (0..120).collect::<Vec<_>>());
}

#[test]
fn since_cpu_and_filter_narrow_the_dump() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    run_app(&dir, 20);
    let d = dir.to_str().unwrap();
    let (all, _) = dump(&[d]);

    let (wide, _) = dump(&[d, "--filter", "wi*"]);
    assert_eq!(wide.len(), 20);
    assert!(wide.iter().all(|l| l.text.starts_with("wide(a0=")));
    let (files, _) = dump(&[d, "--filter", "file_*"]);
    assert_eq!(files.len(), 40, "file_open and file_close");
    let (close, _) = dump(&[d, "--filter", "file_?????"]);
    assert_eq!(close.len(), 20, "file_close");

    // The application's threads are pinned, to an even CPU and an odd one where there are
    // both (`ttrace_tests::cpu_pair`): on its device of two CPUs, the events of an even CPU
    // are in a ring of CPU 0's, an odd one's in a ring of CPU 1's, one ring for each.
    let pair = ttrace_tests::cpu_pair();
    let mut by_cpu = Vec::new();
    for c in 0..2u32 {
        let (lines, comments) = dump(&[d, "--cpu", &c.to_string()]);
        assert!(lines.iter().all(|l| l.cpu % 2 == c), "--cpu {c}: {lines:?}");
        let footer: Vec<&String> = comments.iter().filter(|c| c.starts_with("# cpu")).collect();
        let rings = ring_lines(&footer, "# ", Some(c));
        let written = pair.iter().any(|&p| p % 2 == c as usize);
        assert_eq!(
            rings.iter().filter(|(n, _)| *n > 0).count(),
            written as usize,
            "--cpu {c} (the application on CPUs {pair:?}): {comments:?}"
        );
        assert_eq!(lines.is_empty(), !written, "--cpu {c}");
        by_cpu.push(lines);
    }
    let (both, _) = dump(&[d, "--cpu", "0,1"]);
    assert_eq!(by_cpu[0].len() + by_cpu[1].len(), all.len());
    assert_eq!(both.len(), all.len());

    // --since takes the time as the first column shows it, and keeps that event.
    let mid = &all[all.len() / 2];
    let since = format!("{}.{:09}", mid.ns / 1_000_000_000, mid.ns % 1_000_000_000);
    let (later, _) = dump(&[d, "--since", &since]);
    let expected: Vec<&str> = all
        .iter()
        .filter(|l| l.ns >= mid.ns)
        .map(|l| l.text.as_str())
        .collect();
    assert_eq!(
        later.iter().map(|l| l.text.as_str()).collect::<Vec<_>>(),
        expected
    );
    assert!(later.len() < all.len() && later.len() >= all.len() / 2 - 1);

    for bad in [&["--since", "soon"][..], &["--cpu", "7"], &["--cpu", "x"]] {
        let out = reader!("dump", d).args(bad).run();
        assert!(!out.status.success(), "{bad:?}");
        assert!(!out.stderr.is_empty());
    }
}

#[test]
fn follow_prints_the_events_a_process_writes_after_it_started() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    run_app(&dir, 5); // already in the device: follow must not print these
    let (_, first) = run_app(&dir, 0);
    assert!(first.is_empty());
    let mut follow = reader!("follow", &dir, "--limit", "90", "--interval-ms", "1")
        .command()
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(follow.stdout.take().unwrap()).lines();
    let header = lines.next().unwrap().unwrap();
    assert!(header.starts_with("# following "), "{header}");
    // The follower has taken its baseline: everything from here on is new.
    let (pid, expected) = run_app(&dir, 30);
    assert_eq!(expected.len(), 150);
    let got: Vec<String> = lines.map(|l| l.unwrap()).collect();
    assert!(follow.wait().unwrap().success());
    let events: Vec<Line> = got
        .iter()
        .filter(|l| !l.starts_with('#'))
        .map(|l| parse_line(l))
        .collect();
    assert_eq!(events.len(), 90, "stops at --limit");
    assert!(got.iter().all(|l| !l.contains("entries lost")), "{got:?}");
    // The footer: every position passed read or still held, none lost.
    let footer: Vec<&String> = got.iter().filter(|l| l.contains(" followed: ")).collect();
    assert!(!footer.is_empty(), "{got:?}");
    assert!(
        footer
            .iter()
            .all(|l| l.contains(" 0 lost, 0 given up, 0 damaged")),
        "{footer:?}"
    );
    assert_eq!(got.last().map(String::as_str), Some("# 90 events printed"));
    assert!(
        events.iter().all(|l| l.pid == pid),
        "only the new process's events"
    );
    // Each thread's events are a prefix-free, in-order subsequence of what it wrote, and
    // every event is one of them: nothing repeated, nothing invented.
    let mut next: HashMap<&str, usize> = HashMap::new();
    for e in &events {
        let mine: Vec<&(String, String)> =
            expected.iter().filter(|(n, _)| *n == e.thread).collect();
        let i = next.entry(&e.thread).or_insert(0);
        let pos = mine[*i..].iter().position(|(_, t)| *t == e.text);
        assert!(pos.is_some(), "{e:?} not expected next");
        *i += pos.unwrap() + 1;
    }
}

/// A change that turns off the tracepoints an installed snapshot rule reads says so (the
/// rule would match nothing, silently); one that leaves them on says nothing of the rule.
#[test]
fn ctl_says_when_a_change_turns_off_what_an_installed_rule_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let d = dir.to_str().unwrap();
    run_app(&dir, 1); // creates the device and registers its tracepoints
    reader!("ctl", d, "on", "event wide").ok();
    let out = reader!("ctl", d, "disable", "file_*").run();
    assert!(out.status.success());
    assert!(!out.stderr.contains("event wide"), "{}", out.stderr);
    // The class mask (as `level` sets it): every tracepoint of the app is in class 1.
    let out = reader!("ctl", d, "clrbits", "0x1").run();
    assert!(out.status.success());
    let note = out
        .stderr
        .lines()
        .find(|l| l.contains("`event wide`"))
        .unwrap_or_else(|| panic!("no note: {}", out.stderr));
    assert!(
        note.starts_with("ttrace-reader: ctl: note: `clrbits 0x1` turns off wide, "),
        "{note}"
    );
}

#[test]
fn ctl_changes_what_a_writer_records_and_rejects_bad_commands() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let d = dir.to_str().unwrap();
    run_app(&dir, 0); // creates the device and defines the tracepoints
    let out = reader!("ctl", d).run();
    assert!(out.status.success());
    assert_eq!(
        out.stdout,
        "setmask 0xffffffffffffffff 0xffffffffffffffff\n"
    );

    let out = reader!("ctl", d, "disable", "file_*").run();
    assert!(out.status.success());
    assert!(out.stdout.contains("disable file_*"));
    run_app(&dir, 10);
    let (lines, _) = dump(&[d]);
    assert_eq!(lines.len(), 30, "pingpong and wide only");
    assert!(lines.iter().all(|l| !l.text.starts_with("file_")));

    // The class mask: tracepoints are in class 1; clearing it stops everything.
    let out = reader!("ctl", d, "clrbits", "0x1").run();
    assert!(out.stdout.starts_with("setmask 0xfffffffffffffffe "));
    run_app(&dir, 10);
    assert_eq!(dump(&[d]).0.len(), 30, "nothing new was recorded");

    for bad in [
        &["ctl", d, "setbits"][..],
        &["ctl", d, "setbits", "zz"],
        &["ctl", d, "bogus", "1"],
        &["ctl", d, "setmask", "1"],
    ] {
        let out = reader!().args(bad).run();
        assert!(!out.status.success(), "{bad:?}");
        let err = out.stderr;
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("ttrace-reader: "), "{err}");
    }
    let out = reader!("ctl", d).run();
    assert_eq!(
        out.stdout, "setmask 0xfffffffffffffffe 0xffffffffffffffff\ndisable file_*\n",
        "rejected commands changed nothing"
    );

    assert!(reader!("ctl", d, "reset").run().status.success());
    run_app(&dir, 10);
    assert_eq!(dump(&[d]).0.len(), 30 + 50);
}

/// The positions written in all the rings of the device `dir` so far (0 before it exists).
fn written(dir: &Path) -> u64 {
    devttrace::Reader::open(dir).map_or(0, |d| {
        (0..d.cpus())
            .map(|r| d.ring(r).map_or(0, |ring| ring.head()))
            .sum()
    })
}

/// Sends `signal` to process `pid`.
fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill only sends a signal, to a child of this test that it has not reaped.
    let rc = unsafe { libc::kill(pid as libc::pid_t, signal) };
    assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
}

#[test]
fn the_trace_of_a_writer_killed_with_sigkill_is_still_dumped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let mut writer = reader!("demo", "--forever", "--device", &dir)
        .command()
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = writer.id();
    // Wait until the trace holds what is checked below: a good number of events, one of them
    // worker-0's `request_start`. Looked at with the writer stopped (SIGSTOP), so that it is
    // still so when the writer dies: it is killed there, stopped. Else it goes on, and is
    // looked at again once it wrote more. (Bounded: what only a hang exceeds.)
    let wanted = |events: &[Line]| {
        events.len() >= 200
            && events
                .iter()
                .any(|l| l.thread == "worker-0" && l.text.starts_with("request_start(id="))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let mut seen = 0;
    let looked = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "after {seen} positions written, no worker-0 request_start in 200 events or more"
        );
        if written(&dir) == seen {
            std::thread::yield_now();
            continue;
        }
        signal(pid, libc::SIGSTOP);
        let mut status = 0;
        // SAFETY: waitpid writes the status of our child `pid` to a valid int; WUNTRACED
        // reports its stop (it is reaped only by `wait` below).
        let rc = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::WUNTRACED) };
        assert!(
            rc == pid as libc::pid_t && libc::WIFSTOPPED(status),
            "the writer did not stop: {rc} {status:#x}"
        );
        seen = written(&dir);
        let looked = dump(&[dir.to_str().unwrap()]);
        if wanted(&looked.0) {
            break looked;
        }
        signal(pid, libc::SIGCONT);
    };
    writer.kill().unwrap(); // SIGKILL, stopped where it was looked at
    assert!(!writer.wait().unwrap().success());
    let (events, comments) = dump(&[dir.to_str().unwrap()]);
    assert_eq!(
        events.len(),
        looked.0.len(),
        "what it had written when it died"
    );
    assert!(wanted(&events), "{} events", events.len());
    assert!(events.windows(2).all(|w| w[0].ns <= w[1].ns));
    assert!(comments[comments.len() - 2].starts_with("# aux: "));
    assert!(comments
        .last()
        .unwrap()
        .starts_with(&format!("# {} events (", events.len())));
    // And it still reads the same afterwards: the files outlive the process.
    let again = reader!("stats", &dir).run();
    assert!(again.status.success());
}

type Damage = Box<dyn Fn(&Path)>;

#[test]
fn bad_devices_give_one_clear_line_and_a_failure_status() {
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("good");
    run_app(&good, 1);
    let copy = move |d: &Path| {
        std::fs::create_dir(d).unwrap();
        for f in std::fs::read_dir(&good).unwrap() {
            let f = f.unwrap();
            std::fs::copy(f.path(), d.join(f.file_name())).unwrap();
        }
    };
    let copy = std::rc::Rc::new(copy);
    let with = |f: Box<dyn Fn(&Path)>| -> Damage {
        let copy = copy.clone();
        Box::new(move |d: &Path| {
            copy(d);
            f(d)
        })
    };
    let cases: Vec<(&str, Damage, &str)> = vec![
        ("missing", Box::new(|_| {}), ": no ttrace device here"),
        (
            "a file, not a directory",
            Box::new(|d| std::fs::write(d, b"x").unwrap()),
            ": no ttrace device here",
        ),
        (
            "empty directory",
            Box::new(|d| std::fs::create_dir(d).unwrap()),
            ": not a ttrace device (this directory has no `header` file)",
        ),
        (
            "missing ring",
            with(Box::new(|d| std::fs::remove_file(d.join("cpu1")).unwrap())),
            "cpu1: not a usable ttrace device: missing",
        ),
        (
            "truncated header",
            with(Box::new(|d| ttrace_tests::set_len(&d.join("header"), 100))),
            "header: not a usable ttrace device: is 100 bytes, expected 4096",
        ),
        (
            "wrong magic",
            with(Box::new(|d| {
                edit(&d.join("header"), |h| h[..8].copy_from_slice(b"notttrce"))
            })),
            "header: not a usable ttrace device: bad magic",
        ),
        (
            "other byte order",
            with(Box::new(|d| edit(&d.join("header"), |h| h[..8].reverse()))),
            "written with the other byte order",
        ),
        (
            "future version",
            with(Box::new(|d| {
                edit(&d.join("header"), |h| {
                    h[8..12].copy_from_slice(&0x0002_0000u32.to_ne_bytes())
                })
            })),
            "header version 2.0 is not supported (this is 1.0)",
        ),
        (
            "truncated ring",
            with(Box::new(|d| ttrace_tests::set_len(&d.join("cpu1"), 4096))),
            "cpu1: not a usable ttrace device: is 4096 bytes",
        ),
        (
            "truncated aux",
            with(Box::new(|d| ttrace_tests::set_len(&d.join("aux"), 0))),
            "aux: not a usable ttrace device: is 0 bytes",
        ),
        (
            "ring of another device",
            with(Box::new(|d| {
                edit(&d.join("cpu1"), |r| {
                    r[8..12].copy_from_slice(&5u32.to_ne_bytes())
                })
            })),
            "cpu1: not a usable ttrace device: its header does not match",
        ),
        (
            "garbage",
            with(Box::new(|d| {
                let garbage: Vec<u8> = (0..4096u32)
                    .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
                    .collect();
                std::fs::write(d.join("header"), garbage).unwrap();
            })),
            "bad magic",
        ),
    ];
    for (i, (what, damage, expected)) in cases.iter().enumerate() {
        let dir = tmp.path().join(format!("case{i}"));
        damage(&dir);
        for cmd in ["dump", "stats", "follow", "ctl"] {
            let out = reader!(cmd, &dir).run();
            let (stdout, err) = (out.stdout, out.stderr);
            assert_eq!(out.status.code(), Some(1), "{what}: {cmd} {err}");
            assert!(stdout.is_empty(), "{what}: {cmd} printed {stdout:?}");
            assert_eq!(err.lines().count(), 1, "{what}: {cmd} {err:?}");
            assert!(
                err.starts_with("ttrace-reader: ") && err.contains(expected),
                "{what}: {cmd} {err:?}"
            );
        }
    }
}

#[test]
fn demo_traces_every_thread_and_loses_nothing() {
    let out = reader!("demo", "--threads", "2", "--requests", "3").run();
    assert!(out.status.success());
    let s = out.stdout;
    let (lines, comments) = dump_lines(&s);
    let cpus = devttrace::config::configured_cpus() as usize;
    let starts = lines
        .iter()
        .filter(|l| l.text.starts_with("request_start(id="))
        .count();
    assert_eq!(starts, 2 * cpus * 3, "every request of every thread");
    assert!(lines
        .iter()
        .any(|l| l.text.starts_with("latency_histogram(b0=") && l.text.contains(" b11=")));
    assert!(lines
        .iter()
        .any(|l| l.text.starts_with("file_read(fd=") && l.text.contains("path=\"/srv/data/")));
    assert!(lines
        .iter()
        .any(|l| l.text == "info(\"demo workload done\")"));
    let names: std::collections::HashSet<&str> = lines.iter().map(|l| l.thread.as_str()).collect();
    assert!(
        (0..2 * cpus).all(|t| names.contains(format!("worker-{t}").as_str())),
        "{names:?}"
    );
    assert!(comments
        .iter()
        .filter(|l| l.starts_with("# cpu"))
        .all(|l| l.contains(" 0 entries lost, 0 incomplete, 0 events dropped")));
}

#[test]
fn stats_reports_counts_and_tracepoints() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    run_app(&dir, 4);
    let d = dir.to_str().unwrap();
    assert!(reader!("ctl", d, "disable", "wide").run().status.success());
    let out = reader!("stats", d).run();
    assert!(out.status.success());
    let s = out.stdout;
    // A line per ring (each restartable one, then each shared one written): the
    // application's threads are pinned, to two CPUs whose events go to two rings
    // (`ttrace_tests::cpu_pair`), or to one.
    let pair = ttrace_tests::cpu_pair();
    let cpu_lines: Vec<&str> = s.lines().filter(|l| l.starts_with("cpu")).collect();
    let rings = ring_lines(&cpu_lines, "", None);
    assert_eq!(
        rings.iter().filter(|(n, _)| *n > 0).count(),
        if pair[0] == pair[1] { 1 } else { 2 },
        "{s}"
    );
    // `cpu0: 10 events (12 entries), ...`
    let count = |l: &str, i: usize| -> u64 {
        let words: Vec<&str> = l.split_once(": ").unwrap().1.split(' ').collect();
        words[i].trim_start_matches('(').parse().unwrap()
    };
    let events: u64 = cpu_lines.iter().map(|l| count(l, 0)).sum();
    let entries: u64 = cpu_lines.iter().map(|l| count(l, 2)).sum();
    assert_eq!(
        (events, entries),
        (8 + 8 + 4, 8 + 8 + 4 * 2),
        "pingpong, files, and wide with its continuation"
    );
    assert!(
        s.contains("total: 20 events (20 trace points, 0 messages); 0 entries lost"),
        "{s}"
    );
    assert!(s.contains("aux: "), "{s}");
    // How much history the rings keep: none has wrapped, so each is projected at its rate.
    let history = s.lines().find(|l| l.starts_with("history: ")).expect(&s);
    assert!(
        history.starts_with("history: the rings in use keep ")
            && history.contains(", at its rate until it wraps) to "),
        "{history}"
    );
    assert!(s.contains("tracepoints: 4 defined"), "{s}");
    // Ids depend on which thread registered first: look the lines up by name.
    let tp = |name: &str| {
        let l = s
            .lines()
            .find(|l| l.contains(&format!(" {name} [")))
            .unwrap();
        (l.starts_with("  on "), l.split_once(" [").unwrap().1)
    };
    assert!(!tp("wide").0, "{s}");
    assert!(
        tp("wide")
            .1
            .starts_with("start] classes 0x1: a0={a0} a1={a1}"),
        "{s}"
    );
    let (on, pingpong) = tp("pingpong");
    assert!(on, "{s}");
    let events = pingpong
        .strip_prefix("start] classes 0x1: seq={seq} by={by:s} (")
        .and_then(|rest| rest.strip_suffix(" events)"))
        .and_then(|n| n.parse::<u64>().ok());
    assert!(events.is_some_and(|n| n > 0), "{s}");
}

#[test]
fn every_subcommand_has_help_and_bad_usage_fails() {
    for cmd in ["dump", "follow", "ctl", "stats", "demo"] {
        let out = reader!(cmd, "--help").run();
        assert!(out.status.success(), "{cmd}");
        assert!(out.stdout.contains("Usage: ttrace-reader"), "{cmd}");
    }
    let out = reader!("frobnicate").run();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stderr.contains("unrecognized subcommand"));
}

#[test]
fn output_to_a_closed_pipe_ends_quietly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    run_app(&dir, 1000); // ~5000 lines, far more than a pipe holds
    let mut child = reader!("dump", &dir)
        .command()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("# ttrace "));
    // The read end is closed here, like `| head -1`.
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(err, "");
}

#[test]
fn garbage_in_the_rings_aux_and_metadata_is_survived_and_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    run_app(&dir, 50);
    // Keep every file's header (so the device opens) and scramble what follows it.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut scramble = |path: &Path, from: usize| {
        edit(path, |b| {
            for byte in &mut b[from..] {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *byte = x as u8;
            }
        })
    };
    // A ring the application wrote (which of them depends on the CPUs it may run on).
    let ring = {
        let dev = devttrace::Reader::open(&dir).unwrap();
        let written = (0..dev.cpus())
            .find(|&r| dev.ring(r).is_ok_and(|ring| ring.head() > 0))
            .expect("a ring written");
        dev.ring_name(written)
    };
    scramble(&dir.join(&ring), 4096);
    scramble(&dir.join("aux"), 0);
    // The metadata records start after the header page and the tracepoint table.
    let max = devttrace::Reader::open(&dir)
        .unwrap()
        .version()
        .max_tracepoints;
    let records = ttrace_layouts::meta::records_offset(max) as usize;
    scramble(&dir.join("meta"), records + 100);
    for cmd in ["dump", "stats"] {
        let out = reader!(cmd, &dir).run();
        assert!(out.status.success(), "{cmd}: {}", out.stderr);
        assert!(out.stdout.lines().count() > 2, "{cmd}");
    }
    let out = reader!("dump", &dir).run();
    let s = out.stdout;
    let line = s
        .lines()
        .find(|l| l.starts_with(&format!("# {ring}: ")))
        .unwrap();
    assert!(line.contains(" malformed"), "{line}");
    assert!(
        s.lines()
            .any(|l| l.starts_with("# aux: ") && l.contains("damaged")),
        "{s}"
    );
}

#[test]
fn extreme_values_are_shown_not_crashed_on() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let w = ttrace_core::Writer::open(&ttrace_tests::config(&dir, 64, 2)).unwrap();
    let word = ttrace_tests::define(&w, "edge", "u={u} d={d:d} x={x:x} s={s:s}");
    // An unnamed writer with the largest ids Linux gives, and extreme argument values.
    let most = devttrace::damage::PID_MAX;
    w.emit(
        word,
        most << 32 | most,
        &[u64::MAX, i64::MIN as u64, u64::MAX, 12345],
    );
    // A context no process can have (all ones) is damage, counted, not shown.
    w.emit(word, u64::MAX, &[1, 2, 3, 4]);
    let (lines, footer) = dump(&[dir.to_str().unwrap()]);
    assert_eq!(lines.len(), 1);
    let last = footer.last().unwrap();
    assert!(last.ends_with(", 1 entries damaged"), "{footer:?}");
    assert_eq!((lines[0].pid as u64, lines[0].tid as u64), (most, most));
    assert_eq!(lines[0].thread, "?");
    assert_eq!(
        lines[0].text,
        format!(
            "edge(u={} d={} x={:#x} s=<lost>)",
            u64::MAX,
            i64::MIN,
            u64::MAX
        )
    );
    // A time far beyond the trace keeps nothing, and is not an error.
    let (later, _) = dump(&[dir.to_str().unwrap(), "--since", "9000000000"]);
    assert!(later.is_empty());
}
