//! `ttrace-reader report`: durations checked against the ones the test itself recorded (a
//! device on the nanosecond clock, entries written at chosen times).

use ttrace_core::{Config, Kind, Writer};
use ttrace_layouts::device::ClockSource;
use ttrace_tests::{define_kind, reader};

fn device(dir: &std::path::Path, slots: u64) -> Writer {
    Writer::open(&Config {
        clock: Some(ClockSource::MonotonicNs),
        ..ttrace_tests::config(dir, slots, 2)
    })
    .unwrap()
}

/// The tracepoints of a call on a file descriptor: `call(fd)` and `call_done`, on `dev`.
fn calls(dev: &Writer) -> (u64, u64) {
    (
        define_kind(dev, "call", Kind::Entry, "fd={fd}"),
        define_kind(dev, "call_done", Kind::Exit, ""),
    )
}

/// Nearest-rank percentile of sorted `v`.
fn rank(v: &[u64], q: f64) -> u64 {
    v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1]
}

/// Writes, into ring `ring` (a restartable one: its entries carry its CPU), one `call`
/// entry/exit pair of duration `d` per element, from `start` on (ns), for thread `ctx`.
fn pairs(dev: &Writer, ring: usize, ctx: u64, start: u64, ds: &[u64], enter: u64, exit: u64) {
    let (enter, exit) = (on(enter, ring), on(exit, ring));
    let mut t = start;
    for &d in ds {
        dev.device()
            .mapping()
            .ring(ring)
            .write(t, 1, &[enter, ctx, 0, 0, 0, 0, 0])
            .unwrap();
        dev.device()
            .mapping()
            .ring(ring)
            .write(t + d, 1, &[exit, ctx, 0, 0, 0, 0, 0])
            .unwrap();
        t += d + 50;
    }
}

/// Type word `word` as written on CPU `cpu`.
fn on(word: u64, cpu: usize) -> u64 {
    ttrace_layouts::entry::TypeWord(word).with_cpu(cpu as u32).0
}

/// The type words of an entry/exit pair `call`/`call_done` and a start/stop pair
/// `job_start`/`job_done`, defined in `dev`.
fn calls_and_jobs(dev: &ttrace_core::Writer) -> [u64; 4] {
    [
        define_kind(dev, "call", Kind::Entry, ""),
        define_kind(dev, "call_done", Kind::Exit, ""),
        define_kind(dev, "job_start", Kind::Start, ""),
        define_kind(dev, "job_done", Kind::Stop, ""),
    ]
}

