//! Snapshot files: a device saved to one file reads back as the device did, and a damaged
//! snapshot file is refused with the reason.

use devttrace::{Error, Problem, Reader};
use std::path::Path;
use ttrace_layouts::aux::AuxTag;
use ttrace_layouts::device::HeaderError;
use ttrace_layouts::snapshot::{Layout, EXTENT_HEAD_BYTES};
use ttrace_tests::reader;
use zerocopy::FromBytes;

/// `n` events `step(n=.. s="string ..")` of thread 1/2, named `worker`.
fn steps(w: &ttrace_core::Writer, n: u64) {
    let word = ttrace_tests::define(w, "step", "n={n} s={s:s}");
    w.device().note_thread(1, 2, "worker").unwrap();
    for n in 0..n {
        let s = w
            .aux_write(
                AuxTag::String,
                1 << 32 | 2,
                format!("string {n}").as_bytes(),
            )
            .unwrap();
        w.emit(word, 1 << 32 | 2, &[n, s]);
    }
}

/// A device whose rings have wrapped, with strings, messages, names and a control rule.
fn make(dir: &Path) -> ttrace_core::Writer {
    let w = ttrace_core::Writer::open(&ttrace_tests::config(dir, 8, 2)).unwrap();
    steps(&w, 20);
    assert!(ttrace_tests::message(&w, 1 << 32 | 2, "a message"));
    w.device().apply_text("disable other*").unwrap();
    w
}

#[test]
fn a_saved_device_reads_back_as_the_device_did() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let _w = make(&dir);
    let dev = Reader::open(&dir).unwrap();
    let file = tmp.path().join("trace.ttrace");
    let saved = dev.save(&file).unwrap();
    assert_eq!((saved.counts.claimed, saved.counts.changed), (0, 0));
    let live = dev.snapshot().unwrap();
    let snap = Reader::open(&file).unwrap();
    let frozen = snap.snapshot().unwrap();
    assert_eq!(frozen.version, live.version);
    assert_eq!(frozen.status, live.status);
    assert_eq!(frozen.meta, live.meta);
    assert_eq!(frozen.aux, live.aux);
    assert_eq!(frozen.enabled, live.enabled);
    for (a, b) in frozen.cpus.iter().zip(&live.cpus) {
        assert_eq!(a.events, b.events);
        assert_eq!(
            (a.head, a.committed, a.lost, a.claimed),
            (b.head, b.committed, b.lost, b.claimed)
        );
    }
    assert!(
        live.cpus.iter().map(|r| r.lost).sum::<u64>() > 0,
        "rings wrapped"
    );
    assert_eq!(
        saved.counts.committed,
        live.cpus.iter().map(|r| r.committed).sum::<u64>()
    );
    assert_eq!(snap.ctl(), dev.ctl());
    // Saving a snapshot over the very file it was opened from is safe: the copy is made
    // beside it and renamed over it.
    snap.save(&file).unwrap();
    drop(snap);
    let again = Reader::open(&file).unwrap().snapshot().unwrap();
    assert_eq!(again.aux, live.aux);
    assert_eq!(again.meta, live.meta);
    for (a, b) in again.cpus.iter().zip(&live.cpus) {
        assert_eq!(a.events, b.events);
    }
    // A snapshot cannot be controlled.
    assert!(matches!(
        devttrace::Device::attach_with(&file, devttrace::Trust::Own),
        Err(Error::ReadOnly(_))
    ));
}

/// What the error of a case must be.
type Expect = Box<dyn Fn(&Error) -> bool>;

/// An `Error::BadSnapshot` whose problem passes `f`.
fn invalid(f: impl Fn(&Problem) -> bool + 'static) -> Expect {
    Box::new(move |e| matches!(e, Error::BadSnapshot { problem, .. } if f(problem)))
}

