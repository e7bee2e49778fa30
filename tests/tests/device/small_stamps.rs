//! A device whose clock started just before it: on a machine just booted the TSC is small
//! (below 2^40 for the first minutes), so a device's clock anchor and its first entries can
//! be just above 0. Such a device is read as any other — every reader, every format, the same
//! events at the same times since the device's creation — and its damaged entries are judged
//! exactly as those of a device of large stamps (issue 37).
//!
//! No clock can be made to read small here: a real device is written with this machine's
//! clock, and then every stamp it holds is moved back by one even number of ticks (its clock
//! anchor to [`SMALL`]): slots, each restartable ring's `last_stamp`, thread and process
//! names, the header's clear and snapshot times. Times since the anchor (and the
//! wall-clock times made from them) do not change, so what a reader shows must not either.

use devttrace::{Device, Follower, Reader};
use std::collections::BTreeMap;
use std::os::unix::fs::{DirBuilderExt, FileExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use ttrace_layouts::device::DeviceHeader;
use ttrace_layouts::entry::Stamp;
use ttrace_layouts::meta::{MetaHeader, Record};
use ttrace_tests::reader;
use ttrace_tests::typed::{damaged, dumped, make};

/// The clock anchor of a moved device (or one more: the move is by an even number of ticks,
/// which keeps a parent's stamp even and a continuation's odd).
const SMALL: u64 = 1_000;

/// Copies the device `from` to `to`, a new directory of the same mode.
fn copy_device(from: &Path, to: &Path) {
    std::fs::DirBuilder::new().mode(0o700).create(to).unwrap();
    for file in std::fs::read_dir(from).unwrap() {
        let file = file.unwrap();
        std::fs::copy(file.path(), to.join(file.file_name())).unwrap();
    }
}

/// A file of the device `dir`, open to read and write in place.
fn open(dir: &Path, name: &str) -> std::fs::File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join(name))
        .unwrap()
}

fn read_word(file: &std::fs::File, at: u64) -> u64 {
    let mut word = [0u8; 8];
    file.read_exact_at(&mut word, at).unwrap();
    u64::from_ne_bytes(word)
}