#[test]
fn percentiles_counts_and_histograms_are_those_of_the_recorded_durations() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = device(&dir, 1024);
    let [enter, exit, start, stop] = calls_and_jobs(&dev);
    dev.device().note_thread(1, 2, "fast").unwrap();
    dev.device().note_thread(1, 3, "slow").unwrap();
    let base = dev.now();
    let fast: Vec<u64> = (1..=40).map(|i| i * 100).collect();
    let slow: Vec<u64> = [5_000, 7_000, 9_000, 1_000_000].to_vec();
    pairs(&dev, 0, 1 << 32 | 2, base, &fast, enter, exit);
    pairs(&dev, 1, 1 << 32 | 3, base + 10, &slow, enter, exit);
    // A start/stop pair of one stem on the slow thread, after its calls.
    let t = base + 2_000_000;
    dev.device()
        .mapping()
        .ring(1)
        .write(t, 1, &[on(start, 1), 1 << 32 | 3, 0, 0, 0, 0, 0])
        .unwrap();
    dev.device()
        .mapping()
        .ring(1)
        .write(t + 12_346, 1, &[on(stop, 1), 1 << 32 | 3, 0, 0, 0, 0, 0])
        .unwrap();
    let d = dir.to_str().unwrap();

    // The library's figures against the durations written.
    let view_dev = devttrace::Reader::open(&dir).unwrap();
    let view = devttrace::View::of(&view_dev, 0).unwrap();
    let opts = ttrace_reader::report::Options {
        by: Some(ttrace_reader::report::By::Thread),
        ..Default::default()
    };
    let r = ttrace_reader::report::build(&view, &Default::default(), &opts);
    for (ds, who) in [(&fast, "1/2 (fast)"), (&slow, "1/3 (slow)")] {
        let row = r
            .latencies
            .iter()
            .find(|l| l.name == "call" && l.group.as_deref() == Some(who))
            .unwrap();
        let mut v = ds.clone();
        v.sort_unstable();
        assert_eq!(
            {
                let d = &row.durations;
                (d.count, d.min, d.p50, d.p90, d.p99, d.p999, d.max, d.total)
            },
            (
                v.len() as u64,
                v[0],
                rank(&v, 0.5),
                rank(&v, 0.9),
                rank(&v, 0.99),
                rank(&v, 0.999),
                v[v.len() - 1],
                v.iter().sum()
            ),
            "{who}"
        );
    }
    let job = r.latencies.iter().find(|l| l.name == "job_start").unwrap();
    assert_eq!((job.durations.count, job.durations.min), (1, 12_346));
    assert_eq!(r.unmeasured, Default::default());
    let call_count = r.points.iter().find(|p| p.name == "call").unwrap().count;
    assert_eq!(call_count, 44);

    // The command: text, --json with the same numbers, --histogram that adds up.
    let json: serde_json::Value =
        serde_json::from_str(&reader!("report", d, "--by", "thread", "--json").ok()).unwrap();
    let rows = json["durations"].as_array().unwrap();
    let fast_row = rows
        .iter()
        .find(|r| r["group"] == "1/2 (fast)" && r["name"] == "call")
        .unwrap();
    assert_eq!(fast_row["count"], 40);
    assert_eq!(fast_row["p99_ns"], rank(&fast, 0.99));
    assert_eq!(fast_row["total_ns"], fast.iter().sum::<u64>());
    let text = reader!("report", d, "--by", "thread").ok();
    let line = text
        .lines()
        .find(|l| l.ends_with("call  [1/2 (fast)]"))
        .unwrap();
    assert!(line.trim_start().starts_with("40 "), "{line}");
    assert!(line.contains(" 82.0us "), "total of 100..4000 ns: {line}");
    let text = reader!("report", d, "--histogram", "call").ok();
    let buckets: u64 = text
        .lines()
        .skip_while(|l| !l.starts_with("# call: "))
        .skip(2)
        .take_while(|l| l.contains(" -> "))
        .map(|l| {
            l.split(':')
                .nth(1)
                .unwrap()
                .trim()
                .split(' ')
                .next()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    assert_eq!(buckets, 44, "{text}");
    // Sorted by the longest first, and --top.
    let text = reader!("report", d, "--by", "thread", "--sort", "max", "--top", "1").ok();
    let durations: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("# durations"))
        .skip(2)
        .take_while(|l| !l.starts_with('#'))
        .collect();
    assert_eq!(durations.len(), 1);
    assert!(durations[0].ends_with("call  [1/3 (slow)]"), "{text}");
}

#[test]
fn pairs_across_lost_entries_are_counted_not_measured() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = device(&dir, 16);
    let (enter, exit) = (
        define_kind(&dev, "call", Kind::Entry, ""),
        define_kind(&dev, "call_done", Kind::Exit, ""),
    );
    let base = dev.now();
    // 30 pairs into a 16-slot ring: the oldest are overwritten.
    // Even durations: a stamp's bit 0 is the slot's state, not time.
    let ds: Vec<u64> = (1..=30).map(|i| 1000 + 2 * i).collect();
    pairs(&dev, 0, 1 << 32 | 2, base, &ds, enter, exit);
    let view_dev = devttrace::Reader::open(&dir).unwrap();
    let view = devttrace::View::of(&view_dev, 0).unwrap();
    let r = ttrace_reader::report::build(&view, &Default::default(), &Default::default());
    let call = r.latencies.iter().find(|l| l.name == "call").unwrap();
    // The 16 slots hold the last 8 pairs: each is measured with its own duration.
    assert_eq!(call.durations.count, 8);
    assert_eq!((call.durations.min, call.durations.max), (1046, 1060));
    // Write one more exit: the ring now starts with an exit whose entry is gone.
    dev.device()
        .mapping()
        .ring(0)
        .write(base + 1_000_000, 1, &[exit, 1 << 32 | 2, 0, 0, 0, 0, 0])
        .unwrap();
    let view = devttrace::View::of(&view_dev, 0).unwrap();
    let r = ttrace_reader::report::build(&view, &Default::default(), &Default::default());
    let call = r.latencies.iter().find(|l| l.name == "call").unwrap();
    assert_eq!(
        call.durations.count, 7,
        "the pair whose entry was overwritten is not measured"
    );
    assert!(
        call.durations.max <= 1060,
        "no duration spans the lost entries"
    );
    let u = r.unmeasured;
    assert_eq!(u.unmatched_exits + u.before_horizon, 2, "{u:?}");
    let text = reader!("report", &dir).ok();
    assert!(text.contains("# not measured: "), "{text}");
    assert!(text.contains("# cpu0: "), "dump's loss counts stay: {text}");
}

