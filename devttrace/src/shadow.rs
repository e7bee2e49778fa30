//! A follower's own copy of the rings: every event it read, written back at its position,
//! so that what it read can be saved as a snapshot after the device's rings have moved on
//! (`ttrace-reader watch` saves a match from it: a watcher that fell behind, or a window
//! longer than the rings hold by the time the match is due, still saves the moment it
//! matched). A [`Follower`](crate::Follower) keeps it
//! ([`Follower::keep_copy`](crate::Follower::keep_copy)), recording each event as it reads
//! it, at the position it read it from.
//!
//! **What it holds.** Per ring, a run of consecutive positions ending at the newest one
//! recorded, in chunks of [`CHUNK`] positions (fewer for a device's smaller rings): each
//! position's words as the reader accepted them (an entry's position tag is the
//! position's, whatever length the copy is saved with), a continuation at the position
//! after its parent's. A position passed and not read (lost, or still being written when
//! the copy is saved) is empty: the copy's readers count it lost, as the follower did. It
//! begins as the rings were when the follower began (the device's past then), so that its
//! readers count as lost what the device had lost then and what the follower lost since,
//! nothing else.
//!
//! **Its own window.** A ring's copy holds at least a ring's worth of positions, as the
//! device does. When it needs a chunk for newer positions, it empties its oldest for them,
//! unless that one holds an event stamped within the window of the newest it holds
//! ([`Follower::keep_copy`](crate::Follower::keep_copy)) and memory is left: then it takes a
//! new chunk. So a copy can hold more than the device's rings (a second of a ring written at
//! 10 M events/s, where the device's ring holds 26 ms), grows a chunk at a time (no copy of
//! what it holds), and reads none of the slots it empties (each chunk knows its newest
//! stamp). It is saved as a device whose rings are long enough for its longest. The
//! strings are the follower's last copies of the aux buffers: an event older than its aux
//! buffer holds has its strings shown lost.
//!
//! **Losses.** When the follower loses entries of a ring, a new run of events begins at the
//! first position it read after them: nothing below it is recorded from then on. The run
//! before is kept, up to its last event (what is older than it goes), and a snapshot is
//! saved from one run of each ring, never both, so a ring of a saved copy never has a hole
//! between its events: its losses are all older than its oldest event, as a device ring's
//! are, which is what readers of a snapshot take them to be (the horizon:
//! `ttrace_model::pairs`). Which run: the current one, unless the snapshot is for a moment
//! older than that run's first event ([`Follower::copy_around`](crate::Follower::copy_around)):
//! then the one before, which holds the moment (a watcher that fell behind after a match
//! still saves the match). A clear of the device forgets what the clear cleared.

use crate::aux::AuxSnapshots;
use crate::event::Event;
use crate::ring::{Ring, SlotRead};
use std::collections::VecDeque;
use ttrace_layouts::entry::{Stamp, ENTRY_ARGS, SLOT_WORDS};

/// The positions of a chunk of a ring's copy (256 KiB), for a device whose rings hold at
/// least as many; a ring's length for the others.
pub const CHUNK: u64 = 1 << 12;

/// A slot's words.
type Words = [u64; SLOT_WORDS];

/// The rings as a follower read them (see the [module](self)).
#[derive(Debug)]
pub struct Shadow {
    /// Per ring, its copy.
    rings: Vec<RingCopy>,
    /// The device's slots per ring: each copy holds at least as many positions.
    base: u64,
    /// The positions of a chunk: [`CHUNK`], or `base` where it is smaller.
    chunk: u64,
    /// A copy takes a new chunk rather than empty one holding an event stamped within this
    /// of its newest (clock ticks; 0: it holds a ring's worth).
    keep: u64,
    /// The chunks the copies may still take beyond a ring's worth, all rings together.
    spare: u64,
    /// Events stamped at or before this were cleared ([`Shadow::clear_through`]).
    cleared: u64,
    /// The moment a snapshot will be for, while one is pending: a ring's run before a
    /// loss that holds it is kept through later losses ([`Shadow::moment`]).
    moment: Option<u64>,
    /// The moment the snapshot being saved is for ([`Shadow::saved_around`]).
    around: Option<u64>,
    /// The snapshot being saved holds the events stamped from this on ([`Shadow::window`];
    /// 0: all it holds).
    since: u64,
    /// Per ring: one past the last position the follower reached.
    pub(crate) heads: Vec<u64>,
    /// The follower's copies of the aux buffers.
    pub(crate) aux: AuxSnapshots,
    /// Per aux buffer, marks of the follower's polls, oldest first: `(stamp, last)`, a
    /// record begun after `stamp` lies at or after offset `last` (read before the stamp).
    aux_marks: Vec<VecDeque<(u64, u64)>>,
    /// The most bytes each aux buffer's copy keeps beyond the buffer's own size.
    aux_cap: u64,
    /// Per aux buffer, the offset the snapshot being saved holds records from (its
    /// window's: [`Shadow::window`]; 0: all the copy holds).
    aux_from: Vec<u64>,
    /// A cut's strings ([`Shadow::cut`]): each buffer's, from its window's start.
    aux_cut: Option<Vec<crate::aux::AuxCopy>>,
}

