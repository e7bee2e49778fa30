//! `tracing` spans in `report` (`--slowest`, `--by` a field, `--histogram`, `--top`,
//! `--sort`, `--by process`) and `dump --spans`, on devices written by programs instrumented
//! with `tracing` only (`ttrace-test-nested`, `ttrace-test-spans`), as a user runs them, and
//! `dump --spans` of a trace written straight into rings that lost some of its steps.

use devttrace::meta::Definition;
use devttrace::{Kind, Role};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use ttrace_layouts::entry::TypeWord;
use ttrace_layouts::level::Level;
use ttrace_tests::reader;

const REQUEST: &str = "ttrace_test_nested::request";
const WORK: &str = "ttrace_test_nested::work";

/// Requests `ttrace-test-nested requests` makes, and the one whose work waits 30 ms.
const REQUESTS: u64 = 60;
const SLOW: u64 = 37;

/// `ttrace-test-nested` with `args` on a new device under `dir`: the device, and the
/// program's pid.
fn nested(dir: &Path, args: &[&str]) -> (String, u32) {
    nested_with(dir, &[], args)
}

/// [`nested`] with the environment variables `vars` set too.
fn nested_with(dir: &Path, vars: &[(&str, &str)], args: &[&str]) -> (String, u32) {
    let dev = dir.join("nested");
    let mut program = ttrace_tests::cli::Cli::new(env!("CARGO_BIN_EXE_ttrace-test-nested"))
        .env("TTRACE_DIR", &dev)
        .args(args);
    for (k, v) in vars {
        program = program.env(k, v);
    }
    let ran = program.succeeds();
    assert_eq!(ran.stdout, "done\n");
    (dev.to_str().unwrap().to_string(), ran.pid)
}

/// The requests device: `REQUESTS` requests, `SLOW` the slow one.
fn requests(dir: &Path) -> (String, u32) {
    nested(dir, &["requests", &REQUESTS.to_string(), &SLOW.to_string()])
}

fn json(args: &[&str]) -> Value {
    serde_json::from_str(&reader!("report").args(args).arg("--json").ok()).unwrap()
}

/// The span rows of a JSON report: `(name, group) -> row`.
fn span_rows(report: &Value) -> Vec<(String, Option<String>, &Value)> {
    report["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["group"].as_str().map(str::to_string),
                r,
            )
        })
        .collect()
}

