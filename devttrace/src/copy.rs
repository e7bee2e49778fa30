//! A ring copied at one cut: the fast first half of reading a live ring, so that what a
//! reader formats afterwards, however slowly, is what the ring held when it was copied.
//!
//! [`RingCopy::of`] reads each slot in use with the stamp check ([`Ring::read`]), oldest
//! position first, into memory of its own laid out like the ring: a committed entry whole,
//! a claim as its stamp alone, a slot that changed while it was read (read again up to
//! [`TRIES`] times in all: its writer is usually done by then) as [`Stamp::CHANGED`], an
//! empty slot empty. The ring's counters are taken as a live read
//! takes them, `head` (and `skipped`) before the slots, `dropped` after. [`RingCopy::ring`]
//! is then a ring that no writer touches: the walk and the event reads of [`crate::ring`]
//! give on it exactly what they would have given on the live ring frozen at the cut, and
//! nothing read from it can vanish.
//!
//! Every reader of a whole ring copies it so: a [`View`](crate::View) (`dump`, `report`, the
//! exports, the mounted files) walks the copy, and a snapshot file saves it
//! ([`RingCopy::place_into`], what it found counted in [`RingCopy::found`]).

use crate::event::{Accounting, Event, Kept, Mark, RingSnapshot};
use crate::ring::{Ring, SlotRead};
use crate::walk::Keep;
use core::ops::Range;
use core::sync::atomic::{AtomicU64, Ordering::*};
use ttrace_layouts::entry::{Slot, Stamp, SLOT_WORDS};
use zerocopy::FromZeros;

/// Slots copied between two calls of the caller's `release`.
const CHUNK: usize = 4096;

/// Reads of a slot that keeps changing before it is kept as changed.
pub const TRIES: usize = 4;

/// A copied slot: eight words, 8-aligned. Not the 64-aligned [`Slot`]: memory of the
/// allocator's alignment is zeroed by the kernel as it maps it (`calloc` of fresh pages),
/// where a larger alignment is zeroed by writing every byte, which would take as much memory
/// as the whole ring however little of it is in use.
type CopiedSlot = [AtomicU64; SLOT_WORDS];

