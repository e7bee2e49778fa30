//! The events of every ring, and the messages, in one time order.
//!
//! Each ring's events are already in time order (a snapshot or an index sorts them), so a
//! k-way merge of the runs orders everything, with no copy of the trace: a scan of the run
//! heads per event for a few runs, a heap for many.

use devttrace::{AuxRecord, Event, Mark, Snapshot, View};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use ttrace_layouts::aux::AuxTag;

/// One line of a trace: a trace point from a ring, or a free-form message.
#[derive(Clone, Copy, Debug)]
pub enum Item<'s> {
    /// An event of ring `cpu`.
    Point {
        /// The ring it was read from.
        cpu: usize,
        /// The event.
        event: Event,
    },
    /// A message from the aux buffer.
    Message(AuxRecord<'s>),
}

impl Item<'_> {
    /// When it happened (clock ticks).
    #[inline]
    pub fn timestamp(&self) -> u64 {
        match self {
            Item::Point { event, .. } => event.stamp,
            Item::Message(r) => r.timestamp,
        }
    }
}

/// Which events to keep.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Only these rings (all if empty). Messages (from the aux buffer) belong to no ring and
    /// are left out when rings are chosen.
    pub cpus: Vec<usize>,
    /// Only tracepoints whose name matches this wildcard (`*`, `?`); messages match `info`.
    pub name: Option<String>,
    /// Only events at or after this many nanoseconds since the device was created.
    pub since_ns: Option<i64>,
    /// Only events at or before this many nanoseconds since the device was created.
    pub until_ns: Option<i64>,
}

/// One time-ordered run of items.
enum Run<'s> {
    /// A ring's index: each event is copied from the ring when it comes.
    Marks(usize, &'s [Mark]),
    /// A ring's copied events.
    Events(usize, &'s [Event]),
    /// Messages.
    Messages(Vec<AuxRecord<'s>>),
}

impl Run<'_> {
    fn len(&self) -> usize {
        match self {
            Run::Marks(_, m) => m.len(),
            Run::Events(_, e) => e.len(),
            Run::Messages(m) => m.len(),
        }
    }

    #[inline]
    fn stamp(&self, i: usize) -> u64 {
        match self {
            Run::Marks(_, m) => m[i].stamp,
            Run::Events(_, e) => e[i].stamp,
            Run::Messages(m) => m[i].timestamp,
        }
    }
}

/// Messages in time order: a writer stamps its record after reserving it, so records can be
/// a little out of time order in the buffer.
fn by_time<'s>(records: impl Iterator<Item = AuxRecord<'s>>) -> Vec<AuxRecord<'s>> {
    let mut v: Vec<AuxRecord<'s>> = records.collect();
    v.sort_by_key(|r| r.timestamp);
    v
}

/// A k-way merge of time-ordered runs; equal timestamps keep ring order, messages last.
pub struct Merge<'s> {
    runs: Vec<Run<'s>>,
    /// Per run: the next index.
    pos: Vec<usize>,
    /// Per run: the stamp at `pos`, if any (for few runs: a linear scan).
    next: Vec<Option<u64>>,
    /// For many runs: a heap of (stamp, run).
    heap: Option<BinaryHeap<Reverse<(u64, usize)>>>,
    view: Option<&'s View<'s>>,
    keep: Keep,
}

/// Up to this many runs, the smallest head is found by a scan; beyond, with a heap.
const SCAN_RUNS: usize = 8;

