//! Snapshot files: a device saved to one file reads back as the device did, and a damaged
//! snapshot file is refused with the reason.

use devttrace::{Device, Error, Problem};
use std::path::Path;
use ttrace_layouts::aux::AuxTag;
use ttrace_layouts::device::HeaderError;

/// A device whose rings have wrapped, with strings, messages, names and a control rule.
fn make(dir: &Path) -> ttrace_core::Device {
    let w = ttrace_core::Device::open(&ttrace_tests::config(dir, 8, 2)).unwrap();
    let word = ttrace_tests::define(&w, "step", "n={n} s={s:s}");
    w.note_thread(1, 2, "worker").unwrap();
    for n in 0..20u64 {
        let s = w
            .aux_write(
                AuxTag::String,
                1 << 32 | 2,
                format!("string {n}").as_bytes(),
            )
            .unwrap();
        w.emit(word, 1 << 32 | 2, &[n, s]);
    }
    w.aux_write(AuxTag::Info, 1 << 32 | 2, b"a message")
        .unwrap();
    w.apply_text("disable other*").unwrap();
    w
}

#[test]
fn a_saved_device_reads_back_as_the_device_did() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let _w = make(&dir);
    let dev = Device::open(&dir).unwrap();
    let file = tmp.path().join("trace.ttrace");
    let saved = dev.save(&file).unwrap();
    assert_eq!((saved.claimed, saved.changed), (0, 0));
    let live = dev.snapshot().unwrap();
    let snap = Device::open(&file).unwrap();
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
        saved.entries,
        live.cpus.iter().map(|r| r.committed).sum::<u64>()
    );
    assert_eq!(snap.ctl(), dev.ctl());
    // Saving a snapshot over the very file it was opened from is safe: the copy is made
    // beside it and renamed over it.
    snap.save(&file).unwrap();
    drop(snap);
    let again = Device::open(&file).unwrap().snapshot().unwrap();
    assert_eq!(again.aux, live.aux);
    assert_eq!(again.meta, live.meta);
    for (a, b) in again.cpus.iter().zip(&live.cpus) {
        assert_eq!(a.events, b.events);
    }
    // A snapshot cannot be controlled.
    assert!(matches!(
        Device::open_for_control(&file),
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
    Device::open(&dir).unwrap().save(&good).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let ring_slots_at =
        4096 + core::mem::offset_of!(ttrace_layouts::device::DeviceHeader, ring_slots);
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
    for (what, content, expected) in cases {
        let path = tmp.path().join(format!("{what}.ttrace"));
        std::fs::write(&path, content).unwrap();
        match Device::open(&path) {
            Err(e) if expected(&e) => {}
            other => panic!("{what}: {:?}", other.err()),
        }
    }
}

#[test]
fn dump_and_stats_read_a_snapshot_file_in_place_of_a_device() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let _w = make(&dir);
    let file = tmp.path().join("t.ttrace");
    let reader = env!("CARGO_BIN_EXE_ttrace-reader-cli");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(reader)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let said = run(&[
        "snapshot",
        dir.to_str().unwrap(),
        "-o",
        file.to_str().unwrap(),
    ]);
    assert!(said.contains(" entries"), "{said}");
    let body = |s: String| s.lines().skip(1).map(str::to_owned).collect::<Vec<_>>();
    let live = run(&["dump", dir.to_str().unwrap()]);
    let saved = run(&["dump", file.to_str().unwrap()]);
    assert_eq!(body(saved), body(live.clone()));
    assert!(live.contains("step(n=19 s=\"string 19\")"), "{live}");
    assert_eq!(
        body(run(&["stats", file.to_str().unwrap()])),
        body(run(&["stats", dir.to_str().unwrap()]))
    );
}

/// A ring's counts as a read gives them: `(head, committed, claimed, lost, after_cut)`.
type Counts = (u64, u64, u64, u64, u64);

fn counts<T>(r: &devttrace::RingSnapshot<T>) -> Counts {
    (r.head, r.committed, r.claimed, r.lost, r.after_cut)
}

/// Two threads write `each` events each into a device of `slots`-slot rings while the
/// reader takes snapshots, dumps' views and saved files over and over; `check` gets the
/// counts of each ring written (the restartable ones, or with `shared` the shared ones) of
/// each read, and whether the read was live (a saved file does not say how much was written
/// while it was saved).
fn read_while_writing(slots: u64, each: u64, shared: bool, check: impl Fn(Counts, bool)) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let w = std::sync::Arc::new(
        ttrace_core::Device::open(&ttrace_tests::config(&dir, slots, 2)).unwrap(),
    );
    assert!(w.restartable(), "{}", ttrace_tests::rseq::RSEQ_REQUIRED);
    let word = ttrace_tests::define(&w, "n", "n={n}");
    let dev = Device::open(&dir).unwrap();
    let file = tmp.path().join("s.ttrace");
    let writers: Vec<_> = (0..2u64)
        .map(|k| {
            let w = w.clone();
            std::thread::spawn(move || {
                for i in 0..each {
                    match shared {
                        true => w.emit_shared(word, 7 << 32 | k, &[i]),
                        false => w.emit(word, 7 << 32 | k, &[i]),
                    };
                }
            })
        })
        .collect();
    let mut reads = 0;
    while !writers.iter().all(|t| t.is_finished()) || reads < 3 {
        let snap = dev.snapshot().unwrap();
        let view = dev.view_newer_than(0).unwrap();
        dev.save(&file).unwrap();
        let saved = Device::open(&file).unwrap().snapshot().unwrap();
        for r in if shared { 2..4 } else { 0..2 } {
            check(counts(&snap.cpus[r]), true);
            check(counts(&view.cpus[r]), true);
            check(counts(&saved.cpus[r]), false);
        }
        reads += 1;
    }
    writers.into_iter().for_each(|t| t.join().unwrap());
}

#[test]
fn reads_taken_while_writers_fill_rings_that_never_wrap_lose_nothing() {
    // Everything written before a read's cut is in it; what came after is counted as such.
    read_while_writing(
        1 << 16,
        20_000,
        false,
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
