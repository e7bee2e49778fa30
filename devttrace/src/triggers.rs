//! The snapshot counters of the device header, and the claim that paces snapshots across
//! every process of the device.
//!
//! A program asks for a snapshot by a *trigger*; its saver decides, per trigger, whether a
//! snapshot already coming covers it (*merged*), or it is granted: at once, or, within an
//! interval of the last snapshot, *put off* to one interval after it (the rate allows one
//! snapshot per interval; the one put off holds the trigger's moment if the rings keep an
//! interval of history, so a slow request is never left out by the rate alone). Granting is
//! a claim on the one word `last_snapshot_at`: a compare-and-swap from the value the saver
//! read to the grant's time — the trigger's, if at least the interval passed since that
//! value, else that value plus the interval. Two savers (in two processes, or two threads)
//! that race cannot both win the same time: the loser reads the winner's, and is put off
//! after it, or finds it still to come (at or after its own trigger) and is covered by it.
//! The counters only grow, by one `fetch_add` each, so `stats` shows exact totals however
//! many processes trigger.

use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use ttrace_layouts::device::DeviceHeader;

/// What became of triggers and snapshots, as the device header counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SnapshotCounts {
    /// Triggers (each asks for a snapshot).
    pub triggers: u64,
    /// Of those, covered by a snapshot already coming.
    pub merged: u64,
    /// Of those, put off by the rate policy to one interval after the last snapshot.
    pub put_off: u64,
    /// Snapshots saved.
    pub saved: u64,
    /// Snapshots that could not be saved.
    pub failed: u64,
    /// Snapshot files removed by the retention limits.
    pub removed: u64,
    /// When the last snapshot was granted (device clock; 0: never).
    pub last_at: u64,
}

/// A counter of [`SnapshotCounts`] that a saver adds to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// [`SnapshotCounts::triggers`].
    Triggers,
    /// [`SnapshotCounts::merged`].
    Merged,
    /// [`SnapshotCounts::put_off`].
    PutOff,
    /// [`SnapshotCounts::saved`].
    Saved,
    /// [`SnapshotCounts::failed`].
    Failed,
    /// [`SnapshotCounts::removed`].
    Removed,
}

/// The counters of `h` now.
pub fn counts(h: &DeviceHeader) -> SnapshotCounts {
    // Relaxed: independent counters, each exact on its own; nothing is read through them.
    let load = |w: &core::sync::atomic::AtomicU64| w.load(Relaxed);
    SnapshotCounts {
        triggers: load(&h.triggers),
        merged: load(&h.triggers_merged),
        put_off: load(&h.triggers_put_off),
        saved: load(&h.snapshots_saved),
        failed: load(&h.snapshots_failed),
        removed: load(&h.snapshots_removed),
        last_at: load(&h.last_snapshot_at),
    }
}

/// Adds `n` to `counter` of `h`.
pub(crate) fn add(h: &DeviceHeader, counter: Counter, n: u64) {
    let word = match counter {
        Counter::Triggers => &h.triggers,
        Counter::Merged => &h.triggers_merged,
        Counter::PutOff => &h.triggers_put_off,
        Counter::Saved => &h.snapshots_saved,
        Counter::Failed => &h.snapshots_failed,
        Counter::Removed => &h.snapshots_removed,
    };
    // Relaxed: a counter; the read-modify-write alone keeps it exact.
    word.fetch_add(n, Relaxed);
}

/// What a claim for a snapshot got (`claim`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grant {
    /// A snapshot now: at least the interval passed since the last one.
    Now,
    /// A snapshot at this time (device clock), one interval after the last one: the
    /// trigger came sooner.
    At(u64),
    /// None: a snapshot granted for a time at or after the trigger's (still to come, or
    /// claimed by a saver whose clock read later) covers it.
    Covered,
}

