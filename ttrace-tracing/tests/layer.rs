//! The layer in a real process: one device and one global subscriber for all the tests of
//! this file (each test uses targets of its own), read back with `ttrace-reader`'s decoder.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use tracing::{debug, info, info_span, instrument};
use tracing_subscriber::prelude::*;

/// The device, installed once with the layer as the global subscriber.
fn dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        ttrace_core::init(&ttrace_core::Config {
            ring_slots: 1 << 14,
            cpus: Some(2),
            calibration: std::time::Duration::from_millis(2),
            ..ttrace_core::Config::at(tmp.path().join("dev"))
        })
        .unwrap();
        tracing_subscriber::registry()
            .with(ttrace_tracing::layer())
            .init();
        // `init` installs it already when tracing-subscriber's `tracing-log` feature is on
        // (another crate of the build may turn it on): either way, one is installed.
        let _ = tracing_log::LogTracer::init();
        tmp
    })
    .path()
}

fn device() -> PathBuf {
    dir().join("dev")
}

/// `dump`'s event lines that contain `needle`.
fn dumped(needle: &str) -> Vec<String> {
    let dev = devttrace::Reader::open(device()).unwrap();
    ttrace_reader::decode::text(&dev)
        .unwrap()
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_string)
        .collect()
}

#[derive(Debug)]
#[allow(dead_code)] // read through Debug
struct Big {
    name: String,
    values: Vec<u32>,
}

#[instrument(target = "typed", fields(depth = 1))]
fn work(job: u64, label: &str) -> u64 {
    info!(target: "typed", job, "working");
    job * 2
}

#[test]
fn values_of_every_type_from_several_threads_show_in_dump() {
    dir();
    let before = ttrace_tracing::stats().debug_truncated;
    std::thread::scope(|s| {
        for t in 0..3u64 {
            s.spawn(move || {
                for i in 0..10u64 {
                    let small = Big {
                        name: format!("b{t}"),
                        values: vec![1, 2],
                    };
                    info!(
                        target: "typed",
                        thread = t,
                        i,
                        neg = -(i as i64) - 1,
                        ratio = i as f64 / 4.0,
                        odd = i % 2 == 1,
                        path = "/srv/a",
                        small = ?small,
                        "event {i} of {t}"
                    );
                    work(t * 100 + i, "lbl");
                }
            });
        }
    });
    let big = Big {
        name: "x".repeat(50),
        values: (0..200).collect(),
    };
    info!(target: "typed", big = ?big, "big");
    let lines = dumped("typed::");
    let events: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("message=\"event "))
        .collect();
    assert_eq!(events.len(), 30);
    let line = events
        .iter()
        .find(|l| l.contains("message=\"event 3 of 1\""))
        .unwrap();
    for part in [
        "thread=1",
        " i=3",
        "neg=-4",
        "ratio=0.75",
        "odd=true",
        "path=\"/srv/a\"",
        "small=\"Big { name: \\\"b1\\\", values: [1, 2] }\"",
    ] {
        assert!(line.contains(part), "{part} in {line}");
    }
    // Spans: the instance's new with the fields (those of the function, and declared
    // ones), its enter, the event inside, its exit and its close, each marked, the level
    // first.
    let at = |what: &str| {
        lines
            .iter()
            .position(|l| l.contains(what) && l.contains("job=105"))
    };
    let new = lines
        .iter()
        .position(|l| {
            l.contains(" INFO typed::work new(span=0x")
                && l.ends_with(" job=105 label=\"lbl\" depth=1)")
        })
        .expect("the span's new");
    let span = lines[new]
        .split("span=")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap();
    let step = |what: &str| {
        lines
            .iter()
            .position(|l| l.ends_with(&format!(" INFO typed::work {what}(span={span})")))
            .unwrap_or_else(|| panic!("its {what} in {lines:#?}"))
    };
    let inside = at("message=\"working\"").expect("the event inside");
    assert!(
        lines[inside].contains("message=\"working\""),
        "{}",
        lines[inside]
    );
    assert!(new < step("enter") && step("enter") < inside);
    assert!(inside < step("exit") && step("exit") < step("close"));
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains("typed::work enter("))
            .count(),
        30
    );
    // The big Debug value: cut, marked, counted.
    let big = lines
        .iter()
        .find(|l| l.contains("message=\"big\""))
        .unwrap();
    assert!(big.contains("…\""), "{big}");
    assert!(ttrace_tracing::stats().debug_truncated > before);
}

