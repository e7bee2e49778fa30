//! `ttrace-reader report`: how often each point fired, and where the time went: the
//! durations of entry/exit pairs (paired as the exports pair them: never across events that
//! may be missing, so a duration is only ever real) and of start/stop pairs of one name stem
//! (`request_start` .. `request_done`), as counts, percentiles and log2 histograms.

use crate::export::{Closes, Pairing, Schema, Stems};
use crate::merge::{Filter, Item, Merge};
use devttrace::incarnation::{Thread, Threads};
use devttrace::spans::{Added, Instance, Spans};
use devttrace::Kind;
use devttrace::{Event, TaskIndex, View};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

/// The names of the pairs (the device's pairing: [`devttrace::pairs`]).
pub use devttrace::pairs::pair_names;

/// How the latency table is split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum By {
    /// One row per pair name and thread.
    Thread,
    /// One row per pair name and process.
    Process,
    /// One row per pair name and CPU (the entry's).
    Cpu,
    /// One row per pair name and value of the entry's (start's) argument of this name,
    /// shown as `dump` shows it (a value table's names for a flags or enum argument).
    Arg(String),
}

impl std::str::FromStr for By {
    type Err = std::convert::Infallible;

    /// `thread`, `process`, `cpu`, `arg:NAME`, or any other word as an argument's name.
    fn from_str(s: &str) -> Result<By, Self::Err> {
        Ok(match s {
            "thread" => By::Thread,
            "process" => By::Process,
            "cpu" => By::Cpu,
            _ => By::Arg(s.strip_prefix("arg:").unwrap_or(s).to_string()),
        })
    }
}

/// How the latency table is sorted (largest first).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortBy {
    /// Pairs.
    Count,
    /// Total time.
    #[default]
    Total,
    /// 99th percentile.
    P99,
    /// Longest.
    Max,
}

/// What to report.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Split the latency table.
    pub by: Option<By>,
    /// Sort order of the latency table.
    pub sort: SortBy,
    /// Only the first rows of the latency table.
    pub top: Option<usize>,
    /// Draw the log2 histogram of the pairs of this name.
    pub histogram: Option<String>,
}

/// How often a point fired.
#[derive(Clone, Debug, PartialEq)]
pub struct PointRow {
    /// Tracepoint name (`info` for messages).
    pub name: String,
    /// Events.
    pub count: u64,
    /// Events per second over the time the report covers.
    pub rate: f64,
    /// Share of all events, 0 to 1.
    pub share: f64,
}

/// The durations of one kind of pair (and group, when split).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LatencyRow {
    /// The entry's (or start's) name.
    pub name: String,
    /// The thread, process or CPU, when split.
    pub group: Option<String>,
    /// The pairs' durations.
    pub durations: Dist,
}

/// Pairs that give no duration, and why.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unmeasured {
    /// Entries (starts) still open at the end of the trace.
    pub open_at_end: u64,
    /// Exits (stops) with no entry (start) open on their thread.
    pub unmatched_exits: u64,
    /// Entries and exits before the time from which every ring is complete (starts and
    /// stops; entries and exits are paired there too, and counted in `across_losses`).
    pub before_horizon: u64,
    /// Pairs measured whose entry is before the time from which every ring is complete:
    /// another CPU's ring lost entries while they were open. Their thread's own events are
    /// whole on the rings that hold them; the duration is wrong only if the thread left for
    /// that CPU and wrote an exit and an entry there that were lost.
    pub across_losses: u64,
}

/// The distribution of one measure, nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dist {
    /// Values.
    pub count: u64,
    /// Smallest.
    pub min: u64,
    /// Median (nearest rank).
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest.
    pub max: u64,
    /// Sum.
    pub total: u64,
}

impl Dist {
    /// The distribution of `v` (sorted here).
    pub fn of(mut v: Vec<u64>) -> Dist {
        if v.is_empty() {
            return Dist::default();
        }
        v.sort_unstable();
        let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Dist {
            count: v.len() as u64,
            min: v[0],
            p50: rank(0.5),
            p90: rank(0.9),
            p99: rank(0.99),
            p999: rank(0.999),
            max: v[v.len() - 1],
            total: v.iter().sum(),
        }
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "count": self.count, "min_ns": self.min, "p50_ns": self.p50, "p90_ns": self.p90,
            "p99_ns": self.p99, "p99_9_ns": self.p999, "max_ns": self.max, "total_ns": self.total,
        })
    }
}

