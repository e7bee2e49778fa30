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

/// An `Error::Invalid` whose problem passes `f`.
fn invalid(f: impl Fn(&Problem) -> bool + 'static) -> Expect {
    Box::new(move |e| matches!(e, Error::Invalid { problem, .. } if f(problem)))
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
