//! The events of every ring, and the messages, in one time order.
//!
//! Each ring's events are already in time order (a snapshot or an index sorts them), so a
//! k-way merge of the runs orders everything, with no copy of the trace: a loser tree over
//! the run heads (`crate::tournament`) finds the next item with one comparison per level.
//!
//! A message (`ttrace_core::info`) is an event of the built-in tracepoint `info`, its text
//! in the aux buffer; the merge gives it as an [`Item::Message`].
//!
//! The merge counts the strings it gives that the aux buffers no longer held when they were
//! copied ([`Merge::strings_lost`]): string arguments and message texts that show as
//! `<lost>`.

use crate::tournament::LoserTree;
use core::cell::Cell;
use devttrace::{AuxSnapshots, Event, Mark, Snapshot, View};

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
    /// A message.
    Message(Message<'s>),
}

impl Item<'_> {
    /// When it happened (clock ticks).
    #[inline]
    pub fn timestamp(&self) -> u64 {
        match self {
            Item::Point { event, .. } => event.stamp,
            Item::Message(m) => m.timestamp,
        }
    }
}

/// A free-form message (`ttrace_core::info`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message<'s> {
    /// When it was written (clock ticks).
    pub timestamp: u64,
    /// The writer's `pid << 32 | tid`.
    pub ctx: u64,
    /// The CPU it was written on.
    pub cpu: u32,
    /// Its text; `None` if the aux buffer no longer held it when it was copied.
    pub text: Option<&'s [u8]>,
    /// Whether the text was cut to the longest an aux record holds.
    pub truncated: bool,
}

impl<'s> Message<'s> {
    /// The message of an event of the `info` tracepoint, its text looked up in `aux`.
    fn of_event(event: &Event, aux: &'s AuxSnapshots) -> Message<'s> {
        let text = event.args().first().and_then(|&w| aux.get(w));
        Message {
            timestamp: event.stamp,
            ctx: event.ctx,
            cpu: event.type_word.cpu(),
            text: text.map(|r| r.bytes),
            truncated: text.is_some_and(|r| r.truncated),
        }
    }

    /// Its text, or `<lost>`.
    pub fn text_or_lost(&self) -> &'s [u8] {
        self.text.unwrap_or(b"<lost>")
    }
}

/// Which events to keep.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Only these rings (all if empty), messages included: a message belongs to the ring it
    /// was written to.
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
}

impl<'s> Run<'s> {
    /// Its items `range`.
    fn part(&self, range: core::ops::Range<usize>) -> Run<'s> {
        match self {
            Run::Marks(cpu, m) => Run::Marks(*cpu, &m[range]),
            Run::Events(cpu, e) => Run::Events(*cpu, &e[range]),
        }
    }

    /// How many of its items are stamped before `t`.
    fn before(&self, t: u64) -> usize {
        match self {
            Run::Marks(_, m) => m.partition_point(|x| x.stamp < t),
            Run::Events(_, e) => e.partition_point(|x| x.stamp < t),
        }
    }

    fn len(&self) -> usize {
        match self {
            Run::Marks(_, m) => m.len(),
            Run::Events(_, e) => e.len(),
        }
    }

    #[inline]
    fn stamp(&self, i: usize) -> u64 {
        match self {
            Run::Marks(_, m) => m[i].stamp,
            Run::Events(_, e) => e[i].stamp,
        }
    }
}

/// A k-way merge of time-ordered runs; equal timestamps keep ring order, messages last.
pub struct Merge<'s> {
    runs: Vec<Run<'s>>,
    /// Per run: the next index.
    pos: Vec<usize>,
    /// Per run: the stamp at `pos`, or `u128::MAX` once the run is done (above every stamp,
    /// so a run done never wins against one that is not).
    heads: LoserTree<u128>,
    view: Option<&'s View<'s>>,
    /// The strings of the items.
    aux: &'s AuxSnapshots,
    keep: Keep,
    /// Strings given that the aux buffers no longer held.
    strings_lost: Cell<u64>,
}

/// The key of run `run`'s item `i` in the tree of heads.
#[inline(always)]
fn head(run: &Run<'_>, i: usize) -> u128 {
    match i < run.len() {
        true => run.stamp(i) as u128,
        false => u128::MAX,
    }
}