/// The span instances of one name (`tracing` spans: [`devttrace::spans`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpanRow {
    /// The span's name.
    pub name: String,
    /// Instances measured (closed, and whole in the trace).
    pub instances: u64,
    /// New to close.
    pub lifetime: Dist,
    /// The sum of its polls.
    pub busy: Dist,
    /// Lifetime less busy time.
    pub idle: Dist,
    /// Each poll, of the instances measured.
    pub polls: Dist,
    /// Drop re-entries left out of the polls.
    pub drop_reentries: u64,
}

/// Span instances not measured, and why.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpansUnmeasured {
    /// Not closed at the end of the trace.
    pub open_at_end: u64,
    /// Begun before every ring is complete, or with no `new` in the trace: polls may be
    /// missing.
    pub not_whole: u64,
}

/// A log2 histogram of durations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Histogram {
    /// The pairs' name.
    pub name: String,
    /// `(low, high, count)`: durations in `low..=high` nanoseconds.
    pub buckets: Vec<(u64, u64, u64)>,
}

/// The counts of one ring, as the footer of `dump` and of the text report show them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RingCounts {
    /// Its name (`cpu0`, `cpu0.shared`).
    pub ring: String,
    /// Events it holds (as `dump` shows them, with no filter).
    pub events: u64,
    /// Ring entries those take.
    pub entries: u64,
    /// Entries overwritten before they could be read (including while reading).
    pub lost: u64,
    /// Entries still being written.
    pub incomplete: u64,
    /// Events writers dropped.
    pub dropped: u64,
    /// Events older than `--since`, left out.
    pub older: u64,
    /// Continuations whose first entry is gone.
    pub orphans: u64,
    /// Malformed entries.
    pub malformed: u64,
    /// Entries left out as damaged (`devttrace::damage`).
    pub damaged: u64,
    /// Entries written while the ring was read, left out.
    pub after_cut: u64,
    /// Entries hidden by a clear.
    pub cleared: u64,
}

/// A report of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// How the durations are split.
    pub by: Option<By>,
    /// Nanoseconds from the first to the last event reported.
    pub covered_ns: u64,
    /// Events, all names.
    pub events: u64,
    /// By name, most frequent first.
    pub points: Vec<PointRow>,
    /// Durations, sorted as asked.
    pub latencies: Vec<LatencyRow>,
    /// Pairs not measured.
    pub unmeasured: Unmeasured,
    /// Span instances, by name, the longest-lived in all first.
    pub spans: Vec<SpanRow>,
    /// Span instances not measured.
    pub spans_unmeasured: SpansUnmeasured,
    /// The histogram asked for.
    pub histogram: Option<Histogram>,
    /// Why the snapshot file reported on was taken, if it says.
    pub snapshot: Option<crate::cause::Taken>,
    /// The counts of the rings reported on (those the filter selects; a shared ring only
    /// once written to), as the footer shows them.
    pub rings: Vec<RingCounts>,
}

