//! What a reader gets from a ring: events, where each one is, and the counts of a copy.
//!
//! The protocols that produce them are in [`crate::ring`]; a copy's counts are explained
//! there and in `docs/DESIGN.md` (*Accounting*).

use ttrace_layouts::entry::MAX_ARGS;

/// One event read from a ring: a parent entry with its continuation's words, if any.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(align(16))]
pub struct Event {
    /// The parent's committed stamp (its timestamp).
    pub stamp: u64,
    /// Type word.
    pub type_word: ttrace_layouts::entry::TypeWord,
    /// `pid << 32 | tid` of the writer.
    pub ctx: u64,
    /// Argument words, `nargs` of them.
    pub(crate) words: [u64; MAX_ARGS],
    pub(crate) nargs: u8,
    /// Whether the entry announced a continuation that had been overwritten.
    pub continuation_lost: bool,
    /// Slot of the parent entry.
    pub slot: u32,
}

impl Event {
    /// The event a writer of `type_word` (its argument count that of `args`, at most
    /// [`MAX_ARGS`]: more are left out) records as `ctx` at `stamp`, whole, in slot `slot`:
    /// what a model of events is tested with, without a ring.
    pub fn new(
        stamp: u64,
        type_word: ttrace_layouts::entry::TypeWord,
        ctx: u64,
        args: &[u64],
        slot: u32,
    ) -> Event {
        let n = args.len().min(MAX_ARGS);
        let mut words = [0; MAX_ARGS];
        words[..n].copy_from_slice(&args[..n]);
        Event {
            stamp,
            type_word,
            ctx,
            words,
            nargs: n as u8,
            continuation_lost: false,
            slot,
        }
    }

    /// The argument words: `type_word.nargs()` of them, or the first 5 if the continuation
    /// was lost.
    #[inline]
    pub fn args(&self) -> &[u64] {
        &self.words[..self.nargs as usize]
    }
}

impl core::fmt::Debug for Event {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Event")
            .field("stamp", &self.stamp)
            .field("type_word", &self.type_word)
            .field("ctx", &self.ctx)
            .field("args", &self.args())
            .field("continuation_lost", &self.continuation_lost)
            .field("slot", &self.slot)
            .finish()
    }
}

/// What became of a ring's positions, as every reader tells it (a footer, `stats`, a
/// report, a follower's totals, a saved snapshot): one count per fate, each position counted
/// once. What each fate means, and why the walk that counts them is right:
/// [`crate::walk`]; `docs/DESIGN.md` (*Accounting*).
///
/// The counts are in slots (a continued event takes two). On a ring nobody is writing,
/// `head == skipped + committed + claimed + lost + damaged` exactly.
///
/// ```
/// use devttrace::event::Accounting;
/// let a = Accounting { head: 10, skipped: 1, committed: 6, claimed: 1, ..Accounting::default() };
/// let b = Accounting { lost: 2, ..a };
/// assert_eq!(b.head, b.skipped + b.committed + b.claimed + b.lost + b.damaged);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Accounting {
    /// Positions reserved (the ring's `head` at the cut).
    pub head: u64,
    /// Positions given up without writing (`skipped`; a follower: also those reserved by a
    /// writer that died).
    pub skipped: u64,
    /// Events dropped by writers that found no free slot (`dropped`).
    pub dropped: u64,
    /// Committed slots read (parents and continuations).
    pub committed: u64,
    /// Slots owned by a writer at the time of the read (being written, or abandoned).
    pub claimed: u64,
    /// Slots overwritten before they were read: `head - skipped - committed - claimed`.
    pub lost: u64,
    /// Slots that changed while being read (overwritten during the read: counted lost).
    pub changed: u64,
    /// Continuations whose parent had been overwritten.
    pub orphans: u64,
    /// Committed parents whose type word is malformed (a damaged device), skipped.
    pub malformed: u64,
    /// Entries left out as damaged: those of complete events with a field no writer of the
    /// device can have written (`crate::damage`), and slots a snapshot's damaged extents
    /// left out. Not in `committed` nor in `lost`.
    pub damaged: u64,
    /// Complete events left out because they were not newer than the timestamp asked for.
    pub older: u64,
    /// Entries committed while the read ran, at positions at or above the cut (`head`):
    /// not in this read, and not lost.
    pub after_cut: u64,
    /// Slots emptied by the device's last clear ([`Cleared`](crate::clear::Cleared)): complete entries stamped at
    /// or before it (not in `committed`), and positions reserved before it that the ring no
    /// longer holds (not in `lost`).
    pub cleared: u64,
}

