//! Model checks of the restartable (rseq) write protocols with loom: the Rust models of the
//! restartable sections (`RingWriter::write_restartable`, `AuxWriter::write_restartable`), each stopped
//! after every possible number of stores (a section preempted, migrated, signalled or killed
//! before its commit) and followed by its successor's section, which takes the same
//! position, while a reader copies concurrently.
//!
//! One loom thread plays every writer of one CPU in turn: a CPU runs one thread at a time and
//! a section that is interrupted restarts from its beginning, so the sections of one ring (or
//! aux buffer) never interleave with each other; what interleaves with them is a reader on
//! another CPU. The properties are exact: every event (or aux record) a reader returns is one
//! whole completed write, stamp and words, at the position it was written to; an aborted
//! section's leftovers are never returned; no position is returned twice; the snapshot's
//! accounting holds; and once the writer is done the ring (buffer) holds exactly the newest
//! completed writes that fit. Each write stores its sequence number (for a ring, its
//! position) in every word it owns, so a copy mixed from two writes, or taken from the wrong
//! position, shows.
//!
//! - Model 1: a restartable ring of single entries (2 slots).
//! - Model 2: the same with continued events (two slots each, across the end of the ring).
//! - Model 3: a restartable ring and a shared ring written at once, read by one reader.
//! - Model 4: a restartable aux buffer (8 words).
//! - Model 5: an event and its string in one section (`devttrace::restartable::write_event`):
//!   a 2-slot ring and its 8-word buffer; an event's string reference always leads to its
//!   own record, or to an offset overwritten since.
//!
//! Every model also runs against a copy of the writer or the reader with one deliberate
//! mistake (the `broken_*` tests, `#[should_panic]` with the message of the check that must
//! fail), to show that it catches what it claims to:
//! - ring: a writer that does not claim the slot before its payload (a mixed entry is
//!   returned); a writer that commits `head` before the stamp (an aborted section leaves a
//!   committed position that never holds an entry); a reader that reads the restartable ring
//!   with the shared rings' rule, ignoring the position tag (it returns an aborted section's
//!   leftovers, and entries whose position is not committed);
//! - continued events: a writer that does not claim the continuation's slot (an older
//!   parent is stitched to a continuation mixed with the new one);
//! - coexisting protocols: the shared writer (`RingWriter::write`, correct on a ring of its own)
//!   on the restartable ring, next to the restartable writer (the restartable commit
//!   `head = h + 1` undoes a reservation made since its `h = head`: a completed write loses
//!   its position);
//! - aux: a writer that stores `last` before the record (a reader parses a header not
//!   stored yet), or that moves `first` only after overwriting the oldest record (a reader
//!   returns that record with words of the new one);
//! - an event with its string: a writer that commits the entry before the string's record
//!   (a reader finds a reference to a record not written yet).
//!
//! The copies are checked to store exactly what the library's writers store when they have
//! no mistake (`the_copied_writers_store_what_the_library_stores`).
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p devttrace --release --test
//! loom_restartable` (about a minute and a half on two cores: model 2 takes most of it).
#![cfg(loom)]

mod support;

use devttrace::aux::{AuxSnapshot, HeapAux};
use devttrace::ring::HeapRing;
use devttrace::RingSnapshot;
use loom::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use loom::sync::atomic::{fence, AtomicU64};
use loom::sync::Arc;
use support::{records, Rec};
use ttrace_layouts::aux::{AuxPath, AuxTag};
use ttrace_layouts::entry::{Kind, Stamp, TypeWord, SLOT_WORDS};

/// Explores every interleaving with at most `bound` preemptions (`LOOM_MAX_PREEMPTIONS`
/// overrides it).
fn model(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(bound);
    }
    b.check(f);
}

/// Every thread's first operation is an RMW of this word. Loom's exploration skips a spawned
/// thread whose first operation is independent of what the others have done so far
/// (tokio-rs/loom#392); this makes all first operations dependent, so every order of the
/// threads is explored.
fn start(gate: &AtomicU64) {
    gate.fetch_add(1, Relaxed);
}

// ---------------------------------------------------------------------------------------
// Rings
// ---------------------------------------------------------------------------------------

/// The sequence number of the restartable section that is aborted is this bit or'ed with its
/// position: it owns no position, and a reader must never return it.
const ABORTED: u64 = 0x100;
/// The sequence numbers of the shared-ring writer's writes are this bit or'ed with their
/// index.
const SHARED: u64 = 0x200;

/// Stores of a restartable write: claims, payload words, stamps, `last_stamp`, `head`.
fn stores(cont: bool) -> usize {
    if cont {
        2 + 14 + 2 + 2
    } else {
        1 + 7 + 1 + 2
    }
}

/// A mistake in a copy of the restartable ring writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WriterBug {
    /// The library's writer ([`devttrace::ring::RingWriter::write_restartable`]) itself.
    Library,
    /// The copy without a mistake (checked to store what the library stores).
    None,
    /// Stores the payload over the old entry without claiming the slot first.
    NoClaim,
    /// Claims the parent's slot but not the continuation's.
    NoContinuationClaim,
    /// Commits `head` before storing the stamps.
    HeadBeforeStamp,
}

/// How the reader reads the restartable ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReaderRule {
    /// The library's reader ([`devttrace::ring::Ring::snapshot`] of the restartable ring).
    Restartable,
    /// A reader that ignores the position tag: every committed parent with the stamp check,
    /// stitched to its continuation, is accepted.
    SharedRule,
}

/// One ring written by restartable sections, its `last_stamp`, and possibly a second ring
/// written with the shared protocol.
struct Rings {
    gate: AtomicU64,
    a: HeapRing<AtomicU64>,
    last_stamp: AtomicU64,
    b: HeapRing<AtomicU64>,
}

type SlotArray = [AtomicU64; SLOT_WORDS];

/// The words of write `seq` (type word with its tracepoint, context, arguments: all `seq`) and
/// its continuation.
fn entry(seq: u64, cont: bool) -> ([u64; 7], Option<[u64; 7]>) {
    let mut w = [seq; 7];
    w[0] = TypeWord::new(Kind::Entry, if cont { 12 } else { 5 }, seq as u16).0;
    (w, cont.then_some([seq; 7]))
}

