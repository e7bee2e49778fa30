//! A follower's own copy of the rings: every event it read, written back at its position,
//! so that what it read can be saved as a snapshot after the device's rings have moved on
//! (`ttrace-reader watch` saves a match from it: a watcher that fell behind, or a window
//! longer than the rings hold by the time the match is due, still saves the moment it
//! matched). A [`Follower`](crate::Follower) keeps it ([`Follower::keep_copy`](crate::Follower::keep_copy)),
//! recording each event as it reads it, at the position it read it from.
//!
//! **What it holds.** Per ring, a run of positions ending at the newest position recorded:
//! position `p` in slot `p % len`, its words as the reader accepted them (an entry's
//! position tag is the position's, whatever the copy's size), its continuation at `p + 1`.
//! A position passed and not read (lost, or still being written when the copy is saved) is
//! empty: the copy's readers count it lost, as the follower did. It begins as the rings
//! were when the follower began (the device's past then), so that its readers count as
//! lost what the device had lost then and what the follower lost since, nothing else.
//!
//! **Its own window.** A ring's copy holds a ring's worth of positions, as the device does;
//! given a window ([`Shadow::keep`]), it grows (doubling) rather than overwrite an event
//! stamped within the window of the newest it holds, while the memory allowed lasts. So a
//! copy can hold more than the device's rings: a second of a ring written at 10 M events/s
//! where the device's ring holds 13 ms. It is saved as a device whose rings are as long as
//! its longest. The strings are the follower's last copies of the aux buffers: an event
//! older than its aux buffer holds has its strings shown lost.
//!
//! **Losses.** When the follower loses entries of a ring, the copy forgets what it holds of
//! the ring below the first position read after the loss ([`Shadow::forget_below`]), so a
//! ring of the copy never has a hole between events it holds: its losses are all older
//! than its oldest event, as a device ring's are, which is what readers of a snapshot take
//! them to be (the horizon: `ttrace_model::pairs`). A clear of the device forgets what the
//! clear cleared.

use crate::aux::AuxSnapshots;
use crate::event::Event;
use crate::ring::{Ring, SlotRead};
use ttrace_layouts::entry::{Stamp, ENTRY_ARGS, SLOT_WORDS};

/// The rings as a follower read them (see the [module](self)).
#[derive(Debug)]
pub struct Shadow {
    /// Per ring, its copy.
    rings: Vec<RingCopy>,
    /// The device's slots per ring: each copy holds at least as many positions.
    base: usize,
    /// A copy grows rather than overwrite an event stamped within this of its newest
    /// (clock ticks; 0: it never grows).
    keep: u64,
    /// The slots the copies may still grow by, all rings together.
    spare: usize,
    /// Events stamped at or before this were cleared ([`Shadow::clear_through`]).
    cleared: u64,
    /// Per ring: one past the last position the follower reached.
    pub(crate) heads: Vec<u64>,
    /// The follower's copies of the aux buffers.
    pub(crate) aux: AuxSnapshots,
}

/// One ring's copy.
#[derive(Clone, Debug, Default)]
struct RingCopy {
    /// Position `p`'s words in `slots[p % slots.len()]`, for `p` in `end - len .. end`;
    /// no slots until the ring's first event.
    slots: Vec<[u64; SLOT_WORDS]>,
    /// One past the newest position recorded (or passed, and emptied).
    end: u64,
    /// Positions below this are not recorded (forgotten after a loss).
    floor: u64,
    /// The newest stamp recorded.
    newest: u64,
}

impl RingCopy {
    /// Whether `w`, a slot's words, is an event within `keep` of the newest recorded.
    fn recent(&self, w: &[u64; SLOT_WORDS], keep: u64) -> bool {
        w[0] != 0 && w[0] >= self.newest.saturating_sub(keep)
    }
}

impl Shadow {
    /// A copy of `rings` empty rings of `slots` slots, that never grows.
    pub(crate) fn new(rings: usize, slots: u64) -> Shadow {
        Shadow {
            rings: vec![RingCopy::default(); rings],
            base: slots.max(1) as usize,
            keep: 0,
            spare: 0,
            cleared: 0,
            heads: vec![0; rings],
            aux: AuxSnapshots::default(),
        }
    }

    /// Lets each ring's copy grow rather than overwrite an event stamped within `keep`
    /// clock ticks of its newest, by at most `max_bytes` over all rings (see the
    /// [module](self)).
    pub(crate) fn keep(&mut self, keep: u64, max_bytes: u64) {
        self.keep = keep;
        let slot = (SLOT_WORDS * 8) as u64;
        self.spare = usize::try_from(max_bytes / slot).unwrap_or(usize::MAX);
    }

