//! The reader's walk of a ring: every position from the oldest the ring can still hold to
//! the cut, each judged once, for both kinds of ring ([`Ring::walk`]).
//!
//! **The cut.** The walk loads `head` first (Acquire), and, of a shared ring, `skipped`: the
//! positions below that `head` are the ones it accounts for. They are `cut - slots .. cut`
//! (from 0 while the ring has not wrapped), read in that order, each slot once with the
//! stamp check ([`Ring::read`]), so the events come out oldest first but for a writer that
//! was preempted between its clock and its reservation (a check finds that, and only then
//! sorts).
//!
//! **What a position can be.** Its slot's read, judged by the ring's protocol (`Held`):
//!
//! - *empty*: in a shared ring, reserved but not yet claimed (being written: `claimed`); in
//!   a restartable ring nothing below an acquired `head` is empty but on a damaged device
//!   (counted nowhere, so `lost`);
//! - *claimed*: a writer owns the slot (being written, or its writer died: `claimed`); in a
//!   shared ring a claim tagged at or above the cut is a later position's (`after_cut`);
//! - *changed*: the stamp moved during the copy (overwritten as it was read), or, in a
//!   restartable ring, the slot holds another position's entry (a later one, or an aborted
//!   section's): `changed`, and so lost;
//! - *a parent*: a committed entry of this position (restartable: its position tag is the
//!   position's; shared: tagged below the cut): `committed`, and an event once the next
//!   position is read, since that may hold its continuation (stamp = the parent's `| 1`);
//!   in a shared ring, one tagged at or above the cut was written while the walk ran
//!   (`after_cut`, its continuation too);
//! - *malformed*: a committed parent whose type word no writer makes: `committed` and
//!   `malformed`, no event;
//! - *a continuation*: the second slot of the previous position's event if that is its
//!   parent (`committed`); without its parent, in a shared ring an *orphan* (`committed`
//!   and `orphans`); in a restartable ring it cannot be told from an aborted section's
//!   leftover, and its event is lost either way (`changed`).
//!
//! Each complete event is then kept or counted by the [`Keep`]: `damaged` (not sound),
//! `cleared` (stamped at or before the device's last clear), `older` (not newer than asked),
//! or kept (a copy, a [`Mark`](crate::event::Mark), or nothing but what the [`Visitor`] takes).
//!
//! **The wrap.** The successor of the last position (`cut - 1`) is the slot of `cut`, the
//! first one read. A restartable ring's `cut` is a whole reservation's end, so nothing below
//! it continues into that slot: the successor is empty. A shared ring's last slot can still
//! hold an older parent (its position reserved, not yet claimed) whose continuation is in
//! the first slot: the walk uses the first read, or, if that cannot complete the parent,
//! reads the slot again (a continuation is committed before its parent). Whether the first
//! position's continuation was an orphan is known only then.
//!
//! **Why it is right.** A copy is accepted only whole (two equal committed stamps around
//! it, an Acquire fence before the second), and each position is counted exactly once in
//! one of `committed`, `claimed`, `changed`, `after_cut` (or not at all, which is `lost`),
//! so on a ring nobody writes `head = skipped + committed + claimed + lost + damaged`
//! (`after_cut` is outside `head`: it is above the cut). Restartable: every entry below an
//! acquired `head` is committed and visible, and a slot holds the latest position written
//! to it, so a tag that is not the position's means that position was overwritten; a shared
//! ring's writers claim before they store, so a slot's whole copy is one writer's entry, and
//! the tag orders it against the cut. `docs/DESIGN.md` (*Reading*, *Accounting*, *The
//! restartable protocol*) argues each rule; the loom models (`devttrace/tests/loom*.rs`)
//! check them.

use crate::clear::Cleared;
use crate::event::{Event, Kept, RingSnapshot, MAX_WRITERS};
use crate::ring::{stitch, Ring, SlotRead, SlotWords};
use ttrace_layouts::entry::{Stamp, TypeWord, SLOT_WORDS};

