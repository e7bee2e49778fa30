//! `ttrace-reader report`: how often each point fired, and where the time went: the
//! durations of entry/exit pairs (paired as the exports pair them: never across events that
//! may be missing, so a duration is only ever real) and of start/stop pairs of one name stem
//! (`request_start` .. `request_done`), and the lifetimes of `tracing` span instances, as
//! counts, percentiles and log2 histograms; the slowest of each, with their fields.
//!
//! **Rates** are over the time each ring covers: a ring that lost its oldest entries holds
//! every event from its oldest one kept on, one that lost none every event of the trace; so a
//! point's events per second are the sum, over the rings, of its events there divided by the
//! time from the ring's start (its oldest event kept if it lost entries, else the first event
//! reported) to the last event reported. A trace whose rings lost nothing has one span for
//! all; a busy ring that wrapped is not divided by the time an idle ring goes back.
//!
//! **Spans split** (`--by`) as pairs do: by the thread, process or CPU of the instance's
//! `new`, or by a field: the instance's own (its `new`'s or a later `record`'s, the last
//! value), else its nearest ancestor's that has it (so `--by uri` splits the `work` spans of
//! the `request` spans that hold the uri), as they were when the instance closed (a field an
//! ancestor records later does not count). `--slowest` shows every field as it was last
//! recorded, an ancestor's too.

use crate::decode::{Field, SpanFields};
use crate::export::Schema;
use crate::format::Spec;
use crate::merge::{Filter, Item, Merge, Selection};
use devttrace::aux::AuxSnapshots;
use devttrace::status::Switches;
use devttrace::{Event, TaskIndex, View};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;
use ttrace_layouts::device::WAKE_NAME;
use ttrace_model::anatomy::{Part, Parts};
use ttrace_model::incarnation::{Thread, Threads};
use ttrace_model::model::{Model, Step, Why};
use ttrace_model::spans::{Instance, Node};

/// The names of the pairs (the device's pairing: [`ttrace_model::pairs`]).
pub use ttrace_model::pairs::pair_names;

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
    /// Draw the log2 histogram of the pairs of this name, or of the lifetimes of the
    /// instances of the span of this name.
    pub histogram: Option<String>,
    /// List the slowest of each span name (by lifetime) and of each pair name (by duration):
    /// this many of each.
    pub slowest: Option<usize>,
    /// Only the slowest of this span or pair name.
    pub slowest_name: Option<String>,
}

/// How often a point fired.
#[derive(Clone, Debug, PartialEq)]
pub struct PointRow {
    /// Tracepoint name (`info` for messages).
    pub name: String,
    /// Events.
    pub count: u64,
    /// Events per second over the time their rings cover (see the module's documentation).
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
    /// Where their time went.
    pub parts: PartDists,
}

/// Pairs that give no duration, and why.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unmeasured {
    /// Entries (starts) still open at the end of the trace.
    pub open_at_end: u64,
    /// Entries (starts) left open by a thread that ended (its id was given to a later
    /// thread).
    pub thread_ended: u64,
    /// Exits (stops) with no entry (start) open on their thread.
    pub unmatched_exits: u64,
    /// Entries, exits, starts and stops before the time from which every ring is complete
    /// (the model's horizon: `ttrace_model::model`).
    pub before_horizon: u64,
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

/// Where the time of the instances or pairs of one name went ([`ttrace_model::anatomy`]):
/// per part, the distribution over them, nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartDists(pub [Dist; 6]);

impl PartDists {
    /// The distributions of `parts` (per part, a value per instance).
    fn of(parts: [Vec<u64>; 6]) -> PartDists {
        PartDists(parts.map(Dist::of))
    }

    /// Part `p`'s distribution.
    pub fn get(&self, p: Part) -> &Dist {
        &self.0[p as usize]
    }

    /// Whether any part but unknown was measured.
    pub fn known(&self) -> bool {
        Part::ALL
            .iter()
            .any(|&p| p != Part::Unknown && self.get(p).total > 0)
    }

    /// The part with the largest total.
    pub fn dominant(&self) -> Option<Part> {
        let mut t = Parts::default();
        for p in Part::ALL {
            t.add(p, self.get(p).total);
        }
        t.dominant()
    }

    fn json(&self) -> serde_json::Value {
        let map: serde_json::Map<String, serde_json::Value> = Part::ALL
            .iter()
            .map(|&p| (p.name().to_string(), self.get(p).json()))
            .collect();
        serde_json::Value::Object(map)
    }
}

/// `parts` (ticks) in nanoseconds, adding up to the whole's.
fn parts_ns(clock: &devttrace::clock::Clock, parts: &Parts) -> Parts {
    parts.scaled(|t| clock.ticks_to_ns(t))
}

/// The parts of one interval, nanoseconds, by name, as JSON.
fn parts_json(p: &Parts) -> serde_json::Value {
    let map: serde_json::Map<String, serde_json::Value> = p
        .iter()
        .map(|(p, ns)| (p.name().to_string(), serde_json::json!(ns)))
        .collect();
    serde_json::Value::Object(map)
}

/// The span instances of one name (`tracing` spans: [`ttrace_model::spans`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpanRow {
    /// The span's name.
    pub name: String,
    /// The thread, process, CPU or field value, when split.
    pub group: Option<String>,
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
    /// Where their time went.
    pub parts: PartDists,
}

/// Span instances not measured, and why.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpansUnmeasured {
    /// Not closed at the end of the trace.
    pub open_at_end: u64,
    /// Not closed before a new instance was given its id.
    pub superseded: u64,
    /// Begun before every ring is complete, or with no `new` in the trace: polls may be
    /// missing.
    pub not_whole: u64,
}

