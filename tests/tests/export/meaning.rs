//! Every reader means the same by the events: on three devices, `report`, the rule matcher
//! and the model they both render (`ttrace_model::model`) give the same intervals (name,
//! begin, duration; a pair's or a span instance's, new to close) and `report` and the model
//! the same unpaired events by reason and the same polls and drop re-entries; the Chrome
//! export the same intervals, unpaired events by reason and polls. Each reader is read back
//! from what it gives its user: `report`'s slowest list (every interval, with `--slowest` as
//! large as the trace), the matcher's fired rules (`latency NAME > 0ns` per pair name: an
//! interval of zero nanoseconds fires nothing, so those are left out of every set), Chrome's
//! JSON: complete slices (calls, polls), async slices (start/stop pairs named by their stem,
//! span instances without `open` or `"whole":false`), and the unpaired: instants whose
//! `unpaired` argument says `before the horizon`, async `unpaired` slices whose `why`
//! argument is the model's reason. Chrome writes times in microseconds to the nanosecond,
//! so an async slice's length is the difference of its ends' times. The OTLP export's spans
//! give the same intervals (in Unix time; its unpaired events have no place in OTLP).
//!
//! The Perfetto export, read back with `ttrace_tests::perfetto`: the same intervals (slices
//! on thread tracks of the category `entry` are calls, other slices there polls; slices on
//! async tracks are stem pairs and span instances, named by their stem, their length the
//! difference of their ends' times), the same polls and drop re-entries (the `drop`
//! instants, two each), and the same unpaired events: the `unpaired` instants by their
//! `why` argument; what the model leaves open at the end (or when its thread ended) is a
//! slice Perfetto shows not ended, which cannot say which of the two: those are compared as
//! one count. The uftrace export, read back with `ttrace_tests::uftrace` (its records paired
//! per thread by depth as uftrace pairs them): uftrace has calls only, no stem pairs, and no
//! place for a reason, so the calls' intervals are compared, the polls (calls of a span's
//! function), the drop re-entries (calls of its `_enter` point function), and of the
//! unpaired entries and exits those it can tell apart: before the horizon (calls of their
//! point functions), an exit with no entry (an EXIT with nothing open on its thread), and
//! entries left open (never exited) as one count.
//!
//! The devices: (a) the demo workload (`ttrace-reader demo`) with more requests than its
//! rings hold, so that entries are lost and a horizon applies; (b) `ttrace-test-handoff`,
//! `tracing` futures polled on two threads, each dropped after its last poll (the drop
//! re-entry); (c) start/stop pairs of one stem overlapping on a thread, and a thread id the
//! kernel gave again, written directly.
//!
//! `dump --spans` renders the model too (the polls a thread is in), tested in
//! `tests/cli/spans.rs` against the truth its program knew; the CTF export shows events,
//! not pairs: neither is compared here.

use devttrace::Role;
use devttrace::{Follower, Reader, View};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use ttrace_core::{Config, Kind, Writer};
use ttrace_layouts::device::ClockSource;
use ttrace_model::model::{Model, Step, Why};
use ttrace_reader::merge::{Filter, Item, Merge};
use ttrace_tests::{define_kind, reader};

/// An interval: its name, when it began (ns since the device was created), how long.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Interval {
    name: String,
    begin_ns: i64,
    ns: u64,
}

/// What one reader means by a trace.
#[derive(Debug, Default, PartialEq, Eq)]
struct Meaning {
    intervals: BTreeSet<Interval>,
    /// Unpaired entries, exits, starts and stops, by reason.
    unpaired: BTreeMap<Why, u64>,
    /// Polls and drop re-entries of the span instances measured.
    polls: u64,
    drops: u64,
    /// The intervals as Chrome can show them: named by their stem, an async slice's length
    /// the difference of its ends' times (ns since the device was created).
    chrome: BTreeSet<Interval>,
    /// The intervals as OTLP shows them: named by their stem, begun at a Unix time in ns,
    /// their length the difference of their ends' times.
    otlp: BTreeSet<Interval>,
    /// The intervals as Perfetto shows them: named by their stem, their length the
    /// difference of their ends' times (ns since the device was created).
    perfetto: BTreeSet<Interval>,
    /// The calls' intervals as uftrace shows them (as [`Meaning::perfetto`]'s).
    uftrace: BTreeSet<Interval>,
    /// Unpaired entries and exits (of calls), by reason.
    unpaired_calls: BTreeMap<Why, u64>,
}

