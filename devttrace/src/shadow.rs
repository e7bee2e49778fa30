//! A follower's own copy of the rings: every event it released, written back into its slot,
//! so that what it read can be saved as a snapshot after the device's rings have moved on
//! (`ttrace-reader watch` saves a match from it: a watcher that fell behind, or a window
//! longer than the rings hold by the time the match is due, still saves the moment it
//! matched).
//!
//! **What it holds.** A slot holds the words of the last event released from it: an
//! entry's words are those the reader accepted, so the copy holds the events read, each
//! where it was, its continuation in the next slot. A slot whose newer entry the follower
//! lost keeps what an earlier lap put there; read back (a snapshot of the copy), a
//! restartable ring's entry carries the position tag of that earlier lap, not the
//! position's, and counts overwritten, as the follower counted it. A shared ring's entries
//! carry no lap: such a leftover shows as the older event it is (a real one, read earlier),
//! where the device had a newer one the follower lost. The heads are the positions the
//! follower reached; the aux buffers are the follower's last copies (the strings of the
//! events it read); the rest — the header's counters and control, the metadata — is the
//! device's when the copy is saved ([`crate::Reader::save_shadow`]). It begins as a copy of
//! the rings when the follower began (what it had not to read, the device's past then), so
//! that its readers count as lost what the device had lost then and what the follower lost
//! since, nothing else.
//!
//! Memory: as the device's rings that hold something when it begins, or later get an event.

use crate::aux::AuxSnapshots;
use crate::event::Event;
use crate::ring::{Ring, SlotRead};
use ttrace_layouts::entry::{Stamp, ENTRY_ARGS, SLOT_WORDS};

/// The rings as a follower read them (see the [module](self)).
#[derive(Debug)]
pub struct Shadow {
    /// Per ring: its slots, once it had an event.
    rings: Vec<Option<Vec<[u64; SLOT_WORDS]>>>,
    slots: usize,
    /// Per ring: one past the last position the follower reached.
    pub(crate) heads: Vec<u64>,
    /// Per ring: events stamped before this are not recorded (see [`Shadow::lost`]).
    floors: Vec<u64>,
    /// The follower's copies of the aux buffers.
    pub(crate) aux: AuxSnapshots,
}

impl Shadow {
    /// A copy of `rings` empty rings of `slots` slots.
    pub fn new(rings: usize, slots: u64) -> Shadow {
        Shadow {
            rings: vec![None; rings],
            slots: slots.max(1) as usize,
            heads: vec![0; rings],
            floors: vec![0; rings],
            aux: AuxSnapshots::default(),
        }
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
        if head == 0 {
            return; // Never written: allocated at its first event, if any.
        }
        let slots = vec![[0; SLOT_WORDS]; self.slots];
        let slots = self.rings[r].insert(slots);
        // The slots written: below the head until the ring wraps (a read of another would
        // allocate a page of a device held in memory, for nothing).
        let written = head.min(ring.slot_count() as u64) as usize;
        for (i, slot) in slots.iter_mut().enumerate().take(written) {
            if let SlotRead::Committed(w) = ring.read(i) {
                *slot = w;
            }
        }
    }

    /// Writes the event `e`, released from ring `ring`, back into its slot (and its
    /// continuation's, where it has one).
    pub fn record(&mut self, ring: usize, e: &Event) {
        if self.floors.get(ring).is_some_and(|&f| e.stamp < f) {
            return;
        }
        let n = self.slots;
        let Some(slots) = self.rings.get_mut(ring) else {
            return;
        };
        let slots = slots.get_or_insert_with(|| vec![[0; SLOT_WORDS]; n]);
        let i = e.slot as usize % n;
        let mut parent = [0; SLOT_WORDS];
        parent[0] = e.stamp;
        parent[1] = e.type_word.0;
        parent[2] = e.ctx;
        parent[3..].copy_from_slice(&e.words[..ENTRY_ARGS]);
        slots[i] = parent;
        if e.type_word.has_continuation() && !e.continuation_lost {
            let mut next = [0; SLOT_WORDS];
            next[0] = e.stamp | Stamp::CONTINUATION;
            next[1..].copy_from_slice(&e.words[ENTRY_ARGS..]);
            slots[(i + 1) % n] = next;
        }
    }