    /// Copies ring `r` of the device, `ring`, whose head was `head` when its follower began
    /// (before the follower reads it): each committed slot's words ([`Ring::read`]'s check),
    /// nothing of a slot being written.
    pub(crate) fn copy_ring(
        &mut self,
        r: usize,
        ring: &Ring<'_, ttrace_layouts::entry::Slot>,
        head: u64,
    ) {
        self.heads[r] = head;
        let base = self.base;
        let c = &mut self.rings[r];
        c.end = head;
        if head == 0 {
            return; // Never written: allocated at its first event, if any.
        }
        // A copy of the device's length: position `p` is in slot `p % base`, as there.
        let slots = made(&mut c.slots, base);
        // The slots written: below the head until the ring wraps (a read of another would
        // allocate a page of a device held in memory, for nothing).
        let written = head.min(ring.slot_count() as u64) as usize;
        for (i, slot) in slots.iter_mut().enumerate().take(written) {
            if let SlotRead::Committed(w) = ring.read(i) {
                *slot = w;
            }
        }
        c.newest = slots.iter().map(|w| w[0]).max().unwrap_or(0);
    }

    /// Writes the event `e`, read from position `p` of ring `r`, into the copy (and its
    /// continuation at `p + 1`, where it has one).
    pub(crate) fn record(&mut self, r: usize, p: u64, e: &Event) {
        let continued = e.type_word.has_continuation() && !e.continuation_lost;
        let base = self.base;
        let Some(c) = self.rings.get_mut(r) else {
            return;
        };
        if p < c.floor || e.stamp <= self.cleared {
            return;
        }
        c.newest = c.newest.max(e.stamp);
        made(&mut c.slots, base);
        self.advance(r, p + 1 + u64::from(continued));
        let c = &mut self.rings[r];
        let len = c.slots.len() as u64;
        if p + len < c.end {
            return; // Older than the copy holds.
        }
        let mut parent = [0; SLOT_WORDS];
        parent[0] = e.stamp;
        parent[1] = e.type_word.0;
        parent[2] = e.ctx;
        parent[3..].copy_from_slice(&e.words[..ENTRY_ARGS]);
        c.slots[index(p, len)] = parent;
        if continued {
            let mut next = [0; SLOT_WORDS];
            next[0] = e.stamp | Stamp::CONTINUATION;
            next[1..].copy_from_slice(&e.words[ENTRY_ARGS..]);
            c.slots[index(p + 1, len)] = next;
        }
    }

    /// Moves ring `r`'s copy on to end at `to`: the slots of the positions it passes are
    /// emptied for them, or, where that would overwrite an event within the window of the
    /// newest and memory is left, the copy doubles first.
    fn advance(&mut self, r: usize, to: u64) {
        let c = &mut self.rings[r];
        loop {
            let len = c.slots.len() as u64;
            if c.end >= to {
                return;
            }
            // A jump past all it holds (positions the follower did not read: lost).
            if to - c.end >= len {
                c.slots.fill([0; SLOT_WORDS]);
                c.end = to;
                return;
            }
            let i = index(c.end, len);
            let grows = self.keep > 0
                && self.spare >= len as usize
                && len < ttrace_layouts::device::MAX_RING_SLOTS
                && c.recent(&c.slots[i], self.keep);
            if grows {
                self.spare -= len as usize;
                let wider = 2 * len;
                let mut slots = vec![[0; SLOT_WORDS]; wider as usize];
                for p in c.end.saturating_sub(len)..c.end {
                    slots[index(p, wider)] = c.slots[index(p, len)];
                }
                c.slots = slots;
                continue;
            }
            c.slots[i] = [0; SLOT_WORDS];
            c.end += 1;
        }
    }

    /// Says that the follower lost entries of ring `r` before position `first`, the first
    /// it read after them (or its cursor, having read none): what the copy holds of the
    /// ring below `first` is forgotten, and nothing below it is recorded from now on (see
    /// the [module](self)).
    pub(crate) fn forget_below(&mut self, r: usize, first: u64) {
        let Some(c) = self.rings.get_mut(r) else {
            return;
        };
        let len = c.slots.len() as u64;
        if len > 0 {
            let from = c.end.saturating_sub(len).max(c.floor);
            for p in from..first.min(c.end) {
                c.slots[index(p, len)] = [0; SLOT_WORDS];
            }
        }
        c.floor = c.floor.max(first);
    }