/// The restartable write of [`devttrace::ring::RingWriter::write_restartable`], copied here with
/// `bug` (none for [`WriterBug::None`]).
fn write_copy(
    bug: WriterBug,
    ring: &HeapRing<AtomicU64>,
    last_stamp: &AtomicU64,
    timestamp: u64,
    words: &[u64; 7],
    cont: Option<&[u64; 7]>,
    steps: usize,
) -> Option<u64> {
    let mut left = steps;
    let mut step = || {
        let go = left > 0;
        left = left.saturating_sub(1);
        go
    };
    let n = ring.slots.len() as u64;
    let h = ring.head.load(Relaxed);
    let slot = |pos: u64| &ring.slots[(pos & (n - 1)) as usize];
    let slots: Vec<&SlotArray> = match cont {
        None => vec![slot(h)],
        Some(_) => vec![slot(h), slot(h + 1)],
    };
    let commit = |left: &mut dyn FnMut() -> bool| {
        if !left() {
            return false;
        }
        ring.head.store(h + slots.len() as u64, Release);
        true
    };
    for (k, s) in slots.iter().enumerate() {
        if bug == WriterBug::NoClaim || (bug == WriterBug::NoContinuationClaim && k == 1) {
            continue;
        }
        if !step() {
            return None;
        }
        s[0].store(Stamp::CLAIMED | (h + k as u64), Relaxed);
    }
    fence(Release);
    let mut parent = *words;
    parent[0] = TypeWord(parent[0]).with_position(h).0;
    let payloads = [Some(&parent), cont];
    for (s, payload) in slots.iter().zip(payloads.into_iter().flatten()) {
        for (dst, &w) in s[1..].iter().zip(payload) {
            if !step() {
                return None;
            }
            dst.store(w, Relaxed);
        }
    }
    let stamp = Stamp::next_after(timestamp, Stamp(last_stamp.load(Relaxed))).0;
    if bug == WriterBug::HeadBeforeStamp && !commit(&mut step) {
        return None;
    }
    for (k, s) in slots.iter().enumerate() {
        if !step() {
            return None;
        }
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
    last_stamp.store(stamp, Relaxed);
    if bug != WriterBug::HeadBeforeStamp && !commit(&mut step) {
        return None;
    }
    Some(stamp)
}

/// A completed write: its sequence number, its position if known, and the stamp it
/// committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Done {
    seq: u64,
    pos: Option<u64>,
    stamp: u64,
    cont: bool,
}

impl Rings {
    fn new(slots: usize) -> Arc<Rings> {
        Arc::new(Rings {
            gate: AtomicU64::new(0),
            a: HeapRing::new(slots),
            last_stamp: AtomicU64::new(0),
            b: HeapRing::new(slots),
        })
    }

    /// A restartable section on ring A storing `seq` (in every word), stopped after `steps`
    /// stores; the write if it was committed. `pos` is the position it takes (the `head`
    /// it will find) where the caller knows it.
    fn restartable(
        &self,
        bug: WriterBug,
        pos: u64,
        seq: u64,
        cont: bool,
        steps: usize,
    ) -> Option<Done> {
        let (w, c) = entry(seq, cont);
        // Later sections of one CPU read later clocks.
        let timestamp = 1000 + 10 * pos + u64::from(seq & ABORTED == 0) * 5;
        let stamp = match bug {
            WriterBug::Library => self.a.restartable_writer().write_restartable(
                &self.last_stamp,
                timestamp,
                &w,
                c.as_ref(),
                steps,
            ),
            _ => write_copy(
                bug,
                &self.a,
                &self.last_stamp,
                timestamp,
                &w,
                c.as_ref(),
                steps,
            ),
        }?;
        Some(Done {
            seq,
            pos: Some(pos),
            stamp,
            cont,
        })
    }

    /// What a reader of ring A returns.
    fn read_a(&self, rule: ReaderRule) -> RingSnapshot {
        match rule {
            ReaderRule::Restartable => self.a.restartable_ring().snapshot(),
            ReaderRule::SharedRule => {
                let ring = self.a.ring();
                let reads: Vec<devttrace::ring::SlotRead> =
                    (0..ring.slot_count()).map(|i| ring.read(i)).collect();
                let mut snap = RingSnapshot::default();
                snap.head = ring.head();
                for i in 0..reads.len() {
                    if let Some((e, _)) = devttrace::ring::event_at(&reads, i) {
                        snap.events.push(e);
                    }
                }
                snap.events.sort_by_key(|e| e.stamp);
                snap
            }
        }
    }
}

/// One snapshot of a ring, with the `head` its reader loaded (Acquire) just before it.
struct Seen {
    h0: u64,
    snap: RingSnapshot,
    /// Whether the accounting must be exact: for a restartable ring always (its reader counts
    /// only positions below the `head` it loaded first, and loads `head` again after the
    /// copy); for a shared ring only once nobody writes it (a concurrent reader may find a
    /// slot claimed by a reservation whose `fetch_add` (Relaxed) its `head` load does not
    /// see yet).
    exact: bool,
}

