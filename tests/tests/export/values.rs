//! Arguments shown as their Rust types say, and value tables: flags and enums defined once
//! in Rust, carried in the metadata, printed by name by `dump` and the exports.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use ttrace_core::{point, tracepoint, values};
use ttrace_tests::{ctf, reader, viewer};

values!(static OPEN_FLAGS: flags = { O_RDONLY = 0, O_WRONLY = 0o1, O_RDWR = 0o2, O_CREAT = 0o100, O_TRUNC = 0o1000 });
values!(static STATE: enum = { Idle = 0, Busy = 1, Done = 2, Failed = -1 });

tracepoint!(static OPEN: Entry = "open", "path={path:s} flags={flags:OPEN_FLAGS}", OPEN_FLAGS);
tracepoint!(static STEP: Start = "step", "state={state:STATE} raw={raw:x}", STATE);
tracepoint!(static REQUEST: Entry = "request", "state={state:STATE}", STATE);
tracepoint!(static REQUEST_DONE: Exit = "request_done", "");
tracepoint!(static JOB_START: Start = "job_start", "n={n}");
tracepoint!(static JOB_DONE: Stop = "job_done", "");
tracepoint!(static TYPED: Start = "typed", "fd={fd} ok={ok} ratio={ratio} name={name} ch={ch} small={small} big={big:d}");

/// A device written once by this process: each case of the tables, then typed arguments.
fn device() -> &'static Path {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &DIR.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("dev");
        ttrace_core::init(&ttrace_tests::config(&dir, 1024, 2)).unwrap();
        for flags in [0o1101u32, 0o1, 0o11, 0, 0o2000] {
            point!(OPEN, "/tmp/x", flags);
        }
        for state in [1i32, 2, 7, -1] {
            point!(STEP, state, state);
        }
        for state in [1u8, 2, 1, 7] {
            point!(REQUEST, state);
            point!(REQUEST_DONE);
        }
        // Two jobs that overlap, as requests do (not calls): start 1, start 2, done, done.
        point!(JOB_START, 1u32);
        point!(JOB_START, 2u32);
        point!(JOB_DONE);
        point!(JOB_DONE);
        let name = String::from("worker");
        point!(TYPED, -1i32, true, 1.5f64, name.as_str(), 'x', 200u8, -7i64);
        (tmp, dir)
    })
    .1
}

/// The argument text of each `name(...)` line dump prints, in order.
fn dumped(name: &str) -> Vec<String> {
    let text = reader!("dump", device()).ok();
    text.lines()
        .filter_map(|l| l.split_once(&format!(" {name}("))?.1.strip_suffix(')'))
        .map(str::to_string)
        .collect()
}

#[test]
fn dump_prints_flags_by_the_names_of_their_bits() {
    assert_eq!(
        dumped("open"),
        [
            r#"path="/tmp/x" flags=O_WRONLY|O_CREAT|O_TRUNC"#,
            r#"path="/tmp/x" flags=O_WRONLY"#,
            r#"path="/tmp/x" flags=O_WRONLY|0x8"#,
            r#"path="/tmp/x" flags=O_RDONLY"#,
            r#"path="/tmp/x" flags=0x400"#,
        ]
    );
}

#[test]
fn dump_prints_enums_by_name_and_an_unnamed_value_as_a_number() {
    assert_eq!(
        dumped("step"),
        [
            "state=Busy raw=0x1",
            "state=Done raw=0x2",
            "state=7 raw=0x7",
            "state=Failed raw=0xffffffffffffffff",
        ]
    );
}

#[test]
fn arguments_without_a_spec_show_as_their_rust_type_says() {
    assert_eq!(
        dumped("typed"),
        [r#"fd=-1 ok=true ratio=1.5 name="worker" ch='x' small=200 big=-7"#]
    );
}

/// The exports of the device in a fresh directory: `(ctf dir, chrome JSON)`.
fn exports() -> &'static (PathBuf, serde_json::Value) {
    static OUT: OnceLock<(tempfile::TempDir, (PathBuf, serde_json::Value))> = OnceLock::new();
    &OUT.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let dev = device().to_str().unwrap();
        let ctf = tmp.path().join("ctf");
        reader!("export", "--format", "ctf", dev, "-o", &ctf).ok();
        let json = tmp.path().join("trace.json");
        reader!("export", "--format", "chrome", dev, "-o", &json).ok();
        let json = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
        (tmp, (ctf, json))
    })
    .1
}

