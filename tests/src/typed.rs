//! A small device of typed events written on both CPUs, to damage: every kind of argument
//! word a reader checks (bools, chars, strings, a value table's flags, a continuation's),
//! and what no event can show ([`impossible`]), judged from `dump`'s text alone.

use std::path::Path;
use ttrace_core::ArgType::{Bool, Char, Signed, Str, Unsigned, I8, U16};
use ttrace_core::{Definition, Kind, ValueTable, ValuesKind, Writer};
use ttrace_layouts::aux::AuxTag;
use ttrace_layouts::device::{CLASS_MESSAGES, INFO_FORMAT, INFO_NAME};
use ttrace_layouts::entry::TypeWord;

/// The strings the events refer to.
pub const STRINGS: [&str; 3] = ["alpha", "beta \"quoted\"", "gamma"];
/// The tracepoints' names.
pub const NAMES: [&str; 4] = ["typed", "wide", "bare", "flagged"];
/// The writer's context: `pid << 32 | tid`.
pub const CTX: u64 = 4242 << 32 | 4243;
/// The message the device holds.
pub const MESSAGE: &str = "a message";

static FLAGS: ValueTable = ValueTable::new(
    "FLAGS",
    ValuesKind::Flags,
    &[("NONE", 0), ("READ", 1), ("WRITE", 2)],
);

/// A 2-CPU device of 64-slot rings (16 KiB aux buffers, a 12 KiB metadata file) at `dir`.
/// Each restartable ring holds, four times, `typed` (a bool, a char, a string, a `u16` and
/// an `i8`: `b c s n l`), `wide` (12 words: a continuation, with a bool, a char
/// and a string in it) and `bare` (no argument), slot after slot from slot 0; ring `cpu0`
/// then `flagged` (a value table's flags) and one message ([`MESSAGE`]). Thread 4243 of
/// process 4242 is `worker`.
pub fn make(dir: &Path) -> Writer {
    let w = Writer::open(&ttrace_core::Config {
        aux_bytes: ttrace_layouts::device::MIN_AUX_BYTES,
        meta_bytes: 12288,
        max_tracepoints: 8,
        ..crate::config(dir, 64, 2)
    })
    .unwrap();
    let def = |name, kind, format, nargs, types, tables| {
        w.device()
            .register_tracepoint(&Definition {
                name,
                kind,
                classes: if name == INFO_NAME { CLASS_MESSAGES } else { 1 },
                format,
                nargs,
                types,
                tables,
                role: ttrace_core::Role::Point,
            })
            .unwrap()
            .1
    };
    let typed = def(
        "typed",
        Kind::Entry,
        "b={b} c={c} s={s} n={n} l={l}",
        5,
        &[Bool, Char, Str, U16, I8],
        &[],
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
        &[],
    );
    let bare = def("bare", Kind::Exit, "", 0, &[], &[]);
    static TABLES: &[&ValueTable] = &[&FLAGS];
    let flagged = def("flagged", Kind::Stop, "f={f:FLAGS}", 1, &[Unsigned], TABLES);
    w.device().note_thread(4242, 4243, "worker").unwrap();
    let strings: Vec<u64> = STRINGS
        .iter()
        .map(|s| w.aux_write(AuxTag::String, CTX, s.as_bytes()).unwrap())
        .collect();
    let map = w.device().mapping();
    for ring in 0..2usize {
        let r = map.ring(ring);
        let last = &map.ring_header(ring).last_stamp;
        let on = |word: u64| TypeWord(word).with_cpu(ring as u32).0;
        for i in 0..4u64 {
            let s = strings[(i as usize + ring) % 3];
            let c = ['x', 'é', '€', '\u{1F600}'][i as usize] as u64;
            let words = [
                on(typed),
                CTX,
                i & 1,
                c,
                s,
                i * 1000,
                (-7 * i as i64) as u64,
            ];
            r.write_restartable(last, w.now(), &words, None, usize::MAX);
            let args: [u64; 12] = [i, 1, 2, 3, 4, 1, c, s, -1i64 as u64, 9, 0, 11];
            let mut parent = [on(wide), CTX, 0, 0, 0, 0, 0];
            parent[2..].copy_from_slice(&args[..5]);
            let cont: [u64; 7] = args[5..].try_into().unwrap();
            r.write_restartable(last, w.now(), &parent, Some(&cont), usize::MAX);
            let words = [on(bare), CTX, 0, 0, 0, 0, 0];
            r.write_restartable(last, w.now(), &words, None, usize::MAX);
        }
    }
    let words = [flagged, CTX, 3, 0, 0, 0, 0];
    map.ring(0).write_restartable(
        &map.ring_header(0).last_stamp,
        w.now(),
        &words,
        None,
        usize::MAX,
    );
    // The message: an event of the built-in tracepoint `info`, its text a string record.
    let info = def(INFO_NAME, Kind::Start, INFO_FORMAT, 1, &[Str], &[]);
    let text = w
        .aux_write(AuxTag::String, CTX, MESSAGE.as_bytes())
        .unwrap();
    map.ring(0).write_restartable(
        &map.ring_header(0).last_stamp,
        w.now(),
        &[info, CTX, text, 0, 0, 0, 0],
        None,
        usize::MAX,
    );
    w
}