/// A log2 histogram of durations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Histogram {
    /// The pairs' or span's name.
    pub name: String,
    /// Pairs counted.
    pub pairs: u64,
    /// Span instances counted (their lifetimes).
    pub instances: u64,
    /// `(low, high, count)`: durations in `low..=high` nanoseconds.
    pub buckets: Vec<(u64, u64, u64)>,
}

/// A field of a slow instance (or an argument of a slow pair's entry).
#[derive(Clone, Debug, PartialEq)]
pub struct SlowField {
    /// Its name.
    pub name: String,
    /// Its value as `dump` shows it.
    pub text: String,
    /// Its value for JSON: a number, a bool, or a string (`<lost>` for a string the aux
    /// buffer no longer held).
    pub value: serde_json::Value,
}

/// An ancestor of a slow span instance.
#[derive(Clone, Debug, PartialEq)]
pub struct Scope {
    /// Its span's name.
    pub name: String,
    /// Its fields; `None` if its `new` is not in the trace.
    pub fields: Option<Vec<SlowField>>,
}

/// One of the slowest span instances or pairs of a name.
#[derive(Clone, Debug, PartialEq)]
pub struct Slow {
    /// Where its time went, nanoseconds (they add up to `duration`).
    pub parts: Parts,
    /// A span instance (else a pair).
    pub span: bool,
    /// The span's name, or the pair's (its entry's or start's).
    pub name: String,
    /// Its lifetime (new to close), or the pair's duration, ns.
    pub duration: u64,
    /// A span instance's busy time (its polls), idle time (the rest) and polls.
    pub busy_idle_polls: Option<(u64, u64, u64)>,
    /// When it began (its `new`, or the pair's entry), as `dump`'s time column shows it.
    pub begin: String,
    /// When it began, ns since the device was created.
    pub begin_ns: i64,
    /// Its process.
    pub pid: u32,
    /// A span instance's id in its process.
    pub id: Option<u64>,
    /// The threads that polled it (the pair's thread; an instance never polled: the one
    /// that created it), `pid/tid (name)`, in the order they first did.
    pub threads: Vec<String>,
    /// Its fields (its `new`'s and its `record`s', the last value of each), or the pair's
    /// entry's arguments.
    pub fields: Vec<SlowField>,
    /// A span instance's ancestors, the root first, as far as the trace has them.
    pub ancestors: Vec<Scope>,
    /// Whether the ancestors reach a root (else the furthest one's parent is not in the
    /// trace).
    pub rooted: bool,
    /// How it shows: a span's ancestors and itself, `svc::request{uri="/a"} > svc::work{id=1}`
    /// (`? > ` first when not rooted); a pair's entry as `dump` shows it, `call(fd=3)`.
    pub path: String,
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
    /// The time it covers, ns: from its oldest event kept (if it lost older entries; else
    /// from the first event reported) to the last event reported. Its events' rates are over
    /// this time.
    pub covered_ns: u64,
}

impl RingCounts {
    /// The counts of the ring named `ring` as a report says them: its `events` and the
    /// [`Accounting`](devttrace::Accounting) of its read (the one place the names differ:
    /// `committed` is `entries`, `claimed` is `incomplete`), over `covered_ns`.
    pub fn of(ring: String, events: u64, a: &devttrace::Accounting, covered_ns: u64) -> Self {
        RingCounts {
            ring,
            events,
            entries: a.committed,
            lost: a.lost,
            incomplete: a.claimed,
            dropped: a.dropped,
            older: a.older,
            orphans: a.orphans,
            malformed: a.malformed,
            damaged: a.damaged,
            after_cut: a.after_cut,
            cleared: a.cleared,
            covered_ns,
        }
    }
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
    /// How many of each name `--slowest` asked for.
    pub slowest_each: Option<usize>,
    /// The slowest span instances and pairs asked for: by name, the name of the slowest
    /// first; each name's slowest first.
    pub slowest: Vec<Slow>,
    /// Why the snapshot file reported on was taken, if it says.
    pub snapshot: Option<crate::cause::Taken>,
    /// What the device says of the kernel's switches (the parts on and off the CPU).
    pub switches: Switches,
    /// Whether the trace holds any wake of a task (the parts between polls).
    pub wakes: bool,
    /// The counts of the rings reported on (those the filter selects; a shared ring only
    /// once written to), as the footer shows them.
    pub rings: Vec<RingCounts>,
}

