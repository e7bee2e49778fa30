//! Traces for other tools: uftrace data, CTF for babeltrace2 and Trace Compass, and Chrome
//! Trace Event JSON for Perfetto.
//!
//! Every exporter reads the merged items of a [`View`](devttrace::View) once, in time order,
//! and writes as it goes: memory holds only what a format needs across events (per thread,
//! the entries still open), never the trace.

pub mod thread;
pub mod chrome;
pub mod ctf;
pub mod uftrace;

use crate::decode::Tally;
use crate::format::{self, Piece, Spec};
use crate::merge::{Item, Merge};
use devttrace::{Event, Metadata, RingIndex};
use foldhash::HashMap as FoldHashMap;
use std::collections::HashMap;
use thread::{Thread, Threads};
use ttrace_layouts::entry::Kind;

/// A tracepoint as exporters see it: its name, kind, and its arguments' names and specs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schema {
    /// Name.
    pub name: String,
    /// Kind.
    pub kind: Kind,
    /// Argument names (`argN` for an unnamed one, names made unique) and how each is shown.
    pub args: Vec<(String, Spec)>,
}

impl Schema {
    /// The schemas of every tracepoint in `meta`, by id.
    pub fn all(meta: &Metadata) -> Vec<Schema> {
        meta.tracepoints
            .iter()
            .map(|t| {
                let mut args: Vec<(String, Spec)> = Vec::new();
                for p in format::pieces(t, meta) {
                    if let Piece::Arg(name, spec) = p {
                        let base = if name.is_empty() {
                            format!("arg{}", args.len())
                        } else {
                            name
                        };
                        let name = unique(&base, |n| args.iter().any(|(a, _)| a == n));
                        args.push((name, spec));
                    }
                }
                Schema {
                    name: t.name.clone(),
                    kind: t.kind,
                    args,
                }
            })
            .collect()
    }
}

/// The stem of a start or stop name: `request_start` and `request_done` are both `request`;
/// a name with no such suffix is its own stem.
///
/// ```
/// use ttrace_reader::export::stem;
/// use ttrace_core::Kind;
/// assert_eq!(stem("request_start", Kind::Start), "request");
/// assert_eq!(stem("request_done", Kind::Stop), "request");
/// assert_eq!(stem("tick", Kind::Start), "tick");
/// assert_eq!(stem("io", Kind::Stop), "io");
/// ```
pub fn stem(name: &str, kind: Kind) -> &str {
    let suffixes: &[&str] = match kind {
        Kind::Start => &["_start", "_begin"],
        _ => &["_stop", "_end", "_done"],
    };
    suffixes
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(name)
}

/// How start and stop tracepoints pair: by name stem. A start opens a pair only if some
/// stop tracepoint has its stem; else it is an instant.
#[derive(Clone, Debug, Default)]
pub struct Stems {
    /// Per tracepoint id, the stem of a start or stop, as a small number.
    pub of: Vec<Option<usize>>,
    /// Per stem, whether a stop tracepoint has it.
    pub paired: Vec<bool>,
    /// Per stem, its text.
    pub names: Vec<String>,
}

impl Stems {
    /// The stems of the start and stop tracepoints of `schemas`.
    pub fn new(schemas: &[Schema]) -> Stems {
        let mut numbers: HashMap<&str, usize> = HashMap::new();
        let mut names = Vec::new();
        let of: Vec<Option<usize>> = schemas
            .iter()
            .map(|s| match s.kind {
                Kind::Start | Kind::Stop => {
                    let stem = stem(&s.name, s.kind);
                    let next = numbers.len();
                    Some(*numbers.entry(stem).or_insert_with(|| {
                        names.push(stem.to_string());
                        next
                    }))
                }
                _ => None,
            })
            .collect();
        let mut paired = vec![false; numbers.len()];
        for (s, k) in schemas.iter().zip(&of) {
            if let (Kind::Stop, Some(k)) = (s.kind, k) {
                paired[*k] = true;
            }
        }
        Stems { of, paired, names }
    }
}

/// `base`, or `base_1`, `base_2`, ...: the first that `taken` says is free.
pub fn unique(base: &str, taken: impl Fn(&str) -> bool) -> String {
    let mut name = base.to_string();
    let mut k = 1;
    while taken(&name) {
        name = format!("{base}_{k}");
        k += 1;
    }
    name
}

/// What an exporter wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Trace points and messages written: as many as `dump` prints lines of the same trace.
    pub events: u64,
    /// Of these, messages.
    pub messages: u64,
    /// Ring entries lost, of the rings exported (overwritten before they were copied).
    pub lost: u64,
    /// Events writers dropped, in the rings exported.
    pub dropped: u64,
    /// Ring entries left out as damaged, of the rings exported.
    pub damaged: u64,
    /// Entry/exit pairs, and start/stop pairs of one name stem, written as one slice.
    pub pairs: u64,
    /// Entries whose exit is not in the trace, and exits whose entry is not.
    pub unpaired: u64,
    /// Entries and exits left unpaired because events of their thread may be missing
    /// around them (see [`Pairing`]).
    pub uncertain: u64,
    /// Strings of the events written that show as `<lost>` ([`Merge::strings_lost`]).
    pub strings_lost: u64,
}

