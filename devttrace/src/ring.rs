//! The entry protocols, both halves: how writers fill ring slots and how readers copy them.
//!
//! A device has two kinds of rings (`ttrace_layouts::ring`). A *restartable* ring is written
//! one writer at a time per CPU by a restartable sequence (the writer front end's assembly,
//! whose Rust model is [`RingWriter::write_restartable`]); a *shared* ring by any number of
//! writers at once, with [`RingWriter::write`] and [`RingWriter::write_pair`]. Readers copy a
//! slot with [`Ring::read`], a whole ring with the one walk ([`Ring::walk`], in
//! [`crate::walk`]), and one position from a live cursor with [`Ring::at`].
//!
//! The two halves are two types over the same words. A [`Ring`] is the reader half: it only
//! loads (`Relaxed` loads, with fences where the protocol needs Acquire: see
//! [`crate::sync`]), so it can be, and for a reader is, a view of memory mapped read-only. A
//! [`RingWriter`] is the writer half, and only a mapping made for writing hands one out
//! ([`Mapping::ring`](crate::Mapping::ring)); it reads through [`RingWriter::reader`].
//!
//! What the code relies on, each argued in `docs/DESIGN.md` (*The restartable protocol*,
//! *The shared-ring protocol*, *Reading*):
//!
//! - every write stores a claim in the slot's stamp before any payload word (a Release fence
//!   between), and commits by storing a stamp strictly greater than any the slot held;
//! - a reader accepts a copy only if two loads of the stamp around it (an Acquire fence
//!   before the second) return the same committed stamp;
//! - in a restartable ring an entry's type word carries its position's low 28 bits, and a
//!   reader that loaded `head` before the copy accepts in each slot only the entry of the
//!   latest position below that `head`;
//! - a continuation is committed with its parent's stamp `| 1`, in the next slot, by the same
//!   reservation.
//!
//! The same code runs on the mapped device (`core` atomics) and under loom (`--cfg loom`):
//! `devttrace/tests/loom.rs` and `loom_restartable.rs` check it.

use crate::event::{Event, Mark};
use crate::sync::{AtomicWord, Ordering::*};
use ttrace_layouts::entry::{Slot, Stamp, TypeWord, MAX_ARGS, SLOT_WORDS};

/// Attempts a writer makes to find a free slot before it drops the event (and counts it).
pub const MAX_ATTEMPTS: u32 = 8;

/// Something that has eight atomic words: a ring slot.
pub trait SlotWords {
    /// The atomic word type.
    type Word: AtomicWord;
    /// The slot's words; word 0 is the stamp.
    fn words(&self) -> &[Self::Word; SLOT_WORDS];
}

impl SlotWords for Slot {
    type Word = core::sync::atomic::AtomicU64;
    #[inline(always)]
    fn words(&self) -> &[Self::Word; SLOT_WORDS] {
        &self.words
    }
}

impl<W: AtomicWord> SlotWords for [W; SLOT_WORDS] {
    type Word = W;
    #[inline(always)]
    fn words(&self) -> &[W; SLOT_WORDS] {
        self
    }
}

/// A ring as its readers see it: its counters and its slots (a power-of-two number of them,
/// at least 2), to be loaded, never stored (the reader half of the protocol; see the
/// [module](self)). A reader's rings lie in memory it mapped read-only.
pub struct Ring<'a, S: SlotWords> {
    /// Whether it is a restartable ring (read with the head rule; written only by
    /// restartable sequences), or a shared one.
    restartable: bool,
    /// Positions reserved so far.
    head: &'a S::Word,
    /// Positions given up because their slot was owned by another writer.
    skipped: &'a S::Word,
    /// Events dropped after [`MAX_ATTEMPTS`] failed claims.
    dropped: &'a S::Word,
    /// The slots.
    slots: &'a [S],
}

impl<S: SlotWords> Clone for Ring<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S: SlotWords> Copy for Ring<'_, S> {}

/// A ring as its writers see it: the writer half of the protocol ([`RingWriter::write`],
/// [`RingWriter::write_pair`], [`RingWriter::write_restartable`]) over the same words as a
/// [`Ring`]. Only memory this process may store to gives one: a mapping made for writing
/// ([`Mapping::ring`](crate::Mapping::ring)), or a [`HeapRing`].
pub struct RingWriter<'a, S: SlotWords> {
    ring: Ring<'a, S>,
}

