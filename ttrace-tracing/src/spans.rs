//! The live spans of the [`TtraceSubscriber`](crate::TtraceSubscriber): a slab of slots
//! whose index is the span's id, so that a step finds its callsite with one load.
//!
//! **Protocol.** A slot holds its span's callsite and a count of the handles `tracing`
//! holds (`new_span` makes 1, `clone_span` adds one, `try_close` takes one). The id is the
//! slot's index plus one. Slots live in chunks that double in size (64, 128, 256 ...
//! slots), each allocated once and never freed or moved, so a slot's address is stable and
//! reading it needs no lock. A slot is reused only once no handle of its span is left, so
//! an id names one live span. The `try_close` that drops the last handle keeps the slot in
//! its thread's free list, which the thread's next `new_span` takes from, with no atomic
//! operation; a thread that frees more than it takes hands half of its list to a shared
//! one (under a lock) past [`LOCAL`] slots, and a thread with none takes a batch from it,
//! or a slot never used (one atomic increment).
//!
//! **Orderings.** A chunk's pointer is published with Release after its slots are
//! initialised, and read with Acquire. A slot's callsite is stored by the thread that
//! creates the span, before `tracing` hands its id to anyone: whatever moves the span to
//! another thread (a channel, a task queue, a lock) orders that store before the other
//! thread's load, so the loads are Relaxed. The handle count is the `Arc` protocol: Relaxed
//! increments (a handle exists, so the count cannot reach zero meanwhile), a Release
//! decrement, and an Acquire fence before the slot is given back, so every use of the span
//! by other handles happens before its reuse.

use crate::callsite::Callsite;
use std::sync::atomic::{fence, AtomicPtr, AtomicUsize, Ordering::*};
use std::sync::Mutex;

/// One live span (or a free slot).
pub(crate) struct Slot {
    callsite: AtomicPtr<Callsite>,
    handles: AtomicUsize,
}

/// Slots of the first chunk; chunk `k` holds `FIRST << k`.
const FIRST: usize = 64;
/// Chunks: enough for 2^32 slots and more.
const CHUNKS: usize = 27;

/// Free slots a thread keeps before it hands half to the shared list.
pub(crate) const LOCAL: usize = 256;

/// The slab.
pub(crate) struct Slab {
    chunks: [AtomicPtr<Slot>; CHUNKS],
    /// The next index never used.
    next: AtomicUsize,
    /// Free slots handed over by threads that free more than they take.
    shared: Mutex<Vec<usize>>,
    /// Taken to make a chunk.
    grow: Mutex<()>,
}

/// The live spans of every `TtraceSubscriber` of the process.
pub(crate) static SPANS: Slab = Slab::new();

/// A thread's free slots; handed to the shared list when the thread ends.
struct FreeList(Vec<usize>);

impl Drop for FreeList {
    fn drop(&mut self) {
        let mut shared = SPANS.shared.lock().unwrap_or_else(|e| e.into_inner());
        shared.append(&mut self.0);
    }
}

thread_local! {
    /// This thread's free slots (of [`SPANS`], the one slab).
    static FREE: std::cell::RefCell<FreeList> = const { std::cell::RefCell::new(FreeList(Vec::new())) };
}

/// The chunk of slot `index`, and its place in the chunk.
#[inline]
fn chunk_of(index: usize) -> (usize, usize) {
    let i = index + FIRST;
    let k = (usize::BITS - 1 - i.leading_zeros()) as usize - FIRST.trailing_zeros() as usize;
    (k, i - (FIRST << k))
}

impl Slab {
    const fn new() -> Slab {
        Slab {
            chunks: [const { AtomicPtr::new(core::ptr::null_mut()) }; CHUNKS],
            next: AtomicUsize::new(0),
            shared: Mutex::new(Vec::new()),
            grow: Mutex::new(()),
        }
    }

    /// The slot of `id`, if such a slot was ever made.
    #[inline]
    pub(crate) fn get(&self, id: u64) -> Option<&Slot> {
        // Beyond every chunk (an id no slot was made for, as `u64::MAX`): none.
        let index = usize::try_from(id).ok()?.checked_sub(1)?;
        if index > usize::MAX - FIRST {
            return None;
        }
        let (k, at) = chunk_of(index);
        // Acquire: pairs with the Release store of the chunk, after its slots were made.
        let chunk = self.chunks.get(k)?.load(Acquire);
        if chunk.is_null() {
            return None;
        }
        // SAFETY: a published chunk holds `FIRST << k` slots, never freed or moved, and
        // `at < FIRST << k` by `chunk_of`.
        Some(unsafe { &*chunk.add(at) })
    }