/// The counts of two reads together (of two rings, or of one ring's successive positions).
impl core::ops::Add for Accounting {
    type Output = Accounting;
    fn add(self, b: Accounting) -> Accounting {
        Accounting {
            head: self.head + b.head,
            skipped: self.skipped + b.skipped,
            dropped: self.dropped + b.dropped,
            committed: self.committed + b.committed,
            claimed: self.claimed + b.claimed,
            lost: self.lost + b.lost,
            changed: self.changed + b.changed,
            orphans: self.orphans + b.orphans,
            malformed: self.malformed + b.malformed,
            damaged: self.damaged + b.damaged,
            older: self.older + b.older,
            after_cut: self.after_cut + b.after_cut,
            cleared: self.cleared + b.cleared,
        }
    }
}

impl core::ops::AddAssign for Accounting {
    fn add_assign(&mut self, b: Accounting) {
        *self = *self + b;
    }
}

/// A consistent copy of a ring: every complete event, in time order, and the
/// [`Accounting`] of its positions (read as its own fields: `snap.lost`).
///
/// `RingSnapshot<Mark>` (the index of a ring: its complete events' marks, in time order)
/// has the same counts but keeps only where each event is; [`Ring::event`](crate::ring::Ring::event)
/// then copies it, if it is still there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingSnapshot<T = Event> {
    /// What became of the ring's positions.
    pub counts: Accounting,
    /// The process ids of the events kept (parents' contexts), each once, in the order they
    /// were first met; at most [`MAX_WRITERS`], `writers_more` says whether there were more.
    pub writers: Vec<u32>,
    /// Whether more than [`MAX_WRITERS`] processes wrote the events kept.
    pub writers_more: bool,
    /// Complete events, oldest first.
    pub events: Vec<T>,
}

/// How many distinct writing processes a scan lists ([`RingSnapshot::writers`]).
pub const MAX_WRITERS: usize = 64;

impl<T> Default for RingSnapshot<T> {
    fn default() -> Self {
        RingSnapshot {
            counts: Accounting::default(),
            writers: Vec::new(),
            writers_more: false,
            events: Vec::new(),
        }
    }
}

/// A snapshot's counts read as its own (`snap.lost`): every reader's footer says them.
impl<T> core::ops::Deref for RingSnapshot<T> {
    type Target = Accounting;
    #[inline(always)]
    fn deref(&self) -> &Accounting {
        &self.counts
    }
}

impl<T> core::ops::DerefMut for RingSnapshot<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Accounting {
        &mut self.counts
    }
}

/// What a scan that counts keeps of an event: nothing (a vector of these holds its length
/// only, in no memory).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counted;

impl Kept for Counted {
    #[inline(always)]
    fn keep(_: Event) -> Counted {
        Counted
    }
    #[inline(always)]
    fn stamp(&self) -> u64 {
        0
    }
}

/// Where a complete event was: its stamp and its parent's slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Mark {
    /// The parent's stamp.
    pub stamp: u64,
    /// The parent's slot.
    pub slot: u32,
    /// Whether the event had its continuation (it takes two slots).
    pub continued: bool,
}

/// What a scan keeps of each event.
pub trait Kept: Sized {
    /// Keeps `event`.
    fn keep(event: Event) -> Self;
    /// Its stamp.
    fn stamp(&self) -> u64;
}

impl Kept for Event {
    #[inline]
    fn keep(event: Event) -> Event {
        event
    }
    #[inline]
    fn stamp(&self) -> u64 {
        self.stamp
    }
}

impl Kept for Mark {
    #[inline]
    fn keep(event: Event) -> Mark {
        Mark {
            stamp: event.stamp,
            slot: event.slot,
            continued: event.type_word.has_continuation() && !event.continuation_lost,
        }
    }
    #[inline]
    fn stamp(&self) -> u64 {
        self.stamp
    }
}