#[test]
fn damaged_snapshot_files_are_refused_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let _w = make(&dir);
    let good = tmp.path().join("good.ttrace");
    Reader::open(&dir).unwrap().save(&good).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let ring_slots_at = ttrace_layouts::snapshot::HEADER_DATA_AT as usize
        + core::mem::offset_of!(ttrace_layouts::device::DeviceHeader, ring_slots);
    let extents_at = ttrace_layouts::snapshot::EXTENTS_AT as usize;
    let count_at = core::mem::offset_of!(ttrace_layouts::snapshot::SnapshotHeader, extents);
    let image_len = Layout::of(
        &ttrace_layouts::device::DeviceHeader::read_from_bytes(
            &bytes[ttrace_layouts::snapshot::HEADER_DATA_AT as usize..extents_at],
        )
        .unwrap(),
    )
    .unwrap()
    .file_len;
    // Extent 1 (the first after the device header) rewritten: its head is `at, len`.
    let with_extent1 = |at: u64, len: u64| {
        let mut b = bytes.clone();
        b[extents_at..extents_at + 8].copy_from_slice(&at.to_ne_bytes());
        b[extents_at + 8..extents_at + 16].copy_from_slice(&len.to_ne_bytes());
        b
    };
    let len1 = u64::from_ne_bytes(bytes[extents_at + 8..extents_at + 16].try_into().unwrap());
    let extent = |offset: usize| {
        invalid(move |p| {
            *p == Problem::Extent {
                offset: offset as u64,
            }
        })
    };
    let cases: Vec<(&str, Vec<u8>, Expect)> = vec![
        // Not a snapshot at all: no device.
        (
            "empty",
            Vec::new(),
            Box::new(|e| matches!(e, Error::Missing(_))),
        ),
        (
            "cut",
            bytes[..bytes.len() - 4096].to_vec(),
            invalid(|p| matches!(p, Problem::Length { .. })),
        ),
        (
            "cut by a word",
            bytes[..bytes.len() - 8].to_vec(),
            invalid(|p| matches!(p, Problem::Length { .. })),
        ),
        (
            "cut to the header page",
            bytes[..4096].to_vec(),
            invalid(|p| matches!(p, Problem::Length { .. })),
        ),
        (
            "an extent beyond the image",
            with_extent1(image_len - 8, len1),
            extent(extents_at),
        ),
        (
            "an extent whose end overflows",
            with_extent1(u64::MAX - 7, len1),
            extent(extents_at),
        ),
        (
            "an extent over the header page",
            with_extent1(0, len1),
            extent(extents_at),
        ),
        (
            "an extent over the device header",
            with_extent1(4096 + 64, len1),
            extent(extents_at),
        ),
        (
            "an extent longer than the file",
            with_extent1(8192, bytes.len() as u64),
            extent(extents_at),
        ),
        ("an empty extent", with_extent1(8192, 0), extent(extents_at)),
        (
            "an unaligned extent",
            with_extent1(8196, len1),
            extent(extents_at),
        ),
        (
            "more extents than the file holds",
            {
                let mut b = bytes.clone();
                let n = u64::from_ne_bytes(b[count_at..count_at + 8].try_into().unwrap());
                b[count_at..count_at + 8].copy_from_slice(&(n + 1).to_ne_bytes());
                b
            },
            extent(bytes.len()),
        ),
        (
            "fewer extents than the file holds",
            {
                let mut b = bytes.clone();
                let n = u64::from_ne_bytes(b[count_at..count_at + 8].try_into().unwrap());
                b[count_at..count_at + 8].copy_from_slice(&(n - 1).to_ne_bytes());
                b
            },
            invalid(|p| matches!(p, Problem::Extent { .. })),
        ),
        (
            "overlapping extents",
            {
                let mut b = bytes.clone();
                let second = extents_at + EXTENT_HEAD_BYTES as usize + len1 as usize;
                let first_at = b[extents_at..extents_at + 8].to_vec();
                b[second..second + 8].copy_from_slice(&first_at);
                b
            },
            invalid(|p| matches!(p, Problem::Extent { .. })),
        ),
        (
            "extent 0 not the device header",
            {
                let mut b = bytes.clone();
                b[4096..4104].copy_from_slice(&8192u64.to_ne_bytes());
                b
            },
            extent(4096),
        ),
        (
            "a snapshot version to come",
            {
                let mut b = bytes.clone();
                b[8..12].copy_from_slice(&(5u32 << 16).to_ne_bytes());
                b
            },
            invalid(|p| matches!(p, Problem::Header(HeaderError::Version { .. }))),
        ),
        (
            "bad magic",
            [b"garbage!".as_slice(), &bytes[8..]].concat(),
            Box::new(|e| matches!(e, Error::Missing(_))),
        ),
        (
            "other byte order",
            [
                ttrace_layouts::snapshot::SNAPSHOT_MAGIC
                    .swap_bytes()
                    .to_ne_bytes()
                    .as_slice(),
                &bytes[8..],
            ]
            .concat(),
            invalid(|p| matches!(p, Problem::Header(HeaderError::ByteOrder))),
        ),
        (
            "ring size changed",
            {
                let mut b = bytes.clone();
                b[ring_slots_at..ring_slots_at + 8].copy_from_slice(&16u64.to_ne_bytes());
                b
            },
            invalid(|p| matches!(p, Problem::Mismatch)),
        ),
        (
            "ring size not a power of two",
            {
                let mut b = bytes.clone();
                b[ring_slots_at..ring_slots_at + 8].copy_from_slice(&12u64.to_ne_bytes());
                b
            },
            invalid(|p| matches!(p, Problem::Header(HeaderError::Field { .. }))),
        ),
    ];
    // Each with its checksums made again: the structure's own checks refuse it.
    for (what, mut content, expected) in cases {
        let path = tmp.path().join(format!("{what}.ttrace"));
        ttrace_tests::fuzz::reseal(&mut content);
        std::fs::write(&path, content).unwrap();
        match Reader::open(&path) {
            Err(e) if expected(&e) => {}
            other => panic!("{what}: {:?}", other.err()),
        }
    }
    // A bit flipped where everything after depends on it: found by its checksum.
    let flipped = |at: usize| {
        let mut b = bytes.clone();
        b[at] ^= 0x10;
        b
    };
    let damaged = |offset: u64| {
        invalid(move |p| matches!(p, Problem::Damaged { offset: o, .. } if *o == offset))
    };
    let cases: Vec<(&str, Vec<u8>, Expect)> = vec![
        ("the version", flipped(10), damaged(0)),
        ("the layout", flipped(20), damaged(0)),
        ("the source text", flipped(100), damaged(0)),
        ("the header page's padding", flipped(3000), damaged(0)),
        ("the count of extents", flipped(count_at), damaged(0)),
        ("extent 0's head", flipped(4096 + 3), damaged(4096)),
        (
            "the device header",
            flipped(ring_slots_at + 1),
            damaged(4096),
        ),
        (
            "extent 1's image offset",
            flipped(extents_at + 1),
            damaged(extents_at as u64),
        ),
        (
            "extent 1's length",
            flipped(extents_at + 9),
            damaged(extents_at as u64),
        ),
        (
            "extent 1's checksum",
            flipped(extents_at + 17),
            damaged(extents_at as u64),
        ),
    ];
    for (what, content, expected) in cases {
        let path = tmp.path().join(format!("flipped {what}.ttrace"));
        std::fs::write(&path, content).unwrap();
        match Reader::open(&path) {
            Err(e) if expected(&e) => {}
            other => panic!("a bit flipped in {what}: {:?}", other.err()),
        }
    }
}