impl Written {
    /// Counts an item written (a trace point or a message).
    pub fn item(&mut self, item: &Item<'_>) {
        self.events += 1;
        self.messages += matches!(item, Item::Message(_)) as u64;
    }

    /// Adds the losses of the rings `items` reads.
    pub fn losses(&mut self, rings: &[RingIndex], items: &Merge<'_>) {
        for (ring, r) in rings.iter().enumerate() {
            if items.selects_ring(ring) {
                self.lost += r.lost;
                self.dropped += r.dropped;
                self.damaged += r.damaged;
            }
        }
    }

    /// The events and losses written, as `dump` counts them.
    pub fn tally(&self) -> Tally {
        Tally {
            points: self.events - self.messages,
            messages: self.messages,
            lost: self.lost,
            dropped: self.dropped,
            strings_lost: self.strings_lost,
            damaged: self.damaged,
        }
    }
}

/// An entry not yet matched by its exit.
#[derive(Clone, Copy, Debug)]
pub struct Open {
    /// The entry.
    pub event: Event,
}

/// What an exit closes.
#[derive(Clone, Copy, Debug)]
pub enum Closes {
    /// This entry, opened at this depth (0 outermost).
    Entry(Open, usize),
    /// Nothing: no entry is open on its thread (the entry was lost, cut by a gap, or
    /// recorded before the trace begins).
    Nothing,
    /// Nothing that can be told: the exit is before the horizon.
    Uncertain,
}

/// Matches exits to entries per thread, innermost first, where the trace makes that exact.
///
/// A thread is an id and which of the threads that had the id it is ([`Thread`]): an entry
/// left open by a thread that died is never closed by an exit of a later thread the kernel
/// gave its id to; it stays open to the end, with the entries of threads still running.
///
/// Stack order pairs an exit with its own entry only if none of the thread's events between
/// them is missing; a missing inner exit would make the outer exit close the inner entry.
/// A ring that lost its oldest entries may have held any thread's events from before its
/// first remaining one, so:
/// - before the *horizon*, the latest first event of the rings that lost entries, nothing
///   is paired: entries and exits there are [uncertain](Closes::Uncertain);
/// - an exit with no open entry on its thread [closes nothing](Closes::Nothing).
///
/// So no exit is ever matched to an entry that is not its own, as long as writers nest
/// entries and exits per thread: what the trace cannot tell is left unpaired, not guessed.
#[derive(Default)]
pub struct Pairing {
    /// By thread: foldhash, fast on small keys, and randomly seeded, so that a hostile
    /// trace cannot choose threads that collide.
    stacks: FoldHashMap<Thread, Vec<Open>>,
    threads: Threads,
    horizon: u64,
    /// Whether entries before the horizon are paired too ([`Pairing::across_losses`]).
    across: bool,
}

impl Pairing {
    /// Pairing for a trace of the rings `rings`, whose threads `meta` names.
    pub fn new(rings: &[RingIndex], meta: &Metadata) -> Pairing {
        let horizon = rings
            .iter()
            .filter(|r| r.lost > 0)
            // A ring that lost every entry gives no time after which it is complete.
            .map(|r| r.events.first().map_or(u64::MAX, |m| m.stamp))
            .max()
            .unwrap_or(0);
        Pairing {
            stacks: FoldHashMap::default(),
            threads: Threads::new(meta),
            horizon,
            across: false,
        }
    }

    /// Pairs entries and exits before the horizon too, on their thread's stack as any other
    /// (what `report` measures, flagging those pairs: [`Pairing::horizon`] tells them). Such
    /// a pair is wrong only if its thread wrote, between its entry and its exit, on a ring
    /// that lost that span: a thread that migrated and came back.
    pub fn across_losses(mut self) -> Pairing {
        self.across = true;
        self
    }

    /// The stamp from which every ring holds all it was given (0: the whole trace).
    pub fn horizon(&self) -> u64 {
        self.horizon
    }

    /// The thread that wrote as `ctx` at `timestamp`: what pairs of other kinds (start and
    /// stop) are keyed by, as entries and exits are.
    pub fn thread(&mut self, ctx: u64, timestamp: u64) -> Thread {
        self.threads.of(ctx, timestamp)
    }

    /// Opens `event` (an entry) on its thread: the depth it opens at (0 outermost), or
    /// `None` if it is before the horizon and stays unpaired.
    pub fn enter(&mut self, event: &Event) -> Option<usize> {
        if event.stamp < self.horizon && !self.across {
            return None;
        }
        let thread = self.threads.of(event.ctx, event.stamp);
        let s = self.stacks.entry(thread).or_default();
        s.push(Open { event: *event });
        Some(s.len() - 1)
    }

    /// Closes the innermost open entry of `event`'s thread, if the trace can tell it.
    pub fn exit(&mut self, event: &Event) -> Closes {
        if event.stamp < self.horizon && !self.across {
            return Closes::Uncertain;
        }
        let thread = self.threads.of(event.ctx, event.stamp);
        let Some(s) = self.stacks.get_mut(&thread) else {
            return Closes::Nothing;
        };
        match s.pop() {
            Some(open) => Closes::Entry(open, s.len()),
            None => Closes::Nothing,
        }
    }