/// The checks on any snapshot of a ring of `n` slots whose completed writes are `done`
/// (`aborted`: the sequence number of the section that was aborted, if it was).
///
/// Every event is one write (all its words carry one sequence number), is not the aborted
/// section's, is a completed write (its stamp too), sits at its write's position (its position
/// tag is its sequence number's; its slot is the position's), inside the window the reader
/// could see (`[h0 - n, head)`); positions strictly increase in time order (none twice); and
/// `head == skipped + committed + claimed + lost` with `lost` not clamped.
fn check_ring(what: &str, seen: &Seen, n: u64, done: &[Done], aborted: Option<u64>) {
    let s = &seen.snap;
    let mut prev: Option<u64> = None;
    for e in &s.events {
        let seq = e.ctx;
        let nargs = if e.type_word.has_continuation() && !e.continuation_lost {
            12
        } else {
            5
        };
        assert!(
            e.type_word.tracepoint() == seq as u16
                && e.args().len() == nargs
                && e.args().iter().all(|&a| a == seq),
            "{what}: mixed entry: words of more than one write: {e:?}"
        );
        assert!(
            Some(seq) != aborted,
            "{what}: accepted the leftovers of an aborted write: {e:?}"
        );
        let pos = u64::from(e.type_word.position_tag());
        let Some(d) = done.iter().find(|d| d.seq == seq) else {
            panic!("{what}: not a completed write: {e:?}; completed: {done:?}");
        };
        assert!(
            d.stamp == e.stamp && d.cont == e.type_word.has_continuation(),
            "{what}: not a completed write: {e:?}; completed: {done:?}"
        );
        if let Some(p) = d.pos {
            assert_eq!(
                p, pos,
                "{what}: the event's sequence number is not its ring position: {e:?}"
            );
        }
        let last = pos + u64::from(e.type_word.has_continuation());
        assert!(
            pos + n >= seen.h0 && last < s.head && u64::from(e.slot) == pos % n,
            "{what}: an event outside the ring's window [{} - {n}, {}): {e:?}",
            seen.h0,
            s.head
        );
        assert!(
            prev.is_none_or(|p| p < pos),
            "{what}: a position returned twice, or out of order: {e:?} after {prev:?}"
        );
        prev = Some(pos);
    }
    assert!(
        !seen.exact
            || (s.skipped + s.committed + s.claimed <= s.head
                && s.head == s.skipped + s.committed + s.claimed + s.lost),
        "{what}: accounting: {s:?}"
    );
}

/// The checks on the final snapshot of a ring nobody writes any more: every completed write
/// has its own position (`head` is the slots they took plus those skipped, no more and no
/// fewer); those of [`check_ring`], with the accounting exact; and where the positions of
/// the writes are known (one writer), nothing claimed, changed, orphaned or malformed, no
/// continuation lost, and the events are exactly the completed writes whose slots are among
/// the newest `n` positions, oldest first.
fn check_final(what: &str, snap: RingSnapshot, n: u64, done: &[Done]) {
    let taken: u64 = done.iter().map(|d| 1 + u64::from(d.cont)).sum();
    assert!(
        snap.head >= taken + snap.skipped,
        "{what}: a completed write lost its position: {snap:?}; completed: {done:?}"
    );
    assert!(
        snap.head <= taken + snap.skipped,
        "{what}: a position committed without a completed write: {snap:?}; completed: {done:?}"
    );
    let seen = Seen {
        h0: snap.head,
        snap,
        exact: true,
    };
    check_ring(what, &seen, n, done, None);
    let s = seen.snap;
    if done.iter().any(|d| d.pos.is_none()) {
        return;
    }
    assert!(
        s.claimed == 0
            && s.changed == 0
            && s.orphans == 0
            && s.malformed == 0
            && s.committed == s.head.min(n)
            && s.events.iter().all(|e| !e.continuation_lost),
        "{what}: the final snapshot lacks some of the newest positions' entries: {s:?}; \
         completed: {done:?}"
    );
    let want: Vec<u64> = done
        .iter()
        .filter(|d| d.pos.is_some_and(|p| p + n >= s.head))
        .map(|d| d.seq)
        .collect();
    let got: Vec<u64> = s.events.iter().map(|e| e.ctx).collect();
    assert_eq!(
        got, want,
        "{what}: the final snapshot does not hold exactly the newest writes: {s:?}"
    );
}

/// A restartable-ring model: `before` complete writes made before the threads start (by the
/// same CPU: they happen before everything else), `during` more by the writer thread, then
/// a section at the next position stopped after `k` stores and, if it was stopped, its
/// successor's complete write at the same position; a reader thread snapshots
/// concurrently. The first write is a single entry; with `cont` all the others are continued
/// events (two slots), so that pairs straddle the end of the ring.
#[derive(Clone, Copy, Debug)]
struct RingModel {
    slots: usize,
    cont: bool,
    before: u64,
    during: u64,
    writer: WriterBug,
    reader: ReaderRule,
}

impl RingModel {
    /// Whether write `i` (0 is the first) is a continued event.
    fn continued(self, i: u64) -> bool {
        i > 0 && self.cont
    }

    /// Whether the section that gets aborted is a continued event.
    fn aborted_continued(self) -> bool {
        self.continued(self.before + self.during)
    }

    fn run(self, k: usize) {
        let m = Rings::new(self.slots);
        let n = self.slots as u64;
        let mut done = Vec::new();
        for i in 0..self.before {
            // Each section's position is the head it finds (Relaxed: one writer).
            let pos = m.a.head.load(Relaxed);
            let d = m.restartable(WriterBug::Library, pos, pos, self.continued(i), usize::MAX);
            done.push(d.expect("a complete write"));
        }
        let writer = {
            let m = m.clone();
            loom::thread::spawn(move || {
                start(&m.gate);
                let mut done = Vec::new();
                for i in self.before..self.before + self.during {
                    let pos = m.a.head.load(Relaxed);
                    let d = m.restartable(self.writer, pos, pos, self.continued(i), usize::MAX);
                    done.push(d.expect("a complete write"));
                }
                let c = self.aborted_continued();
                let pos = m.a.head.load(Relaxed);
                // A section stopped before its last store is a write that did not happen:
                // its sequence number is no position's. (k = all stores: a whole write.)
                let seq = if k < stores(c) { ABORTED | pos } else { pos };
                if let Some(d) = m.restartable(self.writer, pos, seq, c, k) {
                    done.push(d);
                    return (done, None);
                }
                // The successor: the same section restarted, or another thread's.
                let pos = m.a.head.load(Relaxed);
                let d = m.restartable(self.writer, pos, pos, c, usize::MAX);
                done.push(d.expect("a complete write"));
                (done, Some(seq))
            })
        };
        let reader = {
            let m = m.clone();
            loom::thread::spawn(move || {
                start(&m.gate);
                let h0 = m.a.head.load(Acquire);
                Seen {
                    h0,
                    snap: m.read_a(self.reader),
                    exact: self.reader == ReaderRule::Restartable,
                }
            })
        };
        let seen = reader.join().unwrap();
        let (during, aborted) = writer.join().unwrap();
        done.extend(during);
        check_ring("ring", &seen, n, &done, aborted);
        check_final("final ring", m.a.restartable_ring().snapshot(), n, &done);
    }

