//! The entry protocols under real threads: more writers than cores on tiny rings that lap
//! constantly, readers copying concurrently, every entry self-checking.
//!
//! Three runs: writers as they come (in this process, which has glibc's rseq registration,
//! the restartable path); writers on the restartable path moved between CPUs while they
//! write (by themselves and by another thread) and interrupted by signals whose handler
//! records an event of its own; and the same with half the writers on the shared rings (the
//! fallback's atomic protocol) at the same time.
//!
//! `TTRACE_STRESS_ENTRIES` sets the number of entries (slots) each run writes; the defaults,
//! run in CI, are 10 million for the first and 1 million for the others.

use core::cell::Cell;
use devttrace::Event;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::Barrier;
use std::time::{Duration, Instant};
use ttrace_core::Writer;
use ttrace_layouts::entry::{Kind, TypeWord};
use ttrace_tests::mix;
use ttrace_tests::rseq::{self as rs, RSEQ_REQUIRED};

/// Argument counts the writers cycle through: one slot, a full slot, a slot + continuation.
const SHAPES: [usize; 3] = [1, 5, 12];

fn slots_of(nargs: usize) -> u64 {
    if nargs > 5 {
        2
    } else {
        1
    }
}

/// Whether an accepted event is exactly one write: its type word, context and every
/// argument agree on (writer, sequence).
fn whole(e: &Event) -> bool {
    let (writer, seq) = (e.ctx >> 32, e.ctx & 0xffff_ffff);
    let nargs = SHAPES[(seq % 3) as usize];
    let expected_len = if e.continuation_lost { 5 } else { nargs };
    e.type_word.tracepoint() as u64 == writer
        && e.type_word.nargs() as usize == nargs
        && e.args().len() == expected_len
        && e.args()
            .iter()
            .enumerate()
            .all(|(i, &a)| a == mix(writer, seq, i as u64))
}

/// Records event `seq` of `writer`, on the restartable path (`Writer::emit`, where this
/// process takes it) or on the shared rings (`Writer::emit_shared`). Returns whether it was
/// recorded, and the slots it takes.
fn write_one(dev: &Writer, writer: u64, seq: u64, shared: bool) -> (bool, u64) {
    let ctx = writer << 32 | seq;
    let nargs = SHAPES[(seq % 3) as usize];
    let word = TypeWord::new(Kind::Entry, nargs as u8, writer as u16).0;
    let a = |i: u64| mix(writer, seq, i);
    let ok = match (nargs, shared) {
        (1, false) => dev.emit(word, ctx, &[a(0)]),
        (1, true) => dev.emit_shared(word, ctx, &[a(0)]),
        (5, false) => dev.emit(word, ctx, &[a(0), a(1), a(2), a(3), a(4)]),
        (5, true) => dev.emit_shared(word, ctx, &[a(0), a(1), a(2), a(3), a(4)]),
        (_, false) => dev.emit(
            word,
            ctx,
            &core::array::from_fn::<u64, 12, _>(|i| a(i as u64)),
        ),
        (_, true) => dev.emit_shared(
            word,
            ctx,
            &core::array::from_fn::<u64, 12, _>(|i| a(i as u64)),
        ),
    };
    (ok, slots_of(nargs))
}

/// What the writers of one run count.
#[derive(Default)]
struct Counts {
    /// Slots of the events recorded (by writers and by their signal handlers).
    written: AtomicU64,
    /// The part of `written` recorded with `emit_shared`.
    written_shared: AtomicU64,
    /// Events dropped.
    dropped: AtomicU64,
    /// Signals sent to writers, and handled by them.
    signals_sent: AtomicU64,
    signals_handled: AtomicU64,
    /// Signals that landed inside a restartable critical section (and aborted it).
    signals_in_section: AtomicU64,
    /// Events the handlers recorded.
    handler_events: AtomicU64,
    /// Affinity changes made, by the writers themselves and by the migrating thread.
    moves_self: AtomicU64,
    moves_other: AtomicU64,
}

impl Counts {
    fn add(&self, ok: bool, slots: u64, shared: bool) {
        if ok {
            self.written.fetch_add(slots, Relaxed);
            if shared {
                self.written_shared.fetch_add(slots, Relaxed);
            }
        } else {
            self.dropped.fetch_add(1, Relaxed);
        }
    }
}

/// What a writer thread's SIGUSR1 handler records with: the writer's device and counts, and
/// a writer id and sequence of its own.
struct Handler<'a> {
    dev: &'a Writer,
    counts: &'a Counts,
    writer: u64,
    seq: Cell<u64>,
    shared: bool,
}

thread_local! {
    /// The calling writer thread's [`Handler`], while it may receive signals.
    static HANDLER: Cell<*const Handler<'static>> = const { Cell::new(core::ptr::null()) };
}

