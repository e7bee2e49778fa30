//! Following a device live: each poll returns exactly the events committed since the last.
//!
//! Every slot's stamp strictly increases with each entry written to it, so remembering the
//! last stamp seen in each slot is exact: an entry is new if and only if its stamp is above
//! that mark. Nothing is repeated, and nothing is skipped unless it was overwritten before a
//! poll could read it, which the per-ring count of lost entries then includes. (A single
//! "newer than the last timestamp" filter is not exact: a writer preempted between reading
//! the clock and committing commits an older stamp after newer ones.)
//!
//! Losses are counted per ring from positions. Every position reserved before a poll began
//! (`W = head - skipped`, read after the previous poll's scan) holds an entry that has been
//! seen, is being written (its slot is claimed), or was overwritten unseen. So at each poll
//! `W_prev - base - seen - claimed` is a lower bound of the losses so far (entries seen in
//! this poll may have positions above `W_prev`, which only makes it smaller) and it is exact
//! once the writers pause. The one case it can count wrongly: a writer that reserved its
//! position before the previous poll and still had not claimed its slot when this one
//! scanned (preempted for a whole poll interval between two adjacent instructions).

use crate::device::Device;
use crate::error::Result;
use crate::snapshot::Snapshot;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering::Acquire;
use ttrace_core::ring::{
    event_at, holds_position, restartable_position, Mark, RingSnapshot, SlotRead,
};
use ttrace_layouts::entry::Stamp;

/// Follows one device.
pub struct Follower<'d> {
    dev: &'d Device,
    /// Per ring, per slot: the highest stamp already reported.
    seen: Vec<Vec<u64>>,
    /// Per ring: the loss accounting.
    rings: Vec<Losses>,
    /// Per aux buffer, the offset from which messages may be new: the first record that was
    /// still being written at the last poll, or the end of the buffer.
    messages_from: Vec<u64>,
    /// Messages `(buffer, offset)` at or after their buffer's `messages_from` already
    /// reported.
    messages_done: BTreeSet<(u32, u64)>,
}

/// The loss accounting of one ring.
#[derive(Clone, Copy, Default)]
struct Losses {
    /// `head - skipped - claimed` after the first scan.
    base: u64,
    /// Slots seen (and reported) since then.
    seen: u64,
    /// `head - skipped` read after the last scan.
    reserved: u64,
    /// Losses reported so far.
    reported: u64,
}

/// What one poll found.
pub struct Poll {
    /// The new events (in `cpus[n].events`, in time order) and messages
    /// ([`Snapshot::messages`]), with the device's current metadata and aux buffer to
    /// decode them.
    pub snapshot: Snapshot,
    /// Per ring: entries found overwritten before they could be read, since the last poll
    /// (found one poll late: see the module documentation).
    pub lost: Vec<u64>,
}

/// `head - skipped` of ring `r` now (saturating: `skipped` is bumped before `head` when a
/// writer moves past a slot it could not claim, and a damaged device may hold anything).
fn reserved(dev: &Device, r: usize) -> u64 {
    let ring = dev.core().ring(r);
    let head = ring.head.load(Acquire);
    head.saturating_sub(ring.skipped.load(Acquire))
}