    /// Runs the model once per abort point `k` in `ks`, with at most `bound` preemptions.
    fn run_each(self, bound: usize, ks: impl IntoIterator<Item = usize>) {
        for k in ks {
            model(bound, move || self.run(k));
        }
    }

    /// Every abort point: `k` = 0 ..= all the stores of a write.
    fn all(self) -> core::ops::RangeInclusive<usize> {
        0..=stores(self.aborted_continued())
    }
}

/// The preemption bound of the ring models: none. Each has one writer thread, spawned
/// before the reader, and a reader that writes nothing the writer reads. Without
/// preemptions loom runs the writer to its end and then the reader, but still lets each of
/// the reader's loads return any store the memory model allows it (not only the latest, and
/// with the synchronization that the store it picks brings), so these executions give the
/// reader every outcome it can have; a preemption only adds schedules in which fewer stores
/// exist when it loads. (All the broken variants below are caught at this bound; one
/// preemption would cost about ten times as much.)
const RING_BOUND: usize = 0;

/// Model 1's ring: 2 slots of single entries. Position 0 is written before the threads;
/// the writer thread writes position 1, then a section at position 2 (slot 0, whose
/// expected entry is position 0's until the head moves on), then its successor.
const SINGLES: RingModel = RingModel {
    slots: 2,
    cont: false,
    before: 1,
    during: 1,
    writer: WriterBug::Library,
    reader: ReaderRule::Restartable,
};

/// Model 2's ring: 2 slots; a single entry at position 0 and a pair at positions 1-2 (slots
/// 1 and 0: across the end of the ring) written before the threads; the writer thread's pair
/// section at positions 3-4 is aborted, then its successor's pair. (Writes of the writer
/// thread before the aborted one would multiply the run time: each of their stores is one
/// more value a reader's load may return.)
const PAIRS: RingModel = RingModel {
    slots: 2,
    cont: true,
    before: 2,
    during: 0,
    ..SINGLES
};

/// Model 1: a restartable ring of single entries, the writer's section aborted after each
/// number `k` of its 11 stores (0 ..= 11; 11 is a whole write, with no successor), with a
/// reader snapshotting concurrently. The reader returns only whole completed writes (stamp
/// and every word) at their own positions (the sequence number stored in every word is the
/// position tag; the slot is the position's; the position is inside the window the reader
/// could see), never the aborted section's leftovers, each position once and in order, with
/// `head == skipped + committed + claimed + lost` exactly; once the writer is done the ring
/// holds exactly the newest completed writes that fit (positions 1 and 2).
#[test]
fn restartable_ring_aborted_at_every_store_with_a_concurrent_reader() {
    SINGLES.run_each(RING_BOUND, SINGLES.all());
}

/// Model 2, aborts before the pair's continuation stamp (`k` = 0 ..= 17 of 20 stores: the
/// claims, the parent's and the continuation's payloads, the parent's stamp): the checks of
/// model 1, for continued events; in addition no parent is stitched to a continuation of
/// another write (all 12 argument words carry one sequence number), and a parent whose
/// continuation was overwritten comes out with 5 of them.
#[test]
fn restartable_ring_of_continued_events_aborted_before_their_stamps() {
    PAIRS.run_each(RING_BOUND, 0..=17);
}

/// Model 2, aborts after both stamps (`k` = 18 ..= 20: the leftovers are a committed-looking
/// pair tagged with the position the section did not commit), and the whole write.
#[test]
fn restartable_ring_of_continued_events_aborted_after_their_stamps() {
    PAIRS.run_each(RING_BOUND, 18..=stores(true));
}

/// Broken writer: no claim before the payload. The reader copies an entry while the
/// successor (or the aborted section) overwrites it, and the stamp check cannot tell: the
/// stamp it loads before and after the copy is the old one.
#[test]
#[should_panic(expected = "ring: mixed entry")]
fn broken_ring_writer_without_its_claim_is_caught() {
    let m = RingModel {
        writer: WriterBug::NoClaim,
        ..SINGLES
    };
    m.run_each(RING_BOUND, m.all());
}

/// Broken writer: `head` committed before the stamp. A section aborted between the two
/// leaves a committed position whose slot is claimed for ever; its successor takes the next
/// position.
#[test]
#[should_panic(expected = "final ring: a position committed without a completed write")]
fn broken_ring_writer_committing_head_before_its_stamp_is_caught() {
    let m = RingModel {
        writer: WriterBug::HeadBeforeStamp,
        ..SINGLES
    };
    m.run_each(RING_BOUND, m.all());
}

/// Broken reader: one that accepts any committed stamp whatever the position tag says. A
/// section aborted after its stamp store (`k` = 9 or 10 of its 11 stores) leaves a
/// committed-looking entry at a position that was never committed, and the reader returns
/// it: an event at a position its `head` does not cover.
#[test]
#[should_panic(expected = "ring: an event outside the ring's window")]
fn broken_ring_reader_ignoring_the_position_tag_accepts_leftovers() {
    let m = RingModel {
        reader: ReaderRule::SharedRule,
        ..SINGLES
    };
    m.run_each(RING_BOUND, [9, 10]);
}

/// Broken reader, at every abort point: from the first (`k` = 0) it returns an entry whose
/// position the `head` it loads after its copy does not cover yet: the successor's, whose
/// section could still have been aborted (as the previous test shows).
#[test]
#[should_panic(expected = "ring: an event outside the ring's window")]
fn broken_ring_reader_ignoring_the_position_tag_accepts_uncommitted_entries() {
    let m = RingModel {
        reader: ReaderRule::SharedRule,
        ..SINGLES
    };
    m.run_each(RING_BOUND, m.all());
}

/// Broken writer: the continuation's slot is not claimed. The reader stitches the old pair's
/// parent to its continuation slot's stamp (still the old one) and words the new pair is
/// storing.
#[test]
#[should_panic(expected = "ring: mixed entry")]
fn broken_continued_writer_without_the_continuation_claim_is_caught() {
    let m = RingModel {
        writer: WriterBug::NoContinuationClaim,
        ..PAIRS
    };
    m.run_each(RING_BOUND, m.all());
}

