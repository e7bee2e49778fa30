//! The `ttrace-reader` binary as a user runs it.

use std::path::Path;
use std::process::{Command, Output};

fn reader(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ttrace-reader"))
        .args(args)
        .output()
        .unwrap()
}

fn make_device(dir: &Path) {
    let cfg = ttrace_core::Config {
        ring_slots: 64,
        cpus: Some(2),
        calibration: std::time::Duration::from_millis(2),
        ..ttrace_core::Config::at(dir)
    };
    let dev = ttrace_core::Device::open(&cfg).unwrap();
    let (_, word) = dev
        .register_tracepoint(&ttrace_core::meta::Definition {
            name: "hello",
            kind: ttrace_core::Kind::Start,
            classes: 1,
            format: "n={n}",
            nargs: 1,
        })
        .unwrap();
    dev.note_thread(7, 8, "main-thread").unwrap();
    dev.emit(word, 7 << 32 | 8, &[42]);
}

/// Runs `dump` on `dir` and returns (exit success, stdout, stderr).
fn dump(dir: &Path) -> (bool, String, String) {
    let out = reader(&["dump", dir.to_str().unwrap()]);
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn edit(path: &Path, f: impl FnOnce(&mut Vec<u8>)) {
    let mut bytes = std::fs::read(path).unwrap();
    f(&mut bytes);
    std::fs::write(path, bytes).unwrap();
}

fn truncate(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

#[test]
fn dump_prints_header_events_and_footer() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    make_device(&dir);
    let (ok, out, err) = dump(&dir);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("# ttrace ") && lines[0].contains("2 cpus x 64 slots"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].ends_with(" 7/8 (main-thread) hello(n=42)"),
        "{}",
        lines[1]
    );
    assert!(lines[2].starts_with("# cpu0: ") && lines[3].starts_with("# cpu1: "));
    assert!(lines.last().unwrap().starts_with("# aux: "));
}

type Damage = Box<dyn Fn(&Path)>;

#[test]
fn bad_devices_give_one_clear_line_and_a_failure_status() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, Damage, &str)> = vec![
        ("missing", Box::new(|_| {}), "no ttrace device at"),
        (
            "empty directory",
            Box::new(|d| std::fs::create_dir(d).unwrap()),
            "header: No such file",
        ),
        (
            "truncated header",
            Box::new(|d| {
                make_device(d);
                truncate(&d.join("header"), 100);
            }),
            "header: not a usable ttrace device: is 100 bytes, expected 4096",
        ),
        (
            "wrong magic",
            Box::new(|d| {
                make_device(d);
                edit(&d.join("header"), |h| h[..8].copy_from_slice(b"notttrce"));
            }),
            "bad magic",
        ),
        (
            "other byte order",
            Box::new(|d| {
                make_device(d);
                edit(&d.join("header"), |h| h[..8].reverse());
            }),
            "written with the other byte order",
        ),
        (
            "future version",
            Box::new(|d| {
                make_device(d);
                edit(&d.join("header"), |h| {
                    h[8..12].copy_from_slice(&0x0002_0000u32.to_ne_bytes())
                });
            }),
            "header version 2.0 is not supported (this is 1.0)",
        ),
        (
            "truncated ring",
            Box::new(|d| {
                make_device(d);
                truncate(&d.join("cpu1"), 4096);
            }),
            "cpu1: not a usable ttrace device: is 4096 bytes",
        ),
        (
            "garbage",
            Box::new(|d| {
                make_device(d);
                let garbage: Vec<u8> = (0..4096u32)
                    .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
                    .collect();
                std::fs::write(d.join("header"), garbage).unwrap();
            }),
            "bad magic",
        ),
    ];
    for (i, (what, damage, expected)) in cases.iter().enumerate() {
        let dir = tmp.path().join(format!("case{i}"));
        damage(&dir);
        let (ok, out, err) = dump(&dir);
        assert!(!ok, "{what}: dump succeeded");
        assert!(out.is_empty(), "{what}: printed {out:?}");
        assert_eq!(err.lines().count(), 1, "{what}: {err:?}");
        assert!(
            err.starts_with("ttrace-reader: ") && err.contains(expected),
            "{what}: {err:?}"
        );
    }
}

