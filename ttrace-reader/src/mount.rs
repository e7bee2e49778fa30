//! `ttrace-reader mount`: a device served as files any program reads, as the Akaros kernel's
//! `#ttrace` device was (`version`, one file per CPU, the aux buffer, `ctl`), with the FUSE
//! protocol (the `fuser` crate: no libfuse).
//!
//! Every file but `ctl` and `trace_pipe` is a snapshot taken when it is opened: each open
//! file keeps its own bytes, so `cat`, `dd bs=64`, `cp` and seeks within one open file all
//! see the same content, and reading never changes the device.

use crate::decode::{self, Decoder, TimeFormat};
use crate::merge::{Filter, Merge};
use crate::Error;
use devttrace::{Device, Follower, Reader, Trust, View};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, INodeNo, LockOwner, MountOption,
    OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite,
    Request, WriteFlags,
};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

const ROOT: u64 = 1;
const VERSION: u64 = 2;
const CTL: u64 = 3;
const TRACE: u64 = 4;
const TRACE_PIPE: u64 = 5;
const STATS: u64 = 6;
const AUX: u64 = 7;
const META: u64 = 8;
/// `cpuN` is inode `CPU0 + N`.
const CPU0: u64 = 16;

/// How long the kernel may cache names and attributes: they never change while mounted.
const TTL: Duration = Duration::from_secs(1);

/// Where `mount` mounts by default: `/dev/ttrace` for root, else `$XDG_RUNTIME_DIR/ttrace`
/// (else `<tmp>/ttrace-<uid>`).
pub fn default_mountpoint() -> PathBuf {
    // SAFETY: geteuid and getuid cannot fail.
    let (euid, uid) = unsafe { (libc::geteuid(), libc::getuid()) };
    if euid == 0 {
        return PathBuf::from("/dev/ttrace");
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(d) => Path::new(&d).join("ttrace"),
        None => std::env::temp_dir().join(format!("ttrace-{uid}")),
    }
}

/// If `dir` is a mounted device, the device it serves (its `version` file's `source`).
pub fn source_of(dir: &Path) -> Option<PathBuf> {
    if dir.join("header").exists() {
        return None;
    }
    let text = std::fs::read_to_string(dir.join("version")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("source "))
        .map(PathBuf::from)
}

/// One file's name and inode.
fn files(cpus: u32) -> Vec<(u64, String)> {
    let mut v: Vec<(u64, String)> = [
        (VERSION, "version"),
        (CTL, "ctl"),
        (TRACE, "trace"),
        (TRACE_PIPE, "trace_pipe"),
        (STATS, "stats"),
        (AUX, "aux"),
        (META, "meta"),
    ]
    .into_iter()
    .map(|(i, n)| (i, n.to_string()))
    .collect();
    v.extend((0..cpus as u64).map(|c| (CPU0 + c, format!("cpu{c}"))));
    v
}

/// An open file.
enum Open {
    /// Bytes copied at open.
    Bytes(Arc<Vec<u8>>),
    /// `ctl`, open for writing.
    Ctl(Arc<Mutex<CtlFile>>),
    /// A `trace_pipe` reader.
    Pipe(Arc<Pipe>),
}

/// `ctl` open for writing: the commands written to it, each write checked whole as it comes
/// (a shell's `printf` writes line by line), and applied together when the file is closed,
/// only if every write was good: what is written to one open `ctl` applies all or nothing.
#[derive(Default)]
struct CtlFile {
    /// The device, attached for control at the first write.
    control: Option<Device>,
    /// The commands written, not yet applied.
    commands: Vec<devttrace::control::Command>,
    /// A write was refused: nothing written to this file is applied.
    failed: bool,
    /// The lock owner (the descriptor table) of the process that wrote the commands. A
    /// close by another table (a child's copy of the descriptor, closed at its `exec`) is
    /// not the writer's close and applies nothing.
    writer: Option<u64>,
}