    /// Says that the device was cleared at `at`: the events stamped at or before it are
    /// forgotten, and none is recorded from now on.
    pub(crate) fn clear_through(&mut self, at: u64) {
        if at <= self.cleared {
            return;
        }
        self.cleared = at;
        for c in &mut self.rings {
            for w in &mut c.slots {
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

    /// Gives each slot of ring `r` that holds an event, as a reader of the copy saved with
    /// rings of `n` slots (a power of two, at least [`Shadow::slots`]) finds it: `put(i,
    /// words)` for slot `i`, which holds the position below the ring's head that `i` is
    /// there. The others are empty.
    pub(crate) fn place_ring(
        &self,
        r: usize,
        n: u64,
        mut put: impl FnMut(usize, &[u64; SLOT_WORDS]),
    ) {
        let (Some(&head), Some(c)) = (self.heads.get(r), self.rings.get(r)) else {
            return;
        };
        let len = c.slots.len() as u64;
        if len == 0 {
            return;
        }
        let from = (head.saturating_sub(n))
            .max(c.end.saturating_sub(len))
            .max(c.floor);
        for p in from..head.min(c.end) {
            let w = &c.slots[index(p, len)];
            if w[0] != 0 {
                put(index(p, n), w);
            }
        }
    }

    /// The number of rings.
    pub fn rings(&self) -> usize {
        self.rings.len()
    }

    /// The slots of its longest ring's copy: those of the rings it is saved with (a power
    /// of two, at least the device's).
    pub fn slots(&self) -> u64 {
        let longest = self.rings.iter().map(|c| c.slots.len()).max().unwrap_or(0);
        longest.max(self.base) as u64
    }

    /// The device's slots per ring, that it copies.
    pub(crate) fn base(&self) -> u64 {
        self.base as u64
    }
}

/// The slot of position `p` in a copy of `len` slots, a power of two: `p % len`, without
/// a division (one for each position recorded would cost more than the rest of a record).
fn index(p: u64, len: u64) -> usize {
    debug_assert!(len.is_power_of_two());
    (p & (len - 1)) as usize
}

/// `slots`, made `len` long if it is not made yet (a ring's copy at its first event).
fn made(slots: &mut Vec<[u64; SLOT_WORDS]>, len: usize) -> &mut Vec<[u64; SLOT_WORDS]> {
    if slots.is_empty() {
        *slots = vec![[0; SLOT_WORDS]; len];
    }
    slots
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
        assert_eq!(stamps(&s, 1, 4), [0; 4]);
        s.record(1, 5, &event(2000, 1));
        assert_eq!(stamps(&s, 1, 4), [0; 4]);
    }

    #[test]
    fn a_copy_grows_to_hold_its_window() {
        // Four slots a ring; a window of 100 ticks; room for 12 more slots.
        let mut s = Shadow::new(1, 4);
        s.keep(100, 12 * 64);
        for p in 0..20 {
            s.record(0, p, &event(10 * p + 2, 1));
        }
        s.reached([20], &AuxSnapshots::default());
        // Grown to 16 (4 + 4 + 8 slots): the window (stamps 92..192) needs 11 positions.
        assert_eq!(s.slots(), 16);
        let held: Vec<u64> = (4..20).map(|p| 10 * p + 2).collect();
        let mut found = stamps(&s, 0, 16);
        found.sort_unstable();
        assert_eq!(found, held);
        // Memory spent: it no longer grows, and overwrites its oldest.
        for p in 20..40 {
            s.record(0, p, &event(10 * p + 2, 1));
        }
        s.reached([40], &AuxSnapshots::default());
        assert_eq!(s.slots(), 16);
        let mut found = stamps(&s, 0, 16);
        found.sort_unstable();
        assert_eq!(found, (24..40).map(|p| 10 * p + 2).collect::<Vec<_>>());
    }

    #[test]
    fn without_a_window_a_copy_holds_a_ring() {
        let mut s = Shadow::new(1, 4);
        for p in 0..10 {
            s.record(0, p, &event(10 * p + 2, 1));
        }
        s.reached([10], &AuxSnapshots::default());
        assert_eq!(s.slots(), 4);
        assert_eq!(stamps(&s, 0, 4), [82, 92, 62, 72]);
        // A clear forgets what it cleared.
        s.clear_through(72);
        assert_eq!(stamps(&s, 0, 4), [82, 92, 0, 0]);
        s.record(0, 10, &event(50, 1));
        assert_eq!(stamps(&s, 0, 4), [82, 92, 0, 0]);
    }
}
