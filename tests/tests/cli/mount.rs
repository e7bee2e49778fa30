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
            // A test that failed with a file of the mount open leaves no dead mount behind
            // (as root).
            if let Ok(at) = std::ffi::CString::new(self.at.to_str().unwrap_or_default()) {
                // SAFETY: a NUL-terminated path; a failure (not mounted) is ignored.
                unsafe { libc::umount2(at.as_ptr(), libc::MNT_DETACH) };
            }
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

/// A tmpfs mounted at a directory (as root), unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path) -> Tmpfs {
        let c = |p: &str| std::ffi::CString::new(p).unwrap();
        let (src, target, kind) = (c("none"), c(at.to_str().unwrap()), c("tmpfs"));
        // SAFETY: NUL-terminated strings, no data.
        let r = unsafe {
            libc::mount(
                src.as_ptr(),
                target.as_ptr(),
                kind.as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        assert_eq!(
            r,
            0,
            "mount tmpfs (needs root): {}",
            std::io::Error::last_os_error()
        );
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let target = std::ffi::CString::new(self.0.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path; a failure (already unmounted) is ignored.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
}

/// Whether something is mounted at `at`.
fn is_mount_point(at: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.split(' ').nth(4) == at.to_str())
}

/// Runs `mount dev at`, which must be refused: its one line on standard error. One that
/// mounts all the same is unmounted, and the test fails.
fn refused(dev: &Path, at: &Path) -> String {
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
    if line.starts_with("mounted ") {
        let target = std::ffi::CString::new(at.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        let _ = child.kill();
        let _ = child.wait();
        panic!("mounted at {}: {line}", at.display());
    }
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    err
}

#[test]
#[ignore = "needs FUSE: /dev/fuse, and root (it mounts a tmpfs)"]
fn umount_unmounts_only_a_ttrace_mount() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("tmpfs");
    std::fs::create_dir(&t).unwrap();
    let _tmpfs = Tmpfs::mount(&t);
    std::fs::write(t.join("kept"), "mine").unwrap();
    let err = reader!("umount", &t).fails();
    assert_eq!(
        err,
        format!(
            "ttrace-reader: {}: not a ttrace mount (tmpfs none): umount unmounts only what \
             `ttrace-reader mount` mounted\n",
            t.display()
        )
    );
    assert!(is_mount_point(&t));
    assert_eq!(std::fs::read_to_string(t.join("kept")).unwrap(), "mine");
    // Where nothing is mounted: a directory, a file, nothing at all.
    let plain = tmp.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let file = tmp.path().join("file");
    std::fs::write(&file, "").unwrap();
    for p in [&plain, &file, &tmp.path().join("none")] {
        let err = reader!("umount", p).fails();
        assert_eq!(
            err,
            format!("ttrace-reader: {}: nothing is mounted here\n", p.display())
        );
    }
}

#[test]
#[ignore = "needs FUSE: /dev/fuse, and root (it mounts a tmpfs)"]
fn mount_refuses_a_file_a_full_directory_and_a_mount_point() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let _dev = device(&dir);
    let file = tmp.path().join("file");
    std::fs::write(&file, "mine").unwrap();
    assert_eq!(
        refused(&dir, &file),
        format!(
            "ttrace-reader: {}: not a directory: a mount point is an empty directory\n",
            file.display()
        )
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
    let full = tmp.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("notes"), "mine").unwrap();
    assert_eq!(
        refused(&dir, &full),
        format!(
            "ttrace-reader: {}: not empty: mounting here would hide what it holds (give an \
             empty or a new directory)\n",
            full.display()
        )
    );
    assert_eq!(std::fs::read_to_string(full.join("notes")).unwrap(), "mine");
    // A mount point of something else, empty.
    let t = tmp.path().join("tmpfs");
    std::fs::create_dir(&t).unwrap();
    let _tmpfs = Tmpfs::mount(&t);
    assert_eq!(
        refused(&dir, &t),
        format!(
            "ttrace-reader: {}: a mount point already (tmpfs none): give an empty directory \
             that is not one\n",
            t.display()
        )
    );
    // A device mounted there already.
    let at = tmp.path().join("mnt");
    let m = Mounted::new(&dir, &at);
    assert_eq!(
        refused(&dir, &at),
        format!(
            "ttrace-reader: {}: a device is mounted here already (ttrace:{}); \
             `ttrace-reader umount {}` first\n",
            at.display(),
            dir.display(),
            at.display()
        )
    );
    assert!(m.file("version").exists(), "the first mount still serves");
    m.unmount_cleanly();
    assert!(!is_mount_point(&at));
}