#[test]
fn span_entries_and_exits_export_as_slices() {
    dir();
    for i in 0..5u64 {
        let span = info_span!(target: "slices", "outer", i);
        let _e = span.enter();
        let inner = info_span!(target: "slices", "inner");
        inner.in_scope(|| info!(target: "slices", i, "inside"));
    }
    let dev = devttrace::Reader::open(device()).unwrap();
    let view = devttrace::View::of(&dev, 0).unwrap();
    let filter = ttrace_reader::merge::Filter {
        name: Some("slices::*".into()),
        ..Default::default()
    };
    let mut json = Vec::new();
    ttrace_reader::export::chrome::write(
        (&view).into(),
        &view.cpus,
        ttrace_reader::merge::Merge::view(&view, &filter),
        &mut json,
        |_| {},
    )
    .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let slices: Vec<&serde_json::Value> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .collect();
    // Each instance is an async slice with its fields, its one scope a slice inside.
    let named = |n: &str| slices.iter().filter(|e| e["name"] == n).count();
    assert_eq!((named("slices::outer"), named("slices::inner")), (5, 5));
    let begins: Vec<&serde_json::Value> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "b" && e["cat"] == "span")
        .collect();
    assert_eq!(begins.len(), 10);
    assert!(begins
        .iter()
        .any(|e| e["name"] == "slices::outer" && e["args"]["i"] == 4));
    // The events inside are instants of their level.
    assert!(v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["ph"] == "i" && e["cat"] == "info" && e["args"]["message"] == "inside"));
}

#[test]
fn ctl_switches_levels_and_names_in_a_running_process() {
    dir();
    // Another mapping of the device, as `ttrace-reader ctl` would open it.
    let control = devttrace::Device::attach(&device()).unwrap();
    let ctl = |command: &str| {
        control.apply_text(command).unwrap();
        // What the layer's thread does within its poll of the control generation.
        ttrace_tracing::sync_interest();
    };
    let round = |r: u64| {
        info!(target: "ctl_a", r, "info a");
        debug!(target: "ctl_a", r, "debug a");
        info!(target: "ctl_b", r, "info b");
    };
    round(0);
    ctl("level info");
    round(1);
    ctl("disable ctl_b::*");
    round(2);
    ctl("enable DEBUG");
    ctl("enable ctl_b::*");
    round(3);
    ctl("disable DEBUG");
    round(4);
    ctl("level trace");
    round(5);
    let seen = |what: &str| -> Vec<u64> {
        dumped(&format!("message=\"{what}\""))
            .iter()
            .map(|l| l.split(" r=").nth(1).unwrap()[..1].parse().unwrap())
            .collect()
    };
    assert_eq!(seen("info a"), [0, 1, 2, 3, 4, 5]);
    assert_eq!(seen("debug a"), [0, 3, 5]);
    assert_eq!(seen("info b"), [0, 1, 3, 4, 5]);
}

/// Counts its calls: a field's value that `tracing` computes only for a callsite of
/// interest.
fn counted(calls: &std::sync::atomic::AtomicU64) -> u64 {
    calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
}