/// Moves every stamp the device `dir` holds back by the same even number of ticks, so that
/// its clock anchor is [`SMALL`] (or one more); returns that number. No process may write
/// the device meanwhile.
fn rebase(dir: &Path) -> u64 {
    // The anchor is a plain word of the header, not an atomic: written through the file,
    // before anything here maps it.
    let header = open(dir, "header");
    let at = core::mem::offset_of!(DeviceHeader, anchor_tsc) as u64;
    let anchor = read_word(&header, at);
    assert!(anchor > SMALL + 2, "a clock anchor of {anchor}");
    let shift = (anchor - SMALL) & !1;
    header
        .write_all_at(&(anchor - shift).to_ne_bytes(), at)
        .unwrap();
    drop(header);
    // The atomic words through a writable mapping. (All loads and stores here are Relaxed:
    // this thread alone writes the device, and the readers that read it afterwards are
    // other processes started later, or mappings made later by this thread.)
    let dev = Device::attach(dir).unwrap();
    let map = dev.mapping();
    let back = |w: &AtomicU64| {
        let v = w.load(Relaxed);
        if v != 0 {
            let moved = v.checked_sub(shift).filter(|&t| t >= SMALL);
            w.store(moved.expect("a stamp before the anchor"), Relaxed);
        }
    };
    for r in 0..map.num_rings() {
        for slot in map.ring(r).slots() {
            // Committed entries only: an empty slot stays 0, a claim keeps its pid and
            // position.
            if Stamp(slot.words[0].load(Relaxed)).is_committed() {
                back(&slot.words[0]);
            }
        }
        // (Aux records hold strings, whose time is 0: their entry's.)
        back(&map.ring_header(r).last_stamp);
    }
    let h = map.header();
    back(&h.cleared_at);
    back(&h.last_snapshot_at);
    // The names, in the half of the names area in use: through the file (the mapping has
    // them for their own protocol only).
    let half = h.names_generation.load(Relaxed) & 1;
    let used = h.names_used[half as usize].load(Relaxed);
    let meta = open(dir, "meta");
    let mut page = vec![0u8; core::mem::size_of::<MetaHeader>()];
    meta.read_exact_at(&mut page, 0).unwrap();
    let mh = <MetaHeader as zerocopy::FromBytes>::read_from_bytes(&page[..]).unwrap();
    let base = mh.names_offset + half * mh.names_half;
    let mut area = vec![0u8; used as usize];
    meta.read_exact_at(&mut area, base).unwrap();
    let mut records = ttrace_layouts::meta::records(&area);
    let mut names = 0;
    loop {
        let start = records.offset() as u64;
        match records.next() {
            Some(Ok(Record::Thread { task, .. } | Record::Process { task, .. })) => {
                // The record's header (8 bytes), then the timestamp at 8 in its fixed part.
                let at = base + start + 8 + 8;
                assert_eq!(read_word(&meta, at), task.timestamp);
                let moved = task.timestamp.checked_sub(shift).filter(|&t| t >= SMALL);
                let moved = moved.expect("a name recorded before the anchor");
                meta.write_all_at(&moved.to_ne_bytes(), at).unwrap();
                names += 1;
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => panic!("{}: names: {e}", dir.display()),
            None => break,
        }
    }
    assert!(names > 0, "no names moved");
    let moved = Reader::open(dir).unwrap().version().clock.anchor_ticks;
    assert_eq!(moved, anchor - shift);
    shift
}

/// The output of each reader command of the device `dir` (text, or the files it wrote),
/// `scratch` a directory for those files.
fn read_all(dir: &Path, scratch: &Path) -> BTreeMap<String, String> {
    let dev = dir.to_str().unwrap();
    let mut out = BTreeMap::new();
    let dump = reader!("dump", dev).ok();
    // A window by time since the creation, as the first column shows it.
    let times: Vec<&str> = dump
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(times.len() > 60, "{dump}");
    let (since, until) = (times[10], times[times.len() / 2]);
    let runs: Vec<Vec<&str>> = vec![
        vec!["dump", "--utc"],
        vec!["dump", "--since", since, "--until", until],
        vec!["dump", "--since", "-1ms"],
        vec!["dump", "--until", "0.000000001"],
        vec!["dump", "--cpu", "1", "--filter", "file_*"],
        vec!["report"],
        vec!["report", "--json"],
        vec!["report", "--by", "thread", "--since", since],
        vec!["report", "--histogram", "file_open"],
        vec!["stats"],
    ];
    out.insert("dump".to_string(), dump.clone());
    for args in runs {
        let mut cmd = reader!(args[0], dev);
        cmd = cmd.args(&args[1..]);
        out.insert(args.join(" "), cmd.ok());
    }
    let exports = scratch.join("exports");
    let _ = std::fs::remove_dir_all(&exports);
    std::fs::create_dir(&exports).unwrap();
    for format in ["chrome", "perfetto", "otlp", "otlp-proto", "uftrace", "ctf"] {
        let to = exports.join(format);
        reader!("export", "--format", format, dev, "-o", &to).ok();
        for (name, bytes) in exported(&to) {
            // Binary formats as hex: compared, not read.
            out.insert(format!("export {format} {name}"), hex(&bytes));
        }
    }
    // A snapshot, and what the readers make of it.
    let file = scratch.join("snapshot");
    let said = reader!("snapshot", dev, "-o", &file, "--force").ok();
    out.insert("snapshot".to_string(), said);
    for args in [
        vec!["dump"],
        vec!["report", "--json"],
        vec!["stats"],
        vec!["follow"],
    ] {
        let cmd = reader!(args[0], &file).args(&args[1..]);
        out.insert(format!("{} of the snapshot", args.join(" ")), cmd.ok());
    }
    // The raw entries of each CPU (as a mounted device's `cpuN` files), decoded.
    let reader = Reader::open(dir).unwrap();
    let raw: Vec<PathBuf> = (0..reader.version().num_cpus as usize)
        .map(|cpu| {
            let f = scratch.join(format!("cpu{cpu}.raw"));
            std::fs::write(&f, ttrace_reader::raw::cpu_entries(&reader, cpu).unwrap()).unwrap();
            f
        })
        .collect();
    let decoded = reader!("decode", "--device", dev).args(&raw).ok();
    out.insert("decode".to_string(), decoded);
    out
}

/// The files under `path` (itself, if a file), by their path under it.
fn files(path: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut all = BTreeMap::new();
    if path.is_file() {
        all.insert(String::new(), std::fs::read(path).unwrap());
        return all;
    }
    for e in std::fs::read_dir(path).unwrap() {
        let e = e.unwrap();
        for (name, bytes) in files(&e.path()) {
            let name = format!("{}/{name}", e.file_name().to_str().unwrap());
            all.insert(name, bytes);
        }
    }
    all
}

/// The files an export wrote at `path`, a CTF trace's UUID (random: made per export) as
/// zeros.
fn exported(path: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut all = files(path);
    let Some(text) = all
        .get("metadata/")
        .and_then(|m| std::str::from_utf8(m).ok())
    else {
        return all;
    };
    let at = text.find("uuid = \"").expect("a CTF trace's UUID") + 8;
    let uuid = text[at..at + 36].to_string();
    let digits: Vec<u8> = uuid.bytes().filter(|&b| b != b'-').collect();
    let bytes: Vec<u8> = digits
        .chunks(2)
        .map(|d| u8::from_str_radix(std::str::from_utf8(d).unwrap(), 16).unwrap())
        .collect();
    for file in all.values_mut() {
        for pattern in [uuid.as_bytes(), &bytes[..]] {
            let mut i = 0;
            while i + pattern.len() <= file.len() {
                if &file[i..i + pattern.len()] == pattern {
                    file[i..i + pattern.len()].fill(b'0');
                }
                i += 1;
            }
        }
    }
    all
}

/// Text as it is, other bytes in hex.
fn hex(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_string(),
        Err(_) => bytes.iter().map(|b| format!("{b:02x}")).collect(),
    }
}

