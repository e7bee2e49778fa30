//! `ttrace-reader export`: each export of a known trace must hold, event by event, what
//! `dump` shows: names, order, arguments, threads and timestamps to the nanosecond.
//!
//! Every machine checks the content: CTF through our own CTF reader (`ttrace_tests::ctf`),
//! uftrace data through our own reader of its files (`ttrace_tests::uftrace`), Chrome JSON
//! through a JSON parser. The tests marked `#[ignore = "needs ..."]` check, with the viewers
//! installed (`cargo test --workspace -- --include-ignored`), that babeltrace2
//! and uftrace read every export as our readers do, and what only a viewer can show
//! (`uftrace replay` and `report`).

use std::collections::HashMap;
use std::path::Path;
use ttrace_layouts::aux::AuxTag;
use ttrace_tests::{ctf, define_kind, reader, test_app, uftrace, viewer};

/// Runs `ttrace-reader export --format <format> <source> -o <out>`, which must succeed.
fn export(format: &str, source: &str, out: impl AsRef<Path>) {
    let out = out.as_ref().to_str().unwrap();
    reader!("export", "--format", format, source, "-o", out).ok();
}

/// The CTF trace in `dir`, as our reader reads it.
fn read_ctf(dir: impl AsRef<Path>) -> ctf::Trace {
    ctf::read(dir.as_ref()).unwrap_or_else(|e| panic!("{}: {e}", dir.as_ref().display()))
}

/// The uftrace data in `dir`, as our reader reads it.
fn read_uftrace(dir: impl AsRef<Path>) -> uftrace::Data {
    uftrace::read(dir.as_ref()).unwrap_or_else(|e| panic!("{}: {e}", dir.as_ref().display()))
}

/// Exports `source` as Chrome JSON to `out`, and parses it.
fn chrome(source: &str, out: impl AsRef<Path>) -> serde_json::Value {
    export("chrome", source, &out);
    serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap()
}

/// A device written by the test application: strings, hex, negative numbers, 12-word
/// events and entry/exit pairs from three threads.
fn known_trace(dir: &Path) {
    test_app!(dir, 40).succeeds();
}

/// The device `known_trace` writes in `dir/dev`: its path.
pub(crate) fn known_device(dir: &Path) -> String {
    let dev = dir.join("dev");
    known_trace(&dev);
    dev.to_str().unwrap().to_string()
}

/// One event of a dump: `(time, cpu, pid, tid, text)` where text is `name(args)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Event {
    pub(crate) time: String,
    pub(crate) cpu: u32,
    pub(crate) pid: u32,
    pub(crate) tid: u32,
    pub(crate) text: String,
}

/// The events `dump` shows, with the time column as given (`--utc` or relative).
pub(crate) fn dump(dev: &str, utc: bool) -> Vec<Event> {
    let args: Vec<&str> = if utc {
        vec!["dump", "--utc", dev]
    } else {
        vec!["dump", dev]
    };
    reader!()
        .args(args)
        .ok()
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

/// Checks that `got` holds the events of `want` (a dump) and is in time order. Events of
/// one instant may be merged in another order than dump's, so the two are compared sorted
/// by (time, thread, text).
pub(crate) fn assert_same_events(got: Vec<Event>, mut want: Vec<Event>) {
    assert!(want.len() > 100, "{} events", want.len());
    assert_eq!(got.len(), want.len());
    assert!(got.windows(2).all(|p| p[0].time <= p[1].time));
    let key = |e: &Event| (e.time.clone(), e.tid, e.text.clone());
    let mut got = got;
    got.sort_by_key(key);
    want.sort_by_key(key);
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
}

/// A CTF event as the event `dump --utc` shows: strings quoted as dump quotes them, hex in
/// lower case, a message `info("text")`.
fn ctf_as_dump(e: &ctf::Event) -> Event {
    let value = |v: &ctf::Value| match v {
        ctf::Value::Str(s) => {
            let mut out = Vec::new();
            ttrace_reader::format::quoted(&mut out, s.as_bytes());
            String::from_utf8(out).unwrap()
        }
        ctf::Value::Hex(h) => format!("{h:#x}"),
        ctf::Value::Float(f) => f.to_string(),
        other => other.to_string(),
    };
    let text = match (e.name.as_str(), &e.fields[..]) {
        ("info", [(_, message)]) => format!("info({})", value(message)),
        _ => {
            let args: Vec<String> = e
                .fields
                .iter()
                .map(|(k, v)| format!("{k}={}", value(v)))
                .collect();
            format!("{}({})", e.name, args.join(" "))
        }
    };
    Event {
        time: ttrace_reader::decode::utc(e.ns),
        cpu: e.cpu,
        pid: e.pid,
        tid: e.tid,
        text,
    }
}

/// A Perfetto track event as the event `dump --utc` shows (its CPU is not in the trace: 0),
/// at its wall-clock time as the trace's clock snapshots tell it: its arguments put in the
/// format of its tracepoint (the one of its name and argument names in `meta`), as dump
/// shows them (value tables' names, and lost strings, unquoted). An `unpaired` instant's
/// last argument, `why`, is the model's reason, not the event's.
fn perfetto_as_dump(e: &ttrace_tests::perfetto::Event, meta: &devttrace::Metadata) -> Event {
    use ttrace_reader::format::{Piece, Spec};
    let mut e = e.clone();
    if e.category == "unpaired" {
        let why = e.args.pop().expect("why");
        assert_eq!(why.0, "why", "{e:?}");
    }
    // A slice's end says where its time went after its event's own arguments.
    let parts = ttrace_reader::export::perfetto::PART_ARGS;
    while (e.args.last()).is_some_and(|a| a.0 == "dominant" || parts.contains(&a.0.as_str())) {
        e.args.pop();
    }
    let e = &e;
    use ttrace_tests::perfetto::Value;
    let value = |v: &Value, spec: Option<&Spec>| match v {
        Value::Str(s)
            if s == "<lost>" || matches!(spec, Some(Spec::Values { .. } | Spec::Char)) =>
        {
            s.clone()
        }
        Value::Str(s) => {
            let mut out = Vec::new();
            ttrace_reader::format::quoted(&mut out, s.as_bytes());
            String::from_utf8(out).unwrap()
        }
        Value::Pointer(h) => format!("{h:#x}"),
        Value::Double(f) => f.to_string(),
        Value::Uint(u) => u.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Bool(b) => b.to_string(),
    };
    let schemas = ttrace_reader::export::Schema::all(meta);
    let names: Vec<&str> = e.args.iter().map(|a| a.0.as_str()).collect();
    let point = meta.tracepoints.iter().zip(&schemas).find(|(t, s)| {
        t.name == e.name
            && s.args
                .iter()
                .map(|a| a.0.as_str())
                .eq(names.iter().copied())
    });
    let text = match (e.name.as_str(), &e.args[..], point) {
        ("info", [(_, message)], _) => format!("info({})", value(message, None)),
        (_, _, Some((t, _))) => {
            let mut text = format!("{}(", e.name);
            let mut args = e.args.iter();
            for piece in ttrace_reader::format::pieces(t, meta) {
                match piece {
                    Piece::Text(t) => text.push_str(&t),
                    Piece::Arg(_, spec) => {
                        text.push_str(&value(&args.next().unwrap().1, Some(&spec)))
                    }
                }
            }
            text + ")"
        }
        _ => panic!("{e:?}: no tracepoint of this name and these arguments"),
    };
    Event {
        time: ttrace_reader::decode::utc(e.realtime),
        cpu: 0,
        pid: e.pid as u32,
        tid: e.tid as u32,
        text,
    }
}

/// The Perfetto trace `file`, as our reader reads it, its slices nesting per track, its
/// clock the wall clock, tied to the sequences' own by a snapshot at the device's anchor.
pub(crate) fn read_perfetto(file: &Path) -> ttrace_tests::perfetto::Trace {
    let trace = ttrace_tests::perfetto::read(&std::fs::read(file).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    trace.check_nesting().unwrap();
    let first = trace.snapshots.first().expect("a clock snapshot");
    assert_eq!(first.primary, Some(ttrace_tests::perfetto::REALTIME));
    trace
}

/// Whether a Perfetto track event is a half of a span instance's slice moved to another
/// lane (not an event of the trace).
pub(crate) fn moved(e: &ttrace_tests::perfetto::Event) -> bool {
    let (name, value) = ttrace_reader::export::perfetto::MOVED;
    e.args
        == [(
            name.to_string(),
            ttrace_tests::perfetto::Value::Str(value.into()),
        )]
}

/// The events of a Perfetto export that are events of the trace (not a counter's value,
/// not a ring's losses, not a moved slice's halves), as `dump --utc` shows them (see
/// [`perfetto_as_dump`]).
pub(crate) fn perfetto_events(trace: &ttrace_tests::perfetto::Trace, dev: &str) -> Vec<Event> {
    let meta = devttrace::Reader::open(dev).unwrap().metadata();
    let mut got: Vec<Event> = trace
        .events
        .iter()
        // Not the thread-state slices: no event's, but stretches between switches.
        .filter(|e| e.kind != 4 && e.category != "loss" && e.category != "sched" && !moved(e))
        .map(|e| perfetto_as_dump(e, &meta))
        .collect();
    got.sort_by(|a, b| a.time.cmp(&b.time));
    got
}

/// The events of `dump --utc`, as a Perfetto export names them: by tracepoint, without
/// the level and the step a `tracing` callsite's name shows with, and no CPU.
pub(crate) fn dump_as_perfetto(dev: &str) -> Vec<Event> {
    const LEVELS: [&str; 5] = ["TRACE ", "DEBUG ", "INFO ", "WARN ", "ERROR "];
    const STEPS: [&str; 7] = [
        " new(",
        " enter(",
        " exit(",
        " close(",
        " record(",
        " follows(",
        " event(",
    ];
    dump(dev, true)
        .into_iter()
        .map(|mut e| {
            if let Some(rest) = LEVELS.iter().find_map(|l| e.text.strip_prefix(l)) {
                let open = rest.find('(').unwrap_or(rest.len());
                let step = STEPS
                    .iter()
                    .find(|s| rest[..=open.min(rest.len() - 1)].ends_with(*s));
                e.text = match step {
                    Some(s) => format!("{}({}", &rest[..open + 1 - s.len()], &rest[open + 1..]),
                    None => rest.to_string(),
                };
            }
            Event { cpu: 0, ..e }
        })
        .collect()
}

#[test]
fn the_perfetto_export_holds_every_event_as_dump_shows_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = &known_device(tmp.path());
    let file = tmp.path().join("trace.pftrace");
    export("perfetto", dev, &file);
    let trace = read_perfetto(&file);
    // Every event on its thread's track (no start here has a stop), named as the thread was.
    assert!(trace.events.iter().all(|e| e.on_thread));
    let names: Vec<&str> = trace
        .threads
        .values()
        .filter_map(|t| t.2.as_deref())
        .collect();
    assert!(names.len() >= 3, "{names:?}");
    assert!(trace.events.iter().any(|e| e.kind == 1));
    assert_same_events(perfetto_events(&trace, dev), dump_as_perfetto(dev));
}

/// A device that lost entries: the demo's workload (requests as start/stop pairs, file
/// reads as entry/exit pairs, a message) in rings of 4,096 slots.
pub(crate) fn demo_device(dir: &Path) -> String {
    let dev = dir.join("demo");
    reader!("demo", "--device", &dev, "--requests", "3000")
        .env("TTRACE_BUFFER", "64k")
        .ok();
    dev.to_str().unwrap().to_string()
}

#[test]
fn the_perfetto_export_shows_start_stop_pairs_counters_and_each_rings_losses() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = &demo_device(tmp.path());
    let file = tmp.path().join("trace.pftrace");
    reader!(
        "export",
        "--format",
        "perfetto",
        dev,
        "-o",
        &file,
        "--counter",
        "request_start.size"
    )
    .ok();
    let trace = read_perfetto(&file);
    assert_same_events(perfetto_events(&trace, dev), dump_as_perfetto(dev));
    // Each ring's losses, once, as stats counts them.
    let stats = reader!("stats", dev).ok();
    let lost: Vec<(u64, u64)> = stats
        .lines()
        .filter_map(|l| {
            let (cpu, rest) = l.strip_prefix("cpu")?.split_once(": ")?;
            let n = rest.split(", ").nth(1)?.strip_suffix(" entries lost")?;
            Some((cpu.parse().ok()?, n.parse().ok()?))
        })
        .filter(|&(_, n)| n > 0)
        .collect();
    assert!(!lost.is_empty(), "{stats}");
    let arg =
        |e: &ttrace_tests::perfetto::Event, name: &str| match e.args.iter().find(|a| a.0 == name) {
            Some((_, ttrace_tests::perfetto::Value::Uint(v))) => *v,
            other => panic!("{name}: {other:?}"),
        };
    let mut shown: Vec<(u64, u64)> = trace
        .events
        .iter()
        .filter(|e| e.category == "loss")
        .map(|e| (arg(e, "cpu"), arg(e, "lost")))
        .collect();
    shown.sort();
    assert_eq!(shown, lost);
    // Requests are slices on a track of their stem under their thread's; every size a
    // counter's value, in order.
    let requests: Vec<_> = trace
        .events
        .iter()
        .filter(|e| e.name == "request_start" && e.kind == 1)
        .collect();
    assert!(requests.len() > 100);
    assert!(requests
        .iter()
        .all(|e| trace.tracks[&e.track].1.as_deref() == Some("request")));
    let sizes: Vec<(u64, i64)> = trace
        .events
        .iter()
        .filter(|e| e.name == "request_start" && e.kind != 4)
        .map(|e| (e.ns, arg(e, "size") as i64))
        .collect();
    let counted: Vec<(u64, i64)> = trace
        .events
        .iter()
        .filter(|e| e.kind == 4)
        .map(|e| match e.value {
            Some(ttrace_tests::perfetto::Value::Int(v)) => (e.ns, v),
            ref v => panic!("{v:?}"),
        })
        .collect();
    assert!(trace
        .events
        .iter()
        .filter(|e| e.kind == 4)
        .all(|e| e.name == "request_start.size"));
    assert_eq!(counted, sizes);
}