/// The fields of each CTF event `name`, as babeltrace2 prints them (`a = 1, b = ...`).
fn ctf_fields(name: &str) -> Vec<String> {
    let trace = ctf::read(&exports().0).unwrap();
    trace
        .events
        .iter()
        .filter(|e| e.name == name)
        .map(|e| {
            let f: Vec<String> = e.fields.iter().map(|(k, v)| format!("{k} = {v}")).collect();
            f.join(", ")
        })
        .collect()
}

#[test]
fn ctf_declares_value_tables_as_enumerations() {
    assert_eq!(
        ctf_fields("open"),
        [
            r#"path = "/tmp/x", flags = ( "O_WRONLY|O_CREAT|O_TRUNC" : container = 577 )"#,
            r#"path = "/tmp/x", flags = ( "O_WRONLY" : container = 1 )"#,
            r#"path = "/tmp/x", flags = ( "O_WRONLY|0x8" : container = 9 )"#,
            r#"path = "/tmp/x", flags = ( "O_RDONLY" : container = 0 )"#,
            r#"path = "/tmp/x", flags = ( "0x400" : container = 1024 )"#,
        ]
    );
    assert_eq!(
        ctf_fields("step"),
        [
            r#"state = ( "Busy" : container = 1 ), raw = 0x1"#,
            r#"state = ( "Done" : container = 2 ), raw = 0x2"#,
            r#"state = ( <unknown> : container = 7 ), raw = 0x7"#,
            r#"state = ( "Failed" : container = -1 ), raw = 0xFFFFFFFFFFFFFFFF"#,
        ]
    );
}

