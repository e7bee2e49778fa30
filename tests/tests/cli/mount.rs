//! `ttrace-reader mount`: a device mounted in a temporary directory with FUSE, every file
//! read with plain `std::fs` calls as `cat` would. These need FUSE (`/dev/fuse`, and root
//! or `fusermount3`): where it cannot mount, they fail saying why.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use ttrace_tests::{reader, test_writer};

const NEEDS: &str = "needs FUSE: /dev/fuse, and root or fusermount3 (apt install fuse3)";

fn text(b: Vec<u8>) -> String {
    String::from_utf8(b).unwrap()
}

/// A running `ttrace-reader mount`.
struct Mounted {
    child: Option<Child>,
    stderr: Option<ChildStderr>,
    at: PathBuf,
}

impl Mounted {
    /// Mounts `dev` at `at` and waits until it serves (its "mounted" line).
    fn new(dev: &Path, at: &Path) -> Mounted {
        let mut child = reader!("mount", dev, at)
            .command()
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        if !line.starts_with("mounted ") {
            let out = child.wait_with_output().unwrap();
            panic!(
                "FUSE cannot mount here ({NEEDS}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let stderr = child.stderr.take();
        Mounted {
            child: Some(child),
            stderr,
            at: at.to_path_buf(),
        }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.at.join(name)
    }

    fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.file(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// `ttrace-reader umount`, then the mount's exit status and what it logged.
    /// Unmounts; the mount must end with status 0.
    fn unmount_cleanly(self) {
        let (status, log) = self.unmount();
        assert!(status.success(), "{log}");
    }

    fn unmount(mut self) -> (ExitStatus, String) {
        let out = reader!("umount", &self.at).run();
        assert!(out.status.success(), "umount: {}", out.stderr);
        let status = self.child.take().unwrap().wait().unwrap();
        let mut log = String::new();
        self.stderr
            .take()
            .unwrap()
            .read_to_string(&mut log)
            .unwrap();
        (status, log)
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = reader!("umount", &self.at).run();
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A device with events on both CPUs: `one(i)` and `five(...)` with a string.
fn device(dir: &Path) -> ttrace_core::Writer {
    let dev = ttrace_core::Writer::open(&ttrace_tests::config(dir, 1024, 2)).unwrap();
    write(&dev, 0, 0..50);
    write(&dev, 1, 0..50);
    dev
}

/// Writes `one(i)` and `five(i, .., "s<cpu>-<i>")` for each `i`, pinned to `cpu`.
fn write(dev: &ttrace_core::Writer, cpu: usize, range: std::ops::Range<u64>) {
    ttrace_tests::write_pinned(dev, cpu, range, false);
}

/// `dump`'s event lines (of `--cpu N` if given), messages left out.
fn dumped(dir: &Path, cpu: Option<usize>) -> Vec<String> {
    ttrace_tests::dumped_lines(reader!(), dir, cpu)
}

/// A temporary directory with a device (see [`device`]) mounted in it.
fn mounted() -> (tempfile::TempDir, PathBuf, ttrace_core::Writer, Mounted) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = device(&dir);
    let m = Mounted::new(&dir, &tmp.path().join("mnt"));
    (tmp, dir, dev, m)
}

#[test]
#[ignore = "needs FUSE: /dev/fuse, and root or fusermount3 (apt install fuse3)"]
fn every_file_reads_with_plain_file_calls() {
    let (_tmp, dir, _dev, m) = mounted();
    let mut names: Vec<String> = std::fs::read_dir(&m.at)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "aux",
            "cpu0",
            "cpu1",
            "ctl",
            "meta",
            "stats",
            "trace",
            "trace_pipe",
            "version"
        ]
    );
    // Owner and modes follow the device.
    use std::os::unix::fs::MetadataExt;
    let owner = std::fs::metadata(&dir).unwrap().uid();
    let root = std::fs::metadata(&m.at).unwrap();
    assert_eq!((root.mode() & 0o777, root.uid()), (0o700, owner));
    for n in &names {
        let md = std::fs::metadata(m.file(n)).unwrap();
        assert_eq!((md.mode() & 0o777, md.uid()), (0o600, owner), "{n}");
    }
    let version = text(m.read("version"));
    for line in [
        "cpus 2\n",
        "ring_slots 1024\n",
        &format!(
            "header_version {}.{}\n",
            ttrace_layouts::device::HEADER_VERSION >> 16,
            ttrace_layouts::device::HEADER_VERSION & 0xffff
        ),
        &format!("source {}\n", dir.display()),
    ] {
        assert!(version.contains(line), "{version}");
    }
    let meta = text(m.read("meta"));
    assert!(meta.contains("tracepoint 0 one start classes=0x1 nargs=1 format=\"i={i}\""));
    assert!(meta
        .lines()
        .any(|l| l.starts_with("thread ") && l.ends_with(" writer-1")));
    let aux = m.read("aux");
    let aux_size = devttrace::Reader::open(&dir).unwrap().version().aux_size;
    assert_eq!(aux.len() as u64, 4 * aux_size, "one buffer per ring");
    assert!(aux.windows(5).any(|w| w == b"s1-49"));
    assert!(text(m.read("stats")).contains("cpu0: "));
    assert_eq!(text(m.read("ctl")), reader!("ctl", &dir).run().stdout);
    // `trace` is dump's lines; each `cpuN` decodes to dump's lines for that CPU.
    let trace: Vec<String> = text(m.read("trace"))
        .lines()
        .filter(|l| !l.contains(" info("))
        .map(str::to_string)
        .collect();
    assert_eq!(trace, dumped(&dir, None));
    let mut total = 0;
    for cpu in 0..2 {
        let f = m.file(&format!("cpu{cpu}"));
        let bytes = std::fs::read(&f).unwrap();
        assert_eq!(bytes.len() % 64, 0);
        let out = reader!("decode", &f).run();
        assert!(out.status.success(), "{}", out.stderr);
        let lines: Vec<String> = out.stdout.lines().map(str::to_string).collect();
        assert_eq!(lines, dumped(&dir, Some(cpu)), "cpu{cpu}");
        total += lines.len();
    }
    assert_eq!(total, 200);
    m.unmount_cleanly();
}

#[test]
#[ignore = "needs FUSE: /dev/fuse, and root or fusermount3 (apt install fuse3)"]
fn an_open_cpu_file_keeps_its_snapshot_while_a_writer_writes() {
    let (_tmp, _dir, dev, m) = mounted();
    let mut f = std::fs::File::open(m.file("cpu0")).unwrap();
    let mut first = [0u8; 64];
    f.read_exact(&mut first).unwrap();
    write(&dev, 0, 1000..1300);
    let mut rest = Vec::new();
    f.read_to_end(&mut rest).unwrap();
    let whole = [&first[..], &rest].concat();
    // `dd bs=64`: the same bytes, 64 at a time, from the start again.
    f.seek(SeekFrom::Start(0)).unwrap();
    let mut again = Vec::new();
    let mut block = [0u8; 64];
    loop {
        let n = f.read(&mut block).unwrap();
        if n == 0 {
            break;
        }
        again.extend_from_slice(&block[..n]);
    }
    assert_eq!(again, whole, "one open file, one snapshot");
    // A new open sees the writer's events.
    let now = m.read("cpu0");
    assert_ne!(now, whole);
    let parsed = |b: &[u8]| {
        ttrace_reader::raw::parse(b, &ttrace_reader::raw::Limits::ANY)
            .unwrap()
            .len()
    };
    assert_eq!(parsed(&whole), 100);
    assert!(parsed(&now) > 100);
    drop(f);
    m.unmount();
}

#[test]
#[ignore = "needs FUSE: /dev/fuse, and root or fusermount3 (apt install fuse3)"]
fn ctl_writes_change_what_is_recorded_and_a_bad_command_is_einval() {
    let (_tmp, dir, _dev, m) = mounted();
    std::fs::write(m.file("ctl"), "disable shared_*\n").unwrap();
    assert!(text(m.read("ctl")).contains("disable shared_*"));
    // A writer process started now records writer_done, not shared_event.
    let out = test_writer!(&dir, 20, 3).run();
    assert!(out.status.success());
    let lines = dumped(&dir, None);
    assert_eq!(
        lines.iter().filter(|l| l.contains("writer_done(")).count(),
        1
    );
    assert_eq!(
        lines.iter().filter(|l| l.contains("shared_event(")).count(),
        0
    );
    // A malformed command: EINVAL (the shell says "Invalid argument"), nothing changed.
    let before = m.read("ctl");
    let err = std::fs::write(m.file("ctl"), "enable x*\nfrobnicate 1\n").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{err}");
    assert_eq!(m.read("ctl"), before);
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("echo 'setbits' > {}", m.file("ctl").display()))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(text(out.stderr).contains("Invalid argument"));
    m.unmount();
}

#[test]
#[ignore = "needs FUSE: /dev/fuse, and root or fusermount3 (apt install fuse3)"]
fn trace_pipe_streams_each_event_written_after_it_was_opened_once() {
    let (_tmp, _dir, dev, m) = mounted();
    let pipe = std::fs::File::open(m.file("trace_pipe")).unwrap();
    let (tx, rx) = mpsc::channel();
    let reading = std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    write(&dev, 1, 500..600);
    let mut seen = Vec::new();
    while seen.len() < 100 {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("trace_pipe gave no line within 30 s");
        if let Some(i) = line.split(" one(i=").nth(1) {
            seen.push(i.trim_end_matches(')').parse::<u64>().unwrap());
        }
    }
    assert_eq!(seen, (500..600).collect::<Vec<_>>(), "each once, in order");
    // The reader closes the pipe at its next line (its receiver gone), and the mount can
    // then go.
    drop(rx);
    write(&dev, 1, 600..601);
    reading.join().unwrap();
    m.unmount_cleanly();
}

#[test]
#[ignore = "needs FUSE: /dev/fuse, and root or fusermount3 (apt install fuse3)"]
fn the_mount_survives_a_writer_killed_and_a_damaged_device_gives_eio() {
    let (_tmp, dir, _dev, m) = mounted();
    let mut child = test_writer!(&dir, 100000000, 5)
        .command()
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    for f in ["trace", "stats", "cpu0", "cpu1", "meta", "aux", "version"] {
        m.read(f);
    }
    // A ring file cut under the mount: the device is damaged, every read fails with EIO,
    // and the mount says why once.
    ttrace_tests::set_len(&dir.join("cpu1"), 4096);
    for f in ["trace", "cpu1", "version"] {
        let err = std::fs::read(m.file(f)).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EIO), "{f}: {err}");
    }
    let (status, log) = m.unmount();
    assert!(status.success());
    assert_eq!(log.lines().count(), 1, "{log}");
    assert!(log.contains("cpu1"), "{log}");
}