#[test]
fn a_callsite_ctl_disables_is_skipped_by_tracing_until_ctl_enables_it() {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    static CALLS: AtomicU64 = AtomicU64::new(0);
    dir();
    let control = devttrace::Device::attach(&device()).unwrap();
    let event = || info!(target: "interest", n = counted(&CALLS), "costly");
    event();
    assert_eq!(CALLS.load(Relaxed), 1);
    control.apply_text("disable interest::*").unwrap();
    ttrace_tracing::sync_interest();
    // Of no interest: `tracing` does not even compute its fields.
    event();
    assert_eq!(CALLS.load(Relaxed), 1);
    control.apply_text("enable interest::*").unwrap();
    ttrace_tracing::sync_interest();
    event();
    assert_eq!(CALLS.load(Relaxed), 2);
    let recorded: Vec<String> = dumped("message=\"costly\"");
    assert_eq!(recorded.len(), 2, "{recorded:?}");
    assert!(recorded[1].ends_with(" n=2)"), "{}", recorded[1]);
}

#[test]
fn a_callsite_with_more_than_twelve_fields_counts_what_it_drops() {
    dir();
    let before = ttrace_tracing::stats().fields_dropped;
    info!(
        target: "wide",
        f0 = 0u64, f1 = 1u64, f2 = 2u64, f3 = 3u64, f4 = 4u64, f5 = 5u64, f6 = 6u64,
        f7 = 7u64, f8 = 8u64, f9 = 9u64, f10 = 10u64, f11 = 11u64, f12 = 12u64, f13 = 13u64
    );
    let lines = dumped("wide::");
    assert_eq!(lines.len(), 1);
    assert!(
        lines[0].ends_with(
            "(f0=0 f1=1 f2=2 f3=3 f4=4 f5=5 f6=6 f7=7 f8=8 f9=9 f10=10 dropped_fields=3)"
        ),
        "{}",
        lines[0]
    );
    assert!(ttrace_tracing::stats().fields_dropped >= before + 3);
}

#[test]
fn log_records_arrive_through_tracing_log() {
    dir();
    log::warn!(target: "legacy", "disk {} is {}% full", "sda", 91);
    let lines = dumped("disk sda is 91% full");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("log.target=\"legacy\""), "{}", lines[0]);
}

#[test]
fn two_processes_share_a_device_each_event_its_writer() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = tmp.path().join("dev");
    // The example's binary, built next to this test's.
    let exe = std::env::current_exe().unwrap();
    let server = exe
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("examples")
        .join("server");
    assert!(
        server.exists(),
        "{} (cargo builds examples with the tests)",
        server.display()
    );
    let pids: Vec<u32> = (0..2)
        .map(|_| {
            let child = std::process::Command::new(&server)
                .arg(&dev)
                .arg("5")
                .spawn()
                .unwrap();
            let pid = child.id();
            assert!(child.wait_with_output().unwrap().status.success());
            pid
        })
        .collect();
    let reader = devttrace::Reader::open(&dev).unwrap();
    let meta = reader.metadata();
    let mut handle: Vec<devttrace::Role> = meta
        .tracepoints
        .iter()
        .filter(|t| t.name == "server::handle")
        .map(|t| t.role)
        .collect();
    handle.dedup();
    assert_eq!(
        handle.len(),
        5,
        "new, enter, exit, close, follows, each once, shared by both processes: {handle:?}"
    );
    let text = ttrace_reader::decode::text(&reader).unwrap();
    for pid in pids {
        let done = text
            .lines()
            .filter(|l| l.contains(&format!(" {pid}/")) && l.contains("message=\"request done\""))
            .count();
        assert_eq!(done, 10, "pid {pid}: 2 workers x 5 requests");
    }
}