#[test]
#[ignore = "needs babeltrace2: apt install babeltrace2"]
fn babeltrace2_prints_flags_and_enums_by_name() {
    let (out, _) = viewer::run("babeltrace2", &[exports().0.to_str().unwrap()]);
    let fields = |name: &str| -> Vec<String> {
        out.lines()
            .filter(|l| l.contains(&format!(" {name}: ")))
            .map(|l| {
                l.rsplit_once("}, { ")
                    .unwrap()
                    .1
                    .trim_end_matches(" }")
                    .to_string()
            })
            .collect()
    };
    assert_eq!(fields("open"), ctf_fields("open"));
    assert_eq!(fields("step"), ctf_fields("step"));
    assert!(out.contains(r#"flags = ( "O_WRONLY|O_CREAT|O_TRUNC" : container = 577 )"#));
}

#[test]
fn chrome_arguments_carry_the_names() {
    let events = exports().1["traceEvents"].as_array().unwrap();
    let args = |name: &str, key: &str| -> Vec<serde_json::Value> {
        events
            .iter()
            .filter(|e| e["name"] == name)
            .filter_map(|e| e["args"].get(key).cloned())
            .collect()
    };
    assert_eq!(
        args("open", "flags"),
        [
            "O_WRONLY|O_CREAT|O_TRUNC",
            "O_WRONLY",
            "O_WRONLY|0x8",
            "O_RDONLY",
            "0x400"
        ]
    );
    assert_eq!(args("step", "state"), ["Busy", "Done", "7", "Failed"]);
    assert_eq!(args("typed", "fd"), [-1]);
    assert_eq!(args("typed", "ok"), [true]);
    assert_eq!(args("typed", "ch"), ["'x'"]);
}

#[test]
fn a_definition_recorded_without_types_shows_as_its_format_says() {
    // What an older writer recorded: no types, no tables. `{n}` is unsigned, `{m:d}` signed.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = ttrace_core::Writer::open(&ttrace_tests::config(&dir, 64, 1)).unwrap();
    let word = ttrace_tests::define(&dev, "old", "n={n} m={m:d}");
    dev.emit(word, 1 << 32 | 1, &[-1i64 as u64, -1i64 as u64]);
    let text = reader!("dump", &dir).ok();
    assert!(text.contains("old(n=18446744073709551615 m=-1)"), "{text}");
}

#[test]
fn report_splits_durations_by_an_arguments_named_values() {
    let text = reader!("report", device(), "--by", "state", "--sort", "count").ok();
    // `count min ... total  request  [state=Busy]`
    let rows: Vec<(u64, String)> = text
        .lines()
        .filter_map(|l| {
            let (head, group) = l.split_once("  request  [")?;
            let count = head.split_whitespace().next()?.parse().ok()?;
            Some((count, group.strip_suffix(']')?.to_string()))
        })
        .collect();
    assert!(rows.contains(&(2, "state=Busy".into())), "{text}");
    assert!(rows.contains(&(1, "state=Done".into())), "{text}");
    assert!(rows.contains(&(1, "state=7".into())), "{text}");
    // The same, scripted.
    let json: serde_json::Value =
        serde_json::from_str(&reader!("report", device(), "--by", "arg:state", "--json").ok())
            .unwrap();
    let mut groups: Vec<(String, u64)> = json["durations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["name"] == "request")
        .map(|l| {
            (
                l["group"].as_str().unwrap().to_string(),
                l["count"].as_u64().unwrap(),
            )
        })
        .collect();
    groups.sort();
    assert_eq!(
        groups,
        [
            ("state=7".into(), 1),
            ("state=Busy".into(), 2),
            ("state=Done".into(), 1)
        ]
    );
}

#[test]
fn a_snapshot_keeps_the_tables() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("trace.ttrace");
    let file = file.to_str().unwrap();
    let said = reader!("snapshot", device(), "-o", file).ok();
    // It says how big the file is, and that is what it is.
    let size = std::fs::metadata(file).unwrap().len();
    assert!(said.contains(&format!("; {size} bytes (of a ")), "{said}");
    let lines = |source: &str| -> Vec<String> {
        reader!("dump", source)
            .ok()
            .lines()
            .filter(|l| l.contains(" open(") || l.contains(" step("))
            .map(str::to_string)
            .collect()
    };
    let saved = lines(file);
    assert_eq!(saved.len(), 9);
    assert_eq!(saved, lines(device().to_str().unwrap()));
}

#[test]
fn start_stop_pairs_of_one_stem_are_async_slices_in_chrome() {
    let events = exports().1["traceEvents"].as_array().unwrap();
    let job: Vec<&serde_json::Value> = events.iter().filter(|e| e["name"] == "job").collect();
    let phases: Vec<&str> = job.iter().map(|e| e["ph"].as_str().unwrap()).collect();
    assert_eq!(phases, ["b", "e", "b", "e"]);
    // The later start closes first (as report pairs them), each pair with its own id.
    assert_eq!(job[0]["id"], job[1]["id"]);
    assert_ne!(job[0]["id"], job[2]["id"]);
    let ts = |e: &serde_json::Value| e["ts"].as_f64().unwrap();
    assert!(ts(job[2]) < ts(job[0]) && ts(job[1]) < ts(job[3]));
    // The starts and stops keep their own events, with their arguments.
    let starts: Vec<_> = events.iter().filter(|e| e["name"] == "job_start").collect();
    assert_eq!(starts.len(), 2);
    assert_eq!(starts[1]["args"]["n"], 2);
}

#[test]
fn the_uftrace_export_shows_value_tables_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("uftrace");
    reader!("export", "--format", "uftrace", device(), "-o", &out).ok();
    let data = ttrace_tests::uftrace::read(&out).unwrap();
    let records = || data.threads.values().flatten();
    // An entry's table argument is the string dump shows.
    let opens: Vec<&ttrace_tests::uftrace::Kind> = records()
        .filter(|r| r.name == "open")
        .map(|r| &r.kind)
        .filter(|k| matches!(k, ttrace_tests::uftrace::Kind::Entry(_)))
        .collect();
    use ttrace_tests::uftrace::{Arg, Kind};
    assert_eq!(
        opens[0],
        &Kind::Entry(vec![
            Arg::Str("/tmp/x".into()),
            Arg::Str("O_WRONLY|O_CREAT|O_TRUNC".into())
        ])
    );
    let requests: Vec<&Kind> = records()
        .filter(|r| r.name == "request" && matches!(r.kind, Kind::Entry(_)))
        .map(|r| &r.kind)
        .collect();
    assert_eq!(requests[0], &Kind::Entry(vec![Arg::Str("Busy".into())]));
    // An instant's, in its text: what its point function returns.
    let steps: Vec<Option<&str>> = records()
        .filter(|r| r.name == "ttrace:step" && r.kind == Kind::Exit)
        .map(|r| r.data.as_deref())
        .collect();
    assert_eq!(steps[0], Some("step(state=Busy raw=0x1)"));
}