// ---------------------------------------------------------------------------------------
// Coexisting protocols
// ---------------------------------------------------------------------------------------

/// Model 3: a CPU's restartable ring A (2 slots; position 0 written before the threads; a
/// section at position 1 aborted after `k` stores, then its successor) and a shared ring B
/// (2 slots) written at the same time by another thread with the atomic protocol
/// ([`devttrace::ring::RingWriter::write`], two entries); a reader snapshots both rings, as a
/// device reader does before it merges them. With `same_ring` (the broken variant) the
/// shared writer writes ring A instead.
///
/// Checked: each ring's events are whole completed writes to that ring at their positions
/// (ring A's, never the aborted section's), in order, ring A's accounting exact; after the
/// writers are done, every completed write of each ring holds its own position (`head` is
/// the slots they took, plus those skipped), the accounting is exact, and each ring holds
/// exactly its newest writes. (Ring A's wrap, where the aborted section's leftovers land on
/// an older position's slot, is model 1's; here it would multiply the run time by the
/// shared ring's.)
fn coexisting(k: usize, same_ring: bool) {
    let m = Rings::new(2);
    let mut done_a = vec![m
        .restartable(WriterBug::Library, 0, 0, false, usize::MAX)
        .expect("a complete write")];
    let shared = {
        let m = m.clone();
        loom::thread::spawn(move || {
            start(&m.gate);
            let ring = if same_ring {
                m.a.writer()
            } else {
                m.b.writer()
            };
            (0..2)
                .filter_map(|i| {
                    let seq = SHARED | i;
                    let stamp = ring.write(2000 + 10 * i, 1, &entry(seq, false).0)?;
                    Some(Done {
                        seq,
                        // Its position, if it is the ring's only writer (nothing skipped).
                        pos: (!same_ring).then_some(i),
                        stamp,
                        cont: false,
                    })
                })
                .collect::<Vec<_>>()
        })
    };
    let restartable = {
        let m = m.clone();
        loom::thread::spawn(move || {
            start(&m.gate);
            // Positions (of sequence numbers 1, or `ABORTED | 1` for the aborted section)
            // are known only if this is the ring's only writer.
            let known = |d: Done| Done {
                pos: d.pos.filter(|_| !same_ring),
                ..d
            };
            let seq = if k < stores(false) { ABORTED | 1 } else { 1 };
            if let Some(d) = m.restartable(WriterBug::Library, 1, seq, false, k) {
                return (vec![known(d)], None);
            }
            let d = m.restartable(WriterBug::Library, 1, 1, false, usize::MAX);
            (vec![known(d.expect("a complete write"))], Some(seq))
        })
    };
    let reader = {
        let m = m.clone();
        loom::thread::spawn(move || {
            start(&m.gate);
            let h0 = m.a.head.load(Acquire);
            let a = Seen {
                h0,
                snap: m.a.restartable_ring().snapshot(),
                // Exact unless a shared writer writes it too (see `Seen::exact`).
                exact: !same_ring,
            };
            let h0 = m.b.head.load(Acquire);
            let b = Seen {
                h0,
                snap: m.b.ring().snapshot(),
                exact: false,
            };
            (a, b)
        })
    };
    let (a, b) = reader.join().unwrap();
    let (mine, aborted) = restartable.join().unwrap();
    done_a.extend(mine);
    let mut done_b = shared.join().unwrap();
    if same_ring {
        done_a.append(&mut done_b);
    }
    check_final(
        "final ring A",
        m.a.restartable_ring().snapshot(),
        2,
        &done_a,
    );
    check_final("final ring B", m.b.ring().snapshot(), 2, &done_b);
    check_ring("ring A", &a, 2, &done_a, aborted);
    check_ring("ring B", &b, 2, &done_b, None);
}

/// The preemption bound of model 3: one, cheap here. (Its broken variant is caught
/// without preemptions: the shared writer, spawned first, runs before the restartable one,
/// whose `h = head` may still read the value from before the shared writer's reservations.)
const COEXISTING_BOUND: usize = 1;

/// Model 3 at every abort point `k` = 0 ..= 11.
#[test]
fn a_restartable_ring_and_a_shared_ring_written_at_once_both_read_back_exactly() {
    for k in 0..=stores(false) {
        model(COEXISTING_BOUND, move || coexisting(k, false));
    }
}

/// Broken: the shared protocol on the restartable ring, next to its restartable writer.
/// `RingWriter::write` is correct on a ring of its own, but a restartable section's commit
/// `head = h + 1` (a plain store) undoes a reservation made since its `h = head`, and its
/// claim (a plain store) does not exclude the other writer: the model finds a completed
/// write whose position was taken again.
#[test]
#[should_panic(expected = "final ring A: a completed write lost its position")]
fn broken_shared_writer_on_the_restartable_ring_is_caught() {
    for k in 0..=stores(false) {
        model(COEXISTING_BOUND, move || coexisting(k, true));
    }
}

// ---------------------------------------------------------------------------------------
// Aux buffers
// ---------------------------------------------------------------------------------------

/// Words of the aux buffer: 64 bytes, two or three records.
const AUX_WORDS: usize = 8;

/// A mistake in a copy of the restartable aux writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AuxBug {
    /// The library's writer ([`devttrace::aux::AuxWriter::write_restartable`]) itself.
    Library,
    /// The copy without a mistake (checked to store what the library stores).
    None,
    /// Commits `last` before storing the record.
    LastBeforeRecord,
    /// Moves `first` past the records it overwrites only after overwriting them.
    FirstAfterOverwrite,
}