/// One ring's copy.
#[derive(Clone, Debug, Default)]
struct RingCopy {
    /// Its chunks, oldest first: the `k`th holds the positions from `first + k * chunk`.
    chunks: VecDeque<Chunk>,
    /// The first position of the oldest chunk (a multiple of the chunk's length).
    first: u64,
    /// One past the newest position recorded (or passed).
    end: u64,
    /// The first position of its current run: positions below this are not recorded (the
    /// follower lost entries before it).
    floor: u64,
    /// The run before the current one, up to the last loss, while a chunk holds it: what a
    /// snapshot for a moment before that loss is saved from ([`Shadow::moment`]).
    before: Option<core::ops::Range<u64>>,
    /// The oldest stamp of the run before (its first event's).
    before_oldest: u64,
    /// The oldest stamp recorded in the current run since the last loss (`u64::MAX`: none).
    run_oldest: u64,
    /// The newest stamp recorded.
    newest: u64,
}

/// Consecutive positions of a ring's copy.
#[derive(Clone, Debug)]
struct Chunk {
    slots: Box<[Words]>,
    /// The newest stamp recorded in it (0: none).
    newest: u64,
}

impl Chunk {
    fn new(len: u64) -> Chunk {
        Chunk {
            slots: vec![[0; SLOT_WORDS]; len as usize].into_boxed_slice(),
            newest: 0,
        }
    }

    fn empty(&mut self) {
        self.slots.fill([0; SLOT_WORDS]);
        self.newest = 0;
    }
}

impl RingCopy {
    /// The slot of position `p`, if a chunk holds it (`shift`: the chunk's length's log).
    fn slot(&mut self, p: u64, shift: u32) -> Option<&mut Words> {
        let k = (p.checked_sub(self.first)? >> shift) as usize;
        let i = (p & ((1 << shift) - 1)) as usize;
        self.chunks.get_mut(k).map(|c| &mut c.slots[i])
    }

    /// One past the last position its chunks can hold.
    fn limit(&self, chunk: u64) -> u64 {
        self.first + self.chunks.len() as u64 * chunk
    }
}

impl Shadow {
    /// A copy of `rings` empty rings of `slots` slots (a power of two), that holds a ring's
    /// worth.
    pub(crate) fn new(rings: usize, slots: u64) -> Shadow {
        let base = slots.max(1).next_power_of_two();
        Shadow {
            rings: vec![RingCopy::default(); rings],
            base,
            chunk: base.min(CHUNK),
            keep: 0,
            spare: 0,
            cleared: 0,
            moment: None,
            around: None,
            since: 0,
            heads: vec![0; rings],
            aux: AuxSnapshots::default(),
            aux_marks: vec![VecDeque::new(); rings],
            aux_cap: 0,
            aux_from: vec![0; rings],
            aux_cut: None,
        }
    }

    /// Lets each ring's copy hold the events stamped within `keep` clock ticks of its
    /// newest, in at most `max_bytes` beyond a ring's worth, all rings together (see the
    /// [module](self)).
    pub(crate) fn keep(&mut self, keep: u64, max_bytes: u64) {
        self.keep = keep;
        self.spare = max_bytes / (self.chunk * (SLOT_WORDS * 8) as u64);
        self.aux_cap = max_bytes / self.rings.len().max(1) as u64;
        self.aux_cap = self.aux_cap.min(ttrace_layouts::device::MAX_AUX_BYTES / 2);
    }