/// What a walk keeps of a ring: the complete events that `sound` accepts (the others are
/// counted as damaged, see `crate::damage`) and that are newer than both `newer_than` and
/// the clear `cleared`.
#[derive(Clone, Copy)]
pub struct Keep<F> {
    /// Events stamped at or before this are counted as older, not kept.
    pub newer_than: u64,
    /// The device's last clear.
    pub cleared: Cleared,
    /// Whether an event is sound.
    pub sound: F,
}

impl Keep<fn(&Event) -> bool> {
    /// Every sound-looking event newer than `newer_than` and the clear: what a walk keeps
    /// where nothing tells it what a device's events must be (a ring alone).
    ///
    /// ```
    /// use core::sync::atomic::AtomicU64;
    /// use devttrace::{clear::Cleared, ring::HeapRing, Keep, Mark};
    /// use ttrace_layouts::entry::{Kind, TypeWord};
    /// let words = [TypeWord::new(Kind::Entry, 0, 7).0, 0, 0, 0, 0, 0, 0];
    /// let mem = HeapRing::<AtomicU64>::new(4);
    /// mem.writer().write(1000, 1, &words);
    /// mem.writer().write(2000, 1, &words);
    /// let index = mem.ring().walk::<Mark>(&Keep::newer_than(1500, Cleared::default()), &mut ());
    /// assert_eq!((index.events.len(), index.older, index.committed), (1, 1, 2));
    /// ```
    pub fn newer_than(newer_than: u64, cleared: Cleared) -> Self {
        fn any(_: &Event) -> bool {
            true
        }
        Keep {
            newer_than,
            cleared,
            sound: any,
        }
    }
}

/// Slots a walk reads between two calls of [`Visitor::done`].
const VISITED: usize = 4096;

/// What a walk tells besides the events it keeps.
pub trait Visitor {
    /// An event the walk keeps.
    #[inline(always)]
    fn event(&mut self, _event: &Event) {}
    /// The walk is done reading the slots of `slots` (it may read one more time the slot
    /// it began with).
    #[inline(always)]
    fn done(&mut self, _slots: core::ops::Range<usize>) {}
}

/// The visitor of walks that only keep.
impl Visitor for () {}

/// What a position holds, judged (see the module documentation).
#[derive(Clone, Copy)]
enum Held {
    /// Nothing to pair: an empty slot, a claim, a changed slot, a malformed parent, a
    /// continuation, or the position before the first.
    Nothing,
    /// This position's parent entry (from its slot), to become an event with the next read.
    Parent(usize, [u64; SLOT_WORDS]),
    /// A shared ring's parent tagged at or above the cut: its continuation is after the cut
    /// too.
    Later([u64; SLOT_WORDS]),
}

/// What the previous position's parent made of this position's read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Paired {
    /// Nothing: the previous position held no parent, or not this one's.
    No,
    /// This read is the previous parent's continuation, stitched to its event.
    Stitched,
    /// The previous position was written after the cut (shared ring); whether this read is
    /// its continuation.
    Later(bool),
}

/// Whether the committed parent `w` was written at or above position `cut` (its position
/// tag, 28 bits, is at most 2^27 positions ahead of the cut's).
fn tagged_after(w: &[u64; SLOT_WORDS], cut: u64) -> bool {
    let tw = TypeWord(w[1]);
    !Stamp(w[0]).is_continuation()
        && tw.is_valid()
        && ((tw.position_tag().wrapping_sub(TypeWord::tag_of(cut)) << 4) as i32 >> 4) >= 0
}

/// Whether the claim `c` is for a position at or above `cut` (40 bits).
fn claimed_after(c: Stamp, cut: u64) -> bool {
    const MASK: u64 = (1 << 40) - 1;
    (c.claim_pos().wrapping_sub(cut & MASK) & MASK) < 1 << 39
}

/// Whether `r` is the continuation of the parent `w`.
#[inline(always)]
fn continues(r: &SlotRead, w: &[u64; SLOT_WORDS]) -> bool {
    matches!(r, SlotRead::Committed(c) if c[0] == w[0] | Stamp::CONTINUATION)
}