    /// The number of entries open on the thread that wrote as `ctx` at `timestamp`.
    pub fn depth(&mut self, ctx: u64, timestamp: u64) -> usize {
        let thread = self.threads.of(ctx, timestamp);
        self.stacks.get(&thread).map_or(0, Vec::len)
    }

    /// Every entry still open, per thread outermost first, threads in order of id and then
    /// of incarnation: those of threads that ended with entries open, and of threads still
    /// running when the trace ends.
    pub fn into_open(self) -> Vec<Open> {
        outermost_first(self.stacks)
    }
}

/// The entries of `stacks`, per thread outermost first, threads in order.
fn outermost_first(stacks: FoldHashMap<Thread, Vec<Open>>) -> Vec<Open> {
    let mut threads: Vec<(Thread, Vec<Open>)> = stacks.into_iter().collect();
    threads.sort_unstable_by_key(|(t, _)| *t);
    threads.into_iter().flat_map(|(_, s)| s).collect()
}

/// What a reused id's later threads (processes) are shown as in an export: the `k`-th
/// thread after the first to have an id is shown as `id + k * REUSED_STRIDE`. Linux ids
/// stay below `PID_MAX_LIMIT` (2^22), so these never clash with a real id.
pub const REUSED_STRIDE: u64 = 1 << 22;

/// The identities exports give writers: one per thread (process), even when ids are
/// reused, each with the name it had.
pub struct Identities<'m> {
    meta: &'m devttrace::Metadata,
    threads: devttrace::TaskIndex,
    processes: devttrace::TaskIndex,
}

/// One writer as an export shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity<'m> {
    /// Process id (shifted for a later process with a reused pid).
    pub pid: u64,
    /// Thread id (shifted for a later thread with a reused tid).
    pub tid: u64,
    /// The process's name at the time, if recorded.
    pub process: Option<&'m str>,
    /// The thread's name at the time, if recorded.
    pub thread: Option<&'m str>,
    /// The times the answer holds for (until a record of either id changes it).
    pub during: core::ops::Range<u64>,
}

impl<'m> Identities<'m> {
    /// The identities of the writers named in `meta`.
    pub fn new(meta: &'m devttrace::Metadata) -> Identities<'m> {
        Identities {
            meta,
            threads: devttrace::TaskIndex::threads(meta),
            processes: devttrace::TaskIndex::processes(meta),
        }
    }

    /// The writer of an event by `ctx` (`pid << 32 | tid`) at `timestamp`.
    pub fn of(&self, ctx: u64, timestamp: u64) -> Identity<'m> {
        let (pid, tid) = (ctx >> 32, ctx & 0xffff_ffff);
        let mut id = Identity {
            pid,
            tid,
            process: None,
            thread: None,
            during: 0..u64::MAX,
        };
        if let Some(c) = self.threads.at(ctx, timestamp) {
            id.tid += c.incarnation as u64 * REUSED_STRIDE;
            id.thread = Some(self.meta.threads[c.index].name.as_str());
            id.during = c.during;
        }
        if let Some(c) = self.processes.at(pid << 32, timestamp) {
            id.pid += c.incarnation as u64 * REUSED_STRIDE;
            id.process = Some(self.meta.processes[c.index].name.as_str());
            id.during = id.during.start.max(c.during.start)..id.during.end.min(c.during.end);
        }
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_horizon_is_the_latest_first_event_of_the_rings_that_lost_entries() {
        let ring = |lost, first: Option<u64>| RingIndex {
            lost,
            events: first
                .map(|stamp| devttrace::Mark {
                    stamp,
                    ..Default::default()
                })
                .into_iter()
                .collect(),
            ..Default::default()
        };
        let horizon = |rings: &[RingIndex]| Pairing::new(rings, &Metadata::default()).horizon();
        assert_eq!(horizon(&[ring(0, Some(5)), ring(0, None)]), 0);
        assert_eq!(horizon(&[ring(3, Some(5)), ring(0, Some(9))]), 5);
        assert_eq!(horizon(&[ring(3, Some(5)), ring(1, Some(7))]), 7);
        assert_eq!(horizon(&[ring(1, None), ring(0, Some(9))]), u64::MAX);
    }

    #[test]
    fn argument_names_are_made_unique() {
        let meta = Metadata {
            tracepoints: vec![devttrace::TracepointInfo {
                id: 0,
                name: "t".into(),
                kind: Kind::Start,
                classes: 1,
                format: "{a} {a} {a_1} {} {}".into(),
                nargs: 5,
                types: vec![],
                tables: vec![],
            }],
            ..Metadata::default()
        };
        let names: Vec<String> = Schema::all(&meta)[0]
            .args
            .iter()
            .map(|(n, _)| n.clone())
            .collect();
        assert_eq!(names, ["a", "a_1", "a_1_1", "arg3", "arg4"]);
    }
}