    /// The offset from which the follower's copy of aux buffer `b` (of `size` bytes, whose
    /// newest record ends at `last`) keeps its records, at `now`: those of every event
    /// the copy keeps (begun within its window of `now`, and `margin` ticks before: a
    /// string is written before its event's stamp is read), in at most `size` and the
    /// copy's share of its memory ([`Shadow::keep`]); `None` where the copy keeps a ring's
    /// worth (the buffer's own records then suffice).
    pub(crate) fn aux_keep_from(
        &mut self,
        b: usize,
        now: u64,
        margin: u64,
        size: u64,
        last: u64,
    ) -> Option<u64> {
        if self.keep == 0 {
            return None;
        }
        let horizon = now.saturating_sub(self.keep.saturating_add(margin));
        let marks = self.aux_marks.get_mut(b)?;
        while marks.len() >= 2 && marks[1].0 <= horizon {
            marks.pop_front();
        }
        let by_time = marks.front().filter(|m| m.0 <= horizon).map_or(0, |m| m.1);
        let most = size
            .saturating_add(self.aux_cap)
            .min(ttrace_layouts::device::MAX_AUX_BYTES);
        Some(by_time.max(last.saturating_sub(most)))
    }

    /// Marks that aux buffer `b`'s records begun after `stamp` lie at or after `last` (the
    /// buffer's `last` the follower read before `stamp`).
    pub(crate) fn aux_mark(&mut self, b: usize, stamp: u64, last: u64) {
        if self.keep == 0 {
            return;
        }
        if self.aux_marks.len() <= b {
            self.aux_marks.resize(b + 1, VecDeque::new());
        }
        let marks = &mut self.aux_marks[b];
        if marks.back().is_none_or(|m| m.1 != last) {
            marks.push_back((stamp, last));
        }
    }

    /// The aux records the snapshot being saved holds of buffer `b`: from its window's
    /// start ([`Shadow::window`]), or all the copy holds.
    pub(crate) fn aux_copy(&self, b: usize) -> crate::aux::AuxCopy {
        if let Some(cut) = &self.aux_cut {
            return cut.get(b).cloned().unwrap_or_default();
        }
        let from = self.aux_from.get(b).copied().unwrap_or(0);
        self.aux
            .buffers
            .get(b)
            .map(|a| a.as_copy_from(from))
            .unwrap_or_default()
    }

    fn shift(&self) -> u32 {
        self.chunk.trailing_zeros()
    }

    /// Copies ring `r` of the device, `ring`, whose head was `head` when its follower began
    /// (before the follower reads it): each committed slot's words ([`Ring::read`]'s check),
    /// nothing of a slot being written.
    ///
    /// With `since` (a stamp; 0: all), only the newest positions whose events are stamped
    /// from then on: the ring is read back from its head until an event older than `since`,
    /// so that the copy costs what its window holds, not what the ring holds.
    pub(crate) fn copy_ring(
        &mut self,
        r: usize,
        ring: &Ring<'_, ttrace_layouts::entry::Slot>,
        head: u64,
        since: u64,
    ) {
        self.heads[r] = head;
        let (base, chunk, shift) = (self.base, self.chunk, self.shift());
        let c = &mut self.rings[r];
        c.first = head & !(chunk - 1);
        c.end = head;
        if head == 0 {
            return; // Never written: its chunks are made at its first event, if any.
        }
        // The positions the ring holds, below the head (a read of a slot never written
        // would allocate a page of a device held in memory, for nothing).
        let mut from = head.saturating_sub(base.min(ring.slot_count() as u64));
        if since > 0 {
            // Back from the head to the first event older than the window, kept (what says
            // the ring is whole from there: [`Shadow::in_window`]): what is below it is
            // older still, but for a writer stalled between its clock and its commit,
            // which the caller's margin covers.
            if let Some(p) = (from..head).rev().find(|&p| {
                matches!(ring.read((p % base) as usize),
                    SlotRead::Committed(w) if w[0] & Stamp::CONTINUATION == 0 && w[0] < since)
            }) {
                from = p;
            }
        }
        c.first = from & !(chunk - 1);
        while c.limit(chunk) < head {
            c.chunks.push_back(Chunk::new(chunk));
        }
        for p in from..head {
            if let SlotRead::Committed(w) = ring.read((p % base) as usize) {
                let k = ((p - c.first) >> shift) as usize;
                let ch = &mut c.chunks[k];
                ch.slots[(p & (chunk - 1)) as usize] = w;
                ch.newest = ch.newest.max(w[0]);
                c.newest = c.newest.max(w[0]);
            }
        }
    }