/// The uftrace export of spans: calls nested as the spans were, so that `uftrace replay`
/// shows the call tree (read here with the test suite's uftrace reader).
#[test]
fn spans_export_to_uftrace_as_a_call_tree() {
    dir();
    std::thread::Builder::new()
        .name("calltree".into())
        .spawn(|| {
            let outer = info_span!(target: "tree", "outer");
            let _o = outer.enter();
            info_span!(target: "tree", "inner").in_scope(|| {
                info!(target: "tree", "leaf");
            });
        })
        .unwrap()
        .join()
        .unwrap();
    let dev = devttrace::Reader::open(device()).unwrap();
    let view = devttrace::View::of(&dev, 0).unwrap();
    let filter = ttrace_reader::merge::Filter {
        name: Some("tree::*".into()),
        ..Default::default()
    };
    let out = tempfile::tempdir().unwrap();
    let data_dir = out.path().join("uftrace.data");
    ttrace_reader::export::uftrace::write(
        (&view).into(),
        &view.cpus,
        ttrace_reader::merge::Merge::view(&view, &filter),
        &data_dir,
        |_| {},
    )
    .unwrap();
    let data = ttrace_tests::uftrace::read(&data_dir).unwrap();
    assert_eq!(data.threads.len(), 1);
    let calls: Vec<(String, u32, &str)> = data
        .threads
        .values()
        .next()
        .unwrap()
        .iter()
        .map(|r| {
            let kind = match r.kind {
                ttrace_tests::uftrace::Kind::Entry(_) => "entry",
                ttrace_tests::uftrace::Kind::Exit => "exit",
                _ => "lost",
            };
            (r.name.clone(), r.depth, kind)
        })
        .collect();
    let names: Vec<(&str, u32, &str)> =
        calls.iter().map(|(n, d, k)| (n.as_str(), *d, *k)).collect();
    // Each span's enter and exit a call; its new and close, and the event, calls of their
    // point functions where they happened.
    let call = |name, depth| [(name, depth, "entry"), (name, depth, "exit")];
    // The event's point, named by its message.
    let leaf = "ttrace:tree::leaf";
    let expected: Vec<(&str, u32, &str)> = [
        call("ttrace:tree::outer_new", 0).as_slice(),
        &[("tree::outer", 0, "entry")],
        &call("ttrace:tree::inner_new", 1),
        &[("tree::inner", 1, "entry")],
        &call(leaf, 2),
        &[("tree::inner", 1, "exit")],
        &call("ttrace:tree::inner_close", 1),
        &[("tree::outer", 0, "exit")],
        &call("ttrace:tree::outer_close", 0),
    ]
    .concat();
    assert_eq!(names, expected);
}

/// A callsite as a crate from the registry has it: its event has no name of its own, and
/// `tracing` names it by its file as the compiler saw it, an absolute path of the machine
/// that built it, and its line.
struct RegistryCrate;

/// Where cargo unpacks a registry crate.
const REGISTRY_FILE: &str = "/home/builder/.cargo/registry/src/index.crates.io-6f17d22bba15001f/hyper-1.4.1/src/proto/h1/conn.rs";

static REGISTRY_META: tracing_core::Metadata<'static> = tracing_core::Metadata::new(
    "event /home/builder/.cargo/registry/src/index.crates.io-6f17d22bba15001f/hyper-1.4.1/src/proto/h1/conn.rs:369",
    "hyper::proto::h1::conn",
    tracing_core::Level::INFO,
    Some(REGISTRY_FILE),
    Some(369),
    Some("hyper::proto::h1::conn"),
    tracing_core::field::FieldSet::new(
        &["message"],
        tracing_core::identify_callsite!(&REGISTRY_CRATE),
    ),
    tracing_core::metadata::Kind::EVENT,
);

static REGISTRY_CRATE: RegistryCrate = RegistryCrate;

impl tracing_core::Callsite for RegistryCrate {
    fn set_interest(&self, _: tracing_core::Interest) {}
    fn metadata(&self) -> &tracing_core::Metadata<'_> {
        &REGISTRY_META
    }
}

