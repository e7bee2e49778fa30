//! `tracing` spans in `report` (`--slowest`, `--by` a field, `--histogram`, `--top`,
//! `--sort`, `--by process`) and `dump --spans`, on devices written by programs instrumented
//! with `tracing` only (`ttrace-test-nested`, `ttrace-test-spans`), as a user runs them.

use serde_json::Value;
use std::path::Path;
use ttrace_tests::reader;

const REQUEST: &str = "ttrace_test_nested::request";
const WORK: &str = "ttrace_test_nested::work";

/// Requests `ttrace-test-nested requests` makes, and the one whose work waits 30 ms.
const REQUESTS: u64 = 60;
const SLOW: u64 = 37;

/// `ttrace-test-nested` with `args` on a new device under `dir`: the device, and the
/// program's pid.
fn nested(dir: &Path, args: &[&str]) -> (String, u32) {
    let dev = dir.join("nested");
    let ran = ttrace_tests::cli::Cli::new(env!("CARGO_BIN_EXE_ttrace-test-nested"))
        .env("TTRACE_DIR", &dev)
        .args(args)
        .succeeds();
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
