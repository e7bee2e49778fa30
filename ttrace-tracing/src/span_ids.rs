//! The callsites of a registry's spans by id, for the [`TtraceLayer`](crate::TtraceLayer): a
//! step of a span (enter, record, follows, close) finds its tracepoints here with three
//! loads, instead of looking the span up in `tracing-subscriber`'s registry (a slab guard
//! taken and dropped: two atomic read-modify-writes, about 20 ns).
//!
//! **What it is.** A direct-mapped table of [`SLOTS`] entries, each an id and a callsite,
//! one table per layer (ids are a registry's, and a layer belongs to one registry). The
//! layer writes an entry when it records a span's `new`; a later span whose id hashes to
//! the same entry takes it over. A step that does not find its id (taken over, or a span
//! whose `new` the layer left out) looks the span up in the registry as before: the table
//! is a cache, never the only way.
//!
//! **Protocol.** An entry is a sequence lock whose sequence is the id itself:
//! - the writer claims the entry by swapping its id for [`BUSY`] (a compare-exchange, with
//!   Acquire: it reads the id the writer before stored with Release, so the callsite that
//!   one stored comes before its own; a writer that finds the entry busy, or loses the race,
//!   leaves it: its span is looked up in the registry), then (Release fence) stores the
//!   callsite, then stores the new id with Release;
//! - a reader loads the id with Acquire and goes on only if it is the one it looks for, loads
//!   the callsite, and (Acquire fence) loads the id again: the callsite is the id's if the
//!   id is still there.
//!
//! **Why a reader never takes another span's callsite.** Suppose its second load still sees
//! its id `x`, yet the callsite it loaded was stored by a writer of another id. That store
//! comes after the writer's Release fence, and the reader's Acquire fence follows the load
//! that saw it, so the fences synchronise: the reader's second load sees the writer's
//! `BUSY` or a later value of the id — `x` only if a still later writer stored `x` again.
//! A writer stores `x` only for the `new` of a span of id `x`, and the span the reader
//! looks for is alive (it has its step), so that is its own `new`: then its callsite is
//! the one stored, and any callsite stored after it would again be preceded by `BUSY`. A
//! registry gives an id again only after its span closed, and [`SpanIds::forget`] at every
//! `new` clears an entry still holding that id from an earlier span, so an entry never
//! names a span that is gone.

use crate::callsite::Callsite;
// The atomic word the ring and aux protocols are written against: the standard library's
// here, loom's in the model of the protocol (`tests::loom_model`), the very same code.
use devttrace::sync::{AtomicWord as Word, Ordering::*};
use std::marker::PhantomData;
use std::sync::atomic::AtomicU64;

/// Entries in a layer's table (a power of two): 4096, 64 KiB.
pub(crate) const SLOTS: usize = 4096;

/// The id of an entry being written. No span has it: a registry's ids are slab keys plus
/// one, far below; one that had it would only never be cached.
const BUSY: u64 = u64::MAX;

/// One entry: a span's id (0: none yet) and its callsite's address (its provenance
/// exposed: [`SpanIds::get`] takes the pointer back from it).
struct Entry<W> {
    id: W,
    callsite: W,
}

/// The table (see the module's documentation): of callsites, `T` (another type in tests),
/// over the atomic word `W`.
pub(crate) struct SpanIds<T: 'static = Callsite, W: Word = AtomicU64> {
    entries: Box<[Entry<W>]>,
    callsites: PhantomData<&'static T>,
}