/// The ring lines of a text report's footer: `(ring, lost, incomplete, dropped)`.
fn footer(text: &str) -> Vec<(String, u64, u64, u64)> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# cpu"))
        .map(|l| {
            let (ring, rest) = l.split_once(": ").unwrap();
            let n = |what: &str| -> u64 {
                let before = rest.split(what).next().unwrap();
                before.rsplit(' ').next().unwrap().parse().unwrap()
            };
            (
                format!("cpu{ring}"),
                n(" entries lost"),
                n(" incomplete"),
                n(" events dropped"),
            )
        })
        .collect()
}

#[test]
fn the_json_report_has_the_loss_counts_of_the_text_footer() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = device(&dir, 16);
    let (enter, exit) = (
        define_kind(&dev, "call", Kind::Entry, ""),
        define_kind(&dev, "call_done", Kind::Exit, ""),
    );
    // 30 pairs into a 16-slot ring: the oldest are overwritten.
    let ds: Vec<u64> = (1..=30).map(|i| 1000 + 2 * i).collect();
    pairs(&dev, 0, 1 << 32 | 2, dev.now(), &ds, enter, exit);
    let text = reader!("report", &dir).ok();
    let want = footer(&text);
    assert_eq!(want.len(), 2, "{text}");
    assert!(want[0].1 > 0, "the test needs losses: {text}");
    let json: serde_json::Value =
        serde_json::from_str(&reader!("report", &dir, "--json").ok()).unwrap();
    let rings = json["rings"].as_array().unwrap_or_else(|| panic!("{json}"));
    let got: Vec<(String, u64, u64, u64)> = rings
        .iter()
        .map(|r| {
            (
                r["ring"].as_str().unwrap().to_string(),
                r["lost"].as_u64().unwrap(),
                r["incomplete"].as_u64().unwrap(),
                r["dropped"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, want, "{json}");
    assert_eq!(
        json["lost"],
        want.iter().map(|r| r.1).sum::<u64>(),
        "{json}"
    );
}

#[test]
fn the_durations_heading_says_how_they_are_split() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = device(&dir, 1024);
    let (enter, exit) = calls(&dev);
    pairs(&dev, 0, 1 << 32 | 2, dev.now(), &[100, 200], enter, exit);
    for (by, heading) in [
        (None, "# durations: entry to exit, start to stop"),
        (
            Some("thread"),
            "# durations: entry to exit, start to stop, per thread",
        ),
        (
            Some("process"),
            "# durations: entry to exit, start to stop, per process",
        ),
        (
            Some("cpu"),
            "# durations: entry to exit, start to stop, per cpu",
        ),
        (
            Some("fd"),
            "# durations: entry to exit, start to stop, per value of fd",
        ),
    ] {
        let text = reader!("report", &dir)
            .args(by.into_iter().flat_map(|b| ["--by", b]))
            .ok();
        let line = text.lines().find(|l| l.starts_with("# durations")).unwrap();
        assert_eq!(line, heading, "{by:?}");
    }
}

/// Writes one event of `word` for `ctx` into ring 0 at `t`.
fn put(dev: &Writer, t: u64, word: u64, ctx: u64) {
    dev.device()
        .mapping()
        .ring(0)
        .write(t, 1, &[word, ctx, 0, 0, 0, 0, 0])
        .unwrap();
}

#[test]
fn a_dead_threads_open_entry_is_not_closed_by_the_next_thread_with_its_tid() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = device(&dir, 1024);
    let [enter, exit, start, stop] = calls_and_jobs(&dev);
    let ctx = 1 << 32 | 2;
    // Thread `first` makes a call of 100 ns, then enters `call` and starts a `job`, and dies.
    dev.device().note_thread(1, 2, "first").unwrap();
    let t = dev.now();
    pairs(&dev, 0, ctx, t, &[100], enter, exit);
    put(&dev, t + 200, enter, ctx);
    put(&dev, t + 300, start, ctx);
    // Once the clock has passed its last event, the kernel gives tid 2 to `second`, which
    // ends a `job` and leaves a `call` it began before it traced, then makes a call of 300 ns.
    while dev.now() <= t + 300 {
        std::hint::spin_loop();
    }
    dev.device().note_thread(1, 2, "second").unwrap();
    let t = dev.now();
    put(&dev, t, stop, ctx);
    put(&dev, t + 100, exit, ctx);
    pairs(&dev, 0, ctx, t + 200, &[300], enter, exit);

    let view_dev = devttrace::Reader::open(&dir).unwrap();
    let view = devttrace::View::of(&view_dev, 0).unwrap();
    let r = ttrace_reader::report::build(&view, &Default::default(), &Default::default());
    let rows: Vec<(&str, u64, u64, u64)> = r
        .latencies
        .iter()
        .map(|l| {
            (
                l.name.as_str(),
                l.durations.count,
                l.durations.min,
                l.durations.max,
            )
        })
        .collect();
    assert_eq!(rows, [("call", 2, 100, 300)]);
    // The first thread's entry and start are left open by a thread that ended; the
    // second's exit and stop have no entry or start.
    let u = r.unmeasured;
    assert_eq!(
        (
            u.open_at_end,
            u.thread_ended,
            u.unmatched_exits,
            u.before_horizon
        ),
        (0, 2, 2, 0)
    );
    // Split by thread, each thread of the tid is a row of its own, by its name.
    let opts = ttrace_reader::report::Options {
        by: Some(ttrace_reader::report::By::Thread),
        ..Default::default()
    };
    let r = ttrace_reader::report::build(&view, &Default::default(), &opts);
    let mut rows: Vec<(Option<&str>, u64, u64)> = r
        .latencies
        .iter()
        .map(|l| (l.group.as_deref(), l.durations.count, l.durations.min))
        .collect();
    rows.sort_unstable();
    assert_eq!(
        rows,
        [
            (Some("1/2 (first)"), 1, 100),
            (Some("1/2 (second)"), 1, 300)
        ]
    );
    let text = reader!("report", &dir).ok();
    assert!(
        text.contains("# not measured: 0 open at the end, 2 exits with no entry, 0 before")
            && text.contains("# not measured: 2 left open by a thread that ended"),
        "{text}"
    );
}