    /// Writes the event `e`, read from position `p` of ring `r`, into the copy (and its
    /// continuation at `p + 1`, where it has one).
    pub(crate) fn record(&mut self, r: usize, p: u64, e: &Event) {
        let continued = e.type_word.has_continuation() && !e.continuation_lost;
        let shift = self.shift();
        let Some(c) = self.rings.get_mut(r) else {
            return;
        };
        if p < c.floor || e.stamp <= self.cleared {
            return;
        }
        c.newest = c.newest.max(e.stamp);
        c.run_oldest = c.run_oldest.min(e.stamp);
        self.advance(r, p + 1 + u64::from(continued));
        let c = &mut self.rings[r];
        let mut parent = [0; SLOT_WORDS];
        parent[0] = e.stamp;
        parent[1] = e.type_word.0;
        parent[2] = e.ctx;
        parent[3..].copy_from_slice(&e.words[..ENTRY_ARGS]);
        let Some(slot) = c.slot(p, shift) else {
            return; // Older than the copy holds.
        };
        *slot = parent;
        let k = ((p - c.first) >> shift) as usize;
        c.chunks[k].newest = c.chunks[k].newest.max(e.stamp);
        if continued {
            let mut next = [0; SLOT_WORDS];
            next[0] = e.stamp | Stamp::CONTINUATION;
            next[1..].copy_from_slice(&e.words[ENTRY_ARGS..]);
            if let Some(slot) = c.slot(p + 1, shift) {
                *slot = next;
            }
        }
    }

    /// Moves ring `r`'s copy on to end at `to`: the chunks for the positions it passes are
    /// its oldest, emptied, or new ones (see the [module](self)).
    fn advance(&mut self, r: usize, to: u64) {
        let (base, chunk, keep) = (self.base, self.chunk, self.keep);
        let c = &mut self.rings[r];
        if to <= c.end {
            return;
        }
        // A jump past all the copy could hold (positions the follower did not read: lost):
        // nothing it holds stays. A shorter one is passed a chunk at a time, below, so that
        // what it holds of the window stays, with the run before a loss.
        let most = (c.chunks.len() as u64 + self.spare).saturating_mul(chunk);
        if to - c.end > most.max(base) || c.chunks.is_empty() {
            c.chunks.iter_mut().for_each(Chunk::empty);
            c.first = to.saturating_sub(base) & !(chunk - 1);
        }
        while c.limit(chunk) < to {
            // The oldest chunk may go if the others and a new one still hold a ring's
            // worth below `to`; it goes unless it holds the window and memory is left.
            let may_go = c.chunks.len() > 1 && c.first + chunk <= to.saturating_sub(base);
            let oldest_recent = c
                .chunks
                .front()
                .is_some_and(|o| o.newest != 0 && o.newest >= c.newest.saturating_sub(keep));
            let grows = keep > 0 && oldest_recent && self.spare > 0;
            let oldest = (may_go && !grows).then(|| c.chunks.pop_front()).flatten();
            let next = match oldest {
                Some(mut oldest) => {
                    // A chunk never written since it was emptied is empty.
                    if oldest.newest != 0 {
                        oldest.empty();
                    }
                    c.first += chunk;
                    oldest
                }
                None => {
                    // Beyond a ring's worth: from the memory left.
                    if may_go {
                        self.spare -= 1;
                    }
                    Chunk::new(chunk)
                }
            };
            c.chunks.push_back(next);
        }
        c.end = to;
    }

    /// Says that the follower lost entries of ring `r` in a poll, at positions from
    /// `lost.start` to before `lost.end` (the first and one past the last it lost; its cursor
    /// is `next` after the poll): a run of events begins at the first event it recorded
    /// after them, and what it recorded between them goes, so that no run has a hole (a
    /// loss within a poll, between events it read, would leave one: the events read before
    /// it end the run before, those after begin the next).
    pub(crate) fn lost(&mut self, r: usize, lost: core::ops::Range<u64>, next: u64) {
        let shift = self.shift();
        let Some(c) = self.rings.get_mut(r) else {
            return;
        };
        let end = next.min(c.end);
        let first = (lost.end.max(c.first)..end)
            .find(|&p| {
                c.slot(p, shift)
                    .is_some_and(|w| w[0] != 0 && w[0] & Stamp::CONTINUATION == 0)
            })
            .unwrap_or(next);
        for p in lost.start.max(c.first)..first.min(end) {
            if let Some(w) = c.slot(p, shift) {
                *w = [0; SLOT_WORDS];
            }
        }
        self.forget_below(r, first);
    }

