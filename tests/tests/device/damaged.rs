//! Damaged devices, table-driven: each damage gives its own clear error, or is skipped and
//! counted — never a panic, a hang or an unbounded allocation.

use devttrace::{Error, Problem, Reader};
use std::path::Path;
use ttrace_layouts::aux::{AuxPath, AuxTag};
use ttrace_layouts::device::{DeviceHeader, HeaderError};
use ttrace_layouts::ring::RingHeader;
use ttrace_tests::{edit, reader};

/// A device with one string event, one message and a named thread.
fn make(dir: &Path) {
    let w = ttrace_core::Writer::open(&ttrace_tests::config(dir, 64, 2)).unwrap();
    let word = ttrace_tests::define(&w, "hello", "s={s:s}");
    w.device().note_thread(1, 2, "worker").unwrap();
    let off = w.aux_write(AuxTag::String, 1 << 32 | 2, b"text").unwrap();
    w.emit(word, 1 << 32 | 2, &[off]);
    assert!(ttrace_tests::message(&w, 1 << 32 | 2, "a message"));
}

fn put_u64(bytes: &mut [u8], at: usize, v: u64) {
    bytes[at..at + 8].copy_from_slice(&v.to_ne_bytes());
}

macro_rules! at {
    ($field:ident) => {
        core::mem::offset_of!(DeviceHeader, $field)
    };
}

#[test]
fn header_fields_out_of_range_are_refused_by_name() {
    for (field, at, value, which) in [
        (
            "ring size not a power of two",
            at!(ring_slots),
            48u64,
            "ring size",
        ),
        ("ring size of one", at!(ring_slots), 1, "ring size"),
        (
            "aux size not a power of two",
            at!(aux_size),
            3 << 14,
            "aux size",
        ),
        ("no cpus", at!(num_cpus), 0, "cpu count"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("dev");
        make(&dir);
        edit(&dir.join("header"), |h| {
            if which == "cpu count" {
                h[at..at + 4].copy_from_slice(&(value as u32).to_ne_bytes());
            } else {
                put_u64(h, at, value);
            }
        });
        match Reader::open(&dir) {
            Err(Error::Invalid {
                path,
                problem: Problem::Header(HeaderError::Field { which: w, value: v }),
            }) => {
                assert_eq!(path, dir.join("header"), "{field}");
                assert_eq!((w, v), (which, value), "{field}");
            }
            other => panic!("{field}: {:?}", other.err()),
        }
    }
}

/// The ring whose aux buffer holds the records `make` wrote (that of the CPU it ran on),
/// and those records' offsets.
fn aux_buffer(dir: &Path) -> (usize, Vec<u64>) {
    let aux = Reader::open(dir).unwrap().aux().unwrap();
    let b = aux.buffers.iter().position(|b| !b.is_empty()).unwrap();
    (b, aux.buffers[b].records().map(|r| r.offset).collect())
}

#[test]
fn aux_offsets_out_of_range_are_reported_and_the_rings_still_read() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    make(&dir);
    let (b, _) = aux_buffer(&dir);
    let ring = dir.join(Reader::open(&dir).unwrap().ring_name(b));
    // `first` after `last`, and `last` more than a buffer ahead of `first`.
    for (first, last) in [(4096u64, 64u64), (0, 1 << 40)] {
        edit(&ring, |h| {
            put_u64(h, core::mem::offset_of!(RingHeader, aux_first), first);
            put_u64(h, core::mem::offset_of!(RingHeader, aux_last), last);
        });
        let dev = Reader::open(&dir).unwrap();
        assert!(matches!(dev.aux(), Err(Error::Aux { .. })));
        let snap = dev.snapshot().unwrap();
        assert_eq!(
            snap.events(),
            2,
            "the rings do not depend on the aux buffer"
        );
        assert!(snap
            .aux_error
            .as_deref()
            .unwrap()
            .contains("aux offsets out of range"));
    }
}

