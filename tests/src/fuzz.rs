//! The fuzz targets' bodies: each takes arbitrary bytes and drives one reader of device
//! data, asserting what must hold for any input. `fuzz/` runs them under libFuzzer; the
//! `fuzz_regressions` test replays the saved corpus and every crash input through the very
//! same functions, so a fixed crash stays fixed.
//!
//! | target     | what the bytes are                                   | what it reads   |
//! |------------|------------------------------------------------------|-----------------|
//! | `open`     | edits of a real device's files ([`Edit`])            | the whole reader: open, dump, stats, follow |
//! | `ring`     | a ring's counters and slots                          | ring snapshot, index, late copy |
//! | `aux`      | aux `first`, `last` and buffer words                 | aux snapshot and parser |
//! | `metadata` | a metadata records area                              | metadata parser, formats |
//! | `ctl`      | control command lines                                | ctl parser and `apply` |
//! | `decode`   | a CPU's raw entries, as a mounted device serves them | `decode`        |
//! | `snapshot` | edits of a real snapshot file's bytes ([`Edit`])     | the whole reader, on a snapshot file |

use core::sync::atomic::AtomicU64;
use devttrace::aux::{AuxSnapshot, AuxSnapshots};
use devttrace::ring::HeapRing;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use ttrace_layouts::aux::{aux_ref, AuxTag, AUX_MAX_PAYLOAD};
use ttrace_layouts::entry::MAX_ARGS;

/// A directory on tmpfs where there is one (a device's files are rewritten per input).
fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        tempfile::tempdir_in(shm).expect("scratch directory")
    } else {
        tempfile::tempdir().expect("scratch directory")
    }
}

/// A small device holding one of everything: events of 0, 5 and 12 arguments on two rings,
/// a string argument, a message, names of a thread and a process, and a control rule.
fn make_device(dir: &Path) -> ttrace_core::Writer {
    let dev = ttrace_core::Writer::open(&ttrace_core::Config {
        aux_bytes: ttrace_layouts::device::MIN_AUX_BYTES,
        meta_bytes: 12288,
        max_tracepoints: 8,
        ..crate::config(dir, 8, 2)
    })
    .expect("fuzz device");
    let ctx = 7 << 32 | 9;
    let tick = crate::define(&dev, "tick", "");
    let five = crate::define(&dev, "five", "a={a} b={b:x} c={c:d} d={d:f} e={e}");
    let twelve = crate::define(
        &dev,
        "twelve",
        "{a} {b} {c} {d} {e} {f} {g} {h} {i} {j} {k} {l:x}",
    );
    let text = crate::define(&dev, "text", "s={s:s}");
    // Typed arguments and value tables (their records and the references to them).
    static FLAGS: ttrace_core::ValueTable = ttrace_core::ValueTable::new(
        "FLAGS",
        ttrace_core::ValuesKind::Flags,
        &[("NONE", 0), ("R", 1), ("W", 2)],
    );
    static STATE: ttrace_core::ValueTable = ttrace_core::ValueTable::new(
        "STATE",
        ttrace_core::ValuesKind::Enum,
        &[("Idle", 0), ("Busy", 1)],
    );
    static TABLES: &[&ttrace_core::ValueTable] = &[&FLAGS, &STATE];
    use ttrace_core::ArgType::{Bool, Char, Signed, Unsigned};
    let (_, typed) = dev
        .device()
        .register_tracepoint(&ttrace_core::Definition {
            name: "typed",
            kind: ttrace_core::Kind::Entry,
            classes: 1,
            format: "f={f:FLAGS} s={s:STATE} n={n} ok={ok} c={c}",
            nargs: 5,
            types: &[Unsigned, Signed, Signed, Bool, Char],
            tables: TABLES,
            role: ttrace_core::Role::Point,
        })
        .expect("typed tracepoint");
    dev.device()
        .note_thread(7, 9, "worker")
        .expect("thread name");
    dev.device().note_process(7, "app").expect("process name");
    for i in 0..3u64 {
        dev.emit(tick, ctx, &[]);
        dev.emit(
            five,
            ctx,
            &[i, 0xff, -3i64 as u64, 1.5f64.to_bits(), u64::MAX],
        );
        dev.emit(
            twelve,
            ctx,
            &core::array::from_fn::<u64, 12, _>(|k| k as u64 + i),
        );
    }
    let off = dev
        .aux_write(AuxTag::String, ctx, b"a \"string\"\n")
        .expect("aux");
    dev.emit(text, ctx, &[off]);
    dev.emit(typed, ctx, &[7, 1, -2i64 as u64, 1, 'x' as u64]);
    assert!(crate::message(&dev, ctx, "a message"), "a message");
    dev.device().apply_text("disable fi*").expect("rule");
    dev
}

