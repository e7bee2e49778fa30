//! The device header as a value (Akaros's `version` file), and its clock.

use ttrace_layouts::device::{ClockSource, DeviceHeader};

/// The identity of a device: layout versions, sizes, and clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Version {
    /// Layout version of the header (major << 16 | minor).
    pub header_version: u32,
    /// Layout version of the aux and metadata files.
    pub shared_data_version: u32,
    /// Layout version of the rings and entries.
    pub percpu_data_version: u32,
    /// Rings (`cpu0` ..).
    pub num_cpus: u32,
    /// Slots per ring.
    pub ring_slots: u64,
    /// Bytes of the aux buffer.
    pub aux_size: u64,
    /// Bytes of the metadata file.
    pub meta_size: u64,
    /// Capacity of the tracepoint table.
    pub max_tracepoints: u32,
    /// Process that created the device.
    pub creator_pid: u32,
    /// The clock of every timestamp.
    pub clock: Clock,
}

impl Version {
    /// The identity fields of a (checked) header.
    /// The name of ring `index` (`cpu3`, `cpu3.shared`; see `ttrace_layouts::ring`).
    pub fn ring_name(&self, index: usize) -> String {
        ttrace_layouts::ring::ring_name(index, self.num_cpus)
    }

    pub fn of(h: &DeviceHeader) -> Version {
        Version {
            header_version: h.header_version,
            shared_data_version: h.shared_data_version,
            percpu_data_version: h.percpu_data_version,
            num_cpus: h.num_cpus,
            ring_slots: h.ring_slots,
            aux_size: h.aux_size,
            meta_size: h.meta_size,
            max_tracepoints: h.max_tracepoints,
            creator_pid: h.creator_pid,
            clock: Clock::new(
                ClockSource::from_raw(h.clock).unwrap_or(ClockSource::MonotonicNs),
                h.tsc_hz,
                h.anchor_tsc,
                h.anchor_realtime_ns,
            ),
        }
    }
}

/// Converts timestamps to time: the clock's rate and an anchor (a timestamp read at a known
/// wall-clock time, when the device was created).
///
/// ```
/// use devttrace::Clock;
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