impl<'s> Merge<'s> {
    fn new(
        runs: Vec<Run<'s>>,
        view: Option<&'s View<'s>>,
        aux: &'s AuxSnapshots,
        keep: Keep,
    ) -> Merge<'s> {
        Merge {
            pos: vec![0; runs.len()],
            heads: LoserTree::new(runs.iter().map(|r| head(r, 0)).collect()),
            runs,
            view,
            aux,
            keep,
            strings_lost: Cell::new(0),
        }
    }

    /// Everything `snap` holds that passes `filter`, in time order.
    pub fn snapshot(snap: &'s Snapshot, filter: &Filter) -> Merge<'s> {
        let keep = Keep::new(&snap.meta, snap.version.clock, filter);
        let runs: Vec<Run<'s>> = (0..snap.cpus.len())
            .filter(|&c| keep.cpu(c))
            .map(|c| Run::Events(c, &snap.cpus[c].events))
            .collect();
        Merge::new(runs, None, &snap.aux, keep)
    }

    /// Everything `view` holds that passes `filter`, in time order; each event is copied
    /// from its ring as it comes (see [`View`]).
    pub fn view(view: &'s View<'s>, filter: &Filter) -> Merge<'s> {
        let keep = Keep::new(&view.meta, view.version.clock, filter);
        let runs: Vec<Run<'s>> = (0..view.cpus.len())
            .filter(|&c| keep.cpu(c))
            .map(|c| Run::Marks(c, &view.cpus[c].events))
            .collect();
        Merge::new(runs, Some(view), &view.aux, keep)
    }

    /// Strings given so far that the aux buffers no longer held when they were copied:
    /// string arguments and message texts shown as `<lost>`.
    pub fn strings_lost(&self) -> u64 {
        self.strings_lost.get()
    }

    /// How many items are left at most (some may not pass the filter).
    pub fn len(&self) -> usize {
        let runs = self.runs.iter().zip(&self.pos);
        runs.map(|(r, &p)| r.len() - p).sum()
    }

    /// Whether no item is left.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The items left cut by time into about `parts` merges of about as many items each,
    /// which give, one after the other, exactly what this one gives: the cuts fall between
    /// two timestamps, so items of equal stamps (ordered by their run) stay together. The
    /// strings lost counted so far stay with this merge.
    pub fn split(&self, parts: usize) -> Vec<Merge<'s>> {
        let total = self.len();
        // Cut times: quantiles of a sample of every run's stamps, some per part.
        let step = (total / (parts.max(1) * 16)).max(1);
        let mut sample: Vec<u64> = Vec::new();
        for (r, &p) in self.runs.iter().zip(&self.pos) {
            sample.extend((p..r.len()).step_by(step).map(|i| r.stamp(i)));
        }
        sample.sort_unstable();
        let mut cuts: Vec<u64> = (1..parts)
            .filter_map(|k| sample.get(k * sample.len() / parts).copied())
            .collect();
        cuts.dedup();
        // Each part: from the previous cut (or where this merge is) to the next.
        let at = |t: Option<u64>| -> Vec<usize> {
            let runs = self.runs.iter().zip(&self.pos);
            runs.map(|(r, &p)| t.map_or(r.len(), |t| r.before(t).max(p)))
                .collect()
        };
        let mut from = self.pos.clone();
        let mut merges = Vec::with_capacity(cuts.len() + 1);
        for cut in cuts.into_iter().map(Some).chain([None]) {
            let to = at(cut);
            let runs = self.runs.iter().enumerate();
            let runs = runs.map(|(i, r)| r.part(from[i]..to[i])).collect();
            merges.push(Merge::new(runs, self.view, self.aux, self.keep.clone()));
            from = to;
        }
        merges
    }

    /// Whether the items come from ring `ring` (among others): the filter selects it.
    pub fn selects_ring(&self, ring: usize) -> bool {
        self.keep.cpu(ring)
    }

    /// The run with the earliest next item, and moves past that item.
    #[inline]
    fn pop(&mut self) -> Option<(usize, usize)> {
        if self.heads.winning_key() == u128::MAX {
            return None;
        }
        let r = self.heads.winner();
        let i = self.pos[r];
        self.pos[r] += 1;
        self.heads.set_winner(head(&self.runs[r], i + 1));
        Some((r, i))
    }
}