#[test]
fn aux_records_whose_length_points_past_the_buffer_end_the_walk() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    make(&dir);
    let (b, offsets) = aux_buffer(&dir);
    let aux_size = Reader::open(&dir).unwrap().version().aux_size;
    let second = (b as u64 * aux_size + offsets[1] % aux_size) as usize;
    // Each damage ends the walk there: the record before it is kept, nothing after it is
    // trusted. (A zero length is a well-formed empty record; the bytes after its header are
    // the old payload, which does not parse as a header.)
    for damage in [
        // A length past `last` (and past the whole buffer for a reader that trusted it).
        AuxPath::new(AuxTag::String, 0, 4000, false).0,
        // Reserved bits set: not a header this code wrote.
        u64::MAX,
        // A length of zero: the walk advances by the header alone, into the old payload.
        AuxPath::new(AuxTag::String, 0, 0, false).0,
    ] {
        edit(&dir.join("aux"), |a| put_u64(a, second, damage));
        let aux = Reader::open(&dir).unwrap().aux().unwrap();
        let buffer = &aux.buffers[b];
        assert_eq!(
            buffer.records().next().unwrap().bytes,
            b"text",
            "the record before the damage is kept"
        );
        assert!(buffer.corrupt, "{damage:#x}: {aux:?}");
        assert!(buffer.len() <= 2, "{aux:?}");
    }
}

#[test]
fn names_that_are_not_utf8_are_shown_with_replacement_characters() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    make(&dir);
    edit(&dir.join("meta"), |m| {
        let at = m.windows(6).position(|w| w == b"worker").unwrap();
        m[at + 1] = 0xff;
    });
    let out = reader!("dump", &dir).run();
    assert!(out.status.success());
    let text = out.stdout;
    assert!(
        text.contains("1/2 (w\u{fffd}rker) hello(s=\"text\")"),
        "{text}"
    );
}

#[test]
fn a_file_grown_after_the_device_was_made_is_refused_at_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    make(&dir);
    let f = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("cpu0"))
        .unwrap();
    let len = f.metadata().unwrap().len();
    f.set_len(len + 4096).unwrap();
    match Reader::open(&dir) {
        Err(Error::Invalid {
            path,
            problem: Problem::Length { found, expected },
        }) => {
            assert_eq!(path, dir.join("cpu0"));
            assert_eq!((found, expected), (len + 4096, len));
        }
        other => panic!("{:?}", other.err()),
    }
}

#[test]
fn a_file_cut_while_it_is_read_is_reported_not_a_crash() {
    // A page past the new end of a mapped file raises SIGBUS; the reader survives it, reads
    // zeros, and reports the file.
    for (file, len) in [
        ("header", 0),
        ("the ring with the event", 4096),
        ("cpu1", 0),
        ("aux", 0),
        ("meta", 4096),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("dev");
        make(&dir);
        let dev = Reader::open(&dir).unwrap();
        // Slots are read only below a ring's head: cut the one that holds the event.
        let written = (0..dev.cpus()).find(|&r| !dev.cpu(r).unwrap().events.is_empty());
        let name = dev.ring_name(written.unwrap());
        let file = if len == 4096 && file.starts_with("the ring") {
            name.as_str()
        } else {
            file
        };
        let before = dev.snapshot().unwrap();
        assert_eq!(before.events(), 2, "{file}: the event and the message");
        ttrace_tests::set_len(&dir.join(file), len);
        match dev.snapshot() {
            Err(Error::Invalid {
                path,
                problem: Problem::Shrunk,
            }) => assert_eq!(path, dir.join(file)),
            other => panic!("{file}: {:?}", other.map(|s| s.events())),
        }
        // The version was read at open and stays as it was.
        assert_eq!(dev.version(), before.version, "{file}");
        assert!(matches!(
            dev.check_intact(),
            Err(Error::Invalid {
                problem: Problem::Shrunk,
                ..
            })
        ));
    }
}