/// What a follower of the device `dir` reads from its start (each event with its time since
/// the device's creation), and which rules a matcher fires on it (with the time of the event
/// that fired each).
fn followed(dir: &Path) -> (Vec<String>, Vec<String>) {
    let reader = Reader::open(dir).unwrap();
    let anchor = reader.version().clock.anchor_ticks;
    let rules = [
        "latency file_open max",
        "latency file_open > 0ns",
        "event pingpong if seq >= 30",
        "latency ttrace_test_spans::call > 0ns",
    ];
    let mut matcher =
        ttrace_reader::matcher::Matcher::new(rules.iter().map(|r| r.parse().unwrap()).collect());
    let mut follower = Follower::from_start(&reader, 0);
    let (mut events, mut fired) = (Vec::new(), Vec::new());
    for poll in [follower.poll().unwrap(), follower.finish().unwrap()] {
        assert_eq!(poll.late, 0);
        assert!(poll.lost.iter().all(|&n| n == 0), "{:?}", poll.lost);
        for (r, ring) in poll.snapshot.cpus.iter().enumerate() {
            assert_eq!(ring.damaged, 0);
            for e in &ring.events {
                let (t, word, ctx) = (e.stamp - anchor, e.type_word.0, e.ctx);
                events.push(format!("{t} ring{r} {word:x} {ctx:x} {:?}", e.args()));
            }
        }
        for f in matcher.poll(&poll, reader.now()) {
            fired.push(format!("{} {} {}", f.stamp - anchor, rules[f.rule], f.what));
        }
    }
    (events, fired)
}

/// Every reader of a device whose clock anchor and first entries are just above 0 gives what
/// it gave of the same device before its stamps were moved there.
#[test]
fn every_reader_reads_a_device_whose_clock_started_just_before_it_as_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    // Pairs, strings, continuations, named threads on both CPUs; `tracing` spans (polls of
    // span instances) in a second process.
    ttrace_tests::test_app!(&dir, 20).ok();
    ttrace_tests::cli::Cli::new(env!("CARGO_BIN_EXE_ttrace-test-spans"))
        .env("TTRACE_DIR", &dir)
        .arg("8")
        .ok();
    let before = read_all(&dir, tmp.path());
    let (events, fired) = followed(&dir);
    assert!(events.len() > 100, "{events:#?}");
    assert!(fired.len() >= 10, "{fired:#?}");
    let shift = rebase(&dir);
    let reader = Reader::open(&dir).unwrap();
    let clock = reader.version().clock;
    assert!(clock.anchor_ticks <= SMALL + 1);
    // The first entries are just above the anchor, as on a machine just booted.
    let view = devttrace::View::of(&reader, 0).unwrap();
    let first = view
        .cpus
        .iter()
        .filter_map(|r| r.events.first())
        .map(|m| m.stamp);
    let first = first.min().unwrap();
    assert!(first < 1 << 40, "first stamp {first}, shift {shift}");
    assert_eq!(view.cpus.iter().map(|r| r.damaged).sum::<u64>(), 0);
    drop(view);
    let after = read_all(&dir, tmp.path());
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    for (what, text) in &before {
        assert_same_text(what, text, &after[what]);
    }
    // Pairs measured, and span instances.
    let report: serde_json::Value = serde_json::from_str(&after["report --json"]).unwrap();
    let report = report.to_string();
    assert!(report.contains("file_open"), "{report}");
    assert!(report.contains("ttrace_test_spans::call"), "{report}");
    assert_eq!(followed(&dir), (events, fired));
}

