//! Timestamps: the invariant TSC on x86-64, `CLOCK_MONOTONIC` elsewhere; the calibration a
//! device stores when it is created, and the conversion of its timestamps to time
//! ([`Clock`]).
//!
//! Measured on the project's machines (AMD EPYC, KVM; `cargo run --release -p
//! ttrace-benches --bin hotpath`): `rdtsc` ≈ 12 ns, `rdtscp` ≈ 24 ns, `lfence; rdtsc` ≈ 24 ns,
//! `clock_gettime(CLOCK_MONOTONIC)` ≈ 35 ns. A plain `rdtsc` is the cheapest correct source:
//! it is not ordered with the surrounding instructions, which can shift a timestamp by a few
//! cycles but never breaks the entry protocol (stamps are made strictly increasing per slot
//! independently of the clock).

use std::time::Duration;
use ttrace_layouts::device::ClockSource;

/// Reads the time-stamp counter.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn rdtsc() -> u64 {
    // SAFETY: `rdtsc` is available on every x86-64 CPU and has no memory effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Nanoseconds of a `clock_gettime` clock.
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock ids used here always exist.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `CLOCK_MONOTONIC` in nanoseconds.
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// `CLOCK_REALTIME` in nanoseconds since the Unix epoch.
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// Whether this CPU advertises an invariant TSC (constant rate in all power states), which is
/// what makes TSC values comparable across CPUs and over time.
pub fn invariant_tsc() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{__cpuid, CpuidResult};
        // SAFETY: `cpuid` exists on every x86_64 CPU and only reads; leaf 0x8000_0007 is
        // asked only where the CPU says it has it. (`__cpuid` is a safe function since Rust
        // 1.87; the block keeps the crate building with its `rust-version`.)
        #[allow(unused_unsafe)]
        let cpuid = |leaf: u32| -> CpuidResult { unsafe { __cpuid(leaf) } };
        let max_ext = cpuid(0x8000_0000).eax;
        max_ext >= 0x8000_0007 && cpuid(0x8000_0007).edx & (1 << 8) != 0
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The clock a new device should use on this machine.
pub fn best_source() -> ClockSource {
    if cfg!(target_arch = "x86_64") && invariant_tsc() {
        ClockSource::Tsc
    } else {
        ClockSource::MonotonicNs
    }
}

/// Reads `source` now.
#[inline(always)]
pub fn now(source: ClockSource) -> u64 {
    match source {
        #[cfg(target_arch = "x86_64")]
        ClockSource::Tsc => rdtsc(),
        _ => monotonic_ns(),
    }
}

/// A clock's rate and an anchor tying its values to wall-clock time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Calibration {
    /// Ticks per second.
    pub hz: u64,
    /// A clock value...
    pub anchor_ticks: u64,
    /// ...and `CLOCK_REALTIME` at the same moment...
    pub anchor_realtime_ns: u64,
    /// ...and `CLOCK_MONOTONIC` at the same moment.
    pub anchor_monotonic_ns: u64,
}

/// Reads `source` and another clock at (almost) the same moment: the clock read that is
/// bracketed most tightly by two `source` reads, out of a few tries.
fn paired(source: ClockSource, other: impl Fn() -> u64) -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..16 {
        let a = now(source);
        let o = other();
        let b = now(source);
        if b >= a && b - a < best.0 {
            best = (b - a, a + (b - a) / 2, o);
        }
    }
    (best.1, best.2)
}

/// Measures the rate of `source` against `CLOCK_MONOTONIC` over `window`, and takes the
/// anchor pair. For [`ClockSource::MonotonicNs`] the rate is exactly 1e9.
pub fn calibrate(source: ClockSource, window: Duration) -> Calibration {
    let (t0, m0) = paired(source, monotonic_ns);
    let hz = if source == ClockSource::MonotonicNs {
        1_000_000_000
    } else {
        std::thread::sleep(window);
        let (t1, m1) = paired(source, monotonic_ns);
        let (dt, dm) = (
            t1.saturating_sub(t0) as u128,
            m1.saturating_sub(m0).max(1) as u128,
        );
        (dt * 1_000_000_000 / dm).max(1) as u64
    };
    let (anchor_ticks, anchor_realtime_ns) = paired(source, realtime_ns);
    let (_, anchor_monotonic_ns) = paired(source, monotonic_ns);
    Calibration {
        hz,
        anchor_ticks,
        anchor_realtime_ns,
        anchor_monotonic_ns,
    }
}