#[test]
fn slowest_names_the_longest_instance_with_its_fields_and_its_parents() {
    let tmp = tempfile::tempdir().unwrap();
    let (dev, pid) = requests(tmp.path());
    let d = dev.as_str();
    // Every work instance, longest first.
    let all = json(&[d, "--slowest", "1000", "--name", WORK]);
    let works = all["slowest"].as_array().unwrap();
    assert_eq!(works.len() as u64, REQUESTS, "{all}");
    let lifetimes: Vec<u64> = works
        .iter()
        .map(|w| w["lifetime_ns"].as_u64().unwrap())
        .collect();
    assert!(lifetimes.windows(2).all(|p| p[0] >= p[1]), "{lifetimes:?}");
    let row = span_rows(&all)
        .into_iter()
        .find(|r| r.0 == WORK)
        .unwrap()
        .2
        .clone();
    assert_eq!(lifetimes[0], row["lifetime"]["max_ns"], "{row}");
    // Each names its id, its request's method, uri and the status recorded after it
    // began, and the threads that polled it.
    let mut ids = Vec::new();
    for w in works {
        assert_eq!(w["kind"], "span");
        assert_eq!(w["pid"], pid);
        let id = w["fields"]["id"].as_u64().unwrap();
        ids.push(id);
        assert_eq!(w["fields"], serde_json::json!({ "id": id }), "{w}");
        let request = serde_json::json!({
            "name": REQUEST,
            "fields": { "method": "GET", "uri": format!("/work/{id}"), "status": 200 },
        });
        assert_eq!(w["ancestors"], serde_json::json!([request]), "{w}");
        assert_eq!(w["rooted"], true);
        assert_eq!(
            w["path"],
            format!(
                "{REQUEST}{{method=\"GET\" uri=\"/work/{id}\" status=200}} > {WORK}{{id={id}}}"
            )
        );
        let (busy, idle) = (
            w["busy_ns"].as_u64().unwrap(),
            w["idle_ns"].as_u64().unwrap(),
        );
        assert_eq!(busy + idle, w["lifetime_ns"].as_u64().unwrap(), "{w}");
        assert!(w["polls"].as_u64().unwrap() >= 2, "{w}");
        let threads = w["threads"].as_array().unwrap();
        assert!(!threads.is_empty());
        for t in threads {
            let t = t.as_str().unwrap();
            assert!(
                t.starts_with(&format!("{pid}/")) && t.ends_with(" (worker)"),
                "{t}"
            );
        }
    }
    ids.sort_unstable();
    assert_eq!(ids, (0..REQUESTS).collect::<Vec<_>>());
    // The slow request's work waited 30 ms: the slowest is at least as long.
    let slow = works.iter().find(|w| w["fields"]["id"] == SLOW).unwrap();
    assert!(
        slow["lifetime_ns"].as_u64().unwrap() >= 30_000_000,
        "{slow}"
    );
    assert!(slow["idle_ns"].as_u64().unwrap() >= 30_000_000, "{slow}");

    // `--slowest 1`: the longest of each span; the same work instance, in JSON and text.
    let one = json(&[d, "--slowest", "1"]);
    let listed = one["slowest"].as_array().unwrap();
    let names: Vec<&str> = listed.iter().map(|w| w["name"].as_str().unwrap()).collect();
    // A request lives around its work: the longest request is listed first.
    assert_eq!(names, [REQUEST, WORK], "{one}");
    let first = &listed[1];
    assert_eq!(first["id"], works[0]["id"]);
    assert_eq!(first["lifetime_ns"], works[0]["lifetime_ns"]);
    assert_eq!(first["path"], works[0]["path"]);
    let id = first["fields"]["id"].as_u64().unwrap();
    let request_row = span_rows(&one)
        .into_iter()
        .find(|r| r.0 == REQUEST)
        .unwrap()
        .2
        .clone();
    assert_eq!(listed[0]["lifetime_ns"], request_row["lifetime"]["max_ns"]);
    let text = reader!("report", d, "--slowest", "1").ok();
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with(&format!("{WORK}  ")))
        .unwrap_or_else(|| panic!("{text}"));
    let head = lines[at];
    let span = first["id"].as_u64().unwrap();
    assert!(
        head.contains(&format!("  begun {}  ", first["begin"].as_str().unwrap()))
            && head.contains(&format!("span {span:#x} of pid {pid}"))
            && head.contains(" polls  ")
            && head.contains(" = busy "),
        "{head}"
    );
    assert_eq!(
        lines[at + 1],
        format!("    {}", first["path"].as_str().unwrap()),
        "{text}"
    );
    // It began when dump shows the work's `new`.
    let dump = reader!("dump", d).ok();
    let new = dump
        .lines()
        .find(|l| {
            l.contains(&format!("{WORK} new(span={span:#x} ")) && l.contains(&format!("id={id})"))
        })
        .unwrap_or_else(|| panic!("{dump}"));
    assert_eq!(
        new.split_whitespace().next(),
        first["begin"].as_str(),
        "{new}"
    );
}