#[test]
fn a_counter_that_names_no_numeric_argument_is_one_line_naming_what_there_is() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = &known_device(tmp.path());
    let out = tmp.path().join("t.pftrace");
    // `export --format FORMAT --counter COUNTER`, which must fail: its error.
    let refused = |format: &str, counter: &str| {
        reader!(
            "export",
            "--format",
            format,
            dev,
            "-o",
            &out,
            "--counter",
            counter
        )
        .fails()
    };
    assert_eq!(
        refused("perfetto", "file_open.pth").trim(),
        "ttrace-reader: --counter file_open.pth: file_open has no argument pth (it has: path, flags, delta)"
    );
    assert_eq!(
        refused("perfetto", "file_opn").trim(),
        "ttrace-reader: --counter file_opn: the trace has no tracepoint named file_opn"
    );
    let err = refused("chrome", "file_open");
    assert!(err.contains("--format perfetto"), "{err}");
    assert!(!out.exists());
}

/// A device written through `ttrace_tracing`'s subscriber by a tokio program: span
/// instances polled on two worker threads, fields recorded late, events, `follows_from`.
pub(crate) fn spans_device(dir: &Path) -> String {
    let dev = dir.join("spans");
    ttrace_tests::cli::Cli::new(env!("CARGO_BIN_EXE_ttrace-test-spans"))
        .env("TTRACE_DIR", &dev)
        .arg("40")
        .ok();
    dev.to_str().unwrap().to_string()
}

#[test]
fn the_perfetto_export_of_a_tokio_service_shows_each_span_on_a_lane_and_each_poll_on_its_thread() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = &spans_device(tmp.path());
    let file = tmp.path().join("trace.pftrace");
    export("perfetto", dev, &file);
    let trace = read_perfetto(&file);
    assert_same_events(perfetto_events(&trace, dev), dump_as_perfetto(dev));
    // Each call a slice on a lane of the calls' group, under the process: as many lanes as
    // calls were ever open at once (the program spawns them all before awaiting any).
    let slices = trace.slices();
    let calls: Vec<_> = slices
        .iter()
        .filter(|s| {
            let e = &trace.events[s.begin];
            e.name == "ttrace_test_spans::call" && !e.on_thread && e.kind == 1
        })
        .collect();
    assert_eq!(calls.len(), 40);
    let tracks: std::collections::HashSet<u64> = calls.iter().map(|s| s.track).collect();
    assert!(tracks.iter().all(|t| {
        let (parent, name) = &trace.tracks[t];
        trace.processes.contains_key(parent) && name.as_deref() == Some("ttrace_test_spans::call")
    }));
    let mut edges: Vec<(u64, i32)> = calls
        .iter()
        .flat_map(|s| {
            let end = trace.events[s.end.expect("each call closed")].ns;
            [(trace.events[s.begin].ns, 1), (end, -1)]
        })
        .collect();
    edges.sort_by_key(|&(ns, d)| (ns, d));
    let peak = edges
        .iter()
        .scan(0, |open, &(_, d)| {
            *open += d;
            Some(*open)
        })
        .max();
    assert_eq!(Some(tracks.len() as i32), peak);
    // Each request nested in its call: on its lane, in its time.
    let requests: Vec<_> = slices
        .iter()
        .filter(|s| {
            let e = &trace.events[s.begin];
            e.name == "ttrace_test_spans::request" && !e.on_thread && e.kind == 1
        })
        .collect();
    assert_eq!(requests.len(), 40);
    for r in requests {
        let parent = r.under.last().map(|&p| &slices[p]).expect("under its call");
        let (call, request) = (&trace.events[parent.begin], &trace.events[r.begin]);
        assert_eq!(
            call.args[0].1, request.args[1].1,
            "{request:?} under {call:?}"
        );
        let ends = |s: &ttrace_tests::perfetto::Slice| trace.events[s.end.unwrap()].ns;
        assert!(call.ns <= request.ns && ends(r) <= ends(parent));
    }
    // Polls on the worker threads.
    let polled: std::collections::HashSet<u64> = trace
        .events
        .iter()
        .filter(|e| e.name == "ttrace_test_spans::request" && e.on_thread && e.kind == 1)
        .map(|e| e.tid)
        .collect();
    assert!(!polled.is_empty());
    // Each follows_from a flow from the batch's track to the close of the call it names.
    let flows: Vec<&ttrace_tests::perfetto::Event> = trace
        .events
        .iter()
        .filter(|e| !e.flows.is_empty())
        .collect();
    assert_eq!(flows.len(), 20);
    for f in flows
        .iter()
        .filter(|e| e.name == "ttrace_test_spans::batch")
    {
        let end = flows
            .iter()
            .find(|e| e.flows == f.flows && e.name == "ttrace_test_spans::call")
            .unwrap();
        assert_eq!(end.kind, 2);
        assert!(end.ns >= f.ns);
    }
}