/// Changes word `word` of slot `slot` of ring `ring` of the device `dir` with `f` (Relaxed:
/// this thread alone writes the device, and reads it afterwards through other mappings).
fn with_word(dir: &Path, ring: usize, slot: usize, word: usize, f: impl Fn(u64) -> u64) {
    let dev = Device::attach(dir).unwrap();
    let w = &dev.mapping().ring(ring).slots()[slot].words[word];
    w.store(f(w.load(Relaxed)), Relaxed);
}

/// A stamp word (or another) as the damage of a case makes it: from the word, the device's
/// clock anchor and its clock now.
type Damage = fn(u64, u64, u64) -> u64;

/// A copy of the device `from` at `tmp/case` (one path for every case: the readers' texts
/// may name it), word `word` of the first slot of ring cpu1 changed by `f`, and what `dump`
/// shows of it: its event lines and its footer.
fn damaged_copy(
    tmp: &Path,
    from: &Path,
    word: usize,
    f: Damage,
) -> (PathBuf, Vec<String>, Vec<String>) {
    let dir = tmp.join("case");
    let _ = std::fs::remove_dir_all(&dir);
    copy_device(from, &dir);
    let reader = Reader::open(&dir).unwrap();
    let anchor = reader.version().clock.anchor_ticks;
    let now = reader.now();
    with_word(&dir, 1, 0, word, |w| f(w, anchor, now));
    let (lines, footer) = dumped(&Reader::open(&dir).unwrap());
    (dir, lines, footer)
}

/// Each impossible field of the first event of ring cpu1 (`typed`, i = 0), on a device of
/// large stamps and on the same device moved to small ones: the same event is gone, counted
/// as one damaged entry, and everything else is as it was.
#[test]
fn a_damaged_entry_is_judged_alike_at_small_stamps() {
    let tmp = tempfile::tempdir().unwrap();
    let orig = tmp.path().join("orig");
    drop(make(&orig));
    let cases: Vec<(&str, usize, Damage)> = vec![
        ("cpu1024 on a 2-CPU device", 1, |t, _, _| t | 1 << (8 + 10)),
        ("an unknown tracepoint", 1, |t, _, _| t | 1 << (20 + 9)),
        ("a pid no process can have", 2, |c, _, _| c | 1 << 62),
        ("a bool that is 2", 3, |_, _, _| 2),
        // The latest even stamp (a parent's) before the anchor.
        ("a time before the device", 0, |_, anchor, _| {
            (anchor - 2) & !1
        }),
        ("a time long before the device", 0, |_, anchor, _| {
            (anchor / 2) & !1
        }),
        ("the time 2", 0, |_, _, _| 2),
        // Later than the clock of the read can be, whatever the device's clock.
        ("a time after the read", 0, |s, _, now| {
            (s.max(now) + (1 << 48)) & !1
        }),
        ("the latest time a stamp can hold", 0, |_, _, _| {
            (Stamp::CLAIMED - 1) & !1
        }),
    ];
    let plain = tmp.path().join("plain");
    let small = tmp.path().join("small");
    copy_device(&orig, &plain);
    copy_device(&orig, &small);
    rebase(&small);
    let (base, base_footer) = dumped(&Reader::open(&plain).unwrap());
    assert_eq!(base.len(), 26, "{base:#?}");
    assert_eq!(damaged(&base_footer), 0);
    let (moved, moved_footer) = dumped(&Reader::open(&small).unwrap());
    assert_eq!((&moved, &moved_footer), (&base, &base_footer));
    for (what, word, f) in cases {
        let mut seen = Vec::new();
        for (name, from) in [("plain", &plain), ("small", &small)] {
            let (dir, lines, footer) = damaged_copy(tmp.path(), from, word, f);
            let gone: Vec<&String> = base.iter().filter(|l| !lines.contains(l)).collect();
            assert_eq!(gone.len(), 1, "{what} ({name}): {gone:#?}");
            assert!(gone[0].contains(" typed(b=false c='x'"), "{what}: {gone:?}");
            assert_eq!(lines.len(), base.len() - 1, "{what} ({name})");
            assert_eq!(damaged(&footer), 1, "{what} ({name}): {footer:#?}");
            let cpu1 = footer.iter().find(|l| l.starts_with("# cpu1: ")).unwrap();
            assert!(cpu1.ends_with(", 1 entries damaged"), "{what}: {cpu1}");
            // The other readers leave it out and count it too, without a panic.
            let stats = reader!("stats", &dir).ok();
            assert!(
                stats.contains(", 1 entries damaged"),
                "{what} ({name}): {stats}"
            );
            seen.push((lines, footer, reader_texts(&dir, tmp.path())));
        }
        assert_alike(what, &seen[0], &seen[1]);
    }
}