/// A `trace_pipe` reader: its own follower, and the text it has not returned yet.
struct Pipe {
    state: Mutex<(Follower<'static>, Vec<u8>)>,
    closed: AtomicBool,
}

/// The file system.
struct TraceFs {
    /// The device, read-only: a file of it cut while mounted is then reported, not a crash.
    dev: &'static Reader,
    /// How `ctl` writes open it for control (each write opens it afresh, checked).
    trust: Trust,
    cpus: u32,
    uid: u32,
    gid: u32,
    open: Mutex<HashMap<u64, Open>>,
    next_fh: AtomicU64,
}

/// The block size files report: the read size of `cat`, `cp` and buffered readers.
const READ_BLOCK: u32 = 1 << 20;

impl TraceFs {
    fn attr(&self, ino: u64) -> Option<FileAttr> {
        let (kind, perm) = match ino {
            ROOT => (FileType::Directory, 0o700),
            VERSION | CTL | TRACE | TRACE_PIPE | STATS | AUX | META => {
                (FileType::RegularFile, 0o600)
            }
            i if (CPU0..CPU0 + self.cpus as u64).contains(&i) => (FileType::RegularFile, 0o600),
            _ => return None,
        };
        let now = SystemTime::now();
        Some(FileAttr {
            ino: INodeNo(ino),
            // Content is made at open (direct I/O): readers read until end of file.
            size: 0,
            blocks: 0,
            atime: now,
            mtime: now,
            ctime: now,
            crtime: now,
            kind,
            perm,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            flags: 0,
            // What `cat` and `cp` take as the size of each read: one request of 1 MiB
            // (the most FUSE moves in one reply) instead of 128 KiB.
            blksize: READ_BLOCK,
        })
    }

    /// The content of a snapshot file, made now; the device checked intact after.
    fn content(&self, ino: u64) -> Result<Vec<u8>, Error> {
        let dev = self.dev;
        // A device directory whose header is gone was removed; a snapshot file (the device
        // read from it when mounted) has no `header` of its own.
        if !dev.dir().is_file() && !dev.dir().join("header").exists() {
            return Err(Error::Removed(dev.dir().to_path_buf()));
        }
        let bytes = match ino {
            VERSION => version_text(dev).into_bytes(),
            STATS => crate::stats::text(dev)?.into_bytes(),
            META => meta_text(dev).into_bytes(),
            AUX => aux_bytes(dev)?,
            TRACE => {
                let view = View::of(dev, 0)?;
                let mut out = Vec::new();
                Decoder::new(&view, TimeFormat::Relative)
                    .write_all(Merge::view(&view, &Filter::default()), &mut out)?;
                out
            }
            CTL => dev.ctl().into_bytes(),
            i => crate::raw::cpu_entries(dev, (i - CPU0) as usize)?,
        };
        dev.check_intact()?;
        Ok(bytes)
    }

    /// Takes one write to `ctl`: whole lines, each a command (empty ones aside), all good or
    /// the write is refused (EINVAL); the device is attached for control at the first.
    fn accept(&self, ctl: &mut CtlFile, data: &[u8]) -> Result<(), Errno> {
        if ctl.failed {
            return Err(Errno::EINVAL);
        }
        let text = std::str::from_utf8(data).map_err(|_| Errno::EINVAL)?;
        let commands = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.parse::<devttrace::control::Command>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| Errno::EINVAL)?;
        if ctl.control.is_none() {
            ctl.control = Some(Device::attach_with(self.dev.dir(), self.trust).map_err(
                |e| match e {
                    devttrace::Error::ReadOnly(_) => Errno::EROFS,
                    devttrace::Error::Io { source, .. }
                        if source.kind() == std::io::ErrorKind::PermissionDenied =>
                    {
                        Errno::EROFS
                    }
                    e => eio(&e.to_string()),
                },
            )?);
        }
        ctl.commands.extend(commands);
        Ok(())
    }

    fn fh(&self, open: Open) -> FileHandle {
        let fh = self.next_fh.fetch_add(1, Relaxed);
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(fh, open);
        FileHandle(fh)
    }

