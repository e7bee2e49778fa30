//! `ttrace-reader export`, checked by the tools people open the output with: babeltrace2
//! for CTF (installed by `.ci/run`; the test fails if it is missing), a JSON parser for the
//! Chrome format. Each export of a known trace must show, event by event, what `dump` shows:
//! names, order, arguments, threads and timestamps to the nanosecond.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use ttrace_layouts::aux::AuxTag;

const READER: &str = env!("CARGO_BIN_EXE_ttrace-reader-cli");
const APP: &str = env!("CARGO_BIN_EXE_ttrace-test-app");

/// Runs `program` with `args`; its standard output. Panics with its error output.
fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .stderr(Stdio::piped())
        .output()
        .unwrap_or_else(|e| {
            panic!("{program}: {e} (the export tests need it installed: see .ci/run)")
        });
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `ttrace-reader export --format <format> <source> -o <out>`.
fn export(format: &str, source: &str, out: impl AsRef<Path>) {
    let out = out.as_ref().to_str().unwrap();
    run(READER, &["export", "--format", format, source, "-o", out]);
}

/// Exports `source` as Chrome JSON to `out`, and parses it.
fn chrome(source: &str, out: impl AsRef<Path>) -> serde_json::Value {
    export("chrome", source, &out);
    serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap()
}

/// A device written by the test application: strings, hex, negative numbers, 12-word
/// events and entry/exit pairs from three threads.
fn known_trace(dir: &Path) {
    let status = Command::new(APP)
        .arg(dir)
        .arg("40")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
}

/// The device `known_trace` writes in `dir/dev`: its path.
fn known_device(dir: &Path) -> String {
    let dev = dir.join("dev");
    known_trace(&dev);
    dev.to_str().unwrap().to_string()
}

/// One event of a dump: `(time, cpu, pid, tid, text)` where text is `name(args)`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Event {
    time: String,
    cpu: u32,
    pid: u32,
    tid: u32,
    text: String,
}

/// The events `dump` shows, with the time column as given (`--utc` or relative).
fn dump(dev: &str, utc: bool) -> Vec<Event> {
    let args: Vec<&str> = if utc {
        vec!["dump", "--utc", dev]
    } else {
        vec!["dump", dev]
    };
    run(READER, &args)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let mut f = l.split_whitespace();
            let time = f.next().unwrap().to_string();
            let cpu = f.next().unwrap()[3..].parse().unwrap();
            let (pid, tid) = f.next().unwrap().split_once('/').unwrap();
            let rest = l.split_once(") ").unwrap().1;
            Event {
                time,
                cpu,
                pid: pid.parse().unwrap(),
                tid: tid.parse().unwrap(),
                text: rest.to_string(),
            }
        })
        .collect()
}

/// Splits `s` at `sep` outside double-quoted strings (with `\"` escapes).
fn split_outside_quotes<'a>(s: &'a str, sep: &str) -> Vec<&'a str> {
    let (mut parts, mut start, mut quoted, mut escaped) = (Vec::new(), 0, false, false);
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            _ if !quoted && s[i..].starts_with(sep) => {
                parts.push(&s[start..i]);
                start = i + sep.len();
                i = start;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    parts.push(&s[start..]);
    parts
}

