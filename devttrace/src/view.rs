//! A device read in two passes: an index now, the events when they are used.

use crate::aux::AuxSnapshots;
use crate::error::Result;
use crate::event::{Event, Mark, RingIndex};
use crate::meta::Metadata;
use crate::reader::Reader;
use crate::status::Status;
use crate::version::Version;
use std::cell::Cell;

/// Like a [`crate::Snapshot`], but each ring is an index (where each complete event is, in
/// time order) and an event is copied from the ring only when asked for, with the same
/// stamp check. It needs 16 bytes per event instead of 128: what a reader that formats a
/// whole device once (`dump`) wants.
///
/// An event overwritten between the index and its copy is not returned, and its slots are
/// counted in [`View::vanished`]; nothing else differs from a snapshot.
pub struct View<'d> {
    dev: &'d Reader,
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
    pub aux: AuxSnapshots,
    /// Why the aux buffer could not be copied, if it could not (strings then show as lost).
    pub aux_error: Option<String>,
    vanished: Vec<Cell<u64>>,
}

impl<'d> View<'d> {
    /// Every ring of `dev` indexed (keeping only the events stamped after `timestamp`),
    /// then the aux buffers and the metadata copied.
    pub fn of(dev: &'d Reader, timestamp: u64) -> Result<View<'d>> {
        let cpus = (0..dev.cpus())
            .map(|n| Ok(dev.ring(n)?.index_cleared(timestamp, dev.cleared(n))))
            .collect::<Result<Vec<_>>>()?;
        let (aux, aux_error) = dev.aux_or_empty();
        dev.check_intact()?;
        let meta = dev.metadata();
        Ok(View {
            dev,
            version: dev.version(),
            status: dev.status(),
            enabled: dev.enabled_all(&meta),
            meta,
            vanished: cpus.iter().map(|_| Cell::new(0)).collect(),
            cpus,
            aux,
            aux_error,
        })
    }

    /// The device read.
    pub fn reader(&self) -> &'d Reader {
        self.dev
    }

    /// The event at `mark` of ring `cpu`, if the ring still holds it.
    #[inline]
    pub fn event(&self, cpu: usize, mark: Mark) -> Option<Event> {
        let e = self.dev.mapping().ring(cpu).event(mark);
        // Slots lost since the index: the whole event, or its continuation.
        let gone = match &e {
            None => 1 + mark.continued as u64,
            Some(e) => (mark.continued && e.continuation_lost) as u64,
        };
        if gone > 0 {
            self.vanished[cpu].set(self.vanished[cpu].get() + gone);
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

    /// Slots of ring `cpu` indexed but overwritten before they were copied (an event with a
    /// continuation takes two).
    pub fn vanished(&self, cpu: usize) -> u64 {
        self.vanished[cpu].get()
    }
}