    fn opened(&self, fh: FileHandle) -> Option<OpenRef> {
        let map = self.open.lock().unwrap_or_else(|e| e.into_inner());
        match map.get(&fh.0)? {
            Open::Bytes(b) => Some(OpenRef::Bytes(b.clone())),
            Open::Ctl(c) => Some(OpenRef::Ctl(c.clone())),
            Open::Pipe(p) => Some(OpenRef::Pipe(p.clone())),
        }
    }
}

/// An open file, taken out of the table for one request.
enum OpenRef {
    Bytes(Arc<Vec<u8>>),
    Ctl(Arc<Mutex<CtlFile>>),
    Pipe(Arc<Pipe>),
}

/// Says what went wrong, once per distinct message, and answers EIO.
fn eio(what: &str) -> Errno {
    static SAID: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if !said.iter().any(|s| s == what) {
        eprintln!("ttrace-reader mount: {what}");
        said.push(what.to_string());
    }
    Errno::EIO
}

/// Applies and forgets the commands written to a `ctl` descriptor, unless one of its writes
/// was refused: then it forgets them, and what is written next is a new batch.
fn apply(ctl: &mut CtlFile) -> Result<(), Errno> {
    let commands = std::mem::take(&mut ctl.commands);
    if std::mem::take(&mut ctl.failed) {
        return Ok(());
    }
    let Some(control) = &ctl.control else {
        return Ok(());
    };
    for c in &commands {
        control.apply(c).map_err(|e| match e {
            devttrace::Error::ReadOnly(_) => Errno::EROFS,
            devttrace::Error::BadCommand(_) => Errno::EINVAL,
            e => eio(&e.to_string()),
        })?;
    }
    Ok(())
}