#[test]
fn dump_and_stats_read_a_snapshot_file_in_place_of_a_device() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let _w = make(&dir);
    let file = tmp.path().join("t.ttrace");
    let said = reader!("snapshot", &dir, "-o", &file).ok();
    assert!(said.contains(" entries"), "{said}");
    let body = |s: String| s.lines().skip(1).map(str::to_owned).collect::<Vec<_>>();
    let live = reader!("dump", &dir).ok();
    let saved = reader!("dump", &file).ok();
    assert_eq!(body(saved), body(live.clone()));
    assert!(live.contains("step(n=19 s=\"string 19\")"), "{live}");
    // The same counts; a live device's advice on its sizes is of the device, not the file.
    let live_only = |l: &String| !l.starts_with("note: the device keeps");
    let live: Vec<String> = body(reader!("stats", &dir).ok());
    assert_eq!(
        body(reader!("stats", &file).ok()),
        live.into_iter().filter(live_only).collect::<Vec<_>>()
    );
}

/// A ring's counts as a read gives them: `(head, committed, claimed, lost, after_cut)`.
type Counts = (u64, u64, u64, u64, u64);

fn counts<T>(r: &devttrace::RingSnapshot<T>) -> Counts {
    (r.head, r.committed, r.claimed, r.lost, r.after_cut)
}