/// Converts timestamps to time: the clock's rate and an anchor (a timestamp read at a known
/// wall-clock time, when the device was created).
///
/// ```
/// use devttrace::clock::Clock;
/// use ttrace_layouts::device::ClockSource;
/// // A 2.5 GHz counter that read 1000 at 2023-11-14T22:13:20Z.
/// let c = Clock::new(ClockSource::Tsc, 2_500_000_000, 1000, 1_700_000_000_000_000_000);
/// assert_eq!(c.since_anchor_ns(1000 + 2_500_000_000), 1_000_000_000);
/// assert_eq!(c.realtime_ns(1000 + 5), 1_700_000_000_000_000_002);
/// assert_eq!(c.since_anchor_ns(0), -400);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clock {
    /// Where timestamps come from.
    pub source: ClockSource,
    /// Ticks per second.
    pub hz: u64,
    /// A timestamp...
    pub anchor_ticks: u64,
    /// ...and the wall-clock time at that moment, in ns since the Unix epoch.
    pub anchor_realtime_ns: u64,
    /// `2^64 * 1e9 / hz`, rounded: ns = ticks * mult >> 64, without a division.
    mult: u128,
}

impl Clock {
    /// A clock of `hz` ticks per second (0 is taken as 1), anchored as given.
    pub fn new(source: ClockSource, hz: u64, anchor_ticks: u64, anchor_realtime_ns: u64) -> Clock {
        let hz = hz.max(1);
        let mult = ((1_000_000_000u128 << 64) + hz as u128 / 2) / hz as u128;
        Clock {
            source,
            hz,
            anchor_ticks,
            anchor_realtime_ns,
            mult,
        }
    }

    /// Nanoseconds for a number of ticks, to within a nanosecond (rounded to the nearest,
    /// but for a rounding error of the multiplier below 2^-64 relative).
    #[inline]
    pub fn ticks_to_ns(&self, ticks: u64) -> u64 {
        match (ticks as u128)
            .checked_mul(self.mult)
            .and_then(|p| p.checked_add(1 << 63))
        {
            // Rounded to the nearest nanosecond: the error of `mult` is below 2^-64 relative.
            Some(p) => (p >> 64) as u64,
            None => {
                let (s, r) = (ticks / self.hz, ticks % self.hz);
                let frac = (r as u128 * 1_000_000_000 + self.hz as u128 / 2) / self.hz as u128;
                s.saturating_mul(1_000_000_000).saturating_add(frac as u64)
            }
        }
    }

    /// Ticks for a number of nanoseconds (rounded down).
    pub fn ns_to_ticks(&self, ns: u64) -> u64 {
        (ns as u128 * self.hz as u128 / 1_000_000_000).min(u64::MAX as u128) as u64
    }

    /// Nanoseconds from the anchor (the device's creation) to `ticks`, saturating at the
    /// ends of `i64` (about 292 years either way).
    #[inline]
    pub fn since_anchor_ns(&self, ticks: u64) -> i64 {
        let ns = |d: u64| i64::try_from(self.ticks_to_ns(d)).unwrap_or(i64::MAX);
        if ticks >= self.anchor_ticks {
            ns(ticks - self.anchor_ticks)
        } else {
            -ns(self.anchor_ticks - ticks)
        }
    }

    /// Wall-clock time of `ticks`, in nanoseconds since the Unix epoch.
    pub fn realtime_ns(&self, ticks: u64) -> u64 {
        self.anchor_realtime_ns
            .saturating_add_signed(self.since_anchor_ns(ticks))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibrated_rate_converts_ticks_to_elapsed_time() {
        let source = best_source();
        let cal = calibrate(source, Duration::from_millis(20));
        // Each pair read as the calibration reads its own (bracketed, the tightest of a few
        // tries), so that a preemption between the two reads of a pair cannot skew it.
        let (t0, m0) = paired(source, monotonic_ns);
        std::thread::sleep(Duration::from_millis(30));
        let (t1, m1) = paired(source, monotonic_ns);
        let predicted_ns = (t1 - t0) as u128 * 1_000_000_000 / cal.hz as u128;
        let actual_ns = (m1 - m0) as u128;
        // Within 1 %: the calibration window is short, but the rate must be right.
        assert!(
            predicted_ns.abs_diff(actual_ns) * 100 < actual_ns,
            "{predicted_ns} vs {actual_ns}"
        );
    }
}