impl Filesystem for TraceFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let found = (parent.0 == ROOT)
            .then(|| {
                files(self.cpus)
                    .into_iter()
                    .find(|(_, n)| OsStr::new(n) == name)
            })
            .flatten()
            .and_then(|(ino, _)| self.attr(ino));
        match found {
            Some(attr) => reply.entry(&TTL, &attr, fuser::Generation(0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(ino.0) {
            Some(attr) => reply.attr(&TTL, &attr),
            None => reply.error(Errno::ENOENT),
        }
    }

    /// Only truncation to 0 (`echo ... > ctl` opens with `O_TRUNC`) is accepted, on `ctl`.
    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        match (ino.0, mode, uid, gid, size) {
            (CTL, None, None, None, Some(0) | None) => match self.attr(CTL) {
                Some(attr) => reply.attr(&TTL, &attr),
                None => reply.error(Errno::ENOENT),
            },
            _ => reply.error(Errno::EPERM),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let write = flags.0 & libc::O_ACCMODE != libc::O_RDONLY;
        let direct = FopenFlags::FOPEN_DIRECT_IO;
        match ino.0 {
            CTL if write => reply.opened(self.fh(Open::Ctl(Arc::default())), direct),
            _ if write => reply.error(Errno::EACCES),
            // A snapshot never changes: its pipe ends after what it holds.
            TRACE_PIPE if self.dev.is_snapshot() => match self.content(TRACE) {
                Ok(bytes) => reply.opened(
                    self.fh(Open::Bytes(Arc::new(bytes))),
                    direct | FopenFlags::FOPEN_NONSEEKABLE,
                ),
                Err(e) => reply.error(eio(&e.to_string())),
            },
            TRACE_PIPE => {
                let pipe = Pipe {
                    state: Mutex::new((Follower::new(self.dev), Vec::new())),
                    closed: AtomicBool::new(false),
                };
                reply.opened(
                    self.fh(Open::Pipe(Arc::new(pipe))),
                    direct | FopenFlags::FOPEN_NONSEEKABLE,
                )
            }
            i if self.attr(i).is_some() && i != ROOT => match self.content(i) {
                Ok(bytes) => reply.opened(self.fh(Open::Bytes(Arc::new(bytes))), direct),
                Err(e) => reply.error(eio(&e.to_string())),
            },
            _ => reply.error(Errno::ENOENT),
        }
    }

    fn read(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.opened(fh) {
            Some(OpenRef::Bytes(b)) => {
                let start = (offset as usize).min(b.len());
                let end = start.saturating_add(size as usize).min(b.len());
                reply.data(&b[start..end]);
            }
            Some(OpenRef::Pipe(p)) => {
                // A pipe blocks until there is something new: answered from its own thread,
                // so that other requests go on meanwhile.
                let reader = req.pid();
                std::thread::spawn(move || pipe_read(&p, size as usize, reader, reply));
            }
            Some(OpenRef::Ctl(_)) | None => reply.error(Errno::EBADF),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let Some(OpenRef::Ctl(ctl)) = self.opened(fh) else {
            return reply.error(Errno::EBADF);
        };
        let mut ctl = ctl.lock().unwrap_or_else(|e| e.into_inner());
        ctl.writer = ctl.writer.or(lock_owner.map(|o| o.0));
        match self.accept(&mut ctl, data) {
            Ok(()) => reply.written(data.len() as u32),
            Err(errno) => {
                // Nothing written to this file applies now, not even its good writes.
                ctl.failed = true;
                ctl.commands.clear();
                reply.error(errno)
            }
        }
    }

    /// Applies the commands written to `ctl` when the process that wrote them closes its
    /// descriptor: all of them, unless a write was refused, and then none. The kernel sends
    /// a flush at every close of a copy of the descriptor, a forked child's close at `exec`
    /// among them; a flush from another descriptor table leaves the commands pending.
    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        let Some(OpenRef::Ctl(ctl)) = self.opened(fh) else {
            return reply.ok();
        };
        let mut ctl = ctl.lock().unwrap_or_else(|e| e.into_inner());
        if ctl.writer.is_some_and(|w| w != lock_owner.0) {
            return reply.ok();
        }
        match apply(&mut ctl) {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    /// Forgets a descriptor. Commands still pending (their writer's close never came as a
    /// flush) are applied now; an error can only be said on stderr.
    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let gone = self
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&fh.0);
        match gone {
            Some(Open::Pipe(p)) => p.closed.store(true, Relaxed),
            Some(Open::Ctl(ctl)) => {
                let _ = apply(&mut ctl.lock().unwrap_or_else(|e| e.into_inner()));
            }
            _ => {}
        }
        reply.ok();
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if ino.0 != ROOT {
            return reply.error(Errno::ENOTDIR);
        }
        let mut entries = vec![
            (ROOT, FileType::Directory, ".".to_string()),
            (ROOT, FileType::Directory, "..".to_string()),
        ];
        entries.extend(
            files(self.cpus)
                .into_iter()
                .map(|(i, n)| (i, FileType::RegularFile, n)),
        );
        for (k, (i, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(i), (k + 1) as u64, kind, name) {
                break;
            }
        }
        reply.ok();
    }
}

/// Whether thread `tid` has a signal waiting to be delivered. The kernel waits for a FUSE
/// read without letting signals in (this FUSE library does not answer interrupts), so a
/// blocked `trace_pipe` read that a signal is waiting on ends with EINTR: Ctrl-C and kill
/// work on a reader as on any pipe.
fn signalled(tid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{tid}/status")) else {
        // Gone: nobody waits for the answer.
        return true;
    };
    let mask = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    (mask("SigPnd:") | mask("ShdPnd:")) & !mask("SigBlk:") != 0
}