impl<'a, S: SlotWords> Ring<'a, S> {
    /// The ring whose counters are `head`, `skipped` and `dropped` and whose slots are
    /// `slots` (a power-of-two number of them, at least 2), restartable or shared.
    pub(crate) fn new(
        restartable: bool,
        head: &'a S::Word,
        skipped: &'a S::Word,
        dropped: &'a S::Word,
        slots: &'a [S],
    ) -> Ring<'a, S> {
        debug_assert!(slots.len().is_power_of_two() && slots.len() >= 2);
        Ring {
            restartable,
            head,
            skipped,
            dropped,
            slots,
        }
    }

    /// Whether it is a restartable ring (read with the head rule), or a shared one.
    #[inline]
    pub fn is_restartable(&self) -> bool {
        self.restartable
    }

    /// Its number of slots.
    #[inline]
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// Positions reserved so far (loaded with Acquire: every entry of a restartable ring
    /// below it is committed and visible).
    #[inline]
    pub fn head(&self) -> u64 {
        self.head.load_acquire()
    }

    /// Positions given up because their slot was owned by another writer.
    #[inline]
    pub fn skipped(&self) -> u64 {
        self.skipped.load_acquire()
    }

    /// Events dropped after [`MAX_ATTEMPTS`] failed claims.
    #[inline]
    pub fn dropped(&self) -> u64 {
        self.dropped.load_acquire()
    }
}

impl<'a, S: SlotWords> RingWriter<'a, S> {
    /// The writer half over the words of `ring`; the caller may store to them.
    pub(crate) fn new(ring: Ring<'a, S>) -> RingWriter<'a, S> {
        RingWriter { ring }
    }

    /// The same ring, to read.
    #[inline(always)]
    pub fn reader(&self) -> Ring<'a, S> {
        self.ring
    }

    /// The slots themselves: what the writer front end's restartable sections store to (by
    /// address), and what a test that damages a device on purpose changes.
    #[inline(always)]
    pub fn slots(&self) -> &'a [S] {
        self.ring.slots
    }
}

/// A ring and its counters on the heap: the protocol without a device, for tests and model
/// checks (any [`AtomicWord`], loom's included).
///
/// ```
/// use core::sync::atomic::AtomicU64;
/// let mem = devttrace::ring::HeapRing::<AtomicU64>::new(4);
/// assert!(mem.writer().write(1000, 1, &[0; 7]).is_some());
/// assert_eq!(mem.ring().snapshot().committed, 1);
/// ```
pub struct HeapRing<W> {
    /// Positions reserved.
    pub head: W,
    /// Positions given up.
    pub skipped: W,
    /// Events dropped.
    pub dropped: W,
    /// The slots.
    pub slots: Vec<[W; SLOT_WORDS]>,
}

impl<W: AtomicWord> HeapRing<W> {
    /// An empty ring of `slots` slots (a power of two).
    pub fn new(slots: usize) -> HeapRing<W> {
        assert!(
            slots.is_power_of_two(),
            "a ring has a power-of-two number of slots"
        );
        HeapRing {
            head: W::new(0),
            skipped: W::new(0),
            dropped: W::new(0),
            slots: (0..slots)
                .map(|_| core::array::from_fn(|_| W::new(0)))
                .collect(),
        }
    }

    /// The ring as a shared one, to read.
    pub fn ring(&self) -> Ring<'_, [W; SLOT_WORDS]> {
        Ring::new(false, &self.head, &self.skipped, &self.dropped, &self.slots)
    }

    /// The ring as a shared one, to write ([`RingWriter::write`]).
    pub fn writer(&self) -> RingWriter<'_, [W; SLOT_WORDS]> {
        RingWriter::new(self.ring())
    }

    /// The ring as a restartable one, to read.
    pub fn restartable_ring(&self) -> Ring<'_, [W; SLOT_WORDS]> {
        Ring {
            restartable: true,
            ..self.ring()
        }
    }

    /// The ring as a restartable one, to write ([`RingWriter::write_restartable`]).
    pub fn restartable_writer(&self) -> RingWriter<'_, [W; SLOT_WORDS]> {
        RingWriter::new(self.restartable_ring())
    }
}

