//! The slow request of a real service, caught with the default sizes: `ttrace-test-service`
//! (axum behind tower-http's `TraceLayer`, an `#[instrument]`ed `work`, `fmt` logging beside
//! ttrace) serves 50,000 requests on loopback, ten of them slow (a 30 ms timer). Every
//! snapshot taken for a slow request — by the program's `trigger`, by a `watch` started
//! before it, by a rule installed with `ctl on` and applied by the program — holds that
//! request whole, with its `request` span's uri, and `report --slowest` names it; the
//! service's own log is complete, whatever ttrace does.
//!
//! Nothing here depends on the machine's speed: the program serves its requests one after
//! another on each connection, and each snapshot is checked for what it says it holds (its
//! trigger's request, or the interval its rule matched), not for a count of what happened
//! around it. A preemption of over 20 ms makes another request slow too: its snapshots are
//! kept and checked like the others (`KEEP`, `MAX_BYTES`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use ttrace_tests::cli::{Cli, Running};
use ttrace_tests::reader;

/// Requests served: ten slow ones among them.
const REQUESTS: u64 = 50_000;
/// One request in this many is slow (`ttrace-test-service`'s `SLOW_EVERY`).
const SLOW_EVERY: u64 = 5000;
/// The span every request's work is done in.
const WORK: &str = "ttrace_test_service::work";
/// The rule the watcher and the installed rules apply.
const RULE: &str = "latency ttrace_test_service::work > 20ms";

/// Snapshot files and bytes kept: every snapshot a run can make.
const KEEP: &str = "1000";
const MAX_BYTES: &str = "64g";

/// How long a line may take before the test gives up (a bound on failure, not a way to
/// order anything).
const PATIENCE: std::time::Duration = std::time::Duration::from_secs(300);

/// The slow requests: ids `SLOW_EVERY / 2`, then every `SLOW_EVERY`.
fn slow_ids() -> BTreeSet<u64> {
    (0..REQUESTS)
        .filter(|id| id % SLOW_EVERY == SLOW_EVERY / 2)
        .collect()
}

/// The service on the device `dev`, serving `requests`, its snapshots into `snaps`, its log
/// into `log`, with every snapshot kept, at the default rate (one per second: the slow
/// requests, several a second, are merged into snapshots or put off, and each keeps its
/// moment however fast the rings turn).
fn service(dev: &Path, mode: &str, requests: u64, snaps: &Path, log: &Path) -> Cli {
    service_with(dev, mode, requests, snaps, log, None)
}

/// [`service`], with the device made of `buffer` bytes (`TTRACE_BUFFER`) where given.
fn service_with(
    dev: &Path,
    mode: &str,
    requests: u64,
    snaps: &Path,
    log: &Path,
    buffer: Option<&str>,
) -> Cli {
    let cli = Cli::new(env!("CARGO_BIN_EXE_ttrace-test-service"));
    let cli = match buffer {
        Some(b) => cli.env("TTRACE_BUFFER", b),
        None => cli,
    };
    cli.arg(dev)
        .arg(mode)
        .arg(requests.to_string())
        .arg(log)
        .env("TTRACE_SNAPSHOT_DIR", snaps)
        .env("TTRACE_SNAPSHOT_KEEP", KEEP)
        .env("TTRACE_SNAPSHOT_BYTES", MAX_BYTES)
        .within(PATIENCE)
}

/// Rings small enough to keep about a tenth of a second of the service's traffic, or less
/// (1 MiB: 4096 slots a ring on 2 CPUs, which ~5 k requests/s of ~15 entries of 64 bytes,
/// the test build's rate on a 2-vCPU VM, fill in about 0.1 s; faster builds and machines
/// sooner), far less than the interval a snapshot may be put off by.
const SMALL_BUFFER: &str = "8m";

/// The ids of the requests the program printed as slow (over 20 ms).
fn printed_slow(stdout: &str) -> BTreeSet<u64> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("slow ")?.parse().ok())
        .collect()
}

/// The snapshot files of `dir`.
fn snapshots(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ttrace"))
        .collect();
    found.sort();
    found
}

/// One `work` instance as `report --slowest` gives it: its id, its request's uri, when it
/// began (as dump shows time) and its lifetime.
#[derive(Debug)]
struct Work {
    id: u64,
    uri: String,
    begin: String,
    lifetime_ns: u64,
}

