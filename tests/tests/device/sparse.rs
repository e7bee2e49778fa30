//! Reading a device allocates nothing of it. A device in a tmpfs directory (`/dev/shm`) is a
//! set of sparse files: a ring's pages are allocated as its writers reach them, so a device
//! of a few events takes a few pages however large its rings. A read fault through a mapping
//! of a hole in a tmpfs file allocates the page (where `read(2)` returns zeros), so a reader
//! that touched every slot of a ring made the whole ring resident: a snapshot of an 18-entry
//! device grew it from 52 KB to 65 MB. Every reader reads only what can hold data (slots
//! below a ring's head until it wraps, aux bytes between `first` and `last`).

use devttrace::{Counts, Follower, Reader, View};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use ttrace_layouts::aux::AuxTag;
use ttrace_layouts::entry::TypeWord;
use ttrace_layouts::snapshot::{Cause, CauseKind};
use ttrace_tests::reader;

/// Slots per ring: the default size on a machine of two CPUs (16 MiB a ring).
const SLOTS: u64 = 1 << 18;

/// The bytes allocated to each file of the device `dir`, by name.
fn allocated(dir: &Path) -> Vec<(String, u64)> {
    let mut files: Vec<(String, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                meta.blocks() * 512,
            )
        })
        .collect();
    files.sort();
    files
}

/// Where the device is made: a tmpfs directory (`/dev/shm`, where devices live by default and
/// where the bug shows), else the temporary directory, where only the readers' results are
/// checked (a disk file system gives a read of a hole the zero page: it allocates nothing).
fn base() -> (PathBuf, bool) {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        (shm.to_path_buf(), true)
    } else {
        eprintln!(
            "sparse: no /dev/shm here; the device is made in {} and only the readers' results \
             are checked, not what they allocate",
            std::env::temp_dir().display()
        );
        (std::env::temp_dir(), false)
    }
}

