//! What a reader that prints counters reads (`ttrace-reader stats`): the counts of every
//! ring and aux buffer, with no copy of the trace held, so that the memory it takes does not
//! grow with the device.
//!
//! Each ring is scanned in place ([`Ring::walk`](crate::ring::Ring::walk)) with the checks of every read,
//! the pages of its mapping given back as the scan passes them; each event is counted by its
//! tracepoint, and its string arguments are looked up in the aux buffers' extents. Each aux
//! buffer is copied in turn and only its extent kept ([`AuxExtent`]): which offsets held
//! records. The counts are those a [`View`](crate::View) of the device would give at the
//! same moment.

use crate::aux::{AuxExtent, AuxSnapshots};
use crate::error::Result;
use crate::event::{Counted, Event, RingSnapshot};
use crate::meta::Metadata;
use crate::reader::Reader;
use crate::status::Status;
use crate::version::Version;
use crate::walk::{Keep, Visitor};
use ttrace_layouts::aux::{aux_ref_parts, full_offset};

/// The counts of a device (see the module documentation).
pub struct Counts {
    /// The device's directory (or snapshot file).
    pub dir: std::path::PathBuf,
    /// The header.
    pub version: Version,
    /// Counters.
    pub status: Status,
    /// Definitions and names.
    pub meta: Metadata,
    /// By tracepoint id: whether it is enabled.
    pub enabled: Vec<bool>,
    /// Per ring.
    pub rings: Vec<RingCounts>,
    /// Per aux buffer (one per ring).
    pub aux: Vec<AuxExtent>,
    /// Why some aux buffer could not be copied, if one could not (its strings count as
    /// lost).
    pub aux_error: Option<String>,
    /// No aux records: what a reader that only counts holds of them.
    pub no_records: AuxSnapshots,
}

/// The counts of one ring.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RingCounts {
    /// What a snapshot counts; `events.len()` is the number of events.
    pub counts: RingSnapshot<Counted>,
    /// The stamps of its oldest and newest event.
    pub span: Option<(u64, u64)>,
    /// Events by tracepoint id (ids beyond the definitions in the last place).
    pub by_tracepoint: Vec<u64>,
    /// String arguments of its events whose aux record was not held.
    pub strings_lost: u64,
}

impl Counts {
    /// Counts the device `dev` (see the module documentation).
    pub fn of(dev: &Reader) -> Result<Counts> {
        let map = dev.map();
        let (mut aux, mut aux_error) = (Vec::with_capacity(dev.cpus()), None);
        for b in 0..dev.cpus() {
            match map.aux(b).extent_releasing(|w| map.release_aux_words(b, w)) {
                Ok(x) => aux.push(x),
                Err(e) => {
                    aux_error = Some(e.to_string());
                    aux.push(AuxExtent::default());
                }
            }
        }
        let meta = dev.metadata();
        // By id: the string arguments, and the last place for ids with no definition.
        let mut strings = vec![0u16; meta.tracepoints.len() + 1];
        for t in &meta.tracepoints {
            if let Some(s) = strings.get_mut(t.id as usize) {
                *s = t.string_args();
            }
        }
        // A damaged event (`crate::damage`) is counted, not counted as an event; its strings
        // are not looked up here (the extents are).
        let check = dev.check(&meta, None);
        let mut rings = Vec::with_capacity(dev.cpus());
        for r in 0..dev.cpus() {
            let ring = dev.ring(r)?;
            let mut tally = Tally {
                ring: RingCounts {
                    by_tracepoint: vec![0; strings.len()],
                    ..RingCounts::default()
                },
                strings: &strings,
                aux: &aux,
                release: |slots| map.release_slots(r, slots),
            };
            let keep = Keep {
                newer_than: 0,
                cleared: dev.cleared(r),
                sound: |e: &Event| check.sound(r, e),
            };
            let mut counts = ring.walk(&keep, &mut tally);
            check.settle(r, &mut counts);
            rings.push(RingCounts {
                counts,
                ..tally.ring
            });
        }
        drop(check);
        dev.check_intact()?;
        Ok(Counts {
            dir: dev.dir().to_path_buf(),
            version: dev.version(),
            status: dev.status(),
            enabled: dev.enabled_all(&meta),
            meta,
            rings,
            aux,
            aux_error,
            no_records: AuxSnapshots::default(),
        })
    }
}

/// What a ring's scan counts as it goes.
struct Tally<'a, F> {
    ring: RingCounts,
    strings: &'a [u16],
    aux: &'a [AuxExtent],
    release: F,
}

impl<F: FnMut(core::ops::Range<usize>)> Visitor for Tally<'_, F> {
    #[inline]
    fn event(&mut self, e: &Event) {
        let id = (e.type_word.tracepoint() as usize).min(self.strings.len() - 1);
        self.ring.by_tracepoint[id] += 1;
        let span = self.ring.span.get_or_insert((e.stamp, e.stamp));
        *span = (span.0.min(e.stamp), span.1.max(e.stamp));
        let strings = self.strings[id];
        if strings != 0 {
            let args = e.args();
            for (i, &w) in args.iter().enumerate() {
                if strings & (1 << i) != 0 && !held(self.aux, w) {
                    self.ring.strings_lost += 1;
                }
            }
        }
    }

    #[inline]
    fn done(&mut self, slots: core::ops::Range<usize>) {
        (self.release)(slots)
    }
}

/// Whether the aux record the argument word `w` refers to was held.
fn held(aux: &[AuxExtent], w: u64) -> bool {
    aux_ref_parts(w)
        .and_then(|(b, low)| aux.get(b).map(|x| x.holds(full_offset(low, x.last))))
        .unwrap_or(false)
}
