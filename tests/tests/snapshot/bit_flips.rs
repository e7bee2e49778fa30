//! Every single-bit flip of a snapshot file: either opening it fails with a typed error
//! that says what is damaged (the header page, an extent's head, the device header), or the
//! one damaged extent is named, the rest is read, nothing shown is other than it was, and
//! what is missing is counted.

use devttrace::{Error, Problem, Reader};
use std::path::Path;
use ttrace_layouts::snapshot::{ExtentHead, EXTENT_HEAD_BYTES, PAGE};
use ttrace_tests::reader;
use ttrace_tests::typed::dumped;
use zerocopy::FromBytes;

fn scratch() -> tempfile::TempDir {
    match Path::new("/dev/shm").is_dir() {
        true => tempfile::tempdir_in("/dev/shm").unwrap(),
        false => tempfile::tempdir().unwrap(),
    }
}

/// The counts of `dump`'s last line: `(trace points, messages, entries damaged)`.
fn totals(footer: &[String]) -> (u64, u64, u64) {
    let last = footer.last().unwrap();
    let number = |after: &str| -> u64 {
        let at = last.find(after).unwrap();
        let digits = last[..at].rsplit([' ', '(']).next().unwrap();
        digits.parse().unwrap()
    };
    let damaged = match last.contains(" entries damaged") {
        true => number(" entries damaged"),
        false => 0,
    };
    (number(" trace points"), number(" messages"), damaged)
}

/// Where each extent of a version 4 file is: `(head offset, bytes)`.
fn extents(file: &[u8]) -> Vec<(usize, std::ops::Range<usize>)> {
    let mut out = Vec::new();
    let mut at = PAGE as usize;
    while at < file.len() {
        let head = ExtentHead::read_from_bytes(&file[at..at + EXTENT_HEAD_BYTES as usize]).unwrap();
        let data = at + EXTENT_HEAD_BYTES as usize;
        out.push((at, data..data + head.len as usize));
        at = data + head.len as usize;
    }
    assert_eq!(at, file.len());
    out
}

#[test]
fn every_single_bit_flip_of_a_snapshot_is_refused_or_named_and_shows_nothing_false() {
    let tmp = scratch();
    let dir = tmp.path().join("dev");
    let w = ttrace_tests::typed::make(&dir);
    let good = tmp.path().join("good.ttrace");
    Reader::open(&dir).unwrap().save(&good).unwrap();
    drop(w);
    let bytes = std::fs::read(&good).unwrap();
    let original = Reader::open(&good).unwrap();
    assert!(original.damaged_extents().is_empty());
    let (base, base_footer) = dumped(&original);
    let (points, messages, damaged) = totals(&base_footer);
    assert_eq!((points, messages, damaged), (25, 1, 0), "{base_footer:#?}");
    let extents = extents(&bytes);
    let flipped = tmp.path().join("flipped.ttrace");
    let (mut refused, mut named) = (0, 0);
    let mut parts = std::collections::BTreeSet::new();
    for bit in 0..bytes.len() * 8 {
        let at = bit / 8;
        let mut b = bytes.clone();
        b[at] ^= 1 << (bit % 8);
        std::fs::write(&flipped, &b).unwrap();
        // Where the bit is: the header page, the head of extent `k`, or its bytes.
        let extent = extents
            .iter()
            .position(|(head, data)| at >= *head && at < data.end);
        let in_head = extent.is_some_and(|k| at < extents[k].1.start);
        let opened = Reader::open(&flipped);
        match (extent, in_head, opened) {
            (None, _, Err(Error::BadSnapshot { problem, .. })) => {
                refused += 1;
                match at < 8 {
                    true => assert!(
                        matches!(problem, Problem::Header(_)),
                        "bit {bit} of the magic: {problem:?}"
                    ),
                    false => assert_eq!(
                        problem,
                        Problem::Damaged {
                            offset: 0,
                            what: "its header page"
                        },
                        "bit {bit}"
                    ),
                }
            }
            (Some(k), true, Err(Error::BadSnapshot { problem, .. })) => {
                refused += 1;
                let offset = extents[k].0 as u64;
                assert!(
                    matches!(problem, Problem::Damaged { offset: o, .. } if o == offset),
                    "bit {bit}, head of extent {k}: {problem:?}"
                );
            }
            (Some(0), false, Err(Error::BadSnapshot { problem, .. })) => {
                refused += 1;
                assert!(
                    matches!(problem, Problem::Damaged { offset: 4096, .. }),
                    "bit {bit}, the device header: {problem:?}"
                );
            }
            (Some(k), false, Ok(dev)) if k > 0 => {
                named += 1;
                let d = dev.damaged_extents();
                assert_eq!(d.len(), 1, "bit {bit}: {d:?}");
                assert_eq!(d[0].index, k as u64, "bit {bit}");
                assert_eq!(d[0].offset, extents[k].0 as u64, "bit {bit}");
                parts.insert(d[0].to_string().replace(char::is_numeric, "N"));
                let (lines, footer) = dumped(&dev);
                for l in &lines {
                    assert!(base.contains(l), "bit {bit}, {}: shown {l}", d[0]);
                }
                // What is missing is counted: events (messages among them) as damaged
                // entries.
                let (p, m, damaged) = totals(&footer);
                let missing = (points + messages) - (p + m);
                assert!(missing <= damaged, "bit {bit}, {}: {footer:#?}", d[0]);
            }
            (extent, in_head, opened) => panic!(
                "bit {bit} (extent {extent:?}, head {in_head}): {:?}",
                opened.map(|d| d.damaged_extents().to_vec())
            ),
        }
    }
    eprintln!(
        "{} bits of {} extents: {refused} refused, {named} read with their extent named: {parts:#?}",
        bytes.len() * 8,
        extents.len()
    );
    assert_eq!(refused + named, bytes.len() * 8);
}