/// What a reader found in a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotRead {
    /// Never written.
    Empty,
    /// A writer owns the slot (it is being written, or its writer died).
    Claimed(Stamp),
    /// The slot changed while it was being copied (it was overwritten).
    Changed,
    /// A complete entry: word 0 is its committed stamp.
    Committed([u64; SLOT_WORDS]),
}

// The two claims below use Acquire: it orders the claimant's later stores after the previous
// owner's commit (whose Release store it reads), and keeps them after the claim itself.
#[inline(always)]
fn claim<W: AtomicWord>(stamp: &W, pid: u32, pos: u64) -> Option<Stamp> {
    // Relaxed: the value is only a guess for the CAS below, which checks it.
    let old = stamp.load(Relaxed);
    if Stamp(old).is_claimed() {
        return None;
    }
    stamp
        .compare_exchange(old, Stamp::claim(pid, pos).0, Acquire, Relaxed)
        .ok()
        .map(Stamp)
}

/// Fills a claimed slot (the type word tagged with position `pos`) and commits it; returns
/// the stamp.
#[inline(always)]
fn commit<W: AtomicWord>(
    slot: &[W; SLOT_WORDS],
    words: &[u64; SLOT_WORDS - 1],
    pos: u64,
    timestamp: u64,
    old: Stamp,
) -> u64 {
    W::fence(Release);
    fill(slot, words, Some(pos));
    let stamp = Stamp::next_after(timestamp, old).0;
    slot[0].store(stamp, Release);
    stamp
}

/// Stores `words` in the slot's payload; a parent's type word (`tag` given) is tagged with
/// its position.
#[inline(always)]
fn fill<W: AtomicWord>(slot: &[W; SLOT_WORDS], words: &[u64; SLOT_WORDS - 1], tag: Option<u64>) {
    for (k, (dst, &w)) in slot[1..].iter().zip(words).enumerate() {
        let w = match tag {
            Some(pos) if k == 0 => TypeWord(w).with_position(pos).0,
            _ => w,
        };
        // Relaxed: published by the Release store of the stamp; ordered after the claim by
        // the Release fence the caller issues first.
        dst.store(w, Relaxed);
    }
}

impl<'a, S: SlotWords> Ring<'a, S> {
    #[inline(always)]
    fn slot(&self, pos: u64) -> &'a [S::Word; SLOT_WORDS] {
        let index = (pos & (self.slots.len() as u64 - 1)) as usize;
        // SAFETY: the length is a power of two (checked when the device was opened, and by
        // every constructor of a Ring), so the masked index is below it.
        unsafe { self.slots.get_unchecked(index) }.words()
    }

    /// Copies slot `index` with the stamp check.
    #[inline]
    pub fn read(&self, index: usize) -> SlotRead {
        let slot = self.slots[index].words();
        let first = Stamp(slot[0].load_acquire());
        if first == Stamp::EMPTY {
            return SlotRead::Empty;
        }
        if first == Stamp::CHANGED {
            return SlotRead::Changed;
        }
        if first.is_claimed() {
            return SlotRead::Claimed(first);
        }
        let mut words = [first.0; SLOT_WORDS];
        for (w, src) in words[1..].iter_mut().zip(&slot[1..]) {
            // Relaxed: validated by the stamp re-check after the Acquire fence.
            *w = src.load(Relaxed);
        }
        S::Word::fence(Acquire);
        if slot[0].load(Relaxed) == first.0 {
            SlotRead::Committed(words)
        } else {
            SlotRead::Changed
        }
    }
}

