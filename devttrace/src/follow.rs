//! Following a device live: each poll returns exactly the events committed since the last.
//!
//! Every slot's stamp strictly increases with each entry written to it, so remembering the
//! last stamp seen in each slot is exact: an entry is new if and only if its stamp is above
//! that mark. Nothing is repeated, and nothing is skipped unless it was overwritten before a
//! poll could read it, which the per-ring count of lost entries then includes. (A single
//! "newer than the last timestamp" filter is not exact: a writer preempted between reading
//! the clock and committing commits an older stamp after newer ones.)
//!
//! Losses are counted per ring from positions: every position reserved since following
//! began (`head - skipped`, read *before* the slots are scanned) is an entry that was seen,
//! is being written (its slot claimed), or was overwritten unseen. One case looks like a
//! loss and is not: a writer that has reserved its position and not yet claimed its slot.
//! It is rare and resolves within instants, so a loss is reported only when two consecutive
//! polls agree on it: one poll late, and never for an entry that then shows up.

use crate::device::Device;
use crate::error::Result;
use crate::snapshot::Snapshot;
use std::sync::atomic::Ordering::Acquire;
use ttrace_core::ring::{event_at, RingSnapshot, SlotRead};

/// Follows one device.
pub struct Follower<'d> {
    dev: &'d Device,
    /// Per ring, per slot: the highest stamp already reported.
    seen: Vec<Vec<u64>>,
    /// Per ring: the loss accounting.
    rings: Vec<Losses>,
    /// Aux offset from which messages are new.
    messages_from: u64,
}

/// The loss accounting of one ring.
#[derive(Clone, Copy, Default)]
struct Losses {
    /// `head - skipped - claimed` when following began.
    base: u64,
    /// Entries reported as new since following began.
    seen: u64,
    /// Unaccounted positions at the last poll.
    last_estimate: u64,
    /// Losses reported so far.
    reported: u64,
}

/// What one poll found.
pub struct Poll {
    /// The new events (in `cpus[n].events`, in time order) and messages, with the device's
    /// current metadata and aux buffer to decode them.
    pub snapshot: Snapshot,
    /// Per ring: entries found overwritten before they could be read, since the last poll
    /// (see the module documentation for why a loss is reported one poll late).
    pub lost: Vec<u64>,
}

impl<'d> Follower<'d> {
    /// Starts following: what the device holds now counts as seen.
    pub fn new(dev: &'d Device) -> Follower<'d> {
        let mut f = Follower {
            dev,
            seen: vec![vec![0; dev.version().ring_slots as usize]; dev.cpus()],
            rings: vec![Losses::default(); dev.cpus()],
            messages_from: dev.core().header().aux_last.load(Acquire),
        };
        for r in 0..dev.cpus() {
            let (snap, _) = f.poll_ring(r);
            f.rings[r] = Losses {
                base: (snap.head - snap.skipped).saturating_sub(snap.claimed),
                ..Losses::default()
            };
        }
        f
    }

    /// The events committed and the messages written since the last poll.
    pub fn poll(&mut self) -> Result<Poll> {
        let mut cpus = Vec::with_capacity(self.dev.cpus());
        let mut lost = Vec::with_capacity(self.dev.cpus());
        for r in 0..self.dev.cpus() {
            let (snap, l) = self.poll_ring(r);
            cpus.push(snap);
            lost.push(l);
        }
        let aux = self.dev.aux()?;
        let meta = self.dev.metadata();
        let snapshot = Snapshot {
            dir: self.dev.dir().to_path_buf(),
            version: self.dev.version(),
            status: self.dev.status(),
            enabled: (0..meta.tracepoints.len() as u16)
                .map(|id| self.dev.enabled(id))
                .collect(),
            meta,
            cpus,
            messages_from: self.messages_from,
            aux,
        };
        self.messages_from = self.messages_from.max(snapshot.aux.last);
        Ok(Poll { snapshot, lost })
    }

    /// The new events of ring `r`, and how many entries were lost since the last poll.
    fn poll_ring(&mut self, r: usize) -> (RingSnapshot, u64) {
        let ring = self.dev.core().ring(r);
        // Before the scan: every position below was reserved before any slot was read.
        let mut snap = RingSnapshot {
            head: ring.head.load(Acquire),
            skipped: ring.skipped.load(Acquire),
            dropped: ring.dropped.load(Acquire),
            ..RingSnapshot::default()
        };
        let reads: Vec<SlotRead> = (0..ring.slots.len()).map(|i| ring.read(i)).collect();
        let seen = &mut self.seen[r];
        for (i, read) in reads.iter().enumerate() {
            match *read {
                SlotRead::Claimed(_) => snap.claimed += 1,
                SlotRead::Changed => snap.changed += 1,
                SlotRead::Committed(w) if w[0] > seen[i] => {
                    seen[i] = w[0];
                    snap.committed += 1;
                    if let Some((event, _)) = event_at(&reads, i) {
                        snap.events.push(event);
                    }
                }
                _ => {}
            }
        }
        snap.events.sort_by_key(|e| e.stamp);
        let l = &mut self.rings[r];
        l.seen += snap.committed;
        // Positions reserved since following began, neither seen nor being written. Entries
        // reserved after `head` was read but seen in the scan make this smaller, never larger.
        let estimate = (snap.head - snap.skipped)
            .saturating_sub(l.base)
            .saturating_sub(l.seen + snap.claimed);
        let confirmed = estimate.min(l.last_estimate);
        let lost = confirmed.saturating_sub(l.reported);
        l.reported += lost;
        l.last_estimate = estimate;
        (snap, lost)
    }
}