/// The files of a small real device, by name: what [`open`] edits.
fn base_files() -> &'static [(String, Vec<u8>)] {
    static FILES: OnceLock<Vec<(String, Vec<u8>)>> = OnceLock::new();
    FILES.get_or_init(|| {
        let tmp = scratch();
        let dir = tmp.path().join("dev");
        drop(make_device(&dir));
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
            .expect("device directory")
            .map(|e| {
                let e = e.expect("entry");
                let name = e.file_name().to_string_lossy().into_owned();
                (name, std::fs::read(e.path()).expect("device file"))
            })
            .collect();
        files.sort();
        files
    })
}

/// One edit of a device's files, as [`open`] decodes it from its input. A file is chosen
/// by index (modulo the number of files) and offsets are taken modulo its length, so every
/// input means something.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Edit {
    /// Overwrite bytes at an offset (cut at the end of the file).
    Write { file: u8, at: u16, bytes: Vec<u8> },
    /// Store a 64-bit word at an offset rounded down to 8.
    Word { file: u8, at: u16, value: u64 },
    /// Cut the file to a length.
    Truncate { file: u8, len: u16 },
    /// Append bytes.
    Append { file: u8, bytes: Vec<u8> },
    /// Remove the file.
    Remove { file: u8 },
    /// Replace the file by a symlink to another one.
    Symlink { file: u8, to: u8 },
    /// Make the file group- and world-writable.
    Writable { file: u8 },
}

/// Interesting values for [`Edit::Word`]: a byte below 16 picks one, others take the raw
/// word that follows.
const WORDS: [u64; 16] = [
    0,
    1,
    2,
    3,
    7,
    8,
    16,
    64,
    4096,
    1 << 14,
    1 << 24,
    1 << 32,
    u32::MAX as u64,
    i64::MAX as u64,
    u64::MAX,
    u64::MAX - 7,
];

impl Edit {
    /// Decodes a list of edits; bytes that do not make a whole edit are ignored.
    pub fn decode(mut data: &[u8]) -> Vec<Edit> {
        fn take<'a>(data: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
            let (a, b) = (data.get(..n)?, data.get(n..)?);
            *data = b;
            Some(a)
        }
        fn u16_at(b: &[u8]) -> u16 {
            u16::from_le_bytes([b[0], b[1]])
        }
        let mut edits = Vec::new();
        while let Some(&[op, file]) = take(&mut data, 2) {
            let edit = match op % 7 {
                0 => take(&mut data, 3).and_then(|h| {
                    let bytes = take(&mut data, h[2] as usize)?.to_vec();
                    Some(Edit::Write {
                        file,
                        at: u16_at(h),
                        bytes,
                    })
                }),
                1 => take(&mut data, 3).and_then(|h| {
                    let value = match WORDS.get(h[2] as usize) {
                        Some(&v) => v,
                        None => u64::from_le_bytes(take(&mut data, 8)?.try_into().ok()?),
                    };
                    Some(Edit::Word {
                        file,
                        at: u16_at(h),
                        value,
                    })
                }),
                2 => take(&mut data, 2).map(|h| Edit::Truncate {
                    file,
                    len: u16_at(h),
                }),
                3 => take(&mut data, 1).and_then(|h| {
                    Some(Edit::Append {
                        file,
                        bytes: take(&mut data, h[0] as usize)?.to_vec(),
                    })
                }),
                4 => Some(Edit::Remove { file }),
                5 => take(&mut data, 1).map(|h| Edit::Symlink { file, to: h[0] }),
                _ => Some(Edit::Writable { file }),
            };
            match edit {
                Some(e) => edits.push(e),
                None => break,
            }
        }
        edits
    }
}

thread_local! {
    /// The scratch directory `open` writes devices into, one per thread (tests run in
    /// parallel threads of one process).
    static OPEN_DIR: (tempfile::TempDir, PathBuf) = {
        let tmp = scratch();
        let dir = tmp.path().join("dev");
        (tmp, dir)
    };
}

