//! Model checks of the entry protocol with loom: writers that lap a tiny ring while another
//! writer is preempted mid-entry, with a reader copying concurrently. The property checked
//! is exact: every copy a reader accepts is one completed write — its stamp and every one of
//! its words. Run with `RUSTFLAGS="--cfg loom" cargo test -p devttrace --release --test loom`.
//!
//! Each model fails on the protocol of the Akaros sketch (invalidate by a plain store instead
//! of claiming by compare-and-exchange) and on a reader without the stamp re-check.
#![cfg(loom)]

use devttrace::ring::{HeapRing, Ring, RingWriter, SlotRead};
use loom::sync::atomic::AtomicU64;
use loom::sync::Arc;
use ttrace_layouts::entry::{Kind, TypeWord, SLOT_WORDS};

struct Mem {
    /// Every thread's first operation is an RMW of this word. Loom's exploration skips a
    /// spawned thread whose first operation is independent of what the others have done
    /// so far (tokio-rs/loom#392); this makes all first operations dependent, so every
    /// order of the threads is explored.
    gate: AtomicU64,
    heap: HeapRing<AtomicU64>,
}

impl Mem {
    fn new(n: usize) -> Arc<Mem> {
        Arc::new(Mem {
            gate: AtomicU64::new(0),
            heap: HeapRing::new(n),
        })
    }

    fn start(&self) {
        self.gate
            .fetch_add(1, loom::sync::atomic::Ordering::Relaxed);
    }

    fn ring(&self) -> Ring<'_, [AtomicU64; SLOT_WORDS]> {
        self.heap.ring()
    }

    fn writer(&self) -> RingWriter<'_, [AtomicU64; SLOT_WORDS]> {
        self.heap.writer()
    }
}

/// Argument word `i` of writer `w`.
fn arg(w: u64, i: u64) -> u64 {
    w << 8 | i
}

/// Words 1..8 of writer `w`'s parent entry.
fn entry(w: u64, nargs: u8) -> [u64; 7] {
    let mut e = [0; 7];
    e[0] = TypeWord::new(Kind::Entry, nargs, w as u16).0;
    e[1] = w;
    for i in 0..5 {
        e[2 + i] = arg(w, i as u64);
    }
    e
}

fn continuation(w: u64) -> [u64; 7] {
    core::array::from_fn(|i| arg(w, 5 + i as u64))
}

/// A completed write: the stamp its writer committed, and its words.
type Write = (u64, [u64; 7]);

/// The accepted copy is one of the completed writes, stamp and words (a parent's type word
/// less the position tag its writer added).
fn assert_is_a_write(copy: &[u64; SLOT_WORDS], writes: &[Write]) {
    let mut words = *copy;
    if copy[0] & 1 == 0 {
        words[1] = TypeWord(words[1]).without_position().0;
    }
    assert!(
        writes
            .iter()
            .any(|(stamp, w)| *stamp == copy[0] && w[..] == words[1..]),
        "accepted a copy that is no completed write: {copy:?}; writes: {writes:?}"
    );
}

/// Explores every interleaving with at most `bound` preemptions (`LOOM_MAX_PREEMPTIONS`
/// overrides it). The bounds are the smallest at which each model catches both broken
/// variants named at the top of this file.
fn model(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(bound);
    }
    b.check(f);
}

/// Writer `w` writes `n` single entries with timestamps `1000 * w + k`; returns what it
/// committed.
fn spawn_writer(m: &Arc<Mem>, w: u64, n: u64) -> loom::thread::JoinHandle<Vec<Write>> {
    let m = m.clone();
    loom::thread::spawn(move || {
        m.start();
        (0..n)
            .filter_map(|k| {
                m.writer()
                    .write(1000 * w + k, w as u32, &entry(w, 5))
                    .map(|s| (s, entry(w, 5)))
            })
            .collect()
    })
}

fn spawn_reader(m: &Arc<Mem>, slot: usize) -> loom::thread::JoinHandle<SlotRead> {
    let m = m.clone();
    loom::thread::spawn(move || {
        m.start();
        m.ring().read(slot)
    })
}

/// Writer 1 writes one entry while writer 2 writes `lapper_writes` (lapping it) and a
/// reader copies slot 0, which gets written more than once.
fn lapped(slots: usize, lapper_writes: u64) {
    let m = Mem::new(slots);
    let (a, b) = (spawn_writer(&m, 1, 1), spawn_writer(&m, 2, lapper_writes));
    let r = spawn_reader(&m, 0);
    let read = r.join().unwrap();
    let writes: Vec<Write> = [a.join().unwrap(), b.join().unwrap()].concat();
    if let SlotRead::Committed(copy) = read {
        assert_is_a_write(&copy, &writes);
    }
    // Quiescent: nothing claimed, and the accounting is exact.
    let s = m.ring().snapshot();
    assert_eq!(s.claimed, 0);
    assert_eq!(s.head, s.skipped + s.committed + s.lost);
    let dropped = m.heap.dropped.load(loom::sync::atomic::Ordering::Relaxed);
    assert_eq!(s.committed + s.lost + dropped, 1 + lapper_writes);
}

#[test]
fn preempted_writer_lapped_on_a_one_slot_ring_with_a_concurrent_reader() {
    // Every position maps to the one slot: each write laps the other writer.
    model(2, || lapped(1, 1));
}

#[test]
fn preempted_writer_lapped_on_a_two_slot_ring_with_a_concurrent_reader() {
    // Three positions on two slots: slot 0 is written twice.
    model(2, || lapped(2, 2));
}

#[test]
fn continuation_split_by_a_lapping_writer_is_never_stitched_to_another_parent() {
    // One preemption suffices to catch both broken variants here; two take over 10 minutes.
    model(1, || {
        let m = Mem::new(2);
        let pair = {
            let m = m.clone();
            loom::thread::spawn(move || {
                m.start();
                m.writer()
                    .write_pair(1000, 1, &entry(1, 12), &continuation(1))
            })
        };
        let single = spawn_writer(&m, 2, 1);
        let reader = {
            let m = m.clone();
            loom::thread::spawn(move || {
                m.start();
                m.ring().snapshot()
            })
        };
        let snap = reader.join().unwrap();
        let pair_stamp = pair.join().unwrap();
        let singles = single.join().unwrap();
        for e in &snap.events {
            if e.ctx == 1 {
                // The pair: its stamp, and its 12 arguments (5 if the continuation was lost).
                assert_eq!(Some(e.stamp), pair_stamp, "{e:?}");
                let n = if e.continuation_lost { 5 } else { 12 };
                assert_eq!(
                    e.args(),
                    (0..n).map(|i| arg(1, i)).collect::<Vec<_>>(),
                    "{e:?}"
                );
            } else {
                let mut copy = [e.stamp, e.type_word.0, e.ctx, 0, 0, 0, 0, 0];
                copy[3..].copy_from_slice(e.args());
                assert_is_a_write(&copy, &singles);
            }
        }
    });
}