#[test]
fn dump_names_a_damaged_extent_and_reads_the_rest() {
    let tmp = scratch();
    let dir = tmp.path().join("dev");
    let w = ttrace_tests::typed::make(&dir);
    let good = tmp.path().join("good.ttrace");
    reader!("snapshot", &dir, "-o", &good).ok();
    drop(w);
    let mut bytes = std::fs::read(&good).unwrap();
    // A bit of the slots of ring cpu1: the extent after its header's.
    let dev = Reader::open(&good).unwrap();
    let (base, _) = dumped(&dev);
    let slots = extents(&bytes)
        .into_iter()
        .enumerate()
        .filter(|(_, (head, _))| {
            let h = ExtentHead::read_from_bytes(&bytes[*head..*head + 32]).unwrap();
            let layout = ttrace_tests::snapshot_layout(&dev);
            h.at == layout.rings_at + layout.ring_stride + 4096
        })
        .collect::<Vec<_>>();
    assert_eq!(slots.len(), 1, "cpu1's slots in one extent");
    let (k, (_, data)) = slots[0].clone();
    // Slot 1 of the ring: the first `wide`'s parent.
    bytes[data.start + 64 + 20] ^= 4;
    std::fs::write(&good, &bytes).unwrap();
    let out = reader!("dump", &good).succeeds();
    let said = format!(
        "ttrace-reader: snapshot {}: extent {k} (ring cpu1, slots 0..16) is damaged; its bytes \
         were left out, the rest is read\n",
        good.display()
    );
    assert_eq!(out.stderr, said);
    let lines: Vec<&str> = out.stdout.lines().filter(|l| !l.starts_with('#')).collect();
    // Ring cpu1's 12 events are gone, the others are as they were.
    assert_eq!(lines.len(), base.len() - 12);
    assert!(lines.iter().all(|l| base.iter().any(|b| b == l)));
    let cpu1 = out
        .stdout
        .lines()
        .find(|l| l.starts_with("# cpu1:"))
        .unwrap();
    assert_eq!(
        cpu1,
        "# cpu1: 0 events (0 entries), 0 entries lost, 0 incomplete, 0 events dropped, 16 entries damaged"
    );
    assert!(out
        .stdout
        .lines()
        .last()
        .unwrap()
        .ends_with(", 16 entries damaged"));
    // Every reader command reads it, and says so.
    for cmd in ["stats", "report"] {
        let out = reader!(cmd, &good).succeeds();
        assert_eq!(out.stderr, said, "{cmd}");
        assert!(
            out.stdout.contains("16 entries damaged"),
            "{cmd}: {}",
            out.stdout
        );
    }
}