/// Applies a byte edit (`Write`, `Word`, `Truncate`, `Append`) to `b`; the others are
/// about files, not bytes, and change nothing here.
fn edit_bytes(b: &mut Vec<u8>, e: &Edit) {
    match e {
        Edit::Write { at, bytes, .. } => {
            if !b.is_empty() {
                let at = *at as usize % b.len();
                let n = bytes.len().min(b.len() - at);
                b[at..at + n].copy_from_slice(&bytes[..n]);
            }
        }
        Edit::Word { at, value, .. } => {
            if b.len() >= 8 {
                let at = (*at as usize % (b.len() - 7)) & !7;
                b[at..at + 8].copy_from_slice(&value.to_ne_bytes());
            }
        }
        Edit::Truncate { len, .. } => {
            let len = *len as usize % (b.len() + 1);
            b.truncate(len);
        }
        Edit::Append { bytes, .. } => b.extend_from_slice(bytes),
        Edit::Remove { .. } | Edit::Symlink { .. } | Edit::Writable { .. } => {}
    }
}

/// Writes the base device with `edits` applied into `dir` (replacing what was there).
fn write_device(dir: &Path, edits: &[Edit]) {
    let base = base_files();
    let mut files: Vec<Option<Vec<u8>>> = base.iter().map(|(_, b)| Some(b.clone())).collect();
    let mut links = Vec::new();
    let mut writable = Vec::new();
    let pick = |f: u8| f as usize % base.len();
    for e in edits {
        match e {
            Edit::Remove { file } => files[pick(*file)] = None,
            Edit::Symlink { file, to } => links.push((pick(*file), pick(*to))),
            Edit::Writable { file } => writable.push(pick(*file)),
            Edit::Write { file, .. }
            | Edit::Word { file, .. }
            | Edit::Truncate { file, .. }
            | Edit::Append { file, .. } => {
                if let Some(b) = &mut files[pick(*file)] {
                    edit_bytes(b, e);
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(dir);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(dir)
        .expect("device directory");
    for ((name, _), bytes) in base.iter().zip(&files) {
        if let Some(bytes) = bytes {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(dir.join(name))
                .expect("device file");
            f.write_all(bytes).expect("device file");
        }
    }
    for (file, to) in links {
        let path = dir.join(&base[file].0);
        let _ = std::fs::remove_file(&path);
        let _ = std::os::unix::fs::symlink(&base[to].0, &path);
    }
    for file in writable {
        let path = dir.join(&base[file].0);
        let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666));
    }
}

/// Runs everything a user can run on a device: open it, dump it in both time formats,
/// print its stats, follow it twice and read its control file. Any input may be refused
/// with an error; nothing may panic, hang or allocate beyond the size of the files.
/// Returns the bytes the dumps wrote, or `None` if the device was refused.
pub fn read_device(dir: &Path) -> Option<usize> {
    use ttrace_reader::decode::{self, TimeFormat};
    use ttrace_reader::merge::{Filter, Merge};
    let dev = devttrace::Reader::open(dir).ok()?;
    let version = dev.version();
    let status = dev.status();
    let _ = (version.clock.realtime_ns(u64::MAX), status.mask);
    let mut out = Vec::new();
    if let Ok(view) = devttrace::View::of(&dev, 0) {
        for time in [TimeFormat::Relative, TimeFormat::Utc] {
            decode::dump(&view, &Filter::default(), time, None, &mut out).expect("to memory");
        }
        let filter = Filter {
            cpus: vec![0],
            name: Some("t*".into()),
            since_ns: Some(1),
            until_ns: None,
        };
        decode::dump(&view, &filter, TimeFormat::Relative, None, &mut out).expect("to memory");
        for cpu in 0..dev.cpus() {
            let n = view.events(cpu).count() as u64;
            assert!(n <= dev.version().ring_slots, "more events than slots");
        }
    }
    if let Ok(view) = devttrace::View::of(&dev, 0) {
        // The Chrome export is always valid JSON; the CTF metadata always builds.
        let mut json = Vec::new();
        let items = Merge::view(&view, &Filter::default());
        ttrace_reader::export::chrome::write((&view).into(), &view.cpus, items, &mut json, |_| {})
            .expect("to memory");
        if let Err(e) = serde_json::from_slice::<serde_json::Value>(&json) {
            panic!("invalid JSON ({e}): {}", String::from_utf8_lossy(&json));
        }
        let schemas = ttrace_reader::export::Schema::all(&view.meta);
        let _ = ttrace_reader::export::ctf::metadata(
            &schemas,
            &[0; 16],
            &(&view).into(),
            &Default::default(),
        );
        out.extend_from_slice(&json);
        // The uftrace export (records, argument data, text files) writes whatever it read.
        let dir = tempfile::tempdir().expect("temporary directory");
        let items = Merge::view(&view, &Filter::default());
        let uftrace = dir.path().join("u");
        ttrace_reader::export::uftrace::write((&view).into(), &view.cpus, items, &uftrace, |_| {})
            .expect("to a temporary directory");
    }
    if let Ok(snap) = dev.snapshot() {
        let mut decoder = decode::Decoder::new(&snap, TimeFormat::Relative);
        for item in Merge::snapshot(&snap, &Filter::default()) {
            decoder.line(&item, &mut out);
        }
    }
    let mut follower = devttrace::Follower::new(&dev);
    for _ in 0..2 {
        if let Ok(poll) = follower.poll() {
            let _ = poll.snapshot.events();
        }
    }
    let _ = dev.ctl();
    let meta = dev.metadata();
    let _ = dev.enabled_all(&meta);
    Some(out.len())
}

/// Target `open`: a real device's files, edited as the input says ([`Edit::decode`]), read
/// with [`read_device`].
pub fn open(data: &[u8]) -> Option<usize> {
    OPEN_DIR.with(|(_, dir)| {
        write_device(dir, &Edit::decode(data));
        read_device(dir)
    })
}

/// A snapshot file of the small real device ([`make_device`]), as `ttrace-reader snapshot`
/// writes it: what [`snapshot`] edits.
fn base_snapshot() -> &'static [u8] {
    static FILE: OnceLock<Vec<u8>> = OnceLock::new();
    FILE.get_or_init(|| {
        let tmp = scratch();
        let dir = tmp.path().join("dev");
        drop(make_device(&dir));
        let file = tmp.path().join("snap.ttrace");
        devttrace::Reader::open(&dir)
            .and_then(|d| d.save(&file))
            .expect("a snapshot of the small device");
        std::fs::read(&file).expect("the snapshot file")
    })
}

thread_local! {
    /// The file `snapshot` writes each input into, one per thread.
    static SNAPSHOT_FILE: (tempfile::TempDir, PathBuf) = {
        let tmp = scratch();
        let file = tmp.path().join("edited.ttrace");
        (tmp, file)
    };
}

/// Target `snapshot`: a real snapshot file, its bytes edited as the input says (the byte
/// edits of [`Edit::decode`]: writes, words, cuts, appends), read with [`read_device`] as
/// `dump`, `stats` and the exports read a snapshot file: as edited (the checksums find the
/// damage), then with its checksums made again ([`reseal`]: what the structure's own checks
/// must refuse). Returns what the second read gave.
pub fn snapshot(data: &[u8]) -> Option<usize> {
    let mut bytes = base_snapshot().to_vec();
    for e in Edit::decode(data) {
        edit_bytes(&mut bytes, &e);
    }
    SNAPSHOT_FILE.with(|(_, file)| {
        std::fs::write(file, &bytes).expect("the edited snapshot");
        read_device(file);
        reseal(&mut bytes);
        std::fs::write(file, &bytes).expect("the resealed snapshot");
        read_device(file)
    })
}

/// Makes the checksums of a snapshot file's bytes again, as far as its heads can be
/// followed: its header page's, and each extent's (of its bytes and of its head), so that
/// edits of what they cover are taken for what was written. (A file too short is left as it
/// is; one of another version gets its header page's.)
pub fn reseal(b: &mut [u8]) {
    use ttrace_layouts::snapshot::{
        ExtentHead, SnapshotHeader, EXTENT_HEAD_BYTES, PAGE, SNAPSHOT_VERSION,
    };
    use zerocopy::{FromBytes, IntoBytes};
    let Ok((mut head, _)) = SnapshotHeader::read_from_prefix(b) else {
        return;
    };
    head.seal();
    b[..PAGE as usize].copy_from_slice(head.as_bytes());
    if head.version >> 16 != SNAPSHOT_VERSION >> 16 {
        return;
    }
    let mut at = PAGE as usize;
    let h = EXTENT_HEAD_BYTES as usize;
    while at + h <= b.len() {
        let Ok(e) = ExtentHead::read_from_bytes(&b[at..at + h]) else {
            return;
        };
        let data = at + h;
        let Some(end) = usize::try_from(e.len)
            .ok()
            .and_then(|l| data.checked_add(l))
            .filter(|&end| end <= b.len())
        else {
            let mut e = e;
            e.head_sum = e.own_sum();
            b[at..at + h].copy_from_slice(e.as_bytes());
            return;
        };
        let mut sealed = ExtentHead::of(e.at, &b[data..end]);
        sealed.len = e.len;
        sealed.head_sum = sealed.own_sum();
        b[at..at + h].copy_from_slice(sealed.as_bytes());
        at = end;
    }
}

fn words(data: &[u8]) -> impl Iterator<Item = u64> + '_ {
    data.chunks(8).map(|c| {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        u64::from_le_bytes(w)
    })
}

