//! Following a device live: each poll returns the events committed since the last one.
//!
//! Every slot's stamp strictly increases with each entry written to it, so remembering the
//! last stamp seen in each slot is exact: an entry is new if and only if its stamp is above
//! that mark. Nothing is repeated, and nothing is skipped unless it was overwritten before a
//! poll could read it, which the per-ring count of lost entries then includes.

use crate::text::{Item, Trace};
use ttrace_core::ring::{event_at, SlotRead};
use ttrace_core::Device;

/// Follows one device.
pub struct Follower<'d> {
    dev: &'d Device,
    /// Per ring, per slot: the highest stamp already reported.
    seen: Vec<Vec<u64>>,
    /// Per ring: `head - skipped` and claimed slots at the last poll.
    written: Vec<(u64, u64)>,
    /// Per ring: entries overwritten before they could be read, since following began.
    pub lost: Vec<u64>,
    /// Aux offset from which info messages are new.
    info_from: u64,
}

impl<'d> Follower<'d> {
    /// Starts following: what the device holds now counts as seen.
    pub fn new(dev: &'d Device) -> Follower<'d> {
        let mut f = Follower {
            dev,
            seen: (0..dev.num_rings())
                .map(|_| vec![0; dev.ring_slots() as usize])
                .collect(),
            written: vec![(0, 0); dev.num_rings()],
            lost: vec![0; dev.num_rings()],
            info_from: dev
                .header()
                .aux_last
                .load(std::sync::atomic::Ordering::Acquire),
        };
        let _ = f.poll_rings();
        f.lost.iter_mut().for_each(|l| *l = 0);
        f
    }

    /// The events committed since the last poll, in time order, with the info messages
    /// written since, ready to print.
    pub fn poll(&mut self) -> Trace {
        let items = self.poll_rings();
        let trace = Trace::with_items(self.dev, items, self.info_from);
        self.info_from = self.info_from.max(trace.aux.last);
        trace
    }

    fn poll_rings(&mut self) -> Vec<Item> {
        let mut items = Vec::new();
        for r in 0..self.dev.num_rings() {
            let ring = self.dev.ring(r);
            let n = ring.slots.len();
            let reads: Vec<SlotRead> = (0..n).map(|i| ring.read(i)).collect();
            let written = ring.head.load(std::sync::atomic::Ordering::Acquire)
                - ring.skipped.load(std::sync::atomic::Ordering::Acquire);
            let claimed = reads
                .iter()
                .filter(|r| matches!(r, SlotRead::Claimed(_)))
                .count() as u64;
            let seen = &mut self.seen[r];
            let mut fresh = 0u64;
            for (i, read) in reads.iter().enumerate() {
                let SlotRead::Committed(w) = *read else {
                    continue;
                };
                if w[0] <= seen[i] {
                    continue;
                }
                seen[i] = w[0];
                fresh += 1;
                if let Some((event, _)) = event_at(&reads, i) {
                    items.push(Item::Point { ring: r, event });
                }
            }
            let (was_written, was_claimed) = self.written[r];
            // Slots written since the last poll that are neither read now nor still being
            // written were overwritten first.
            let expected = (written - was_written) + was_claimed;
            self.lost[r] += expected.saturating_sub(fresh + claimed);
            self.written[r] = (written, claimed);
        }
        items
    }
}