/// What `report --json` says of the snapshot `file`: the `n` slowest `work` instances whole
/// between `window`'s times (seconds since the device's creation, as dump shows them), if
/// given, and the cause.
fn report(file: &Path, n: usize, window: Option<(f64, f64)>) -> (Vec<Work>, serde_json::Value) {
    let mut cli = reader!(
        "report",
        "--json",
        "--slowest",
        n.to_string(),
        "--name",
        WORK
    );
    if let Some((since, until)) = window {
        cli = cli.args([
            "--since".to_string(),
            format!("{since:.9}"),
            "--until".to_string(),
            format!("{until:.9}"),
        ]);
    }
    let json: serde_json::Value = serde_json::from_str(&cli.arg(file).ok()).unwrap();
    let works = json["slowest"]
        .as_array()
        .unwrap_or_else(|| panic!("{}: no slowest: {json}", file.display()))
        .iter()
        .map(|w| Work {
            id: w["fields"]["id"].as_u64().unwrap(),
            uri: w["ancestors"][0]["fields"]["uri"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            begin: w["begin"].as_str().unwrap().to_string(),
            lifetime_ns: w["lifetime_ns"].as_u64().unwrap(),
        })
        .collect();
    (works, json["snapshot"].clone())
}

/// When the snapshot `file` was triggered and when its last event was written, in seconds
/// since the device's creation: a request whose trigger it holds (its own, or one merged into
/// it while it was pending, however late its copy came) ended between them.
fn extent(file: &Path) -> (f64, f64) {
    let (_, cause) = report(file, 1, None);
    let at: f64 = cause["at"].as_str().unwrap().parse().unwrap();
    let after = cause["last_event_after_ns"].as_u64().unwrap() as f64 / 1e9;
    (at, at + after)
}

/// How many `work` instances of 20 ms or more can end within `seconds`: 8 clients serve one
/// request at a time each, so each ends at most one per 20 ms, and one more that began
/// before.
fn slow_bound(seconds: f64) -> usize {
    8 * ((seconds / 0.02).ceil() as usize + 1)
}

/// How long before a `work` instance's trigger (or its interval's begin) a report reads the
/// snapshot from: `report --since` leaves out what is older, and the instance's `request`
/// span (its uri) began before it, by as long as the task was preempted in between under
/// load (a CI run found a preempted request's `work` with no uri through a 50 ms margin). A
/// second: the window is a bound on what can be slow in it ([`slow_bound`]), never a guess
/// at timing.
const MARGIN_S: f64 = 1.0;

/// What the snapshot `file` holds where a slow request it was taken for can be: the slowest
/// `work` instances whole from [`MARGIN_S`] before its trigger to its last event (its own
/// request, or one whose trigger was merged into it), as many as can be 20 ms or more there
/// ([`slow_bound`]): a slow request of that window is among them by construction.
#[derive(Debug)]
struct Window {
    file: PathBuf,
    works: Vec<Work>,
}

impl Window {
    fn of(file: &Path) -> Window {
        let (at, last) = extent(file);
        let (since, until) = ((at - MARGIN_S).max(0.0), last);
        let (works, _) = report(file, slow_bound(until - since), Some((since, until)));
        Window {
            file: file.to_path_buf(),
            works,
        }
    }

    /// Checks that the window holds the slow request `id` whole (its `work` instance,
    /// lasting `at_least_ns` or more, under its `request` span with uri `/work/<id>`).
    /// Returns the error otherwise.
    fn holds(&self, id: u64, at_least_ns: u64) -> Result<(), String> {
        let (name, works) = (self.file.display(), &self.works);
        match works.iter().find(|w| w.id == id) {
            Some(w) if w.uri == format!("/work/{id}") && w.lifetime_ns >= at_least_ns => Ok(()),
            Some(w) => Err(format!("{name}: request {id} is not whole: {w:?}")),
            None => Err(format!("{name}: no request {id} among {works:?}")),
        }
    }
}

/// Checks a snapshot a rule took: its cause names the matched interval, which is whole in
/// it, and is a slow request's `work` (by its begin time), named with its uri. Found among
/// the slowest instances from [`MARGIN_S`] before the interval (its request's span began
/// before it) to the snapshot's last event, as many as can last over 20 ms there
/// ([`slow_bound`]).
fn holds_its_match(file: &Path) {
    let name = file.display();
    let (_, cause) = report(file, 1, None);
    let (_, last) = extent(file);
    let begin = cause["interval_begin"].as_str().unwrap();
    let since = (begin.parse::<f64>().unwrap() - MARGIN_S).max(0.0);
    let (works, _) = report(file, slow_bound(last - since), Some((since, last)));
    assert_eq!(cause["kind"], "rule", "{name}: {cause}");
    assert!(
        cause["reason"].as_str().unwrap().starts_with(RULE),
        "{name}: {cause}"
    );
    assert_eq!(cause["interval_whole"], true, "{name}: {cause}");
    let w = works
        .iter()
        .find(|w| w.begin == begin)
        .unwrap_or_else(|| panic!("{name}: the matched interval at {begin} is none of {works:?}"));
    assert!(
        w.uri == format!("/work/{}", w.id) && w.lifetime_ns > 20_000_000,
        "{name}: {w:?}"
    );
}

/// Checks that the service's own log holds every request (the fmt layer beside ttrace saw
/// everything): a `work done` line for each id, and `extra` more (a held service's first).
fn log_is_complete(log: &Path, extra: u64) {
    let text = std::fs::read_to_string(log).unwrap();
    let done = text
        .lines()
        .filter(|l| l.contains("ttrace_test_service: work done"))
        .count() as u64;
    assert_eq!(done, REQUESTS + extra, "the service's log lost lines");
    assert!(
        text.lines().any(|l| l.contains(" listening ")),
        "no listening line"
    );
}

#[test]
fn each_slow_request_triggers_a_snapshot_that_holds_it_whole() {
    triggers_keep_each_slow_request(None);
}

/// With rings that keep a tenth of a second, less than the interval a snapshot is put off
/// by: each trigger's window is copied when it happens.
#[test]
fn each_slow_request_is_kept_whole_by_its_trigger_with_small_rings() {
    triggers_keep_each_slow_request(Some(SMALL_BUFFER));
}

fn triggers_keep_each_slow_request(buffer: Option<&str>) {
    let _turn = ttrace_tests::turn("service-trigger");
    let tmp = tempfile::tempdir().unwrap();
    let (dev, snaps, log) = (
        tmp.path().join("dev"),
        tmp.path().join("snapshots"),
        tmp.path().join("log"),
    );
    let ran = service_with(&dev, "trigger", REQUESTS, &snaps, &log, buffer).succeeds();
    let slow = printed_slow(&ran.stdout);
    assert!(slow.is_superset(&slow_ids()), "{}", ran.stdout);
    log_is_complete(&log, 0);
    // Each slow request's snapshot, named for its trigger, holds it whole; a trigger within
    // the `after` window of another's (a request a preemption made slow) is merged into
    // that one's snapshot, which then holds both.
    let files = snapshots(&snaps);
    let windows: Vec<Window> = files.iter().map(|f| Window::of(f)).collect();
    let mut largest: Option<(u64, &Path, u64)> = None;
    for id in slow_ids() {
        let mark = format!("-trigger-slow-request-{id}-");
        let named: Vec<&Window> = windows
            .iter()
            .filter(|w| w.file.to_string_lossy().contains(&mark))
            .collect();
        match named[..] {
            [w] => {
                w.holds(id, 30_000_000).unwrap();
                let len = std::fs::metadata(&w.file).unwrap().len();
                if largest.is_none_or(|(l, _, _)| len > l) {
                    largest = Some((len, &w.file, id));
                }
            }
            [] => held_in_one(&windows, id),
            _ => panic!("request {id}: {named:?}"),
        }
    }
    // The structure of the largest (the fullest device, its most tracks) in Perfetto: the
    // others come from the same export of the same kind of traffic.
    let (_, file, id) = largest.expect("a slow request's own snapshot");
    perfetto_nests(file, id);
    // Every snapshot's slowest request is named with its uri.
    for f in &files {
        let (works, _) = report(f, 1, None);
        assert!(
            works
                .first()
                .is_some_and(|w| w.uri == format!("/work/{}", w.id)),
            "{}: {works:?}",
            f.display()
        );
    }
}

/// The name of the span tower-http's `TraceLayer` makes for each request.
const REQUEST: &str = "tower_http::trace::make_span::request";

/// Exports the snapshot `file` (taken for slow request `id`) to Perfetto and checks the
/// request's structure there: its `work` slice nested under its `request` slice (on the
/// same track, inside its time), a bounded number of tracks for the traffic the snapshot
/// holds (a few dozen, not one per span instance), and a clock snapshot that gives
/// wall-clock time. Returns the exported file.
fn perfetto_nests(file: &Path, id: u64) -> PathBuf {
    use ttrace_tests::perfetto::{Value, REALTIME};
    let out = file.with_extension("pftrace");
    reader!("export", "--format", "perfetto", file, "-o", &out).ok();
    let trace = ttrace_tests::perfetto::read(&std::fs::read(&out).unwrap()).unwrap();
    trace.check_nesting().unwrap();
    assert!(
        trace.snapshots.iter().any(|c| c.primary == Some(REALTIME)),
        "no clock snapshot: {:?}",
        trace.snapshots
    );
    let arg = |i: usize, key: &str| {
        let e = &trace.events[i];
        e.args
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    let slices = trace.slices();
    let work = slices
        .iter()
        .find(|s| {
            let e = &trace.events[s.begin];
            e.kind == 1 && e.name == WORK && arg(s.begin, "id") == Some(Value::Uint(id))
        })
        .unwrap_or_else(|| panic!("{}: no {WORK} slice of id {id}", out.display()));
    let end = |s: &ttrace_tests::perfetto::Slice| s.end.map(|e| trace.events[e].ns);
    let uri = Value::Str(format!("/work/{id}"));
    let parent = work.under.iter().map(|&u| &slices[u]).find(|p| {
        trace.events[p.begin].name == REQUEST && arg(p.begin, "uri") == Some(uri.clone())
    });
    let parent = parent.unwrap_or_else(|| {
        panic!(
            "{}: request {id}'s work slice is under no request slice",
            out.display()
        )
    });
    assert_eq!(parent.track, work.track);
    assert!(
        end(work).is_some() && end(parent) >= end(work),
        "{work:?} {parent:?}"
    );
    // The tracks: the process, its threads and the span lanes: a few dozen.
    let tracks = trace.threads.len() + trace.processes.len() + trace.tracks.len();
    assert!(tracks <= 36, "{tracks} tracks: {:?}", trace.tracks);
    out
}

/// Checks that every slow request is whole in one of `files`.
fn each_slow_request_is_in_one(files: &[PathBuf]) {
    let windows: Vec<Window> = files.iter().map(|f| Window::of(f)).collect();
    for id in slow_ids() {
        held_in_one(&windows, id);
    }
}

/// Checks that the slow request `id` is whole in one of `windows`.
fn held_in_one(windows: &[Window], id: u64) {
    let found: Vec<_> = windows.iter().map(|w| w.holds(id, 30_000_000)).collect();
    assert!(found.iter().any(Result::is_ok), "request {id}: {found:#?}");
}

#[test]
fn a_watcher_started_before_the_service_keeps_each_slow_request() {
    watcher_keeps_each_slow_request(None);
}

/// With rings that keep a tenth of a second: the watcher saves each match from its own copy.
#[test]
fn a_watcher_keeps_each_slow_request_with_small_rings() {
    watcher_keeps_each_slow_request(Some(SMALL_BUFFER));
}

fn watcher_keeps_each_slow_request(buffer: Option<&str>) {
    let _turn = ttrace_tests::turn("service-watch");
    let tmp = tempfile::tempdir().unwrap();
    let (dev, snaps, log) = (
        tmp.path().join("dev"),
        tmp.path().join("snapshots"),
        tmp.path().join("log"),
    );
    let mut watcher = reader!(
        "watch",
        &dev,
        "--wait",
        "--on",
        RULE,
        "-o",
        &snaps,
        "--keep",
        KEEP,
        "--max-bytes",
        MAX_BYTES
    )
    .start();
    watcher.until("the waiting line", PATIENCE, |l| {
        l.starts_with("# waiting for ")
    });
    // The service answers one request, then waits until the watcher follows its device.
    let unused = tmp.path().join("unused");
    let program = service_with(&dev, "none", REQUESTS, &unused, &log, buffer);
    let seen = Running::run_watched(program, &mut watcher, PATIENCE);
    let slow = printed_slow(&seen.join("\n"));
    assert!(slow.is_superset(&slow_ids()), "{seen:#?}");
    log_is_complete(&log, 1);
    let files = watcher.stop_watch(PATIENCE);
    for f in &files {
        holds_its_match(f);
    }
    each_slow_request_is_in_one(&files);
}

#[test]
fn rules_installed_with_ctl_keep_each_slow_request() {
    rules_keep_each_slow_request(None);
}

/// With rings that keep a tenth of a second: each match's window is copied when the rule
/// matches, its interval whole.
#[test]
fn rules_installed_with_ctl_keep_each_slow_request_with_small_rings() {
    rules_keep_each_slow_request(Some(SMALL_BUFFER));
}

fn rules_keep_each_slow_request(buffer: Option<&str>) {
    let _turn = ttrace_tests::turn("service-rules");
    let tmp = tempfile::tempdir().unwrap();
    let (dev, snaps, log) = (
        tmp.path().join("dev"),
        tmp.path().join("snapshots"),
        tmp.path().join("log"),
    );
    // Installed before the program runs (ctl creates the device, with the sizes asked).
    let ctl = reader!("ctl", &dev, "on", RULE);
    let ctl = match buffer {
        Some(b) => ctl.env("TTRACE_BUFFER", b),
        None => ctl,
    }
    .ok();
    assert!(ctl.lines().any(|l| l == format!("on {RULE}")), "{ctl}");
    let ran = service_with(&dev, "rules", REQUESTS, &snaps, &log, buffer).succeeds();
    let slow = printed_slow(&ran.stdout);
    assert!(slow.is_superset(&slow_ids()), "{}", ran.stdout);
    log_is_complete(&log, 0);
    let files = snapshots(&snaps);
    for f in &files {
        holds_its_match(f);
    }
    each_slow_request_is_in_one(&files);
}

/// The same snapshot's Perfetto export read by Perfetto's own schema (`perfetto_trace_pb2`,
/// through `tests/python/check_perfetto.py`): the slow request's `work` slice begins on the
/// track its `request` slice holds, inside it.
#[test]
#[ignore = "needs python3 with perfetto protobuf: pip install perfetto protobuf (TTRACE_PYTHON names the python)"]
fn perfettos_own_schema_reads_the_slow_request_nested() {
    let _turn = ttrace_tests::turn("service-perfetto");
    let tmp = tempfile::tempdir().unwrap();
    let (dev, snaps, log) = (
        tmp.path().join("dev"),
        tmp.path().join("snapshots"),
        tmp.path().join("log"),
    );
    // One slow request: the first.
    let ran = service(&dev, "trigger", SLOW_EVERY / 2 + 100, &snaps, &log).succeeds();
    let id = SLOW_EVERY / 2;
    assert!(printed_slow(&ran.stdout).contains(&id), "{}", ran.stdout);
    let mark = format!("-trigger-slow-request-{id}-");
    let file = snapshots(&snaps)
        .into_iter()
        .find(|p| p.to_string_lossy().contains(&mark))
        .expect("its snapshot");
    let out = perfetto_nests(&file, id);
    let printed = ttrace_tests::viewer::python("check_perfetto.py", "perfetto protobuf", &[&out]);
    let events: Vec<serde_json::Value> = serde_json::from_str(&printed).unwrap();
    let has = |e: &serde_json::Value, key: &str, value: serde_json::Value| {
        e["args"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a[0] == key && a[1] == value)
    };
    let begin = |name: &str, key: &str, value: serde_json::Value| {
        events
            .iter()
            .find(|e| e["kind"] == 1 && e["name"] == name && has(e, key, value.clone()))
            .unwrap_or_else(|| panic!("no {name} with {key}"))
    };
    let work = begin(WORK, "id", serde_json::json!({ "Uint": id }));
    let request = begin(
        REQUEST,
        "uri",
        serde_json::json!({ "Str": format!("/work/{id}") }),
    );
    assert_eq!(work["track"], request["track"]);
    assert!(request["ns"].as_u64() <= work["ns"].as_u64());
}