/// Target `ring`: byte 0 picks the ring size (2 to 64 slots), words 1..4 are `head`,
/// `skipped` and a time to read newer than, and the rest fill the slots. The snapshot, the
/// index and the late copies must agree with each other.
pub fn ring(data: &[u8]) {
    let Some((&size, rest)) = data.split_first() else {
        return;
    };
    let slots = 2usize << (size % 6);
    let mut w = words(rest);
    let mem = HeapRing::<AtomicU64>::new(slots);
    let (head, skipped, since) = (
        w.next().unwrap_or(0),
        w.next().unwrap_or(0),
        w.next().unwrap_or(0),
    );
    mem.head.store(head, core::sync::atomic::Ordering::Relaxed);
    mem.skipped
        .store(skipped, core::sync::atomic::Ordering::Relaxed);
    for (slot, word) in mem.slots.iter().flatten().zip(w) {
        slot.store(word, core::sync::atomic::Ordering::Relaxed);
    }
    let ring = mem.ring();
    for newer_than in [0, since] {
        let keep = devttrace::Keep::newer_than(newer_than, devttrace::clear::Cleared::default());
        let snap = ring.walk::<devttrace::Event>(&keep, &mut ());
        let index = ring.walk::<devttrace::Mark>(&keep, &mut ());
        assert!(snap.events.len() <= slots);
        assert_eq!(snap.events.len(), index.events.len(), "index and snapshot");
        for (e, &mark) in snap.events.iter().zip(&index.events) {
            assert!(e.stamp > newer_than);
            assert!(e.args().len() <= MAX_ARGS);
            assert_eq!(ring.event(mark).as_ref(), Some(e), "late copy of {mark:?}");
        }
        assert!(
            snap.events.windows(2).all(|p| p[0].stamp <= p[1].stamp),
            "time order"
        );
    }
}