#[test]
#[ignore = "needs FUSE: /dev/fuse, and root or fusermount3 (apt install fuse3)"]
fn unmounting_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let _dev = device(&dir);
    let at = tmp.path().join("not-yet").join("mnt");
    let m = Mounted::new(&dir, &at);
    assert!(at.join("version").exists());
    m.unmount_cleanly();
    assert!(!at.exists(), "the mount point it made is removed");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(at.to_str().unwrap()));
    // SIGTERM unmounts too.
    let mut m = Mounted::new(&dir, &at);
    let mut child = m.child.take().unwrap();
    // SAFETY: kill only sends a signal, to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    assert!(!at.exists());
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(at.to_str().unwrap()));
}

#[test]
#[ignore = "needs FUSE: /dev/fuse, and root or fusermount3 (apt install fuse3)"]
fn a_snapshot_file_mounts_as_the_device_it_was_taken_from() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let _dev = device(&dir);
    let file = tmp.path().join("saved.ttrace");
    let out = reader!("snapshot", &dir, "-o", &file).run();
    assert!(out.status.success(), "{}", out.stderr);
    let m = Mounted::new(&file, &tmp.path().join("mnt"));
    let version = text(m.read("version"));
    assert!(
        version.contains(&format!("source {}\n", file.display())),
        "{version}"
    );
    let trace: Vec<String> = text(m.read("trace"))
        .lines()
        .filter(|l| !l.contains(" info("))
        .map(str::to_string)
        .collect();
    assert_eq!(trace, dumped(&dir, None));
    // A `cpuN` file decodes against the snapshot the mount serves (its `source`).
    for cpu in 0..2 {
        let f = m.file(&format!("cpu{cpu}"));
        let out = reader!("decode", &f).run();
        assert!(out.status.success(), "{}", out.stderr);
        let lines: Vec<String> = out.stdout.lines().map(str::to_string).collect();
        assert_eq!(lines, dumped(&dir, Some(cpu)), "cpu{cpu}");
    }
    let aux = m.read("aux");
    let aux_size = devttrace::Reader::open(&file).unwrap().version().aux_size;
    assert_eq!(aux.len() as u64, 4 * aux_size, "one buffer per ring");
    assert!(aux.windows(5).any(|w| w == b"s1-49"));
    m.unmount_cleanly();
}
