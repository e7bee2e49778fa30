//! How events pair into durations: an entry with the exit that closes it on its thread, a
//! start with a stop of the same name stem (`request_start` .. `request_done`). The report,
//! the exports and the snapshot rules (`latency NAME > 5ms`) all pair so: never across
//! events that may be missing, so that a duration is only ever real.

use crate::incarnation::{Thread, Threads};
use devttrace::event::{Event, Mark, RingSnapshot};
use devttrace::meta::{Metadata, TracepointInfo};
use foldhash::HashMap as FoldHashMap;
use std::collections::HashMap;
use ttrace_layouts::entry::Kind;
use ttrace_layouts::role::Role;

/// The stem of a start or stop name: `request_start` and `request_done` are both `request`;
/// a name with no such suffix is its own stem.
///
/// ```
/// use ttrace_model::pairs::stem;
/// use devttrace::Kind;
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
    /// The stems of the start and stop tracepoints of `tracepoints` (by id).
    pub fn new(tracepoints: &[TracepointInfo]) -> Stems {
        let mut numbers: HashMap<&str, usize> = HashMap::new();
        let mut names = Vec::new();
        let of: Vec<Option<usize>> = tracepoints
            .iter()
            // A `tracing` event is an instant; a span's new and close pair by id
            // (`crate::spans`), not by name.
            .map(|s| match s.kind {
                Kind::Start | Kind::Stop if s.role == Role::Point => {
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
        for (s, k) in tracepoints.iter().zip(&of) {
            if let (Kind::Stop, Some(k)) = (s.kind, k) {
                paired[*k] = true;
            }
        }
        Stems { of, paired, names }
    }

    /// Whether `tracepoints[id]` opens a pair: a native entry, or a start whose stem a stop
    /// has (a span's enter opens a poll of its instance: [`crate::spans`]).
    pub fn opens_pair(&self, tracepoints: &[TracepointInfo], id: usize) -> bool {
        match tracepoints[id].kind {
            Kind::Entry => tracepoints[id].role == Role::Point,
            Kind::Start => self.of[id].is_some_and(|s| self.paired[s]),
            _ => false,
        }
    }
}

/// The names of the pairs of `meta`'s tracepoints, sorted: their entries' and starts'
/// (what durations are named by), and the spans' (whose instances' lifetimes are durations:
/// [`crate::spans`]).
pub fn pair_names(meta: &Metadata) -> Vec<String> {
    let stems = Stems::new(&meta.tracepoints);
    let mut names: Vec<String> = (0..meta.tracepoints.len())
        .filter(|&id| {
            stems.opens_pair(&meta.tracepoints, id) || meta.tracepoints[id].role == Role::SpanNew
        })
        .map(|id| meta.tracepoints[id].name.clone())
        .collect();
    names.sort();
    names.dedup();
    names
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
}

impl Pairing {
    /// Pairing for a trace of the rings `rings`, whose threads `meta` names.
    pub fn new(rings: &[RingSnapshot<Mark>], meta: &Metadata) -> Pairing {
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
        }
    }

    /// The stamp from which every ring holds all it was given (0: the whole trace).
    pub fn horizon(&self) -> u64 {
        self.horizon
    }

    /// Events were missed (a live reader found entries overwritten before it read them):
    /// every entry open now is given up, and returned, since an event of its thread may be
    /// missing after it. What comes next pairs among itself.
    pub fn gap(&mut self) -> Vec<Open> {
        outermost_first(std::mem::take(&mut self.stacks))
    }

    /// The threads are now named by `meta` (a live reader's copy of the names grew); the
    /// entries open stay open.
    pub fn rename(&mut self, meta: &Metadata) {
        self.threads = Threads::new(meta);
    }

    /// The thread that wrote as `ctx` at `timestamp`: what pairs of other kinds (start and
    /// stop) are keyed by, as entries and exits are.
    pub fn thread(&mut self, ctx: u64, timestamp: u64) -> Thread {
        self.threads.of(ctx, timestamp)
    }

    /// Opens `event` (an entry) on its thread: the depth it opens at (0 outermost), or
    /// `None` if it is before the horizon and stays unpaired.
    pub fn enter(&mut self, event: &Event) -> Option<usize> {
        if event.stamp < self.horizon {
            return None;
        }
        let thread = self.threads.of(event.ctx, event.stamp);
        let s = self.stacks.entry(thread).or_default();
        s.push(Open { event: *event });
        Some(s.len() - 1)
    }

    /// Closes the innermost open entry of `event`'s thread, if the trace can tell it.
    pub fn exit(&mut self, event: &Event) -> Closes {
        if event.stamp < self.horizon {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_horizon_is_the_latest_first_event_of_the_rings_that_lost_entries() {
        let ring = |lost, first: Option<u64>| RingSnapshot::<Mark> {
            counts: devttrace::event::Accounting {
                lost,
                ..Default::default()
            },
            events: first
                .map(|stamp| devttrace::event::Mark {
                    stamp,
                    ..Default::default()
                })
                .into_iter()
                .collect(),
            ..Default::default()
        };
        let horizon =
            |rings: &[RingSnapshot<Mark>]| Pairing::new(rings, &Metadata::default()).horizon();
        assert_eq!(horizon(&[ring(0, Some(5)), ring(0, None)]), 0);
        assert_eq!(horizon(&[ring(3, Some(5)), ring(0, Some(9))]), 5);
        assert_eq!(horizon(&[ring(3, Some(5)), ring(1, Some(7))]), 7);
        assert_eq!(horizon(&[ring(1, None), ring(0, Some(9))]), u64::MAX);
    }
}