/// Answers a `trace_pipe` read by thread `reader` with at most `size` bytes of new lines,
/// waiting for them.
fn pipe_read(pipe: &Pipe, size: usize, reader: u32, reply: ReplyData) {
    let mut idle = Duration::from_millis(5);
    loop {
        if pipe.closed.load(Relaxed) {
            return reply.data(&[]);
        }
        if signalled(reader) {
            return reply.error(Errno::EINTR);
        }
        {
            let mut state = pipe.state.lock().unwrap_or_else(|e| e.into_inner());
            let (follower, pending) = &mut *state;
            if pending.is_empty() {
                match follower.poll() {
                    Ok(poll) => {
                        let mut decoder = Decoder::new(&poll.snapshot, TimeFormat::Relative);
                        for item in Merge::snapshot(&poll.snapshot, &Filter::default()) {
                            decoder.line(&item, pending);
                        }
                        let lost: u64 = poll.lost.iter().sum();
                        if lost > 0 {
                            pending.extend_from_slice(
                                format!(
                                    "# {lost} entries lost (overwritten before they were read)\n"
                                )
                                .as_bytes(),
                            );
                        }
                    }
                    Err(e) => return reply.error(eio(&e.to_string())),
                }
            }
            if !pending.is_empty() {
                // Whole lines when they fit.
                let mut n = pending.len().min(size);
                if n < pending.len() {
                    if let Some(end) = pending[..n].iter().rposition(|&b| b == b'\n') {
                        n = end + 1;
                    }
                }
                reply.data(&pending[..n]);
                pending.drain(..n);
                return;
            }
        }
        std::thread::sleep(idle);
        idle = (idle * 2).min(Duration::from_millis(50));
    }
}

fn version_text(dev: &Reader) -> String {
    let v = dev.version();
    let ver = |x: u32| format!("{}.{}", x >> 16, x & 0xffff);
    let clock = match v.clock.source {
        ttrace_layouts::device::ClockSource::Tsc => "tsc",
        ttrace_layouts::device::ClockSource::MonotonicNs => "monotonic_ns",
    };
    format!(
        "magic {:#018x}\nheader_version {}\nshared_data_version {}\npercpu_data_version {}\ncpus {}\nring_slots {}\naux_size {}\nmeta_size {}\nmax_tracepoints {}\nclock {clock}\nclock_hz {}\ncreated {}\ncreator_pid {}\nsource {}\n",
        // Opening checked it: a device is read only if its header has the magic.
        ttrace_layouts::device::MAGIC,
        ver(v.header_version),
        ver(v.shared_data_version),
        ver(v.percpu_data_version),
        v.num_cpus,
        v.ring_slots,
        v.aux_size,
        v.meta_size,
        v.max_tracepoints,
        v.clock.hz,
        decode::utc(v.clock.anchor_realtime_ns),
        v.creator_pid,
        dev.dir().display(),
    )
}

/// The definitions and names, one per line: `values NAME flags|enum LABEL=VALUE ...`,
/// `tracepoint ID NAME KIND classes=0x.. nargs=N format="..."` (then `types=...` where the
/// writer recorded its arguments' types), `process PID TIMESTAMP NAME`, `thread PID TID
/// TIMESTAMP NAME` (names take effect at their timestamp, in the device's clock).
fn meta_text(dev: &Reader) -> String {
    let m = dev.metadata();
    let mut s = String::new();
    let mut quoted = Vec::new();
    for v in &m.values {
        let kind = match v.kind {
            devttrace::ValuesKind::Flags => "flags",
            devttrace::ValuesKind::Enum => "enum",
        };
        s += &format!("values {} {kind}", v.name);
        for (name, value) in &v.entries {
            s += &format!(" {name}={value:#x}");
        }
        s.push('\n');
    }
    for t in &m.tracepoints {
        quoted.clear();
        crate::format::quoted(&mut quoted, t.format.as_bytes());
        s += &format!(
            "tracepoint {} {} {} classes={:#x} nargs={} format={}",
            t.id,
            t.name,
            t.kind.name(),
            t.classes,
            t.nargs,
            String::from_utf8_lossy(&quoted)
        );
        if t.types.iter().any(|&ty| ty != devttrace::ArgType::Unknown) {
            let types: Vec<String> = t
                .types
                .iter()
                .map(|ty| format!("{ty:?}").to_lowercase())
                .collect();
            s += &format!(" types={}", types.join(","));
        }
        s.push('\n');
    }
    for p in &m.processes {
        s += &format!("process {} {} {}\n", p.pid, p.timestamp, p.name);
    }
    for t in &m.threads {
        let renamed = if t.renamed { " (renamed)" } else { "" };
        s += &format!(
            "thread {} {} {} {}{renamed}\n",
            t.pid, t.tid, t.timestamp, t.name
        );
    }
    s
}