    /// Says that the follower lost entries of ring `r` before position `first`, the first
    /// it read after them (or its cursor, having read none): nothing below `first` is
    /// recorded from now on, and a run of events begins there. The run before it is kept, up
    /// to its last event, for a snapshot of a moment before the loss; what is older than
    /// that run is forgotten (see the [module](self)).
    pub(crate) fn forget_below(&mut self, r: usize, first: u64) {
        let (chunk, shift, moment) = (self.chunk, self.shift(), self.moment);
        let Some(c) = self.rings.get_mut(r) else {
            return;
        };
        // The current run, up to the loss.
        let run = c.floor.max(c.first)..first.min(c.end).max(c.floor.max(c.first));
        let keeps =
            moment.is_some_and(|m| c.run_oldest > m && c.before.is_some() && c.before_oldest <= m);
        let before = match keeps {
            // The current run began after the moment a snapshot is for, and the run before
            // by it: that one stays (it holds the moment, or is the nearest to it), the
            // current one goes.
            true => {
                for p in run.clone() {
                    if let Some(w) = c.slot(p, shift) {
                        *w = [0; SLOT_WORDS];
                    }
                }
                c.before.clone()
            }
            // Else the current run becomes the run before, up to its last event (what
            // follows it was lost); chunks with nothing in them are passed whole.
            false => {
                let mut end = run.end;
                while end > run.start {
                    let k = ((end - 1 - c.first) >> shift) as usize;
                    if c.chunks[k].newest == 0 {
                        end = (c.first + ((k as u64) << shift)).max(run.start);
                    } else if c.slot(end - 1, shift).is_some_and(|w| w[0] != 0) {
                        break;
                    } else {
                        end -= 1;
                    }
                }
                c.before_oldest = c.run_oldest;
                (end > run.start).then_some(run.start..end)
            }
        };
        // What is older than the run before goes.
        let older = before.as_ref().map_or(run.start, |b| b.start);
        let mut at = c.first;
        for ch in c.chunks.iter_mut() {
            if at + chunk <= older {
                ch.empty();
            } else if at < older {
                ch.slots[..(older - at) as usize].fill([0; SLOT_WORDS]);
            }
            at += chunk;
        }
        c.before = before;
        c.floor = c.floor.max(first);
        // The run's oldest: its first event (read, in this poll, before this was said).
        c.run_oldest = (first..c.end)
            .find_map(|p| c.slot(p, shift).map(|w| w[0]).filter(|&t| t != 0))
            .unwrap_or(u64::MAX);
    }

    /// Says that the device was cleared at `at`: the events stamped at or before it are
    /// forgotten, and none is recorded from now on.
    pub(crate) fn clear_through(&mut self, at: u64) {
        if at <= self.cleared {
            return;
        }
        self.cleared = at;
        for ch in self.rings.iter_mut().flat_map(|c| c.chunks.iter_mut()) {
            if ch.newest <= at {
                ch.empty();
                continue;
            }
            for w in ch.slots.iter_mut() {
                if w[0] != 0 && w[0] & !Stamp::CONTINUATION <= at {
                    *w = [0; SLOT_WORDS];
                }
            }
        }
    }

    /// Says how far its follower reached: `heads[r]` is one past the last position of ring
    /// `r` it looked at; `aux` its copies of the aux buffers.
    pub(crate) fn reached(&mut self, heads: impl IntoIterator<Item = u64>, aux: &AuxSnapshots) {
        for (h, new) in self.heads.iter_mut().zip(heads) {
            *h = new;
        }
        self.aux = aux.clone();
    }

    /// The positions of ring `r` a snapshot of it holds, and that ring's head there: its
    /// current run, below the head the follower reached; or, for a moment older than that
    /// run's first event ([`Shadow::saved_around`]), the run before the last loss, while it is
    /// held.
    fn held(&self, r: usize) -> (core::ops::Range<u64>, u64) {
        let (c, head) = (&self.rings[r], self.heads[r]);
        let before = c.before.clone().filter(|b| b.end > c.first);
        let (held, head) = match (self.around, before) {
            (Some(m), Some(b)) if m < c.run_oldest => (b.start.max(c.first)..b.end, b.end),
            _ => (c.first.max(c.floor)..head.min(c.end), head),
        };
        (self.in_window(r, held), head)
    }