/// Two threads, pinned (to two CPUs where there are two), write at least `each` events each
/// into a device of `slots`-slot rings (that has a ring of each kind for their CPUs) while
/// the reader takes snapshots, dumps' views and saved files over and over; `check` gets the
/// counts of each ring written (the restartable ones, or with `shared` the shared ones) of
/// each read, and whether the read was live (a saved file does not say how much was written
/// while it was saved).
///
/// The reads overlap the writes by construction, however the threads are scheduled: a
/// writer records only while a read is under way (after the reader said it began one, and
/// before it said it ended it), at most `each / 4` events during one read, and goes on until
/// it recorded at least `each` events and, in at least three different reads, an event that
/// began and ended while that read went on; the reader reads until the writers are done.
/// With `cap` (rings that must not wrap) a writer that would record more than `slots / 2`
/// events fails instead (one read ending during each of thousands of a writer's events).
fn read_while_writing(
    slots: u64,
    each: u64,
    shared: bool,
    cap: bool,
    check: impl Fn(Counts, bool),
) {
    use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    use std::time::{Duration, Instant};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let cpus = [ttrace_tests::cpu(0), ttrace_tests::cpu(1)];
    let n = *cpus.iter().max().unwrap() as u32 + 1;
    let w = std::sync::Arc::new(
        ttrace_core::Writer::open(&ttrace_tests::config(&dir, slots, n.max(2))).unwrap(),
    );
    assert!(w.restartable(), "{}", ttrace_tests::rseq::RSEQ_REQUIRED);
    let n = w.device().mapping().num_cpus() as usize;
    let word = ttrace_tests::define(&w, "n", "n={n}");
    let dev = Reader::open(&dir).unwrap();
    let file = tmp.path().join("s.ttrace");
    // The reader's progress: `2r + 1` while it takes read `r`, `2r + 2` once that is done.
    let progress = std::sync::Arc::new(AtomicU64::new(0));
    // Bounds on a failure (a hung thread), not ways to order anything.
    let deadline = Instant::now() + Duration::from_secs(120);
    let most = if cap { slots / 2 } else { u64::MAX };
    let per_read = each / 4;
    let writers: Vec<_> = (0..2u64)
        .map(|k| {
            let (w, progress) = (w.clone(), progress.clone());
            std::thread::spawn(move || {
                ttrace_tests::pin(k as usize);
                // Events written, and reads during which one was written whole.
                let (mut i, mut during) = (0u64, 0u64);
                let (mut read, mut in_read, mut confirmed) = (0, 0, false);
                while i < each || during < 3 {
                    assert!(i < most, "{i} events written, during {during} reads only");
                    let p = progress.load(SeqCst);
                    if p % 2 == 0 || (p == read && in_read == per_read) {
                        assert!(Instant::now() < deadline, "no read to write during");
                        std::thread::yield_now();
                        continue;
                    }
                    if p != read {
                        (read, in_read, confirmed) = (p, 0, false);
                    }
                    match shared {
                        true => w.emit_shared(word, 7 << 32 | k, &[i]),
                        false => w.emit(word, 7 << 32 | k, &[i]),
                    };
                    (i, in_read) = (i + 1, in_read + 1);
                    if !confirmed && progress.load(SeqCst) == p {
                        (confirmed, during) = (true, during + 1);
                    }
                }
                (i, during)
            })
        })
        .collect();
    // The rings the writers' CPUs write: restartable `c`, or shared `n + c`.
    let mut rings: Vec<usize> = cpus
        .iter()
        .map(|&c| c + if shared { n } else { 0 })
        .collect();
    rings.dedup();
    let mut reads = 0;
    while !writers.iter().all(|t| t.is_finished()) {
        assert!(Instant::now() < deadline, "the writers never finished");
        progress.store(2 * reads + 1, SeqCst);
        let snap = dev.snapshot().unwrap();
        let view = devttrace::View::of(&dev, 0).unwrap();
        dev.save(&file).unwrap();
        progress.store(2 * reads + 2, SeqCst);
        let saved = Reader::open(&file).unwrap().snapshot().unwrap();
        for &r in &rings {
            check(counts(&snap.cpus[r]), true);
            check(counts(&view.cpus[r]), true);
            check(counts(&saved.cpus[r]), false);
        }
        reads += 1;
    }
    let written: Vec<(u64, u64)> = writers.into_iter().map(|t| t.join().unwrap()).collect();
    // Everything is there, or was counted lost.
    let last = dev.snapshot().unwrap();
    let events: u64 = rings
        .iter()
        .map(|&r| last.cpus[r].events.len() as u64)
        .sum();
    let lost: u64 = rings.iter().map(|&r| last.cpus[r].lost).sum();
    assert_eq!(
        events + lost,
        written.iter().map(|w| w.0).sum::<u64>(),
        "{reads} reads; written, and during how many: {written:?}"
    );
    println!("{reads} reads; written, and during how many of them: {written:?}");
}