impl<'s> Merge<'s> {
    /// Calls `f` with each item in turn, by reference (which spares the copies of an
    /// iterator's by-value items), until it returns an error.
    pub fn try_for_each_ref<E>(
        &mut self,
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

    /// Item `i` of run `r`, if it passes the filter; counts its strings lost.
    #[inline(always)]
    fn item(&self, r: usize, i: usize) -> Option<Item<'s>> {
        let (cpu, event) = match &self.runs[r] {
            Run::Marks(cpu, marks) => {
                let view = self.view.expect("marks come from a view");
                (*cpu, view.event(*cpu, marks[i])?)
            }
            Run::Events(cpu, events) => (*cpu, events[i]),
        };
        let id = event.type_word.tracepoint() as usize;
        let kind = self
            .keep
            .kinds
            .get(id)
            .copied()
            .unwrap_or(self.keep.unnamed);
        if !kind.named || !self.keep.time(event.stamp) {
            return None;
        }
        if kind.message {
            let m = Message::of_event(&event, self.aux);
            self.lost(m.text.is_none() as u64);
            return Some(Item::Message(m));
        }
        if kind.strings != 0 {
            self.lost(self.missing(&event, kind.strings));
        }
        Some(Item::Point { cpu, event })
    }

    /// How many of the arguments of `event` that `strings` marks (bit `i`: argument `i`)
    /// refer to records the aux buffers no longer held.
    #[cold]
    fn missing(&self, event: &Event, strings: u16) -> u64 {
        let args = event.args();
        (0..args.len())
            .filter(|&i| strings & (1 << i) != 0 && self.aux.get(args[i]).is_none())
            .count() as u64
    }

    #[inline]
    fn lost(&self, n: u64) {
        self.strings_lost.set(self.strings_lost.get() + n);
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

/// What a filter selects, asked of one event at a time: for readers that feed every event
/// to the model (`ttrace_model::model`), so that pairs are made whatever is shown, and show
/// what the filter selects (a pair when its beginning is selected).
#[derive(Clone)]
pub struct Selection {
    keep: Keep,
    /// Whether the filter selects everything.
    all: bool,
}

impl Selection {
    /// What `filter` selects of a trace of `meta`'s tracepoints, stamped by `clock`.
    pub fn new(meta: &devttrace::Metadata, clock: devttrace::Clock, filter: &Filter) -> Selection {
        Selection {
            keep: Keep::new(meta, clock, filter),
            all: filter.cpus.is_empty()
                && filter.name.is_none()
                && filter.since_ns.is_none()
                && filter.until_ns.is_none(),
        }
    }

    /// Whether it selects every event.
    pub fn everything(&self) -> bool {
        self.all
    }

    /// Whether it selects `event`, read from ring `ring`.
    #[inline]
    pub fn point(&self, ring: usize, event: &Event) -> bool {
        if self.all {
            return true;
        }
        let id = event.type_word.tracepoint() as usize;
        let kind = self
            .keep
            .kinds
            .get(id)
            .copied()
            .unwrap_or(self.keep.unnamed);
        kind.named && self.keep.cpu(ring) && self.keep.time(event.stamp)
    }
}

/// A filter prepared for one trace.
#[derive(Clone)]
struct Keep {
    cpus: Vec<usize>,
    /// By tracepoint id: what the filter and the merge need to know of it.
    kinds: Vec<Kind>,
    /// What passes of an id without a definition: shown, as `tracepoint#ID(...)`, unless a
    /// name is asked for.
    unnamed: Kind,
    since: Option<i64>,
    until: Option<i64>,
    clock: devttrace::Clock,
}

/// What the merge knows of one tracepoint.
#[derive(Clone, Copy, Debug)]
struct Kind {
    /// Whether its name passes the filter.
    named: bool,
    /// Whether it is the tracepoint of messages.
    message: bool,
    /// Its string arguments: bit `i` for argument `i`.
    strings: u16,
}

impl Kind {
    /// An id without a definition.
    const UNNAMED: Kind = Kind {
        named: true,
        message: false,
        strings: 0,
    };
}

impl Keep {
    fn new(meta: &devttrace::Metadata, clock: devttrace::Clock, f: &Filter) -> Keep {
        let matches = |name: &str| {
            f.name
                .as_ref()
                .is_none_or(|p| wildmatch::WildMatch::new(p).matches(name))
        };
        let kinds = meta.tracepoints.iter().map(|t| Kind {
            named: matches(&t.name),
            message: t.is_message(),
            strings: t.string_args(),
        });
        let kinds = kinds.collect();
        Keep {
            cpus: f.cpus.clone(),
            kinds,
            since: f.since_ns,
            until: f.until_ns,
            clock,
            unnamed: Kind {
                named: f.name.is_none(),
                ..Kind::UNNAMED
            },
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
}