/// Slot stamps that are no damage a check finds, but no entry either: an empty slot (0), a
/// continuation's stamp in a parent's slot (odd: 1, the anchor's neighbour), a claim. The
/// device of small stamps shows and counts them as the one of large stamps does: the event
/// gone, its entry lost (or, for a claim whose writer may still be writing, not yet).
#[test]
fn a_stamp_that_is_no_entry_is_read_alike_at_small_stamps() {
    let tmp = tempfile::tempdir().unwrap();
    let orig = tmp.path().join("orig");
    drop(make(&orig));
    // What is written, and the entries lost then.
    let cases: Vec<(&str, Damage, u64)> = vec![
        ("an empty slot", |_, _, _| 0, 1),
        ("the stamp 1", |_, _, _| 1, 1),
        ("the anchor's odd neighbour", |_, anchor, _| anchor | 1, 1),
        ("a claim of an impossible pid", |_, _, _| u64::MAX, 1),
        ("a claim of pid 0", |_, _, _| Stamp::CLAIMED, 0),
    ];
    let small = tmp.path().join("small");
    copy_device(&orig, &small);
    rebase(&small);
    for (what, f, lost) in cases {
        let mut seen = Vec::new();
        for (name, from) in [("plain", &orig), ("small", &small)] {
            let (dir, lines, footer) = damaged_copy(tmp.path(), from, 0, f);
            assert_eq!(lines.len(), 25, "{what} ({name}): {lines:#?}");
            let total = footer.last().unwrap();
            assert!(
                total.contains(&format!(" {lost} entries lost,")) && damaged(&footer) == 0,
                "{what} ({name}): {total}"
            );
            seen.push((lines, footer, reader_texts(&dir, tmp.path())));
        }
        assert_alike(what, &seen[0], &seen[1]);
    }
}

/// Fails, naming `what` and the first line that differs, unless `plain` and `small` are the
/// same text.
fn assert_same_text(what: &str, plain: &str, small: &str) {
    if plain == small {
        return;
    }
    let differs = plain.lines().zip(small.lines()).find(|(x, y)| x != y);
    let (x, y) = differs.unwrap_or(("(the same lines)", "(another number of lines)"));
    panic!("{what}: {x}\n---- at small stamps ----\n{y}");
}

/// Fails, naming `what` and the first line that differs, unless `plain` and `small` (what
/// a device and the same device at small stamps gave) are equal.
fn assert_alike(what: &str, plain: &Seen, small: &Seen) {
    let lines = |s: &Seen| -> Vec<String> { s.0.iter().chain(&s.1).chain(&s.2).cloned().collect() };
    let (a, b) = (lines(plain), lines(small));
    for (x, y) in a.iter().zip(&b) {
        assert_same_text(what, x, y);
    }
    assert_eq!(a.len(), b.len(), "{what}");
}

/// What a damaged device shows: `dump`'s lines, its footer, the other readers' texts.
type Seen = (Vec<String>, Vec<String>, Vec<String>);

