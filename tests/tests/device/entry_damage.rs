//! Entries damaged in a device's ring files (a flipped bit): an event whose fields no writer
//! of the device can have written is never shown, and is counted as damaged.

use devttrace::{Device, Reader, View};
use ttrace_core::ArgType::{Bool, Char, Signed, Str, Unsigned};
use ttrace_core::{Definition, Kind, Writer};
use ttrace_layouts::aux::AuxTag;
use ttrace_layouts::entry::TypeWord;
use ttrace_reader::decode::{self, TimeFormat};
use ttrace_reader::merge::Filter;

/// The strings the events refer to.
const STRINGS: [&str; 3] = ["alpha", "beta \"quoted\"", "gamma"];
/// The tracepoints' names.
const NAMES: [&str; 3] = ["typed", "wide", "bare"];
const CTX: u64 = 4242 << 32 | 4243;

/// A 2-CPU device of 64-slot rings holding, in each restartable ring, events of typed
/// arguments: `typed` (a bool, a char, a string, an unsigned and a signed integer), `wide`
/// (12 words: a continuation, with a bool, a char and a string in it) and `bare`.
fn make(dir: &std::path::Path) -> Writer {
    let w = Writer::open(&ttrace_tests::config(dir, 64, 2)).unwrap();
    let def = |name, kind, format, nargs, types| {
        w.register_tracepoint(&Definition {
            name,
            kind,
            classes: 1,
            format,
            nargs,
            types,
            tables: &[],
        })
        .unwrap()
        .1
    };
    let typed = def(
        "typed",
        Kind::Entry,
        "b={b} c={c} s={s} n={n} d={d}",
        5,
        &[Bool, Char, Str, Unsigned, Signed],
    );
    let wide = def(
        "wide",
        Kind::Start,
        "{a} {b} {c} {d} {e} f={f} g={g} h={h} {i} {j} k={k} {l}",
        12,
        &[
            Unsigned, Unsigned, Unsigned, Unsigned, Unsigned, Bool, Char, Str, Signed, Unsigned,
            Bool, Unsigned,
        ],
    );
    let bare = def("bare", Kind::Exit, "", 0, &[]);
    w.note_thread(4242, 4243, "worker").unwrap();
    let strings: Vec<u64> = STRINGS
        .iter()
        .map(|s| w.aux_write(AuxTag::String, CTX, s.as_bytes()).unwrap())
        .collect();
    let map = w.mapping();
    for ring in 0..2usize {
        let r = map.ring(ring);
        let last = &map.ring_header(ring).last_stamp;
        let on = |word: u64| TypeWord(word).with_cpu(ring as u32).0;
        for i in 0..4u64 {
            let s = strings[(i as usize + ring) % 3];
            let c = ['x', 'é', '€', '\u{1F600}'][i as usize] as u64;
            let t = w.now();
            r.write_restartable(
                last,
                t,
                &[
                    on(typed),
                    CTX,
                    i & 1,
                    c,
                    s,
                    i * 1000,
                    (-7 * i as i64) as u64,
                ],
                None,
                usize::MAX,
            );
            let args: [u64; 12] = [i, 1, 2, 3, 4, 1, c, s, -1i64 as u64, 9, 0, 11];
            let mut parent = [on(wide), CTX, 0, 0, 0, 0, 0];
            parent[2..].copy_from_slice(&args[..5]);
            let cont: [u64; 7] = args[5..].try_into().unwrap();
            r.write_restartable(last, w.now(), &parent, Some(&cont), usize::MAX);
            r.write_restartable(
                last,
                w.now(),
                &[on(bare), CTX, 0, 0, 0, 0, 0],
                None,
                usize::MAX,
            );
        }
    }
    w
}

/// What `dump` prints of `dev` now: the event lines and the footer (the lines after them).
fn dump(dev: &Reader) -> (Vec<String>, Vec<String>) {
    let view = View::of(dev, 0).unwrap();
    let mut out = Vec::new();
    decode::dump(
        &view,
        &Filter::default(),
        TimeFormat::Relative,
        None,
        &mut out,
    )
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    let (footer, events) = text
        .lines()
        .skip(1)
        .map(str::to_owned)
        .partition(|l| l.starts_with('#'));
    (events, footer)
}

/// The damaged entries the footer's last line counts.
fn damaged(footer: &[String]) -> u64 {
    let last = footer.last().unwrap();
    last.split_once(", ")
        .and_then(|_| last.rsplit_once(", "))
        .and_then(|(_, d)| d.strip_suffix(" entries damaged"))
        .map_or(0, |n| n.parse().unwrap())
}

