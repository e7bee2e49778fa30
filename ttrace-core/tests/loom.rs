//! Model checks of the entry protocol with loom: every interleaving (up to a preemption
//! bound) of writers that lap a 2-slot ring while another writer is preempted mid-entry,
//! with a reader copying concurrently. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p ttrace-core --release --test loom`.
#![cfg(loom)]

use loom::sync::atomic::AtomicU64;
use loom::sync::Arc;
use ttrace_core::ring::{Ring, RingSnapshot};
use ttrace_layouts::entry::{Kind, TypeWord, SLOT_WORDS};

struct Mem {
    /// Every thread's first operation is an RMW of this word. Loom's exploration skips a
    /// spawned thread whose first operation is independent of what the others have done
    /// so far (tokio-rs/loom#392); this makes all first operations dependent, so every
    /// order of the threads is explored. (Checked: each test below fails when the reader's
    /// re-check or the writer's claim is removed.)
    gate: AtomicU64,
    head: AtomicU64,
    skipped: AtomicU64,
    dropped: AtomicU64,
    slots: Vec<[AtomicU64; SLOT_WORDS]>,
}

impl Mem {
    fn new(n: usize) -> Arc<Mem> {
        let z = || AtomicU64::new(0);
        let slot = || [z(), z(), z(), z(), z(), z(), z(), z()];
        Arc::new(Mem {
            gate: z(),
            head: z(),
            skipped: z(),
            dropped: z(),
            slots: (0..n).map(|_| slot()).collect(),
        })
    }

    fn start(&self) {
        self.gate
            .fetch_add(1, loom::sync::atomic::Ordering::Relaxed);
    }

    fn ring(&self) -> Ring<'_, [AtomicU64; SLOT_WORDS]> {
        Ring {
            head: &self.head,
            skipped: &self.skipped,
            dropped: &self.dropped,
            slots: &self.slots,
        }
    }
}

/// Argument word `i` of writer `w`: every word names its writer, so a mix is visible.
fn arg(w: u64, i: u64) -> u64 {
    w << 8 | i
}

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

/// Every accepted event is entirely one writer's: type word, context and all arguments.
fn check(s: &RingSnapshot) {
    for e in &s.events {
        let w = e.ctx;
        assert_eq!(
            e.type_word.tracepoint() as u64,
            w,
            "type word from another write: {e:?}"
        );
        let n = if e.continuation_lost {
            5
        } else {
            e.type_word.nargs() as usize
        };
        assert_eq!(e.args.len(), n);
        for (i, &a) in e.args.iter().enumerate() {
            assert_eq!(a, arg(w, i as u64), "mixed entry accepted: {e:?}");
        }
    }
}

/// Explores with at most two preemptions (`LOOM_MAX_PREEMPTIONS` overrides): enough for a
/// writer preempted mid-entry, lapped by another, and a reader copying in between, since the
/// threads are all spawned and the main thread only joins, so starting them costs nothing.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    b.check(f);
}

#[test]
fn preempted_writer_lapped_on_a_two_slot_ring_with_a_concurrent_reader() {
    model(|| {
        let m = Mem::new(2);
        let slow = {
            let m = m.clone();
            loom::thread::spawn(move || {
                m.start();
                m.ring().write(10, 1, &entry(1, 5));
            })
        };
        let lapper = {
            let m = m.clone();
            loom::thread::spawn(move || {
                m.start();
                m.ring().write(20, 2, &entry(2, 5));
                m.ring().write(30, 2, &entry(3, 5));
            })
        };
        let reader = {
            let m = m.clone();
            loom::thread::spawn(move || {
                m.start();
                check(&m.ring().snapshot());
            })
        };
        reader.join().unwrap();
        slow.join().unwrap();
        lapper.join().unwrap();
        let s = m.ring().snapshot();
        check(&s);
        // Quiescent: nothing claimed, and the accounting is exact.
        assert_eq!(s.claimed, 0);
        assert_eq!(s.head, s.skipped + s.committed + s.lost);
        assert_eq!(
            s.committed + s.lost + m.dropped.load(loom::sync::atomic::Ordering::Relaxed),
            3
        );
    });
}

#[test]
fn continuation_split_by_a_lapping_writer_is_never_stitched_to_another_parent() {
    model(|| {
        let m = Mem::new(2);
        let pair = {
            let m = m.clone();
            loom::thread::spawn(move || {
                m.start();
                m.ring().write_pair(10, 1, &entry(1, 12), &continuation(1));
            })
        };
        let single = {
            let m = m.clone();
            loom::thread::spawn(move || {
                m.start();
                m.ring().write(20, 2, &entry(2, 5));
            })
        };
        let reader = {
            let m = m.clone();
            loom::thread::spawn(move || {
                m.start();
                check(&m.ring().snapshot());
            })
        };
        reader.join().unwrap();
        pair.join().unwrap();
        single.join().unwrap();
        check(&m.ring().snapshot());
    });
}