/// What an export can tell of unpaired events: before the horizon, a partner missing, and
/// left open (at the end, or when its thread ended: one count).
fn told(unpaired: &BTreeMap<Why, u64>) -> BTreeMap<&'static str, u64> {
    let mut out = BTreeMap::new();
    for (&why, &n) in unpaired {
        let key = match why {
            Why::BeforeHorizon | Why::PartnerMissing => why.name(),
            _ => "left open",
        };
        *out.entry(key).or_default() += n;
    }
    out
}

/// `name` without a start's suffix (`job_start`: `job`), as Chrome names a start/stop pair.
fn stem(name: &str) -> String {
    ttrace_model::pairs::stem(name, Kind::Start).to_string()
}

/// The sets' difference, readable: what each has that the other has not.
fn same<T: Ord + std::fmt::Debug>(what: &str, a: (&str, &BTreeSet<T>), b: (&str, &BTreeSet<T>)) {
    let only_a: Vec<&T> = a.1.difference(b.1).collect();
    let only_b: Vec<&T> = b.1.difference(a.1).collect();
    assert!(
        only_a.is_empty() && only_b.is_empty(),
        "{what}: only in {}: {only_a:#?}\nonly in {}: {only_b:#?}",
        a.0,
        b.0
    );
}

/// The model's own steps over every event of `view`.
fn of_model(view: &View<'_>) -> Meaning {
    let clock = view.version.clock;
    let meta = &view.meta;
    let mut m = Meaning::default();
    let name = |e: &devttrace::Event| {
        meta.tracepoints[e.type_word.tracepoint() as usize]
            .name
            .clone()
    };
    let mut render = |step: Step<&devttrace::Event>| {
        let interval = |begin: &devttrace::Event, end: u64| Interval {
            name: name(begin),
            begin_ns: clock.since_anchor_ns(begin.stamp),
            ns: clock.ticks_to_ns(end.saturating_sub(begin.stamp)),
        };
        // An async slice in Chrome: its length from its ends' times.
        let by_ends = |begin: &devttrace::Event, end: u64| Interval {
            name: stem(&name(begin)),
            begin_ns: clock.since_anchor_ns(begin.stamp),
            ns: (clock.since_anchor_ns(end) - clock.since_anchor_ns(begin.stamp)) as u64,
        };
        let unix = |begin: &devttrace::Event, end: u64| Interval {
            name: stem(&name(begin)),
            begin_ns: clock.realtime_ns(begin.stamp) as i64,
            ns: clock.realtime_ns(end) - clock.realtime_ns(begin.stamp),
        };
        match step {
            Step::CallEnd { begin, end, .. } => {
                m.intervals.insert(interval(begin, end.stamp));
                m.chrome.insert(interval(begin, end.stamp));
                m.otlp.insert(unix(begin, end.stamp));
                m.perfetto.insert(by_ends(begin, end.stamp));
                m.uftrace.insert(by_ends(begin, end.stamp));
            }
            Step::StemEnd { begin, end, .. } => {
                m.intervals.insert(interval(begin, end.stamp));
                m.chrome.insert(by_ends(begin, end.stamp));
                m.otlp.insert(unix(begin, end.stamp));
                m.perfetto.insert(by_ends(begin, end.stamp));
            }
            Step::SpanEnd(i) => {
                if let (Some(new), Some(close), true) = (i.new, i.close, i.whole) {
                    m.intervals.insert(interval(&new, close));
                    m.chrome.insert(by_ends(&new, close));
                    m.otlp.insert(unix(&new, close));
                    m.perfetto.insert(by_ends(&new, close));
                    m.polls += i.polls.len() as u64;
                    m.drops += i.dropped.is_some() as u64;
                }
            }
            Step::Unpaired { event, why } => {
                let t = &meta.tracepoints[event.type_word.tracepoint() as usize];
                if !t.role.is_span() {
                    *m.unpaired.entry(why).or_default() += 1;
                }
                if t.role == Role::Point && matches!(t.kind, Kind::Entry | Kind::Exit) {
                    *m.unpaired_calls.entry(why).or_default() += 1;
                }
            }
            _ => {}
        }
    };
    let mut model = Model::new(meta, &view.cpus);
    let _ = Merge::view(view, &Filter::default()).try_for_each_ref(|item| {
        if let Item::Point { event, .. } = item {
            model.feed(event, &mut render);
        }
        Ok::<(), ()>(())
    });
    model.finish(&mut render);
    m.intervals.retain(|i| i.ns > 0);
    m.chrome.retain(|i| i.ns > 0);
    m.otlp.retain(|i| i.ns > 0);
    m.perfetto.retain(|i| i.ns > 0);
    m.uftrace.retain(|i| i.ns > 0);
    m
}