/// Target `aux`: byte 0 picks the buffer size (4 to 512 words), words 1..3 are `first` and
/// `last`, the rest fill the buffer. Every record returned must lie in the buffer, in
/// order, with a payload no longer than a record can hold. Returns how many records the
/// parser found.
pub fn aux(data: &[u8]) -> usize {
    let Some((&size, rest)) = data.split_first() else {
        return 0;
    };
    let n = 4usize << (size % 8);
    let mut w = words(rest);
    let (first, last) = (w.next().unwrap_or(0), w.next().unwrap_or(0));
    let mut buf: Vec<u64> = w.take(n).collect();
    buf.resize(n, 0);
    let atomics: Vec<AtomicU64> = buf.iter().map(|&v| AtomicU64::new(v)).collect();
    let check = |s: &AuxSnapshot| {
        let mut at = s.first;
        for r in s.records() {
            assert!(r.offset >= at && r.offset < s.last, "record out of order");
            assert!(r.bytes.len() as u64 <= AUX_MAX_PAYLOAD);
            assert_eq!(s.get(r.offset), Some(r));
            at = r.offset + 1;
        }
    };
    if let Ok(s) = devttrace::aux::snapshot(&AtomicU64::new(first), &AtomicU64::new(last), &atomics)
    {
        check(&s);
        // Rendered as a string argument, each record is quoted without a panic.
        let mut out = Vec::new();
        let all = AuxSnapshots {
            buffers: vec![std::sync::Arc::new(s.clone())],
        };
        for r in s.records() {
            let piece = ttrace_reader::format::parse("{s:s}");
            ttrace_reader::format::render(&mut out, &piece, &[aux_ref(0, r.offset)], &all);
        }
    }
    // The parser alone, on the words as a copy starting at `first`.
    let parsed = devttrace::aux::parse(buf, first, first, last);
    check(&parsed);
    parsed.len()
}