#[test]
fn by_a_field_splits_spans_by_their_own_or_their_nearest_ancestors() {
    let tmp = tempfile::tempdir().unwrap();
    let (dev, _) = requests(tmp.path());
    let d = dev.as_str();
    // `uri` is the request's own field, and the work's parent's.
    let by_uri = json(&[d, "--by", "uri"]);
    assert_eq!(by_uri["by"], "arg:uri");
    let rows = span_rows(&by_uri);
    for name in [REQUEST, WORK] {
        let mut groups: Vec<String> = rows
            .iter()
            .filter(|r| r.0 == name)
            .map(|r| {
                assert_eq!(r.2["instances"], 1, "{}", r.2);
                r.1.clone().unwrap()
            })
            .collect();
        groups.sort();
        let mut want: Vec<String> = (0..REQUESTS)
            .map(|i| format!("uri=\"/work/{i}\""))
            .collect();
        want.sort();
        assert_eq!(groups, want, "{name}");
    }
    // The slow request's row holds its work's 30 ms.
    let slow = rows
        .iter()
        .find(|r| r.0 == WORK && r.1.as_deref() == Some(&format!("uri=\"/work/{SLOW}\"")))
        .unwrap();
    assert!(slow.2["lifetime"]["max_ns"].as_u64().unwrap() >= 30_000_000);
    // `id` is the work's own field; the requests have none (nor an ancestor with one).
    let by_id = json(&[d, "--by", "id"]);
    let rows = span_rows(&by_id);
    let requests: Vec<_> = rows.iter().filter(|r| r.0 == REQUEST).collect();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].1.as_deref(), Some("(no id)"));
    assert_eq!(requests[0].2["instances"], REQUESTS);
    let works = rows.iter().filter(|r| r.0 == WORK).count() as u64;
    assert_eq!(works, REQUESTS);
    // A field recorded after the span began (`status`) splits by its value at the close:
    // each request recorded its status before it closed; its work closed before that.
    let by_status = json(&[d, "--by", "status"]);
    let rows = span_rows(&by_status);
    let groups: Vec<(&str, Option<&str>, u64)> = rows
        .iter()
        .map(|r| {
            (
                r.0.as_str(),
                r.1.as_deref(),
                r.2["instances"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        groups,
        [
            (REQUEST, Some("status=200"), REQUESTS),
            (WORK, Some("(no status)"), REQUESTS)
        ]
    );
    // The text says how the spans are split, and labels each row.
    let text = reader!("report", d, "--by", "uri").ok();
    assert!(
        text.contains("# spans: lifetime (new to close) = busy (its polls) + idle; each poll, per value of uri\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!("{WORK} lifetime  [uri=\"/work/{SLOW}\"]\n")),
        "{text}"
    );
    // A name no span and no pair has is refused, naming those there are.
    let err = reader!("report", d, "--by", "url").fails();
    assert_eq!(
        err,
        "ttrace-reader: report --by url: no pair's entry (or start) has an argument of this \
         name; --by takes thread, process, cpu, or an argument: id, method, status, uri\n"
    );
}

#[test]
fn the_histogram_of_a_span_is_of_its_instances_lifetimes() {
    let tmp = tempfile::tempdir().unwrap();
    let (dev, _) = requests(tmp.path());
    let d = dev.as_str();
    let text = reader!("report", d, "--histogram", WORK).ok();
    let heading = format!("# {WORK}: {REQUESTS} span instances (lifetime)");
    let buckets: Vec<(u64, u64, u64)> = text
        .lines()
        .skip_while(|l| *l != heading)
        .skip(2)
        .take_while(|l| l.contains(" -> "))
        .map(|l| {
            let (range, rest) = l.split_once(':').unwrap();
            let (lo, hi) = range.split_once("->").unwrap();
            let n = rest.split_whitespace().next().unwrap();
            (
                lo.trim().parse().unwrap(),
                hi.trim().parse().unwrap(),
                n.parse().unwrap(),
            )
        })
        .collect();
    assert_eq!(buckets.iter().map(|b| b.2).sum::<u64>(), REQUESTS, "{text}");
    // The slow work's 30 ms is in the last bucket.
    let last = buckets.last().unwrap();
    assert!(last.1 >= 30_000_000 && last.2 >= 1, "{text}");
    let report = json(&[d, "--histogram", WORK]);
    let h = &report["histogram"];
    assert_eq!(
        (h["pairs"].as_u64(), h["instances"].as_u64()),
        (Some(0), Some(REQUESTS))
    );
    let counts: u64 = h["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count"].as_u64().unwrap())
        .sum();
    assert_eq!(counts, REQUESTS);
}

#[test]
fn top_sort_and_by_process_order_and_split_the_spans() {
    let tmp = tempfile::tempdir().unwrap();
    // `ttrace-test-spans 40`: 40 `call` and 40 `request` instances, and one `batch` that
    // lives from before the first call to after the last.
    let spans_dev = tmp.path().join("spans");
    ttrace_tests::cli::Cli::new(env!("CARGO_BIN_EXE_ttrace-test-spans"))
        .env("TTRACE_DIR", &spans_dev)
        .arg("40")
        .ok();
    let d = spans_dev.to_str().unwrap();
    let names = |args: &[&str]| -> Vec<String> {
        span_rows(&json(&[&[d][..], args].concat()))
            .into_iter()
            .map(|r| r.0)
            .collect()
    };
    let batch = "ttrace_test_spans::batch".to_string();
    let call = "ttrace_test_spans::call".to_string();
    assert_eq!(names(&["--sort", "max", "--top", "1"]), [batch.as_str()]);
    // By count: calls and requests (40 each, by name), then the batch.
    let by_count = names(&["--sort", "count"]);
    assert_eq!(by_count.first(), Some(&call), "{by_count:?}");
    assert_eq!(by_count.last(), Some(&batch), "{by_count:?}");
    assert_eq!(names(&["--sort", "count", "--top", "1"]), [call]);
    // The text has the rows of the first span only, each of its four lines.
    let text = reader!("report", d, "--sort", "max", "--top", "1").ok();
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("# spans:"))
        .skip(2)
        .take_while(|l| !l.starts_with('#'))
        .collect();
    let labels: Vec<&str> = rows
        .iter()
        .map(|l| l.rsplit("  ").next().unwrap())
        .collect();
    assert_eq!(
        labels,
        ["lifetime", "busy", "idle", "poll"].map(|w| format!("{batch} {w}")),
        "{text}"
    );
    // By process: one program, one group per span, with all its instances.
    let (dev, pid) = nested(tmp.path(), &["requests", "5", "99"]);
    let report = json(&[&dev, "--by", "process"]);
    let rows = span_rows(&report);
    assert_eq!(rows.len(), 2, "{report}");
    for (_, group, row) in rows {
        let group = group.unwrap();
        assert!(
            group.starts_with(&format!("{pid} (ttrace-test-")),
            "{group}"
        );
        assert_eq!(row["instances"], 5);
    }
}