#[test]
fn reads_taken_while_writers_fill_rings_that_never_wrap_lose_nothing() {
    // Everything written before a read's cut is in it; what came after is counted as such.
    read_while_writing(
        1 << 16,
        20_000,
        false,
        true,
        |(head, committed, claimed, lost, _), _| {
            assert_eq!((lost, claimed), (0, 0));
            assert_eq!(committed, head, "every position below the cut");
        },
    );
}

#[test]
fn reads_taken_while_writers_fill_shared_rings_that_never_wrap_lose_nothing() {
    // On a shared ring a position below the cut may still be being written: it is counted
    // as incomplete (claimed), never as lost.
    read_while_writing(
        1 << 16,
        20_000,
        true,
        true,
        |(head, committed, claimed, lost, _), _| {
            assert_eq!(
                lost, 0,
                "head {head}, committed {committed}, claimed {claimed}"
            );
            assert_eq!(committed + claimed, head);
        },
    );
}

#[test]
fn reads_taken_while_writers_lap_the_rings_count_only_what_was_overwritten() {
    // Lost: the positions older than the ring, and those overwritten during the copy (at
    // most as many as were written during it).
    let slots = 512;
    read_while_writing(
        slots,
        50_000,
        false,
        false,
        |(head, committed, claimed, lost, after_cut), live| {
            let older = head.saturating_sub(slots);
            assert!(
                lost >= older && (!live || lost <= older + after_cut),
                "lost {lost}: {older} older than the ring, {after_cut} written during the copy"
            );
            assert_eq!(committed + lost + claimed, head);
        },
    );
}

/// A temporary directory on tmpfs where there is one: the tests that write a file per case
/// would otherwise wait on a busy disk's journal.
fn scratch() -> tempfile::TempDir {
    match Path::new("/dev/shm").is_dir() {
        true => tempfile::tempdir_in("/dev/shm").unwrap(),
        false => tempfile::tempdir().unwrap(),
    }
}

/// `bytes` with every `from` replaced by `to`.
fn replace(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut k = 0;
    while k < bytes.len() {
        if bytes[k..].starts_with(from) {
            out.extend_from_slice(to);
            k += from.len();
        } else {
            out.push(bytes[k]);
            k += 1;
        }
    }
    out
}

#[test]
fn a_snapshot_cut_anywhere_is_a_one_line_error() {
    let tmp = scratch();
    let dir = tmp.path().join("dev");
    let _w = make(&dir);
    let good = tmp.path().join("good.ttrace");
    Reader::open(&dir).unwrap().save(&good).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let cut = tmp.path().join("cut.ttrace");
    for len in (0..bytes.len()).step_by(8).chain([bytes.len() - 1]) {
        std::fs::write(&cut, &bytes[..len]).unwrap();
        match Reader::open(&cut) {
            Err(Error::Missing(_)) if len < 8 => {}
            Err(Error::BadSnapshot { problem, .. }) => {
                assert!(
                    matches!(problem, Problem::Length { .. }),
                    "cut to {len}: {problem}"
                );
            }
            other => panic!("cut to {len}: {:?}", other.err()),
        }
    }
    // What the user sees: one line naming the file and the reason, exit status 1.
    std::fs::write(&cut, &bytes[..bytes.len() - 64]).unwrap();
    for command in ["dump", "stats", "report"] {
        let ran = reader!(command, &cut).run();
        let (ok, out, err) = (ran.status.success(), ran.stdout, ran.stderr);
        assert!(!ok && out.is_empty(), "{command}: {out}");
        assert_eq!(err.lines().count(), 1, "{command}: {err}");
        assert!(
            err.contains("cut.ttrace") && err.contains("not a usable ttrace snapshot"),
            "{command}: {err}"
        );
    }
}

