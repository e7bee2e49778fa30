//! The entry protocol under real threads: more writers than cores on tiny rings that lap
//! constantly, readers copying concurrently, every entry self-checking.
//!
//! `TTRACE_STRESS_ENTRIES` sets the number of entries (slots) written; the default, run in CI,
//! is 10 million.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use ttrace_core::ring::Event;
use ttrace_core::Device;
use ttrace_layouts::entry::{Kind, TypeWord};
use ttrace_tests::mix;

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

fn write_one(dev: &Device, writer: u64, seq: u64) -> (bool, u64) {
    let ctx = writer << 32 | seq;
    let nargs = SHAPES[(seq % 3) as usize];
    let word = TypeWord::new(Kind::Entry, nargs as u8, writer as u16).0;
    let a = |i: u64| mix(writer, seq, i);
    let ok = match nargs {
        1 => dev.emit(word, ctx, &[a(0)]),
        5 => dev.emit(word, ctx, &[a(0), a(1), a(2), a(3), a(4)]),
        _ => dev.emit(
            word,
            ctx,
            &core::array::from_fn::<u64, 12, _>(|i| a(i as u64)),
        ),
    };
    (ok, slots_of(nargs))
}

#[test]
fn lapped_rings_never_yield_a_mixed_entry_and_account_for_every_slot() {
    let entries: u64 = std::env::var("TTRACE_STRESS_ENTRIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let writers = (3 * cores).max(4) as u64;
    let tmp = tempfile::tempdir().unwrap();
    let dev = Device::open(&ttrace_tests::config(&tmp.path().join("dev"), 4, 2)).unwrap();
    ttrace_core::cpu::detect();

    let written_slots = AtomicU64::new(0);
    let dropped_events = AtomicU64::new(0);
    let (accepted, mixed, snapshots) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        for r in 0..2 {
            let (dev, done, accepted, mixed, snapshots) =
                (&dev, &done, &accepted, &mixed, &snapshots);
            s.spawn(move || {
                let mut ring = r;
                while !done.load(Relaxed) {
                    let snap = dev.ring(ring % dev.num_rings()).snapshot();
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
        let writer_threads: Vec<_> = (1..=writers)
            .map(|w| {
                let (dev, written_slots, dropped_events) = (&dev, &written_slots, &dropped_events);
                s.spawn(move || {
                    let mut seq = 0;
                    while written_slots.load(Relaxed) < entries {
                        for _ in 0..64 {
                            let (ok, slots) = write_one(dev, w, seq);
                            if ok {
                                written_slots.fetch_add(slots, Relaxed);
                            } else {
                                dropped_events.fetch_add(1, Relaxed);
                            }
                            seq += 1;
                        }
                    }
                })
            })
            .collect();
        for t in writer_threads {
            t.join().unwrap();
        }
        done.store(true, Relaxed);
    });

    // Quiescent now: the accounting must be exact.
    let (mut positions_used, mut dropped_in_rings) = (0, 0);
    for r in 0..dev.num_rings() {
        let snap = dev.ring(r).snapshot();
        assert_eq!(snap.claimed, 0, "no writer is left inside a slot");
        assert_eq!(
            snap.head,
            snap.skipped + snap.committed + snap.lost,
            "ring {r}: {snap:?}"
        );
        assert!(snap.events.iter().all(whole));
        positions_used += snap.committed + snap.lost;
        dropped_in_rings += snap.dropped;
    }
    let (written, dropped) = (written_slots.load(Relaxed), dropped_events.load(Relaxed));
    println!(
        "stress: {writers} writers on {cores} cores, {written} entries written, {dropped} events dropped, \
         {} events accepted by readers in {} snapshots, {} mixed",
        accepted.load(Relaxed),
        snapshots.load(Relaxed),
        mixed.load(Relaxed)
    );
    assert_eq!(mixed.load(Relaxed), 0, "a mixed entry was accepted");
    assert_eq!(
        positions_used, written,
        "every committed slot is in a ring or counted lost"
    );
    assert_eq!(
        dropped_in_rings, dropped,
        "every dropped event is counted by its ring"
    );
    assert!(written >= entries);
    assert!(
        accepted.load(Relaxed) > 0,
        "the readers saw entries while writers ran"
    );
}
