//! Entries damaged in a device's ring files (a flipped bit): an event whose fields no writer
//! of the device can have written is never shown, and is counted as damaged.

use devttrace::{Device, Reader, View};
use ttrace_tests::typed::{damaged, dumped, impossible, make};

/// The device's age in seconds, by its clock: no event can be later (and a second's slack).
fn age_s(dev: &Reader) -> f64 {
    let clock = dev.version().clock;
    clock.since_anchor_ns(dev.now()) as f64 / 1e9 + 1.0
}

#[test]
fn every_flipped_bit_of_every_entry_shows_only_possible_events_and_counts_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let w = make(&dir);
    let (base, base_footer) = dumped(w.device().reader());
    assert_eq!(base.len(), 26, "{base:#?}");
    assert_eq!(damaged(&base_footer), 0);
    for line in &base {
        assert_eq!(impossible(line, age_s(w.device().reader())), None, "{line}");
    }
    // Flipped in place, through a writable mapping, read as a reader reads the file. (All
    // loads and stores here are Relaxed: this thread alone writes the device, and reads it
    // after each change, in program order.)
    let dev = Device::attach(&dir).unwrap();
    let (mut flips, mut vanished, mut counted) = (0, 0, 0);
    for ring in 0..2 {
        let r = dev.mapping().ring(ring);
        let used = r.reader().head() as usize;
        for slot in &r.slots()[..used] {
            for word in 0..8 {
                for bit in 0..64 {
                    let w = &slot.words[word];
                    w.fetch_xor(1 << bit, core::sync::atomic::Ordering::Relaxed);
                    let (lines, footer) = dumped(dev.reader());
                    let until = age_s(dev.reader());
                    w.fetch_xor(1 << bit, core::sync::atomic::Ordering::Relaxed);
                    flips += 1;
                    let at = format!("ring {ring}, word {word}, bit {bit}");
                    for line in &lines {
                        if let Some(why) = impossible(line, until) {
                            panic!("{at}: shown with {why}: {line}");
                        }
                    }
                    // An event that is gone is accounted for (one shown otherwise, with
                    // possible fields, cannot be told from what was written).
                    let gone = base.len().saturating_sub(lines.len());
                    if gone > 0 {
                        vanished += 1;
                        assert_ne!(footer, base_footer, "{at}: {gone} gone, uncounted");
                    }
                    counted += (damaged(&footer) > 0) as u64;
                }
            }
        }
    }
    eprintln!("{flips} flips: {vanished} hid an event, {counted} counted as damaged");
    assert_eq!(flips, (18 + 16) * 8 * 64, "every bit of every slot written");
    // Many flips hit a field that has a check (the cpu, the tracepoint, a bool...).
    assert!(
        counted * 5 > flips,
        "{counted} of {flips} counted as damaged"
    );
    assert!(
        vanished >= counted,
        "{vanished} vanished, {counted} damaged"
    );
}

/// Changes word `word` of slot `slot` of ring `ring` with `f` (Relaxed: this thread alone
/// writes the device, and reads it afterwards).
fn with_word(dev: &Device, ring: usize, slot: usize, word: usize, f: impl Fn(u64) -> u64) {
    let w = &dev.mapping().ring(ring).slots()[slot].words[word];
    let old = w.load(core::sync::atomic::Ordering::Relaxed);
    w.store(f(old), core::sync::atomic::Ordering::Relaxed);
}