#[test]
fn a_file_grown_while_it_is_read_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    make(&dir);
    let dev = Reader::open(&dir).unwrap();
    let before = dev.snapshot().unwrap();
    for file in ["header", "cpu0", "aux", "meta"] {
        let f = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join(file))
            .unwrap();
        f.set_len(f.metadata().unwrap().len() + 8192).unwrap();
    }
    let after = dev.snapshot().unwrap();
    assert_eq!(after.events(), before.events());
    assert_eq!(after.aux, before.aux);
    dev.check_intact().unwrap();
}

#[test]
fn follow_stops_with_one_line_when_a_ring_file_is_cut() {
    use std::io::{BufRead, BufReader, Read};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    make(&dir);
    let mut follow = reader!("follow", &dir, "--interval-ms", "1")
        .command()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(follow.stdout.take().unwrap()).lines();
    let header = lines.next().unwrap().unwrap();
    assert!(header.starts_with("# following "), "{header}");
    ttrace_tests::set_len(&dir.join("cpu0"), 4096);
    let status = follow.wait().unwrap();
    let mut err = String::new();
    follow
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("{}: ", dir.join("cpu0").display())) && err.contains("shrank"),
        "{err}"
    );
}

#[test]
fn control_rules_with_empty_or_foreign_lines_are_skipped() {
    // Found by the `open` fuzz target: a rule line starting with a multi-byte character
    // made `ctl` panic.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    make(&dir);
    let rules = "\n\u{e9}x\n+a*\n\n-b\u{e9}\n";
    edit(&dir.join("header"), |h| {
        put_u64(h, at!(rules_len), rules.len() as u64);
        h[at!(rules)..at!(rules) + rules.len()].copy_from_slice(rules.as_bytes());
    });
    let ctl = Reader::open(&dir).unwrap().ctl();
    assert_eq!(
        ctl.lines().skip(1).collect::<Vec<_>>(),
        ["enable a*", "disable b\u{e9}"],
        "{ctl}"
    );
}

/// A restartable ring's `last_stamp` damaged to a value near 2^63 (the claim bit's): the
/// writer's floor ignores it (in its assembly and in the model of it), so the events it
/// commits are stamped by the clock, unclaimed, and read back; they were committed claimed,
/// the ring wedged, before.
#[test]
fn a_damaged_last_stamp_sets_no_floor() {
    use ttrace_layouts::entry::Stamp;
    for damage in [(1u64 << 63) - 1, (1 << 63) + 5, u64::MAX - 7, 1 << 62] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("dev");
        let w = ttrace_core::Writer::open(&ttrace_tests::config(&dir, 64, 2)).unwrap();
        assert!(w.restartable(), "{}", ttrace_tests::rseq::RSEQ_REQUIRED);
        let word = ttrace_tests::define(&w, "after_damage", "n={n}");
        let map = w.device().mapping();
        let damage_all = || {
            for r in 0..2 {
                map.ring_header(r)
                    .last_stamp
                    .store(damage, std::sync::atomic::Ordering::SeqCst);
            }
        };
        // The writer's own path: its assembly where restartable sequences are there.
        damage_all();
        for n in 0..3 {
            w.emit(word, 1 << 32 | 2, &[n]);
        }
        // The model of it, on ring 0.
        damage_all();
        let on = ttrace_layouts::entry::TypeWord(word).with_cpu(0).0;
        for n in 3..6 {
            let words = [on, 1 << 32 | 2, n, 0, 0, 0, 0];
            map.ring(0).write_restartable(
                &map.ring_header(0).last_stamp,
                w.now(),
                &words,
                None,
                usize::MAX,
            );
        }
        let now = w.now();
        let dev = Reader::open(&dir).unwrap();
        let mut seen = Vec::new();
        for r in 0..dev.cpus() {
            for e in &dev.cpu(r).unwrap().events {
                assert_eq!(e.stamp & Stamp::CLAIMED, 0, "{damage:#x}: {e:?}");
                assert!(e.stamp <= now, "{damage:#x}: stamped past the clock: {e:?}");
                seen.push(e.args()[0]);
            }
        }
        seen.sort_unstable();
        assert_eq!(seen, [0, 1, 2, 3, 4, 5], "{damage:#x}: every event read");
    }
}