    /// The positions of `held` (ring `r`'s) from the last event stamped before the window's
    /// start ([`Shadow::window`]), or its first position if none is: a chunk whose newest
    /// stamp is older than the window is passed whole.
    ///
    /// That one older event is what says the window is whole on this ring: its readers take
    /// a ring's losses to be older than its oldest event, so a ring saved with its losses
    /// and no event (one idle through the window) would say it lost everything, and the
    /// snapshot would hold no whole time at all.
    fn in_window(&self, r: usize, held: core::ops::Range<u64>) -> core::ops::Range<u64> {
        let (c, since, shift) = (&self.rings[r], self.since, self.shift());
        if since == 0 {
            return held;
        }
        let word = |p: u64| {
            let k = ((p - c.first) >> shift) as usize;
            c.chunks
                .get(k)
                .map(|ch| ch.slots[(p & (self.chunk - 1)) as usize][0])
        };
        let mut p = held.start;
        while p < held.end {
            let k = ((p - c.first) >> shift) as usize;
            let Some(ch) = c.chunks.get(k) else { break };
            if ch.newest < since {
                p = c.first + ((k as u64 + 1) << shift);
                continue;
            }
            let w = ch.slots[(p & (self.chunk - 1)) as usize][0];
            if w != 0 && w & !Stamp::CONTINUATION >= since {
                break;
            }
            p += 1;
        }
        let p = p.min(held.end);
        // Back to the event before (a run has no hole: its slots below `p` hold events and
        // their continuations, but for positions lost before the run began).
        let before = (held.start..p)
            .rev()
            .take(self.chunk as usize)
            .find(|&q| word(q).is_some_and(|w| w != 0 && w & Stamp::CONTINUATION == 0));
        before.unwrap_or(p)..held.end
    }

    /// Says that the snapshot about to be saved holds the events stamped from `since` on (a
    /// trigger's window: its `before`), not all the copy holds (0: all): its rings are saved
    /// from their first position stamped then, so that its bytes follow its window. What is
    /// older counts as the rings' past, as in a device whose rings have moved on.
    pub(crate) fn window(&mut self, since: u64, margin: u64) {
        self.since = since;
        // The strings from the last mark before the window (less the margin a string is
        // written ahead of its event by): all its events' are at or after it.
        let at = since.saturating_sub(margin);
        self.aux_from = self
            .aux_marks
            .iter()
            .map(|marks| match since {
                0 => 0,
                _ => marks
                    .iter()
                    .take_while(|m| m.0 <= at)
                    .last()
                    .map_or(0, |m| m.1),
            })
            .collect();
    }

    /// The head ring `r` is saved with ([`Shadow::held`]).
    pub(crate) fn head(&self, r: usize) -> u64 {
        self.held(r).1
    }

    /// Says the moment a snapshot of the copy is for, from when it is known (a rule's
    /// match) until it is saved: a ring that loses entries meanwhile keeps the run of events
    /// before the loss that began by the moment, and is saved from it (see the
    /// [module](self)); `None`: every ring is saved from its current run.
    pub(crate) fn moment(&mut self, stamp: Option<u64>) {
        self.moment = stamp;
    }

    /// Says the moment the snapshot about to be saved is for (`None`: every ring from its
    /// current run), without changing the moment kept ([`Shadow::moment`]).
    pub(crate) fn saved_around(&mut self, stamp: Option<u64>) {
        self.around = stamp;
    }

    /// Gives each slot of ring `r` that holds an event, as a reader of the copy saved with
    /// rings of `n` slots (a power of two, at least [`Shadow::slots`]) finds it: `put(i,
    /// words)` for slot `i`, which holds the position below the ring's head that `i` is
    /// there. The others are empty.
    pub(crate) fn place_ring(&self, r: usize, n: u64, mut put: impl FnMut(usize, &Words)) {
        let Some(c) = self.rings.get(r) else {
            return;
        };
        let (held, head) = self.held(r);
        let from = held.start.max(head.saturating_sub(n));
        let shift = self.shift();
        for p in from..held.end.max(from) {
            let k = ((p - c.first) >> shift) as usize;
            let w = &c.chunks[k].slots[(p & (self.chunk - 1)) as usize];
            if w[0] != 0 {
                put((p & (n - 1)) as usize, w);
            }
        }
    }

    /// Whether it has used all the memory it was given beyond a ring's worth (what it
    /// keeps when it keeps a window): from then on a ring's copy empties its oldest chunk for newer
    /// positions, even one that holds its window.
    pub fn is_full(&self) -> bool {
        self.keep > 0 && self.spare == 0
    }

    /// The number of rings.
    pub fn rings(&self) -> usize {
        self.rings.len()
    }