/// Target `metadata`: the bytes are a metadata records area. The walk ends within the
/// area; every tracepoint's format parses and renders with any argument words.
pub fn metadata(data: &[u8]) {
    let mut records = ttrace_layouts::meta::records(data);
    let mut last = 0;
    while records.next().is_some() {
        assert!(records.offset() >= last && records.offset() <= data.len());
        last = records.offset();
    }
    let meta = devttrace::meta::Metadata::parse(data);
    let args: Vec<u64> = words(data).take(MAX_ARGS).collect();
    let mut out = Vec::new();
    for t in &meta.tracepoints {
        let pieces = ttrace_reader::format::parse(&t.format);
        ttrace_reader::format::render(&mut out, &pieces, &args, &AuxSnapshots::default());
    }
    if let Some(t) = meta.threads.first() {
        let _ = meta.thread_name(t.pid, t.tid);
    }
}

/// The writable device `ctl` applies commands to, one per process.
fn ctl_device() -> &'static ttrace_core::Writer {
    static DEV: OnceLock<(tempfile::TempDir, ttrace_core::Writer)> = OnceLock::new();
    &DEV.get_or_init(|| {
        let tmp = scratch();
        let dev = make_device(&tmp.path().join("dev"));
        (tmp, dev)
    })
    .1
}

/// Target `ctl`: each line is a control command. A command that parses is applied, and
/// then the mask and the rules are what it says; one that does not changes nothing.
pub fn ctl(data: &[u8]) {
    use devttrace::control::Command;
    use devttrace::rules::rules_enable;
    let dev = ctl_device();
    let text = String::from_utf8_lossy(data);
    for line in text.lines().take(16) {
        let before = (dev.device().reader().mask(), dev.device().reader().rules());
        match line.parse::<Command>() {
            Err(_) => assert!(
                dev.device().apply_text(line).is_err(),
                "{line:?} parsed once"
            ),
            Ok(cmd) => {
                let applied = dev.device().apply(&cmd);
                match (&cmd, applied) {
                    (Command::SetMask { value, mask }, Ok(_)) => {
                        assert_eq!(dev.device().reader().mask() & mask, value & mask)
                    }
                    (Command::SetBits(b), Ok(_)) => {
                        assert_eq!(dev.device().reader().mask() & b, *b)
                    }
                    (Command::ClearBits(b), Ok(_)) => {
                        assert_eq!(dev.device().reader().mask() & b, 0)
                    }
                    (Command::Enable(p) | Command::Disable(p), Ok(_)) => {
                        // A pattern matches itself, and the newest rule decides.
                        let on = matches!(cmd, Command::Enable(_));
                        assert_eq!(
                            rules_enable(&dev.device().reader().rules(), p),
                            on,
                            "{line:?}"
                        );
                    }
                    (Command::On(r), Ok(_)) => {
                        // Installed once, last, and enabling or disabling nothing.
                        let rules = dev.device().reader().snapshot_rules();
                        assert_eq!(rules.last(), Some(r), "{line:?}");
                        assert_eq!(rules.iter().filter(|x| *x == r).count(), 1);
                        assert_eq!(dev.device().reader().mask(), before.0);
                    }
                    (Command::Off(r), Ok(_)) => {
                        let rules = dev.device().reader().snapshot_rules();
                        assert!(r == "all" && rules.is_empty() || !rules.contains(r));
                    }
                    (Command::Reset, Ok(_)) => {
                        assert_eq!(
                            (dev.device().reader().mask(), dev.device().reader().rules()),
                            (u64::MAX, String::new())
                        )
                    }
                    (_, Err(_)) => assert_eq!(
                        (dev.device().reader().mask(), dev.device().reader().rules()),
                        before
                    ),
                }
            }
        }
    }
    // Keep the rules from filling up across inputs: every input starts from a reset device.
    dev.device().apply(&Command::Reset).expect("reset");
}

/// The device `decode` resolves names, formats and strings against, one per process.
fn decode_device() -> &'static devttrace::Reader {
    static DEV: OnceLock<(tempfile::TempDir, devttrace::Reader)> = OnceLock::new();
    &DEV.get_or_init(|| {
        let tmp = scratch();
        make_device(&tmp.path().join("dev"));
        let dev = devttrace::Reader::open(tmp.path().join("dev")).expect("reader");
        (tmp, dev)
    })
    .1
}