/// Each impossible field alone: the one event (in slot 0 of ring 1: `typed`, i = 0) is
/// gone and counted as one damaged entry; nothing else changes.
#[test]
fn each_impossible_field_hides_its_event_and_counts_it() {
    /// What is damaged, which word of the entry, and how: from the word and the device's
    /// clock anchor (the earliest stamp it can hold). Stamps are computed from the device's
    /// own values, never from the clock's distance from 0, which is small on a machine just
    /// booted.
    type Case = (&'static str, usize, fn(u64, u64) -> u64);
    let cases: Vec<Case> = vec![
        ("cpu1024 on a 2-CPU device", 1, |t, _| t | 1 << (8 + 10)),
        ("cpu0 in cpu1's ring", 1, |t, _| t & !(1 << 8)),
        ("an unknown tracepoint", 1, |t, _| t | 1 << (20 + 9)),
        ("another kind", 1, |t, _| t ^ 1),
        ("fewer arguments", 1, |t, _| t - (1 << 4)),
        ("a pid no process can have", 2, |c, _| c | 1 << 62),
        ("a tid no thread can have", 2, |c, _| c | 1 << 30),
        // The latest even stamp (a parent's) before the anchor.
        ("a time before the device", 0, |_, anchor| (anchor - 2) & !1),
        ("a time after the read", 0, |s, _| s + (1 << 48)),
        ("a bool that is 2", 3, |_, _| 2),
        ("a char that is a surrogate", 4, |_, _| 0xd800),
        ("a char beyond u32", 4, |c, _| c | 1 << 40),
        ("a string word that is no reference", 5, |s, _| {
            s & !(1 << 63)
        }),
        ("a string in a buffer the device lacks", 5, |s, _| {
            s | 1 << 60
        }),
        ("a string reference off a record boundary", 5, |s, _| s + 4),
        ("a u16 beyond its width", 6, |n, _| n | 1 << 40),
        ("an i8 beyond its width (l=1125899906842636)", 7, |_, _| {
            (1 << 50) + 12
        }),
    ];
    for (what, word, f) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("dev");
        let w = make(&dir);
        let (base, base_footer) = dumped(w.device().reader());
        let dev = Device::attach(&dir).unwrap();
        let anchor = dev.reader().version().clock.anchor_ticks;
        // A clock read after boot, at the device's creation: never this small.
        assert!(anchor >= 4, "a clock anchor of {anchor}");
        with_word(&dev, 1, 0, word, |w| f(w, anchor));
        let (lines, footer) = dumped(dev.reader());
        let gone: Vec<&String> = base.iter().filter(|l| !lines.contains(l)).collect();
        assert_eq!(gone.len(), 1, "{what}: {gone:#?}");
        assert!(gone[0].contains(" typed(b=false c='x'"), "{what}: {gone:?}");
        assert_eq!(lines.len(), base.len() - 1, "{what}");
        assert_eq!(damaged(&footer), 1, "{what}: {footer:#?}");
        assert_ne!(footer, base_footer);
        let cpu1 = footer.iter().find(|l| l.starts_with("# cpu1: ")).unwrap();
        assert!(cpu1.ends_with(", 1 entries damaged"), "{what}: {cpu1}");
    }
}

/// A follower leaves a damaged event out too, and counts it.
#[test]
fn a_follower_counts_damaged_events_and_shows_the_others() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let w = make(&dir);
    let dev = Device::attach(&dir).unwrap();
    // The first `typed` of ring cpu1, of CPU 1024.
    with_word(&dev, 1, 0, 1, |t| t | 1 << 18);
    let reader = Reader::open(&dir).unwrap();
    let mut follower = devttrace::Follower::from_start(&reader, 0);
    let poll = follower.poll().unwrap();
    let cpu1 = &poll.snapshot.cpus[1];
    assert_eq!((cpu1.events.len(), cpu1.damaged), (11, 1));
    assert!(cpu1.events.iter().all(|e| e.type_word.cpu() == 1));
    assert_eq!(poll.snapshot.cpus[0].events.len(), 14);
    drop(w);
}

/// The same through the library: a ring snapshot leaves the event out and counts it, and
/// the counts still add up.
#[test]
fn a_ring_snapshot_counts_damaged_entries_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let w = make(&dir);
    let dev = Device::attach(&dir).unwrap();
    // The first `wide` (a parent and its continuation) with a bool of its continuation at 7.
    with_word(&dev, 1, 2, 1, |_| 7);
    let reader = Reader::open(&dir).unwrap();
    for snap in [
        reader.cpu(1).unwrap(),
        reader.snapshot().unwrap().cpus[1].clone(),
    ] {
        assert_eq!(snap.events.len(), 11);
        assert_eq!(snap.damaged, 2, "both entries of the event");
        assert_eq!(
            snap.head,
            snap.skipped + snap.committed + snap.claimed + snap.lost + snap.damaged
        );
    }
    let view = View::of(&reader, 0).unwrap();
    assert_eq!((view.cpus[1].events.len(), view.cpus[1].damaged), (11, 2));
    drop(w);
}