impl<'s> Merge<'s> {
    fn new(runs: Vec<Run<'s>>, view: Option<&'s View<'s>>, keep: Keep) -> Merge<'s> {
        let next: Vec<Option<u64>> = runs
            .iter()
            .map(|r| (r.len() > 0).then(|| r.stamp(0)))
            .collect();
        let heap = (runs.len() > SCAN_RUNS).then(|| {
            next.iter()
                .enumerate()
                .filter_map(|(i, s)| s.map(|s| Reverse((s, i))))
                .collect()
        });
        Merge {
            pos: vec![0; runs.len()],
            runs,
            next,
            heap,
            view,
            keep,
        }
    }

    /// Everything `snap` holds that passes `filter`, in time order.
    pub fn snapshot(snap: &'s Snapshot, filter: &Filter) -> Merge<'s> {
        let keep = Keep::new(&snap.meta, snap.version.clock, filter);
        let mut runs: Vec<Run<'s>> = (0..snap.cpus.len())
            .filter(|&c| keep.cpu(c))
            .map(|c| Run::Events(c, &snap.cpus[c].events))
            .collect();
        if keep.messages {
            runs.push(Run::Messages(by_time(snap.messages())));
        }
        Merge::new(runs, None, keep)
    }

    /// Everything `view` holds that passes `filter`, in time order; each event is copied
    /// from its ring as it comes (see [`View`]).
    pub fn view(view: &'s View<'s>, filter: &Filter) -> Merge<'s> {
        let keep = Keep::new(&view.meta, view.version.clock, filter);
        let mut runs: Vec<Run<'s>> = (0..view.cpus.len())
            .filter(|&c| keep.cpu(c))
            .map(|c| Run::Marks(c, &view.cpus[c].events))
            .collect();
        if keep.messages {
            runs.push(Run::Messages(by_time(
                view.aux.records().filter(|r| r.tag == AuxTag::Info as u16),
            )));
        }
        Merge::new(runs, Some(view), keep)
    }

    /// Whether the items come from ring `ring` (among others): the filter selects it.
    pub fn selects_ring(&self, ring: usize) -> bool {
        self.keep.cpu(ring)
    }

    /// The run with the earliest next item, and moves past that item.
    #[inline]
    fn pop(&mut self) -> Option<(usize, usize)> {
        let r = match &mut self.heap {
            None => {
                let mut best: Option<(u64, usize)> = None;
                for (i, s) in self.next.iter().enumerate() {
                    if let Some(s) = *s {
                        if best.is_none_or(|(b, _)| s < b) {
                            best = Some((s, i));
                        }
                    }
                }
                best?.1
            }
            Some(heap) => heap.pop()?.0 .1,
        };
        let i = self.pos[r];
        self.pos[r] += 1;
        let run = &self.runs[r];
        self.next[r] = (i + 1 < run.len()).then(|| run.stamp(i + 1));
        if let (Some(heap), Some(s)) = (&mut self.heap, self.next[r]) {
            heap.push(Reverse((s, r)));
        }
        Some((r, i))
    }
}

impl<'s> Merge<'s> {
    /// Calls `f` with each item in turn, by reference (which spares the copies of an
    /// iterator's by-value items), until it returns an error.
    pub fn try_for_each_ref<E>(
        mut self,
        mut f: impl FnMut(&Item<'s>) -> Result<(), E>,
    ) -> Result<(), E> {
        while let Some((r, i)) = self.pop() {
            // Built here and passed by reference: no Option<Item> to copy around.
            if let Some(item) = self.item(r, i) {
                f(&item)?;
            }
        }
        Ok(())
    }

    /// Item `i` of run `r`, if it passes the filter.
    #[inline(always)]
    fn item(&self, r: usize, i: usize) -> Option<Item<'s>> {
        let item = match &self.runs[r] {
            Run::Marks(cpu, marks) => {
                let view = self.view.expect("marks come from a view");
                Item::Point {
                    cpu: *cpu,
                    event: view.event(*cpu, marks[i])?,
                }
            }
            Run::Events(cpu, events) => Item::Point {
                cpu: *cpu,
                event: events[i],
            },
            Run::Messages(m) => Item::Message(m[i]),
        };
        self.keep.item(&item).then_some(item)
    }
}

impl<'s> Iterator for Merge<'s> {
    type Item = Item<'s>;

    fn next(&mut self) -> Option<Item<'s>> {
        loop {
            let (r, i) = self.pop()?;
            if let Some(item) = self.item(r, i) {
                return Some(item);
            }
        }
    }
}

/// A filter prepared for one trace.
struct Keep {
    cpus: Vec<usize>,
    /// By tracepoint id: whether the name matches.
    names: Vec<bool>,
    /// Whether ids without a definition pass.
    unnamed: bool,
    messages: bool,
    since: Option<i64>,
    until: Option<i64>,
    clock: devttrace::Clock,
}

impl Keep {
    fn new(meta: &devttrace::Metadata, clock: devttrace::Clock, f: &Filter) -> Keep {
        let matches = |name: &str| {
            f.name
                .as_ref()
                .is_none_or(|p| wildmatch::WildMatch::new(p).matches(name))
        };
        Keep {
            cpus: f.cpus.clone(),
            names: meta.tracepoints.iter().map(|t| matches(&t.name)).collect(),
            unnamed: f.name.is_none(),
            messages: f.cpus.is_empty() && matches("info"),
            since: f.since_ns,
            until: f.until_ns,
            clock,
        }
    }

    fn cpu(&self, cpu: usize) -> bool {
        self.cpus.is_empty() || self.cpus.contains(&cpu)
    }

    #[inline]
    fn time(&self, ticks: u64) -> bool {
        if self.since.is_none() && self.until.is_none() {
            return true;
        }
        let ns = self.clock.since_anchor_ns(ticks);
        self.since.is_none_or(|s| ns >= s) && self.until.is_none_or(|u| ns <= u)
    }

    #[inline]
    fn item(&self, item: &Item<'_>) -> bool {
        let named = match item {
            Item::Point { event, .. } => {
                let id = event.type_word.tracepoint() as usize;
                self.names.get(id).copied().unwrap_or(self.unnamed)
            }
            Item::Message(_) => true,
        };
        named && self.time(item.timestamp())
    }
}