/// Why `line` shows something no writer of the device [`make`] made can have written, if it
/// does: a time before the device or after `until_s` (seconds since it was created), a CPU it
/// has no ring for, an impossible process id, an unknown tracepoint, an argument outside its
/// type.
fn impossible(line: &str, until_s: f64) -> Option<String> {
    let mut f = line.split_whitespace();
    let time: f64 = f.next()?.parse().ok()?;
    if !(0.0..=until_s).contains(&time) {
        return Some(format!("time {time} outside 0..={until_s}"));
    }
    let cpu: u32 = f.next()?.strip_prefix("cpu")?.parse().ok()?;
    if cpu >= 2 {
        return Some(format!("cpu{cpu} of a 2-CPU device"));
    }
    let (pid, tid) = f.next()?.split_once('/')?;
    let (pid, tid): (u64, u64) = (pid.parse().ok()?, tid.parse().ok()?);
    if pid > 1 << 22 || tid > 1 << 22 {
        return Some(format!("pid {pid}, tid {tid}"));
    }
    let text = line.split_once(") ")?.1;
    let (name, args) = text.split_once('(')?;
    if !NAMES.contains(&name) {
        return Some(format!("tracepoint {name}"));
    }
    let args = args.strip_suffix(')')?;
    let field = |key: &str| {
        let at = args.find(&format!("{key}="))? + key.len() + 1;
        Some(&args[at..])
    };
    let bools = ["b", "f", "k"].into_iter().filter_map(field);
    for b in bools {
        if !b.starts_with("true") && !b.starts_with("false") && !b.starts_with('?') {
            return Some(format!("bool {b}"));
        }
    }
    // (`?`: the word is missing, with its continuation.)
    for c in ["c", "g"].into_iter().filter_map(field) {
        // A char shows quoted; a word that is no char would show in hex.
        if !c.starts_with('\'') && !c.starts_with('?') {
            return Some(format!("char {c}"));
        }
    }
    for s in ["s", "h"].into_iter().filter_map(field) {
        let known = STRINGS.iter().any(|k| s.starts_with(&format!("{k:?}")));
        if !known && !s.starts_with("<lost>") && !s.starts_with('?') {
            return Some(format!("string {s}"));
        }
    }
    None
}

/// The device's age in seconds, by its clock: no event can be later (and a second's slack).
fn age_s(dev: &Reader) -> f64 {
    let clock = dev.version().clock;
    clock.since_anchor_ns(dev.mapping().now()) as f64 / 1e9 + 1.0
}

#[test]
fn every_flipped_bit_of_every_entry_shows_only_possible_events_and_counts_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let w = make(&dir);
    let (base, base_footer) = dump(&w);
    assert_eq!(base.len(), 24, "{base:#?}");
    assert_eq!(damaged(&base_footer), 0);
    for line in &base {
        assert_eq!(impossible(line, age_s(&w)), None, "{line}");
    }
    // Flipped in place, through a writable mapping, read as a reader reads the file.
    let dev = Device::attach(&dir).unwrap();
    let (mut flips, mut vanished, mut counted) = (0, 0, 0);
    for ring in 0..2 {
        let r = dev.mapping().ring(ring);
        let used = r.head.load(core::sync::atomic::Ordering::Relaxed) as usize;
        for slot in &r.slots[..used] {
            for word in 0..8 {
                for bit in 0..64 {
                    let w = &slot.words[word];
                    w.fetch_xor(1 << bit, core::sync::atomic::Ordering::Relaxed);
                    let (lines, footer) = dump(&dev);
                    let until = age_s(&dev);
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
    assert_eq!(flips, 2 * 16 * 8 * 64);
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

/// A copy of the entry in `slot` of ring `ring` with word `word` changed by `f`, read back.
fn with_word(dev: &Device, ring: usize, slot: usize, word: usize, f: impl Fn(u64) -> u64) {
    let w = &dev.mapping().ring(ring).slots[slot].words[word];
    let old = w.load(core::sync::atomic::Ordering::Relaxed);
    w.store(f(old), core::sync::atomic::Ordering::Relaxed);
}

/// Each impossible field alone: the one event (in slot 0 of ring 1: `typed`, i = 0) is
/// gone and counted as one damaged entry; nothing else changes.
#[test]
fn each_impossible_field_hides_its_event_and_counts_it() {
    /// What is damaged, which word of the entry, and how.
    type Case = (&'static str, usize, fn(u64) -> u64);
    let cases: Vec<Case> = vec![
        ("cpu1024 on a 2-CPU device", 1, |t| t | 1 << (8 + 10)),
        ("cpu0 in cpu1's ring", 1, |t| t & !(1 << 8)),
        ("an unknown tracepoint", 1, |t| t | 1 << (20 + 9)),
        ("another kind", 1, |t| t ^ 1),
        ("fewer arguments", 1, |t| t - (1 << 4)),
        ("a pid no process can have", 2, |c| c | 1 << 62),
        ("a tid no thread can have", 2, |c| c | 1 << 30),
        ("a time before the device", 0, |s| s - (1 << 40)),
        ("a time after the read", 0, |s| s + (1 << 48)),
        ("a bool that is 2", 3, |_| 2),
        ("a char that is a surrogate", 4, |_| 0xd800),
        ("a char beyond u32", 4, |c| c | 1 << 40),
        ("a string word that is no reference", 5, |s| s & !(1 << 63)),
        ("a string in a buffer the device lacks", 5, |s| s | 1 << 60),
        ("a string reference off a record boundary", 5, |s| s + 4),
    ];
    for (what, word, f) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("dev");
        let w = make(&dir);
        let (base, base_footer) = dump(&w);
        let dev = Device::attach(&dir).unwrap();
        with_word(&dev, 1, 0, word, f);
        let (lines, footer) = dump(&dev);
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