/// The names of the arguments of the pairs' entries and starts, sorted (what `--by` takes
/// beside `thread`, `process` and `cpu`).
pub fn pair_arguments(meta: &devttrace::Metadata) -> Vec<String> {
    let schemas = Schema::all(meta);
    let stems = Stems::new(&meta.tracepoints);
    let mut names: Vec<String> = (0..schemas.len())
        .filter(|&id| stems.opens_pair(&meta.tracepoints, id))
        .flat_map(|id| schemas[id].args.iter().map(|(name, _)| name.clone()))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The times of the instances of one span name, nanoseconds, as they end.
#[derive(Default)]
struct SpanTimes {
    lifetime: Vec<u64>,
    busy: Vec<u64>,
    idle: Vec<u64>,
    polls: Vec<u64>,
    /// Drop re-entries left out.
    drops: u64,
}

/// Reports the events `view` holds that `filter` keeps.
pub fn build(view: &View<'_>, filter: &Filter, opts: &Options) -> Report {
    let schemas = Schema::all(&view.meta);
    let clock = view.version.clock;
    let n = schemas.len();
    let Stems {
        of: stem_of,
        paired,
        ..
    } = Stems::new(&view.meta.tracepoints);
    // Per tracepoint id, the index of the argument `--by` names.
    let by_arg: Vec<Option<usize>> = schemas
        .iter()
        .map(|s| match &opts.by {
            Some(By::Arg(name)) => s.args.iter().position(|(n, _)| n == name),
            _ => None,
        })
        .collect();
    // The values of that argument as shown, each numbered once (0: the tracepoint has none).
    let mut shown: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut labels: Vec<String> = Vec::new();
    let mut text = Vec::new();
    // The threads, each numbered once: the threads that had one id are rows of their own.
    let mut thread_of = Threads::new(&view.meta);
    let mut numbered: HashMap<Thread, u64> = HashMap::new();
    let mut group_key = |e: &Event| -> u64 {
        match opts.by {
            None => 0,
            Some(By::Thread) => {
                let next = numbered.len() as u64;
                *numbered.entry(thread_of.of(e.ctx, e.stamp)).or_insert(next)
            }
            Some(By::Process) => e.ctx >> 32,
            Some(By::Cpu) => e.type_word.cpu() as u64,
            Some(By::Arg(ref name)) => {
                let id = e.type_word.tracepoint() as usize;
                let Some((i, &w)) = by_arg
                    .get(id)
                    .copied()
                    .flatten()
                    .and_then(|i| Some((i, e.args().get(i)?)))
                else {
                    return 0;
                };
                text.clear();
                text.extend_from_slice(name.as_bytes());
                text.push(b'=');
                crate::format::word(&mut text, &schemas[id].args[i].1, w, &view.aux);
                // Looked up by the text made for this event: a copy only for a new value.
                if let Some(&k) = shown.get(text.as_slice()) {
                    return k;
                }
                labels.push(String::from_utf8_lossy(&text).into_owned());
                shown.insert(text.clone(), labels.len() as u64);
                labels.len() as u64
            }
        }
    };
    let mut pairing = Pairing::new(&view.cpus, &view.meta).across_losses();
    let horizon = pairing.horizon();
    let mut instances = Spans::new(&view.meta, horizon);
    let mut spans: BTreeMap<String, SpanTimes> = BTreeMap::new();
    let mut spans_un = SpansUnmeasured::default();
    let mut ended = |i: Instance| {
        let Some(lifetime) = i.lifetime() else {
            match i.close {
                None => spans_un.open_at_end += 1,
                Some(_) => spans_un.not_whole += 1,
            }
            return;
        };
        let name = schemas.get(i.tracepoint as usize).map_or_else(
            || format!("tracepoint#{}", i.tracepoint),
            |s| s.name.clone(),
        );
        let e = spans.entry(name).or_default();
        let (lifetime, busy) = (clock.ticks_to_ns(lifetime), clock.ticks_to_ns(i.busy()));
        e.lifetime.push(lifetime);
        e.busy.push(busy);
        e.idle.push(lifetime.saturating_sub(busy));
        e.polls.extend(
            i.polls
                .iter()
                .map(|p| clock.ticks_to_ns(p.exit.saturating_sub(p.enter))),
        );
        e.drops += i.dropped.is_some() as u64;
    };
    // Events by tracepoint id (the last: ids the metadata does not know), and messages.
    let mut counts = vec![0u64; n + 1];
    let mut unknown: BTreeMap<usize, u64> = BTreeMap::new();
    let mut messages = 0u64;
    // Durations by (tracepoint id, group), with an event of the group to name it by.
    let mut durations: HashMap<(usize, u64), (Vec<u64>, Event)> = HashMap::new();
    // Open starts, per thread and stem; the stems some stop closes (a start whose stem no
    // stop has is a point of its own, not an open pair).
    let mut starts: HashMap<(Thread, usize), Vec<Event>> = HashMap::new();
    let mut stopped = vec![false; paired.len()];
    let mut un = Unmeasured::default();
    let (mut first, mut last, mut events) = (None, 0u64, 0u64);
    let mut add = |open: &Event, close: &Event| {
        let ns = clock.ticks_to_ns(close.stamp.saturating_sub(open.stamp));
        durations
            .entry((open.type_word.tracepoint() as usize, group_key(open)))
            .or_insert_with(|| (Vec::new(), *open))
            .0
            .push(ns);
    };
    let _ = Merge::view(view, filter).try_for_each_ref(|item| {
        let event = match item {
            Item::Message(r) => {
                messages += 1;
                events += 1;
                first.get_or_insert(r.timestamp);
                last = last.max(r.timestamp);
                return Ok::<(), ()>(());
            }
            Item::Point { event, .. } => event,
        };
        events += 1;
        first.get_or_insert(event.stamp);
        last = last.max(event.stamp);
        let id = event.type_word.tracepoint() as usize;
        let Some(schema) = schemas.get(id) else {
            *unknown.entry(id).or_default() += 1;
            return Ok(());
        };
        counts[id] += 1;
        match instances.add(event) {
            Added::NotAStep => {}
            Added::Step => return Ok(()),
            Added::Ended(i) => {
                ended(*i);
                return Ok(());
            }
        }
        match schema.kind {
            Kind::Entry if pairing.enter(event).is_none() => un.before_horizon += 1,
            Kind::Exit => match pairing.exit(event) {
                Closes::Entry(open, _) => {
                    un.across_losses += (open.event.stamp < horizon) as u64;
                    add(&open.event, event)
                }
                Closes::Nothing => un.unmatched_exits += 1,
                Closes::Uncertain => un.before_horizon += 1,
            },
            // A start or stop without a stem (a `tracing` event) is an instant.
            Kind::Start if event.stamp >= horizon => {
                let Some(s) = stem_of[id] else { return Ok(()) };
                if paired[s] {
                    let thread = pairing.thread(event.ctx, event.stamp);
                    starts.entry((thread, s)).or_default().push(*event);
                }
            }
            Kind::Stop if event.stamp >= horizon => {
                let Some(s) = stem_of[id] else { return Ok(()) };
                stopped[s] = true;
                let thread = pairing.thread(event.ctx, event.stamp);
                match starts.get_mut(&(thread, s)).and_then(Vec::pop) {
                    Some(open) => add(&open, event),
                    // A stop with no start of its stem at all is a point of its own.
                    None if !starts.keys().any(|k| k.1 == s) => {}
                    None => un.unmatched_exits += 1,
                }
            }
            _ => {}
        }
        Ok(())
    });
    for i in instances.into_open() {
        ended(i);
    }
    let mut spans: Vec<SpanRow> = spans
        .into_iter()
        .map(|(name, t)| SpanRow {
            name,
            instances: t.lifetime.len() as u64,
            lifetime: Dist::of(t.lifetime),
            busy: Dist::of(t.busy),
            idle: Dist::of(t.idle),
            polls: Dist::of(t.polls),
            drop_reentries: t.drops,
        })
        .collect();
    spans.sort_by(|a, b| {
        b.lifetime
            .total
            .cmp(&a.lifetime.total)
            .then(a.name.cmp(&b.name))
    });
    un.open_at_end += pairing.into_open().len() as u64;
    un.open_at_end += starts
        .iter()
        .filter(|(k, _)| stopped[k.1])
        .map(|(_, v)| v.len() as u64)
        .sum::<u64>();
    let covered_ns = first.map_or(0, |f| clock.ticks_to_ns(last - f));
    let secs = covered_ns as f64 / 1e9;
    let row = |name: String, count: u64| PointRow {
        name,
        count,
        rate: if secs > 0.0 { count as f64 / secs } else { 0.0 },
        share: count as f64 / events.max(1) as f64,
    };
    let mut points: Vec<PointRow> = schemas
        .iter()
        .zip(&counts)
        .zip(&view.meta.tracepoints)
        .filter(|((_, &c), _)| c > 0)
        .map(|((_, &c), t)| row(crate::format::marked_name(t), c))
        .chain(
            unknown
                .iter()
                .map(|(id, &c)| row(format!("tracepoint#{id}"), c)),
        )
        .chain((messages > 0).then(|| row("info".into(), messages)))
        .collect();
    points.sort_by(|a, b| b.count.cmp(&a.count).then(a.name.cmp(&b.name)));
    let threads = TaskIndex::threads(&view.meta);
    let processes = TaskIndex::processes(&view.meta);
    let group_name = |e: &Event, key: u64| -> Option<String> {
        let (pid, tid) = (e.ctx >> 32, e.ctx as u32);
        let name = |i: &TaskIndex, list: &[devttrace::TaskInfo], id: u64| {
            i.at(id, e.stamp)
                .map_or("?".to_string(), |c| list[c.index].name.clone())
        };
        Some(match opts.by.as_ref()? {
            By::Thread => format!(
                "{pid}/{tid} ({})",
                name(&threads, &view.meta.threads, e.ctx)
            ),
            By::Process => format!(
                "{pid} ({})",
                name(&processes, &view.meta.processes, pid << 32)
            ),
            By::Cpu => format!("cpu{}", e.type_word.cpu()),
            By::Arg(ref name) => match key {
                0 => format!("(no {name})"),
                k => labels[k as usize - 1].clone(),
            },
        })
    };
    let histogram = opts.histogram.as_ref().map(|h| {
        let mut all: Vec<u64> = durations
            .iter()
            .filter(|((id, _), _)| schemas[*id].name == *h)
            .flat_map(|(_, (v, _))| v.iter().copied())
            .collect();
        all.sort_unstable();
        Histogram {
            name: h.clone(),
            buckets: log2_buckets(&all),
        }
    });
    let mut latencies: Vec<LatencyRow> = durations
        .into_iter()
        .map(|((id, key), (v, example))| LatencyRow {
            name: schemas[id].name.clone(),
            group: group_name(&example, key),
            durations: Dist::of(v),
        })
        .collect();
    let key = |r: &LatencyRow| match opts.sort {
        SortBy::Count => r.durations.count,
        SortBy::Total => r.durations.total,
        SortBy::P99 => r.durations.p99,
        SortBy::Max => r.durations.max,
    };
    latencies.sort_by(|a, b| {
        key(b)
            .cmp(&key(a))
            .then(a.name.cmp(&b.name))
            .then(a.group.cmp(&b.group))
    });
    if let Some(n) = opts.top {
        latencies.truncate(n);
        points.truncate(n);
    }
    let num_cpus = view.version.num_cpus;
    let rings = (view.cpus.iter().enumerate())
        .filter(|&(ring, r)| crate::decode::shown(ring, r, num_cpus, filter))
        .map(|(ring, r)| RingCounts {
            ring: ttrace_layouts::ring::ring_name(ring, num_cpus),
            events: r.events.len() as u64,
            entries: r.committed,
            lost: r.lost,
            incomplete: r.claimed,
            dropped: r.dropped,
            older: r.older,
            orphans: r.orphans,
            malformed: r.malformed,
            damaged: r.damaged,
            after_cut: r.after_cut,
            cleared: r.cleared,
        })
        .collect();
    Report {
        by: opts.by.clone(),
        rings,
        covered_ns,
        events,
        points,
        latencies,
        unmeasured: un,
        spans,
        spans_unmeasured: spans_un,
        histogram,
        snapshot: crate::cause::Taken::of(view.reader())
            .map(|t| t.holding(crate::cause::Held::of_view(view))),
    }
}

/// Buckets `[0]`, `[1]`, `[2, 3]`, `[4, 7]` ... from the first to the last that holds a
/// duration of `sorted`.
fn log2_buckets(sorted: &[u64]) -> Vec<(u64, u64, u64)> {
    let bucket = |ns: u64| {
        if ns == 0 {
            0
        } else {
            64 - ns.leading_zeros() as usize
        }
    };
    let (Some(&lo), Some(&hi)) = (sorted.first(), sorted.last()) else {
        return Vec::new();
    };
    let mut counts = vec![0u64; 65];
    for &d in sorted {
        counts[bucket(d)] += 1;
    }
    (bucket(lo)..=bucket(hi))
        .map(|b| {
            let (low, high) = match b {
                0 => (0, 0),
                b => (1u64 << (b - 1), ((1u128 << b) - 1) as u64),
            };
            (low, high, counts[b])
        })
        .collect()
}

/// Nanoseconds as the table shows them: `950ns`, `12.3us`, `4.56ms`, `1.20s`.
fn dur(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns}ns"),
        1_000..=999_999 => format!("{:.1}us", ns as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.2}ms", ns as f64 / 1e6),
        _ => format!("{:.2}s", ns as f64 / 1e9),
    }
}