impl<S: SlotWords> RingWriter<'_, S> {
    /// Records one entry (stamp + seven words) with the given timestamp; `pid` goes into the
    /// claim. Returns the stamp committed, or `None` if the event was dropped (and counted).
    #[inline(always)]
    pub fn write(&self, timestamp: u64, pid: u32, words: &[u64; SLOT_WORDS - 1]) -> Option<u64> {
        // Relaxed: the position only needs to be unique; the slot claim synchronizes.
        let pos = self.ring.head.fetch_add(1, Relaxed);
        let slot = self.ring.slot(pos);
        match claim(&slot[0], pid, pos) {
            Some(old) => Some(commit(slot, words, pos, timestamp, old)),
            None => self.write_contended(timestamp, pid, words),
        }
    }

    #[cold]
    #[inline(never)]
    fn write_contended(
        &self,
        timestamp: u64,
        pid: u32,
        words: &[u64; SLOT_WORDS - 1],
    ) -> Option<u64> {
        for _ in 1..MAX_ATTEMPTS {
            self.ring.skipped.fetch_add(1, Relaxed);
            let pos = self.ring.head.fetch_add(1, Relaxed);
            let slot = self.ring.slot(pos);
            if let Some(old) = claim(&slot[0], pid, pos) {
                return Some(commit(slot, words, pos, timestamp, old));
            }
        }
        self.ring.skipped.fetch_add(1, Relaxed);
        self.ring.dropped.fetch_add(1, Relaxed);
        None
    }

    /// Records a parent entry and its continuation in two consecutive slots of one
    /// reservation. The continuation is committed first, with the parent's stamp | 1.
    /// Returns the parent's stamp, or `None` if the event was dropped (and counted).
    #[inline(always)]
    pub fn write_pair(
        &self,
        timestamp: u64,
        pid: u32,
        parent: &[u64; SLOT_WORDS - 1],
        cont: &[u64; SLOT_WORDS - 1],
    ) -> Option<u64> {
        for _ in 0..MAX_ATTEMPTS {
            let pos = self.ring.head.fetch_add(2, Relaxed);
            let (a, b) = (self.ring.slot(pos), self.ring.slot(pos + 1));
            if let Some(old_a) = claim(&a[0], pid, pos) {
                if let Some(old_b) = claim(&b[0], pid, pos + 1) {
                    S::Word::fence(Release);
                    fill(a, parent, Some(pos));
                    fill(b, cont, None);
                    let stamp = Stamp::next_after(timestamp, old_a)
                        .max(Stamp::next_after(timestamp, old_b))
                        .0;
                    b[0].store(stamp | Stamp::CONTINUATION, Release);
                    a[0].store(stamp, Release);
                    return Some(stamp);
                }
                // Give the first slot back untouched: its old entry is still whole.
                a[0].store(old_a.0, Release);
            }
            self.ring.skipped.fetch_add(2, Relaxed);
        }
        self.ring.dropped.fetch_add(1, Relaxed);
        None
    }

    /// The restartable write of the writer front end's assembly (`ttrace_core::rseq`) as Rust
    /// code over any atomic word: the same
    /// stores in the same order, of one entry (`words`, the type word with its CPU; the
    /// position tag is added here) or, with `cont`, of a parent and its continuation.
    /// `last_stamp` is the ring's last stamp word. Only `steps` stores are made (a writer
    /// preempted, or killed, inside its section), so `usize::MAX` is a whole write; returns
    /// the stamp once the commit is made. The caller is the only writer of the ring while it
    /// runs (a CPU runs one thread at a time, and a section is restarted when it is not).
    pub fn write_restartable(
        &self,
        last_stamp: &S::Word,
        timestamp: u64,
        words: &[u64; SLOT_WORDS - 1],
        cont: Option<&[u64; SLOT_WORDS - 1]>,
        steps: usize,
    ) -> Option<u64> {
        let mut step = crate::sync::steps(steps);
        self.write_restartable_steps(last_stamp, timestamp, words, cont, &mut step)
    }

    /// [`RingWriter::write_restartable`], each store first asking `step` (false: stop there), so
    /// that a longer section can end with it ([`crate::restartable`]).
    pub(crate) fn write_restartable_steps(
        &self,
        last_stamp: &S::Word,
        timestamp: u64,
        words: &[u64; SLOT_WORDS - 1],
        cont: Option<&[u64; SLOT_WORDS - 1]>,
        step: &mut impl FnMut() -> bool,
    ) -> Option<u64> {
        // Relaxed: this thread is the ring's only writer.
        let h = self.ring.head.load(Relaxed);
        let slots: &[&[S::Word; SLOT_WORDS]] = match cont {
            None => &[self.ring.slot(h)],
            Some(_) => &[self.ring.slot(h), self.ring.slot(h + 1)],
        };
        for (k, s) in slots.iter().enumerate() {
            if !step() {
                return None;
            }
            // Relaxed, then a Release fence: a reader that sees any payload word below also
            // sees the claim (and rejects the copy).
            s[0].store(Stamp::CLAIMED | (h + k as u64), Relaxed);
        }
        S::Word::fence(Release);
        let mut parent = *words;
        parent[0] = TypeWord(parent[0]).with_position(h).0;
        let payloads = [Some(&parent), cont];
        for (s, payload) in slots.iter().zip(payloads.into_iter().flatten()) {
            for (dst, &w) in s[1..].iter().zip(payload) {
                if !step() {
                    return None;
                }
                // Relaxed: published by the stamp's and head's Release stores.
                dst.store(w, Relaxed);
            }
        }
        // Relaxed: only this thread writes it.
        let stamp = Stamp::next_after(timestamp, Stamp(last_stamp.load(Relaxed))).0;
        for (k, s) in slots.iter().enumerate() {
            if !step() {
                return None;
            }
            // Release: a reader that acquires the stamp sees the payload.
            s[0].store(
                if k == 1 {
                    stamp | Stamp::CONTINUATION
                } else {
                    stamp
                },
                Release,
            );
        }
        if !step() {
            return None;
        }
        // Relaxed: read only by this ring's writers, all on this thread's CPU.
        last_stamp.store(stamp, Relaxed);
        if !step() {
            return None;
        }
        // Release: the commit; a reader that acquires this head sees the whole entry.
        self.ring.head.store(h + slots.len() as u64, Release);
        Some(stamp)
    }
}