/// Checks the Perfetto trace `file` of device `dev` with the official schema (the
/// `perfetto` Python package's `perfetto_trace_pb2`): every packet (tracks described before
/// use, sequence flags, interning, slices nesting per track, clock snapshots), and every
/// event of `dump` there once, as our reader reads it: at the same time (and wall-clock
/// time), on the same track, with the same flows, so that what a test finds nested or linked
/// through our reader is so in the official reading too.
pub(crate) fn official_perfetto_check(dev: &str, file: &Path) {
    let printed = viewer::python("check_perfetto.py", "perfetto protobuf", &[file]);
    let official: Vec<serde_json::Value> = serde_json::from_str(&printed).unwrap();
    let ours = read_perfetto(file);
    assert_eq!(official.len(), ours.events.len());
    for (o, e) in official.iter().zip(&ours.events) {
        let value = |v: &serde_json::Value| -> String { v.to_string() };
        assert_eq!(o["ns"], e.ns, "{o}");
        assert_eq!(o["realtime"], e.realtime, "{o}");
        assert_eq!(o["kind"], e.kind, "{o}");
        assert_eq!(o["name"], e.name.as_str(), "{o}");
        assert_eq!(o["category"], e.category.as_str(), "{o}");
        // On the same track, with the same flows: what nests where, and what is linked.
        assert_eq!(o["track"], e.track, "{o}");
        assert_eq!(o["on_thread"], e.on_thread, "{o}");
        assert_eq!(o["flows"], serde_json::json!(e.flows), "{o}");
        assert_eq!(
            (o["pid"].as_u64(), o["tid"].as_u64()),
            (Some(e.pid), Some(e.tid)),
            "{o}"
        );
        let args: Vec<String> = o["args"].as_array().unwrap().iter().map(value).collect();
        let mine: Vec<String> = e
            .args
            .iter()
            .map(|(k, v)| value(&serde_json::json!([k, typed(v)])))
            .collect();
        assert_eq!(args, mine);
    }
    assert_same_events(perfetto_events(&ours, dev), dump_as_perfetto(dev));
}

/// A value as the checker prints it: `{"Kind": value}`.
fn typed(v: &ttrace_tests::perfetto::Value) -> serde_json::Value {
    use ttrace_tests::perfetto::Value;
    match v {
        Value::Bool(b) => serde_json::json!({ "Bool": b }),
        Value::Uint(u) => serde_json::json!({ "Uint": u }),
        Value::Int(i) => serde_json::json!({ "Int": i }),
        Value::Double(d) => serde_json::json!({ "Double": d }),
        Value::Str(s) => serde_json::json!({ "Str": s }),
        Value::Pointer(p) => serde_json::json!({ "Pointer": p }),
    }
}

#[test]
#[ignore = "needs python3 with perfetto and protobuf: pip install perfetto protobuf"]
fn perfettos_own_schema_reads_every_packet_of_each_export_as_our_reader_does() {
    let tmp = tempfile::tempdir().unwrap();
    let devices = [
        (known_device(tmp.path()), vec![]),
        (demo_device(tmp.path()), vec!["--counter", "request_start"]),
        (spans_device(tmp.path()), vec![]),
    ];
    for (i, (dev, counters)) in devices.iter().enumerate() {
        let file = tmp.path().join(format!("{i}.pftrace"));
        reader!("export", "--format", "perfetto", dev, "-o", &file)
            .args(counters)
            .ok();
        official_perfetto_check(dev, &file);
    }
}

#[test]
fn the_ctf_export_holds_every_event_as_dump_shows_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = &known_device(tmp.path());
    let dir = tmp.path().join("ctf");
    export("ctf", dev, &dir);
    let trace = read_ctf(&dir);
    assert_eq!(trace.discarded, []);
    assert_same_events(
        trace.events.iter().map(ctf_as_dump).collect(),
        dump(dev, true),
    );
}

#[test]
#[ignore = "needs babeltrace2: apt install babeltrace2"]
fn babeltrace2_prints_the_ctf_export_event_by_event_as_dump_does() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = &known_device(tmp.path());
    let ctf = tmp.path().join("ctf");
    export("ctf", dev, &ctf);
    let (printed, _) = viewer::run(
        "babeltrace2",
        &["--clock-date", "--clock-gmt", ctf.to_str().unwrap()],
    );
    let got: Vec<Event> = printed.lines().map(babeltrace_event).collect();
    assert_same_events(got, dump(dev, true));
}

/// What babeltrace2 prints of the CTF trace `dir` (`--clock-date --clock-gmt`), each line
/// without the time since the previous event, sorted; and the losses it reports.
fn babeltrace2(dir: &Path) -> (Vec<String>, Vec<u64>) {
    let (out, err) = viewer::run(
        "babeltrace2",
        &["--clock-date", "--clock-gmt", dir.to_str().unwrap()],
    );
    let mut lines: Vec<String> = out
        .lines()
        .map(|l| {
            let (time, rest) = l.split_once("] (+").unwrap();
            format!("{time}] {}", rest.split_once(") ").unwrap().1)
        })
        .collect();
    lines.sort();
    (lines, discarded_counts(&err))
}

/// The counts of `discarded N events` a CTF reader's messages report, sorted.
fn discarded_counts(text: &str) -> Vec<u64> {
    let mut counts: Vec<u64> = text
        .split("discarded ")
        .skip(1)
        .filter_map(|r| r.split_once(" event")?.0.parse().ok())
        .collect();
    counts.sort_unstable();
    counts
}

/// What our reader reads of the CTF trace `dir`, as babeltrace2 prints it (see
/// [`babeltrace2`]).
fn ctf_as_babeltrace2(dir: &Path) -> (Vec<String>, Vec<u64>) {
    let trace = read_ctf(dir);
    let mut lines: Vec<String> = trace
        .events
        .iter()
        .map(|e| {
            let time = ttrace_reader::decode::utc(e.ns).replacen('T', " ", 1);
            let fields: Vec<String> = e.fields.iter().map(|(k, v)| format!("{k} = {v}")).collect();
            format!(
                "[{}] {}: {{ cpu_id = {} }}, {{ pid = {}, tid = {} }}, {{ {} }}",
                time.trim_end_matches('Z'),
                e.name,
                e.cpu,
                e.pid,
                e.tid,
                fields.join(", ")
            )
        })
        .collect();
    lines.sort();
    let mut counts: Vec<u64> = trace.discarded.iter().map(|d| d.1).collect();
    counts.sort_unstable();
    (lines, counts)
}

#[test]
#[ignore = "needs babeltrace2: apt install babeltrace2"]
fn babeltrace2_reads_every_ctf_export_as_our_reader_does() {
    // Every CTF trace the tests below check with our reader: babeltrace2 prints the same
    // events, fields and losses.
    let tmp = tempfile::tempdir().unwrap();
    let mut traces = ctf_exports(tmp.path());
    assert!(traces.len() >= 5);
    for dir in traces.drain(..) {
        assert_eq!(
            babeltrace2(&dir),
            ctf_as_babeltrace2(&dir),
            "{}",
            dir.display()
        );
    }
}