/// The restartable aux write of [`devttrace::aux::AuxWriter::write_restartable`], copied here
/// with `bug`.
fn aux_write_copy(
    bug: AuxBug,
    aux: &HeapAux<AtomicU64>,
    path: AuxPath,
    timestamp: u64,
    ctx: u64,
    bytes: &[u8],
    steps: usize,
) -> Option<u64> {
    let mut left = steps;
    let mut step = || {
        let go = left > 0;
        left = left.saturating_sub(1);
        go
    };
    let words = &aux.words;
    let at = |off: u64| &words[((off / 8) & (words.len() as u64 - 1)) as usize];
    let size = words.len() as u64 * 8;
    let rec = path.record_bytes();
    let start = aux.last.load(Relaxed);
    let old_first = aux.first.load(Relaxed);
    let mut first = if old_first > start || start - old_first > size || old_first % 8 != 0 {
        start
    } else {
        old_first
    };
    while start + rec - first > size {
        first += AuxPath(at(first).load(Relaxed)).record_bytes();
    }
    let move_first = |step: &mut dyn FnMut() -> bool| {
        if first != old_first {
            if !step() {
                return false;
            }
            aux.first.store(first, Release);
            fence(Release);
        }
        true
    };
    let commit = |step: &mut dyn FnMut() -> bool| {
        if !step() {
            return false;
        }
        aux.last.store(start + rec, Release);
        true
    };
    if bug != AuxBug::FirstAfterOverwrite && !move_first(&mut step) {
        return None;
    }
    if bug == AuxBug::LastBeforeRecord && !commit(&mut step) {
        return None;
    }
    let payload = bytes.chunks(8).map(|c| {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        u64::from_ne_bytes(w)
    });
    for (k, w) in [path.0, timestamp, ctx]
        .into_iter()
        .chain(payload)
        .enumerate()
    {
        if !step() {
            return None;
        }
        at(start + 8 * k as u64).store(w, Relaxed);
    }
    if bug == AuxBug::FirstAfterOverwrite && !move_first(&mut step) {
        return None;
    }
    if bug != AuxBug::LastBeforeRecord && !commit(&mut step) {
        return None;
    }
    Some(start)
}

struct AuxMem {
    gate: AtomicU64,
    heap: HeapAux<AtomicU64>,
}

/// Aux write `seq`: `len` bytes, byte `i` being `seq * 16 + i`; its timestamp
/// (`1000 + seq`) and context (`seq`) carry `seq` too.
#[derive(Clone, Copy, Debug)]
struct AuxWrite {
    seq: u64,
    len: u64,
}

impl AuxWrite {
    fn path(self) -> AuxPath {
        AuxPath::new(AuxTag::String, 1, self.len, false)
    }

    fn bytes(self) -> Vec<u8> {
        (0..self.len).map(|i| (self.seq * 16 + i) as u8).collect()
    }

    /// The record a reader must find for it at `offset`.
    fn record(self, offset: u64) -> Rec {
        Rec {
            buffer: 0,
            offset,
            tag: AuxTag::String as u16,
            cpu: 1,
            timestamp: 1000 + self.seq,
            ctx: self.seq,
            truncated: false,
            bytes: self.bytes(),
        }
    }
}

impl AuxMem {
    fn new() -> Arc<AuxMem> {
        Arc::new(AuxMem {
            gate: AtomicU64::new(0),
            heap: HeapAux::new(AUX_WORDS),
        })
    }

    /// Write `w` stopped after `steps` stores; the record a reader must find, if it was
    /// committed.
    fn write(&self, bug: AuxBug, w: AuxWrite, steps: usize) -> Option<Rec> {
        let (path, ts, bytes) = (w.path(), 1000 + w.seq, w.bytes());
        let at = match bug {
            AuxBug::Library => self
                .heap
                .writer()
                .write_restartable(path, ts, w.seq, &bytes, steps),
            _ => aux_write_copy(bug, &self.heap, path, ts, w.seq, &bytes, steps),
        }?;
        Some(w.record(at))
    }
}

/// The first two records (32 bytes at 0, 24 bytes at 32: 56 of the 64), the one whose write
/// is aborted (40 bytes at 56: wrapping, it must drop the oldest record; its last word is
/// partial), and its successor (32 bytes at 56, or at 96 after a whole write).
const AUX_BEFORE: [AuxWrite; 2] = [AuxWrite { seq: 0, len: 8 }, AuxWrite { seq: 1, len: 0 }];
const AUX_ABORTED: AuxWrite = AuxWrite { seq: 2, len: 13 };
const AUX_SUCCESSOR: AuxWrite = AuxWrite { seq: 3, len: 8 };

/// Stores of [`AUX_ABORTED`]'s write: `first`, the 3 header words, 2 payload words, `last`.
const AUX_STORES: usize = 1 + 3 + 2 + 1;

/// The checks on an aux snapshot, given the completed records `done` (`aborted`: the
/// sequence number of a write that was aborted): not corrupt, no record incomplete (a
/// restartable buffer has none: a record is made valid before `last` covers it); every
/// record is exactly a completed write (header, timestamp, context and bytes), never the
/// aborted one; the records are contiguous from `first`, and their sequence numbers
/// increase.
fn check_aux(what: &str, s: &AuxSnapshot, done: &[Rec], aborted: Option<u64>) {
    assert!(!s.corrupt, "{what}: corrupt: {s:?}");
    assert_eq!(s.incomplete, 0, "{what}: a record incomplete: {s:?}");
    let mut off = s.first;
    let recs = records(s);
    for r in &recs {
        assert!(
            Some(r.ctx) != aborted,
            "{what}: returned the aborted write's record: {r:?}"
        );
        assert!(
            done.contains(r),
            "{what}: a record that is no completed write: {r:?}; completed: {done:?}"
        );
        assert_eq!(r.offset, off, "{what}: records out of order: {s:?}");
        off += r.size();
    }
    assert!(
        recs.windows(2).all(|w| w[0].ctx < w[1].ctx),
        "{what}: records out of order: {s:?}"
    );
}