/// Target `decode`: bytes as `ttrace-reader decode` reads them (a `cpuN` file of a mounted
/// device). Whole, well-formed entries decode to one line per event against a small device;
/// anything else is an error naming an entry's offset inside the input; never a panic.
pub fn decode(data: &[u8]) {
    use ttrace_reader::decode::{Decoder, TimeFormat};
    use ttrace_reader::merge::{Filter, Merge};
    let limits = ttrace_reader::raw::Limits::of(&decode_device().version());
    match ttrace_reader::raw::parse(data, &limits) {
        Err(e) => assert!(e.offset <= data.len() as u64 && e.offset % 64 == 0, "{e}"),
        Ok(events) => {
            let n = events.len() as u64;
            assert!(n * 64 <= data.len() as u64);
            let snap = ttrace_reader::raw::snapshot(decode_device(), vec![events]);
            let mut out = Vec::new();
            Decoder::new(&snap, TimeFormat::Relative)
                .write_all(Merge::snapshot(&snap, &Filter::default()), &mut out)
                .expect("decode into memory");
            assert_eq!(out.iter().filter(|&&b| b == b'\n').count() as u64, n);
        }
    }
}

/// Seed inputs for each target, made from the small real device: an unedited device, its
/// rings, its aux buffer, its metadata area and every control command.
pub fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let files = base_files();
    let file = |name: &str| {
        &files
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("device file {name}"))
            .1
    };
    let word = |b: &[u8], at: usize| u64::from_ne_bytes(b[at..at + 8].try_into().expect("8"));
    let mut seeds = vec![("open", Vec::new()), ("snapshot", Vec::new())];
    for cpu in ["cpu0", "cpu1"] {
        let b = file(cpu);
        let mut s = vec![2u8]; // 8 slots
        for w in [word(b, 128), word(b, 64), 0] {
            s.extend_from_slice(&w.to_le_bytes());
        }
        s.extend_from_slice(&b[ttrace_layouts::ring::RING_HEADER_BYTES..]);
        seeds.push(("ring", s));
    }
    // The aux buffer that holds the records (that of the ring the device's writer used):
    // its `first` and `last` from the ring's header, its words from the aux file.
    let a = file("aux");
    let (first, last) = (
        core::mem::offset_of!(ttrace_layouts::ring::RingHeader, aux_first),
        core::mem::offset_of!(ttrace_layouts::ring::RingHeader, aux_last),
    );
    let ring = (0..4)
        .find(|&r| word(file(&ttrace_layouts::ring::ring_name(r, 2)), last) > 0)
        .expect("a buffer with records");
    let header = file(&ttrace_layouts::ring::ring_name(ring, 2));
    let mut s = vec![7u8]; // 512 words
    for at in [first, last] {
        s.extend_from_slice(&word(header, at).to_le_bytes());
    }
    // The buffer's records start at its offset 0.
    let base = ring * ttrace_layouts::device::MIN_AUX_BYTES as usize;
    s.extend_from_slice(&a[base..base + 512 * 8]);
    seeds.push(("aux", s));
    let tmp = scratch();
    seeds.push((
        "metadata",
        make_device(&tmp.path().join("dev"))
            .device()
            .mapping()
            .registry()
            .records_bytes(),
    ));
    // A CPU's entries as a mounted device serves them, cut, shifted and with an unknown
    // tracepoint.
    let entries: Vec<u8> = (0..2)
        .flat_map(|c| ttrace_reader::raw::cpu_entries(decode_device(), c).expect("entries"))
        .collect();
    assert!(entries.len() >= 128, "the device's events");
    seeds.push(("decode", entries.clone()));
    seeds.push(("decode", entries[..entries.len() - 10].to_vec()));
    seeds.push(("decode", entries[8..].to_vec()));
    let mut unknown = entries[..64].to_vec();
    unknown[8 + 2] = 0x7f; // tracepoint id bits of the type word
    seeds.push(("decode", unknown));
    seeds.push((
        "ctl",
        b"setmask 0x5 0xf\nsetbits 3\nclrbits 1\nenable a*\ndisable b?c\nreset\nsetbits x\n"
            .to_vec(),
    ));
    seeds
}

/// Index of the device file `name` in [`Edit`]'s numbering.
pub fn file_index(name: &str) -> u8 {
    base_files()
        .iter()
        .position(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("device file {name}")) as u8
}
