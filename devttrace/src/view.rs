//! A device read in two passes: an index now, the events when they are used.

use crate::device::{Device, Status};
use crate::version::Version;
use std::cell::Cell;
use ttrace_core::aux::AuxSnapshot;
use ttrace_core::meta::Metadata;
use ttrace_core::ring::{Event, Mark, RingIndex};

/// Like a [`crate::Snapshot`], but each ring is an index (where each complete event is, in
/// time order) and an event is copied from the ring only when asked for, with the same
/// stamp check. It needs 16 bytes per event instead of 128: what a reader that formats a
/// whole device once (`dump`) wants.
///
/// An event overwritten between the index and its copy is not returned, and is counted in
/// [`View::vanished`]; nothing else differs from a snapshot.
pub struct View<'d> {
    dev: &'d Device,
    /// The header.
    pub version: Version,
    /// Counters and control words.
    pub status: Status,
    /// Definitions and names.
    pub meta: Metadata,
    /// Whether each tracepoint (by id) was enabled.
    pub enabled: Vec<bool>,
    /// One index per ring.
    pub cpus: Vec<RingIndex>,
    /// The aux buffer.
    pub aux: AuxSnapshot,
    vanished: Vec<Cell<u64>>,
}

impl<'d> View<'d> {
    pub(crate) fn new(dev: &'d Device, cpus: Vec<RingIndex>, aux: AuxSnapshot) -> View<'d> {
        let meta = dev.metadata();
        View {
            dev,
            version: dev.version(),
            status: dev.status(),
            enabled: (0..meta.tracepoints.len() as u16)
                .map(|id| dev.enabled(id))
                .collect(),
            meta,
            vanished: cpus.iter().map(|_| Cell::new(0)).collect(),
            cpus,
            aux,
        }
    }

    /// The device.
    pub fn device(&self) -> &'d Device {
        self.dev
    }

    /// The event at `mark` of ring `cpu`, if the ring still holds it.
    #[inline]
    pub fn event(&self, cpu: usize, mark: Mark) -> Option<Event> {
        let e = self.dev.core().ring(cpu).event(mark);
        if e.is_none() {
            self.vanished[cpu].set(self.vanished[cpu].get() + 1);
        }
        e
    }

    /// The events of ring `cpu`, oldest first.
    pub fn events(&self, cpu: usize) -> impl Iterator<Item = Event> + '_ {
        self.cpus[cpu]
            .events
            .iter()
            .filter_map(move |&m| self.event(cpu, m))
    }

    /// Events of ring `cpu` indexed but overwritten before they were copied.
    pub fn vanished(&self, cpu: usize) -> u64 {
        self.vanished[cpu].get()
    }
}