/// What the Perfetto export of the device `dir` shows (see the module's documentation):
/// its intervals, polls and drop re-entries, and its unpaired events as [`told`] counts
/// them (in `unpaired`, by the name of their `why`).
fn of_perfetto(dir: &Path) -> (Meaning, BTreeMap<&'static str, u64>) {
    let out = dir.with_extension("perfetto");
    let (source, file) = (dir.to_str().unwrap(), out.to_str().unwrap());
    reader!("export", "--format", "perfetto", source, "-o", file).ok();
    let trace = ttrace_tests::perfetto::read(&std::fs::read(&out).unwrap()).unwrap();
    let mut m = Meaning::default();
    let mut unpaired = BTreeMap::new();
    for s in trace.slices() {
        let b = &trace.events[s.begin];
        let arg = |e: &ttrace_tests::perfetto::Event, name: &str| {
            e.args.iter().find(|a| a.0 == name).map(|a| a.1.clone())
        };
        match (b.kind, b.category.as_str(), s.end) {
            (3, "unpaired", _) => {
                let Some(ttrace_tests::perfetto::Value::Str(why)) = arg(b, "why") else {
                    panic!("an unpaired instant without why: {b:?}")
                };
                let why = Why::from_name(&why).unwrap_or_else(|| panic!("{why}"));
                *unpaired.entry(why.name()).or_default() += 1;
            }
            (3, "drop", _) => m.drops += 1,
            (1, "entry" | "start", None) => *unpaired.entry("left open").or_default() += 1,
            (1, category, Some(end)) => {
                let e = &trace.events[end];
                if b.on_thread && category != "entry" {
                    m.polls += 1;
                    continue;
                }
                // A half of an instance moved to another lane is no interval of its own.
                if arg(b, "moved").is_some() || arg(e, "moved").is_some() {
                    continue;
                }
                m.perfetto.insert(Interval {
                    name: stem(&b.name),
                    begin_ns: b.ns as i64,
                    ns: e.ns - b.ns,
                });
            }
            _ => {}
        }
    }
    // An enter and an exit each.
    m.drops /= 2;
    m.perfetto.retain(|i| i.ns > 0);
    (m, unpaired)
}

/// What the uftrace export of the device `dir` (whose metadata is `meta`) shows (see the
/// module's documentation): the calls' intervals, the polls and drop re-entries, and the
/// unpaired entries and exits as [`told`] counts them.
fn of_uftrace(dir: &Path, meta: &devttrace::Metadata) -> (Meaning, BTreeMap<&'static str, u64>) {
    let out = dir.with_extension("uftrace");
    let (source, file) = (dir.to_str().unwrap(), out.to_str().unwrap());
    reader!("export", "--format", "uftrace", source, "-o", file).ok();
    let data = ttrace_tests::uftrace::read(&out).unwrap();
    // What the functions are: calls' entries and exits (their point functions: `ttrace:`
    // and the name, as the export makes them), spans' polls and drop re-entries.
    let point = |name: &str| {
        let plain: String = (name.chars())
            .map(
                |c| match c.is_ascii_alphanumeric() || c == '_' || c == ':' {
                    true => c,
                    false => '_',
                },
            )
            .collect();
        format!("ttrace:{plain}")
    };
    let of = |kind: Kind, role: Role| -> BTreeSet<String> {
        (meta.tracepoints.iter())
            .filter(|t| t.kind == kind && t.role == role)
            .map(|t| t.name.clone())
            .collect()
    };
    let (entries, exits) = (of(Kind::Entry, Role::Point), of(Kind::Exit, Role::Point));
    let polled = of(Kind::Entry, Role::SpanEnter);
    let before_horizon: BTreeSet<String> = entries.iter().chain(&exits).map(|n| point(n)).collect();
    let dropped: BTreeSet<String> = polled
        .iter()
        .map(|n| point(&format!("{n}_enter")))
        .collect();
    let mut m = Meaning::default();
    let mut unpaired = BTreeMap::new();
    for records in data.threads.values() {
        let mut open: Vec<&ttrace_tests::uftrace::Record> = Vec::new();
        for r in records {
            match r.kind {
                ttrace_tests::uftrace::Kind::Entry(_) => open.push(r),
                ttrace_tests::uftrace::Kind::Exit => {
                    let Some(entry) = open.pop() else {
                        assert!(exits.contains(&r.name), "{r:?}");
                        *unpaired.entry(Why::PartnerMissing.name()).or_default() += 1;
                        continue;
                    };
                    if before_horizon.contains(&entry.name) {
                        *unpaired.entry(Why::BeforeHorizon.name()).or_default() += 1;
                    } else if dropped.contains(&entry.name) {
                        m.drops += 1;
                    } else if polled.contains(&entry.name) {
                        m.polls += 1;
                    } else if entries.contains(&entry.name) {
                        m.uftrace.insert(Interval {
                            name: stem(&entry.name),
                            begin_ns: entry.ns as i64,
                            ns: r.ns - entry.ns,
                        });
                    }
                }
                ttrace_tests::uftrace::Kind::Lost(_) => {}
            }
        }
        for entry in open {
            assert!(entries.contains(&entry.name), "{entry:?}");
            *unpaired.entry("left open").or_default() += 1;
        }
    }
    m.uftrace.retain(|i| i.ns > 0);
    (m, unpaired)
}