    /// A slot for a new span of `cs`, with one handle: its id.
    pub(crate) fn insert(&self, cs: &'static Callsite) -> u64 {
        let index = FREE
            .try_with(|f| {
                let f = &mut f.borrow_mut().0;
                if f.is_empty() {
                    let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
                    let take = shared.len().min(LOCAL / 2);
                    let from = shared.len() - take;
                    f.extend(shared.drain(from..));
                }
                f.pop()
            })
            .ok()
            .flatten()
            .unwrap_or_else(|| self.fresh());
        let slot = self.get(index as u64 + 1).expect("a slot made");
        // Relaxed: see the module's orderings.
        slot.callsite
            .store(cs as *const Callsite as *mut Callsite, Relaxed);
        slot.handles.store(1, Relaxed);
        index as u64 + 1
    }

    /// A slot never used, its chunk made if it is the first to need it.
    #[cold]
    fn fresh(&self) -> usize {
        // Relaxed: a counter; the chunk is published apart.
        let index = self.next.fetch_add(1, Relaxed);
        let (k, _) = chunk_of(index);
        assert!(k < CHUNKS, "ttrace-tracing: more live spans than ids");
        // Acquire: as in `get`.
        if self.chunks[k].load(Acquire).is_null() {
            let _grow = self.grow.lock().unwrap_or_else(|e| e.into_inner());
            // Relaxed: under the lock that makes chunks.
            if self.chunks[k].load(Relaxed).is_null() {
                let chunk: Box<[Slot]> = (0..FIRST << k)
                    .map(|_| Slot {
                        callsite: AtomicPtr::new(core::ptr::null_mut()),
                        handles: AtomicUsize::new(0),
                    })
                    .collect();
                // Release: the slots are made before a reader finds the chunk.
                self.chunks[k].store(Box::leak(chunk).as_mut_ptr(), Release);
            }
        }
        index
    }

    /// Gives back the slot of `id` (its last handle was dropped, and its close recorded:
    /// a span that reuses the id is recorded after it).
    pub(crate) fn remove(&self, id: u64) {
        let index = id as usize - 1;
        let kept = FREE.try_with(|f| {
            let f = &mut f.borrow_mut().0;
            f.push(index);
            if f.len() > LOCAL {
                let half = f.len() / 2;
                let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
                shared.extend(f.drain(..half));
            }
        });
        // A thread being torn down: the shared list keeps it.
        if kept.is_err() {
            let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
            shared.push(index);
        }
    }
}

impl Slot {
    /// The span's callsite.
    #[inline]
    pub(crate) fn callsite(&self) -> Option<&'static Callsite> {
        // Relaxed: see the module's orderings.
        let cs = self.callsite.load(Relaxed);
        // SAFETY: a non-null pointer is to a leaked, 'static Callsite.
        (!cs.is_null()).then(|| unsafe { &*cs })
    }

    /// One handle more.
    #[inline]
    pub(crate) fn clone_handle(&self) {
        // Relaxed: the caller holds a handle (see the module's orderings).
        self.handles.fetch_add(1, Relaxed);
    }

    /// One handle less; `true` if it was the last (the caller then gives the slot back:
    /// [`Slab::remove`]).
    #[inline]
    pub(crate) fn drop_handle(&self) -> bool {
        // Release, then an Acquire fence for the last: see the module's orderings.
        if self.handles.fetch_sub(1, Release) != 1 {
            return false;
        }
        fence(Acquire);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_no_slot_was_made_for_has_none() {
        let slab = Slab::new();
        for id in [0, 1, 64, u64::MAX, u64::MAX - 1, 1 << 40] {
            assert!(slab.get(id).is_none(), "{id}");
        }
    }

    #[test]
    fn chunks_double_and_cover_every_index_once() {
        assert_eq!(chunk_of(0), (0, 0));
        assert_eq!(chunk_of(63), (0, 63));
        assert_eq!(chunk_of(64), (1, 0));
        assert_eq!(chunk_of(191), (1, 127));
        assert_eq!(chunk_of(192), (2, 0));
        let mut next = (0, 0);
        for i in 0..10_000 {
            assert_eq!(chunk_of(i), next, "{i}");
            next = if next.1 + 1 == FIRST << next.0 {
                (next.0 + 1, 0)
            } else {
                (next.0, next.1 + 1)
            };
        }
    }
}