    /// What a snapshot of it saves now (its window, around its moment: each ring's run that
    /// holds it, and the strings of its window), as a copy of its own: saved on another
    /// thread, while this one goes on recording. It copies the chunks that hold the window,
    /// nothing else.
    pub fn cut(&self) -> Shadow {
        let shift = self.shift();
        let mut cut = Shadow::new(self.rings.len(), self.base);
        for (r, c) in self.rings.iter().enumerate() {
            let (held, head) = self.held(r);
            cut.heads[r] = head;
            let to = &mut cut.rings[r];
            to.end = c.end;
            to.newest = c.newest;
            to.run_oldest = c.run_oldest;
            if held.is_empty() {
                to.first = head & !(self.chunk - 1);
                to.floor = head;
                continue;
            }
            let k0 = ((held.start - c.first) >> shift) as usize;
            let k1 = ((held.end - 1 - c.first) >> shift) as usize;
            to.chunks = c.chunks.range(k0..=k1).cloned().collect();
            to.first = c.first + ((k0 as u64) << shift);
            to.floor = held.start;
            to.end = held.end;
        }
        cut.aux_cut = Some((0..self.rings.len()).map(|b| self.aux_copy(b)).collect());
        cut
    }

    /// The slots a ring of it is saved with: a power of two, at least the device's, enough
    /// for the positions each ring holds below its head (at most the layout's maximum).
    pub fn slots(&self) -> u64 {
        let longest = (0..self.rings.len())
            .map(|r| {
                let (held, head) = self.held(r);
                head - held.start.min(head)
            })
            .max()
            .unwrap_or(0);
        longest
            .max(self.base)
            .next_power_of_two()
            .min(ttrace_layouts::device::MAX_RING_SLOTS.max(self.base))
    }