#[test]
fn rates_are_over_the_time_each_ring_covers() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = device(&dir, 16);
    let hot = define_kind(&dev, "hot", Kind::Start, "");
    let idle = define_kind(&dev, "idle", Kind::Start, "");
    // One `idle` event on CPU 1, long before a busy second on CPU 0 wraps its 16-slot ring
    // (40 `hot` events 1 us apart): the trace goes back a second (and the device further),
    // but CPU 0's ring holds only its last 15 us.
    let base = (dev.now() + 1_000_000) & !1;
    dev.device()
        .mapping()
        .ring(1)
        .write(base, 1, &[on(idle, 1), 1 << 32 | 3, 0, 0, 0, 0, 0])
        .unwrap();
    let busy = base + 1_000_000_000;
    for i in 0..40 {
        put(&dev, busy + i * 1000, on(hot, 0), 1 << 32 | 2);
    }
    let json: serde_json::Value =
        serde_json::from_str(&reader!("report", &dir, "--json").ok()).unwrap();
    let rings = json["rings"].as_array().unwrap();
    assert!(rings[0]["lost"].as_u64().unwrap() > 0, "{json}");
    let kept = rings[0]["events"].as_u64().unwrap();
    // Ring 0 covers its oldest event kept to the last; ring 1 lost nothing: the whole trace.
    let last = busy + 39 * 1000;
    let covered0 = (kept - 1) * 1000;
    assert_eq!(rings[0]["covered_ns"], covered0, "{json}");
    assert_eq!(rings[1]["covered_ns"], last - base, "{json}");
    assert_eq!(json["covered_ns"], last - base);
    let rate = |name: &str| {
        let p = json["points"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap();
        p["per_second"].as_f64().unwrap()
    };
    let close = |got: f64, want: f64| (got - want).abs() <= want * 1e-9;
    let want_hot = kept as f64 / (covered0 as f64 / 1e9);
    assert!(close(rate("hot"), want_hot), "{} {want_hot}", rate("hot"));
    let want_idle = 1.0 / ((last - base) as f64 / 1e9);
    assert!(
        close(rate("idle"), want_idle),
        "{} {want_idle}",
        rate("idle")
    );
    // The text says over what each ring's rates are.
    let text = reader!("report", &dir).ok();
    let line = format!(
        "# rates: per second of the time each ring covers (a ring that lost older entries: from \
         its oldest kept): cpu0 {:.6} s, cpu1 {:.6} s",
        covered0 as f64 / 1e9,
        (last - base) as f64 / 1e9
    );
    assert!(text.lines().any(|l| l == line), "{text}");
    let hot_line = text.lines().find(|l| l.ends_with("  hot")).unwrap();
    let shown: f64 = hot_line.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!((shown - want_hot).abs() < 0.1, "{hot_line}");
    // A trace whose rings lost nothing has one time for all, and no such line.
    let whole = tmp.path().join("whole");
    let dev = device(&whole, 1024);
    let hot = define_kind(&dev, "hot", Kind::Start, "");
    let t = dev.now() & !1;
    for i in 0..10 {
        put(&dev, t + i * 1000, on(hot, 0), 1 << 32 | 2);
    }
    let text = reader!("report", &whole).ok();
    assert!(!text.contains("# rates:"), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&reader!("report", &whole, "--json").ok()).unwrap();
    let p = &json["points"][0];
    assert!(
        close(p["per_second"].as_f64().unwrap(), 10.0 / 9e-6),
        "{json}"
    );
}

