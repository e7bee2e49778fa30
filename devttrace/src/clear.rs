//! Clearing a device (`ttrace-reader clear`, ftrace's `echo > trace`): readers stop showing
//! what was recorded before, without any store into a slot or an aux buffer.
//!
//! A clear publishes a timestamp, `cleared_at`, in the device header; readers leave out every
//! entry and message stamped at or before it. It also records each ring's counters as they
//! were, so that the counts readers report start from the clear. Writers never read any of
//! these words, so a clear cannot disturb a write in progress, and readers select entries by
//! their stamp, which the ring protocols already validate (`docs/DESIGN.md`, *Clearing*).

use crate::lock::Guard;
use core::sync::atomic::Ordering::SeqCst;
use ttrace_layouts::device::DeviceHeader;
use ttrace_layouts::ring::RingHeader;

/// What the device's last clear left for readers (`ttrace-reader clear`; DESIGN.md,
/// *Clearing*): entries stamped at or before `at` are no longer shown, and the counts
/// start from the ring's counters as they were at the clear. All zero: never cleared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cleared {
    /// The clear's timestamp: every entry stamped at or before it is cleared.
    pub at: u64,
    /// The ring's `head` when it was cleared (read after `at` was taken).
    pub head: u64,
    /// The ring's `skipped` at the clear.
    pub skipped: u64,
    /// The ring's `dropped` at the clear.
    pub dropped: u64,
}

impl Cleared {
    /// What the last clear of the device `h` left for the ring whose header is `ring`.
    pub fn of(h: &DeviceHeader, ring: &RingHeader) -> Cleared {
        // SeqCst, ring words before `cleared_at`: see `clear`.
        let head = ring.clear_head.load(SeqCst);
        let skipped = ring.clear_skipped.load(SeqCst);
        let dropped = ring.clear_dropped.load(SeqCst);
        Cleared {
            at: cleared_at(h),
            head,
            skipped,
            dropped,
        }
    }
}

/// The timestamp of the last clear of the device `h` (0: never cleared).
pub fn cleared_at(h: &DeviceHeader) -> u64 {
    h.cleared_at.load(SeqCst)
}

/// The number of clears of the device `h` so far.
pub fn clears(h: &DeviceHeader) -> u64 {
    h.clears.load(SeqCst)
}

/// Clears the device whose header is `h` and whose rings' headers are `rings` (the first
/// `cpus` restartable), at `now` or later: from then on readers show only entries and
/// messages stamped after the clear, and count losses from it. The caller holds the
/// metadata lock (`_guard`): one clear at a time, and none during a control change, since
/// two clears interleaving their stores could leave a ring's words from the older one.
/// Nothing in the rings or the aux buffers is written, so it is safe while writers run; a
/// writer that read the clock before the clear and commits after it has its event cleared
/// too. Returns the number of clears so far (this one included).
pub(crate) fn clear<'a>(
    _guard: &Guard<'_>,
    h: &DeviceHeader,
    rings: impl Iterator<Item = &'a RingHeader> + Clone,
    cpus: usize,
    now: u64,
) -> u64 {
    // The clear's time: now, or later if a restartable ring already holds a later stamp
    // (its stamps are raised above `last_stamp`, and another CPU's clock may run a few
    // ticks ahead), so that nothing committed before this point is stamped after it.
    let at = rings
        .clone()
        .take(cpus)
        .map(|rh| rh.last_stamp.load(SeqCst))
        .fold(now, u64::max);
    // The rings' words first, then `cleared_at` (all SeqCst): a reader loads them in the
    // opposite order (`Cleared::of`), so if it sees this clear's ring words it also sees
    // its `cleared_at`; the reverse mix (new `cleared_at`, old ring words) only makes its
    // `lost` count err high.
    for rh in rings {
        rh.clear_skipped.store(rh.skipped.load(SeqCst), SeqCst);
        rh.clear_dropped.store(rh.dropped.load(SeqCst), SeqCst);
        rh.clear_head.store(rh.head.load(SeqCst), SeqCst);
    }
    h.cleared_at.fetch_max(at, SeqCst);
    h.clears.fetch_add(1, SeqCst) + 1
}