#[test]
fn a_snapshot_holds_only_what_the_device_holds_and_reads_as_the_device_does() {
    // A device of the default sizes (2 CPUs) with about 700 events, strings and names.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let w = ttrace_core::Writer::open(&ttrace_core::Config {
        cpus: Some(2),
        calibration: std::time::Duration::from_millis(2),
        ..ttrace_core::Config::at(&dir)
    })
    .unwrap();
    let step = ttrace_tests::define(&w, "step", "n={n} s={s:s}");
    let twelve = ttrace_tests::define(
        &w,
        "twelve",
        "{a} {b} {c} {d} {e} {f} {g} {h} {i} {j} {k} {l:x}",
    );
    w.device().note_thread(1, 2, "worker").unwrap();
    w.device().note_process(1, "app").unwrap();
    let mut events = 0u64;
    for n in 0..600u64 {
        let s = w
            .aux_write(
                AuxTag::String,
                1 << 32 | 2,
                format!("string {n}").as_bytes(),
            )
            .unwrap();
        w.emit(step, 1 << 32 | 2, &[n, s]);
        events += 1;
    }
    for n in 0..100u64 {
        let args = core::array::from_fn::<u64, 12, _>(|k| k as u64 + n);
        w.emit_shared(twelve, 1 << 32 | 2, &args);
        events += 1;
    }
    let dev = Reader::open(&dir).unwrap();
    let file = tmp.path().join("small.ttrace");
    let saved = dev.save(&file).unwrap();
    let size = std::fs::metadata(&file).unwrap().len();
    assert_eq!(saved.bytes, size);
    let image = ttrace_tests::snapshot_layout(&dev).file_len;
    assert_eq!(saved.image_bytes, image);
    // What the device holds: 700 events (100 of them two slots), 600 strings, a few
    // names and definitions; not its 2 x 2 rings of 16384 slots, nor its metadata areas.
    assert!(
        size < 64 * 1024 + 64 * events,
        "{size} bytes for {events} events"
    );
    assert!(size * 100 < image, "{size} bytes of a {image}-byte device");
    // Every reader of a device reads the snapshot the same.
    let (d, f) = (dir.to_str().unwrap(), file.to_str().unwrap());
    let same = |args: &[&str]| {
        let on = |what: &str| {
            let args: Vec<&str> = args
                .iter()
                .map(|a| if *a == "@" { what } else { a })
                .collect();
            reader!().args(args).ok().replace(what, "DEVICE")
        };
        assert_eq!(on(f), on(d), "{args:?}");
    };
    same(&["dump", "@"]);
    same(&["dump", "--utc", "--filter", "twelve", "@"]);
    same(&["stats", "@"]);
    same(&["report", "@"]);
    same(&["export", "--format", "chrome", "-o", "-", "@"]);
    for format in ["ctf", "uftrace"] {
        let out = |what: &str| {
            let to = tmp.path().join(format!("{format}-{}", what.len()));
            reader!("export", "--format", format, "-o", &to, what).ok();
            let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&to)
                .unwrap()
                .map(|e| {
                    let e = e.unwrap();
                    let bytes = std::fs::read(e.path()).unwrap();
                    (e.file_name().to_string_lossy().into_owned(), bytes)
                })
                .collect();
            files.sort();
            // A CTF trace has a UUID of its own, in its metadata and each packet header.
            let uuid = files
                .iter()
                .find(|(name, _)| name == "metadata")
                .and_then(|(_, m)| {
                    let m = String::from_utf8_lossy(m);
                    let at = m.find("uuid = \"")? + 8;
                    Some(m[at..at + 36].to_string())
                });
            for (_, bytes) in &mut files {
                if let Some(uuid) = &uuid {
                    let hex: String = uuid.chars().filter(|c| *c != '-').collect();
                    let raw: Vec<u8> = (0..16)
                        .map(|k| u8::from_str_radix(&hex[2 * k..2 * k + 2], 16).unwrap())
                        .collect();
                    for k in 0..bytes.len().saturating_sub(15) {
                        if bytes[k..k + 16] == raw[..] {
                            bytes[k..k + 16].fill(0);
                        }
                    }
                }
                *bytes = replace(bytes, what.as_bytes(), b"DEVICE");
                if let Some(uuid) = &uuid {
                    *bytes = replace(bytes, uuid.as_bytes(), b"UUID");
                }
            }
            files
        };
        let (a, b) = (out(f), out(d));
        let names = |v: &[(String, Vec<u8>)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        assert_eq!(names(&a), names(&b), "{format}");
        for ((name, x), (_, y)) in a.iter().zip(&b) {
            assert!(x == y, "{format}: {name} differs");
        }
    }
    let live = dev.snapshot().unwrap();
    let frozen = Reader::open(&file).unwrap().snapshot().unwrap();
    assert_eq!(frozen.meta, live.meta);
    assert_eq!(frozen.aux, live.aux);
    for (a, b) in frozen.cpus.iter().zip(&live.cpus) {
        assert_eq!(a.events, b.events);
        assert_eq!(counts(a), counts(b));
    }
    assert_eq!(
        live.cpus.iter().map(|r| r.events.len() as u64).sum::<u64>(),
        events
    );
}