#[test]
fn no_name_holds_a_path_or_a_line() {
    dir();
    tracing_core::callsite::register(&REGISTRY_CRATE);
    let message = REGISTRY_META.fields().field("message").unwrap();
    let bytes = 512;
    let text = format_args!("flushed {bytes} bytes");
    tracing_core::Event::dispatch(
        &REGISTRY_META,
        &REGISTRY_META
            .fields()
            .value_set(&[(&message, Some(&text as &dyn tracing::Value))]),
    );
    // Named by its message's words up to its first value: the same on every machine, and
    // after any edit of the file.
    let lines = dumped("message=\"flushed 512 bytes\"");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains(" INFO hyper::proto::h1::conn::flushed(message="),
        "{}",
        lines[0]
    );
    // And no other name of the device holds a path or a line either.
    info!(target: "paths", "an event without a name");
    let dev = devttrace::Reader::open(device()).unwrap();
    let here = env!("CARGO_MANIFEST_DIR");
    for t in dev.metadata().tracepoints {
        assert!(
            !t.name.contains(here)
                && !t.name.contains("/home/")
                && !t.name.contains("::/")
                && !t.name.contains(".rs"),
            "{}",
            t.name
        );
    }
    assert_eq!(dumped(" INFO paths::an_event_without_a(").len(), 1);
}

#[derive(Debug)]
struct Addr;

#[test]
fn events_are_named_by_their_message_and_spans_by_their_name() {
    dir();
    let addr = "127.0.0.1:8080";
    info!(target: "named", "started processing request");
    info!(target: "named", "listening on {}", addr);
    info!(target: "named", "listening on {:?}", Addr);
    info!(target: "named", "{} connected", addr);
    info!(target: "named", n = 3u64);
    info!(name: "explicit", target: "named", n = 4u64, "a message");
    info_span!(target: "named", "a span", n = 5u64).in_scope(|| {});
    let dev = devttrace::Reader::open(device()).unwrap();
    let names: Vec<(String, devttrace::Role)> = dev
        .metadata()
        .tracepoints
        .iter()
        .filter(|t| t.name.starts_with("named::"))
        .map(|t| (t.name.to_string(), t.role))
        .collect();
    use devttrace::Role::*;
    let expected = [
        // Neither a message that starts with a value nor none at all gives a word: both
        // are `event` (one name, the fields apart: two tracepoints).
        ("named::a_span", SpanNew),
        ("named::a_span", SpanEnter),
        ("named::a_span", SpanExit),
        ("named::a_span", SpanClose),
        ("named::a_span", SpanFollows),
        ("named::event", Event),
        ("named::event", Event),
        ("named::explicit", Event),
        // Two callsites, one name (and format): one tracepoint.
        ("named::listening_on", Event),
        ("named::started_processing_request", Event),
    ];
    let mut got: Vec<(&str, devttrace::Role)> =
        names.iter().map(|(n, r)| (n.as_str(), *r)).collect();
    got.sort_by_key(|(n, r)| (*n, format!("{r:?}")));
    let mut want = expected.to_vec();
    want.sort_by_key(|(n, r)| (*n, format!("{r:?}")));
    assert_eq!(got, want);
    let lines = dumped(" INFO named::");
    assert_eq!(lines.len(), 10, "{lines:#?}");
    assert!(lines
        .iter()
        .any(|l| l.contains(" INFO named::listening_on(message=\"listening on Addr\")")));
}

#[test]
fn a_rule_applies_to_an_event_named_by_its_message_from_its_first_event() {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    static CALLS: AtomicU64 = AtomicU64::new(0);
    dir();
    let control = devttrace::Device::attach(&device()).unwrap();
    control.apply_text("disable first_event::quiet*").unwrap();
    ttrace_tracing::sync_interest();
    let quiet = || info!(target: "first_event", n = counted(&CALLS), "quiet please");
    let loud = || info!(target: "first_event", "loud noise");
    // Its first event names it: until then its interest was its level's, so `tracing`
    // computes its fields, but the rule keeps it out of the device.
    quiet();
    loud();
    assert_eq!(CALLS.load(Relaxed), 1);
    // From the next rebuild of the interest cache on (the layer's thread has it done
    // within its poll; at once here), `tracing` skips it.
    ttrace_tracing::sync_interest();
    quiet();
    loud();
    assert_eq!(CALLS.load(Relaxed), 1);
    assert!(dumped("first_event::quiet").is_empty());
    assert_eq!(dumped(" INFO first_event::loud_noise(").len(), 2);
    // And `ctl` turns it on by its name.
    control
        .apply_text("enable first_event::quiet_please")
        .unwrap();
    ttrace_tracing::sync_interest();
    quiet();
    assert_eq!(CALLS.load(Relaxed), 2);
    let recorded = dumped(" INFO first_event::quiet_please(");
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert!(recorded[0].contains("n=2"), "{}", recorded[0]);
}