/// The intervals of the OTLP export (JSON lines) of the device `dir`: its spans, but those
/// still open at the end (`ttrace.open`) and instances not whole (`ttrace.whole` false).
/// OTLP has no place for an unpaired event but a span's event: those are not compared.
fn of_otlp(dir: &Path) -> BTreeSet<Interval> {
    let out = dir.with_extension("jsonl");
    let (source, file) = (dir.to_str().unwrap(), out.to_str().unwrap());
    reader!("export", "--format", "otlp", source, "-o", file).ok();
    let text = std::fs::read_to_string(&out).unwrap();
    let spans = ttrace_tests::otlp::read_json_lines(&text).unwrap();
    spans
        .into_iter()
        .filter(|s| {
            !s.attrs
                .iter()
                .any(|(k, _)| k == "ttrace.open" || k == "ttrace.whole")
        })
        .map(|s| Interval {
            name: stem(&s.name),
            begin_ns: s.start as i64,
            ns: s.end - s.start,
        })
        .filter(|i| i.ns > 0)
        .collect()
}

/// What the Chrome export of the device `dir` shows (`drops`: Chrome leaves them out).
fn of_chrome(dir: &Path) -> Meaning {
    let out = dir.with_extension("json");
    let (source, file) = (dir.to_str().unwrap(), out.to_str().unwrap());
    reader!("export", "--format", "chrome", source, "-o", file).ok();
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let ns = |v: &serde_json::Value| (v.as_f64().unwrap() * 1000.0).round() as i64;
    let mut m = Meaning::default();
    // Async slices by category and id: their `b` and `e`.
    type Ends<'a> = (Option<&'a serde_json::Value>, Option<&'a serde_json::Value>);
    let mut slices: BTreeMap<(String, String), Ends<'_>> = BTreeMap::new();
    for e in doc["traceEvents"].as_array().unwrap() {
        let (cat, ph) = (
            e["cat"].as_str().unwrap_or(""),
            e["ph"].as_str().unwrap_or(""),
        );
        match (cat, ph) {
            ("entry", "X") => {
                m.chrome.insert(Interval {
                    name: stem(e["name"].as_str().unwrap()),
                    begin_ns: ns(&e["ts"]),
                    ns: ns(&e["dur"]) as u64,
                });
            }
            ("poll", "X") => m.polls += 1,
            ("start/stop" | "span" | "unpaired", "b" | "e") => {
                let key = (cat.to_string(), e["id"].to_string());
                let ends = slices.entry(key).or_default();
                match ph {
                    "b" => ends.0 = Some(e),
                    _ => ends.1 = Some(e),
                }
            }
            (_, "i") if e["args"]["unpaired"] == "before the horizon" => {
                *m.unpaired.entry(Why::BeforeHorizon).or_default() += 1;
            }
            _ => {}
        }
    }
    for ((cat, id), ends) in slices {
        let (Some(b), Some(e)) = ends else {
            panic!("{cat} slice {id} has not both ends")
        };
        if cat == "unpaired" {
            let why = b["args"]["why"].as_str().or(e["args"]["why"].as_str());
            let why = why
                .and_then(Why::from_name)
                .unwrap_or_else(|| panic!("{b} {e}"));
            *m.unpaired.entry(why).or_default() += 1;
            continue;
        }
        let args = &b["args"];
        if args["open"] == true || args["whole"] == false || args["new"].is_string() {
            continue;
        }
        let interval = Interval {
            name: stem(b["name"].as_str().unwrap()),
            begin_ns: ns(&b["ts"]),
            ns: (ns(&e["ts"]) - ns(&b["ts"])) as u64,
        };
        if interval.ns > 0 {
            m.chrome.insert(interval);
        }
    }
    m
}

