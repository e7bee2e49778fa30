//! The device header as a value (Akaros's `version` file), and its clock.

use crate::clock::Clock;
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
    /// The name of ring `index` (`cpu3`, `cpu3.shared`; see `ttrace_layouts::ring`).
    pub fn ring_name(&self, index: usize) -> String {
        ttrace_layouts::ring::ring_name(index, self.num_cpus)
    }

    /// The identity fields of a (checked) header.
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