/// A babeltrace2 line (`--clock-date --clock-gmt`) as the event `dump --utc` shows:
/// `[2026-11-21 16:22:03.840697336] (+...) name: { cpu_id = 1 }, { pid = 5, tid = 6 },
/// { a = 1, s = "x" }` is `2026-11-21T16:22:03.840697336Z`, cpu 1, 5/6, `name(a=1 s="x")`.
fn babeltrace_event(line: &str) -> Event {
    let (time, rest) = line[1..].split_once("] ").unwrap();
    let rest = rest.split_once(") ").unwrap().1;
    let (name, rest) = rest.split_once(": ").unwrap();
    let blocks: Vec<&str> = split_outside_quotes(rest, "}, ")
        .into_iter()
        .map(|b| {
            b.trim()
                .trim_start_matches('{')
                .trim_end_matches('}')
                .trim()
        })
        .collect();
    let field = |block: &str, name: &str| -> u32 {
        split_outside_quotes(block, ", ")
            .iter()
            .find_map(|kv| kv.strip_prefix(&format!("{name} = ")))
            .unwrap()
            .parse()
            .unwrap()
    };
    let args: Vec<String> = blocks
        .get(2)
        .filter(|b| !b.is_empty())
        .map(|b| {
            split_outside_quotes(b, ", ")
                .iter()
                .map(|kv| {
                    let (k, v) = kv.split_once(" = ").unwrap();
                    // babeltrace2 writes hexadecimal digits in upper case.
                    match v.strip_prefix("0x") {
                        Some(hex) => format!("{k}=0x{}", hex.to_lowercase()),
                        None => format!("{k}={v}"),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let text = if name == "info" {
        // A message: `info("text")` in a dump.
        format!("info({})", args[0].strip_prefix("message=").unwrap())
    } else {
        format!("{name}({})", args.join(" "))
    };
    Event {
        time: format!("{}Z", time.replacen(' ', "T", 1)),
        cpu: field(blocks[0], "cpu_id"),
        pid: field(blocks[1], "pid"),
        tid: field(blocks[1], "tid"),
        text,
    }
}

#[test]
fn babeltrace2_prints_the_ctf_export_event_by_event_as_dump_does() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = &known_device(tmp.path());
    let ctf = tmp.path().join("ctf");
    export("ctf", dev, &ctf);
    let printed = run(
        "babeltrace2",
        &["--clock-date", "--clock-gmt", ctf.to_str().unwrap()],
    );
    let got: Vec<Event> = printed.lines().map(babeltrace_event).collect();
    let want = dump(dev, true);
    assert_eq!(got.len(), want.len());
    assert!(want.len() > 100, "{} events", want.len());
    // babeltrace2 merges the per-CPU streams by time; events of one instant may come in
    // another order than dump's, so compare sorted by (time, text) after checking order.
    assert!(got.windows(2).all(|p| p[0].time <= p[1].time));
    let key = |e: &Event| (e.time.clone(), e.tid, e.text.clone());
    let (mut got, mut want) = (got, want);
    got.sort_by_key(key);
    want.sort_by_key(key);
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
}

/// Microseconds as Chrome JSON gives them, to nanoseconds.
fn json_ns(v: &serde_json::Value) -> i64 {
    // Three decimals exactly: parse the text, not through a float.
    let s = v.to_string();
    let (us, frac) = s.split_once('.').unwrap_or((&s, "0"));
    let frac = format!("{frac:0<3}");
    us.parse::<i64>().unwrap() * 1000 + frac[..3].parse::<i64>().unwrap()
}

/// Relative seconds as dump shows them, to nanoseconds.
fn dump_ns(t: &str) -> i64 {
    let (s, frac) = t.split_once('.').unwrap();
    s.parse::<i64>().unwrap() * 1_000_000_000 + frac.parse::<i64>().unwrap()
}

/// The arguments of a dump text `name(k=v k=v)` as JSON values.
fn dump_args(text: &str) -> (String, serde_json::Map<String, serde_json::Value>) {
    let (name, rest) = text.split_once('(').unwrap();
    let inner = &rest[..rest.len() - 1];
    let mut args = serde_json::Map::new();
    if !inner.is_empty() {
        for kv in split_outside_quotes(inner, " ") {
            let (k, v) = kv.split_once('=').unwrap();
            let value = if v.starts_with('"') || v.starts_with("0x") {
                // Strings (same escapes for what the app writes) and hexadecimal.
                let v = if v.starts_with('"') {
                    serde_json::from_str::<String>(v).unwrap()
                } else {
                    v.to_string()
                };
                serde_json::Value::String(v)
            } else {
                serde_json::from_str(v).unwrap()
            };
            args.insert(k.to_string(), value);
        }
    }
    (name.to_string(), args)
}

#[test]
fn chrome_json_parses_and_pairs_every_entry_with_its_exit_per_thread() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = &known_device(tmp.path());
    let json = tmp.path().join("trace.json");
    let doc = chrome(dev, &json);
    let events = doc["traceEvents"].as_array().unwrap();
    let want = dump(dev, false);
    // Threads are named.
    let names: HashMap<u64, &str> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| {
            (
                e["tid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(names.values().any(|n| *n == "files"), "{names:?}");
    // Every entry is paired with the exit that follows it on its thread, as one slice.
    let mut open: HashMap<u32, Vec<&Event>> = HashMap::new();
    let mut slices = Vec::new();
    let mut instants = Vec::new();
    for e in &want {
        if e.text.starts_with("file_open(") {
            open.entry(e.tid).or_default().push(e);
        } else if e.text.starts_with("file_close(") {
            let entry = open
                .get_mut(&e.tid)
                .and_then(Vec::pop)
                .expect("entry before exit");
            slices.push((entry, e));
        } else {
            instants.push(e);
        }
    }
    assert!(open.values().all(Vec::is_empty));
    let xs: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(xs.len(), slices.len());
    assert!(!xs.is_empty());
    for (x, (entry, exit)) in xs.iter().zip(&slices) {
        assert_eq!(x["tid"].as_u64().unwrap(), entry.tid as u64);
        assert_eq!(x["pid"].as_u64().unwrap(), entry.pid as u64);
        assert_eq!(json_ns(&x["ts"]), dump_ns(&entry.time), "{x}");
        // The duration to the nanosecond (each time rounded separately: within 1 ns).
        let dur = json_ns(&x["dur"]) - (dump_ns(&exit.time) - dump_ns(&entry.time));
        assert!(dur.abs() <= 1, "{x}");
        let (name, mut args) = dump_args(&entry.text);
        let (exit_name, exit_args) = dump_args(&exit.text);
        assert_eq!(x["name"], name.as_str());
        args.insert(exit_name, serde_json::Value::Object(exit_args));
        assert_eq!(x["args"], serde_json::Value::Object(args));
    }
    // Every other event is an instant, in dump's order, with the same arguments.
    let is: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "i").collect();
    assert_eq!(is.len(), instants.len());
    for (i, e) in is.iter().zip(&instants) {
        let (name, args) = dump_args(&e.text);
        assert_eq!(i["name"], name.as_str());
        assert_eq!(i["tid"].as_u64().unwrap(), e.tid as u64);
        assert_eq!(json_ns(&i["ts"]), dump_ns(&e.time), "{i}");
        assert_eq!(i["args"], serde_json::Value::Object(args), "{i}");
    }
    assert!(events.iter().all(|e| e["ph"] != "b" && e["ph"] != "e"));
}

/// `uftrace dump` of a uftrace export, per thread: `(time, kind, name, depth)`.
fn uftrace_dump(dir: &str) -> HashMap<u32, Vec<(String, String, String, u32)>> {
    let mut per_thread: HashMap<u32, Vec<_>> = HashMap::new();
    for l in run("uftrace", &["dump", "--no-pager", "-d", dir]).lines() {
        // `0.004439809   5641: [entry] file_open(400010) depth: 0`
        let Some((time, rest)) = l.split_once(char::is_whitespace) else {
            continue;
        };
        let Some((tid, rest)) = rest.trim_start().split_once(": [") else {
            continue;
        };
        let (kind, rest) = rest.split_once("] ").unwrap();
        if kind.trim() == "args" {
            // `[args ] length = 48`, then one line per argument: not a record.
            continue;
        }
        let (name, rest) = rest.split_once('(').unwrap();
        let depth = rest.rsplit_once("depth: ").unwrap().1.parse().unwrap();
        per_thread.entry(tid.parse().unwrap()).or_default().push((
            time.to_string(),
            kind.trim().to_string(),
            name.to_string(),
            depth,
        ));
    }
    per_thread
}

/// A uftrace duration (`41.842 us`, `1.250 ms`, `2.000 s`) in nanoseconds.
fn uftrace_duration(d: &str) -> i64 {
    let (v, unit) = d.trim().split_once(' ').unwrap();
    let (whole, frac) = v.split_once('.').unwrap();
    let thousandths = whole.parse::<i64>().unwrap() * 1000 + frac.parse::<i64>().unwrap();
    thousandths
        * match unit {
            "ns" => 1,
            "us" => 1,
            "ms" => 1000,
            "s" => 1_000_000,
            _ => panic!("unit {unit}"),
        }
        / if unit == "ns" { 1000 } else { 1 }
}

#[test]
fn uftrace_dump_and_replay_show_the_uftrace_export_event_by_event() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = &known_device(tmp.path());
    let out = tmp.path().join("uftrace.data");
    let out = out.to_str().unwrap();
    export("uftrace", dev, out);
    let got = uftrace_dump(out);
    // What the dump says, per thread, in uftrace's terms.
    let mut want: HashMap<u32, Vec<(String, String, String, u32)>> = HashMap::new();
    let mut durations: HashMap<u32, Vec<i64>> = HashMap::new();
    let mut opened: HashMap<u32, &Event> = HashMap::new();
    let events = dump(dev, false);
    for e in &events {
        let name = e.text.split_once('(').unwrap().0;
        let (kind, name) = match name {
            "file_open" => {
                opened.insert(e.tid, e);
                ("entry", name.to_string())
            }
            "file_close" => {
                let entry = opened.remove(&e.tid).unwrap();
                durations
                    .entry(e.tid)
                    .or_default()
                    .push(dump_ns(&e.time) - dump_ns(&entry.time));
                ("exit", "file_open".to_string())
            }
            other => ("event", format!("ttrace:{other}")),
        };
        want.entry(e.tid)
            .or_default()
            .push((e.time.trim().to_string(), kind.to_string(), name, 0));
    }
    assert_eq!(got.len(), 3, "three threads");
    assert_eq!(got, want);
    // replay: each entry/exit pair is one call, with its duration and the entry's
    // arguments (strings in quotes, as they are).
    let mut replayed: HashMap<u32, Vec<(i64, String)>> = HashMap::new();
    for l in run("uftrace", &["replay", "--no-pager", "-d", out]).lines() {
        // `  41.842 us [  5641] | file_open("/data/0/log "0"", 0x8000, -25);`
        if let Some((left, call)) = l.split_once(" | ") {
            if let Some(args) = call.trim().strip_prefix("file_open(") {
                let (d, tid) = left.split_once('[').unwrap();
                let tid = tid.trim_end_matches(']').trim().parse().unwrap();
                let args = args.strip_suffix(");").unwrap().to_string();
                replayed
                    .entry(tid)
                    .or_default()
                    .push((uftrace_duration(d), args));
            }
        }
    }
    let mut want: HashMap<u32, Vec<(i64, String)>> = HashMap::new();
    for (tid, d) in &durations {
        let opens = events
            .iter()
            .filter(|e| e.tid == *tid && e.text.starts_with("file_open("));
        for (d, e) in d.iter().zip(opens) {
            let inner = &e.text["file_open(".len()..e.text.len() - 1];
            let args: Vec<String> = split_outside_quotes(inner, " ")
                .into_iter()
                .map(|kv| {
                    let v = kv.split_once('=').unwrap().1;
                    match v.starts_with('"') {
                        true => format!("\"{}\"", serde_json::from_str::<String>(v).unwrap()),
                        false => v.to_string(),
                    }
                })
                .collect();
            want.entry(*tid).or_default().push((*d, args.join(", ")));
        }
    }
    // uftrace shows durations to the nanosecond (three decimals of a microsecond).
    assert_eq!(replayed, want);
    // report: one line per function, with its number of calls.
    let report = run("uftrace", &["report", "--no-pager", "-d", out]);
    let calls = durations.values().map(Vec::len).sum::<usize>();
    assert!(
        report
            .lines()
            .any(|l| l.trim_end().ends_with(&format!("{calls}  file_open"))),
        "{report}"
    );
}

#[test]
fn exports_print_nothing_when_not_on_a_terminal() {
    // The progress bar is drawn only on a terminal: with standard error piped, an export
    // writes nothing there.
    let tmp = tempfile::tempdir().unwrap();
    let dev = tmp.path().join("dev");
    known_trace(&dev);
    for format in ["chrome", "ctf", "uftrace"] {
        let out = tmp.path().join(format);
        let done = Command::new(READER)
            .args(["export", "--format", format, dev.to_str().unwrap(), "-o"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(done.status.success(), "{format}");
        assert_eq!(String::from_utf8_lossy(&done.stderr), "", "{format}");
        assert_eq!(String::from_utf8_lossy(&done.stdout), "", "{format}");
    }
    // An export into a directory that holds something is refused, with one line.
    let done = Command::new(READER)
        .args(["export", "--format", "ctf", dev.to_str().unwrap(), "-o"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert_eq!(done.status.code(), Some(1));
    let err = String::from_utf8_lossy(&done.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not an empty directory"), "{err}");
}

/// A one-ring device of 8 slots that lost the beginning of a call tree: an outer entry,
/// ten entry/exit pairs and the outer exit, of which the last 8 entries remain (an exit
/// whose entry was overwritten, three pairs, and the outer exit).
fn wrapped_trace(dir: &Path) -> ttrace_core::Device {
    let w = ttrace_core::Device::open(&ttrace_tests::config(dir, 8, 1)).unwrap();
    let (entry, exit) = (
        tracepoint(&w, "call", ttrace_core::Kind::Entry),
        tracepoint(&w, "call_done", ttrace_core::Kind::Exit),
    );
    let ctx = 1 << 32 | 2;
    w.note_thread(1, 2, "caller").unwrap();
    w.emit(entry, ctx, &[100]);
    for n in 0..10 {
        w.emit(entry, ctx, &[n]);
        w.emit(exit, ctx, &[n]);
    }
    w.emit(exit, ctx, &[100]);
    w
}

#[test]
fn losses_and_unpaired_halves_show_in_every_format() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = tmp.path().join("dev");
    let _w = wrapped_trace(&dev);
    let dev = dev.to_str().unwrap();
    let path = |name: &str| tmp.path().join(name).to_str().unwrap().to_string();
    let lost = 22 - 8;
    // uftrace: a LOST record first, then the orphan exit at depth 0, three calls at depth 0,
    // and the outer exit.
    export("uftrace", dev, path("u"));
    let got = uftrace_dump(&path("u"));
    let kinds: Vec<(&str, &str, u32)> = got[&2]
        .iter()
        .map(|(_, k, n, d)| (k.as_str(), n.as_str(), *d))
        .collect();
    // uftrace shows the count in hexadecimal.
    let lost_hex = format!("<{lost:x}>");
    let mut want = vec![("lost", lost_hex.as_str(), 0), ("exit", "call_done", 0)];
    for _ in 0..3 {
        want.extend([("entry", "call", 0), ("exit", "call", 0)]);
    }
    want.push(("exit", "call_done", 0));
    assert_eq!(kinds, want);
    // CTF: the ring's losses are the stream's discarded events, which babeltrace2 reports.
    export("ctf", dev, path("c"));
    let out = Command::new("babeltrace2").arg(path("c")).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stderr) + String::from_utf8_lossy(&out.stdout);
    assert!(said.contains(&format!("discarded {lost} events")), "{said}");
    // Chrome: three slices, and each unpaired exit an async slice from the trace's start.
    let doc = chrome(dev, path("t.json"));
    let events = doc["traceEvents"].as_array().unwrap();
    let count = |ph: &str| events.iter().filter(|e| e["ph"] == ph).count();
    assert_eq!((count("X"), count("b"), count("e")), (3, 2, 2));
    for e in events.iter().filter(|e| e["ph"] == "e") {
        assert_eq!(e["name"], "call_done");
        assert_eq!(e["args"]["missing"], "entry");
    }
    assert!(doc["otherData"]["cpu0"]
        .as_str()
        .unwrap()
        .contains(&format!("{lost} entries lost")));
    // With no event of the ring exported, CTF still reports its losses.
    let out = path("none");
    run(
        READER,
        &[
            "export", "--format", "ctf", dev, "--filter", "nothing", "-o", &out,
        ],
    );
    let done = Command::new("babeltrace2").arg(&out).output().unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(
        String::from_utf8_lossy(&done.stderr).contains(&format!("discarded {lost} events")),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
}

/// Registers a one-argument tracepoint of `kind`; its type word.
fn tracepoint(w: &ttrace_core::Device, name: &'static str, kind: ttrace_core::Kind) -> u64 {
    w.register_tracepoint(&ttrace_core::meta::Definition {
        name,
        kind,
        classes: 1,
        format: "n={n}",
        nargs: 1,
    })
    .unwrap()
    .1
}

/// Writes an event of `word` for `ctx` into ring `cpu` at `stamp`, whatever CPU this runs on.
fn put(w: &ttrace_core::Device, cpu: usize, stamp: u64, word: u64, ctx: u64, n: u64) {
    let word = ttrace_layouts::entry::TypeWord(word).with_cpu(cpu as u32).0;
    let stamp = w
        .ring(cpu)
        .write(stamp, (ctx >> 32) as u32, &[word, ctx, n, 0, 0, 0, 0]);
    assert!(stamp.is_some());
}

/// Two rings of 8 slots. Thread 1/2 enters `outer` on ring 0, `inner` on ring 1, leaves
/// `inner` on ring 0 and, after a call of `later` on ring 0, leaves `outer`. Ring 1 then
/// takes 8 `tick`s of another thread and loses `inner`'s entry: before the horizon (ring 1's
/// first remaining event) a thread's events may be missing, and stack order would pair
/// `outer` with `inner`'s exit.
fn two_rings_one_wrapped(dir: &Path) -> ttrace_core::Device {
    use ttrace_core::Kind;
    let w = ttrace_core::Device::open(&ttrace_tests::config(dir, 8, 2)).unwrap();
    let (outer, outer_done) = (
        tracepoint(&w, "outer", Kind::Entry),
        tracepoint(&w, "outer_done", Kind::Exit),
    );
    let (inner, inner_done) = (
        tracepoint(&w, "inner", Kind::Entry),
        tracepoint(&w, "inner_done", Kind::Exit),
    );
    let (later, later_done) = (
        tracepoint(&w, "later", Kind::Entry),
        tracepoint(&w, "later_done", Kind::Exit),
    );
    let tick = tracepoint(&w, "tick", Kind::Start);
    let (t, other) = (1 << 32 | 2, 1 << 32 | 3);
    w.note_thread(1, 2, "caller").unwrap();
    let t0 = w.now();
    put(&w, 0, t0 + 1, outer, t, 1);
    put(&w, 1, t0 + 2, inner, t, 2);
    put(&w, 0, t0 + 3, inner_done, t, 2);
    for k in 0..8 {
        put(&w, 1, t0 + 10 + k, tick, other, k);
    }
    put(&w, 0, t0 + 20, later, t, 3);
    put(&w, 0, t0 + 21, later_done, t, 3);
    put(&w, 0, t0 + 30, outer_done, t, 1);
    w
}

#[test]
fn no_exit_is_paired_across_the_horizon_of_a_ring_that_lost_entries() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = tmp.path().join("dev");
    let _w = two_rings_one_wrapped(&dev);
    let dev = dev.to_str().unwrap();
    let path = |name: &str| tmp.path().join(name).to_str().unwrap().to_string();
    // Chrome: `later` is the only slice; `outer` and `inner_done`, before the horizon, are
    // instant events that say so; `outer_done` has lost its entry.
    let doc = chrome(dev, path("t.json"));
    let events = doc["traceEvents"].as_array().unwrap();
    let names = |ph: &str| -> Vec<&str> {
        events
            .iter()
            .filter(|e| e["ph"] == ph && e["name"] != "tick")
            .map(|e| e["name"].as_str().unwrap())
            .collect()
    };
    assert_eq!(names("X"), ["later"]);
    assert_eq!(names("i"), ["outer", "inner_done"]);
    for e in events
        .iter()
        .filter(|e| e["ph"] == "i" && e["name"] != "tick")
    {
        assert_eq!(e["args"]["unpaired"], "before the horizon");
    }
    assert_eq!(
        (names("b"), names("e")),
        (vec!["outer_done"], vec!["outer_done"])
    );
    assert!(doc["otherData"]["cpu1"]
        .as_str()
        .unwrap()
        .contains("1 entries lost"));
    // uftrace: the same, with the halves before the horizon as events.
    export("uftrace", dev, path("u"));
    let got = uftrace_dump(&path("u"));
    let kinds: Vec<(&str, &str, u32)> = got[&2]
        .iter()
        .map(|(_, k, n, d)| (k.as_str(), n.as_str(), *d))
        .collect();
    assert_eq!(
        kinds,
        [
            ("event", "ttrace:outer", 0),
            ("event", "ttrace:inner_done", 0),
            ("entry", "later", 0),
            ("exit", "later", 0),
            ("exit", "outer_done", 0),
        ]
    );
}

#[test]
fn uftrace_shows_entry_arguments_within_its_limits() {
    use ttrace_core::meta::Definition;
    use ttrace_core::Kind;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let w = ttrace_core::Device::open(&ttrace_tests::config(&dir, 64, 1)).unwrap();
    let def = |name, format, nargs| {
        let d = Definition {
            name,
            kind: Kind::Entry,
            classes: 1,
            format,
            nargs,
        };
        w.register_tracepoint(&d).unwrap().1
    };
    // Twelve strings of 1000 bytes: uftrace 0.13 replay crashes past about 2 KiB of
    // argument data, so each keeps its share (80 bytes) and ends with `...`.
    let many = def(
        "many",
        "{a:s} {b:s} {c:s} {d:s} {e:s} {f:s} {g:s} {h:s} {i:s} {j:s} {k:s} {l:s}",
        12,
    );
    let wide = def("wide", "{s:s} {x:f}", 2);
    // uftrace reads `.` in an argspec as a pattern: no arguments for this one.
    let dotted = def("dotted.name", "{n}", 1);
    // uftrace would merge the specs of two tracepoints of one name: neither gets one.
    let twins = [def("twin", "{n}", 1), def("twin", "{s:s}", 1)];
    let ctx = 1 << 32 | 2;
    let string = |bytes: &[u8]| {
        let off = w.aux_write(AuxTag::String, ctx, bytes).unwrap();
        ttrace_layouts::aux::AUX_REF | off
    };
    let long: Vec<u64> = (0..12).map(|_| string(&[b'x'; 1000])).collect();
    w.emit(many, ctx, &<[u64; 12]>::try_from(long).unwrap());
    // 1000 bytes of two-byte characters: cut between characters, not inside one.
    let text = "é".repeat(500);
    w.emit(wide, ctx, &[string(text.as_bytes()), 2.5f64.to_bits()]);
    w.emit(dotted, ctx, &[7]);
    w.emit(twins[0], ctx, &[8]);
    w.emit(twins[1], ctx, &[string(b"twin")]);
    let dev = dir.to_str().unwrap();
    let out = tmp.path().join("u");
    export("uftrace", dev, &out);
    let replay = run(
        "uftrace",
        &["replay", "--no-pager", "-d", out.to_str().unwrap()],
    );
    // Entries, each inside the one before, none closed.
    let calls: Vec<&str> = replay
        .lines()
        .filter_map(|l| l.split_once(" | ").map(|(_, c)| c.trim()))
        .collect();
    let x = format!("\"{}...\"", "x".repeat(77));
    let e = format!("\"{}...\"", "é".repeat(478));
    assert_eq!(
        calls,
        [
            &format!("many({}) {{", vec![x; 12].join(", ")),
            &format!("wide({e}, 2.500000) {{"),
            "dotted.name() {",
            "twin() {",
            "twin() {",
        ][..]
    );
}

/// Exports `view` (indexed before ring 1 was overwritten) in every format; the Chrome JSON
/// and the uftrace and CTF directories.
fn export_all(
    view: &devttrace::View<'_>,
    out: &Path,
) -> (serde_json::Value, [ttrace_reader::export::Written; 3]) {
    use ttrace_reader::export::{chrome, ctf, uftrace};
    use ttrace_reader::merge::{Filter, Merge};
    let items = || Merge::view(view, &Filter::default());
    let mut json = Vec::new();
    let c = chrome::write(view.into(), &view.cpus, items(), &mut json, |_| {}).unwrap();
    let u = uftrace::write(view.into(), &view.cpus, items(), &out.join("u"), |_| {}).unwrap();
    let t = ctf::write(view.into(), &view.cpus, items(), &out.join("c"), |_| {}).unwrap();
    (serde_json::from_slice(&json).unwrap(), [c, u, t])
}

#[test]
fn events_overwritten_while_exported_are_counted_and_cut_the_entries_open() {
    use ttrace_core::Kind;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let w = ttrace_core::Device::open(&ttrace_tests::config(&dir, 8, 2)).unwrap();
    let (call, call_done) = (
        tracepoint(&w, "call", Kind::Entry),
        tracepoint(&w, "call_done", Kind::Exit),
    );
    let tick = tracepoint(&w, "tick", Kind::Start);
    let (t, other) = (1 << 32 | 2, 1 << 32 | 3);
    let t0 = w.now();
    // `call` on ring 0 spans two ticks of ring 1.
    put(&w, 0, t0 + 1, call, t, 1);
    put(&w, 1, t0 + 2, tick, other, 0);
    put(&w, 1, t0 + 3, tick, other, 1);
    put(&w, 0, t0 + 4, call_done, t, 1);
    let dev = devttrace::Device::open(&dir).unwrap();
    let view = dev.view_newer_than(0).unwrap();
    assert_eq!(view.cpus[1].events.len(), 2);
    // Ring 1 is lapped after the index and before the copy: both ticks vanish, and the
    // thread of `call` may have lost events there.
    for k in 0..8 {
        put(&w, 1, t0 + 10 + k, tick, other, 10 + k);
    }
    let (doc, written) = export_all(&view, tmp.path());
    for w in &written {
        assert_eq!(w.vanished, 2, "{w:?}");
        assert_eq!(w.events, 2, "{w:?}");
    }
    // Chrome: no slice; `call` is cut, `call_done` has no entry; ring 1's count says 2 lost.
    let events = doc["traceEvents"].as_array().unwrap();
    let of = |ph: &str| events.iter().filter(|e| e["ph"] == ph).count();
    assert_eq!((of("X"), of("i"), of("b"), of("e")), (0, 1, 1, 1));
    let cut = events.iter().find(|e| e["ph"] == "i").unwrap();
    assert_eq!(cut["name"], "call");
    assert_eq!(cut["args"]["unpaired"], "events lost after it");
    assert_eq!(
        doc["otherData"]["cpu1"],
        "0 events, 2 entries lost, 0 incomplete"
    );
    assert_eq!((written[0].pairs, written[0].uncertain), (0, 1));
    // uftrace: the lost slots are a LOST record; `call`'s exit closes nothing.
    let got = uftrace_dump(tmp.path().join("u").to_str().unwrap());
    let kinds: Vec<(&str, &str)> = got
        .values()
        .flatten()
        .map(|(_, k, n, _)| (k.as_str(), n.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [("entry", "call"), ("exit", "call_done"), ("lost", "<2>")]
    );
    // CTF: babeltrace2 reports the two slots as discarded.
    let out = Command::new("babeltrace2")
        .arg(tmp.path().join("c"))
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("discarded 2 events"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn argument_names_that_clash_once_mangled_stay_distinct() {
    // `{a b}` and `{a_b}` are one CTF field name once mangled, and `{x}` twice one JSON
    // key: each export keeps them apart (babeltrace2 refuses a trace with duplicate fields).
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let w = ttrace_core::Device::open(&ttrace_tests::config(&dir, 64, 1)).unwrap();
    let word = ttrace_tests::define(&w, "clash", "{a b} {a_b} {x} {x}");
    w.emit(word, 1 << 32 | 2, &[1, 2, 3, 4]);
    let dev = dir.to_str().unwrap();
    let ctf = tmp.path().join("ctf");
    export("ctf", dev, &ctf);
    let printed = run("babeltrace2", &[ctf.to_str().unwrap()]);
    assert!(
        printed.contains("{ a_b = 1, a_b_1 = 2, x = 3, x_1 = 4 }"),
        "{printed}"
    );
    let json = tmp.path().join("t.json");
    let doc = chrome(dev, &json);
    let args = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "clash")
        .unwrap()["args"]
        .clone();
    assert_eq!(
        args,
        serde_json::json!({"a b": 1, "a_b": 2, "x": 3, "x_1": 4})
    );
}

#[test]
fn a_snapshot_exports_as_its_device_does() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = &known_device(tmp.path());
    let path = |name: &str| tmp.path().join(name).to_str().unwrap().to_string();
    run(READER, &["snapshot", dev, "-o", &path("s.ttrace")]);
    for (source, json) in [(dev.to_string(), "d.json"), (path("s.ttrace"), "s.json")] {
        export("chrome", &source, path(json));
    }
    let events = |json: &str| -> serde_json::Value {
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path(json)).unwrap()).unwrap();
        doc["traceEvents"].clone()
    };
    assert_eq!(events("s.json"), events("d.json"));
    for (source, dir) in [(dev.to_string(), "d.uf"), (path("s.ttrace"), "s.uf")] {
        export("uftrace", &source, path(dir));
    }
    assert_eq!(uftrace_dump(&path("s.uf")), uftrace_dump(&path("d.uf")));
}