#[test]
fn slowest_refuses_a_bad_count_and_an_unknown_name() {
    let tmp = tempfile::tempdir().unwrap();
    let (dev, _) = nested(tmp.path(), &["requests", "2", "99"]);
    for n in ["0", "x", "1.5", ""] {
        let err = reader!("report", &dev, "--slowest", n).fails();
        assert_eq!(
            err,
            format!(
                "ttrace-reader: report --slowest {n:?}: not a count; give how many of each span \
                 and pair to list (1 or more)\n"
            )
        );
    }
    let err = reader!("report", &dev, "--slowest", "1", "--name", "work").fails();
    assert_eq!(
        err,
        format!("ttrace-reader: report --name work: no span or pair of this name; they are {REQUEST}, {WORK}\n")
    );
    let err = reader!("report", &dev, "--name", WORK).fails();
    assert!(err.contains("give --slowest N too"), "{err}");
    // The name alone lists that span only.
    let one = json(&[&dev, "--slowest", "5", "--name", REQUEST]);
    let names: Vec<&str> = one["slowest"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, [REQUEST, REQUEST]);
}

/// The lines of a dump's events (not its header and footer).
fn event_lines(dump: &str) -> Vec<&str> {
    dump.lines().filter(|l| !l.starts_with('#')).collect()
}

#[test]
fn dump_spans_shows_each_events_path_on_its_own_thread() {
    let tmp = tempfile::tempdir().unwrap();
    let (dev, _) = nested(tmp.path(), &["threads"]);
    let plain = reader!("dump", &dev).ok();
    let spans = reader!("dump", &dev, "--spans").ok();
    let (plain, lines) = (event_lines(&plain), event_lines(&spans));
    assert_eq!(plain.len(), lines.len());
    // `(thread, path, what)` of each line: the path is what --spans adds, between the
    // writer and the event.
    let parsed: Vec<(&str, &str, &str)> = lines
        .iter()
        .zip(&plain)
        .map(|(l, p)| {
            let thread = if l.contains(" (left) ") {
                "left"
            } else {
                "right"
            };
            let writer = format!(" ({thread}) ");
            let (before, after) = l.split_once(&writer).unwrap();
            let (p_before, p_after) = p.split_once(&writer).unwrap();
            assert_eq!(before, p_before);
            let path = after
                .strip_suffix(p_after)
                .unwrap_or_else(|| panic!("{l}\n{p}"));
            let what = p_after.split('(').next().unwrap();
            (thread, path, what)
        })
        .collect();
    let request = |uri: &str, status: bool| {
        let status = if status { " status=200" } else { "" };
        format!("{REQUEST}{{method=\"GET\" uri=\"/{uri}\"{status}}}:")
    };
    let path_of = |thread: &str, what: &str| -> Vec<&str> {
        parsed
            .iter()
            .filter(|p| p.0 == thread && p.2 == what)
            .map(|p| p.1)
            .collect()
    };
    for (thread, id) in [("left", 1), ("right", 2)] {
        let (outer, outer_done) = (request(thread, false), request(thread, true));
        let work = format!("{WORK}{{id={id}}}:");
        let inside = |o: &str| format!("{o}{work} ");
        // The request's steps are outside every span; the work's inside the request; an
        // event in both; after the request recorded its status, the path shows it.
        assert_eq!(path_of(thread, &format!("INFO {REQUEST} new")), [""]);
        assert_eq!(path_of(thread, &format!("INFO {REQUEST} enter")), [""]);
        assert_eq!(
            path_of(thread, &format!("INFO {WORK} new")),
            [format!("{outer} ")]
        );
        assert_eq!(
            path_of(thread, &format!("INFO {WORK} enter")),
            [format!("{outer} ")]
        );
        assert_eq!(
            path_of(thread, "INFO ttrace_test_nested::before"),
            [inside(&outer)]
        );
        assert_eq!(
            path_of(thread, &format!("INFO {REQUEST} record")),
            [inside(&outer)]
        );
        assert_eq!(
            path_of(thread, "INFO ttrace_test_nested::after"),
            [inside(&outer_done)]
        );
        assert_eq!(
            path_of(thread, &format!("INFO {WORK} exit")),
            [format!("{outer_done} ")]
        );
        assert_eq!(path_of(thread, &format!("INFO {REQUEST} exit")), [""]);
        assert_eq!(path_of(thread, "INFO ttrace_test_nested::outside"), [""]);
    }
    // Both threads were in their spans at once (the program's barrier): each one's events
    // inside come between the other's work enter and exit.
    let at = |thread: &str, what: &str| {
        parsed
            .iter()
            .position(|p| p.0 == thread && p.2 == what)
            .unwrap()
    };
    for (one, other) in [("left", "right"), ("right", "left")] {
        let inside = at(one, "INFO ttrace_test_nested::before");
        assert!(at(other, &format!("INFO {WORK} enter")) < inside);
        assert!(inside < at(other, &format!("INFO {WORK} exit")));
    }
    // Lines a filter leaves out still make the paths of those it shows.
    let filtered = reader!("dump", &dev, "--spans", "--filter", "*::after").ok();
    let filtered = event_lines(&filtered);
    assert_eq!(filtered.len(), 2);
    for l in filtered {
        let (uri, id) = if l.contains(" (left) ") {
            ("left", 1)
        } else {
            ("right", 2)
        };
        assert!(
            l.contains(&format!(
                " ({uri}) {}{WORK}{{id={id}}}: INFO ttrace_test_nested::after(",
                request(uri, true)
            )),
            "{l}"
        );
    }
}