/// The CTF exports the tests of this file read, made again in `tmp`: their directories.
fn ctf_exports(tmp: &Path) -> Vec<std::path::PathBuf> {
    let known = tmp.join("known");
    export("ctf", &known_device(tmp), &known);
    let wrapped = tmp.join("wrapped");
    let _w = wrapped_trace(&tmp.join("w"));
    let w = tmp.join("w");
    export("ctf", w.to_str().unwrap(), &wrapped);
    let none = tmp.join("none");
    reader!("export", "--format", "ctf", &w, "--filter", "nothing", "-o", &none).ok();
    let (_, overwritten) = overwritten_after_the_view(&tmp.join("o"));
    let clash = clashing_names(&tmp.join("cl"));
    vec![
        known,
        wrapped,
        none,
        overwritten.join("c"),
        clash.join("ctf"),
    ]
}

/// Microseconds as Chrome JSON gives them, to nanoseconds.
pub(crate) fn json_ns(v: &serde_json::Value) -> i64 {
    // Three decimals exactly: parse the text, not through a float.
    let s = v.to_string();
    let (us, frac) = s.split_once('.').unwrap_or((&s, "0"));
    let frac = format!("{frac:0<3}");
    us.parse::<i64>().unwrap() * 1000 + frac[..3].parse::<i64>().unwrap()
}

/// Relative seconds as dump shows them, to nanoseconds.
pub(crate) fn dump_ns(t: &str) -> i64 {
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

/// One record as `uftrace dump` shows it: `(time, kind, name, depth)`, and for an entry
/// the arguments as `TYPE: VALUE` lines.
pub(crate) type DumpRecord = ((String, String, String, u32), Vec<String>);

/// `uftrace dump` of a uftrace export, per thread.
pub(crate) fn uftrace_dump(dir: &str) -> HashMap<u32, Vec<DumpRecord>> {
    let mut per_thread: HashMap<u32, Vec<DumpRecord>> = HashMap::new();
    let (out, _) = viewer::run("uftrace", &["dump", "--no-pager", "-d", dir]);
    let mut last_tid = None;
    for l in out.lines() {
        // The perf data's thread names come last: our reader's `names`.
        if l.starts_with("reading perf-") {
            break;
        }
        // `  args[0] str: /data/0/log "0"`: an argument of the entry before; `  retval str:
        // text`: the return value of the exit before.
        let arg = (l.trim_start().strip_prefix("args["))
            .map(|a| a.split_once("] ").unwrap().1)
            .or_else(|| l.trim_start().strip_prefix("retval "));
        if let Some(arg) = arg {
            let arg = arg.to_string();
            let records = per_thread.get_mut(&last_tid.unwrap()).unwrap();
            records.last_mut().unwrap().1.push(arg);
            continue;
        }
        // `0.004439809   5641: [entry] file_open(400010) depth: 0`
        let Some((time, rest)) = l.split_once(char::is_whitespace) else {
            continue;
        };
        let Some((tid, rest)) = rest.trim_start().split_once(": [") else {
            continue;
        };
        let (kind, rest) = rest.split_once("] ").unwrap();
        if kind.trim() == "args" || kind == "retval" {
            // `[args ] length = 48`: the arguments follow; `[retval] ...`: the value.
            continue;
        }
        let (name, rest) = rest.split_once('(').unwrap();
        let depth = rest.rsplit_once("depth: ").unwrap().1.parse().unwrap();
        let tid = tid.parse().unwrap();
        last_tid = Some(tid);
        per_thread.entry(tid).or_default().push((
            (
                time.to_string(),
                kind.trim().to_string(),
                name.to_string(),
                depth,
            ),
            Vec::new(),
        ));
    }
    per_thread
}

/// What our reader reads of the uftrace data `dir`, as `uftrace dump` shows it.
pub(crate) fn uftrace_as_dump(dir: &str) -> HashMap<u32, Vec<DumpRecord>> {
    let arg = |a: &uftrace::Arg| match a {
        uftrace::Arg::Str(s) => format!("str: {s}"),
        uftrace::Arg::Unsigned(v) => format!("u64: {v:#018x}"),
        uftrace::Arg::Signed(v) => format!("i64: {v:#018x}"),
        uftrace::Arg::Hex(v) => format!("x64: {v:#018x}"),
        uftrace::Arg::Float(v) => format!("f64: {:#018x}", v.to_bits()),
    };
    read_uftrace(dir)
        .threads
        .iter()
        .map(|(tid, records)| {
            let records = records
                .iter()
                .map(|r| {
                    let args = match (&r.kind, &r.data) {
                        (uftrace::Kind::Entry(args), _) => args.iter().map(arg).collect(),
                        (uftrace::Kind::Exit, Some(value)) => vec![format!("str: {value}")],
                        _ => Vec::new(),
                    };
                    (r.dump_line(), args)
                })
                .collect();
            (*tid, records)
        })
        .collect()
}

/// `uftrace dump`'s view of each thread's records, without the arguments.
fn records_of(
    dump: &HashMap<u32, Vec<DumpRecord>>,
) -> HashMap<u32, Vec<(String, String, String, u32)>> {
    dump.iter()
        .map(|(tid, r)| (*tid, r.iter().map(|(r, _)| r.clone()).collect()))
        .collect()
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

/// A duration of `ns` nanoseconds as `uftrace replay` shows it: three decimals of its unit
/// (microseconds below a millisecond, milliseconds below a second, then seconds), the rest
/// cut off.
fn uftrace_shown(ns: i64) -> i64 {
    let cut = match ns {
        ..1_000_000 => 1,
        1_000_000..1_000_000_000 => 1_000,
        _ => 1_000_000,
    };
    ns - ns % cut
}

/// What a uftrace export of the known trace must hold, from its dump: per thread, its
/// records as `uftrace dump` shows them, the duration of each `file_open` call and the
/// `file_open` events that made them.
struct UftraceWant {
    records: HashMap<u32, Vec<(String, String, String, u32)>>,
    durations: HashMap<u32, Vec<i64>>,
    opens: HashMap<u32, Vec<Event>>,
}

fn uftrace_want(events: &[Event]) -> UftraceWant {
    let mut want = UftraceWant {
        records: HashMap::new(),
        durations: HashMap::new(),
        opens: HashMap::new(),
    };
    let mut opened: HashMap<u32, &Event> = HashMap::new();
    for e in events {
        let name = e.text.split_once('(').unwrap().0;
        let record =
            |kind: &str, name: String| (e.time.trim().to_string(), kind.to_string(), name, 0);
        let records = want.records.entry(e.tid).or_default();
        match name {
            "file_open" => {
                opened.insert(e.tid, e);
                want.opens.entry(e.tid).or_default().push(e.clone());
                records.push(record("entry", name.to_string()));
            }
            "file_close" => {
                let entry = opened.remove(&e.tid).unwrap();
                want.durations
                    .entry(e.tid)
                    .or_default()
                    .push(dump_ns(&e.time) - dump_ns(&entry.time));
                records.push(record("exit", "file_open".to_string()));
            }
            // Any other point: a call of its point function.
            other => {
                let name = format!("ttrace:{other}");
                records.push(record("entry", name.clone()));
                records.push(record("exit", name));
            }
        }
    }
    want
}

#[test]
fn the_uftrace_export_holds_every_event_as_dump_shows_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = &known_device(tmp.path());
    let out = tmp.path().join("uftrace.data");
    export("uftrace", dev, &out);
    let data = read_uftrace(&out);
    let events = dump(dev, false);
    let want = uftrace_want(&events);
    assert_eq!(data.threads.len(), 3, "three threads");
    assert_eq!(data.dump_lines(), want.records);
    // One session, the test application's, and its three threads.
    let pid = events[0].pid;
    assert_eq!(data.sessions, [(pid, "ttrace-test-app".to_string())]);
    let mut tasks: Vec<(u32, u32)> = data.threads.keys().map(|t| (*t, pid)).collect();
    tasks.sort_unstable();
    assert_eq!(data.tasks, tasks);
    // Each entry carries the arguments dump shows, typed as the format says.
    for (tid, opens) in &want.opens {
        let entries: Vec<&Vec<uftrace::Arg>> = data.threads[tid]
            .iter()
            .filter_map(|r| match &r.kind {
                uftrace::Kind::Entry(args) if r.name == "file_open" => Some(args),
                _ => None,
            })
            .collect();
        assert_eq!(entries.len(), opens.len());
        for (args, e) in entries.iter().zip(opens) {
            let as_json: serde_json::Map<String, serde_json::Value> = ["path", "flags", "delta"]
                .iter()
                .zip(args.iter())
                .map(|(k, a)| {
                    let v = match a {
                        uftrace::Arg::Str(s) => serde_json::json!(s),
                        uftrace::Arg::Hex(h) => serde_json::json!(format!("{h:#x}")),
                        uftrace::Arg::Signed(v) => serde_json::json!(v),
                        other => panic!("{other:?}"),
                    };
                    (k.to_string(), v)
                })
                .collect();
            assert_eq!(as_json, dump_args(&e.text).1, "{}", e.text);
        }
    }
}

#[test]
#[ignore = "needs uftrace: apt install uftrace"]
fn uftrace_dump_and_replay_show_the_uftrace_export_event_by_event() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = &known_device(tmp.path());
    let out = tmp.path().join("uftrace.data");
    let out = out.to_str().unwrap();
    export("uftrace", dev, out);
    let want = uftrace_want(&dump(dev, false));
    let got = uftrace_dump(out);
    assert_eq!(got.len(), 3, "three threads");
    assert_eq!(records_of(&got), want.records);
    assert_eq!(got, uftrace_as_dump(out));
    // replay: each entry/exit pair is one call, with its duration and the entry's
    // arguments (strings in quotes, as they are).
    let mut replayed: HashMap<u32, Vec<(i64, String)>> = HashMap::new();
    let (replay, _) = viewer::run("uftrace", &["replay", "--no-pager", "-d", out]);
    // A call with nothing inside is one line; one that uftrace shows something inside (a
    // call of a point function of its thread) opens with `{` and closes with `}` on a later
    // line, which has the duration.
    let mut open: HashMap<u32, String> = HashMap::new();
    for l in replay.lines() {
        let Some((left, call)) = l.split_once(" | ") else {
            continue;
        };
        let (d, tid) = left.split_once('[').unwrap();
        let tid: u32 = tid.trim_end_matches(']').trim().parse().unwrap();
        let call = call.trim();
        // `  41.842 us [  5641] | file_open("/data/0/log "0"", 0x8000, -25) = "file_close(fd=3)";`
        if let Some(args) = call.strip_prefix("file_open(") {
            if let Some(args) = args.strip_suffix(") {") {
                open.insert(tid, args.to_string());
                continue;
            }
            // The exit's arguments are the return value.
            let (args, ret) = args.rsplit_once(") = \"file_close(fd=").unwrap();
            assert!(ret.ends_with(")\";"), "{l}");
            let args = args.to_string();
            replayed
                .entry(tid)
                .or_default()
                .push((uftrace_duration(d), args));
        } else if call.starts_with("} = \"file_close(fd=") && call.ends_with("/* file_open */") {
            let args = open
                .remove(&tid)
                .expect("a closing line closes an open call");
            replayed
                .entry(tid)
                .or_default()
                .push((uftrace_duration(d), args));
        }
    }
    assert!(open.is_empty(), "calls left open: {open:?}");
    let mut calls: HashMap<u32, Vec<(i64, String)>> = HashMap::new();
    for (tid, d) in &want.durations {
        for (d, e) in d.iter().zip(&want.opens[tid]) {
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
            calls
                .entry(*tid)
                .or_default()
                .push((uftrace_shown(*d), args.join(", ")));
        }
    }
    // The 1.5 ms call of the known trace: shown in milliseconds.
    assert!(
        calls.values().flatten().any(|(d, _)| *d >= 1_000_000),
        "{calls:?}"
    );
    assert_eq!(replayed, calls);
    // report: one line per function, with its number of calls.
    let (report, _) = viewer::run("uftrace", &["report", "--no-pager", "-d", out]);
    let calls = want.durations.values().map(Vec::len).sum::<usize>();
    assert!(
        report
            .lines()
            .any(|l| l.trim_end().ends_with(&format!("{calls}  file_open"))),
        "{report}"
    );
}

