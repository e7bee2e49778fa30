//! Model checks of the aux protocol with loom: variable-length records that wrap and overwrite
//! each other in an 8-word buffer, written by the very code the device runs
//! ([`AuxWriter::reserve`] then [`AuxWriter::commit`]), with a reader snapshotting concurrently. The lock
//! word in shared memory is not what is checked: a loom mutex stands in for it.
//!
//! The properties are exact: every record a snapshot returns is one completed write (offset,
//! tag, CPU, timestamp, ident, length and payload); a record still being written by a live
//! writer is never overtaken; a dead writer's record is; when quiescent, the buffer holds
//! exactly the newest completed writes and the counters account for every write attempted.
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p devttrace --release --test loom_aux`.
//!
//! Each model fails on broken variants of the protocol (the table is in `docs/RELIABILITY.md`):
//! a reader that does not re-load `first` after its copy; a writer that moves `first` only
//! after it has stamped the new header over the oldest record, or without the release fence;
//! a reservation that overtakes a live record still being written, or one that never
//! overtakes a record still invalid, even a dead writer's.
#![cfg(loom)]

mod support;

use devttrace::aux::{AuxSnapshot, HeapAux};
use loom::sync::atomic::AtomicU64;
use loom::sync::atomic::Ordering::{Relaxed, SeqCst};
use loom::sync::{Arc, Mutex};
use std::sync::atomic::AtomicUsize;
use support::{records, Rec};
use ttrace_layouts::aux::{AuxPath, AuxTag};

/// Words of the buffer: 64 bytes, two or three records.
const WORDS: usize = 8;

/// Tries of a blocked write (the device makes 64): one retry shows that it waits, then drops.
const TRIES: u32 = 2;

struct Mem {
    /// Every thread's first operation is an RMW of this word. Loom's exploration skips a
    /// spawned thread whose first operation is independent of what the others have done
    /// so far (tokio-rs/loom#392); this makes all first operations dependent, so every
    /// order of the threads is explored.
    gate: AtomicU64,
    /// Stands in for the aux lock word.
    lock: Mutex<()>,
    heap: HeapAux<AtomicU64>,
}

impl Mem {
    fn new() -> Arc<Mem> {
        Arc::new(Mem {
            gate: AtomicU64::new(0),
            lock: Mutex::new(()),
            heap: HeapAux::new(WORDS),
        })
    }

    fn start(&self) {
        self.gate.fetch_add(1, Relaxed);
    }

    /// Reserves `w`'s record, as the device does; `None` if it was dropped.
    fn reserve(&self, w: &Write, alive: impl Fn(u64) -> bool) -> Option<u64> {
        self.heap.writer().reserve(
            w.path(),
            w.ctx,
            TRIES,
            || Some(self.lock.lock().unwrap()),
            alive,
            loom::thread::yield_now,
        )
    }

    /// Writes `w` whole; returns the record a reader must find, or `None` if it was dropped.
    fn write(&self, w: &Write, alive: impl Fn(u64) -> bool) -> Option<Rec> {
        let start = self.reserve(w, alive)?;
        // Not overtaken while being written: `first` only grows, so had another writer
        // passed this record since the reservation, it would be past `start` now.
        let first = self.heap.first.load(SeqCst);
        assert!(
            first <= start,
            "live record at {start} overtaken (first {first})"
        );
        self.heap
            .writer()
            .commit(start, w.path(), w.timestamp, &w.bytes);
        Some(w.record(start))
    }

    fn snapshot(&self) -> AuxSnapshot {
        self.heap.aux().snapshot().expect("a snapshot")
    }
}

/// One write: everything of it is distinct from every other write's.
#[derive(Clone, Debug)]
struct Write {
    ctx: u64,
    timestamp: u64,
    bytes: Vec<u8>,
}

impl Write {
    /// Write `k` of writer `w`, with `len` payload bytes.
    fn new(w: u64, k: u64, len: usize) -> Write {
        Write {
            ctx: w << 32 | k,
            timestamp: 1000 * w + k,
            bytes: (0..len)
                .map(|i| (w * 64 + k * 16) as u8 + i as u8)
                .collect(),
        }
    }

    fn path(&self) -> AuxPath {
        AuxPath::new(AuxTag::String, self.cpu(), self.bytes.len() as u64, false)
    }

    fn cpu(&self) -> u32 {
        (self.ctx >> 32) as u32
    }

    fn record(&self, offset: u64) -> Rec {
        Rec {
            buffer: 0,
            offset,
            tag: AuxTag::String as u16,
            cpu: self.cpu(),
            timestamp: self.timestamp,
            ctx: self.ctx,
            truncated: false,
            bytes: self.bytes.clone(),
        }
    }
}

/// Explores every interleaving with at most `bound` preemptions (`LOOM_MAX_PREEMPTIONS`
/// overrides it). All models use 2: the second needs it to drop a write (one preemption
/// between the other writer's reservation and commit, one more to keep it there across the
/// retry); the others catch their broken variants at 1 already, and explore 2 in about a
/// minute.
fn model(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(bound);
    }
    b.check(f);
}

fn spawn_writer(
    m: &Arc<Mem>,
    writes: Vec<Write>,
    alive: fn(u64) -> bool,
) -> loom::thread::JoinHandle<Vec<Option<Rec>>> {
    let m = m.clone();
    loom::thread::spawn(move || {
        m.start();
        writes.iter().map(|w| m.write(w, alive)).collect()
    })
}

fn spawn_reader(m: &Arc<Mem>) -> loom::thread::JoinHandle<AuxSnapshot> {
    let m = m.clone();
    loom::thread::spawn(move || {
        m.start();
        m.snapshot()
    })
}

/// Every record of `snap` is exactly one of the completed `writes`.
fn assert_only_writes(snap: &AuxSnapshot, writes: &[Rec]) {
    for r in &records(snap) {
        assert!(
            writes.contains(r),
            "returned a record that is no completed write: {r:?}\nwrites: {writes:?}"
        );
    }
}

/// Quiescent: the records returned are exactly the completed writes `done` at or after
/// `first`, and the dead writers' records (`dead`: offset and size) there are counted as
/// incomplete; `last` is where all of them end; the counters count every one of `attempts`.
fn assert_quiescent(m: &Mem, done: &[Rec], dead: &[(u64, u64)], attempts: u64) {
    let snap = m.snapshot();
    assert!(!snap.corrupt, "{snap:?}");
    let reserved: u64 =
        done.iter().map(Rec::size).sum::<u64>() + dead.iter().map(|d| d.1).sum::<u64>();
    assert_eq!(snap.last, reserved, "{snap:?}");
    assert!(snap.last - snap.first <= 8 * WORDS as u64, "{snap:?}");
    let incomplete = dead.iter().filter(|d| d.0 >= snap.first).count();
    assert_eq!(snap.incomplete, incomplete as u64, "{snap:?}");
    let mut kept: Vec<Rec> = done
        .iter()
        .filter(|r| r.offset >= snap.first)
        .cloned()
        .collect();
    kept.sort_by_key(|r| r.offset);
    assert_eq!(records(&snap), kept, "{snap:?}");
    let h = &m.heap;
    let records = (done.len() + dead.len()) as u64;
    assert_eq!(h.records.load(SeqCst), records);
    assert_eq!(h.dropped.load(SeqCst), attempts - records);
    assert_eq!(h.truncated.load(SeqCst), 0);
}

fn all_alive(_: u64) -> bool {
    true
}

/// Executions in which a write was dropped, and in which a reader found a record still being
/// written: the models assert that they explore these at all.
static DROPS_SEEN: AtomicUsize = AtomicUsize::new(0);
static INCOMPLETE_SEEN: AtomicUsize = AtomicUsize::new(0);

#[test]
fn two_writers_overwrite_each_other_and_older_records_while_a_reader_copies() {
    model(2, || {
        let m = Mem::new();
        // Before the threads: a record of 4 words, one of 3, and 1 word free. The next
        // record's ident lands on the oldest record's timestamp; the one after passes them
        // both and then the first writer's record.
        let old = [Write::new(9, 0, 8), Write::new(9, 1, 0)];
        let old: Vec<Rec> = old.iter().map(|w| m.write(w, all_alive).unwrap()).collect();
        let a = spawn_writer(&m, vec![Write::new(1, 0, 8)], all_alive);
        let b = spawn_writer(&m, vec![Write::new(2, 0, 16)], all_alive);
        let snap = spawn_reader(&m).join().unwrap();
        let mut done = old;
        for t in [a, b] {
            done.extend(t.join().unwrap().into_iter().flatten());
        }
        assert_only_writes(&snap, &done);
        assert_quiescent(&m, &done, &[], 4);
    });
}

#[test]
fn a_record_still_being_written_is_never_overtaken() {
    DROPS_SEEN.store(0, Relaxed);
    INCOMPLETE_SEEN.store(0, Relaxed);
    model(2, || {
        let m = Mem::new();
        // Two records of 5 words cannot both be in 8: whichever is reserved second must pass
        // the other, which may still be being written (its writer preempted before commit).
        let writes = [Write::new(1, 0, 16), Write::new(2, 0, 16)];
        let threads: Vec<_> = writes
            .iter()
            .map(|w| spawn_writer(&m, vec![w.clone()], all_alive))
            .collect();
        let snap = spawn_reader(&m).join().unwrap();
        let done: Vec<Rec> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .flatten()
            .collect();
        if done.len() < writes.len() {
            DROPS_SEEN.fetch_add(1, Relaxed);
        }
        if snap.incomplete > 0 {
            INCOMPLETE_SEEN.fetch_add(1, Relaxed);
            // The one being written: reserved, and never returned.
            let at = snap.first_incomplete.unwrap();
            assert!(done.iter().any(|r| r.offset == at), "{snap:?}");
            assert!(records(&snap).iter().all(|r| r.offset != at), "{snap:?}");
        }
        assert_only_writes(&snap, &done);
        assert_quiescent(&m, &done, &[], writes.len() as u64);
    });
    // The model did explore a blocked (dropped) write, and a reader finding a record still
    // being written.
    assert!(DROPS_SEEN.load(Relaxed) > 0);
    assert!(INCOMPLETE_SEEN.load(Relaxed) > 0);
}

/// The context of a writer that died mid-record.
const DEAD: u64 = 7 << 32;

fn all_but_the_dead_alive(ctx: u64) -> bool {
    ctx != DEAD
}

#[test]
fn a_dead_writers_record_is_overtaken() {
    model(2, || {
        let m = Mem::new();
        // Before the threads: a writer reserved 4 words and died before committing them;
        // then a complete record filled the buffer.
        let dead = m
            .reserve(
                &Write {
                    ctx: DEAD,
                    timestamp: 0,
                    bytes: vec![0; 8],
                },
                all_alive,
            )
            .unwrap();
        let old = m.write(&Write::new(9, 0, 8), all_alive).unwrap();
        // Each of these must pass one of them: never blocked, whichever order.
        let a = spawn_writer(&m, vec![Write::new(1, 0, 8)], all_but_the_dead_alive);
        let b = spawn_writer(&m, vec![Write::new(2, 0, 8)], all_but_the_dead_alive);
        let snap = spawn_reader(&m).join().unwrap();
        let mut done = vec![old];
        for t in [a, b] {
            let r = t.join().unwrap();
            assert!(r.iter().all(Option::is_some), "a write was dropped");
            done.extend(r.into_iter().flatten());
        }
        assert!(records(&snap).iter().all(|r| r.offset != dead), "{snap:?}");
        assert_only_writes(&snap, &done);
        assert_quiescent(&m, &done, &[(dead, 32)], 4);
    });
}