/// The event whose parent entry is `reads[i]` (a committed parent), with its continuation
/// from the next slot when that slot holds it (stamp = parent's | 1); returns the event and
/// the continuation's slot, or `None` if the parent's type word is malformed.
pub fn event_at(reads: &[SlotRead], i: usize) -> Option<(Event, Option<usize>)> {
    let SlotRead::Committed(w) = reads[i] else {
        return None;
    };
    let j = (i + 1) % reads.len();
    let (event, stitched) = stitch(&w, i, || reads[j])?;
    Some((event, stitched.then_some(j)))
}

/// The event of the committed entry `w` (from slot `i`) if it is a well-formed parent, with
/// its continuation taken from `next` (the following slot's read) when that holds it; also
/// says whether it did.
#[inline]
pub(crate) fn stitch(
    w: &[u64; SLOT_WORDS],
    i: usize,
    next: impl FnOnce() -> SlotRead,
) -> Option<(Event, bool)> {
    use ttrace_layouts::entry::ENTRY_ARGS;
    let tw = TypeWord(w[1]);
    if Stamp(w[0]).is_continuation() || !tw.is_valid() {
        return None;
    }
    let nargs = tw.nargs() as usize;
    let mut event = Event {
        stamp: w[0],
        type_word: tw,
        ctx: w[2],
        words: [0; MAX_ARGS],
        nargs: nargs.min(ENTRY_ARGS) as u8,
        continuation_lost: false,
        slot: i as u32,
    };
    event.words[..ENTRY_ARGS].copy_from_slice(&w[3..]);
    let mut stitched = false;
    if tw.has_continuation() {
        match next() {
            SlotRead::Committed(c) if c[0] == w[0] | Stamp::CONTINUATION => {
                event.words[ENTRY_ARGS..].copy_from_slice(&c[1..]);
                event.nargs = nargs as u8;
                stitched = true;
            }
            _ => event.continuation_lost = true,
        }
    }
    // Words beyond `nargs` are whatever the writer left there: clear them so that equal
    // events compare equal.
    event.words[event.nargs as usize..].fill(0);
    Some((event, stitched))
}

impl<S: SlotWords> Ring<'_, S> {
    /// The event at `mark` if its slot still holds it (read with the stamp check, its
    /// continuation stitched from the next slot); `None` if it was overwritten since.
    #[inline]
    pub fn event(&self, mark: Mark) -> Option<Event> {
        let n = self.slots.len();
        let i = mark.slot as usize;
        if i >= n {
            return None;
        }
        match self.read(i) {
            SlotRead::Committed(w) if w[0] == mark.stamp => {
                stitch(&w, i, || self.read((i + 1) & (n - 1))).map(|(e, _)| e)
            }
            _ => None,
        }
    }
}