/// What `report` gives of `view`.
fn of_report(view: &View<'_>) -> Meaning {
    let opts = ttrace_reader::report::Options {
        slowest: Some(1 << 30),
        ..Default::default()
    };
    let r = ttrace_reader::report::build(view, &Filter::default(), &opts);
    let intervals = (r.slowest.iter())
        .filter(|s| s.duration > 0)
        .map(|s| Interval {
            name: s.name.clone(),
            begin_ns: s.begin_ns,
            ns: s.duration,
        })
        .collect();
    let u = r.unmeasured;
    let unpaired = [
        (Why::OpenAtEnd, u.open_at_end),
        (Why::ThreadEnded, u.thread_ended),
        (Why::PartnerMissing, u.unmatched_exits),
        (Why::BeforeHorizon, u.before_horizon),
    ]
    .into_iter()
    .filter(|&(_, n)| n > 0)
    .collect();
    let polls = r.spans.iter().map(|s| s.polls.count).sum();
    let drops = r.spans.iter().map(|s| s.drop_reentries).sum();
    Meaning {
        intervals,
        unpaired,
        polls,
        drops,
        ..Meaning::default()
    }
}

/// The intervals the matcher fires on, reading the device `dir` from its start.
fn of_matcher(dir: &Path) -> BTreeSet<Interval> {
    let reader = Reader::open(dir).unwrap();
    let view = View::of(&reader, 0).unwrap();
    let names = ttrace_reader::report::pair_names(&view.meta);
    let rules = names
        .iter()
        .map(|n| format!("latency {n} > 0ns").parse().unwrap());
    let mut matcher = ttrace_reader::matcher::Matcher::new(rules.collect());
    let clock = view.version.clock;
    let mut follower = Follower::from_start(&reader, 0);
    let mut intervals = BTreeSet::new();
    for poll in [follower.poll().unwrap(), follower.finish().unwrap()] {
        for f in matcher.poll(&poll, reader.now()) {
            let Some(begin) = f.begin else { continue };
            intervals.insert(Interval {
                name: names[f.rule].clone(),
                begin_ns: clock.since_anchor_ns(begin),
                ns: clock.ticks_to_ns(f.stamp - begin),
            });
        }
    }
    intervals
}

/// Checks that the readers agree on the device `dir`; returns the model's meaning.
fn agree(dir: &Path) -> Meaning {
    let reader = Reader::open(dir).unwrap();
    let view = View::of(&reader, 0).unwrap();
    let model = of_model(&view);
    let report = of_report(&view);
    let matcher = of_matcher(dir);
    same(
        "intervals",
        ("model", &model.intervals),
        ("report", &report.intervals),
    );
    same(
        "intervals",
        ("model", &model.intervals),
        ("matcher", &matcher),
    );
    let chrome = of_chrome(dir);
    same(
        "intervals",
        ("model", &model.chrome),
        ("chrome", &chrome.chrome),
    );
    same("intervals", ("model", &model.otlp), ("otlp", &of_otlp(dir)));
    assert_eq!(model.unpaired, report.unpaired, "unpaired, by reason");
    assert_eq!(
        model.unpaired, chrome.unpaired,
        "unpaired in Chrome, by reason"
    );
    assert_eq!(model.polls, chrome.polls, "polls in Chrome");
    assert_eq!(
        (model.polls, model.drops),
        (report.polls, report.drops),
        "polls and drop re-entries"
    );
    let (perfetto, unpaired) = of_perfetto(dir);
    same(
        "intervals",
        ("model", &model.perfetto),
        ("perfetto", &perfetto.perfetto),
    );
    assert_eq!(told(&model.unpaired), unpaired, "unpaired in Perfetto");
    assert_eq!(
        (model.polls, model.drops),
        (perfetto.polls, perfetto.drops),
        "polls and drop re-entries in Perfetto"
    );
    let (uftrace, unpaired) = of_uftrace(dir, &view.meta);
    same(
        "intervals",
        ("model", &model.uftrace),
        ("uftrace", &uftrace.uftrace),
    );
    assert_eq!(told(&model.unpaired_calls), unpaired, "unpaired in uftrace");
    assert_eq!(
        (model.polls, model.drops),
        (uftrace.polls, uftrace.drops),
        "polls and drop re-entries in uftrace"
    );
    model
}