/// Claims a snapshot for a trigger at `now` (device clock): at `now` if none was granted in
/// the `interval` ticks before it, else at one interval after the last grant (put off),
/// unless a grant at or after `now` already covers it. `last_snapshot_at` then holds the
/// grant's time.
///
/// `latest` is the latest time a grant can have been made for: the clock when the claim is
/// made (and some slack) plus an interval (a grant put off lies up to an interval ahead). A
/// last grant later than that was made by no clock of this device — a damaged word, or a
/// grant of an earlier boot whose clock has restarted since (small again on a machine just
/// booted) — so it counts as none, instead of holding back every trigger until the clock
/// catches up with it.
pub(crate) fn claim(h: &DeviceHeader, now: u64, interval: u64, latest: u64) -> Grant {
    // Acquire/AcqRel: the word is the only state of the protocol, and the CAS decides on
    // it alone; the orderings only keep a grant after the grant it measured from.
    let mut last = h.last_snapshot_at.load(Acquire);
    loop {
        let made = last != 0 && last <= latest;
        let (grant, next) = match made {
            false => (Grant::Now, now),
            // A grant at or after this trigger's time: it holds the trigger's moment.
            true if last >= now && interval > 0 => return Grant::Covered,
            true if now.saturating_sub(last) >= interval => (Grant::Now, now.max(last)),
            true => {
                let at = last.saturating_add(interval);
                (Grant::At(at), at)
            }
        };
        match h
            .last_snapshot_at
            .compare_exchange_weak(last, next, AcqRel, Acquire)
        {
            Ok(_) => return grant,
            Err(seen) => last = seen,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ttrace_layouts::entry::Stamp;
    use zerocopy::FromZeros;

    /// A claim made when the clock reads no more than this.
    const LATEST: u64 = 1 << 40;

    #[test]
    fn a_claim_is_granted_once_per_interval_and_one_sooner_put_off() {
        let h = DeviceHeader::new_zeroed();
        assert_eq!(claim(&h, 1_000, 100, LATEST), Grant::Now);
        // Sooner: put off to an interval after the last; then covered by that one.
        assert_eq!(claim(&h, 1_050, 100, LATEST), Grant::At(1_100));
        assert_eq!(claim(&h, 1_099, 100, LATEST), Grant::Covered);
        assert_eq!(claim(&h, 1_100, 100, LATEST), Grant::Covered);
        assert_eq!(claim(&h, 1_150, 100, LATEST), Grant::At(1_200));
        assert_eq!(claim(&h, 1_300, 100, LATEST), Grant::Now);
        // A late trigger, older than the last grant: covered, the grant stays.
        assert_eq!(claim(&h, 900, 100, LATEST), Grant::Covered);
        assert_eq!(counts(&h).last_at, 1_300);
        // No interval: every trigger is granted.
        assert_eq!(claim(&h, 1_300, 0, LATEST), Grant::Now);
    }

    #[test]
    fn claims_near_the_start_of_the_clock_and_after_an_impossible_grant() {
        // A machine just booted: the first trigger, at a tiny time, is granted, and the
        // interval is measured from it.
        let h = DeviceHeader::new_zeroed();
        assert_eq!(claim(&h, 2, 1_000_000, 10), Grant::Now);
        assert_eq!(claim(&h, 900_000, 1_000_000, 900_010), Grant::At(1_000_002));
        assert_eq!(claim(&h, 2_000_002, 1_000_000, 2_000_010), Grant::Now);
        // A last grant no clock of the device has reached (a damaged word near the top, or
        // a grant of an earlier boot's clock, far above this boot's): no grant at all.
        // (Relaxed stores here: this thread alone uses the header.)
        for impossible in [u64::MAX, Stamp::CLAIMED - 2, 1 << 50] {
            let h = DeviceHeader::new_zeroed();
            h.last_snapshot_at.store(impossible, Relaxed);
            assert_eq!(claim(&h, 5_000, 1_000, 7_000), Grant::Now, "{impossible}");
            assert_eq!(counts(&h).last_at, 5_000);
            assert_eq!(claim(&h, 5_500, 1_000, 7_000), Grant::At(6_000));
        }
        // A grant just after the trigger, by a saver whose clock read later: covered.
        let h = DeviceHeader::new_zeroed();
        h.last_snapshot_at.store(5_100, Relaxed);
        assert_eq!(claim(&h, 5_000, 1_000, 7_000), Grant::Covered);
        assert_eq!(counts(&h).last_at, 5_100);
    }

    #[test]
    fn racing_claims_grant_one() {
        let h = DeviceHeader::new_zeroed();
        let granted = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for t in 0..1_000u64 {
                        if claim(&h, 10 + t, 1_000_000, LATEST) != Grant::Covered {
                            granted.fetch_add(1, Relaxed);
                        }
                    }
                });
            }
        });
        // One now, and one put off an interval after it; every other trigger is covered.
        assert_eq!(granted.load(Relaxed), 2);
    }
}