#[test]
fn each_step_of_many_live_spans_is_recorded_under_its_own_name() {
    dir();
    // More live spans than the layer's table of span ids has entries (4096): some share
    // one, and a step of a span whose entry another took finds it in the registry instead.
    let spans: Vec<tracing::Span> = (0..4500u64)
        .map(|i| match i % 2 {
            0 => info_span!(target: "many", "even", i),
            _ => info_span!(target: "many", "odd", i),
        })
        .collect();
    // Each closes (a step looked up by id): 9,000 events, which the rings keep.
    drop(spans);
    // Every step of one id is of one name: the name of the span's `new`.
    let mut names: std::collections::HashMap<String, std::collections::HashSet<String>> =
        Default::default();
    let lines = dumped("many::");
    for l in &lines {
        let name = if l.contains("many::even") {
            "even"
        } else {
            "odd"
        };
        let id = l
            .split(|c: char| c == '(' || c == ')' || c.is_whitespace())
            .find_map(|w| w.strip_prefix("span="))
            .unwrap_or_else(|| panic!("no id in {l}"));
        names.entry(id.to_string()).or_default().insert(name.into());
    }
    assert_eq!(lines.len(), 4500 * 2, "{:?}", &lines[..8.min(lines.len())]);
    assert_eq!(names.len(), 4500);
    let mixed: Vec<_> = names.iter().filter(|(_, n)| n.len() > 1).collect();
    assert!(
        mixed.is_empty(),
        "{} ids with two names: {:?}",
        mixed.len(),
        &mixed[..3.min(mixed.len())]
    );
}

/// An event's strings each show in their own field, in order, past a field not recorded
/// (its words compacted) and with numbers between them, a string of 3,000 bytes whole; a
/// span's `record`s of a field, a string then a number, show each.
#[test]
fn an_events_strings_each_show_in_their_own_field() {
    dir();
    let long = "L".repeat(3000);
    let long_str: &str = &long;
    info!(
        target: "strings",
        skipped = tracing::field::Empty,
        method = "GET",
        n = 7u64,
        path = "/work/1",
        detail = ?("x", 2),
        "request {} done",
        42
    );
    info!(target: "strings", first = "a", long = long_str, last = "z", "long");
    let span = info_span!(target: "strings", "rec", v = tracing::field::Empty);
    span.record("v", "text");
    span.record("v", 5u64);
    drop(span);

    let lines = dumped("strings::");
    let request = lines
        .iter()
        .find(|l| l.contains("message=\"request 42 done\""))
        .unwrap_or_else(|| panic!("{lines:#?}"));
    for part in [
        "skipped=<unset>",
        "method=\"GET\"",
        " n=7",
        "path=\"/work/1\"",
        "detail=\"(\\\"x\\\", 2)\"",
    ] {
        assert!(request.contains(part), "{part} in {request}");
    }
    let long_line = lines
        .iter()
        .find(|l| l.contains("message=\"long\""))
        .unwrap_or_else(|| panic!("{lines:#?}"));
    assert!(long_line.contains("first=\"a\""), "{long_line}");
    assert!(
        long_line.contains(&format!("long=\"{long}\"")),
        "{long_line}"
    );
    assert!(long_line.contains("last=\"z\""), "{long_line}");
    let records: Vec<&String> = lines.iter().filter(|l| l.contains("rec record(")).collect();
    assert_eq!(records.len(), 2, "{lines:#?}");
    assert!(records[0].ends_with(" v=\"text\")"), "{}", records[0]);
    assert!(records[1].ends_with(" v=5)"), "{}", records[1]);
}