/// One row of a durations table: the figures of `d`, then `label`.
fn dist_line(s: &mut String, d: &Dist, label: &str) {
    let _ = writeln!(
        s,
        "{:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}  {label}",
        d.count,
        dur(d.min),
        dur(d.p50),
        dur(d.p90),
        dur(d.p99),
        dur(d.p999),
        dur(d.max),
        dur(d.total),
    );
}

/// The report as text.
pub fn text(r: &Report) -> String {
    let mut s = String::new();
    if let Some(t) = &r.snapshot {
        let _ = writeln!(s, "# {}", t.line());
    }
    let _ = writeln!(
        s,
        "# {} events over {:.6} s",
        r.events,
        r.covered_ns as f64 / 1e9
    );
    let _ = writeln!(
        s,
        "{:>10} {:>12} {:>7}  point",
        "count", "per second", "share"
    );
    for p in &r.points {
        let _ = writeln!(
            s,
            "{:>10} {:>12.1} {:>6.2}%  {}",
            p.count,
            p.rate,
            p.share * 100.0,
            p.name
        );
    }
    let split = match &r.by {
        None => String::new(),
        Some(By::Thread) => ", per thread".to_string(),
        Some(By::Process) => ", per process".to_string(),
        Some(By::Cpu) => ", per cpu".to_string(),
        Some(By::Arg(name)) => format!(", per value of {name}"),
    };
    let _ = writeln!(s, "# durations: entry to exit, start to stop{split}");
    let _ = writeln!(
        s,
        "{:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}  pair",
        "count", "min", "p50", "p90", "p99", "p99.9", "max", "total"
    );
    for l in &r.latencies {
        let group = l
            .group
            .as_ref()
            .map_or(String::new(), |g| format!("  [{g}]"));
        dist_line(&mut s, &l.durations, &format!("{}{group}", l.name));
    }
    let u = r.unmeasured;
    let _ = writeln!(
        s,
        "# not measured: {} open at the end, {} exits with no entry, {} before every ring is complete",
        u.open_at_end, u.unmatched_exits, u.before_horizon
    );
    if u.across_losses > 0 {
        let _ = writeln!(
            s,
            "# measured across a loss: {} pairs opened before every ring is complete (right unless their thread wrote on a CPU whose entries were lost meanwhile)",
            u.across_losses
        );
    }
    if !r.spans.is_empty() || r.spans_unmeasured != SpansUnmeasured::default() {
        let _ = writeln!(
            s,
            "# spans: lifetime (new to close) = busy (its polls) + idle; each poll"
        );
        let _ = writeln!(
            s,
            "{:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}  span",
            "count", "min", "p50", "p90", "p99", "p99.9", "max", "total"
        );
        for sp in &r.spans {
            for (what, d) in [
                ("lifetime", &sp.lifetime),
                ("busy", &sp.busy),
                ("idle", &sp.idle),
                ("poll", &sp.polls),
            ] {
                dist_line(&mut s, d, &format!("{} {what}", sp.name));
            }
        }
        let u = r.spans_unmeasured;
        let drops: u64 = r.spans.iter().map(|sp| sp.drop_reentries).sum();
        let _ = writeln!(
            s,
            "# spans not measured: {} open at the end, {} begun before every ring is complete; {drops} drop re-entries not counted as polls",
            u.open_at_end, u.not_whole
        );
    }
    if let Some(h) = &r.histogram {
        let total: u64 = h.buckets.iter().map(|b| b.2).sum();
        let _ = writeln!(s, "# {}: {total} pairs", h.name);
        let _ = writeln!(s, "{:>24} : {:<9} distribution", "nsecs", "count");
        let most = h.buckets.iter().map(|b| b.2).max().unwrap_or(1).max(1);
        for &(lo, hi, n) in &h.buckets {
            let bar = "*".repeat((n * 40).div_ceil(most) as usize);
            let _ = writeln!(s, "{:>10} -> {:<10} : {:<9} |{bar:<40}|", lo, hi, n);
        }
    }
    s
}