/// What a ring position holds, read from a cursor ([`Ring::at`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// Its parent entry (maybe with its continuation).
    Entry(Event, u64),
    /// Its continuation: read with its parent.
    Continuation,
    /// A later position's write: this one was overwritten.
    Overwritten,
    /// A slot that changed while it was read: being written, by this position's writer or
    /// by a later position's.
    Changed,
    /// Not written yet (or being written).
    Waiting,
    /// Claimed for an older position: its writer will skip this one (or already did).
    Blocked,
}

impl<S: SlotWords> Ring<'_, S> {
    /// What position `pos` of this ring holds now, read with the stamp check and the
    /// position tag: its entry (with the slots it takes), its continuation, a later
    /// position's write (it was overwritten), nothing yet, or a claim for an older position
    /// (its writer will skip it). What a live reader's cursor reads (`Follower`).
    pub fn at(&self, pos: u64) -> Found {
        let n = self.slots.len() as u64;
        let i = (pos & (n - 1)) as usize;
        let read = self.read(i);
        let later = |tag: u32| {
            // Tags are positions modulo 2^28: the distance from `pos`, signed.
            let d = (tag.wrapping_sub(TypeWord::tag_of(pos)) << 4) as i32 >> 4;
            d > 0
        };
        match read {
            SlotRead::Committed(w) if Stamp(w[0]).is_continuation() => Found::Continuation,
            SlotRead::Committed(w) => {
                let tag = TypeWord(w[1]).position_tag();
                if tag == TypeWord::tag_of(pos) {
                    let next = match TypeWord(w[1]).has_continuation() {
                        true => self.read(((pos + 1) & (n - 1)) as usize),
                        false => SlotRead::Empty,
                    };
                    let reads = [read, next];
                    match event_at(&reads, 0) {
                        Some((mut e, cont)) => {
                            e.slot = i as u32;
                            Found::Entry(e, 1 + cont.is_some() as u64)
                        }
                        // A malformed type word: nothing to show, nothing to wait for.
                        None => Found::Overwritten,
                    }
                } else if later(tag) {
                    Found::Overwritten
                } else {
                    Found::Waiting
                }
            }
            SlotRead::Changed => Found::Changed,
            SlotRead::Claimed(c) => {
                let mine = c.claim_pos() == pos & 0xff_ffff_ffff;
                if mine {
                    Found::Waiting
                } else if (c.claim_pos().wrapping_sub(pos) & 0xff_ffff_ffff) < 1 << 39 {
                    Found::Overwritten // a later position's writer has it
                } else {
                    Found::Blocked
                }
            }
            SlotRead::Empty => Found::Waiting,
        }
    }
}

/// In a restartable ring of `slots` slots whose `head` was `h1` before a copy: the position
/// whose entry slot `index` should hold (the latest below `h1`), if there is one.
///
/// ```
/// use devttrace::ring::restartable_position;
/// // 4 slots, head 6: slots 2, 3, 0, 1 hold positions 2, 3, 4, 5.
/// let p: Vec<_> = (0..4).map(|i| restartable_position(4, i, 6)).collect();
/// assert_eq!(p, [Some(4), Some(5), Some(2), Some(3)]);
/// // Head 2: slots 2 and 3 hold nothing yet.
/// let p: Vec<_> = (0..4).map(|i| restartable_position(4, i, 2)).collect();
/// assert_eq!(p, [Some(0), Some(1), None, None]);
/// ```
pub fn restartable_position(slots: usize, index: usize, h1: u64) -> Option<u64> {
    let back = h1.checked_sub(1)?.wrapping_sub(index as u64) & (slots as u64 - 1);
    (h1 - 1).checked_sub(back)
}

