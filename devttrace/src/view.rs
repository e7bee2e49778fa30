//! A device read for formatting: every ring copied fast at one cut, then indexed.

use crate::aux::AuxSnapshots;
use crate::copy::RingCopy;
use crate::error::Result;
use crate::event::{Event, Mark, RingSnapshot};
use crate::meta::Metadata;
use crate::parallel::each_ring;
use crate::reader::Reader;
use crate::status::Status;
use crate::version::Version;
use crate::walk::Keep;

/// A whole device read once, to be formatted at leisure: what `dump`, `report` and the
/// exports read.
///
/// Each ring of a live device is copied first ([`RingCopy`]: one read of each slot in use,
/// with the stamp check, oldest first, the mapping's pages let go as the copy goes), then
/// indexed once the metadata is copied: where each complete and sound event is, in time
/// order (a damaged one, see [`crate::damage`], is counted instead). Formatting reads the events from
/// the copies, so none of them can be overwritten in between however busy the writers are,
/// and the ring's bytes are in this process once. A snapshot file's image is read in place
/// (nothing changes it). The aux buffers are copied after the rings, and the metadata after
/// them, so every string and tracepoint an entry refers to was written before its copy.
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
    pub cpus: Vec<RingSnapshot<Mark>>,
    /// The aux buffer.
    pub aux: AuxSnapshots,
    /// Why the aux buffer could not be copied, if it could not (strings then show as lost).
    pub aux_error: Option<String>,
    /// Each ring's copy (none for a snapshot file's image, read in place).
    copies: Vec<Option<RingCopy>>,
}

impl<'d> View<'d> {
    /// Every ring of `dev` copied and indexed (keeping only the events stamped after
    /// `timestamp`), then the aux buffers and the metadata copied.
    pub fn of(dev: &'d Reader, timestamp: u64) -> Result<View<'d>> {
        View::read(dev, timestamp, None)
    }

    /// [`View::of`] of the rings `rings` alone (the others are left empty) and without the
    /// aux buffers: strings are checked only for their form, and show as lost. What a
    /// reader of one CPU's entries needs (a mounted `cpuN`), at the cost of those rings.
    pub fn of_rings(dev: &'d Reader, timestamp: u64, rings: &[usize]) -> Result<View<'d>> {
        View::read(dev, timestamp, Some(rings))
    }

    fn read(dev: &'d Reader, timestamp: u64, only: Option<&[usize]>) -> Result<View<'d>> {
        let wanted = |n: usize| only.is_none_or(|o| o.contains(&n));
        let map = dev.map();
        let rings = (0..dev.cpus())
            .map(|n| dev.ring(n))
            .collect::<Result<Vec<_>>>()?;
        let slots = (rings.iter().enumerate())
            .filter(|&(n, _)| wanted(n))
            .map(|(_, r)| r.slot_count())
            .sum();
        // The rings copied side by side: sooner done, and nearer to one cut.
        let copies = each_ring(rings.len(), slots, |n| match map.is_image() || !wanted(n) {
            false => Some(RingCopy::of(&rings[n], |slots| map.release_slots(n, slots))),
            true => None,
        });
        let (aux, aux_error) = match only {
            None => dev.aux_or_empty(),
            Some(_) => (AuxSnapshots::default(), None),
        };
        dev.check_intact()?;
        let meta = dev.metadata();
        // Indexed once every event's tracepoint and string was copied: a damaged event
        // (`crate::damage`) is counted, not indexed.
        let check = dev.check(&meta, only.is_none().then_some(&aux));
        let cpus = each_ring(copies.len(), slots, |n| {
            if !wanted(n) {
                return RingSnapshot::<Mark>::default();
            }
            let keep = Keep {
                newer_than: timestamp,
                cleared: dev.cleared(n),
                sound: |e: &Event| check.sound(n, e),
            };
            let mut index = match &copies[n] {
                Some(copy) => copy.walk(&keep),
                None => map.ring(n).walk(&keep, &mut ()),
            };
            // What a snapshot's damaged extents left out of the ring: damaged, not lost.
            check.settle(n, &mut index);
            index
        });
        drop(check);
        Ok(View {
            dev,
            version: dev.version(),
            status: dev.status(),
            enabled: dev.enabled_all(&meta),
            meta,
            cpus,
            aux,
            aux_error,
            copies,
        })
    }

    /// The device read.
    pub fn reader(&self) -> &'d Reader {
        self.dev
    }

    /// The event at `mark` of ring `cpu` (a mark of [`View::cpus`]).
    #[inline]
    pub fn event(&self, cpu: usize, mark: Mark) -> Option<Event> {
        match &self.copies[cpu] {
            Some(copy) => copy.event(mark),
            None => self.dev.map().ring(cpu).event(mark),
        }
    }

    /// The events of ring `cpu`, oldest first.
    pub fn events(&self, cpu: usize) -> impl Iterator<Item = Event> + '_ {
        self.cpus[cpu]
            .events
            .iter()
            .filter_map(move |&m| self.event(cpu, m))
    }
}