/// The lines of a `dump --spans` and of the plain `dump` of the same device, each as its
/// span path (what `--spans` adds between the writer and the event, `""` for none) and the
/// plain line.
fn paths<'a>(spans: &'a str, plain: &'a str) -> Vec<(&'a str, &'a str)> {
    let (lines, plain) = (event_lines(spans), event_lines(plain));
    assert_eq!(lines.len(), plain.len());
    lines
        .iter()
        .zip(&plain)
        .map(|(l, p)| {
            // The writer is `pid/tid (name) `; no thread name here holds `) `.
            let (before, after) = l.split_once(") ").unwrap();
            let (p_before, p_after) = p.split_once(") ").unwrap();
            assert_eq!(before, p_before);
            let path = after
                .strip_suffix(p_after)
                .unwrap_or_else(|| panic!("{l}\n{p}"));
            (path, *p)
        })
        .collect()
}

/// The instances a span path shows, outermost first: each name (one of `names`) and its
/// fields as shown (`?` where they are not known); `None` for `?: ` (no path can be told).
fn scopes<'a>(path: &'a str, names: &[&str]) -> Option<Vec<(String, &'a str)>> {
    if path == "?: " {
        return None;
    }
    let mut rest = match path {
        "" => "",
        p => p
            .strip_suffix(' ')
            .unwrap_or_else(|| panic!("{path:?} does not end in a space")),
    };
    let mut scopes = Vec::new();
    while !rest.is_empty() {
        let name = names
            .iter()
            .find(|n| rest.starts_with(**n))
            .unwrap_or_else(|| panic!("{path:?}: {rest:?} names no span"));
        rest = &rest[name.len()..];
        let fields = match rest.strip_prefix('{') {
            Some(r) => {
                let (fields, r) = r.split_once('}').unwrap();
                rest = r;
                fields
            }
            None => "",
        };
        rest = rest
            .strip_prefix(':')
            .unwrap_or_else(|| panic!("{path:?}: no `:` after {name}"));
        scopes.push((name.to_string(), fields));
    }
    Some(scopes)
}

/// What a thread of the lossy trace did (ids are span ids in its one process).
#[derive(Clone, Copy, Debug)]
enum Did {
    /// Created instance `id` of span `span` (an index of [`LOSSY_SPANS`]) under `parent`,
    /// with the field `n`.
    New {
        span: usize,
        id: u64,
        parent: u64,
        n: u64,
    },
    Enter(u64),
    Exit(u64),
    Close(u64),
    /// Recorded the event `app::working(n)`.
    Working(u64),
    /// Recorded `app::tick` (what makes a ring wrap).
    Tick,
}

/// The spans of the lossy trace.
const LOSSY_SPANS: [&str; 2] = ["app::request", "app::work"];
const LOSSY_REQUEST: usize = 0;
const LOSSY_WORK: usize = 1;
/// Slots per ring of its device.
const LOSSY_SLOTS: u64 = 64;
/// Its writers' process.
const LOSSY_PID: u32 = 4242;
/// Its threads: id and name.
const LOSSY_THREADS: [(u32, &str); 6] = [
    (1, "t1"),
    (2, "t2"),
    (3, "t3"),
    (4, "t4"),
    (5, "t5"),
    (9, "filler"),
];