/// The report as JSON, with the same figures as [`text`] and the footer of the command's
/// text report (durations in nanoseconds; the losses of each ring, and in all).
pub fn json(r: &Report) -> String {
    let points: Vec<serde_json::Value> = r
        .points
        .iter()
        .map(|p| {
            serde_json::json!({"name": p.name, "count": p.count, "per_second": p.rate, "share": p.share})
        })
        .collect();
    let latencies: Vec<serde_json::Value> = r
        .latencies
        .iter()
        .map(|l| {
            let mut row = l.durations.json();
            row["name"] = serde_json::json!(l.name);
            row["group"] = serde_json::json!(l.group);
            row
        })
        .collect();
    let rings: Vec<serde_json::Value> = r
        .rings
        .iter()
        .map(|c| {
            serde_json::json!({
                "ring": c.ring, "events": c.events, "entries": c.entries, "lost": c.lost,
                "incomplete": c.incomplete, "dropped": c.dropped, "older_than_since": c.older,
                "orphaned_continuations": c.orphans, "malformed": c.malformed,
                "damaged": c.damaged,
                "written_while_reading": c.after_cut, "cleared": c.cleared,
            })
        })
        .collect();
    let by = r.by.as_ref().map(|b| match b {
        By::Thread => "thread".to_string(),
        By::Process => "process".to_string(),
        By::Cpu => "cpu".to_string(),
        By::Arg(name) => format!("arg:{name}"),
    });
    let u = r.unmeasured;
    let mut v = serde_json::json!({
        "by": by,
        "lost": r.rings.iter().map(|c| c.lost).sum::<u64>(),
        "dropped": r.rings.iter().map(|c| c.dropped).sum::<u64>(),
        "damaged": r.rings.iter().map(|c| c.damaged).sum::<u64>(),
        "rings": rings,
        "events": r.events,
        "covered_ns": r.covered_ns,
        "points": points,
        "durations": latencies,
        "not_measured": {
            "open_at_end": u.open_at_end,
            "exits_with_no_entry": u.unmatched_exits,
            "before_horizon": u.before_horizon,
        },
        "measured_across_losses": u.across_losses,
        "spans": r.spans.iter().map(|sp| serde_json::json!({
            "name": sp.name, "instances": sp.instances, "lifetime": sp.lifetime.json(),
            "busy": sp.busy.json(), "idle": sp.idle.json(), "polls": sp.polls.json(),
            "drop_reentries": sp.drop_reentries,
        })).collect::<Vec<_>>(),
        "spans_not_measured": {
            "open_at_end": r.spans_unmeasured.open_at_end,
            "not_whole": r.spans_unmeasured.not_whole,
        },
    });
    if let Some(t) = &r.snapshot {
        v["snapshot"] = t.json();
    }
    if let Some(h) = &r.histogram {
        v["histogram"] = serde_json::json!({
            "name": h.name,
            "buckets": h.buckets.iter().map(|&(lo, hi, n)| serde_json::json!({"low_ns": lo, "high_ns": hi, "count": n})).collect::<Vec<_>>(),
        });
    }
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_buckets_cover_each_duration_once() {
        let d = [0, 1, 2, 3, 4, 700, 1023, 1024];
        let b = log2_buckets(&d);
        assert_eq!(b.first(), Some(&(0, 0, 1)));
        assert_eq!(b.iter().map(|x| x.2).sum::<u64>(), d.len() as u64);
        assert!(b.contains(&(512, 1023, 2)));
        assert!(b.contains(&(1024, 2047, 1)));
    }
}