/// Keeps the complete event `e` (its continuation `stitched` from the next slot) if `keep`
/// does, else counts it.
#[inline]
fn take<T: Kept, V: Visitor>(
    snap: &mut RingSnapshot<T>,
    e: Event,
    stitched: bool,
    keep: &Keep<impl Fn(&Event) -> bool>,
    visitor: &mut V,
) {
    let (newer_than, cleared_at) = (keep.newer_than, keep.cleared.at);
    if !(keep.sound)(&e) {
        snap.damaged += 1 + stitched as u64;
    } else if e.stamp <= cleared_at {
        snap.cleared += 1 + stitched as u64;
    } else if e.stamp > newer_than {
        let pid = (e.ctx >> 32) as u32;
        if snap.writers.last() != Some(&pid) && !snap.writers.contains(&pid) {
            if snap.writers.len() < MAX_WRITERS {
                snap.writers.push(pid);
            } else {
                snap.writers_more = true;
            }
        }
        visitor.event(&e);
        snap.events.push(T::keep(e));
    } else {
        snap.older += 1;
    }
}

/// Makes the previous position's parent `prev` an event, with `r` (this position's read)
/// as its possible continuation, and says what `r` was to it.
#[inline(always)]
fn pair<T: Kept, V: Visitor>(
    snap: &mut RingSnapshot<T>,
    prev: Held,
    r: &SlotRead,
    keep: &Keep<impl Fn(&Event) -> bool>,
    visitor: &mut V,
) -> Paired {
    match prev {
        Held::Nothing => Paired::No,
        Held::Later(w) => Paired::Later(continues(r, &w)),
        Held::Parent(slot, w) => match stitch(&w, slot, || *r) {
            Some((e, stitched)) => {
                take(snap, e, stitched, keep, visitor);
                match stitched {
                    true => Paired::Stitched,
                    false => Paired::No,
                }
            }
            // Not reached: a parent is judged well-formed.
            None => {
                snap.malformed += 1;
                Paired::No
            }
        },
    }
}