impl<T: 'static, W: Word> SpanIds<T, W> {
    /// An empty table.
    pub(crate) fn new() -> SpanIds<T, W> {
        SpanIds::with_slots(SLOTS)
    }

    /// An empty table of `slots` entries (a power of two).
    fn with_slots(slots: usize) -> SpanIds<T, W> {
        debug_assert!(slots.is_power_of_two());
        SpanIds {
            entries: (0..slots)
                .map(|_| Entry {
                    id: W::new(0),
                    callsite: W::new(0),
                })
                .collect(),
            callsites: PhantomData,
        }
    }

    /// The entry of `id`: its slot by a multiplicative hash (a registry's ids differ
    /// mostly in their low bits within a thread's shard, and in the shard's bits above).
    #[inline]
    fn entry(&self, id: u64) -> &Entry<W> {
        let bits = self.entries.len().trailing_zeros();
        let slot = match bits {
            0 => 0,
            bits => id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits),
        };
        &self.entries[slot as usize]
    }

    /// Notes that span `id` has `callsite` (its `new`); left out if another writer is at
    /// the same entry.
    pub(crate) fn insert(&self, id: u64, callsite: &'static T) {
        if id == BUSY {
            return;
        }
        let e = self.entry(id);
        // The claim takes the entry from the writer before: Acquire on success, so that its
        // callsite's store happens before this one's (else the entry could end with this
        // id and that callsite: loom found it, `tests::loom_model`). Relaxed for the first
        // load and a failure: nothing is written then.
        let now = e.id.load(Relaxed);
        if now == BUSY || e.id.compare_exchange(now, BUSY, Acquire, Relaxed).is_err() {
            return;
        }
        // The claim (`BUSY`) before the callsite, for every reader that sees the callsite.
        W::fence(Release);
        // Relaxed: ordered by the fence above and the Release store below.
        let address = (callsite as *const T).expose_provenance() as u64;
        e.callsite.store(address, Relaxed);
        // Release: a reader that sees the id sees the callsite stored before it.
        e.id.store(id, Release);
    }

    /// Clears the entry of `id` if it still names `id` (a span of that id is new: the entry,
    /// if it is `id`'s, is of an earlier span the registry had given the same id).
    #[inline]
    pub(crate) fn forget(&self, id: u64) {
        let e = self.entry(id);
        // Relaxed: the span of `id` is being made on this thread; no one looks it up yet,
        // and an earlier span's entry was written before its id was given again (the
        // registry's own synchronisation orders it before this `new`).
        if e.id.load(Relaxed) == id {
            // A writer that claimed the entry meanwhile took it over: nothing to clear.
            let _ = e.id.compare_exchange(id, 0, Relaxed, Relaxed);
        }
    }

    /// The callsite of live span `id`, if its entry names it.
    #[inline]
    pub(crate) fn get(&self, id: u64) -> Option<&'static T> {
        if id == BUSY {
            return None;
        }
        let e = self.entry(id);
        // Acquire: pairs with the Release store of the id, after its callsite.
        if e.id.load(Acquire) != id {
            return None;
        }
        // Relaxed: validated by the second load of the id, after the fence.
        let address = e.callsite.load(Relaxed);
        W::fence(Acquire);
        if e.id.load(Relaxed) != id {
            return None;
        }
        let callsite = std::ptr::with_exposed_provenance::<T>(address as usize);
        // SAFETY: the id (not `BUSY`, nor 0: no span has either) was there before and after
        // the load (the module's argument), so the address is the one stored for it, whose
        // provenance was exposed: that of a `&'static T`, which lives for the rest of the
        // program; never null, as an id is stored only after its callsite.
        Some(unsafe { &*callsite })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use devttrace::sync::Ordering;

    fn callsite() -> &'static u32 {
        Box::leak(Box::new(0))
    }

    #[test]
    fn a_span_is_found_until_an_id_of_the_same_entry_takes_it_over() {
        let ids = SpanIds::<u32>::new();
        let (a, b) = (callsite(), callsite());
        assert!(ids.get(7).is_none());
        ids.insert(7, a);
        assert!(std::ptr::eq(ids.get(7).unwrap(), a));
        // Another id of the same entry.
        let other = (8..)
            .find(|&i| std::ptr::eq(ids.entry(i), ids.entry(7)))
            .unwrap();
        ids.insert(other, b);
        assert!(ids.get(7).is_none());
        assert!(std::ptr::eq(ids.get(other).unwrap(), b));
    }

    #[test]
    fn a_new_span_of_an_id_given_again_clears_the_earlier_ones_entry() {
        let ids = SpanIds::<u32>::new();
        ids.insert(42, callsite());
        ids.forget(42);
        assert!(ids.get(42).is_none());
        // An entry of another id is left.
        ids.insert(43, callsite());
        let same = (44..)
            .find(|&i| std::ptr::eq(ids.entry(i), ids.entry(43)))
            .unwrap();
        ids.forget(same);
        assert!(ids.get(43).is_some());
    }

    #[test]
    fn readers_racing_writers_of_one_entry_take_only_their_ids_callsite() {
        // Ids of one entry, each with a callsite that names it; writers take the entry
        // over and over while readers look ids up: a reader finds its id's callsite or
        // nothing, never another id's.
        let ids = SpanIds::<u64>::new();
        let same: Vec<u64> = (1..)
            .filter(|&i| std::ptr::eq(ids.entry(i), ids.entry(1)))
            .take(4)
            .collect();
        let callsites: Vec<&'static u64> = same.iter().map(|&i| &*Box::leak(Box::new(i))).collect();
        std::thread::scope(|s| {
            for (&id, &cs) in same.iter().zip(&callsites) {
                let ids = &ids;
                s.spawn(move || {
                    for _ in 0..20_000 {
                        ids.insert(id, cs);
                    }
                });
            }
            for _ in 0..2 {
                let (ids, same) = (&ids, &same);
                s.spawn(move || {
                    for n in 0..100_000 {
                        let id = same[n % same.len()];
                        if let Some(&cs) = ids.get(id) {
                            assert_eq!(cs, id, "id {id} took another's callsite");
                        }
                    }
                });
            }
        });
        // Each id's last writer left the entry to one of them.
        assert!(same.iter().filter(|&&i| ids.get(i).is_some()).count() == 1);
    }

    /// Loom's atomic word, for the model below (devttrace implements its `AtomicWord` for
    /// loom's only under `--cfg loom`, which would rebuild every dependency).
    struct LoomWord(loom::sync::atomic::AtomicU64);

    impl Word for LoomWord {
        fn new(value: u64) -> Self {
            LoomWord(loom::sync::atomic::AtomicU64::new(value))
        }
        fn load(&self, order: Ordering) -> u64 {
            self.0.load(order)
        }
        fn store(&self, value: u64, order: Ordering) {
            self.0.store(value, order)
        }
        fn fetch_add(&self, value: u64, order: Ordering) -> u64 {
            self.0.fetch_add(value, order)
        }
        fn compare_exchange(
            &self,
            current: u64,
            new: u64,
            ok: Ordering,
            err: Ordering,
        ) -> Result<u64, u64> {
            self.0.compare_exchange(current, new, ok, err)
        }
        fn fence(order: Ordering) {
            loom::sync::atomic::fence(order)
        }
    }

    /// The protocol under loom's model of the memory model: two writers of two more ids of
    /// an entry that holds a live span's, and a reader of that span, in every interleaving
    /// and every value each load may see: the reader finds its span's callsite or nothing,
    /// never another's.
    #[test]
    fn loom_model() {
        let leak = |v: u64| -> &'static u64 { Box::leak(Box::new(v)) };
        let (a, b, c) = (leak(1), leak(2), leak(3));
        // Two preemptions a run: every interleaving of the three threads' steps that
        // switches at most twice (the race loom found needs one); unbounded, it takes
        // minutes in a debug build.
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(2);
        model.check(move || {
            type Table = SpanIds<u64, LoomWord>;
            let ids = loom::sync::Arc::new(Table::with_slots(1));
            // Span 1 is alive (its `new` recorded) when span 2 takes the entry over, and a
            // reader of span 1 looks it up meanwhile.
            ids.insert(1, a);
            let writers: Vec<_> = [(2, b), (3, c)]
                .into_iter()
                .map(|(id, cs)| {
                    let ids = ids.clone();
                    loom::thread::spawn(move || ids.insert(id, cs))
                })
                .collect();
            let reader = {
                let ids = ids.clone();
                loom::thread::spawn(move || ids.get(1).copied())
            };
            for w in writers {
                w.join().unwrap();
            }
            assert!(matches!(reader.join().unwrap(), None | Some(1)));
            // The entry is one writer's now (the other found it busy, or came first).
            let (two, three) = (ids.get(2).copied(), ids.get(3).copied());
            assert!(
                matches!((two, three), (Some(2), None) | (None, Some(3))),
                "{two:?} {three:?}"
            );
        });
    }

    #[test]
    fn a_busy_entry_is_left_to_its_writer() {
        let ids = SpanIds::<u32>::new();
        ids.entry(9).id.store(BUSY, Relaxed);
        ids.insert(9, callsite());
        assert!(ids.get(9).is_none());
        // And an id that is `BUSY` is never looked for in it.
        assert!(ids.get(BUSY).is_none());
    }
}
