//! Timestamps: the invariant TSC on x86-64, `CLOCK_MONOTONIC` elsewhere.
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
        use core::arch::x86_64::__cpuid;
        let max_ext = __cpuid(0x8000_0000).eax;
        max_ext >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibrated_rate_converts_ticks_to_elapsed_time() {
        let source = best_source();
        let cal = calibrate(source, Duration::from_millis(20));
        let (t0, m0) = (now(source), monotonic_ns());
        std::thread::sleep(Duration::from_millis(30));
        let (t1, m1) = (now(source), monotonic_ns());
        let predicted_ns = (t1 - t0) as u128 * 1_000_000_000 / cal.hz as u128;
        let actual_ns = (m1 - m0) as u128;
        // Within 1 %: the calibration window is short, but the rate must be right.
        assert!(
            predicted_ns.abs_diff(actual_ns) * 100 < actual_ns,
            "{predicted_ns} vs {actual_ns}"
        );
    }
}