#[test]
fn slowest_lists_the_longest_pairs_of_each_name_with_their_arguments() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = device(&dir, 1024);
    let (enter, exit) = calls(&dev);
    dev.device().note_thread(1, 2, "fast").unwrap();
    dev.device().note_thread(1, 3, "slow").unwrap();
    let base = dev.now() & !1;
    // Fast calls on fd 4, slow ones on fd 9 (the entry's argument is the fd).
    let call = |ring: usize, ctx: u64, t: u64, d: u64, fd: u64| {
        let m = dev.device().mapping();
        m.ring(ring)
            .write(t, 1, &[on(enter, ring), ctx, fd, 0, 0, 0, 0])
            .unwrap();
        m.ring(ring)
            .write(t + d, 1, &[on(exit, ring), ctx, 0, 0, 0, 0, 0])
            .unwrap();
    };
    for i in 0..10 {
        call(0, 1 << 32 | 2, base + i * 1000, 100 + 2 * i, 4);
    }
    call(1, 1 << 32 | 3, base + 100_000, 70_000, 9);
    call(1, 1 << 32 | 3, base + 200_000, 90_000, 9);
    let json: serde_json::Value =
        serde_json::from_str(&reader!("report", &dir, "--slowest", "2", "--json").ok()).unwrap();
    let slowest = json["slowest"].as_array().unwrap();
    let got: Vec<(u64, &str, u64)> = slowest
        .iter()
        .map(|w| {
            assert_eq!((&w["kind"], &w["name"]), (&"pair".into(), &"call".into()));
            (
                w["duration_ns"].as_u64().unwrap(),
                w["threads"][0].as_str().unwrap(),
                w["args"]["fd"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, [(90_000, "1/3 (slow)", 9), (70_000, "1/3 (slow)", 9)]);
    // Each begins as dump shows its entry's time; its text is the entry as dump shows it.
    let dump = reader!("dump", &dir).ok();
    let entries: Vec<&str> = dump.lines().filter(|l| l.contains(" call(fd=9)")).collect();
    assert_eq!(
        slowest[0]["begin"],
        entries[1].split_whitespace().next().unwrap()
    );
    assert_eq!(
        slowest[1]["begin"],
        entries[0].split_whitespace().next().unwrap()
    );
    assert_eq!(slowest[0]["path"], "call(fd=9)");
    let text = reader!("report", &dir, "--slowest", "1").ok();
    let at = text
        .lines()
        .position(|l| l.starts_with("call  90.0us  begun "))
        .unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[at].ends_with("  on 1/3 (slow)"), "{text}");
    assert_eq!(lines[at + 1], "    call(fd=9)");
}

#[test]
fn a_pairs_time_is_cut_into_parts_by_its_threads_switches() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = device(&dir, 1024);
    let (enter, exit) = calls(&dev);
    let (out, back) = ttrace_tests::switch_words(&dev);
    let (t1, t2) = (1 << 32 | 2, 1 << 32 | 3);
    let t = dev.now();
    // Thread 2's switches are known from its first one: its call of 9 us was preempted
    // 1 us, blocked 5 us, on its CPU the rest.
    ttrace_tests::put_event(&dev, t + 500, back, t1, &[t + 500]);
    ttrace_tests::put_event(&dev, t + 1000, enter, t1, &[3]);
    ttrace_tests::put_event(&dev, t + 2000, out, t1, &[1, t + 2000]);
    ttrace_tests::put_event(&dev, t + 3000, back, t1, &[t + 3000]);
    ttrace_tests::put_event(&dev, t + 4000, out, t1, &[0, t + 4000]);
    ttrace_tests::put_event(&dev, t + 9000, back, t1, &[t + 9000]);
    ttrace_tests::put_event(&dev, t + 10_000, exit, t1, &[]);
    // Thread 3 has no switch in the trace: its call's time is unknown.
    ttrace_tests::put_event(&dev, t + 20_000, enter, t2, &[4]);
    ttrace_tests::put_event(&dev, t + 28_000, exit, t2, &[]);
    let json: serde_json::Value =
        serde_json::from_str(&reader!("report", &dir, "--json", "--slowest", "2").ok()).unwrap();
    let slow = json["slowest"]
        .as_array()
        .unwrap_or_else(|| panic!("{json}"));
    let parts = |fd: u64| {
        let s = (slow.iter())
            .find(|s| s["args"]["fd"] == fd)
            .unwrap_or_else(|| panic!("{json}"));
        (
            s["parts"].clone(),
            s["dominant"].clone(),
            s["duration_ns"].clone(),
        )
    };
    assert_eq!(
        parts(3),
        (
            serde_json::json!({"on_cpu": 3000, "preempted": 1000, "blocked": 5000,
                "scheduled": 0, "idle": 0, "unknown": 0}),
            serde_json::json!("blocked"),
            serde_json::json!(9000)
        )
    );
    assert_eq!(parts(4).0["unknown"], 8000, "{json}");
    assert_eq!(parts(4).1, "unknown", "{json}");
    let call = &json["durations"][0];
    assert_eq!(call["parts"]["blocked"]["total_ns"], 5000, "{json}");
    assert_eq!(call["dominant"], "unknown", "{json}");
    // The text says where the time went, per part, and for the slowest.
    let text = reader!("report", &dir, "--slowest", "1").ok();
    assert!(text.contains(" call blocked\n"), "{text}");
    assert!(
        text.contains("(blocked 5.0us, on_cpu 3.0us, preempted 1.0us: mostly blocked)"),
        "{text}"
    );
}