#[test]
fn the_demo_with_losses_means_the_same_to_every_reader() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    // 2 threads per CPU, 800 requests each: more than the demo's rings hold.
    reader!(
        "demo",
        "--device",
        &dir,
        "--threads",
        "2",
        "--requests",
        "800"
    )
    .ok();
    let reader = Reader::open(&dir).unwrap();
    let view = View::of(&reader, 0).unwrap();
    assert!(view.cpus.iter().any(|r| r.lost > 0), "no ring lost entries");
    let m = agree(&dir);
    assert!(m.intervals.len() > 100, "{} intervals", m.intervals.len());
    assert!(
        m.unpaired.get(&Why::BeforeHorizon).is_some_and(|&n| n > 0),
        "{:?}",
        m.unpaired
    );
}

#[test]
fn futures_polled_on_two_threads_mean_the_same_to_every_reader() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let ran = ttrace_tests::cli::Cli::new(env!("CARGO_BIN_EXE_ttrace-test-handoff"))
        .env("TTRACE_DIR", &dir)
        .arg("5")
        .succeeds();
    assert_eq!(ran.stdout, "done\n");
    let m = agree(&dir);
    // Each job: one instance, polled on `first` and on `second`, dropped on `second`.
    assert_eq!(m.intervals.len(), 5, "{:?}", m.intervals);
    assert_eq!((m.polls, m.drops), (10, 5));
}

#[test]
fn overlapping_stems_and_a_reused_thread_id_mean_the_same_to_every_reader() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = Writer::open(&Config {
        clock: Some(ClockSource::MonotonicNs),
        ..ttrace_tests::config(&dir, 1024, 2)
    })
    .unwrap();
    let [enter, exit, start, stop] = [
        define_kind(&dev, "call", Kind::Entry, ""),
        define_kind(&dev, "call_done", Kind::Exit, ""),
        define_kind(&dev, "job_start", Kind::Start, ""),
        define_kind(&dev, "job_done", Kind::Stop, ""),
    ];
    let put = |t: u64, word: u64, ctx: u64| {
        dev.device()
            .mapping()
            .ring(0)
            .write(t, 1, &[word, ctx, 0, 0, 0, 0, 0])
            .unwrap();
    };
    let (reused, other) = (1 << 32 | 2, 1 << 32 | 3);
    dev.device().note_thread(1, 2, "first").unwrap();
    dev.device().note_thread(1, 3, "other").unwrap();
    let t = dev.now();
    // Two jobs overlap on `first`, a third on `other` inside them; `first` closes one, makes
    // a call, then dies with a job and a call open.
    put(t + 10, start, reused);
    put(t + 20, start, reused);
    put(t + 30, start, other);
    put(t + 40, stop, reused);
    put(t + 50, enter, reused);
    put(t + 60, exit, reused);
    put(t + 70, enter, reused);
    put(t + 80, stop, other);
    while dev.now() <= t + 80 {
        std::hint::spin_loop();
    }
    // The kernel gives tid 2 to `second`: its stop and exit close nothing of `first`'s.
    dev.device().note_thread(1, 2, "second").unwrap();
    let t = dev.now();
    put(t, stop, reused);
    put(t + 10, exit, reused);
    put(t + 20, start, reused);
    put(t + 40, stop, reused);
    drop(dev);
    let m = agree(&dir);
    let pairs: Vec<(&str, u64)> = m
        .intervals
        .iter()
        .map(|i| (i.name.as_str(), i.ns))
        .collect();
    let mut pairs = pairs;
    pairs.sort_unstable();
    assert_eq!(
        pairs,
        [
            ("call", 10),
            ("job_start", 20),
            ("job_start", 20),
            ("job_start", 50)
        ]
    );
    let unpaired: Vec<(Why, u64)> = m.unpaired.into_iter().collect();
    assert_eq!(unpaired, [(Why::PartnerMissing, 2), (Why::ThreadEnded, 2)]);
}