/// An event of the lossy trace: its stamp, its thread, and the instances the thread was in
/// (its true path: span and `n` of each, outermost first).
type Written = (u64, u32, Vec<(usize, u64)>);

/// A trace written straight into two shared rings of a device (`cpu0.shared`, which keeps
/// all it is given, and `cpu1.shared`, which is made to wrap), each event at a stamp of its
/// own, with the truth: the instances each thread was in at each event, as the program had
/// them, whatever the rings kept.
struct Lossy {
    dev: devttrace::Device,
    /// Type words: per span, of its new, enter, exit and close; then of `working`, `tick`.
    spans: [[u64; 4]; 2],
    working: u64,
    tick: u64,
    stamp: u64,
    /// Per ring, the events written to it.
    written: [Vec<Written>; 2],
    /// Per thread, the instances it is in (ids), innermost last.
    stacks: HashMap<u32, Vec<u64>>,
    /// Per id, the span and `n` of the instance that has it.
    instances: HashMap<u64, (usize, u64)>,
}

impl Lossy {
    fn new(dir: &Path) -> Lossy {
        let dev = devttrace::Device::open(&ttrace_tests::config(dir, LOSSY_SLOTS, 2)).unwrap();
        let define = |name: &'static str, format: &'static str, role: Role| {
            let def = Definition::untyped(name, Kind::Start, Level::Info.class(), format);
            let word = dev.register_tracepoint(&def.with_role(role)).unwrap().1;
            assert_ne!(word, 0, "{name} is enabled");
            word
        };
        let span = |name| {
            [
                define(name, "span={span:x} parent={parent:x} n={n}", Role::SpanNew),
                define(name, "span={span:x}", Role::SpanEnter),
                define(name, "span={span:x}", Role::SpanExit),
                define(name, "span={span:x}", Role::SpanClose),
            ]
        };
        let spans = [span(LOSSY_SPANS[0]), span(LOSSY_SPANS[1])];
        let working = define("app::working", "n={n}", Role::Event);
        let tick = define("app::tick", "i={i}", Role::Point);
        for (tid, name) in LOSSY_THREADS {
            dev.note_thread(LOSSY_PID, tid, name).unwrap();
        }
        // Stamps after the threads' records, even (a stamp's low bit is a flag), apart.
        let stamp = (dev.mapping().now() + 1_000) & !1;
        Lossy {
            dev,
            spans,
            working,
            tick,
            stamp,
            written: [Vec::new(), Vec::new()],
            stacks: HashMap::new(),
            instances: HashMap::new(),
        }
    }

    /// Thread `tid` did `did`, recorded in ring `ring` (0: `cpu0.shared`, 1:
    /// `cpu1.shared`), or not recorded at all (`None`: its callsite was turned off).
    fn did(&mut self, ring: Option<usize>, tid: u32, did: Did) {
        let stack = self.stacks.entry(tid).or_default();
        // An exit's path is the one around its instance.
        let mut around = stack.clone();
        if let Did::Exit(id) = did {
            let at = around.iter().rposition(|k| *k == id).unwrap();
            around.remove(at);
        }
        let truth: Vec<(usize, u64)> = around.iter().map(|id| self.instances[id]).collect();
        let (word, args) = match did {
            Did::New {
                span,
                id,
                parent,
                n,
            } => (self.spans[span][0], vec![id, parent, n]),
            Did::Enter(id) => (self.spans[self.instances[&id].0][1], vec![id]),
            Did::Exit(id) => (self.spans[self.instances[&id].0][2], vec![id]),
            Did::Close(id) => (self.spans[self.instances[&id].0][3], vec![id]),
            Did::Working(n) => (self.working, vec![n]),
            Did::Tick => (self.tick, vec![self.written[1].len() as u64]),
        };
        match did {
            Did::New { span, id, n, .. } => {
                self.instances.insert(id, (span, n));
            }
            Did::Enter(id) => stack.push(id),
            Did::Exit(id) => {
                let at = stack.iter().rposition(|k| *k == id).unwrap();
                stack.remove(at);
            }
            _ => {}
        }
        let Some(ring) = ring else {
            return;
        };
        self.stamp += 2_000;
        let mut words = [0u64; 7];
        words[0] = TypeWord(word).with_cpu(ring as u32).0;
        words[1] = (LOSSY_PID as u64) << 32 | tid as u64;
        words[2..2 + args.len()].copy_from_slice(&args);
        let shared = self.dev.mapping().shared_ring(ring as u32);
        shared.write(self.stamp, LOSSY_PID, &words).unwrap();
        self.written[ring].push((self.stamp, tid, truth));
    }