#[test]
fn a_snapshot_of_wrapped_rings_keeps_exactly_the_retained_entries_and_the_losses() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let slots = 64;
    // Everything from one CPU, which has a ring of each kind: this thread is pinned to it.
    let cpu = ttrace_tests::pin(0);
    let w = ttrace_core::Writer::open(&ttrace_tests::config(&dir, slots, cpu as u32 + 1)).unwrap();
    assert!(w.restartable(), "{}", ttrace_tests::rseq::RSEQ_REQUIRED);
    let one = ttrace_tests::define(&w, "one", "n={n}");
    let twelve = ttrace_tests::define(
        &w,
        "twelve",
        "{a} {b} {c} {d} {e} {f} {g} {h} {i} {j} {k} {l:x}",
    );
    // 1000 one-slot events on a restartable ring, 1000 two-slot ones on a shared ring.
    for n in 0..1000u64 {
        w.emit(one, 1 << 32 | 2, &[n]);
        let args = core::array::from_fn::<u64, 12, _>(|k| k as u64 + n);
        w.emit_shared(twelve, 1 << 32 | 2, &args);
    }
    let dev = Reader::open(&dir).unwrap();
    let file = tmp.path().join("wrapped.ttrace");
    let saved = dev.save(&file).unwrap();
    assert_eq!(
        saved.counts.committed,
        2 * slots,
        "every slot of the two rings written"
    );
    let frozen = Reader::open(&file).unwrap().snapshot().unwrap();
    let rings: Vec<usize> = (0..frozen.cpus.len())
        .filter(|&r| frozen.cpus[r].head > 0)
        .collect();
    assert_eq!(rings, [cpu, cpu + 1 + cpu], "the rings of CPU {cpu}");
    for r in rings.iter().map(|&r| &frozen.cpus[r]) {
        // An event of 12 arguments takes two slots (a parent and its continuation).
        let per = if r.events[0].args().len() == 12 { 2 } else { 1 };
        let kept = slots / per;
        assert_eq!(r.events.len() as u64, kept, "the newest {kept} events");
        assert_eq!((r.head, r.lost), (1000 * per, 1000 * per - slots));
        let first = r.events.first().unwrap().args()[0];
        assert_eq!(
            first,
            1000 - kept,
            "the oldest kept is the one after the last lost"
        );
        for (k, e) in r.events.iter().enumerate() {
            assert_eq!(e.args()[0], first + k as u64);
        }
    }
    let live = dev.snapshot().unwrap();
    for (a, b) in frozen.cpus.iter().zip(&live.cpus) {
        assert_eq!(a.events, b.events);
        assert_eq!(counts(a), counts(b));
    }
}