#[test]
#[ignore = "needs FUSE: /dev/fuse, and root or fusermount3 (apt install fuse3)"]
fn a_mount_whose_process_was_killed_is_recovered() {
    let (_tmp, dir, _dev, mut m) = mounted();
    let at = m.at.clone();
    let kill = |m: &mut Mounted| {
        let mut child = m.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        // The dead mount is still there: its directory cannot be read.
        let err = std::fs::read_dir(&m.at).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOTCONN), "{err}");
    };
    kill(&mut m);
    // A new mount there unmounts the dead one, says so, and serves.
    let mut again = Mounted::new(&dir, &at);
    assert!(text(again.read("version")).contains("cpus 2\n"));
    let mut log = String::new();
    kill(&mut again);
    again
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert_eq!(
        log,
        format!(
            "ttrace-reader: note: {}: a ttrace mount whose process is gone was still there; \
             unmounted it\n",
            at.display()
        )
    );
    // `umount` unmounts a dead one too.
    reader!("umount", &at).ok();
    assert!(std::fs::metadata(&at).unwrap().is_dir());
    assert!(!is_mount_point(&at));
}

/// Ends `m` as `way` says: `umount`, or a signal.
fn end(mut m: Mounted, way: &str) {
    let signal = match way {
        "umount" => return m.unmount_cleanly(),
        "SIGINT" => libc::SIGINT,
        _ => libc::SIGTERM,
    };
    let mut child = m.child.take().unwrap();
    // SAFETY: kill only sends a signal, to our own child.
    unsafe { libc::kill(child.id() as i32, signal) };
    assert!(child.wait().unwrap().success(), "{way}");
}

#[test]
#[ignore = "needs FUSE: /dev/fuse, and root or fusermount3 (apt install fuse3)"]
fn mount_removes_the_directories_it_made_and_only_those() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let _dev = device(&dir);
    let made = tmp.path().join("a");
    let at = made.join("b").join("mnt");
    let there = tmp.path().join("there");
    std::fs::create_dir(&there).unwrap();
    for way in ["umount", "SIGINT", "SIGTERM"] {
        end(Mounted::new(&dir, &at), way);
        assert!(!made.exists(), "{way}: it left what it made");
        end(Mounted::new(&dir, &there), way);
        assert!(
            there.is_dir(),
            "{way}: it removed a directory it did not make"
        );
        assert!(!is_mount_point(&there), "{way}");
    }
}

#[test]
#[ignore = "needs FUSE: /dev/fuse, and root or fusermount3 (apt install fuse3)"]
fn the_commands_written_to_ctl_apply_all_or_nothing() {
    let (_tmp, dir, _dev, m) = mounted();
    reader!("ctl", &dir, "clrbits", "0x10").ok();
    let before = m.read("ctl");
    // bash's printf writes each line on its own: the second fails, and the first is not
    // applied either.
    let printf = |what: &str| {
        Command::new("bash")
            .arg("-c")
            .arg(format!("printf '{what}' > {}", m.file("ctl").display()))
            .output()
            .unwrap()
    };
    let out = printf("reset\\nbogus\\n");
    assert!(!out.status.success());
    assert!(text(out.stderr).contains("Invalid argument"));
    assert_eq!(text(m.read("ctl")), text(before.clone()));
    // Lines written one by one, all good: applied together, when the file is closed.
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(m.file("ctl"))
        .unwrap();
    f.write_all(b"setbits 0x10\n").unwrap();
    f.write_all(b"disable file_*\n").unwrap();
    assert_eq!(m.read("ctl"), before, "applied before the file was closed");
    // A child forked meanwhile closes its copy of the descriptor at its exec: that is not
    // this file's close.
    assert!(Command::new("true").status().unwrap().success());
    assert_eq!(m.read("ctl"), before, "applied at a child's exec");
    drop(f);
    let after = text(m.read("ctl"));
    assert!(after.starts_with("setmask 0xffffffffffffffff "), "{after}");
    assert!(after.contains("\ndisable file_*\n"), "{after}");
    let out = printf("reset\\nenable x*\\n");
    assert!(out.status.success(), "{}", text(out.stderr));
    assert_eq!(
        text(m.read("ctl")),
        "setmask 0xffffffffffffffff 0xffffffffffffffff\nenable x*\n"
    );
    m.unmount_cleanly();
}

#[test]
#[ignore = "needs FUSE: /dev/fuse, and root or fusermount3 (apt install fuse3)"]
fn the_trace_pipe_of_a_snapshot_ends_after_what_it_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let _dev = device(&dir);
    let file = tmp.path().join("saved.ttrace");
    reader!("snapshot", &dir, "-o", &file).ok();
    let m = Mounted::new(&file, &tmp.path().join("mnt"));
    let pipe = m.file("trace_pipe");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(std::fs::read(pipe).map(text));
    });
    let got = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("trace_pipe of a snapshot did not end within 60 s")
        .unwrap();
    let trace = text(m.read("trace"));
    assert!(trace.lines().count() >= 200, "{trace}");
    assert_eq!(got, trace);
    m.unmount_cleanly();
}