/// The aux buffers as the device's `aux` file lays them out (one buffer of `aux_size`
/// bytes per ring, records at their offsets), each copied consistently.
fn aux_bytes(dev: &Reader) -> devttrace::Result<Vec<u8>> {
    let size = dev.version().aux_size;
    let copies = dev.aux_copies()?;
    let mut out = vec![0u8; size as usize * copies.len()];
    for (c, buffer) in copies.iter().zip(out.chunks_exact_mut(size as usize)) {
        c.place_into(buffer);
    }
    Ok(out)
}

/// What is mounted at a point, as `/proc/self/mountinfo` says.
struct MountEntry {
    /// The file system type (`fuse`, `fuse.ttrace`, `tmpfs`).
    fstype: String,
    /// What is mounted (`ttrace:DEVICE` for a device this program mounted).
    source: String,
}

impl MountEntry {
    /// Whether it is a device mounted by `ttrace-reader mount` (a FUSE mount named
    /// `ttrace:DEVICE`).
    fn is_ttrace(&self) -> bool {
        self.source.starts_with("ttrace:")
            && (self.fstype == "fuse" || self.fstype.starts_with("fuse."))
    }
}

/// A field of `/proc/self/mountinfo` with its escapes (`\040` for a space) undone.
fn unescape(field: &str) -> std::ffi::OsString {
    use std::os::unix::ffi::OsStringExt;
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                out.push(d.iter().fold(0u8, |v, c| v.wrapping_mul(8) + (c - b'0')));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    std::ffi::OsString::from_vec(out)
}

/// `path` as the mount table names it: absolute, symbolic links resolved (but for its last
/// component when it cannot be, as at a dead mount).
fn resolved(path: &Path) -> PathBuf {
    if let Ok(p) = path.canonicalize() {
        return p;
    }
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    match (abs.parent(), abs.file_name()) {
        (Some(parent), Some(name)) => parent
            .canonicalize()
            .map_or_else(|_| abs.clone(), |p| p.join(name)),
        _ => abs,
    }
}

/// What is mounted at `point` (the topmost mount where several are stacked), if anything.
fn mounted_at(point: &Path) -> Option<MountEntry> {
    let point = resolved(point);
    let table = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    table
        .lines()
        // The last line for the point is the topmost mount there.
        .rev()
        .find_map(|line| {
            // `ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE OPTIONS`
            let fields: Vec<&str> = line.split(' ').collect();
            let dash = fields.iter().skip(6).position(|f| *f == "-")? + 6;
            let field = |i: usize| Some(unescape(fields.get(i)?).to_string_lossy().into_owned());
            let entry = MountEntry {
                fstype: field(dash + 1)?,
                source: field(dash + 2)?,
            };
            (Path::new(&unescape(fields.get(4)?)) == point).then_some(entry)
        })
}

/// Whether the FUSE mount at `point` is dead: its process is gone (killed), and every access
/// fails with ENOTCONN. Asked with `statfs`, which the kernel always passes on to the file
/// system (attributes it may answer from its cache for a while).
fn dead(point: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(point.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a NUL-terminated path; statfs writes only the struct it is given.
    let failed = unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        libc::statfs(c.as_ptr(), &mut st) != 0
    };
    failed
        && matches!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::ENOTCONN | libc::ECONNABORTED)
        )
}