#[test]
fn reading_a_device_allocates_none_of_its_unwritten_pages() {
    let (base, tmpfs) = base();
    let tmp = tempfile::Builder::new()
        .prefix("ttrace-sparse-")
        .tempdir_in(&base)
        .unwrap();
    let dir = tmp.path().join("dev");
    let out = tempfile::tempdir().unwrap();
    let w = ttrace_core::Writer::open(&ttrace_tests::config(&dir, SLOTS, 2)).unwrap();
    let word = ttrace_tests::define(&w, "sparse", "n={n}");
    let string = ttrace_tests::define(&w, "sparse_string", "s={s:s}");
    let wide = ttrace_tests::define(
        &w,
        "sparse_wide",
        "a={a} b={b} c={c} d={d} e={e} f={f} g={g} h={h} i={i} j={j} k={k} l={l}",
    );
    let pid = std::process::id();
    let ctx = u64::from(pid) << 32 | u64::from(pid);
    w.device().note_thread(pid, pid, "sparse-test").unwrap();
    // 18 events: through the writer (wherever its thread runs), one with a string and one
    // with a continuation, and straight into a restartable and a shared ring.
    for n in 0..10 {
        assert!(w.emit(word, ctx, &[n]));
    }
    let off = w.aux_write(AuxTag::String, ctx, b"a string").unwrap();
    assert!(w.emit(string, ctx, &[off]));
    assert!(w.emit(wide, ctx, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]));
    let map = w.device().mapping();
    for (ring, n) in [
        (0usize, 100u64),
        (0, 101),
        (0, 102),
        (3, 103),
        (3, 104),
        (3, 105),
    ] {
        let cpu = ring as u32 % map.num_cpus();
        let words = [TypeWord(word).with_cpu(cpu).0, ctx, n, 0, 0, 0, 0];
        map.ring(ring).write(w.now(), pid, &words).unwrap();
    }
    let events = 18;

    let before = allocated(&dir);
    // The allocation granule: what the device header, one page written, takes (a huge page
    // on a tmpfs mounted with `huge=always`).
    let page = before
        .iter()
        .find(|(name, _)| name == "header")
        .map_or(4096, |&(_, bytes)| bytes.max(4096));
    let ring_bytes = 16 << 20;
    // Per step, the files that grew in it, and by how much.
    let mut grown = Vec::new();
    let mut last = before.clone();
    let mut step = |what: &str| {
        let now = allocated(&dir);
        let growth: Vec<(String, u64)> = now
            .iter()
            .zip(&last)
            .map(|((name, a), (_, b))| (name.clone(), a.saturating_sub(*b)))
            .filter(|&(_, g)| g > 0)
            .collect();
        grown.push((what.to_string(), growth));
        last = now;
    };

    // In process: each reader of the device.
    let dev = Reader::open(&dir).unwrap();
    let snap = dev.snapshot().unwrap();
    assert_eq!(snap.events(), events);
    step("Reader::snapshot");
    let view = View::of(&dev, 0).unwrap();
    assert_eq!(
        view.cpus.iter().map(|c| c.events.len()).sum::<usize>(),
        events
    );
    assert_eq!(view.aux_error, None);
    drop(view);
    step("View::of");
    let counts = Counts::of(&dev).unwrap();
    assert_eq!(
        counts
            .rings
            .iter()
            .map(|r| r.counts.events.len())
            .sum::<usize>(),
        events
    );
    assert_eq!(counts.rings.iter().map(|r| r.strings_lost).sum::<u64>(), 0);
    step("Counts::of");
    let saved = dev.save(out.path().join("saved")).unwrap();
    assert_eq!(
        saved.counts.committed,
        events as u64 + 1,
        "the wide event takes two slots"
    );
    step("Reader::save");
    let image = dev
        .copy_because(&Cause::new(CauseKind::Saved, "sparse"))
        .unwrap();
    assert_eq!(image.saved().counts.committed, saved.counts.committed);
    drop(image);
    step("Reader::copy_because");
    let mut follower = Follower::from_start(&dev, 0);
    let mut followed = follower.poll().unwrap().snapshot.events();
    followed += follower.finish().unwrap().snapshot.events();
    assert_eq!(followed, events);
    step("Follower::poll");
    let mut raw = 0;
    for cpu in 0..2 {
        let bytes = ttrace_reader::raw::cpu_entries(&dev, cpu).unwrap();
        raw += ttrace_reader::raw::parse(&bytes, &ttrace_reader::raw::Limits::ANY)
            .unwrap()
            .len();
    }
    assert_eq!(raw, events);
    step("raw::cpu_entries");
    let text = ttrace_reader::decode::text(&dev).unwrap();
    assert_eq!(text.matches(" sparse(").count(), 16, "{text}");
    assert!(text.contains("sparse_string(s=\"a string\")"), "{text}");
    assert!(text.contains("l=12)"), "{text}");
    step("decode::text");

    // The command line, as a user runs it.
    let dumped = ttrace_tests::dumped_lines(reader!(), &dir, None);
    assert_eq!(dumped.len(), events, "{dumped:?}");
    step("dump");
    let stats = reader!("stats", &dir).ok();
    assert!(stats.contains("sparse"), "{stats}");
    step("stats");
    let report = reader!("report", &dir).ok();
    assert!(report.contains("sparse"), "{report}");
    step("report");
    let file = out.path().join("snapshot");
    reader!("snapshot", &dir, "-o", &file).ok();
    step("snapshot -o");
    for format in ["chrome", "perfetto"] {
        let to = out.path().join(format);
        reader!("export", &dir, "--format", format, "-o", &to).ok();
        assert!(std::fs::metadata(&to).unwrap().len() > 0, "{format}");
        step(&format!("export --format {format}"));
    }

    // The snapshots hold what the device does.
    for saved in ["saved", "snapshot"] {
        let lines = ttrace_tests::dumped_lines(reader!(), &out.path().join(saved), None);
        assert_eq!(lines, dumped, "{saved}");
    }

    if !tmpfs {
        return;
    }
    let after = allocated(&dir);
    eprintln!("sparse: before {before:?}, after {after:?}; what grew, step by step: {grown:?}");
    let said = format!(
        "a ring is {ring_bytes} bytes, a page {page}\nbefore: {before:?}\nafter: {after:?}\n\
         what grew, step by step: {grown:#?}"
    );
    // No reader allocates a page of the device but the follower, which touches the last word
    // of every file at each poll (to find one cut under it): a page of each at most. A
    // reader that read a ring's unwritten slots took the whole ring.
    for (what, growth) in &grown {
        let most = if what == "Follower::poll" { page } else { 0 };
        assert!(
            growth.iter().all(|&(_, g)| g <= most),
            "{what} allocated the device's unwritten pages: {growth:?}; {said}"
        );
    }
    // And all of them together: a page a file, and a page more.
    let too_much: Vec<_> = after
        .iter()
        .zip(&before)
        .map(|((name, a), (_, b))| (name, a.saturating_sub(*b)))
        .filter(|&(_, g)| g > 2 * page)
        .collect();
    assert!(
        too_much.is_empty(),
        "reading allocated the device's unwritten pages: {too_much:?}; {said}"
    );
}