#[test]
#[ignore = "needs uftrace: apt install uftrace"]
fn uftrace_reads_every_uftrace_export_as_our_reader_does() {
    // Every uftrace export the tests of this file read with our reader: `uftrace dump`
    // shows the same records, names, depths, losses and arguments.
    let tmp = tempfile::tempdir().unwrap();
    let dirs = uftrace_exports(tmp.path());
    assert!(dirs.len() >= 5);
    for dir in dirs {
        let dir = dir.to_str().unwrap();
        assert_eq!(uftrace_dump(dir), uftrace_as_dump(dir), "{dir}");
    }
}

/// The uftrace exports the tests of this file read, made again in `tmp`: their directories.
fn uftrace_exports(tmp: &Path) -> Vec<std::path::PathBuf> {
    let known = tmp.join("known");
    export("uftrace", &known_device(tmp), &known);
    let wrapped = tmp.join("wrapped");
    let _w = wrapped_trace(&tmp.join("w"));
    export("uftrace", tmp.join("w").to_str().unwrap(), &wrapped);
    let horizon = tmp.join("horizon");
    let _h = two_rings_one_wrapped(&tmp.join("h"));
    export("uftrace", tmp.join("h").to_str().unwrap(), &horizon);
    let (_, overwritten) = overwritten_after_the_view(&tmp.join("o"));
    let limits = uftrace_limits(&tmp.join("l"));
    vec![known, wrapped, horizon, overwritten.join("u"), limits]
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
        let done = reader!("export", "--format", format, &dev, "-o", &out).run();
        assert!(done.status.success(), "{format}");
        assert_eq!(done.stderr, "", "{format}");
        assert_eq!(done.stdout, "", "{format}");
    }
    // An export into a directory that holds something is refused, with one line.
    let done = reader!("export", "--format", "ctf", &dev, "-o", tmp.path()).run();
    assert_eq!(done.status.code(), Some(1));
    let err = done.stderr;
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("exists (--force replaces it)"), "{err}");
}

/// A one-ring device of 8 slots that lost the beginning of a call tree: an outer entry,
/// ten entry/exit pairs and the outer exit, of which the last 8 entries remain (an exit
/// whose entry was overwritten, three pairs, and the outer exit).
fn wrapped_trace(dir: &Path) -> ttrace_core::Writer {
    let w = ttrace_core::Writer::open(&ttrace_tests::config(dir, 8, 1)).unwrap();
    let (entry, exit) = (
        tracepoint(&w, "call", ttrace_core::Kind::Entry),
        tracepoint(&w, "call_done", ttrace_core::Kind::Exit),
    );
    let ctx = 1 << 32 | 2;
    w.device().note_thread(1, 2, "caller").unwrap();
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
    let got = read_uftrace(path("u")).dump_lines();
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
    // CTF: the ring's losses are the stream's discarded events, which CTF readers report.
    export("ctf", dev, path("c"));
    let trace = read_ctf(path("c"));
    assert_eq!(trace.discarded, [(0, lost)]);
    assert_eq!(trace.events.len(), 8);
    // Chrome: three slices, and each unpaired exit an async slice from the trace's start.
    let doc = chrome(dev, path("t.json"));
    let events = doc["traceEvents"].as_array().unwrap();
    let count = |ph: &str| events.iter().filter(|e| e["ph"] == ph).count();
    assert_eq!((count("X"), count("b"), count("e")), (3, 2, 2));
    for e in events.iter().filter(|e| e["ph"] == "e") {
        assert_eq!(e["name"], "call_done");
        assert_eq!(e["args"]["missing"], "entry");
    }
    // The ring is CPU 0's restartable one, or its shared one (a thread on CPU 1 of this
    // one-CPU device).
    let rings = doc["otherData"].as_object().unwrap();
    assert!(rings.iter().any(|(k, v)| k.starts_with("cpu0")
        && v.as_str()
            .unwrap()
            .contains(&format!("{lost} entries lost"))));
    // With no event of the ring exported, CTF still reports its losses.
    let out = path("none");
    reader!("export", "--format", "ctf", dev, "--filter", "nothing", "-o", &out).ok();
    let trace = read_ctf(&out);
    assert_eq!((trace.events.len(), trace.discarded), (0, vec![(0, lost)]));
}

/// Registers a one-argument tracepoint of `kind`; its type word.
fn tracepoint(w: &ttrace_core::Writer, name: &'static str, kind: ttrace_core::Kind) -> u64 {
    define_kind(w, name, kind, "n={n}")
}

/// Writes an event of `word` for `ctx` into ring `cpu` at `stamp`, whatever CPU this runs on.
fn put(w: &ttrace_core::Writer, cpu: usize, stamp: u64, word: u64, ctx: u64, n: u64) {
    let word = ttrace_layouts::entry::TypeWord(word).with_cpu(cpu as u32).0;
    let stamp = w.device().mapping().ring(cpu).write(
        stamp,
        (ctx >> 32) as u32,
        &[word, ctx, n, 0, 0, 0, 0],
    );
    assert!(stamp.is_some());
}