/// Makes `mountpoint` ready to mount on: an empty directory where nothing is mounted,
/// created if missing (with its missing parents). Returns the directories it created,
/// outermost first, for [`remove_dirs`]. A dead ttrace mount there (its process was killed)
/// is unmounted, with a note.
fn prepare(mountpoint: &Path) -> Result<Vec<PathBuf>, Error> {
    let at = || mountpoint.to_path_buf();
    // Stacked dead mounts are unmounted one by one, down to the directory.
    for _ in 0..16 {
        let Some(m) = mounted_at(mountpoint) else {
            break;
        };
        if !m.is_ttrace() {
            return Err(Error::MountPointInUse {
                path: at(),
                fstype: m.fstype,
                mounted: m.source,
            });
        }
        if !dead(mountpoint) {
            return Err(Error::AlreadyMounted {
                path: at(),
                mounted: m.source,
            });
        }
        unmount(mountpoint, true)?;
        eprintln!(
            "ttrace-reader: note: {}: a ttrace mount whose process is gone was still there; \
             unmounted it",
            mountpoint.display()
        );
    }
    match std::fs::metadata(mountpoint) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => create_dirs(mountpoint),
        Err(source) => Err(Error::File { path: at(), source }),
        Ok(meta) if !meta.is_dir() => Err(Error::MountPointNotADirectory(at())),
        Ok(_) => match std::fs::read_dir(mountpoint).map(|mut d| d.next().is_some()) {
            Ok(true) => Err(Error::MountPointNotEmpty(at())),
            Ok(false) => Ok(Vec::new()),
            Err(source) => Err(Error::File { path: at(), source }),
        },
    }
}

/// Creates `path` and those of its parents that are missing: the directories created,
/// outermost first (one another process made meanwhile is not counted).
fn create_dirs(path: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut missing = Vec::new();
    let mut p = path;
    while std::fs::symlink_metadata(p).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        missing.push(p.to_path_buf());
        match p.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => p = parent,
            _ => break,
        }
    }
    let mut created = Vec::new();
    for dir in missing.into_iter().rev() {
        match std::fs::create_dir(&dir) {
            Ok(()) => created.push(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => {}
            Err(source) => {
                remove_dirs(&created);
                return Err(Error::File { path: dir, source });
            }
        }
    }
    Ok(created)
}

/// Removes the directories [`create_dirs`] created, innermost first, while they are empty.
fn remove_dirs(created: &[PathBuf]) {
    for dir in created.iter().rev() {
        if std::fs::remove_dir(dir).is_err() {
            break;
        }
    }
}

/// Serves `device` at `mountpoint` until SIGINT, SIGTERM or SIGHUP, or until it is
/// unmounted (`ttrace-reader umount`, `fusermount3 -u`). The mount point must be an empty
/// directory where nothing is mounted (a dead ttrace mount there is unmounted first); one
/// that is missing is created, with its missing parents, and what was created is removed
/// after.
pub fn mount(device: &Path, mountpoint: &Path, trust: Trust) -> Result<(), Error> {
    let dev = Reader::open_with(device, trust)?;
    for line in crate::decode::damaged_extents(&dev) {
        eprintln!("ttrace-reader: {line}");
    }
    let meta = std::fs::metadata(dev.dir()).map_err(|source| Error::File {
        path: device.to_path_buf(),
        source,
    })?;
    use std::os::unix::fs::MetadataExt;
    let dev: &'static Reader = Box::leak(Box::new(dev));
    let created = prepare(mountpoint)?;
    let remove = |r: Result<(), Error>| {
        remove_dirs(&created);
        r
    };
    // SIGINT, SIGTERM and SIGHUP are taken by a thread of ours (every thread, the
    // session's included, inherits the mask set here): it unmounts, and the session then
    // ends.
    let ending = crate::signals::take();
    let fs = TraceFs {
        dev,
        trust,
        cpus: dev.version().num_cpus,
        uid: meta.uid(),
        gid: meta.gid(),
        open: Mutex::new(HashMap::new()),
        next_fh: AtomicU64::new(1),
    };
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        // The device's absolute path: `umount` and a later `mount` know the mount by it.
        MountOption::FSName(format!(
            "ttrace:{}",
            std::path::absolute(dev.dir())
                .unwrap_or_else(|_| dev.dir().to_path_buf())
                .display()
        )),
        MountOption::Subtype("ttrace".into()),
        MountOption::DefaultPermissions,
        MountOption::NoDev,
        MountOption::NoSuid,
        MountOption::NoExec,
    ];
    let mut session = match fuser::Session::new(fs, mountpoint, &config) {
        Ok(s) => s,
        Err(source) => {
            return remove(Err(Error::CannotMount {
                path: mountpoint.to_path_buf(),
                source,
            }))
        }
    };
    let mut unmounter = session.unmount_callable();
    let mp = mountpoint.to_path_buf();
    ending.on_signal(move |_| {
        if let Err(e) = unmounter.unmount() {
            eprintln!("ttrace-reader mount: {}: unmount: {e}", mp.display());
        }
    });
    println!(
        "mounted {} at {} (Ctrl-C or `ttrace-reader umount {}` to unmount)",
        dev.dir().display(),
        mountpoint.display(),
        mountpoint.display()
    );
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let ran = session.run().map_err(Error::Io);
    remove(ran)
}

