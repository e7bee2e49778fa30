//! `export --format otlp` (JSON lines) and `otlp-proto`, and `--otlp-endpoint`: every pair
//! of a trace a span at its times, with its parent, attributes, events and links, the
//! same in both encodings and in what a collector receives; read by our reader
//! (`ttrace_tests::otlp`) everywhere, and by OpenTelemetry's own protos where the Python
//! package is installed.

use super::export::{dump, spans_device, Event};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use ttrace_tests::otlp::{read_json_lines, read_proto, Attr, Span};
use ttrace_tests::{reader, viewer};

/// The spans of `dev` in both encodings, which must hold the same (sorted by id).
fn spans(dev: &str, dir: &Path) -> Vec<Span> {
    let (pb, jsonl) = (dir.join("t.pb"), dir.join("t.jsonl"));
    reader!("export", "--format", "otlp-proto", dev, "-o", &pb).ok();
    reader!("export", "--format", "otlp", dev, "-o", &jsonl).ok();
    let mut proto = read_proto(&std::fs::read(&pb).unwrap()).unwrap();
    let mut json = read_json_lines(&std::fs::read_to_string(&jsonl).unwrap()).unwrap();
    proto.sort_by(|a, b| a.id.cmp(&b.id));
    json.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(proto, json);
    assert!(proto
        .iter()
        .all(|s| s.kind == 1 && s.scope == "ttrace" && s.end >= s.start));
    proto
}

fn attr<'a>(attrs: &'a [(String, Attr)], key: &str) -> Option<&'a Attr> {
    attrs.iter().find(|a| a.0 == key).map(|a| &a.1)
}

#[test]
fn a_tokio_service_s_spans_arrive_with_their_parents_fields_events_and_links() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = &spans_device(tmp.path());
    let spans = spans(dev, tmp.path());
    let by_id: HashMap<&str, &Span> = spans.iter().map(|s| (s.id.as_str(), s)).collect();
    let named = |n: &str| -> Vec<&Span> {
        spans
            .iter()
            .filter(|s| s.name == format!("ttrace_test_spans::{n}"))
            .collect()
    };
    let (calls, requests, batch) = (named("call"), named("request"), named("batch"));
    assert_eq!((calls.len(), requests.len(), batch.len()), (40, 40, 1));
    // A request is its call's child, in its trace, inside it, with its fields (the status
    // recorded late), and its event.
    for r in &requests {
        let call = by_id[r.parent.as_deref().expect("a request has a parent")];
        assert_eq!(call.name, "ttrace_test_spans::call");
        assert_eq!(r.trace, call.trace);
        assert!(call.start <= r.start && r.end <= call.end);
        let id = attr(&call.attrs, "id").cloned();
        assert_eq!(attr(&r.attrs, "id").cloned(), id);
        let Some(Attr::Int(status)) = attr(&r.attrs, "status") else {
            panic!("{r:?}")
        };
        assert!((200..203).contains(status));
        assert_eq!(r.events.len(), 1, "{r:?}");
        let e = &r.events[0];
        assert!(r.start <= e.ns && e.ns <= r.end);
        assert_eq!(
            attr(&e.attrs, "message"),
            Some(&Attr::Str("handled".into()))
        );
        assert_eq!(attr(&e.attrs, "id").cloned(), id);
    }
    // Calls are roots, each a trace of its own; the batch links to every fourth.
    assert!(calls.iter().all(|c| c.parent.is_none()));
    let traces: std::collections::HashSet<&str> = calls.iter().map(|c| c.trace.as_str()).collect();
    assert_eq!(traces.len(), 40);
    let linked: Vec<Attr> = batch[0]
        .links
        .iter()
        .map(|(t, s)| {
            assert_eq!(&by_id[s.as_str()].trace, t);
            attr(&by_id[s.as_str()].attrs, "id").cloned().unwrap()
        })
        .collect();
    assert_eq!(
        linked,
        (0..40).step_by(4).map(Attr::Int).collect::<Vec<_>>()
    );
    // The resource: the process as dump names it.
    let pid = dump(dev, false)[0].pid;
    for s in &spans {
        assert_eq!(
            attr(&s.resource, "service.name"),
            Some(&Attr::Str("ttrace-test-spans".into()))
        );
        assert_eq!(
            attr(&s.resource, "process.pid"),
            Some(&Attr::Int(pid.into()))
        );
        assert_eq!(
            attr(&s.resource, "ttrace.device"),
            Some(&Attr::Str(dev.clone()))
        );
        assert!(attr(&s.resource, "host.name").is_some());
    }
}