/// Asks the kernel to back `slots` (not yet touched) with huge pages where it can: a copy of
/// a large ring then takes one page fault per 2 MiB instead of one per 4 KiB (indexing the
/// `decode` bench's two rings of 2^20 slots: 83 ms without, 67 ms with). Only advice: if it
/// is not taken, nothing changes but speed.
fn advise_huge(slots: &[CopiedSlot]) {
    let page = 4096;
    let start = (slots.as_ptr() as usize).next_multiple_of(page);
    let end = (slots.as_ptr() as usize + core::mem::size_of_val(slots)) & !(page - 1);
    if end > start {
        // SAFETY: [start, end) lies, page-aligned, within the allocation of `slots`, which this
        // process owns; MADV_HUGEPAGE changes how its pages are backed, never what they hold,
        // so no reference into them is invalidated.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

/// A ring copied at one cut (see the module documentation).
pub struct RingCopy {
    restartable: bool,
    head: AtomicU64,
    skipped: AtomicU64,
    dropped: AtomicU64,
    /// The ring's slots as copied; empty when the ring was.
    slots: Vec<CopiedSlot>,
    /// Restartable rings: positions committed while the copy ran, at or above its cut.
    after_cut: u64,
    /// The slots read: those below the cut until the ring wraps, then all.
    used: usize,
    /// What the slots read held (`committed`, `claimed`, `changed`).
    found: Accounting,
}

impl RingCopy {
    /// Copies the slots of `ring` in use, oldest first; calls `release` with each range of
    /// slot indices once it is copied (a reader of a mapped file lets the kernel drop those
    /// pages of its mapping: it will not read them again). Until the ring wraps, the slots
    /// at or above its `head` were never written and are not read: a read of a page never
    /// written would make a device on tmpfs allocate it.
    pub fn of(ring: &Ring<'_, Slot>, mut release: impl FnMut(Range<usize>)) -> RingCopy {
        let n = ring.slot_count();
        // Acquire: every entry below the cut was committed before, and is visible to, the
        // copy (the shared protocol reads `skipped` at the same cut).
        let head = ring.head();
        let skipped = ring.skipped();
        let used = head.min(n as u64) as usize;
        // As many slots as the ring (the scans mask positions with its size), in zeroed
        // memory the kernel maps lazily: only the slots written below take room.
        let slots = CopiedSlot::new_vec_zeroed(n).expect("room for a copy of a mapped ring");
        advise_huge(&slots[..used]);
        let mut found = Accounting::default();
        // Oldest first: from the slot the next write goes to (a full ring), or from slot 0.
        let runs = if head >= n as u64 {
            let start = (head as usize) & (n - 1);
            [start..n, 0..start]
        } else {
            [0..used, 0..0]
        };
        for run in runs {
            let mut at = run.start;
            while at < run.end {
                let end = (at + CHUNK).min(run.end);
                for (i, dst) in slots[at..end].iter().enumerate() {
                    let i = at + i;
                    // Relaxed: the copy is this thread's own memory until it is shared by
                    // the move out of this function.
                    let put = |k: usize, w: u64| dst[k].store(w, Relaxed);
                    let mut read = ring.read(i);
                    for _ in 1..TRIES {
                        if read != SlotRead::Changed {
                            break;
                        }
                        read = ring.read(i);
                    }
                    match read {
                        SlotRead::Committed(w) => {
                            for (k, &w) in w.iter().enumerate().take(SLOT_WORDS) {
                                put(k, w);
                            }
                            found.committed += 1;
                        }
                        SlotRead::Claimed(stamp) => {
                            put(0, stamp.0);
                            found.claimed += 1;
                        }
                        SlotRead::Changed => {
                            put(0, Stamp::CHANGED.0);
                            found.changed += 1;
                        }
                        SlotRead::Empty => {}
                    }
                }
                release(at..end);
                at = end;
            }
        }
        // Acquire: as the live scans load them after their copy.
        let dropped = ring.dropped();
        let after_cut = match ring.is_restartable() {
            true => ring.head().saturating_sub(head),
            false => 0,
        };
        RingCopy {
            restartable: ring.is_restartable(),
            head: AtomicU64::new(head),
            skipped: AtomicU64::new(skipped),
            dropped: AtomicU64::new(dropped),
            slots,
            after_cut,
            used,
            found,
        }
    }

    /// What the slots copied held: `committed` entries (parents and continuations),
    /// `claimed` slots (being written) and `changed` ones (overwritten as they were read).
    pub fn found(&self) -> Accounting {
        self.found
    }

    /// The slots copied, as the ring lays them out, into `out` (at least as long as the
    /// slots read, 64 bytes a slot; the rest is left as it is). Returns the bytes written.
    pub fn place_into(&self, out: &mut [u8]) -> usize {
        let bytes = self.used * SLOT_WORDS * 8;
        for (slot, dst) in self.slots[..self.used]
            .iter()
            .zip(out[..bytes].chunks_exact_mut(SLOT_WORDS * 8))
        {
            for (w, d) in slot.iter().zip(dst.chunks_exact_mut(8)) {
                // Relaxed: nothing stores to the copy once it is made.
                d.copy_from_slice(&w.load(Relaxed).to_ne_bytes());
            }
        }
        bytes
    }

    /// The copy as a ring no writer touches (to read: its memory is written only while
    /// the copy is made).
    #[inline]
    pub fn ring(&self) -> Ring<'_, CopiedSlot> {
        Ring::new(
            self.restartable,
            &self.head,
            &self.skipped,
            &self.dropped,
            &self.slots,
        )
    }

    /// [`Ring::walk`] of the copy, with the entries committed while it was made counted as
    /// such: an index (`T` = [`Mark`]) or a copy (`T` = [`Event`]) of its events.
    pub fn walk<T: Kept>(&self, keep: &Keep<impl Fn(&Event) -> bool>) -> RingSnapshot<T> {
        let mut snap = self.ring().walk(keep, &mut ());
        snap.after_cut += self.after_cut;
        snap
    }

    /// The event at `mark` (from [`RingCopy::walk`]): always there.
    #[inline]
    pub fn event(&self, mark: Mark) -> Option<Event> {
        self.ring().event(mark)
    }
}