/// Two rings of 8 slots. Thread 1/2 enters `outer` on ring 0, `inner` on ring 1, leaves
/// `inner` on ring 0 and, after a call of `later` on ring 0, leaves `outer`. Ring 1 then
/// takes 8 `tick`s of another thread and loses `inner`'s entry: before the horizon (ring 1's
/// first remaining event) a thread's events may be missing, and stack order would pair
/// `outer` with `inner`'s exit.
fn two_rings_one_wrapped(dir: &Path) -> ttrace_core::Writer {
    use ttrace_core::Kind;
    let w = ttrace_core::Writer::open(&ttrace_tests::config(dir, 8, 2)).unwrap();
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
    w.device().note_thread(1, 2, "caller").unwrap();
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
    // uftrace: the same, with the halves before the horizon as calls of their point
    // functions.
    export("uftrace", dev, path("u"));
    let got = read_uftrace(path("u")).dump_lines();
    let kinds: Vec<(&str, &str, u32)> = got[&2]
        .iter()
        .map(|(_, k, n, d)| (k.as_str(), n.as_str(), *d))
        .collect();
    assert_eq!(
        kinds,
        [
            ("entry", "ttrace:outer", 0),
            ("exit", "ttrace:outer", 0),
            ("entry", "ttrace:inner_done", 0),
            ("exit", "ttrace:inner_done", 0),
            ("entry", "later", 0),
            ("exit", "later", 0),
            ("exit", "outer_done", 0),
        ]
    );
}

/// A uftrace export (in `dir`, its device in `dir/dev`) of entries whose arguments reach
/// uftrace's limits: twelve strings of 1000 bytes (uftrace 0.13 replay crashes past about
/// 2 KiB of argument data, so each keeps its share, 80 bytes, and ends with `...`), 1000
/// bytes of two-byte characters with a float, a dotted name (uftrace reads `.` in an argspec
/// as a pattern) and two tracepoints of one name (uftrace would merge their specs).
fn uftrace_limits(dir: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    use ttrace_core::Definition;
    use ttrace_core::Kind;
    let dev = dir.join("dev");
    let w = ttrace_core::Writer::open(&ttrace_tests::config(&dev, 64, 1)).unwrap();
    let def = |name, format, nargs| {
        let d = Definition {
            name,
            kind: Kind::Entry,
            classes: 1,
            format,
            nargs,
            types: &[],
            tables: &[],
            role: devttrace::Role::Point,
        };
        w.device().register_tracepoint(&d).unwrap().1
    };
    let many = def(
        "many",
        "{a:s} {b:s} {c:s} {d:s} {e:s} {f:s} {g:s} {h:s} {i:s} {j:s} {k:s} {l:s}",
        12,
    );
    let wide = def("wide", "{s:s} {x:f}", 2);
    let dotted = def("dotted.name", "{n}", 1);
    let twins = [def("twin", "{n}", 1), def("twin", "{s:s}", 1)];
    let ctx = 1 << 32 | 2;
    let string = |bytes: &[u8]| w.aux_write(AuxTag::String, ctx, bytes).unwrap();
    let long: Vec<u64> = (0..12).map(|_| string(&[b'x'; 1000])).collect();
    w.emit(many, ctx, &<[u64; 12]>::try_from(long).unwrap());
    // Cut between characters, not inside one.
    let text = "é".repeat(500);
    w.emit(wide, ctx, &[string(text.as_bytes()), 2.5f64.to_bits()]);
    w.emit(dotted, ctx, &[7]);
    w.emit(twins[0], ctx, &[8]);
    w.emit(twins[1], ctx, &[string(b"twin")]);
    let out = dir.join("u");
    export("uftrace", dev.to_str().unwrap(), &out);
    out
}

#[test]
fn uftrace_entries_carry_their_arguments_within_uftraces_limits() {
    let tmp = tempfile::tempdir().unwrap();
    let data = read_uftrace(uftrace_limits(tmp.path()));
    // Entries, each inside the one before, none closed.
    let x = uftrace::Arg::Str(format!("{}...", "x".repeat(77)));
    let e = uftrace::Arg::Str(format!("{}...", "é".repeat(478)));
    let entries: Vec<(&str, u32, &uftrace::Kind)> = data.threads[&2]
        .iter()
        .map(|r| (r.name.as_str(), r.depth, &r.kind))
        .collect();
    use uftrace::Kind::Entry;
    assert_eq!(
        entries,
        [
            ("many", 0, &Entry(vec![x; 12])),
            ("wide", 1, &Entry(vec![e, uftrace::Arg::Float(2.5)])),
            ("dotted.name", 2, &Entry(vec![])),
            ("twin", 3, &Entry(vec![])),
            ("twin", 4, &Entry(vec![])),
        ]
    );
}

#[test]
#[ignore = "needs uftrace: apt install uftrace"]
fn uftrace_replay_shows_entry_arguments_within_its_limits() {
    let tmp = tempfile::tempdir().unwrap();
    let out = uftrace_limits(tmp.path());
    let (replay, _) = viewer::run(
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

/// Ring 0 holds `call` and its exit, ring 1 two ticks of another thread during the call; a
/// view of the device in `dir/dev` is taken, then ring 1 is lapped before the view is
/// exported (in every format, into `dir`). The Chrome JSON and what each format wrote; `dir`.
fn overwritten_after_the_view(
    dir: &Path,
) -> (
    (serde_json::Value, [ttrace_reader::export::Written; 3]),
    std::path::PathBuf,
) {
    use ttrace_core::Kind;
    std::fs::create_dir_all(dir).unwrap();
    let dev = dir.join("dev");
    let w = ttrace_core::Writer::open(&ttrace_tests::config(&dev, 8, 2)).unwrap();
    let (call, call_done) = (
        tracepoint(&w, "call", Kind::Entry),
        tracepoint(&w, "call_done", Kind::Exit),
    );
    let tick = tracepoint(&w, "tick", Kind::Start);
    let (t, other) = (1 << 32 | 2, 1 << 32 | 3);
    let t0 = w.now();
    put(&w, 0, t0 + 1, call, t, 1);
    put(&w, 1, t0 + 2, tick, other, 0);
    put(&w, 1, t0 + 3, tick, other, 1);
    put(&w, 0, t0 + 4, call_done, t, 1);
    let reading = devttrace::Reader::open(&dev).unwrap();
    let view = devttrace::View::of(&reading, 0).unwrap();
    assert_eq!(view.cpus[1].events.len(), 2);
    for k in 0..8 {
        put(&w, 1, t0 + 10 + k, tick, other, 10 + k);
    }
    (export_all(&view, dir), dir.to_path_buf())
}

#[test]
fn events_overwritten_after_the_view_was_taken_are_exported_whole() {
    // A view copies each ring when it is taken: what writers do afterwards changes nothing
    // of what it exports (before, the events were read from the ring when exported, and two
    // of them had vanished).
    let tmp = tempfile::tempdir().unwrap();
    let ((doc, written), dir) = overwritten_after_the_view(tmp.path());
    for w in &written {
        assert_eq!((w.events, w.lost, w.uncertain), (4, 0, 0), "{w:?}");
    }
    // Chrome: the call is one slice, the ticks two instants; ring 1's count is whole.
    let events = doc["traceEvents"].as_array().unwrap();
    let of = |ph: &str| events.iter().filter(|e| e["ph"] == ph).count();
    assert_eq!((of("X"), of("i"), of("b"), of("e")), (1, 2, 0, 0));
    assert_eq!(
        doc["otherData"]["cpu1"],
        "2 events (2 entries), 0 entries lost, 0 incomplete, 0 events dropped"
    );
    assert_eq!(written[0].pairs, 1);
    // uftrace: a call with its exit, two calls of the ticks' point function, nothing lost.
    let got = read_uftrace(dir.join("u")).dump_lines();
    let mut kinds: Vec<(&str, &str)> = got
        .values()
        .flatten()
        .map(|(_, k, n, _)| (k.as_str(), n.as_str()))
        .collect();
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        [
            ("entry", "call"),
            ("entry", "ttrace:tick"),
            ("entry", "ttrace:tick"),
            ("exit", "call"),
            ("exit", "ttrace:tick"),
            ("exit", "ttrace:tick")
        ]
    );
    // CTF: every event, nothing discarded.
    let trace = read_ctf(dir.join("c"));
    assert!(trace.discarded.is_empty(), "{:?}", trace.discarded);
    let mut names: Vec<&str> = trace.events.iter().map(|e| e.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["call", "call_done", "tick", "tick"]);
}

/// A CTF export (`dir/ctf`, its device `dir/dev`) of an event whose argument names clash:
/// `{a b}` and `{a_b}` are one CTF field name once mangled, and `{x}` twice one JSON key.
fn clashing_names(dir: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let dev = dir.join("dev");
    let w = ttrace_core::Writer::open(&ttrace_tests::config(&dev, 64, 1)).unwrap();
    let word = ttrace_tests::define(&w, "clash", "{a b} {a_b} {x} {x}");
    w.emit(word, 1 << 32 | 2, &[1, 2, 3, 4]);
    export("ctf", dev.to_str().unwrap(), dir.join("ctf"));
    dir.to_path_buf()
}

#[test]
fn argument_names_that_clash_once_mangled_stay_distinct() {
    // Each export keeps them apart (babeltrace2 refuses a trace with duplicate fields).
    let tmp = tempfile::tempdir().unwrap();
    let dir = clashing_names(tmp.path());
    let trace = read_ctf(dir.join("ctf"));
    let fields: Vec<(&str, &ctf::Value)> = trace.events[0]
        .fields
        .iter()
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    use ctf::Value::Unsigned;
    assert_eq!(
        fields,
        [
            ("a_b", &Unsigned(1)),
            ("a_b_1", &Unsigned(2)),
            ("x", &Unsigned(3)),
            ("x_1", &Unsigned(4))
        ]
    );
    let doc = chrome(dir.join("dev").to_str().unwrap(), dir.join("t.json"));
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
    reader!("snapshot", dev, "-o", &path("s.ttrace")).ok();
    for (source, json) in [(dev.to_string(), "d.json"), (path("s.ttrace"), "s.json")] {
        export("chrome", &source, path(json));
    }
    let events = |json: &str| -> serde_json::Value {
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path(json)).unwrap()).unwrap();
        doc["traceEvents"].clone()
    };
    assert_eq!(events("s.json"), events("d.json"));
    for (format, dir) in [("uftrace", "uf"), ("ctf", "ctf")] {
        for (source, prefix) in [(dev.to_string(), "d."), (path("s.ttrace"), "s.")] {
            export(format, &source, path(&format!("{prefix}{dir}")));
        }
    }
    assert_eq!(read_uftrace(path("s.uf")), read_uftrace(path("d.uf")));
    assert_eq!(read_ctf(path("s.ctf")), read_ctf(path("d.ctf")));
    assert!(read_ctf(path("d.ctf")).events.len() > 100);
}