#[test]
fn a_snapshot_with_a_size_or_offset_changed_is_read_or_refused_never_a_panic() {
    let tmp = scratch();
    let dir = tmp.path().join("dev");
    let w = ttrace_core::Writer::open(&ttrace_core::Config {
        aux_bytes: ttrace_layouts::device::MIN_AUX_BYTES,
        meta_bytes: 12288,
        max_tracepoints: 8,
        ..ttrace_tests::config(&dir, 8, 2)
    })
    .unwrap();
    steps(&w, 10);
    let good = tmp.path().join("good.ttrace");
    Reader::open(&dir).unwrap().save(&good).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let edited = tmp.path().join("edited.ttrace");
    let (mut read, mut refused) = (0, 0);
    // The words that say where things are and how big: the header page's (but its source
    // text, for people only), each extent's head, and the first words of its bytes (the
    // device, ring and metadata headers' fields). Entries, records and counters are the
    // `open` fuzz target's.
    let word = |at: usize| u64::from_ne_bytes(bytes[at..at + 8].try_into().unwrap());
    let mut words: Vec<usize> = (0..80).chain(1104..1120).step_by(8).collect();
    let mut at = 4096;
    let head = EXTENT_HEAD_BYTES as usize;
    while at < bytes.len() {
        let len = word(at + 8) as usize;
        words.extend(
            (at..at + 16)
                .chain(at + head..at + head + len.min(128))
                .step_by(8),
        );
        at += head + len;
    }
    assert_eq!(at, bytes.len(), "the extents end where the file does");
    for at in words {
        let old = word(at);
        for value in [0, old.wrapping_add(8), old.wrapping_sub(8), u64::MAX - 7] {
            let mut b = bytes.clone();
            b[at..at + 8].copy_from_slice(&value.to_ne_bytes());
            // Its checksums made again: the edit is taken for what was written.
            ttrace_tests::fuzz::reseal(&mut b);
            std::fs::write(&edited, &b).unwrap();
            match ttrace_tests::fuzz::read_device(&edited) {
                Some(_) => read += 1,
                None => refused += 1,
            }
        }
    }
    assert!(read > 0 && refused > 0, "{read} read, {refused} refused");
}

/// A snapshot whose checksums were made after a bit flipped: the structure checks cannot
/// tell, but an event the flip makes impossible is counted as damaged, not shown.
#[test]
fn an_impossible_event_of_a_resealed_snapshot_is_counted_not_shown() {
    use ttrace_layouts::snapshot::ExtentHead;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let w = ttrace_tests::typed::make(&dir);
    let good = tmp.path().join("good.ttrace");
    Reader::open(&dir).unwrap().save(&good).unwrap();
    drop(w);
    let mut bytes = std::fs::read(&good).unwrap();
    // A flipped bit the checksums agree with is read, but an event it makes impossible
    // (here `cpu1024`, in the first slot of ring cpu0) is counted, not shown.
    let layout = ttrace_tests::snapshot_layout(&Reader::open(&good).unwrap());
    let first_slot = layout.rings_at + 4096;
    let head = EXTENT_HEAD_BYTES as usize;
    let mut at = 4096;
    let slot_at = loop {
        let e = ExtentHead::read_from_bytes(&bytes[at..at + head]).unwrap();
        if e.at == first_slot {
            break at + head;
        }
        at += head + e.len as usize;
    };
    bytes[slot_at + 8 + 2] ^= 1 << 2; // type word bit 18: CPU field bit 10
    ttrace_tests::fuzz::reseal(&mut bytes);
    let edited = tmp.path().join("edited.ttrace");
    std::fs::write(&edited, &bytes).unwrap();
    let out = reader!("dump", &edited).succeeds();
    assert_eq!(out.stderr, "", "the checksums agree: nothing named");
    let before = reader!("dump", &good).ok();
    let count = |s: &str| s.lines().filter(|l| !l.starts_with('#')).count();
    assert_eq!(count(&out.stdout), count(&before) - 1);
    assert!(!out.stdout.contains(" cpu1024 "), "{}", out.stdout);
    let cpu0 = out
        .stdout
        .lines()
        .find(|l| l.starts_with("# cpu0:"))
        .unwrap();
    assert!(cpu0.ends_with(", 1 entries damaged"), "{cpu0}");
}