/// What `dump` prints of `dev` (a device or a snapshot file): its event lines (messages
/// included) and its footer, the header line left out.
pub fn dumped(dev: &devttrace::Reader) -> (Vec<String>, Vec<String>) {
    use ttrace_reader::decode::{dump, TimeFormat};
    let view = devttrace::View::of(dev, 0).unwrap();
    let mut out = Vec::new();
    let filter = ttrace_reader::merge::Filter::default();
    dump(&view, &filter, TimeFormat::Relative, None, &mut out).unwrap();
    String::from_utf8(out)
        .unwrap()
        .lines()
        .skip(1)
        .map(str::to_owned)
        .partition(|l| !l.starts_with('#'))
}

/// The damaged entries a footer of `dump` ([`dumped`]) counts on its last line.
pub fn damaged(footer: &[String]) -> u64 {
    let last = footer.last().expect("a footer");
    last.split_once(", ")
        .and_then(|_| last.rsplit_once(", "))
        .and_then(|(_, d)| d.strip_suffix(" entries damaged"))
        .map_or(0, |n| n.parse().expect("a count"))
}

/// Why `line`, an event line of `dump` of a device [`make`] made, shows something no writer
/// of it can have written, if it does: a time before the device or after `until_s` (seconds
/// since it was created), a CPU it has no ring for, an impossible process id, an unknown
/// tracepoint, an argument outside its type. (`?` is a word missing with its continuation,
/// `<lost>` a string the aux buffer no longer holds: both can be.)
pub fn impossible(line: &str, until_s: f64) -> Option<String> {
    let unreadable = || Some(format!("unreadable: {line}"));
    let mut f = line.split_whitespace();
    let Some(time) = f.next().and_then(|t| t.parse::<f64>().ok()) else {
        return unreadable();
    };
    if !(0.0..=until_s).contains(&time) {
        return Some(format!("time {time} outside 0..={until_s}"));
    }
    let Some(cpu) = f
        .next()
        .and_then(|c| c.strip_prefix("cpu"))
        .and_then(|c| c.parse::<u32>().ok())
    else {
        return unreadable();
    };
    if cpu >= 2 {
        return Some(format!("cpu{cpu} of a 2-CPU device"));
    }
    let Some((pid, tid)) = f.next().and_then(|p| p.split_once('/')) else {
        return unreadable();
    };
    let (Ok(pid), Ok(tid)) = (pid.parse::<u64>(), tid.parse::<u64>()) else {
        return unreadable();
    };
    if pid > 1 << 22 || tid > 1 << 22 {
        return Some(format!("pid {pid}, tid {tid}"));
    }
    let Some(text) = line.split_once(") ").map(|(_, t)| t) else {
        return unreadable();
    };
    if let Some(message) = text.strip_prefix("info(").and_then(|t| t.strip_suffix(')')) {
        // The message's text is a string as the events' are: a damaged reference shows
        // another one, or none.
        let known = (STRINGS.iter().chain([&MESSAGE])).any(|k| message == format!("{k:?}"));
        return (!known && message != "<lost>").then(|| format!("message {message}"));
    }
    let Some((name, args)) = text.split_once('(') else {
        return unreadable();
    };
    if !NAMES.contains(&name) {
        return Some(format!("tracepoint {name}"));
    }
    let field = |key: &str| {
        let at = args.find(&format!("{key}="))? + key.len() + 1;
        Some(&args[at..])
    };
    if name == "flagged" {
        return None; // Flags: any word shows.
    }
    let missing = |v: &str| v.starts_with('?');
    for b in ["b", "f", "k"].into_iter().filter_map(field) {
        if !b.starts_with("true") && !b.starts_with("false") && !missing(b) {
            return Some(format!("bool {b}"));
        }
    }
    for c in ["c", "g"].into_iter().filter_map(field) {
        // A char shows quoted; a word that is no char would show in hex.
        if !c.starts_with('\'') && !missing(c) {
            return Some(format!("char {c}"));
        }
    }
    for s in ["s", "h"].into_iter().filter_map(field) {
        // The message's text is a string record too: a damaged reference can land on it.
        let known = (STRINGS.iter().chain([&MESSAGE])).any(|k| s.starts_with(&format!("{k:?}")));
        if !known && !s.starts_with("<lost>") && !missing(s) {
            return Some(format!("string {s}"));
        }
    }
    None
}