    /// The events the rings kept, in time order, and the stamp of the oldest of those of the
    /// ring that wrapped.
    fn kept(&self) -> (Vec<Written>, u64) {
        let [a, b] = &self.written;
        assert!(a.len() as u64 <= LOSSY_SLOTS && b.len() as u64 > LOSSY_SLOTS);
        let b = &b[b.len() - LOSSY_SLOTS as usize..];
        let mut kept: Vec<_> = a.iter().chain(b).cloned().collect();
        kept.sort_by_key(|k| k.0);
        (kept, b[0].0)
    }
}

#[test]
fn dump_spans_shows_no_path_the_rings_losses_could_make_up() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lossy");
    let mut l = Lossy::new(&dir);
    let (a, b) = (Some(0), Some(1));
    let (req, work) = (LOSSY_REQUEST, LOSSY_WORK);
    let new = |span, id, parent, n| Did::New {
        span,
        id,
        parent,
        n,
    };
    // Before the horizon. t1 is in request 1 when its exit and close go to the ring that
    // will lose them.
    l.did(a, 1, new(req, 1, 0, 1));
    l.did(a, 1, Did::Enter(1));
    l.did(a, 1, Did::Working(1));
    l.did(b, 1, Did::Exit(1));
    l.did(b, 1, Did::Close(1));
    // t2's request 7 (n=5) closes and its id goes to request n=6, where it is lost.
    l.did(a, 2, new(req, 7, 0, 5));
    l.did(b, 2, Did::Close(7));
    l.did(b, 2, new(req, 7, 0, 6));
    // t3 enters request 20, and stays in it past the horizon.
    l.did(a, 3, new(req, 20, 0, 20));
    l.did(a, 3, Did::Enter(20));
    // The ring wraps: what it lost is all before its oldest event kept (the horizon).
    for _ in 0..LOSSY_SLOTS {
        l.did(b, 9, Did::Tick);
    }
    // After the horizon. t1: request 2 around work 2, their steps on both rings.
    l.did(a, 1, new(req, 2, 0, 2));
    l.did(a, 1, Did::Enter(2));
    l.did(a, 1, new(work, 3, 2, 2));
    l.did(b, 1, Did::Enter(3));
    l.did(a, 1, Did::Working(2));
    l.did(b, 1, Did::Exit(3));
    l.did(a, 1, Did::Exit(2));
    l.did(a, 1, Did::Close(3));
    l.did(b, 1, Did::Close(2));
    // t2: request 7 (n=6, whose new was lost) around work 6.
    l.did(a, 2, Did::Enter(7));
    l.did(a, 2, new(work, 8, 7, 6));
    l.did(a, 2, Did::Enter(8));
    l.did(a, 2, Did::Working(6));
    l.did(a, 2, Did::Exit(8));
    l.did(a, 2, Did::Exit(7));
    // t3: work 20 inside request 20, which it leaves first (`tracing` allows exits out of
    // order): the exit of an instance entered before the horizon leaves the work alone.
    l.did(a, 3, new(work, 22, 20, 20));
    l.did(a, 3, Did::Enter(22));
    l.did(a, 3, Did::Working(20));
    l.did(a, 3, Did::Exit(20));
    l.did(a, 3, Did::Working(20));
    l.did(a, 3, Did::Exit(22));
    l.did(a, 3, Did::Close(22));
    l.did(a, 3, Did::Close(20));
    // t4: exits not recorded (the callsite turned off meanwhile). The close of request 30
    // takes it off t4's stack; the new of id 31 for another request, the one that had it.
    l.did(a, 4, new(req, 30, 0, 30));
    l.did(a, 4, Did::Enter(30));
    l.did(a, 4, Did::Working(30));
    l.did(None, 4, Did::Exit(30));
    l.did(a, 4, Did::Close(30));
    l.did(a, 4, Did::Working(0));
    l.did(a, 4, new(req, 31, 0, 31));
    l.did(a, 4, Did::Enter(31));
    l.did(None, 4, Did::Exit(31));
    l.did(None, 4, Did::Close(31));
    l.did(a, 4, new(req, 31, 0, 32));
    l.did(a, 4, Did::Working(0));
    // t5: request 40's exit and close, and the new of work 40 that took its id, not
    // recorded; the work's enter is: t5 is in the work, not in the request.
    l.did(a, 5, new(req, 40, 0, 40));
    l.did(a, 5, Did::Enter(40));
    l.did(None, 5, Did::Exit(40));
    l.did(None, 5, Did::Close(40));
    l.did(None, 5, new(work, 40, 0, 41));
    l.did(a, 5, Did::Enter(40));
    l.did(a, 5, Did::Working(41));

    let (kept, horizon) = l.kept();
    let spans = reader!("dump", &dir, "--spans").ok();
    let plain = reader!("dump", &dir).ok();
    let lines = paths(&spans, &plain);
    assert_eq!(lines.len(), kept.len(), "{spans}");
    let name = |tid| LOSSY_THREADS.iter().find(|t| t.0 == tid).unwrap().1;
    let mut told = HashMap::new();
    for ((path, line), (stamp, tid, truth)) in lines.iter().zip(&kept) {
        assert!(line.contains(&format!(" ({}) ", name(*tid))), "{line}");
        if let Some((_, args)) = line.split_once("app::working(") {
            told.insert((*tid, args), *path);
        }
        let Some(shown) = scopes(path, &LOSSY_SPANS) else {
            // No path can be told before the horizon; every one after it.
            assert!(*stamp < horizon, "{path}{line}");
            continue;
        };
        assert!(*stamp >= horizon, "{path}{line}");
        // Every instance shown is one the thread was in, in the order it entered them,
        // with its own fields (or `?`): a subsequence of the truth.
        let mut rest = truth.iter();
        for (span, fields) in &shown {
            let found = rest.any(|(s, n)| {
                LOSSY_SPANS[*s] == span && (*fields == "?" || *fields == format!("n={n}"))
            });
            assert!(found, "{path}{line}: the thread was in {truth:?}");
        }
    }
    // What the trace tells from the horizon on is told whole.
    let r = |n| format!("app::request{{n={n}}}:");
    let w = |n| format!("app::work{{n={n}}}:");
    assert_eq!(told[&(1, "n=2)")], format!("{}{} ", r(2), w(2)), "{spans}");
    assert_eq!(told[&(2, "n=6)")], format!("app::request{{?}}:{} ", w(6)));
    assert_eq!(told[&(3, "n=20)")], format!("{} ", w(20)));
    assert_eq!(told[&(4, "n=30)")], format!("{} ", r(30)));
    assert_eq!(told[&(4, "n=0)")], "");
    assert_eq!(told[&(5, "n=41)")], "app::work{?}: ");
    assert_eq!(told[&(1, "n=1)")], "?: ");
}