impl<'d> Follower<'d> {
    /// Starts following: what the device holds now counts as seen.
    pub fn new(dev: &'d Device) -> Follower<'d> {
        let mut f = Follower {
            dev,
            seen: vec![vec![0; dev.version().ring_slots as usize]; dev.cpus()],
            rings: vec![Losses::default(); dev.cpus()],
            messages_from: (0..dev.cpus())
                .map(|r| dev.core().ring_header(r).aux_last.load(Acquire))
                .collect(),
            messages_done: BTreeSet::new(),
        };
        for r in 0..dev.cpus() {
            let claimed = f.scan(r).claimed;
            // Read after the scan: every entry it saw has a position below.
            let w = reserved(dev, r);
            f.rings[r] = Losses {
                base: w.saturating_sub(claimed),
                reserved: w,
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
            let snap = self.scan(r);
            let l = &mut self.rings[r];
            l.seen += snap.committed;
            let estimate = l
                .reserved
                .saturating_sub(l.base)
                .saturating_sub(l.seen + snap.claimed);
            lost.push(estimate.saturating_sub(l.reported));
            l.reported = l.reported.max(estimate);
            l.reserved = reserved(self.dev, r);
            cpus.push(snap);
        }
        // A busy aux buffer (overwritten faster than it can be copied) must not lose the
        // events already taken from the rings: they are returned, their strings unresolved.
        let (aux, aux_error) = match self.dev.aux() {
            Ok(aux) => (aux, None),
            Err(e) => (Default::default(), Some(e.to_string())),
        };
        let meta = self.dev.metadata();
        self.dev.check_intact()?;
        let mut snapshot = Snapshot {
            dir: self.dev.dir().to_path_buf(),
            version: self.dev.version(),
            status: self.dev.status(),
            enabled: self.dev.enabled_all(&meta),
            meta,
            cpus,
            messages_from: self.messages_from.clone(),
            messages_done: Vec::new(),
            aux,
            aux_error,
        };
        if snapshot.aux_error.is_none() {
            snapshot.messages_done = self.messages_done.iter().copied().collect();
            let fresh: Vec<(u32, u64)> =
                snapshot.messages().map(|r| (r.buffer, r.offset)).collect();
            self.messages_done.extend(fresh);
            // Messages still being written are looked at again next time.
            for (b, aux) in snapshot.aux.buffers.iter().enumerate() {
                let from = aux.first_incomplete.unwrap_or(aux.last);
                self.messages_from[b] = self.messages_from[b].max(from);
            }
            let from = &self.messages_from;
            self.messages_done
                .retain(|&(b, off)| off >= from.get(b as usize).copied().unwrap_or(0));
        }
        Ok(Poll { snapshot, lost })
    }

    /// The new events of ring `r` (its counts: slots newly seen as `committed`, and
    /// `claimed`).
    fn scan(&mut self, r: usize) -> RingSnapshot {
        let ring = self.dev.core().ring(r);
        let n = ring.slots.len();
        // A restartable ring's parents are accepted only with their position's tag
        // (`ttrace_core::ring`).
        let h1 = ring.head.load(Acquire);
        let reads: Vec<SlotRead> = (0..n).map(|i| ring.read(i)).collect();
        let mut snap = RingSnapshot::default();
        let seen = &mut self.seen[r];
        for (i, read) in reads.iter().enumerate() {
            if ring.restartable
                && matches!(read, SlotRead::Committed(w) if !Stamp(w[0]).is_continuation())
                && !restartable_position(n, i, h1).is_some_and(|p| holds_position(read, p))
            {
                continue;
            }
            match *read {
                SlotRead::Claimed(_) => snap.claimed += 1,
                SlotRead::Changed => snap.changed += 1,
                SlotRead::Committed(w) if w[0] > seen[i] => {
                    seen[i] = w[0];
                    snap.committed += 1;
                    let Some((mut event, _)) = event_at(&reads, i) else {
                        continue;
                    };
                    if event.continuation_lost {
                        // The continuation may have been committed after its slot was read
                        // (slot 0 is read before slot n-1): read both again.
                        let mark = Mark {
                            stamp: w[0],
                            slot: i as u32,
                            continued: true,
                        };
                        if let Some(again) = ring.event(mark).filter(|e| !e.continuation_lost) {
                            event = again;
                            let j = (i + 1) % n;
                            if seen[j] < w[0] | 1 {
                                seen[j] = w[0] | 1;
                                snap.committed += 1;
                            }
                        }
                    }
                    snap.events.push(event);
                }
                _ => {}
            }
        }
        snap.events.sort_by_key(|e| e.stamp);
        snap
    }
}