/// What the command line's readers other than `dump` show of the device `dir` (`scratch`
/// for the files they write): each must succeed.
fn reader_texts(dir: &Path, scratch: &Path) -> Vec<String> {
    let mut texts = vec![
        reader!("report", "--json", dir).ok(),
        reader!("dump", "--since", "0", dir).ok(),
    ];
    let exports = scratch.join("exports");
    let _ = std::fs::remove_dir_all(&exports);
    std::fs::create_dir(&exports).unwrap();
    for format in ["chrome", "perfetto", "otlp", "uftrace", "ctf"] {
        let to = exports.join(format);
        reader!("export", "--format", format, dir, "-o", &to).ok();
        texts.extend(
            exported(&to)
                .into_iter()
                .map(|(n, b)| format!("{n} {}", hex(&b))),
        );
    }
    let file = scratch.join("case.snapshot");
    reader!("snapshot", dir, "-o", &file, "--force").ok();
    texts.push(reader!("dump", &file).ok().lines().skip(1).collect());
    let reader = Reader::open(dir).unwrap();
    let mut follower = Follower::from_start(&reader, 0);
    let poll = follower.finish().unwrap();
    let anchor = reader.version().clock.anchor_ticks;
    for (r, ring) in poll.snapshot.cpus.iter().enumerate() {
        let times: Vec<u64> = ring.events.iter().map(|e| e.stamp - anchor).collect();
        texts.push(format!("ring{r}: {times:?}, {} damaged", ring.damaged));
    }
    texts
}

/// A follower releases an event stamped at a time no event of the device can have (a
/// damaged stamp: before its clock anchor, or beyond the clock) at once, as damaged: never
/// counted late (older than what it released before), never held for a watermark that will
/// not pass it. At small stamps as at large ones.
#[test]
fn a_follower_counts_an_impossible_time_as_damage_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let orig = tmp.path().join("orig");
    drop(make(&orig));
    let small = tmp.path().join("small");
    copy_device(&orig, &small);
    rebase(&small);
    let cases: Vec<(&str, Damage)> = vec![
        ("a time before the device", |_, anchor, _| (anchor - 2) & !1),
        ("the time 2", |_, _, _| 2),
        ("a time after the read", |_, _, now| (now + (1 << 48)) & !1),
        ("the latest time a stamp can hold", |_, _, _| {
            (Stamp::CLAIMED - 1) & !1
        }),
    ];
    for (what, f) in cases {
        for (name, from) in [("plain", &orig), ("small", &small)] {
            let dir = tmp.path().join("case");
            let _ = std::fs::remove_dir_all(&dir);
            copy_device(from, &dir);
            let reader = Reader::open(&dir).unwrap();
            let anchor = reader.version().clock.anchor_ticks;
            let mut follower = Follower::from_start(&reader, 0);
            let poll = follower.poll().unwrap();
            let events: usize = poll.snapshot.cpus.iter().map(|r| r.events.len()).sum();
            assert_eq!((events, poll.late), (26, 0), "{what} ({name})");
            // A new entry in ring cpu1 (a copy of its first, a `typed`), its stamp then
            // damaged. (Relaxed: this thread alone writes the device, and reads it after.)
            let dev = Device::attach(&dir).unwrap();
            let map = dev.mapping();
            let ring = map.ring(1);
            let last = &map.ring_header(1).last_stamp;
            let words: [u64; 7] =
                core::array::from_fn(|k| ring.slots()[0].words[k + 1].load(Relaxed));
            let at = ring.reader().head() as usize;
            let t = last.load(Relaxed) + 1_000;
            ring.write_restartable(last, t, &words, None, usize::MAX)
                .unwrap();
            let stamp = &ring.slots()[at].words[0];
            stamp.store(f(t, anchor, reader.now()), Relaxed);
            let poll = follower.poll().unwrap();
            let cpu1 = &poll.snapshot.cpus[1];
            assert_eq!(
                (cpu1.events.len(), cpu1.damaged, poll.late),
                (0, 1, 0),
                "{what} ({name})"
            );
            assert!(!follower.poll().unwrap().active, "{what} ({name}): held");
            let end = follower.finish().unwrap();
            let events: usize = end.snapshot.cpus.iter().map(|r| r.events.len()).sum();
            assert_eq!((events, end.late), (0, 0), "{what} ({name})");
            assert_eq!(follower.totals()[1].counts.damaged, 1, "{what} ({name})");
        }
    }
}