/// Model 4: an 8-word restartable aux buffer: one record written before the threads; the
/// writer thread writes a second one, then a record that must drop the oldest one, stopped
/// after `k` of its 7 stores (`first`, 3 header words, 2 payload words, `last`; 7 is a
/// whole write, with no successor), then its successor's complete write (another record,
/// at the same offset); a reader snapshots concurrently. Every record returned is complete
/// and exactly what was written for it (offset, tag, CPU, timestamp, context and bytes, all
/// derived from its sequence number), never the aborted write's, never an overwritten
/// record's words; the records are contiguous and in order, none incomplete, the snapshot
/// not corrupt; afterwards the buffer holds exactly the newest records that fit and `last`
/// is where the completed ones end.
fn aux_model(bug: AuxBug, k: usize) {
    let m = AuxMem::new();
    let mut done = vec![m.write(AuxBug::Library, AUX_BEFORE[0], usize::MAX).unwrap()];
    let writer = {
        let m = m.clone();
        loom::thread::spawn(move || {
            start(&m.gate);
            let mut done = vec![m.write(bug, AUX_BEFORE[1], usize::MAX).unwrap()];
            if let Some(r) = m.write(bug, AUX_ABORTED, k) {
                done.push(r);
                return (done, None);
            }
            let r = m.write(bug, AUX_SUCCESSOR, usize::MAX);
            done.push(r.expect("a complete write"));
            (done, Some(AUX_ABORTED.seq))
        })
    };
    let reader = {
        let m = m.clone();
        loom::thread::spawn(move || {
            start(&m.gate);
            m.heap.aux().snapshot().expect("a snapshot")
        })
    };
    let snap = reader.join().unwrap();
    let (mine, aborted) = writer.join().unwrap();
    done.extend(mine);
    check_aux("aux", &snap, &done, aborted);
    let fin = m.heap.aux().snapshot().expect("a snapshot");
    check_aux("final aux", &fin, &done, aborted);
    let end = done.iter().map(|r| r.offset + r.size()).max();
    assert_eq!(Some(fin.last), end, "final aux: `last`: {fin:?}");
    let want: Vec<&Rec> = done
        .iter()
        .filter(|r| r.offset + 8 * AUX_WORDS as u64 >= fin.last)
        .collect();
    let fin_recs = records(&fin);
    let got: Vec<&Rec> = fin_recs.iter().collect();
    assert_eq!(
        got, want,
        "final aux: not exactly the newest records: {fin:?}"
    );
}

/// The preemption bound of the aux models: cheap enough for two.
const AUX_BOUND: usize = 2;

/// Model 4 at every abort point `k` = 0 ..= 7.
#[test]
fn restartable_aux_write_aborted_at_every_store_with_a_concurrent_reader() {
    for k in 0..=AUX_STORES {
        model(AUX_BOUND, move || aux_model(AuxBug::Library, k));
    }
}

/// Broken writer: `last` committed before the record is stored. A reader copies the range
/// up to the new `last`, where the record's header is not stored yet: it parses what the
/// buffer held there before, a malformed header.
#[test]
#[should_panic(expected = "aux: corrupt")]
fn broken_aux_writer_committing_last_before_the_record_is_caught() {
    for k in 0..=AUX_STORES {
        model(AUX_BOUND, move || aux_model(AuxBug::LastBeforeRecord, k));
    }
}

/// Broken writer: `first` moved past the oldest record only after it was overwritten. A
/// reader that loaded the old `first` keeps the oldest record, whose words it copied
/// half-overwritten.
#[test]
#[should_panic(expected = "aux: a record that is no completed write")]
fn broken_aux_writer_moving_first_after_overwriting_is_caught() {
    for k in 0..=AUX_STORES {
        model(AUX_BOUND, move || aux_model(AuxBug::FirstAfterOverwrite, k));
    }
}

// ---------------------------------------------------------------------------------------
// The copies
// ---------------------------------------------------------------------------------------

/// The copies of the writers that the broken variants start from store, without their
/// mistake, exactly what the library's writers store, at every abort point: every word of
/// the ring (or buffer), its head (`first`, `last`) and `last_stamp`; and a write has
/// exactly the number of stores the models assume (it is committed at `k` = that number,
/// not before).
#[test]
fn the_copied_writers_store_what_the_library_stores() {
    let load = |w: &AtomicU64| w.load(Relaxed);
    for cont in [false, true] {
        for k in 0..=stores(cont) {
            model(0, move || {
                let rings = [WriterBug::Library, WriterBug::None].map(|bug| {
                    let m = Rings::new(2);
                    for pos in 0..3 {
                        let d = m.restartable(bug, pos, pos, false, usize::MAX);
                        assert!(d.is_some());
                    }
                    let d = m.restartable(bug, 3, 3, cont, k);
                    assert_eq!(d.is_some(), k == stores(cont), "{bug:?} k {k}");
                    let words: Vec<u64> = m.a.slots.iter().flatten().map(load).collect();
                    (words, load(&m.a.head), load(&m.last_stamp))
                });
                assert_eq!(rings[0], rings[1], "cont {cont} k {k}");
            });
        }
    }
    for k in 0..=AUX_STORES {
        model(0, move || {
            let bufs = [AuxBug::Library, AuxBug::None].map(|bug| {
                let m = AuxMem::new();
                for w in AUX_BEFORE {
                    assert!(m.write(bug, w, usize::MAX).is_some());
                }
                let r = m.write(bug, AUX_ABORTED, k);
                assert_eq!(r.is_some(), k == AUX_STORES, "{bug:?} k {k}");
                let words: Vec<u64> = m.heap.words.iter().map(load).collect();
                (words, load(&m.heap.first), load(&m.heap.last))
            });
            assert_eq!(bufs[0], bufs[1], "aux k {k}");
        });
    }
}

// ---------------------------------------------------------------------------------------
// An event and its string in one section
// ---------------------------------------------------------------------------------------

/// A restartable ring of 2 slots and its 8-word aux buffer, written by the combined section
/// ([`devttrace::restartable::write_event`]).
struct EventMem {
    gate: AtomicU64,
    ring: HeapRing<AtomicU64>,
    last_stamp: AtomicU64,
    aux: HeapAux<AtomicU64>,
}

/// Event `seq`'s string: 8 bytes, byte `i` being `seq * 16 + i` (a 32-byte record: the
/// buffer holds two).
fn event_string(seq: u64) -> Vec<u8> {
    (0..8).map(|i| (seq * 16 + i) as u8).collect()
}

impl EventMem {
    fn new() -> Arc<EventMem> {
        Arc::new(EventMem {
            gate: AtomicU64::new(0),
            ring: HeapRing::new(2),
            last_stamp: AtomicU64::new(0),
            aux: HeapAux::new(AUX_WORDS),
        })
    }