#[test]
fn dump_spans_of_wrapped_rings_shows_each_request_around_its_own_work() {
    let tmp = tempfile::tempdir().unwrap();
    // Far more steps (about 20 a request) than the rings hold (256 slots each): every ring
    // the program wrote much to lost its oldest entries, steps of spans among them.
    let requests = "3000";
    let (dev, _) = nested_with(
        tmp.path(),
        &[("TTRACE_RING_SLOTS", "256")],
        &["requests", requests, requests],
    );
    let spans = reader!("dump", &dev, "--spans").ok();
    let plain = reader!("dump", &dev).ok();
    // The last line's tally: `# N events (...); M entries lost, ...`.
    let lost: u64 = plain
        .lines()
        .last()
        .and_then(|l| l.split("; ").nth(1)?.split(' ').next()?.parse().ok())
        .unwrap();
    assert!(lost > 0, "{plain}");
    let lines = paths(&spans, &plain);
    // `id=N` in a line's arguments, `uri="/work/N"` in a request's fields, `id=N` in a
    // work's: `None` where a string was lost.
    let number = |text: &str, key: &str| -> Option<u64> {
        let at = text.find(key)? + key.len();
        let digits: String = text[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    };
    let mut told = false;
    for (k, (path, line)) in lines.iter().enumerate() {
        let Some(shown) = scopes(path, &[REQUEST, WORK]) else {
            // `?: ` before the horizon only: a prefix of the lines, in time order.
            assert!(!told, "line {k}: {path}{line}");
            continue;
        };
        told = true;
        // At most a request and, inside it, a work: one of each, in that order.
        let names: Vec<&str> = shown.iter().map(|s| s.0.as_str()).collect();
        assert!(
            [&[][..], &[REQUEST], &[WORK], &[REQUEST, WORK]].contains(&names.as_slice()),
            "{path}{line}"
        );
        let mut ids: Vec<u64> = shown
            .iter()
            .filter_map(|(name, fields)| match name.as_str() {
                REQUEST => number(fields, "uri=\"/work/"),
                _ => number(fields, "id="),
            })
            .collect();
        let own = format!("{WORK} new(");
        if line.contains(&own) || line.contains("::working(") {
            // A work's new is inside its request; the work's event inside both.
            ids.extend(number(line.split('(').nth(1).unwrap(), "id="));
        }
        if line.contains(&format!("{REQUEST} new(")) {
            // A request is made outside every span.
            assert_eq!(*path, "", "{line}");
        }
        assert!(ids.windows(2).all(|p| p[0] == p[1]), "{path}{line}");
    }
}