/// SIGUSR1: notes whether the signal interrupted a restartable critical section, then
/// records an event (so the interrupted write resumes after another write to its ring).
extern "C" fn on_usr1(_: libc::c_int, _: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: errno is thread-local; it is restored before returning.
    let errno = unsafe { *libc::__errno_location() };
    // SAFETY: the third argument of a SA_SIGINFO handler.
    let in_section = rs::is_abort_address(unsafe { rs::interrupted_ip(context) });
    let h = HANDLER.with(Cell::get);
    // SAFETY: set by this thread to a Handler that outlives every signal sent to it (the
    // signalling thread stops before the writer clears it).
    if let Some(h) = unsafe { h.as_ref() } {
        h.counts.signals_handled.fetch_add(1, Relaxed);
        h.counts
            .signals_in_section
            .fetch_add(in_section as u64, Relaxed);
        let seq = h.seq.get();
        h.seq.set(seq + 1);
        let (ok, slots) = write_one(h.dev, h.writer, seq, h.shared);
        h.counts.add(ok, slots, h.shared);
        h.counts.handler_events.fetch_add(1, Relaxed);
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// One run's settings.
struct Run {
    name: &'static str,
    /// Slots to write (at least).
    entries: u64,
    /// Writer `w` (from 1) uses the shared rings if `shared(w)`.
    shared: fn(u64) -> bool,
    /// Whether writers are signalled and moved between CPUs.
    disturb: bool,
    /// Whether the run is about the restartable path (fails where this process cannot take
    /// it).
    needs_restartable: bool,
}

/// What a run found.
#[derive(Debug)]
struct Found {
    writers: u64,
    cores: usize,
    written: u64,
    dropped: u64,
    accepted: u64,
    snapshots: u64,
    mixed: u64,
    /// Slots written into restartable rings, and into shared ones (positions used).
    restartable_slots: u64,
    shared_slots: u64,
    /// Restartable rings' slots left holding the stores of an aborted section that did not
    /// commit on that ring.
    residue: u64,
    elapsed: Duration,
}

fn entries_or(default: u64) -> u64 {
    std::env::var("TTRACE_STRESS_ENTRIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn stress(run: &Run) -> Found {
    // Every CPU is busy: the other modules' tests wait (this module's three run together).
    let _turn = ttrace_tests::turn("stress");
    let entries = run.entries;
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let writers = (3 * cores).max(4) as u64;
    let cpus = rs::allowed_cpus();
    let tmp = tempfile::tempdir().unwrap();
    // A restartable ring for every CPU id this machine has, so no writer falls back for
    // want of one.
    let dev = Writer::open(&ttrace_tests::config(
        &tmp.path().join("dev"),
        4,
        devttrace::config::configured_cpus(),
    ))
    .unwrap();
    ttrace_core::cpu::detect();
    assert!(
        dev.restartable() || !run.needs_restartable,
        "{RSEQ_REQUIRED}"
    );
    if run.disturb {
        rs::install(libc::SIGUSR1, on_usr1);
    }

    let counts = Counts::default();
    let (accepted, mixed, snapshots) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let done = AtomicBool::new(false);
    let writing = AtomicU64::new(writers);
    // The writers' thread ids, published once each has set up its handler.
    let tids: Vec<AtomicU64> = (0..writers).map(|_| AtomicU64::new(0)).collect();
    // Writers, the signalling thread and the migrating thread: nobody leaves before every
    // signal and every move was made (so no thread id is signalled after its thread ended).
    let leave = Barrier::new(writers as usize + if run.disturb { 2 } else { 0 });
    let start = Instant::now();
    std::thread::scope(|s| {
        for r in 0..2 {
            let (dev, done, accepted, mixed, snapshots) =
                (&dev, &done, &accepted, &mixed, &snapshots);
            s.spawn(move || {
                let mut ring = r;
                while !done.load(Relaxed) {
                    let snap = dev
                        .device()
                        .mapping()
                        .ring(ring % dev.device().mapping().num_rings())
                        .reader()
                        .snapshot();
                    for e in &snap.events {
                        accepted.fetch_add(1, Relaxed);
                        if !whole(e) {
                            mixed.fetch_add(1, Relaxed);
                            eprintln!("MIXED ENTRY ACCEPTED: {e:?}");
                        }
                    }
                    snapshots.fetch_add(1, Relaxed);
                    ring += 1;
                }
            });
        }
        if run.disturb {
            let (counts, writing, tids, leave) = (&counts, &writing, &tids, &leave);
            // Signals each writer in turn, as fast as it can.
            s.spawn(move || {
                while writing.load(Acquire) > 0 {
                    for t in tids {
                        let tid = t.load(Acquire) as libc::pid_t;
                        if tid != 0 {
                            rs::signal_thread(tid, libc::SIGUSR1).expect("tgkill");
                            counts.signals_sent.fetch_add(1, Relaxed);
                        }
                    }
                }
                leave.wait();
            });
            let cpus = &cpus;
            // Moves each writer in turn: to one CPU, to another, to all of them.
            s.spawn(move || {
                let mut k = 0usize;
                while writing.load(Acquire) > 0 {
                    for t in tids {
                        let tid = t.load(Acquire) as libc::pid_t;
                        if tid != 0 {
                            let set = match k % 3 {
                                2 => cpus.clone(),
                                n => vec![cpus[(k / 3 + n) % cpus.len()]],
                            };
                            rs::set_affinity(tid, &set).expect("sched_setaffinity");
                            counts.moves_other.fetch_add(1, Relaxed);
                        }
                        k += 1;
                    }
                    // Moves cost the kernel more than signals: leave the writers some time.
                    std::thread::yield_now();
                }
                leave.wait();
            });
        }
        let writer_threads: Vec<_> = (1..=writers)
            .map(|w| {
                let (dev, counts, tids, leave, writing, cpus, accepted) =
                    (&dev, &counts, &tids, &leave, &writing, &cpus, &accepted);
                let (disturb, shared) = (run.disturb, (run.shared)(w));
                let must_land = run.disturb && run.needs_restartable;
                s.spawn(move || {
                    let handler = Handler {
                        dev,
                        counts,
                        writer: writers + w,
                        seq: Cell::new(0),
                        shared,
                    };
                    if disturb {
                        // The lifetime is erased: the handler is only reached while it lives.
                        let p: *const Handler<'_> = &handler;
                        HANDLER.with(|h| h.set(p.cast()));
                        tids[w as usize - 1].store(rs::gettid() as u64, Release);
                    }
                    let mut seq = 0;
                    let mut batch = 0usize;
                    // Until `entries` are written and what the run is to see while writers
                    // write has happened: a reader accepted an event; where writers are
                    // disturbed, one handled a signal and another thread moved one; where
                    // the run needs one, a signal landed inside a critical section. When
                    // each happens is up to the scheduler, so the run goes on until all have
                    // (up to 100 times as long, then the assertions below name what never
                    // happened).
                    let happened = || {
                        accepted.load(Relaxed) > 0
                            && (!disturb
                                || (counts.signals_handled.load(Relaxed) > 0
                                    && counts.moves_self.load(Relaxed) > 0
                                    && counts.moves_other.load(Relaxed) > 0))
                            && (!must_land || counts.signals_in_section.load(Relaxed) > 0)
                    };
                    let more = || {
                        let written = counts.written.load(Relaxed);
                        written < entries || (written < 100 * entries && !happened())
                    };
                    while more() {
                        for _ in 0..64 {
                            let (ok, slots) = write_one(dev, w, seq, shared);
                            counts.add(ok, slots, shared);
                            seq += 1;
                        }
                        if disturb && batch % 4 == 0 {
                            // Move itself: to a CPU, then to any.
                            let set = if batch % 8 == 0 {
                                vec![cpus[(batch / 8 + w as usize) % cpus.len()]]
                            } else {
                                cpus.clone()
                            };
                            rs::set_affinity(0, &set).expect("sched_setaffinity");
                            counts.moves_self.fetch_add(1, Relaxed);
                        }
                        batch += 1;
                    }
                    writing.fetch_sub(1, Release);
                    if disturb {
                        // Signals sent before the signalling thread got here are handled by
                        // the time this thread is out of the barrier.
                        leave.wait();
                        HANDLER.with(|h| h.set(core::ptr::null()));
                    }
                })
            })
            .collect();
        for t in writer_threads {
            t.join().unwrap();
        }
        done.store(true, Relaxed);
    });
    let elapsed = start.elapsed();

    // Quiescent now: the accounting must be exact.
    let n = dev.device().mapping().num_cpus() as usize;
    let slots = dev.device().mapping().ring_slots();
    let (mut restartable_slots, mut shared_slots, mut dropped_in_rings, mut residue) = (0, 0, 0, 0);
    for r in 0..dev.device().mapping().num_rings() {
        let snap = dev.device().mapping().ring(r).reader().snapshot();
        assert_eq!(
            snap.head,
            snap.skipped + snap.committed + snap.claimed + snap.lost,
            "ring {r}: {snap:?}"
        );
        assert!(snap.events.iter().all(whole), "ring {r}: a mixed entry");
        if r < n {
            // Every slot holds the entry of its latest position, but the one or two slots
            // at the head may hold the stores of the last section aborted on this ring that
            // was not tried again here (it was retried on another CPU, or gave up after
            // `TRIES` aborts): a claim, or an entry tagged with the position it did not
            // commit. Nobody wrote on this CPU since to overwrite them.
            assert_eq!(snap.skipped, 0, "ring {r}: {snap:?}");
            assert_eq!(snap.dropped, 0, "ring {r}: {snap:?}");
            assert_eq!(
                snap.committed + snap.claimed + snap.changed,
                snap.head.min(slots),
                "ring {r}: {snap:?}"
            );
            assert!(snap.claimed + snap.changed <= 2, "ring {r}: {snap:?}");
            residue += snap.claimed + snap.changed;
            restartable_slots += snap.head;
        } else {
            assert_eq!(snap.claimed, 0, "ring {r}: no writer is left inside a slot");
            shared_slots += snap.head - snap.skipped;
        }
        dropped_in_rings += snap.dropped;
    }
    let found = Found {
        writers,
        cores,
        written: counts.written.load(Relaxed),
        dropped: counts.dropped.load(Relaxed),
        accepted: accepted.load(Relaxed),
        snapshots: snapshots.load(Relaxed),
        mixed: mixed.load(Relaxed),
        restartable_slots,
        shared_slots,
        residue,
        elapsed,
    };
    println!(
        "stress ({}, {} path): {} writers on {} cores, {} entries written ({} with the shared protocol), \
         {} events dropped; rings: {} slots restartable, {} shared; {} events accepted by \
         readers in {} snapshots, {} mixed; {} signals sent, {} handled ({} inside a critical \
         section), {} events recorded by handlers; {} moves by writers, {} by another thread; \
         {} residue slots; {:?}",
        run.name,
        if dev.restartable() {
            "restartable"
        } else {
            "shared"
        },
        found.writers,
        found.cores,
        found.written,
        counts.written_shared.load(Relaxed),
        found.dropped,
        found.restartable_slots,
        found.shared_slots,
        found.accepted,
        found.snapshots,
        found.mixed,
        counts.signals_sent.load(Relaxed),
        counts.signals_handled.load(Relaxed),
        counts.signals_in_section.load(Relaxed),
        counts.handler_events.load(Relaxed),
        counts.moves_self.load(Relaxed),
        counts.moves_other.load(Relaxed),
        found.residue,
        found.elapsed,
    );
    assert_eq!(found.mixed, 0, "a mixed entry was accepted");
    assert_eq!(
        found.restartable_slots + found.shared_slots,
        found.written,
        "every committed slot is in a ring or counted lost"
    );
    assert!(
        found.shared_slots >= counts.written_shared.load(Relaxed),
        "what was written with the shared protocol is in shared rings"
    );
    assert_eq!(
        dropped_in_rings, found.dropped,
        "every dropped event is counted by its ring"
    );
    assert!(found.written >= entries);
    assert!(
        found.accepted > 0,
        "the readers saw entries while writers ran"
    );
    if run.disturb {
        let handled = counts.signals_handled.load(Relaxed);
        assert!(handled > 0, "the writers were signalled");
        assert_eq!(
            counts.handler_events.load(Relaxed),
            handled,
            "every handler recorded its event"
        );
        assert!(
            counts.moves_self.load(Relaxed) > 0 && counts.moves_other.load(Relaxed) > 0,
            "the writers were moved between CPUs"
        );
        assert!(
            !run.needs_restartable || counts.signals_in_section.load(Relaxed) > 0,
            "of {handled} signals none landed inside a restartable critical section"
        );
    }
    found
}

#[test]
fn lapped_rings_never_yield_a_mixed_entry_and_account_for_every_slot() {
    stress(&Run {
        name: "as they come",
        entries: entries_or(10_000_000),
        shared: |_| false,
        disturb: false,
        needs_restartable: false,
    });
}

/// Every writer on the restartable path, on more threads than CPUs, each moved between CPUs
/// while it writes, by itself and by another thread, and interrupted by signals in a tight
/// loop whose handler records an event into the same device: a write interrupted mid-section
/// restarts after the handler's write to its ring.
#[test]
fn restartable_writers_moved_between_cpus_and_signalled_mid_write_lose_and_mix_nothing() {
    let found = stress(&Run {
        name: "restartable, moved and signalled",
        entries: entries_or(1_000_000),
        shared: |_| false,
        disturb: true,
        needs_restartable: true,
    });
    assert!(
        found.restartable_slots > found.written / 2,
        "the writes took the restartable path: {found:?}"
    );
}

/// Half the writers on the shared rings (the fallback's atomic protocol), half on the
/// restartable path, all moved between CPUs and signalled (each handler writing on its
/// thread's path): the device reads back exactly.
#[test]
fn shared_and_restartable_writers_together_moved_and_signalled_lose_and_mix_nothing() {
    let found = stress(&Run {
        name: "shared and restartable, moved and signalled",
        entries: entries_or(1_000_000),
        shared: |w| w % 2 == 0,
        disturb: true,
        needs_restartable: true,
    });
    assert!(
        found.restartable_slots > 0 && found.shared_slots > 0,
        "both paths were taken: {found:?}"
    );
}