    /// Event `seq` (one slot: context `seq`, its first argument its string, the other four
    /// `seq`) stopped after `steps` stores; its stamp if it was committed.
    fn write(&self, bug: bool, seq: u64, steps: usize) -> Option<u64> {
        use devttrace::restartable::{write_event, StringArg};
        let bytes = event_string(seq);
        let mut words = [seq; 14];
        words[0] = TypeWord::new(Kind::Entry, 5, seq as u16).0;
        let path = AuxPath::new(AuxTag::String, 0, bytes.len() as u64, false);
        if bug {
            // The entry first, naming the record that will start at the buffer's `last`,
            // then the record.
            words[2] = ttrace_layouts::aux::aux_ref(0, self.aux.last.load(Relaxed));
            let (parent, _) = words.split_at(7);
            let stamp = self.ring.restartable_writer().write_restartable(
                &self.last_stamp,
                100 + 10 * seq,
                parent.try_into().unwrap(),
                None,
                steps,
            )?;
            self.aux
                .writer()
                .write_restartable(path, 0, seq, &bytes, usize::MAX)?;
            return Some(stamp);
        }
        let string = StringArg {
            word: 2,
            path,
            bytes: &bytes,
        };
        write_event(
            &self.ring.restartable_writer(),
            &self.last_stamp,
            &self.aux.writer(),
            0,
            100 + 10 * seq,
            &mut words,
            false,
            &[string],
            steps,
        )
    }
}

/// Stores of a combined write of one slot and one string, when it moves `first`: `first`,
/// 3 header words, 1 payload word, `last`; the claim, 6 payload words, the stamp,
/// `last_stamp`, `head`.
const EVENT_STORES: usize = 6 + 10;

/// The checks on a reader's copy of the ring and then of the aux buffer: every event is a
/// completed write (its words all its sequence number, but the string's), never the
/// aborted section's; its string's reference names, in the buffer copied after it, that
/// event's own record (context and bytes), or an offset the buffer no longer holds (below
/// its `first`: overwritten since) — never a record not yet written, nor another's.
fn check_events(
    what: &str,
    ring: &RingSnapshot,
    aux: &AuxSnapshot,
    done: &[u64],
    aborted: Option<u64>,
) {
    use ttrace_layouts::aux::{aux_ref_parts, full_offset};
    assert!(!aux.corrupt, "{what}: aux corrupt: {aux:?}");
    let recs = records(aux);
    for e in &ring.events {
        let seq = e.ctx;
        assert!(
            Some(seq) != aborted,
            "{what}: the aborted section's event: {e:?}"
        );
        assert!(
            done.contains(&seq),
            "{what}: an event no completed write: {e:?}"
        );
        assert_eq!(e.args()[1..], [seq; 4], "{what}: mixed words: {e:?}");
        let (buffer, low) = aux_ref_parts(e.args()[0]).expect("a reference");
        assert_eq!(buffer, 0, "{what}: {e:?}");
        let offset = full_offset(low, aux.last);
        match recs.iter().find(|r| r.offset == offset) {
            Some(r) => {
                assert_eq!(
                    (r.ctx, &r.bytes),
                    (seq, &event_string(seq)),
                    "{what}: event {seq}'s string is another's"
                );
            }
            None => assert!(
                offset < aux.first,
                "{what}: event {seq}'s string at {offset} is missing from {aux:?}"
            ),
        }
    }
}

/// Model 5: combined sections. Event 0 is written before the threads; the writer thread
/// writes event 1, then event 2 stopped after `k` stores, then (if it was stopped) event 3
/// whole; a reader copies the ring, then the aux buffer, concurrently. Every event it
/// returns is a completed write whose string reference leads to that event's record, or
/// to one overwritten since; afterwards the ring holds the newest two events, and the
/// newest one's string.
fn event_model(bug: bool, k: usize) {
    let m = EventMem::new();
    assert!(m.write(bug, 0, usize::MAX).is_some());
    let writer = {
        let m = m.clone();
        loom::thread::spawn(move || {
            start(&m.gate);
            assert!(m.write(bug, 1, usize::MAX).is_some());
            if m.write(bug, 2, k).is_some() {
                return (vec![0, 1, 2], None);
            }
            assert!(m.write(bug, 3, usize::MAX).is_some());
            (vec![0, 1, 3], Some(2))
        })
    };
    let reader = {
        let m = m.clone();
        loom::thread::spawn(move || {
            start(&m.gate);
            let ring = m.ring.restartable_ring().snapshot();
            let aux = m.aux.aux().snapshot().expect("a snapshot");
            (ring, aux)
        })
    };
    let (ring, aux) = reader.join().unwrap();
    let (done, aborted) = writer.join().unwrap();
    check_events("events", &ring, &aux, &done, aborted);
    let ring = m.ring.restartable_ring().snapshot();
    let aux = m.aux.aux().snapshot().expect("a snapshot");
    check_events("final events", &ring, &aux, &done, aborted);
    let newest: Vec<u64> = ring.events.iter().map(|e| e.ctx).collect();
    assert_eq!(newest, done[1..], "final events: not the newest two");
    // The newest string is there; the one before may have been overwritten by the aborted
    // section's record, which no event names (space lost, never a wrong string).
    let seq = done[2];
    assert!(
        records(&aux).iter().any(|r| r.ctx == seq),
        "final events: event {seq}'s string is gone"
    );
}

/// Model 5 at every abort point `k` = 0 ..= 16 (16 is a whole write). Bound 0, as the ring
/// models: one writer thread, a reader that writes nothing the writer reads.
#[test]
fn an_event_and_its_string_in_one_section_aborted_at_every_store() {
    for k in 0..=EVENT_STORES {
        model(0, move || event_model(false, k));
    }
}

/// Broken writer: the entry committed before its string's record. A reader that copies the
/// entry, then the buffer before the record is in it, finds a reference to a record not
/// yet written.
#[test]
#[should_panic(expected = "is missing from")]
fn broken_combined_writer_committing_the_entry_before_its_string_is_caught() {
    for k in 0..=EVENT_STORES {
        model(0, move || event_model(true, k));
    }
}