    /// The device's slots per ring, that it copies.
    pub(crate) fn base(&self) -> u64 {
        self.base
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ttrace_layouts::entry::{Kind, TypeWord};

    /// An event stamped `stamp`, of `nargs` words `100..`.
    fn event(stamp: u64, nargs: u8) -> Event {
        let tw = TypeWord::new(Kind::Start, nargs, 7).with_cpu(1);
        let args: Vec<u64> = (0..u64::from(nargs)).map(|k| k + 100).collect();
        Event::new(stamp, tw, 42 << 32 | 43, &args, 0)
    }

    /// Ring `r` of `s` as a reader of it saved with `n`-slot rings finds it.
    fn reads(s: &Shadow, r: usize, n: u64) -> Vec<SlotRead> {
        let mut reads = vec![SlotRead::Empty; n as usize];
        s.place_ring(r, n, |i, w| reads[i] = SlotRead::Committed(*w));
        reads
    }

    /// Each slot's stamp (0: empty) in [`reads`].
    fn stamps(s: &Shadow, r: usize, n: u64) -> Vec<u64> {
        let stamp = |read: SlotRead| match read {
            SlotRead::Committed(w) => w[0],
            _ => 0,
        };
        reads(s, r, n).into_iter().map(stamp).collect()
    }

    /// Records at positions `from..to` of ring 0 of `s` events stamped `10 p + 2`, and
    /// says the follower reached `to`.
    fn fill(s: &mut Shadow, positions: std::ops::Range<u64>) {
        let to = positions.end;
        for p in positions {
            s.record(0, p, &event(10 * p + 2, 1));
        }
        s.reached([to], &AuxSnapshots::default());
    }

    #[test]
    fn an_event_goes_back_to_its_position() {
        let mut s = Shadow::new(2, 4);
        let e = event(1000, 12);
        s.record(1, 3, &e);
        s.reached([0, 5], &AuxSnapshots::default());
        // The parent at position 3, its continuation at 4, in slot 0.
        let ring = reads(&s, 1, 4);
        let SlotRead::Committed(p) = ring[3] else {
            panic!("no parent")
        };
        assert_eq!(p[..4], [1000, e.type_word.0, 42 << 32 | 43, 100]);
        let SlotRead::Committed(c) = ring[0] else {
            panic!("no continuation")
        };
        assert_eq!(c[0], 1001);
        assert_eq!(c[1..], [105, 106, 107, 108, 109, 110, 111]);
        assert_eq!(reads(&s, 0, 4), [SlotRead::Empty; 4]);
        assert_eq!(ring[1], SlotRead::Empty);
        // Read back as a reader reads slots: the same event.
        let (back, _) = crate::ring::event_at(&ring, 3).unwrap();
        assert_eq!((back.stamp, back.words), (e.stamp, e.words));
        // Saved with longer rings, each position is where that length puts it.
        assert_eq!(stamps(&s, 1, 8), [0, 0, 0, 1000, 1001, 0, 0, 0]);
        // Lost entries of ring 1 before position 6: it is forgotten, and nothing older is
        // recorded.
        s.forget_below(1, 6);
        assert_eq!(stamps(&s, 1, 8), [0; 8]);
        s.record(1, 5, &event(2000, 1));
        assert_eq!(stamps(&s, 1, 8), [0; 8]);
    }

    #[test]
    fn a_copy_grows_to_hold_its_window() {
        // Four slots a ring (chunks of four); a window of 100 ticks; room for two chunks
        // beyond a ring's worth.
        let mut s = Shadow::new(1, 4);
        s.keep(100, 2 * 4 * 64);
        fill(&mut s, 0..20);
        // The window (stamps 92..192) needs 11 positions: the copy took its two chunks, and
        // holds 16.
        assert_eq!(s.slots(), 16);
        let mut found = stamps(&s, 0, 16);
        found.sort_unstable();
        assert_eq!(found, (4..20).map(|p| 10 * p + 2).collect::<Vec<_>>());
    }

    #[test]
    fn a_copy_grows_no_further_than_its_memory() {
        // A window wider than anything recorded; room for two chunks.
        let mut s = Shadow::new(1, 4);
        s.keep(1 << 40, 2 * 4 * 64);
        fill(&mut s, 0..40);
        assert_eq!(s.slots(), 16);
        let mut found = stamps(&s, 0, 16);
        found.sort_unstable();
        assert_eq!(found, (24..40).map(|p| 10 * p + 2).collect::<Vec<_>>());
    }

    #[test]
    fn a_window_saves_only_what_it_holds_from_its_start() {
        let mut s = Shadow::new(1, 16);
        fill(&mut s, 0..16);
        // Events from stamp 100 on: positions 10..16 (stamps 102..152), and the one before
        // (that the window is whole on the ring); the rest empty.
        s.window(100, 0);
        let found = stamps(&s, 0, 16);
        assert_eq!(found[..9], [0; 9]);
        assert_eq!(found[9..], [92, 102, 112, 122, 132, 142, 152]);
        // A cut saves the same, and holds only the chunks of the window.
        let cut = s.cut();
        assert_eq!(stamps(&cut, 0, 16), found);
        assert_eq!(cut.rings[0].chunks.len(), 1);
        // A window older than all it holds saves it all; one after its newest, its newest
        // (the ring was idle through the window, and lost nothing of it).
        s.window(1, 0);
        assert_eq!(stamps(&s, 0, 16).iter().filter(|&&t| t != 0).count(), 16);
        s.window(1000, 0);
        let mut last = [0; 16];
        last[15] = 152;
        assert_eq!(stamps(&s, 0, 16), last);
        s.window(0, 0);
        assert_eq!(stamps(&s, 0, 16).iter().filter(|&&t| t != 0).count(), 16);
    }

    #[test]
    fn a_loss_within_a_poll_leaves_no_hole_in_a_run() {
        // One poll read positions 0..5, lost 5, read 6..10 (a slot overwritten while read).
        let mut s = Shadow::new(1, 16);
        fill(&mut s, 0..5);
        fill(&mut s, 6..10);
        s.lost(0, 5..6, 10);
        // The current run begins after the loss; the one before ends before it.
        let mut after = [0; 16];
        after[6..10].copy_from_slice(&[62, 72, 82, 92]);
        assert_eq!(stamps(&s, 0, 16), after);
        s.saved_around(Some(30));
        let mut before = [0; 16];
        before[..5].copy_from_slice(&[2, 12, 22, 32, 42]);
        assert_eq!(stamps(&s, 0, 16), before);
        // Two losses in one poll: what was read between them goes.
        let mut s = Shadow::new(1, 16);
        fill(&mut s, 0..3);
        fill(&mut s, 4..6);
        fill(&mut s, 7..10);
        s.lost(0, 3..7, 10);
        let mut after = [0; 16];
        after[7..10].copy_from_slice(&[72, 82, 92]);
        assert_eq!(stamps(&s, 0, 16), after);
    }

    #[test]
    fn without_a_window_a_copy_holds_a_ring() {
        let mut s = Shadow::new(1, 4);
        fill(&mut s, 0..10);
        // A ring's worth, and what remains of its oldest chunk (positions 4..10).
        assert_eq!(s.slots(), 8);
        assert_eq!(stamps(&s, 0, 8), [82, 92, 0, 0, 42, 52, 62, 72]);
        // Saved with the device's length, the ring's worth below the head.
        assert_eq!(stamps(&s, 0, 4), [82, 92, 62, 72]);
        // A clear forgets what it cleared.
        s.clear_through(72);
        assert_eq!(stamps(&s, 0, 4), [82, 92, 0, 0]);
        s.record(0, 10, &event(50, 1));
        assert_eq!(stamps(&s, 0, 4), [82, 92, 0, 0]);
    }
}