/// Unmounts the device that `ttrace-reader mount` mounted at `mountpoint` (lazily when its
/// process is gone); refuses anything else.
pub fn umount(mountpoint: &Path) -> Result<(), Error> {
    let path = || mountpoint.to_path_buf();
    match mounted_at(mountpoint) {
        None => Err(Error::NotMounted(path())),
        Some(m) if !m.is_ttrace() => Err(Error::NotATtraceMount {
            path: path(),
            fstype: m.fstype,
            mounted: m.source,
        }),
        Some(_) => unmount(mountpoint, dead(mountpoint)),
    }
}

/// Unmounts `mountpoint`: directly when allowed (root), else with `fusermount3 -u`; `lazy`
/// detaches it even while busy (a dead mount).
fn unmount(mountpoint: &Path, lazy: bool) -> Result<(), Error> {
    use std::os::unix::ffi::OsStrExt;
    let path = || mountpoint.to_path_buf();
    let c = std::ffi::CString::new(mountpoint.as_os_str().as_bytes())
        .map_err(|_| Error::NulInPath(path()))?;
    let flags = if lazy { libc::MNT_DETACH } else { 0 };
    // A file closed an instant ago (or held across a fork by a process that is about to
    // exec) keeps the mount busy a little longer: try again for up to a second.
    let mut err = std::io::Error::from_raw_os_error(libc::EBUSY);
    for wait in (0..20).map(|k| std::time::Duration::from_millis(5 << (k / 4).min(3))) {
        // SAFETY: `c` is a NUL-terminated path.
        if unsafe { libc::umount2(c.as_ptr(), flags) } == 0 {
            return Ok(());
        }
        err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EBUSY) {
            break;
        }
        std::thread::sleep(wait);
    }
    if err.raw_os_error() == Some(libc::EBUSY) {
        return Err(Error::Busy(path()));
    }
    if err.raw_os_error() != Some(libc::EPERM) {
        return Err(Error::File {
            path: path(),
            source: err,
        });
    }
    for program in ["fusermount3", "fusermount"] {
        let mut command = std::process::Command::new(program);
        command.arg(if lazy { "-uz" } else { "-u" }).arg(mountpoint);
        match command.status() {
            Ok(s) if s.success() => return Ok(()),
            Ok(_) => {
                return Err(Error::UnmountFailed {
                    path: path(),
                    program,
                })
            }
            Err(_) => continue,
        }
    }
    Err(Error::NoFusermount {
        path: path(),
        source: err,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_fields_are_unescaped() {
        assert_eq!(unescape(r"/tmp/a\040b\011c\134d"), "/tmp/a b\tc\\d");
        assert_eq!(unescape(r"/tmp/a\04"), r"/tmp/a\04");
        assert_eq!(unescape(r"\"), r"\");
    }

    #[test]
    fn only_a_fuse_mount_named_ttrace_is_ours() {
        let entry = |fstype: &str, source: &str| MountEntry {
            fstype: fstype.into(),
            source: source.into(),
        };
        assert!(entry("fuse", "ttrace:/dev/shm/ttrace-0").is_ttrace());
        assert!(entry("fuse.ttrace", "ttrace:/x").is_ttrace());
        assert!(!entry("tmpfs", "ttrace:/x").is_ttrace());
        assert!(!entry("fuse.sshfs", "host:/x").is_ttrace());
    }
}