/// Whether `read`, copied from a restartable ring's slot whose expected position is `pos`
/// ([`restartable_position`]), holds that position's parent entry (its position tag is
/// `pos`'s).
pub fn holds_position(read: &SlotRead, pos: u64) -> bool {
    matches!(read, SlotRead::Committed(w)
        if !Stamp(w[0]).is_continuation()
            && TypeWord(w[1]).position_tag() == TypeWord::tag_of(pos))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::event::RingSnapshot;
    use core::sync::atomic::AtomicU64;
    use ttrace_layouts::entry::{Kind, TypeWord};

    /// The words of an entry of tracepoint 7 with `nargs` arguments, `args` (at most 5).
    pub(crate) fn words(nargs: u8, args: &[u64]) -> [u64; 7] {
        let mut w = [0; 7];
        w[0] = TypeWord::new(Kind::Entry, nargs, 7).0;
        w[1] = 42 << 32 | 43;
        w[2..2 + args.len().min(5)].copy_from_slice(&args[..args.len().min(5)]);
        w
    }

    /// Every reserved position of `s` is skipped, committed, being written or lost.
    pub(crate) fn check_accounting(s: &RingSnapshot) {
        assert_eq!(
            s.head,
            s.skipped + s.committed + s.claimed + s.lost,
            "{s:?}"
        );
    }

    #[test]
    fn ring_wraps_keeping_the_newest_entries_in_time_order() {
        let m = HeapRing::<AtomicU64>::new(8);
        for i in 0..20u64 {
            assert!(m
                .writer()
                .write(1000 + 10 * i, 1, &words(1, &[i]))
                .is_some());
        }
        let s = m.ring().snapshot();
        let got: Vec<u64> = s.events.iter().map(|e| e.args()[0]).collect();
        assert_eq!(got, (12..20).collect::<Vec<_>>());
        assert_eq!((s.head, s.lost, s.committed, s.skipped), (20, 12, 8, 0));
        check_accounting(&s);
    }

    #[test]
    fn continuation_is_stitched_even_across_the_end_of_the_ring() {
        let m = HeapRing::<AtomicU64>::new(4);
        // Positions 0..3 single entries, then a pair at positions 3 and 4 (slots 3 and 0).
        for i in 0..3u64 {
            m.writer().write(100 + i * 10, 1, &words(1, &[i]));
        }
        let all: Vec<u64> = (100..112).collect();
        let mut cont = [0u64; 7];
        cont.copy_from_slice(&all[5..12]);
        assert!(m
            .writer()
            .write_pair(500, 1, &words(12, &all), &cont)
            .is_some());
        let s = m.ring().snapshot();
        let pair = s
            .events
            .iter()
            .find(|e| e.type_word.nargs() == 12)
            .expect("pair present");
        assert_eq!(pair.args(), all);
        assert_eq!(pair.slot, 3u32);
        assert!(!pair.continuation_lost);
        // Slot 0 (entry 0) was overwritten by the continuation: events are entries 1, 2, pair.
        assert_eq!(s.events.len(), 3);
        assert_eq!(s.orphans, 0);
        check_accounting(&s);
    }

    #[test]
    fn an_overwritten_continuation_or_parent_is_reported_not_invented() {
        let m = HeapRing::<AtomicU64>::new(4);
        let args: Vec<u64> = (0..12).collect();
        let mut cont = [0u64; 7];
        cont.copy_from_slice(&args[5..]);
        m.writer().write_pair(100, 1, &words(12, &args), &cont); // slots 0, 1
        m.writer().write_pair(200, 1, &words(12, &args), &cont); // slots 2, 3
                                                                 // Overwrite slot 1 (the first continuation) and slot 2 (the second parent).
        m.head.store(5, Relaxed);
        m.writer().write(300, 1, &words(1, &[9]));
        m.writer().write(400, 1, &words(1, &[10]));
        let s = m.ring().snapshot();
        assert_eq!(s.events.len(), 3);
        let first = &s.events[0];
        assert!(first.continuation_lost);
        assert_eq!(first.args(), &args[..5]);
        assert_eq!(
            s.orphans, 1,
            "slot 3 is a continuation whose parent is gone"
        );
    }

    #[test]
    fn a_slot_owned_by_a_stalled_writer_is_skipped_never_shared() {
        let m = HeapRing::<AtomicU64>::new(4);
        let claim = Stamp::claim(77, 1);
        m.slots[1][0].store(claim.0, Relaxed);
        for i in 0..8u64 {
            assert!(m.writer().write(1000 + i, 1, &words(1, &[i])).is_some());
        }
        // Slot 1 still belongs to the stalled writer; positions 1, 5 and 9 were given up.
        assert_eq!(m.slots[1][0].load(Relaxed), claim.0);
        let s = m.ring().snapshot();
        assert_eq!((s.claimed, s.skipped, s.head), (1, 3, 11));
        assert_eq!(
            s.events.iter().map(|e| e.args()[0]).collect::<Vec<_>>(),
            vec![5, 6, 7]
        );
        check_accounting(&s);
    }

    #[test]
    fn a_ring_with_no_free_slot_drops_and_counts_instead_of_waiting() {
        let m = HeapRing::<AtomicU64>::new(2);
        for s in &m.slots {
            s[0].store(Stamp::claim(5, 0).0, Relaxed);
        }
        assert!(m.writer().write(1, 1, &words(0, &[])).is_none());
        assert!(m
            .writer()
            .write_pair(1, 1, &words(6, &[1; 6]), &[0; 7])
            .is_none());
        assert_eq!(m.dropped.load(Relaxed), 2);
        assert_eq!(m.skipped.load(Relaxed), m.head.load(Relaxed));
    }

    #[test]
    fn stamps_strictly_increase_per_slot_even_if_the_clock_goes_back() {
        let m = HeapRing::<AtomicU64>::new(2);
        m.writer().write(1000, 1, &words(0, &[]));
        m.writer().write(1000, 1, &words(0, &[]));
        m.writer().write(500, 1, &words(0, &[]));
        assert_eq!(m.slots[0][0].load(Relaxed), 1002);
        // A continuation's stamp is its parent's + 1, and the parent's is above both slots'.
        m.writer().write_pair(10, 1, &words(6, &[1; 6]), &[0; 7]);
        // Slot 0 last held 1002, so the pair's stamp must exceed it.
        let (a, b) = (m.slots[1][0].load(Relaxed), m.slots[0][0].load(Relaxed));
        assert_eq!(
            (a, b),
            (1004, 1005),
            "parent in slot 1, continuation in slot 0"
        );
    }

    #[test]
    fn a_continuation_without_its_parent_is_counted_overwritten_with_its_event() {
        // A 2-slot restartable ring: a single entry at 0, a pair at 1-2; a pair at 3-4 that
        // stops after both its stamps (18 of its 20 stores), then a single entry at 3. Slot 0
        // keeps the aborted pair's continuation where position 2's was.
        let m = HeapRing::<AtomicU64>::new(2);
        let last = AtomicU64::new(0);
        let r = m.restartable_writer();
        let cont = [7u64; 7];
        r.write_restartable(&last, 100, &words(1, &[0]), None, usize::MAX);
        r.write_restartable(&last, 200, &words(12, &[1; 5]), Some(&cont), usize::MAX);
        assert_eq!(
            r.write_restartable(&last, 300, &words(12, &[3; 5]), Some(&cont), 18),
            None
        );
        r.write_restartable(&last, 400, &words(1, &[3]), None, usize::MAX);
        let s = r.reader().snapshot();
        assert_eq!(
            s.events.iter().map(|e| e.args()[0]).collect::<Vec<_>>(),
            [3]
        );
        assert_eq!(
            (s.head, s.committed, s.changed, s.lost, s.orphans),
            (4, 1, 1, 3, 0)
        );
        // The same counts when the continuation is the pair's own, its parent at position 1
        // overwritten by position 3: the event is lost.
        let m = HeapRing::<AtomicU64>::new(2);
        let last = AtomicU64::new(0);
        let r = m.restartable_writer();
        r.write_restartable(&last, 100, &words(1, &[0]), None, usize::MAX);
        r.write_restartable(&last, 200, &words(12, &[1; 5]), Some(&cont), usize::MAX);
        r.write_restartable(&last, 400, &words(1, &[3]), None, usize::MAX);
        let s = r.reader().snapshot();
        assert_eq!(
            (s.head, s.committed, s.changed, s.lost, s.orphans),
            (4, 1, 1, 3, 0)
        );
    }

    #[test]
    fn reader_rejects_a_slot_changed_during_the_copy() {
        let m = HeapRing::<AtomicU64>::new(2);
        m.writer().write(1000, 1, &words(1, &[1]));
        assert!(matches!(m.ring().read(0), SlotRead::Committed(w) if w[3] == 1));
        m.slots[0][0].store(Stamp::claim(1, 2).0, Relaxed);
        assert!(matches!(m.ring().read(0), SlotRead::Claimed(_)));
        assert_eq!(m.ring().read(1), SlotRead::Empty);
    }
}
