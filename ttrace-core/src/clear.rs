//! Clearing a device (`ttrace-reader clear`, ftrace's `echo > trace`): readers stop showing
//! what was recorded before, without any store into a slot or an aux buffer.
//!
//! A clear publishes a timestamp, `cleared_at`, in the device header; readers leave out every
//! entry and message stamped at or before it. It also records each ring's counters as they
//! were, so that the counts readers report start from the clear. Writers never read any of
//! these words, so a clear cannot disturb a write in progress, and readers select entries by
//! their stamp, which the ring protocols already validate (see DESIGN.md, *Clearing*).

use crate::error::{Error, Result};
use crate::lock::lock;
use crate::ring::Cleared;
use crate::Device;
use core::sync::atomic::Ordering::SeqCst;

impl Device {
    /// Clears the device: from now on readers show only entries and messages stamped after
    /// this moment, and count losses from here. Nothing in the rings or the aux buffers is
    /// written, so it is safe while writers run; a writer that read the clock before the
    /// clear and commits after it has its event cleared too. Returns the number of clears so
    /// far (this one included). Needs a device attached read-write.
    pub fn clear(&self) -> Result<u64> {
        if self.access() == crate::device::Access::ReadOnly {
            return Err(Error::ReadOnly(self.dir().to_path_buf()));
        }
        let h = self.header();
        // One clear at a time (and none during a control change): two clears interleaving
        // their stores could leave a ring's words from the older one.
        let _guard = lock(&h.meta_lock).ok_or(Error::Reentered)?;
        // The clear's time: now, or later if a restartable ring already holds a later stamp
        // (its stamps are raised above `last_stamp`, and another CPU's clock may run a few
        // ticks ahead), so that nothing committed before this point is stamped after it.
        let at = (0..self.num_cpus() as usize)
            .map(|r| self.ring_header(r).last_stamp.load(SeqCst))
            .fold(self.now(), u64::max);
        // The rings' words first, then `cleared_at` (all SeqCst): a reader loads them in the
        // opposite order (`cleared`), so if it sees this clear's ring words it also sees its
        // `cleared_at`; the reverse mix (new `cleared_at`, old ring words) only makes its
        // `lost` count err high.
        for r in 0..self.num_rings() {
            let rh = self.ring_header(r);
            rh.clear_skipped.store(rh.skipped.load(SeqCst), SeqCst);
            rh.clear_dropped.store(rh.dropped.load(SeqCst), SeqCst);
            rh.clear_head.store(rh.head.load(SeqCst), SeqCst);
        }
        h.cleared_at.fetch_max(at, SeqCst);
        Ok(h.clears.fetch_add(1, SeqCst) + 1)
    }

    /// What the last clear left for ring `index` ([`Cleared::default`] if never cleared).
    pub fn cleared(&self, index: usize) -> Cleared {
        let rh = self.ring_header(index);
        // SeqCst, ring words before `cleared_at`: see `clear`.
        let head = rh.clear_head.load(SeqCst);
        let skipped = rh.clear_skipped.load(SeqCst);
        let dropped = rh.clear_dropped.load(SeqCst);
        Cleared {
            at: self.cleared_at(),
            head,
            skipped,
            dropped,
        }
    }

    /// The timestamp of the last clear (0: never cleared).
    pub fn cleared_at(&self) -> u64 {
        self.header().cleared_at.load(SeqCst)
    }

    /// The number of clears so far.
    pub fn clears(&self) -> u64 {
        self.header().clears.load(SeqCst)
    }
}