    /// Says that the follower lost entries of ring `ring`, each stamped before `before`
    /// (its poll's gap: `Poll::gaps`): what the copy holds of that ring is forgotten, and
    /// no event of it stamped before `before` is recorded from now on. So a ring of the
    /// copy never has a hole between events it holds: its losses are all older than its
    /// oldest event, as a device ring's are, which is what readers of a snapshot take them
    /// to be (the horizon: `ttrace_model::pairs`).
    pub fn lost(&mut self, ring: usize, before: u64) {
        if let Some(slots) = self.rings.get_mut(ring).and_then(Option::as_mut) {
            slots.fill([0; SLOT_WORDS]);
        }
        if let Some(f) = self.floors.get_mut(ring) {
            *f = (*f).max(before);
        }
    }

    /// Says how far its follower reached: `heads[r]` is one past the last position of ring
    /// `r` it looked at; `aux` its copies of the aux buffers
    /// ([`Follower::reached`](crate::Follower::reached) says it).
    pub fn reached(&mut self, heads: impl IntoIterator<Item = u64>, aux: &AuxSnapshots) {
        for (h, new) in self.heads.iter_mut().zip(heads) {
            *h = new;
        }
        self.aux = aux.clone();
    }

    /// Slot `i` of ring `r` as a reader of the copy finds it.
    pub(crate) fn read(&self, r: usize, i: usize) -> SlotRead {
        match self.rings.get(r).and_then(Option::as_ref).map(|s| s[i]) {
            Some(w) if w[0] != 0 => SlotRead::Committed(w),
            _ => SlotRead::Empty,
        }
    }

    /// The number of rings.
    pub fn rings(&self) -> usize {
        self.rings.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ttrace_layouts::entry::TypeWord;

    #[test]
    fn an_event_goes_back_into_its_slots() {
        let mut s = Shadow::new(2, 4);
        let tw = TypeWord::new(ttrace_layouts::entry::Kind::Start, 12, 7).with_cpu(1);
        let mut words = [0; ttrace_layouts::entry::MAX_ARGS];
        words
            .iter_mut()
            .enumerate()
            .for_each(|(k, w)| *w = k as u64 + 100);
        let e = Event {
            stamp: 1000,
            type_word: tw,
            ctx: 42 << 32 | 43,
            words,
            nargs: 12,
            continuation_lost: false,
            slot: 3,
        };
        s.record(1, &e);
        // The parent in slot 3, its continuation wrapped to slot 0.
        let SlotRead::Committed(p) = s.read(1, 3) else {
            panic!("no parent")
        };
        assert_eq!(p[..4], [1000, tw.0, 42 << 32 | 43, 100]);
        let SlotRead::Committed(c) = s.read(1, 0) else {
            panic!("no continuation")
        };
        assert_eq!(c[0], 1001);
        assert_eq!(c[1..], [105, 106, 107, 108, 109, 110, 111]);
        assert_eq!(s.read(0, 3), SlotRead::Empty);
        assert_eq!(s.read(1, 1), SlotRead::Empty);
        // Lost entries of ring 1 before 2000: it is forgotten, and an older event is not
        // recorded.
        s.lost(1, 2000);
        assert_eq!(s.read(1, 3), SlotRead::Empty);
        s.record(1, &e);
        assert_eq!(s.read(1, 3), SlotRead::Empty);
        s.record(1, &Event { stamp: 2000, ..e });
        // Read back as a reader reads slots: the same event.
        let reads: Vec<SlotRead> = (0..4).map(|i| s.read(1, i)).collect();
        let (back, _) = crate::ring::event_at(&reads, 3).unwrap();
        assert_eq!(back, Event { stamp: 2000, ..e });
    }
}