#[test]
fn every_entry_exit_and_start_stop_pair_is_a_span_at_its_times_with_both_halves_arguments() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = &demo_device_whole(tmp.path());
    let spans = spans(dev, tmp.path());
    let events = dump(dev, true);
    // Per thread and time, the event dump shows there.
    let at: HashMap<(u32, &str), Vec<&Event>> = events.iter().fold(HashMap::new(), |mut m, e| {
        m.entry((e.tid, e.time.as_str())).or_default().push(e);
        m
    });
    let named = |n: &str| {
        events
            .iter()
            .filter(|e| e.text.starts_with(&format!("{n}(")))
            .count()
    };
    let reads: Vec<&Span> = spans.iter().filter(|s| s.name == "file_read").collect();
    let requests: Vec<&Span> = spans.iter().filter(|s| s.name == "request").collect();
    assert_eq!(reads.len(), named("file_read"));
    assert_eq!(requests.len(), named("request_start"));
    assert_eq!(reads.len() + requests.len(), spans.len());
    for (s, begin, end) in reads
        .iter()
        .map(|s| (s, "file_read(", "file_read_done("))
        .chain(
            requests
                .iter()
                .map(|s| (s, "request_start(", "request_done(")),
        )
    {
        let (start, stop) = (
            ttrace_reader::decode::utc(s.start),
            ttrace_reader::decode::utc(s.end),
        );
        // Both halves' arguments: the exit's, where a name repeats, as end.NAME.
        let text = |k: &str| match attr(&s.attrs, k) {
            Some(Attr::Int(i)) => i.to_string(),
            Some(Attr::Str(t)) => t.clone(),
            other => panic!("{k}: {other:?}"),
        };
        // What each half shows: a request's, with its arguments (two threads' events can
        // share a time, so the time alone does not name them).
        let (want_first, want_last) = match s.name.as_str() {
            "request" => (
                Some(format!(
                    "request_start(id={} size={})",
                    text("id"),
                    text("size")
                )),
                Some(format!(
                    "request_done(id={} status={} took_ns={})",
                    text("end.id"),
                    text("status"),
                    text("took")
                )),
            ),
            _ => (None, None),
        };
        let shows = |e: &Event, prefix: &str, want: &Option<String>| match want {
            Some(w) => e.text == *w,
            None => e.text.starts_with(prefix),
        };
        // Its first half at its start, its second at its end, on one thread.
        let halves = events
            .iter()
            .filter(|e| e.time == start && shows(e, begin, &want_first))
            .find_map(|first| {
                let last = at.get(&(first.tid, stop.as_str()))?;
                Some((first, *last.iter().find(|e| shows(e, end, &want_last))?))
            });
        assert!(
            halves.is_some(),
            "{s:?}: no {begin}..) at {start} and {end}..) at {stop} on one thread, with its \
             arguments {want_first:?} {want_last:?}"
        );
    }
    // The message is an event of no span: not sent; the requests' histograms neither.
    assert!(spans.iter().all(|s| s.events.is_empty()));
}

/// The demo's device, every entry kept.
fn demo_device_whole(dir: &Path) -> String {
    let dev = dir.join("whole");
    reader!("demo", "--device", &dev, "--requests", "50").ok();
    dev.to_str().unwrap().to_string()
}

/// A request received: its line, its headers, its body.
type Received = (String, String, Vec<u8>);