/// The names of the arguments of the pairs' entries and starts, sorted (what `--by` takes
/// beside `thread`, `process` and `cpu`, with the spans' fields: [`span_fields`]).
pub fn pair_arguments(meta: &devttrace::Metadata) -> Vec<String> {
    let schemas = Schema::all(meta);
    let model = Model::whole(meta);
    let mut names: Vec<String> = (0..schemas.len())
        .filter(|&id| model.opens(id as u16) && !meta.tracepoints[id].role.is_span())
        .flat_map(|id| schemas[id].args.iter().map(|(name, _)| name.clone()))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The names of the fields of the trace's spans (those their `new` and `record` steps
/// give), sorted: what `--by` takes too.
pub fn span_fields(meta: &devttrace::Metadata) -> Vec<String> {
    let mut names: Vec<String> = Schema::all(meta)
        .into_iter()
        .flat_map(|s| {
            let first = match s.role {
                devttrace::Role::SpanNew => 2,
                devttrace::Role::SpanRecord => 1,
                _ => s.args.len(),
            };
            s.args.into_iter().skip(first).map(|(name, _)| name)
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The times of the instances of one span name, nanoseconds, as they end.
#[derive(Default)]
struct SpanTimes {
    /// Per part, its nanoseconds in each instance.
    parts: [Vec<u64>; 6],
    lifetime: Vec<u64>,
    busy: Vec<u64>,
    idle: Vec<u64>,
    polls: Vec<u64>,
    /// Drop re-entries left out.
    drops: u64,
}

/// The durations of the pairs of one name and group, nanoseconds, an event of the group to
/// name it by, and per part, its nanoseconds in each pair.
type PairTimes = (Vec<u64>, Event, [Vec<u64>; 6]);

/// The slowest `n` of one name so far, offered as they come: kept loosely (up to `2n`),
/// trimmed now and then, sorted at the end (longest first, then earliest).
struct Slowest<T> {
    n: usize,
    /// `(duration, begin stamp, what)`.
    kept: Vec<(u64, u64, T)>,
    /// Once `n` are kept, the shortest of them: a shorter one is not kept.
    floor: u64,
}

impl<T> Slowest<T> {
    fn new(n: usize) -> Slowest<T> {
        Slowest {
            n,
            kept: Vec::new(),
            floor: 0,
        }
    }

    fn offer(&mut self, duration: u64, begin: u64, what: impl FnOnce() -> T) {
        if self.kept.len() >= self.n && duration < self.floor {
            return;
        }
        self.kept.push((duration, begin, what()));
        if self.kept.len() >= 2 * self.n {
            self.trim();
        }
    }

    fn trim(&mut self) {
        self.kept
            .sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        self.kept.truncate(self.n);
        if self.kept.len() == self.n {
            self.floor = self.kept.last().map_or(0, |k| k.0);
        }
    }

    fn into_sorted(mut self) -> Vec<(u64, u64, T)> {
        self.trim();
        self.kept
    }
}

/// A word as JSON: a number, a bool, or text (a string's text, `<lost>` when the aux buffer
/// no longer held it; a value table's names; a character).
fn json_value(spec: &Spec, w: u64, aux: &AuxSnapshots) -> serde_json::Value {
    match spec {
        Spec::Bool => serde_json::json!(w != 0),
        Spec::Unsigned => serde_json::json!(w),
        Spec::Signed => serde_json::json!(w as i64),
        Spec::Float => {
            let f = f64::from_bits(w);
            match f.is_finite() {
                true => serde_json::json!(f),
                false => serde_json::json!(f.to_string()),
            }
        }
        Spec::Str => serde_json::json!(match crate::format::string_arg(aux, w) {
            Some(r) => {
                let dots = if r.truncated { "..." } else { "" };
                format!("{}{dots}", String::from_utf8_lossy(r.bytes))
            }
            None => "<lost>".to_string(),
        }),
        _ => {
            let mut text = Vec::new();
            crate::format::word(&mut text, spec, w, aux);
            serde_json::json!(String::from_utf8_lossy(&text))
        }
    }
}

/// The fields of `node` (its `new`'s, then its `record`s', the last value of each).
fn node_fields(fields: &SpanFields<'_>, node: &Node) -> Vec<Field> {
    let mut f = Vec::new();
    for e in node.field_steps() {
        fields.set(&e, &mut f);
    }
    f
}

/// Reports the events `view` holds that `filter` keeps.
pub fn build(view: &View<'_>, filter: &Filter, opts: &Options) -> Report {
    let schemas = Schema::all(&view.meta);
    let clock = view.version.clock;
    let n = schemas.len();
    let num_cpus = view.version.num_cpus;
    let span_text = SpanFields::new(view);
    let threads = TaskIndex::threads(&view.meta);
    let processes = TaskIndex::processes(&view.meta);
    let task_name = |index: &TaskIndex, list: &[devttrace::TaskInfo], id: u64, stamp: u64| {
        index
            .at(id, stamp)
            .map_or("?".to_string(), |c| list[c.index].name.clone())
    };
    let thread_label = |ctx: u64, stamp: u64| {
        format!(
            "{}/{} ({})",
            ctx >> 32,
            ctx as u32,
            task_name(&threads, &view.meta.threads, ctx, stamp)
        )
    };
    let process_label = |pid: u64, stamp: u64| {
        format!(
            "{pid} ({})",
            task_name(&processes, &view.meta.processes, pid << 32, stamp)
        )
    };
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
    // The group of a span instance measured (its `new` is `new`).
    let span_group = |i: &Instance, new: &Event| -> Option<String> {
        Some(match opts.by.as_ref()? {
            By::Thread => thread_label(new.ctx, new.stamp),
            By::Process => process_label(i.pid as u64, new.stamp),
            By::Cpu => format!("cpu{}", new.type_word.cpu()),
            By::Arg(name) => {
                // Its own field, else its nearest ancestor's.
                let own = i.node.iter().cloned();
                let chain = own.chain(i.node.iter().flat_map(|n| n.ancestors()));
                for node in chain {
                    let fields = node_fields(&span_text, &node);
                    if let Some(f) = fields.iter().find(|f| f.name == *name) {
                        let mut t = format!("{name}=").into_bytes();
                        span_text.value(&mut t, f);
                        return Some(String::from_utf8_lossy(&t).into_owned());
                    }
                }
                format!("(no {name})")
            }
        })
    };
    let wanted =
        |name: &str| opts.slowest.is_some() && opts.slowest_name.as_ref().is_none_or(|w| w == name);
    // Every event is fed to the model, whatever the filter selects; a pair is shown when
    // its beginning is selected, an unpaired event when it is.
    let mut model = Model::new(&view.meta, &view.cpus);
    // Fields and parents, for what needs them.
    if opts.slowest.is_some() || matches!(opts.by, Some(By::Arg(_))) {
        model = model.keep_fields();
    }
    let selection = Selection::new(&view.meta, clock, filter);
    let all = selection.everything();
    // What opens something, by tracepoint id: those events' selections are kept until what
    // they open ends.
    let opens: Vec<bool> = (0..n).map(|id| model.opens(id as u16)).collect();
    let is_span: Vec<bool> = view
        .meta
        .tracepoints
        .iter()
        .map(|t| t.role.is_span())
        .collect();
    let mut spans: BTreeMap<(String, Option<String>), SpanTimes> = BTreeMap::new();
    let mut spans_un = SpansUnmeasured::default();
    let mut slow_spans: BTreeMap<String, Slowest<Instance>> = BTreeMap::new();
    let mut ended = |i: Instance, why: Option<Why>| {
        let (Some(lifetime), Some(new)) = (i.lifetime(), i.new) else {
            match (i.close, why) {
                (None, Some(Why::Superseded)) => spans_un.superseded += 1,
                (None, _) => spans_un.open_at_end += 1,
                (Some(_), _) => spans_un.not_whole += 1,
            }
            return;
        };
        let name = span_text.name(i.tracepoint);
        let e = spans
            .entry((name.clone(), span_group(&i, &new)))
            .or_default();
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
        for (p, ns) in parts_ns(&clock, &i.parts).iter() {
            e.parts[p as usize].push(ns);
        }
        if wanted(&name) {
            let k = opts.slowest.unwrap_or(1);
            slow_spans
                .entry(name)
                .or_insert_with(|| Slowest::new(k))
                .offer(lifetime, new.stamp, || i);
        }
    };
    // Events by tracepoint id (the last: ids the metadata does not know), and messages; the
    // same per ring, for the rates.
    let mut counts = vec![0u64; n + 1];
    let mut unknown: BTreeMap<usize, u64> = BTreeMap::new();
    let mut messages = 0u64;
    let mut in_ring: Vec<Vec<u64>> = vec![Vec::new(); view.cpus.len()];
    let mut unknown_in_ring: BTreeMap<(usize, usize), u64> = BTreeMap::new();
    let mut messages_in_ring = vec![0u64; view.cpus.len()];
    // Durations by (tracepoint id, group), with an event of the group to name it by, and
    // per part, its nanoseconds in each pair.
    let mut durations: HashMap<(usize, u64), PairTimes> = HashMap::new();
    // The slowest pairs asked for, by tracepoint id: their entries (starts).
    let slow_pair_ids: Vec<bool> = schemas.iter().map(|s| wanted(&s.name)).collect();
    let mut slow_pairs: BTreeMap<usize, Slowest<(Event, Parts)>> = BTreeMap::new();
    let mut un = Unmeasured::default();
    let (mut first, mut last, mut events) = (None, 0u64, 0u64);
    let mut add = |open: &Event, close: &Event, parts: Option<&Parts>| {
        let ticks = close.stamp.saturating_sub(open.stamp);
        let ns = clock.ticks_to_ns(ticks);
        let id = open.type_word.tracepoint() as usize;
        let d = durations
            .entry((id, group_key(open)))
            .or_insert_with(|| (Vec::new(), *open, Default::default()));
        d.0.push(ns);
        // The parts are kept from the first pair whose parts the trace tells (the pairs
        // before it all unknown): a trace with no switch and no wake keeps none.
        let unknown = Parts::unknown(ns);
        match parts {
            Some(p) => {
                if d.2[0].len() + 1 < d.0.len() {
                    for &before in &d.0[d.2[0].len()..d.0.len() - 1] {
                        for (p, ns) in Parts::unknown(before).iter() {
                            d.2[p as usize].push(ns);
                        }
                    }
                }
                for (p, ns) in parts_ns(&clock, p).iter() {
                    d.2[p as usize].push(ns);
                }
            }
            None if !d.2[0].is_empty() => {
                for (p, ns) in unknown.iter() {
                    d.2[p as usize].push(ns);
                }
            }
            None => {}
        }
        if slow_pair_ids.get(id).copied().unwrap_or(false) {
            let k = opts.slowest.unwrap_or(1);
            slow_pairs
                .entry(id)
                .or_insert_with(|| Slowest::new(k))
                .offer(ns, open.stamp, || {
                    (*open, parts.copied().unwrap_or(Parts::unknown(ticks)))
                });
        }
    };
    let rings = view.cpus.len();
    let mut count = |item: &Item| {
        let (event, ring) = match item {
            Item::Message(r) => {
                messages += 1;
                events += 1;
                first.get_or_insert(r.timestamp);
                last = last.max(r.timestamp);
                // Its ring is not known here: that of its CPU's restartable ring.
                let ring = r.cpu as usize % (num_cpus.max(1) as usize);
                if let Some(c) = messages_in_ring.get_mut(ring) {
                    *c += 1;
                }
                return;
            }
            Item::Point { event, cpu } => (event, *cpu),
        };
        events += 1;
        first.get_or_insert(event.stamp);
        last = last.max(event.stamp);
        let id = event.type_word.tracepoint() as usize;
        if id >= n {
            *unknown.entry(id).or_default() += 1;
            *unknown_in_ring.entry((id, ring)).or_default() += 1;
            return;
        }
        counts[id] += 1;
        if ring < rings {
            let r = &mut in_ring[ring];
            if r.is_empty() {
                r.resize(n, 0);
            }
            r[id] += 1;
        }
    };
    // The events selected that opened what is still open (when the filter does not select
    // everything), by stamp, writer, slot and tracepoint.
    let mut chosen: HashSet<(u64, u64, u32, u16)> = HashSet::new();
    let key = |e: &Event| (e.stamp, e.ctx, e.slot, e.type_word.tracepoint());
    // Renders a step of the model; `now` says whether the event fed is selected.
    let mut render = |step: Step<&Event>, now: bool, chosen: &mut HashSet<(u64, u64, u32, u16)>| {
        let mut pick = |e: &Event| all || chosen.remove(&key(e));
        match step {
            Step::CallEnd {
                begin, end, parts, ..
            }
            | Step::StemEnd { begin, end, parts }
                if pick(begin) =>
            {
                add(begin, end, parts.as_deref())
            }
            Step::SpanEnd(i) if i.new.as_ref().map_or(all, &mut pick) => ended(*i, None),
            Step::SpanUnended { instance, why } if instance.new.as_ref().map_or(all, &mut pick) => {
                ended(*instance, Some(why))
            }
            Step::Unpaired { event, why } => {
                let id = event.type_word.tracepoint() as usize;
                // A poll's exit with no enter is the instance's (counted there).
                if is_span.get(id).copied().unwrap_or(false) {
                    return;
                }
                let selected = match opens.get(id).copied().unwrap_or(false) {
                    true => pick(event),
                    false => now,
                };
                if selected {
                    match why {
                        Why::BeforeHorizon => un.before_horizon += 1,
                        Why::PartnerMissing | Why::AcrossGap => un.unmatched_exits += 1,
                        Why::ThreadEnded => un.thread_ended += 1,
                        Why::OpenAtEnd | Why::Superseded => un.open_at_end += 1,
                    }
                }
            }
            _ => {}
        }
    };
    let mut feed = |event: &Event, ring: usize, chosen: &mut HashSet<_>| {
        let now = all || selection.point(ring, event);
        if !all && now && opens.get(event.type_word.tracepoint() as usize) == Some(&true) {
            chosen.insert(key(event));
        }
        model.feed(event, &mut |step| render(step, now, chosen));
    };
    if all {
        let _ = Merge::view(view, filter).try_for_each_ref(|item| {
            count(item);
            if let Item::Point { event, cpu } = item {
                feed(event, *cpu, &mut chosen);
            }
            Ok::<(), ()>(())
        });
    } else {
        // What is shown, then every event for the model.
        let _ = Merge::view(view, filter).try_for_each_ref(|item| {
            count(item);
            Ok::<(), ()>(())
        });
        let _ = Merge::view(view, &Filter::default()).try_for_each_ref(|item| {
            if let Item::Point { event, cpu } = item {
                feed(event, *cpu, &mut chosen);
            }
            Ok::<(), ()>(())
        });
    }
    model.finish(&mut |step| render(step, false, &mut chosen));
    let histogram = opts.histogram.as_ref().map(|h| {
        let mut all: Vec<u64> = durations
            .iter()
            .filter(|((id, _), _)| schemas[*id].name == *h)
            .flat_map(|(_, (v, _, _))| v.iter().copied())
            .collect();
        let pairs = all.len() as u64;
        all.extend(
            spans
                .iter()
                .filter(|((name, _), _)| name == h)
                .flat_map(|(_, t)| t.lifetime.iter().copied()),
        );
        all.sort_unstable();
        Histogram {
            name: h.clone(),
            pairs,
            instances: all.len() as u64 - pairs,
            buckets: log2_buckets(&all),
        }
    });
    let mut spans: Vec<SpanRow> = spans
        .into_iter()
        .map(|((name, group), t)| SpanRow {
            name,
            group,
            instances: t.lifetime.len() as u64,
            lifetime: Dist::of(t.lifetime),
            busy: Dist::of(t.busy),
            idle: Dist::of(t.idle),
            polls: Dist::of(t.polls),
            drop_reentries: t.drops,
            parts: PartDists::of(t.parts),
        })
        .collect();
    let span_key = |r: &SpanRow| match opts.sort {
        SortBy::Count => r.instances,
        SortBy::Total => r.lifetime.total,
        SortBy::P99 => r.lifetime.p99,
        SortBy::Max => r.lifetime.max,
    };
    spans.sort_by(|a, b| {
        span_key(b)
            .cmp(&span_key(a))
            .then(a.name.cmp(&b.name))
            .then(a.group.cmp(&b.group))
    });
    let covered_ns = first.map_or(0, |f| clock.ticks_to_ns(last - f));
    // The time each ring covers: from its oldest event kept if it lost older entries (and
    // none was left out as older than --since), else from the first event reported; to the
    // last event reported.
    let ring_covered: Vec<u64> = view
        .cpus
        .iter()
        .map(|r| {
            let Some(f) = first else { return 0 };
            let from = match (r.lost > 0 && r.older == 0, r.events.first()) {
                (true, Some(m)) => m.stamp.max(f),
                (true, None) => last,
                (false, _) => f,
            };
            clock.ticks_to_ns(last.saturating_sub(from))
        })
        .collect();
    let secs = covered_ns as f64 / 1e9;
    // Events per second of a row whose events are `in_ring(ring)` on each ring: each ring's
    // over its time (over the whole span for a ring that covers no time).
    let rate = |in_ring: &dyn Fn(usize) -> u64| -> f64 {
        (0..rings)
            .map(|ring| {
                let c = in_ring(ring);
                let t = ring_covered[ring] as f64 / 1e9;
                match (c, t > 0.0, secs > 0.0) {
                    (0, _, _) => 0.0,
                    (c, true, _) => c as f64 / t,
                    (c, false, true) => c as f64 / secs,
                    _ => 0.0,
                }
            })
            .sum()
    };
    let row = |name: String, count: u64, rate: f64| PointRow {
        name,
        count,
        rate,
        share: count as f64 / events.max(1) as f64,
    };
    let mut points: Vec<PointRow> = (0..n)
        .filter(|&id| counts[id] > 0)
        .map(|id| {
            let r = rate(&|ring| in_ring[ring].get(id).copied().unwrap_or(0));
            row(
                crate::format::marked_name(&view.meta.tracepoints[id]),
                counts[id],
                r,
            )
        })
        .chain(unknown.iter().map(|(&id, &c)| {
            let r = rate(&|ring| unknown_in_ring.get(&(id, ring)).copied().unwrap_or(0));
            row(format!("tracepoint#{id}"), c, r)
        }))
        .chain((messages > 0).then(|| {
            let r = rate(&|ring| messages_in_ring[ring]);
            row("info".into(), messages, r)
        }))
        .collect();
    points.sort_by(|a, b| b.count.cmp(&a.count).then(a.name.cmp(&b.name)));
    let group_name = |e: &Event, key: u64| -> Option<String> {
        Some(match opts.by.as_ref()? {
            By::Thread => thread_label(e.ctx, e.stamp),
            By::Process => process_label(e.ctx >> 32, e.stamp),
            By::Cpu => format!("cpu{}", e.type_word.cpu()),
            By::Arg(ref name) => match key {
                0 => format!("(no {name})"),
                k => labels[k as usize - 1].clone(),
            },
        })
    };
    let mut latencies: Vec<LatencyRow> = durations
        .into_iter()
        .map(|((id, key), (v, example, parts))| LatencyRow {
            name: schemas[id].name.clone(),
            group: group_name(&example, key),
            durations: Dist::of(v),
            parts: PartDists::of(parts),
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
        spans.truncate(n);
    }
    let slowest = slowest_of(
        view,
        &span_text,
        &schemas,
        slow_spans,
        slow_pairs,
        &thread_label,
    );
    let rings = (view.cpus.iter().enumerate())
        .filter(|&(ring, r)| crate::decode::shown(ring, r, num_cpus, filter))
        .map(|(ring, r)| {
            RingCounts::of(
                ttrace_layouts::ring::ring_name(ring, num_cpus),
                r.events.len() as u64,
                &r.counts,
                ring_covered[ring],
            )
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
        slowest_each: opts.slowest,
        slowest,
        snapshot: crate::cause::Taken::of(view.reader())
            .map(|t| t.holding(crate::cause::Held::of_view(view))),
        switches: view.status.switches,
        wakes: (view.meta.tracepoints.iter())
            .any(|t| t.name == WAKE_NAME && counts.get(t.id as usize).is_some_and(|&c| c > 0)),
    }
}

/// The slowest span instances and pairs kept, as the report lists them: by name, the name
/// whose slowest is the longest first (then by name); each name's longest first.
fn slowest_of(
    view: &View<'_>,
    span_text: &SpanFields<'_>,
    schemas: &[Schema],
    spans: BTreeMap<String, Slowest<Instance>>,
    pairs: BTreeMap<usize, Slowest<(Event, Parts)>>,
    thread_label: &dyn Fn(u64, u64) -> String,
) -> Vec<Slow> {
    let clock = view.version.clock;
    let slow_field = |name: &str, spec: &Spec, w: u64| {
        let mut text = Vec::new();
        crate::format::word(&mut text, spec, w, &view.aux);
        SlowField {
            name: name.to_string(),
            text: String::from_utf8_lossy(&text).into_owned(),
            value: json_value(spec, w, &view.aux),
        }
    };
    let of_fields = |fields: &[Field]| -> Vec<SlowField> {
        fields
            .iter()
            .map(|f| slow_field(&f.name, &f.spec, f.word))
            .collect()
    };
    let mut groups: Vec<Vec<Slow>> = Vec::new();
    for (name, kept) in spans {
        let group = kept.into_sorted().into_iter().map(|(lifetime, begin, i)| {
            // Its ancestors, the root first, then itself: (tracepoint, fields if known).
            let mut chain: Vec<(u16, Option<Vec<Field>>)> = Vec::new();
            let mut rooted = false;
            if let Some(node) = &i.node {
                for a in node.ancestors().iter().rev() {
                    let fields = a.new.map(|_| node_fields(span_text, a));
                    chain.push((a.tracepoint, fields));
                }
                rooted = node.rooted();
                chain.push((i.tracepoint, Some(node_fields(span_text, node))));
            } else {
                chain.push((i.tracepoint, None));
            }
            let mut path = Vec::new();
            if !rooted {
                path.extend_from_slice(b"? > ");
            }
            for (k, (tp, fields)) in chain.iter().enumerate() {
                if k > 0 {
                    path.extend_from_slice(b" > ");
                }
                span_text.scope(&mut path, *tp, fields.as_deref());
            }
            let own = chain.pop().and_then(|c| c.1).unwrap_or_default();
            let mut threads: Vec<String> = Vec::new();
            let mut seen: Vec<u64> = Vec::new();
            for p in &i.polls {
                if !seen.contains(&p.ctx) {
                    seen.push(p.ctx);
                    threads.push(thread_label(p.ctx, p.enter));
                }
            }
            if threads.is_empty() {
                if let Some(new) = &i.new {
                    threads.push(thread_label(new.ctx, new.stamp));
                }
            }
            let busy = clock.ticks_to_ns(i.busy());
            Slow {
                parts: parts_ns(&clock, &i.parts),
                span: true,
                name: name.clone(),
                duration: lifetime,
                busy_idle_polls: Some((busy, lifetime.saturating_sub(busy), i.polls.len() as u64)),
                begin: crate::decode::seconds(&clock, begin),
                begin_ns: clock.since_anchor_ns(begin),
                pid: i.pid,
                id: Some(i.id),
                threads,
                fields: of_fields(&own),
                ancestors: chain
                    .iter()
                    .map(|(tp, fields)| Scope {
                        name: span_text.name(*tp),
                        fields: fields.as_deref().map(of_fields),
                    })
                    .collect(),
                rooted,
                path: String::from_utf8_lossy(&path).into_owned(),
            }
        });
        groups.push(group.collect());
    }
    let decoder = crate::decode::Decoder::new(view, crate::decode::TimeFormat::Relative);
    for (id, kept) in pairs {
        let group = kept
            .into_sorted()
            .into_iter()
            .map(|(ns, begin, (open, parts))| {
                let mut path = Vec::new();
                decoder.text(
                    &Item::Point {
                        cpu: 0,
                        event: open,
                    },
                    &mut path,
                );
                let args = open.args().iter().zip(&schemas[id].args);
                Slow {
                    parts: parts_ns(&clock, &parts),
                    span: false,
                    name: schemas[id].name.clone(),
                    duration: ns,
                    busy_idle_polls: None,
                    begin: crate::decode::seconds(&clock, begin),
                    begin_ns: clock.since_anchor_ns(begin),
                    pid: (open.ctx >> 32) as u32,
                    id: None,
                    threads: vec![thread_label(open.ctx, open.stamp)],
                    fields: args
                        .map(|(&w, (name, spec))| slow_field(name, spec, w))
                        .collect(),
                    ancestors: Vec::new(),
                    rooted: true,
                    path: String::from_utf8_lossy(&path).into_owned(),
                }
            });
        groups.push(group.collect());
    }
    groups.retain(|g| !g.is_empty());
    groups.sort_by(|a, b| {
        b[0].duration
            .cmp(&a[0].duration)
            .then(a[0].name.cmp(&b[0].name))
            .then(b[0].span.cmp(&a[0].span))
    });
    groups.into_iter().flatten().collect()
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

/// What the report says of the kernel's view (the parts on and off the CPU) and of the
/// runtime's (the wakes, between polls).
fn sources_line(w: &Switches, wakes: bool) -> String {
    let parts = "on_cpu, preempted, blocked (inside calls, pairs and polls, from the kernel's switches); scheduled, idle (between polls, from the runtime's wakes); unknown (what the trace cannot tell)";
    let kernel = match w.line() {
        Some(line) => line,
        None => "switches not recorded (TTRACE_SCHED=1 records them): the time inside is unknown"
            .to_string(),
    };
    let runtime = match wakes {
        true => "",
        false => "; no wakes in the trace (tokio's instrumentation: RUSTFLAGS=\"--cfg tokio_unstable\" and tokio's feature \"tracing\"): the time between polls is unknown",
    };
    format!("{parts}; {kernel}{runtime}")
}

/// The rows of the parts of `d` that are not all zero, under `label`'s, when any part but
/// unknown was measured.
fn part_lines(s: &mut String, d: &PartDists, label: &str) {
    if !d.known() {
        return;
    }
    for p in Part::ALL {
        if d.get(p).total > 0 {
            dist_line(s, d.get(p), &format!("{label} {}", p.name()));
        }
    }
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
    // Where a ring lost older entries, the rates are over less time than that.
    if r.rings
        .iter()
        .any(|c| c.events > 0 && c.covered_ns < r.covered_ns)
    {
        let each: Vec<String> = (r.rings.iter())
            .filter(|c| c.events > 0)
            .map(|c| format!("{} {:.6} s", c.ring, c.covered_ns as f64 / 1e9))
            .collect();
        let _ = writeln!(
            s,
            "# rates: per second of the time each ring covers (a ring that lost older entries: from its oldest kept): {}",
            each.join(", ")
        );
    }
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
    // Said where the trace can tell any of it: a program that records no switch and no wake
    // has only unknown parts, which the report leaves out.
    let told = r.switches.line().is_some() || r.wakes;
    if told && (!r.latencies.is_empty() || !r.spans.is_empty()) {
        let _ = writeln!(
            s,
            "# where the time went: {}",
            sources_line(&r.switches, r.wakes)
        );
    }
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
        part_lines(&mut s, &l.parts, &format!("{}{group}", l.name));
    }
    let u = r.unmeasured;
    let _ = writeln!(
        s,
        "# not measured: {} open at the end, {} exits with no entry, {} before every ring is complete",
        u.open_at_end, u.unmatched_exits, u.before_horizon
    );
    if u.thread_ended > 0 {
        let _ = writeln!(
            s,
            "# not measured: {} left open by a thread that ended",
            u.thread_ended
        );
    }
    if !r.spans.is_empty() || r.spans_unmeasured != SpansUnmeasured::default() {
        let _ = writeln!(
            s,
            "# spans: lifetime (new to close) = busy (its polls) + idle; each poll{split}"
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
                let group = sp
                    .group
                    .as_ref()
                    .map_or(String::new(), |g| format!("  [{g}]"));
                dist_line(&mut s, d, &format!("{} {what}{group}", sp.name));
            }
            let group = (sp.group.as_ref()).map_or(String::new(), |g| format!("  [{g}]"));
            part_lines(&mut s, &sp.parts, &format!("{}{group}", sp.name));
        }
        let u = r.spans_unmeasured;
        let drops: u64 = r.spans.iter().map(|sp| sp.drop_reentries).sum();
        let _ = writeln!(
            s,
            "# spans not measured: {} open at the end, {} begun before every ring is complete; {drops} drop re-entries not counted as polls",
            u.open_at_end, u.not_whole
        );
    }
    if let Some(k) = r.slowest_each {
        let _ = writeln!(
            s,
            "# slowest: the {k} longest of each span (lifetime = busy + idle, polls; begun at, as dump shows time; on the threads that polled it) and of each pair"
        );
        if r.slowest.is_empty() {
            let _ = writeln!(s, "# (no span instance or pair measured)");
        }
        for w in &r.slowest {
            let _ = write!(s, "{}  {}", w.name, dur(w.duration));
            if let Some((busy, idle, polls)) = w.busy_idle_polls {
                let _ = write!(
                    s,
                    " = busy {} + idle {}, {polls} polls",
                    dur(busy),
                    dur(idle)
                );
            }
            if w.parts.known() {
                let mut parts: Vec<(Part, u64)> = w.parts.iter().filter(|p| p.1 > 0).collect();
                parts.sort_by_key(|p| std::cmp::Reverse(p.1));
                let each: Vec<String> = (parts.iter())
                    .map(|&(p, ns)| format!("{} {}", p.name(), dur(ns)))
                    .collect();
                let _ = write!(s, "  ({}: mostly {})", each.join(", "), parts[0].0.name());
            }
            let _ = write!(s, "  begun {}", w.begin);
            if let Some(id) = w.id {
                let _ = write!(s, "  span {id:#x} of pid {}", w.pid);
            }
            let _ = writeln!(s, "  on {}", w.threads.join(", "));
            let _ = writeln!(s, "    {}", w.path);
        }
    }
    if let Some(h) = &r.histogram {
        let what = match (h.pairs, h.instances) {
            (p, 0) => format!("{p} pairs"),
            (0, i) => format!("{i} span instances (lifetime)"),
            (p, i) => format!("{p} pairs, {i} span instances (lifetime)"),
        };
        let _ = writeln!(s, "# {}: {what}", h.name);
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
            row["parts"] = l.parts.json();
            row["dominant"] = serde_json::json!(l.parts.dominant().map(Part::name));
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
                "covered_ns": c.covered_ns,
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
            "thread_ended": u.thread_ended,
        },
        "spans": r.spans.iter().map(|sp| serde_json::json!({
            "name": sp.name, "group": sp.group, "instances": sp.instances, "lifetime": sp.lifetime.json(),
            "busy": sp.busy.json(), "idle": sp.idle.json(), "polls": sp.polls.json(),
            "drop_reentries": sp.drop_reentries,
            "parts": sp.parts.json(), "dominant": sp.parts.dominant().map(Part::name),
        })).collect::<Vec<_>>(),
        "switches": {
            "threads": r.switches.threads, "unobserved": r.switches.unobserved,
            "refused": r.switches.refused, "lost": r.switches.lost,
        },
        "wakes": r.wakes,
        "spans_not_measured": {
            "open_at_end": r.spans_unmeasured.open_at_end,
            "superseded": r.spans_unmeasured.superseded,
            "not_whole": r.spans_unmeasured.not_whole,
        },
    });
    if let Some(t) = &r.snapshot {
        v["snapshot"] = t.json();
    }
    if r.slowest_each.is_some() {
        v["slowest"] = r.slowest.iter().map(slow_json).collect();
    }
    if let Some(h) = &r.histogram {
        v["histogram"] = serde_json::json!({
            "name": h.name, "pairs": h.pairs, "instances": h.instances,
            "buckets": h.buckets.iter().map(|&(lo, hi, n)| serde_json::json!({"low_ns": lo, "high_ns": hi, "count": n})).collect::<Vec<_>>(),
        });
    }
    v.to_string()
}

/// Fields as a JSON object, by name.
fn fields_json(fields: &[SlowField]) -> serde_json::Value {
    let map: serde_json::Map<String, serde_json::Value> = fields
        .iter()
        .map(|f| (f.name.clone(), f.value.clone()))
        .collect();
    serde_json::Value::Object(map)
}

/// One of the slowest as JSON: `kind` `span` (its `lifetime_ns`, `busy_ns`, `idle_ns`,
/// `polls`, `id`, `fields`, `ancestors` root first) or `pair` (its `duration_ns`, `args`).
fn slow_json(w: &Slow) -> serde_json::Value {
    let mut v = serde_json::json!({
        "kind": if w.span { "span" } else { "pair" },
        "name": w.name,
        "begin": w.begin,
        "begin_ns": w.begin_ns,
        "pid": w.pid,
        "threads": w.threads,
        "path": w.path,
        "parts": parts_json(&w.parts),
        "dominant": w.parts.dominant().map(Part::name),
    });
    match w.busy_idle_polls {
        Some((busy, idle, polls)) => {
            v["lifetime_ns"] = serde_json::json!(w.duration);
            v["busy_ns"] = serde_json::json!(busy);
            v["idle_ns"] = serde_json::json!(idle);
            v["polls"] = serde_json::json!(polls);
            v["id"] = serde_json::json!(w.id);
            v["fields"] = fields_json(&w.fields);
            v["ancestors"] = w
                .ancestors
                .iter()
                .map(|a| {
                    serde_json::json!({
                        "name": a.name,
                        "fields": a.fields.as_deref().map(fields_json),
                    })
                })
                .collect();
            v["rooted"] = serde_json::json!(w.rooted);
        }
        None => {
            v["duration_ns"] = serde_json::json!(w.duration);
            v["args"] = fields_json(&w.fields);
        }
    }
    v
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