#[test]
fn demo_traces_every_thread_and_loses_nothing() {
    let out = reader(&["demo", "--threads", "2", "--requests", "3"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let starts = text
        .lines()
        .filter(|l| l.contains(") request_start(id="))
        .count();
    let cpus = ttrace_core::device::configured_cpus() as usize;
    assert_eq!(starts, 2 * cpus * 3, "every request of every thread");
    assert!(text
        .lines()
        .any(|l| l.contains("latency_histogram(b0=") && l.contains(" b11=")));
    assert!(text
        .lines()
        .any(|l| l.contains("file_read(fd=") && l.contains("path=\"/srv/data/")));
    assert!(text
        .lines()
        .filter(|l| l.starts_with("# cpu"))
        .all(|l| l.contains(" 0 lost, 0 incomplete, 0 dropped")));
}

fn hello_word(dev: &ttrace_core::Device) -> u64 {
    dev.register_tracepoint(&ttrace_core::meta::Definition {
        name: "hello",
        kind: ttrace_core::Kind::Start,
        classes: 1,
        format: "n={n}",
        nargs: 1,
    })
    .unwrap()
    .1
}

#[test]
fn follow_prints_only_events_written_after_it_started_in_order() {
    use std::io::{BufRead, BufReader};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    make_device(&dir); // holds hello(n=42), which follow must not print
    let mut child = Command::new(env!("CARGO_BIN_EXE_ttrace-reader"))
        .args([
            "follow",
            dir.to_str().unwrap(),
            "--limit",
            "5",
            "--interval-ms",
            "1",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("# following "), "{first}");
    // The follower has taken its baseline: everything from here on is new.
    let dev = ttrace_core::Device::attach(&dir).unwrap();
    let word = hello_word(&dev);
    for n in 1..=5u64 {
        dev.emit(word, 7 << 32 | 8, &[n]);
    }
    let got: Vec<String> = lines.map(|l| l.unwrap()).collect();
    assert!(child.wait().unwrap().success());
    let events: Vec<&String> = got.iter().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(events.len(), 5, "{got:?}");
    for (n, line) in (1..=5).zip(&events) {
        assert!(
            line.ends_with(&format!("(main-thread) hello(n={n})")),
            "{line}"
        );
    }
}

#[test]
fn follow_counts_what_a_lapping_writer_overwrote() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    make_device(&dir);
    let dev = ttrace_core::Device::attach(&dir).unwrap();
    let reader = ttrace_core::Device::attach_read_only(&dir).unwrap();
    let mut f = ttrace_reader::follow::Follower::new(&reader);
    let word = hello_word(&dev);
    // 64-slot rings: 200 entries on ring 0 between two polls lose 136 of them.
    for n in 0..200u64 {
        dev.ring(0).write(
            1_000_000 + n * 10,
            7,
            &[
                ttrace_layouts::entry::TypeWord(word).0,
                7 << 32 | 8,
                n,
                0,
                0,
                0,
                0,
            ],
        );
    }
    let t = f.poll();
    assert_eq!(t.items.len(), 64);
    assert_eq!(f.lost[0], 136);
    assert_eq!(f.poll().items.len(), 0, "nothing is repeated");
}

#[test]
fn ctl_changes_what_gets_recorded_and_rejects_bad_commands() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    make_device(&dir);
    let d = dir.to_str().unwrap();
    let out = reader(&["ctl", d]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "setmask 0xffffffffffffffff 0xffffffffffffffff\n"
    );
    let out = reader(&["ctl", d, "disable", "hel*"]);
    assert!(out.status.success());
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .contains("disable hel*"));
    let dev = ttrace_core::Device::attach(&dir).unwrap();
    assert_eq!(
        hello_word(&dev),
        0,
        "the tracepoint is now off for every writer"
    );
    let out = reader(&["ctl", d, "clrbits", "0x1"]);
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .starts_with("setmask 0xfffffffffffffffe "));
    for bad in [
        &["ctl", d, "setbits"][..],
        &["ctl", d, "setbits", "zz"],
        &["ctl", d, "bogus", "1"],
    ] {
        let out = reader(bad);
        assert!(!out.status.success(), "{bad:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    assert_eq!(dev.mask(), !1u64, "a rejected command changed nothing");
}

#[test]
fn stats_reports_counts_and_tracepoints() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    make_device(&dir);
    let out = reader(&["stats", dir.to_str().unwrap()]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.lines().filter(|l| l.starts_with("cpu")).count() == 2,
        "{text}"
    );
    assert!(text.contains("tracepoints: 1 defined"), "{text}");
    assert!(
        text.contains("on     0 hello [start] classes 0x1: n={n}"),
        "{text}"
    );
}

#[test]
fn the_trace_of_a_writer_killed_with_sigkill_is_still_dumped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let mut writer = Command::new(env!("CARGO_BIN_EXE_ttrace-reader"))
        .args(["demo", "--forever", "--device", dir.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the writer has recorded a good number of events (bounded: 30 s).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let recorded = ttrace_core::Device::attach_read_only(&dir)
            .map(|d| {
                (0..d.num_rings())
                    .map(|r| d.ring(r).snapshot().events.len())
                    .sum::<usize>()
            })
            .unwrap_or(0);
        if recorded >= 200 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the writer recorded nothing"
        );
        std::thread::yield_now();
    }
    writer.kill().unwrap(); // SIGKILL
    assert!(!writer.wait().unwrap().success());
    let (ok, out, err) = dump(&dir);
    assert!(ok, "{err}");
    let events = out.lines().filter(|l| !l.starts_with('#')).count();
    assert!(events >= 200, "{events} events");
    assert!(out
        .lines()
        .any(|l| l.contains("(worker-0) request_start(id=")));
    assert!(out.lines().last().unwrap().starts_with("# aux: "));
}