/// A one-thread OTLP/HTTP receiver on a loopback port: answers each request `200 OK` and
/// hands back, at the end, each request's line, headers and body.
fn receiver(requests: usize) -> (u16, std::thread::JoinHandle<Vec<Received>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        let mut got = Vec::new();
        for _ in 0..requests {
            let (stream, _) = listener.accept().unwrap();
            let mut r = BufReader::new(stream);
            let (mut line, mut headers) = (String::new(), String::new());
            r.read_line(&mut line).unwrap();
            let mut length = 0;
            loop {
                let mut h = String::new();
                r.read_line(&mut h).unwrap();
                if h == "\r\n" {
                    break;
                }
                if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
                headers.push_str(&h);
            }
            let mut body = vec![0; length];
            r.read_exact(&mut body).unwrap();
            r.get_mut()
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .unwrap();
            got.push((line, headers, body));
        }
        got
    });
    (port, handle)
}

#[test]
fn spans_posted_to_an_otlp_http_receiver_arrive_whole_in_batches() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = &spans_device(tmp.path());
    let want = spans(dev, tmp.path());
    let (port, receiver) = receiver(1);
    let url = format!("http://127.0.0.1:{port}");
    reader!("export", "--otlp-endpoint", &url, dev).ok();
    let got = receiver.join().unwrap();
    let (line, headers, body) = &got[0];
    assert_eq!(line, "POST /v1/traces HTTP/1.1\r\n");
    assert!(
        headers.contains("Content-Type: application/x-protobuf"),
        "{headers}"
    );
    let mut spans = read_proto(body).unwrap();
    spans.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(spans, want);
}

#[test]
fn an_unreachable_otlp_endpoint_fails_in_one_line_after_its_tries() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = &spans_device(tmp.path());
    // A port nothing listens on: one bound, then closed.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/v1/traces");
    let err = reader!("export", "--otlp-endpoint", &url, dev).fails();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("ttrace-reader: --otlp-endpoint {url}: ")),
        "{err}"
    );
    assert!(err.trim_end().ends_with("(after 3 tries)"), "{err}");
    let err = reader!("export", "--otlp-endpoint", "https://collector:4318", dev).fails();
    assert!(err.contains("https is not supported"), "{err}");
}

#[test]
#[ignore = "needs python3 with opentelemetry-proto: pip install opentelemetry-proto"]
fn opentelemetrys_own_protos_read_both_encodings_as_our_reader_does() {
    let tmp = tempfile::tempdir().unwrap();
    for (i, dev) in [spans_device(tmp.path()), demo_device_whole(tmp.path())]
        .iter()
        .enumerate()
    {
        let dir = tmp.path().join(i.to_string());
        std::fs::create_dir(&dir).unwrap();
        let ours = spans(dev, &dir);
        let (pb, jsonl) = (dir.join("t.pb"), dir.join("t.jsonl"));
        let printed = viewer::python("check_otlp.py", "opentelemetry-proto", &[&pb, &jsonl]);
        let official: Vec<serde_json::Value> = serde_json::from_str(&printed).unwrap();
        let value = |a: &Attr| match a {
            Attr::Str(s) => serde_json::json!({ "Str": s }),
            Attr::Int(i) => serde_json::json!({ "Int": i }),
            Attr::Double(d) => serde_json::json!({ "Double": d }),
            Attr::Bool(b) => serde_json::json!({ "Bool": b }),
        };
        let attrs = |a: &[(String, Attr)]| -> serde_json::Value {
            a.iter()
                .map(|(k, v)| serde_json::json!([k, value(v)]))
                .collect()
        };
        let mut mine: Vec<serde_json::Value> = ours
            .iter()
            .map(|s| {
                serde_json::json!({
                    "trace": s.trace, "id": s.id, "parent": s.parent, "name": s.name,
                    "kind": s.kind, "start": s.start, "end": s.end, "attrs": attrs(&s.attrs),
                    "events": s.events.iter().map(|e| serde_json::json!({
                        "ns": e.ns, "name": e.name, "attrs": attrs(&e.attrs)
                    })).collect::<Vec<_>>(),
                    "dropped_events": s.dropped_events,
                    "links": s.links.iter().map(|(t, i)| serde_json::json!([t, i])).collect::<Vec<_>>(),
                    "resource": attrs(&s.resource), "scope": s.scope,
                })
            })
            .collect();
        let mut official = official;
        let key = |v: &serde_json::Value| v["id"].as_str().unwrap().to_string();
        official.sort_by_key(key);
        mine.sort_by_key(key);
        assert_eq!(official, mine);
    }
}