/// A one-ring device of `slots` slots written by two threads of process 1, `alpha-thread`
/// (tid 2) and `beta` (tid 3): per round `i` of 10, alpha calls `work(n=i)`, inside it
/// records `tick(id=i size=2i)` and a 12-word `twelve`, returns with `work_done(n=i)`, and
/// says `hello i from alpha`; beta records a `tick` and says `hello i from beta`. Each round
/// takes 6 ring entries (the messages are in the aux buffer).
fn detailed_trace(dir: &Path, slots: u64) -> ttrace_core::Writer {
    use ttrace_core::Kind;
    let w = ttrace_core::Writer::open(&ttrace_tests::config(dir, slots, 1)).unwrap();
    let (work, done) = (
        tracepoint(&w, "work", Kind::Entry),
        tracepoint(&w, "work_done", Kind::Exit),
    );
    let tick = ttrace_tests::define(&w, "tick", "id={id} size={size}");
    let twelve = ttrace_tests::define(
        &w,
        "twelve",
        "{a} {b} {c} {d} {e} {f} {g} {h} {i} {j} {k} {l:x}",
    );
    let (alpha, beta) = (1 << 32 | 2, 1 << 32 | 3);
    // On one CPU (the first this process may run on), so that everything goes to one ring:
    // `cpu0` (or `cpu0.shared`: that CPU's where it is not CPU 0, or restartable sequences
    // are not available).
    ttrace_tests::pin(0);
    w.device().note_thread(1, 2, "alpha-thread").unwrap();
    w.device().note_thread(1, 3, "beta").unwrap();
    let say = |ctx: u64, text: String| {
        assert!(ttrace_tests::message(&w, ctx, &text));
    };
    for i in 0..10 {
        w.emit(work, alpha, &[i]);
        w.emit(tick, alpha, &[i, 2 * i]);
        w.emit(twelve, alpha, &[i; 12]);
        w.emit(done, alpha, &[i]);
        say(alpha, format!("hello {i} from alpha"));
        w.emit(tick, beta, &[i, 2 * i]);
        say(beta, format!("hello {i} from beta"));
    }
    w
}

#[test]
fn dump_stats_and_every_export_count_the_same_events_and_losses() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = tmp.path().join("dev");
    // 80 entries into 16 slots: the ring wrapped, and lost the first 64.
    let _w = detailed_trace(&dev, 16);
    let dev = dev.to_str().unwrap();
    let dumped = reader!("dump", dev).ok();
    let lines = dumped.lines().filter(|l| !l.starts_with('#')).count() as u64;
    let total = dumped.lines().last().unwrap().strip_prefix("# ").unwrap();
    // `14 events (10 trace points, 4 messages); 64 entries lost, 0 events dropped`
    let number = |after: &str| -> u64 {
        let (before, _) = total.split_once(after).unwrap();
        before.rsplit([' ', '(']).next().unwrap().parse().unwrap()
    };
    let (events, points, messages) = (
        number(" events ("),
        number(" trace points"),
        number(" messages"),
    );
    let lost = number(" entries lost");
    assert_eq!(lines, events, "{dumped}");
    assert_eq!((points + messages, messages), (events, 4), "{total}");
    assert_eq!(lost, 80 - 16, "{total}");
    assert_eq!(number(" events dropped"), 0);
    // The ring's line counts its events (messages among them), and the entries they take
    // (`twelve` takes two).
    // (`cpu0`, or `cpu0.shared` where restartable sequences are not available.)
    let ring = (dumped.lines())
        .find(|l| l.starts_with("# cpu0") && !l.contains(": 0 events ("))
        .unwrap();
    let (name, counts) = ring[2..].split_once(": ").unwrap();
    assert!(
        counts.starts_with(&format!(
            "{events} events (16 entries), {lost} entries lost"
        )),
        "{ring}"
    );

    let stats = reader!("stats", dev).ok();
    assert!(
        stats.lines().any(|l| l == format!("total: {total}")),
        "{stats}"
    );
    assert!(
        stats
            .lines()
            .any(|l| l == &ring[2..] || l.starts_with(&format!("{}, time ", &ring[2..]))),
        "{stats}"
    );

    let json = chrome(dev, tmp.path().join("trace.json"));
    let other = &json["otherData"];
    assert_eq!(other["summary"], total);
    assert_eq!(
        (other["events"].as_u64(), other["messages"].as_u64()),
        (Some(events), Some(messages))
    );
    assert_eq!(other["entries_lost"].as_u64(), Some(lost));
    assert_eq!(
        other[name].as_str().unwrap(),
        ring.split_once(": ").unwrap().1
    );

    let ctf_dir = tmp.path().join("ctf");
    export("ctf", dev, &ctf_dir);
    let trace = read_ctf(&ctf_dir);
    assert_eq!(trace.events.len() as u64, events);
    assert_eq!(
        trace.events.iter().filter(|e| e.name == "info").count() as u64,
        messages
    );
    assert_eq!(trace.discarded.iter().map(|(_, n)| n).sum::<u64>(), lost);

    let uf_dir = tmp.path().join("uftrace");
    export("uftrace", dev, &uf_dir);
    let data = read_uftrace(&uf_dir);
    assert_eq!(data.events() as u64, events);
    let uf_lost: u64 = (data.threads.values().flatten())
        .filter_map(|r| match r.kind {
            uftrace::Kind::Lost(n) => Some(n),
            _ => None,
        })
        .sum();
    assert_eq!(uf_lost, lost);
}