impl<S: SlotWords> Ring<'_, S> {
    /// Every complete event, oldest first, and the counts: the [walk](Ring::walk) keeping
    /// everything, with no clear and no check.
    pub fn snapshot(&self) -> RingSnapshot {
        self.walk(&Keep::newer_than(0, Cleared::default()), &mut ())
    }

    /// Judges position `p` (below `cut`), read `r` from slot `slot`, given what the previous
    /// position's parent made of it, and counts it (see the module documentation).
    #[inline(always)]
    fn judge<const RESTARTABLE: bool, T: Kept>(
        &self,
        snap: &mut RingSnapshot<T>,
        r: &SlotRead,
        slot: usize,
        p: u64,
        cut: u64,
        paired: Paired,
    ) -> Held {
        let restartable = RESTARTABLE;
        match *r {
            SlotRead::Empty if restartable => {}
            SlotRead::Empty => snap.claimed += 1,
            SlotRead::Claimed(c) if !restartable && claimed_after(c, cut) => snap.after_cut += 1,
            SlotRead::Claimed(_) => snap.claimed += 1,
            SlotRead::Changed => snap.changed += 1,
            SlotRead::Committed(w) if Stamp(w[0]).is_continuation() => match paired {
                Paired::Stitched => snap.committed += 1,
                _ if restartable => snap.changed += 1,
                Paired::Later(true) => snap.after_cut += 1,
                Paired::Later(false) => snap.committed += 1,
                Paired::No => {
                    snap.committed += 1;
                    snap.orphans += 1;
                }
            },
            SlotRead::Committed(w) if !TypeWord(w[1]).is_valid() => {
                // Not a type word a writer made (a damaged device).
                snap.committed += 1;
                snap.malformed += 1;
            }
            SlotRead::Committed(w) if restartable => {
                if TypeWord(w[1]).position_tag() == TypeWord::tag_of(p) {
                    snap.committed += 1;
                    return Held::Parent(slot, w);
                }
                // A later position's entry (written since the cut was loaded, or by a
                // section that was aborted): this one's was overwritten.
                snap.changed += 1;
            }
            SlotRead::Committed(w) if tagged_after(&w, cut) => {
                snap.after_cut += 1;
                return Held::Later(w);
            }
            SlotRead::Committed(w) => {
                snap.committed += 1;
                return Held::Parent(slot, w);
            }
        }
        Held::Nothing
    }

    /// The one walk of a ring (see the module documentation): every position from the
    /// oldest the ring can hold to the cut, judged and counted; of its complete events,
    /// those `keep` keeps, as `T` (a copy, a [`Mark`](crate::event::Mark), or
    /// [`Counted`](crate::event::Counted): nothing), oldest first. `visitor` is told of each
    /// event kept and of each range of slots the walk is done reading (a reader of a mapped
    /// file gives their pages back). The counts describe the whole ring, whatever is kept.
    ///
    /// ```
    /// use core::sync::atomic::AtomicU64;
    /// use devttrace::{clear::Cleared, ring::HeapRing, Event, Keep};
    /// use ttrace_layouts::entry::{Kind, TypeWord};
    /// let words = [TypeWord::new(Kind::Entry, 0, 7).0, 0, 0, 0, 0, 0, 0];
    /// let mem = HeapRing::<AtomicU64>::new(2);
    /// for t in 1..=3 {
    ///     mem.writer().write(t * 1000, 1, &words);
    /// }
    /// let snap = mem.ring().walk::<Event>(&Keep::newer_than(0, Cleared::default()), &mut ());
    /// assert_eq!((snap.events.len(), snap.committed, snap.lost), (2, 2, 1));
    /// ```
    pub fn walk<T: Kept>(
        &self,
        keep: &Keep<impl Fn(&Event) -> bool>,
        visitor: &mut impl Visitor,
    ) -> RingSnapshot<T> {
        match self.is_restartable() {
            true => self.walk_kind::<true, T>(keep, visitor),
            false => self.walk_kind::<false, T>(keep, visitor),
        }
    }

    /// [`Ring::walk`] of a restartable ring or a shared one (compiled for each: the
    /// judgment of a position does not test the kind of ring).
    fn walk_kind<const RESTARTABLE: bool, T: Kept>(
        &self,
        keep: &Keep<impl Fn(&Event) -> bool>,
        visitor: &mut impl Visitor,
    ) -> RingSnapshot<T> {
        let n = self.slot_count() as u64;
        let mask = n - 1;
        let restartable = RESTARTABLE;
        // The cut (Acquire: every entry of a restartable ring below it was committed before,
        // and is visible to, the walk); a shared ring's `skipped` at the same cut.
        let cut = self.head();
        let skipped = match restartable {
            true => 0,
            false => self.skipped(),
        };
        let lo = cut.saturating_sub(n);
        let mut snap = RingSnapshot {
            events: Vec::with_capacity((cut - lo) as usize),
            ..RingSnapshot::default()
        };
        // A full shared ring's first read: the last position's successor.
        let mut first = SlotRead::Empty;
        let mut prev = Held::Nothing;
        // The last position's parent, if it announced a continuation (well formed or not).
        let mut last_continued = None;
        // Slots from `done` on are still to be told done to the visitor.
        let mut done = (lo & mask) as usize;
        for p in lo..cut {
            let i = (p & mask) as usize;
            if p > lo && (i == 0 || (p - lo) % VISITED as u64 == 0) {
                // Every slot before this one has been read, and its words taken.
                let end = if i == 0 { n as usize } else { i };
                visitor.done(done..end);
                done = i;
            }
            let r = self.read(i);
            let paired = pair(&mut snap, prev, &r, keep, visitor);
            // A full shared ring's first position may be the last's continuation: whether
            // it is an orphan is settled at the wrap.
            let paired = match p == lo && !restartable && cut >= n {
                true => {
                    first = r;
                    Paired::Stitched
                }
                false => paired,
            };
            prev = self.judge::<RESTARTABLE, T>(&mut snap, &r, i, p, cut, paired);
            last_continued = match r {
                SlotRead::Committed(w)
                    if !Stamp(w[0]).is_continuation() && TypeWord(w[1]).has_continuation() =>
                {
                    Some(w)
                }
                _ => None,
            };
        }
        let i = (cut & mask) as usize;
        if cut > lo && i == 0 {
            visitor.done(done..n as usize);
            done = 0;
        }
        // The wrap (see the module documentation).
        let successor = match last_continued {
            _ if restartable || cut < n => SlotRead::Empty,
            Some(w) if !continues(&first, &w) => self.read(i),
            _ => first,
        };
        let paired = pair(&mut snap, prev, &successor, keep, visitor);
        let continuation =
            matches!(successor, SlotRead::Committed(c) if Stamp(c[0]).is_continuation());
        if !restartable && cut >= n && continuation {
            match paired {
                Paired::Stitched | Paired::Later(false) => {}
                // The first read was counted committed; it was written after the cut.
                Paired::Later(true) if snap.committed > 0 => {
                    snap.committed -= 1;
                    snap.after_cut += 1;
                }
                Paired::Later(true) => {}
                Paired::No => snap.orphans += 1,
            }
        }
        if i > done {
            visitor.done(done..i);
        }
        if restartable {
            // What was committed since the cut is counted as such, not as lost.
            snap.after_cut = self.head().saturating_sub(cut);
        }
        self.finish(snap, cut, skipped, keep.cleared)
    }

    /// Completes a walk's counts with `head` (the cut), the ring's counters and the losses
    /// they imply, and sorts its events by time.
    fn finish<T: Kept>(
        &self,
        mut snap: RingSnapshot<T>,
        head: u64,
        skipped: u64,
        cleared: Cleared,
    ) -> RingSnapshot<T> {
        snap.head = head;
        snap.skipped = skipped;
        snap.dropped = self.dropped().saturating_sub(cleared.dropped);
        // Saturating: the words of a damaged device can hold anything.
        snap.lost = snap.head.saturating_sub(
            snap.skipped
                .saturating_add(snap.committed)
                .saturating_add(snap.claimed),
        );
        // Damaged entries were copied (committed) but are not shown.
        snap.committed = snap.committed.saturating_sub(snap.damaged);
        // Cleared entries still in the ring were copied (committed) but are not shown.
        snap.committed = snap.committed.saturating_sub(snap.cleared);
        // Positions reserved before the clear that the ring no longer holds are cleared,
        // not lost: those below both the clear's head and the ring's oldest position, less
        // the ones given up before the clear (counted in `skipped`, not `lost`). Where some
        // of those were still in the ring this takes too few: `lost` errs high, never low.
        let gone = cleared
            .head
            .min(head.saturating_sub(self.slot_count() as u64))
            .saturating_sub(cleared.skipped)
            .min(snap.lost);
        snap.lost -= gone;
        snap.cleared = snap.cleared.saturating_add(gone);
        // Usually sorted already (positions walked oldest first); the check avoids the
        // sort's scratch buffer, half the size of the events.
        if !snap.events.is_sorted_by_key(T::stamp) {
            snap.events.sort_by_key(T::stamp);
        }
        snap
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::HeapRing;
    use core::sync::atomic::AtomicU64;

    use crate::ring::tests::{check_accounting, words};

    #[test]
    fn newer_than_keeps_later_events_and_the_whole_ring_counts() {
        let m = HeapRing::<AtomicU64>::new(8);
        for i in 0..12u64 {
            m.writer().write(1000 + 10 * i, 1, &words(1, &[i]));
        }
        let s = m
            .ring()
            .walk::<Event>(&Keep::newer_than(1080, Cleared::default()), &mut ());
        let got: Vec<u64> = s.events.iter().map(|e| e.args()[0]).collect();
        assert_eq!(got, vec![9, 10, 11]);
        assert_eq!((s.older, s.committed, s.lost), (5, 8, 4));
        check_accounting(&s);
    }
}