#[test]
fn the_uftrace_export_carries_exit_arguments_event_texts_messages_and_thread_names() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = tmp.path().join("dev");
    let _w = detailed_trace(&dev, 256);
    let out = tmp.path().join("uftrace");
    export("uftrace", dev.to_str().unwrap(), &out);
    let data = read_uftrace(&out);
    // Each thread by its own name, not the process's.
    assert_eq!(
        data.names,
        [(2, "alpha-thread".to_string()), (3, "beta".to_string())].into()
    );
    // The exits, with what each returns.
    let exits = |tid: u32| -> Vec<(String, Option<String>)> {
        data.threads[&tid]
            .iter()
            .filter(|r| r.kind == uftrace::Kind::Exit)
            .map(|r| (r.name.clone(), r.data.clone()))
            .collect()
    };
    // Every exit returns its arguments as dump shows them.
    let work: Vec<_> = exits(2).into_iter().filter(|e| e.0 == "work").collect();
    assert_eq!(work.len(), 10);
    for (i, (_, value)) in work.iter().enumerate() {
        assert_eq!(value.as_deref(), Some(format!("work_done(n={i})").as_str()));
    }
    // Instants and messages: calls of their point functions, in their own thread's
    // stream, that return their text.
    let beta = exits(3);
    for i in 0..10 {
        let tick = (
            "ttrace:tick".to_string(),
            Some(format!("tick(id={i} size={})", 2 * i)),
        );
        let hello = (
            "ttrace:info".to_string(),
            Some(format!("info(\"hello {i} from beta\")")),
        );
        assert_eq!(beta[2 * i as usize..2 * i as usize + 2], [tick, hello]);
    }
    let alpha = exits(2);
    assert!(alpha.contains(&(
        "ttrace:twelve".to_string(),
        Some("twelve(3 3 3 3 3 3 3 3 3 3 3 0x3)".to_string())
    )));
    assert!(alpha.contains(&(
        "ttrace:info".to_string(),
        Some("info(\"hello 9 from alpha\")".to_string())
    )));
    // Each call is a leaf: an entry and its exit at one time and depth (inside `work`,
    // depth 1).
    for records in data.threads.values() {
        for (i, r) in records.iter().enumerate() {
            if r.name.starts_with("ttrace:") && r.kind == uftrace::Kind::Exit {
                let entry = &records[i - 1];
                assert_eq!(entry.kind, uftrace::Kind::Entry(vec![]));
                assert_eq!(
                    (&entry.name, entry.ns, entry.depth),
                    (&r.name, r.ns, r.depth)
                );
            }
        }
    }
    assert!(data.threads[&2]
        .iter()
        .any(|r| r.name == "ttrace:twelve" && r.depth == 1));
}

#[test]
#[ignore = "needs uftrace: apt install uftrace"]
fn uftrace_replay_shows_exit_arguments_event_texts_messages_and_thread_names() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = tmp.path().join("dev");
    let _w = detailed_trace(&dev, 256);
    let out = tmp.path().join("uftrace");
    export("uftrace", dev.to_str().unwrap(), &out);
    let out = out.to_str().unwrap();
    let (replay, _) = viewer::run(
        "uftrace",
        &[
            "replay",
            "--no-pager",
            "--event-full",
            "-f",
            "tid,task",
            "-d",
            out,
        ],
    );
    // `[     2]    alpha-thread | } = "work_done(n=3)"; /* work */`
    let lines: Vec<(u32, &str, &str)> = replay
        .lines()
        .filter_map(|l| {
            let (left, call) = l.split_once(" | ")?;
            let (tid, task) = left.trim().strip_prefix('[')?.split_once(']')?;
            Some((tid.trim().parse().ok()?, task.trim(), call.trim()))
        })
        .collect();
    let has = |tid: u32, task: &str, call: &str| lines.contains(&(tid, task, call));
    for i in 0..10 {
        let (a, b) = ("alpha-thread", "beta");
        let tick = format!("ttrace:tick() = \"tick(id={i} size={})\";", 2 * i);
        let hello = |who| format!("ttrace:info() = \"info(\"hello {i} from {who}\")\";");
        for (tid, task, line) in [
            (2, a, format!("work({i}) {{")),
            (2, a, format!("}} = \"work_done(n={i})\"; /* work */")),
            (2, a, tick.clone()),
            (2, a, hello("alpha")),
            (3, b, tick),
            (3, b, hello("beta")),
        ] {
            assert!(has(tid, task, &line), "no `{line}` on {tid}:\n{replay}");
        }
    }
    assert!(
        has(3, "beta", "/* linux:task-name (comm=\"beta\") */"),
        "{replay}"
    );
    // uftrace's own reading of the names, events and values is ours.
    assert_eq!(uftrace_dump(out), uftrace_as_dump(out));
    let (info, _) = viewer::run("uftrace", &["info", "--task", "-d", out]);
    assert!(
        info.contains("alpha-thread") && info.contains("beta"),
        "{info}"
    );
}

/// A device on the nanosecond clock where thread 2's call of 9 us, its switches known, was
/// preempted 1 us and blocked 5 us, and thread 3's call of 8 us has no switch: written
/// directly, as the writer's drain writes switches.
fn switches_device(dir: &Path) -> String {
    use ttrace_core::{Config, Kind, Writer};
    use ttrace_layouts::device::ClockSource;
    let dev = Writer::open(&Config {
        clock: Some(ClockSource::MonotonicNs),
        ..ttrace_tests::config(&dir.join("switches"), 1024, 2)
    })
    .unwrap();
    let (enter, exit) = (
        define_kind(&dev, "call", Kind::Entry, "fd={fd}"),
        define_kind(&dev, "call_done", Kind::Exit, ""),
    );
    let (out, back) = ttrace_tests::switch_words(&dev);
    let put = |t, word, ctx, args: &[u64]| ttrace_tests::put_event(&dev, t, word, ctx, args);
    let (t1, t2) = (1 << 32 | 2, 1 << 32 | 3);
    let t = dev.now();
    put(t + 500, back, t1, &[t + 500]);
    put(t + 1000, enter, t1, &[3]);
    put(t + 2000, out, t1, &[1, t + 2000]);
    put(t + 3000, back, t1, &[t + 3000]);
    put(t + 4000, out, t1, &[0, t + 4000]);
    put(t + 9000, back, t1, &[t + 9000]);
    put(t + 10_000, exit, t1, &[]);
    put(t + 20_000, enter, t2, &[4]);
    put(t + 28_000, exit, t2, &[]);
    dir.join("switches").to_str().unwrap().to_string()
}

#[test]
#[ignore = "needs python3 with perfetto and protobuf: pip install perfetto protobuf"]
fn perfetto_shows_each_threads_states_and_a_slices_parts_as_the_official_schema_reads_them() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = switches_device(tmp.path());
    let file = tmp.path().join("switches.pftrace");
    reader!("export", "--format", "perfetto", &dev, "-o", &file).ok();
    // The official schema reads every packet (tracks described before use, slices nesting
    // per track, clocks), the states' track and slices included.
    let printed = viewer::python("check_perfetto.py", "perfetto protobuf", &[&file]);
    let events: Vec<serde_json::Value> = serde_json::from_str(&printed).unwrap();
    // Thread 2's states, as slices on a track of their own under its thread: from its
    // first switch on, each stretch between two switches.
    let states: Vec<(String, u64, u64)> = (events.iter())
        .filter(|e| e["category"] == "sched")
        .map(|e| {
            assert_eq!(
                (&e["pid"], &e["tid"], &e["on_thread"]),
                (&1.into(), &2.into(), &false.into()),
                "{e}"
            );
            (
                e["name"].as_str().unwrap().to_string(),
                e["kind"].as_u64().unwrap(),
                e["ns"].as_u64().unwrap(),
            )
        })
        .collect();
    let t0 = states
        .first()
        .map(|s| s.2)
        .unwrap_or_else(|| panic!("no state: {printed}"));
    let rel: Vec<(&str, u64, u64)> = states
        .iter()
        .map(|s| (s.0.as_str(), s.1, s.2 - t0))
        .collect();
    let (b, e) = (1, 2); // TYPE_SLICE_BEGIN, TYPE_SLICE_END
    assert_eq!(
        rel,
        [
            ("on_cpu", b, 0),
            ("on_cpu", e, 1500),
            ("preempted", b, 1500),
            ("preempted", e, 2500),
            ("on_cpu", b, 2500),
            ("on_cpu", e, 3500),
            ("blocked", b, 3500),
            ("blocked", e, 8500),
        ]
    );
    let states_track = events.iter().find(|e| e["category"] == "sched").unwrap()["track"].clone();
    assert!(events
        .iter()
        .filter(|e| e["category"] == "sched")
        .all(|e| e["track"] == states_track));
    // The call's end carries its parts; the call with no switch known carries none.
    let ends: Vec<&serde_json::Value> = (events.iter())
        .filter(|e| e["category"] == "exit" && e["kind"] == 2)
        .collect();
    assert_eq!(ends.len(), 2, "{printed}");
    let args = |e: &serde_json::Value| -> Vec<(String, serde_json::Value)> {
        (e["args"].as_array().unwrap().iter())
            .map(|a| (a[0].as_str().unwrap().to_string(), a[1].clone()))
            .filter(|a| a.0.ends_with("_ns") || a.0 == "dominant")
            .collect()
    };
    assert_eq!(
        args(ends[0]),
        [
            ("on_cpu_ns".to_string(), serde_json::json!({"Uint": 3000})),
            (
                "preempted_ns".to_string(),
                serde_json::json!({"Uint": 1000})
            ),
            ("blocked_ns".to_string(), serde_json::json!({"Uint": 5000})),
            (
                "dominant".to_string(),
                serde_json::json!({"Str": "blocked"})
            ),
        ]
    );
    assert_eq!(args(ends[1]), []);
}
