//! A snapshot's damaged extents: bytes whose checksum did not match (a flipped bit on a
//! disk, a bad copy), left out of the image, and what that does to each part of the device.
//!
//! Leaving bytes out must never make the image say something the device did not: every
//! part is left as a reader reads a part that holds *less*, never *other* things.
//!
//! - **Slots** are marked as overwritten while copied ([`Stamp::CHANGED`]): a reader counts
//!   them lost (and [`crate::damage`] moves them to damaged), and an event whose
//!   continuation was there is damaged, not shown without it.
//! - **A ring's header page** holds the ring's `head`, without which no slot can be placed:
//!   the whole ring is left out (its identity fields are rebuilt from the device header,
//!   so the image still opens; its slots are emptied and counted as damaged), and so are
//!   its aux buffer's records (their `first` and `last` were in the same page).
//! - **Aux bytes** read as zeros: the walk of that buffer stops at them ("a damaged
//!   record"), and an event whose string is no longer found there is damaged.
//! - **The metadata header** is rebuilt from the device header (it is derived from it).
//! - **Tracepoint records** and **names** read as zeros: the walk stops there; the events
//!   of a tracepoint whose definition is lost, or whose argument's value table is, and
//!   those of a thread whose name is lost, are damaged.
//! - **The tracepoint word table** reads as zeros: every tracepoint shows as disabled.
//!
//! The device header (extent 0), the snapshot's header page and the extents' heads are not
//! left out: without them nothing can be placed, and opening the file fails.

use core::ops::Range;
use ttrace_layouts::device::DeviceHeader;
use ttrace_layouts::entry::{Stamp, SLOT_BYTES};
use ttrace_layouts::meta::{MetaHeader, META_HEADER_BYTES};
use ttrace_layouts::ring::{num_rings, ring_file_bytes, ring_name, RingHeader, RING_HEADER_BYTES};
use ttrace_layouts::snapshot::Layout;
use zerocopy::{FromBytes, IntoBytes};

/// What the bytes of a damaged extent were part of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    /// The header page of ring `ring` (named `name`): the ring is left out, with the
    /// `dropped` slots that held something, and its aux buffer's records.
    RingHeader {
        /// The ring's index.
        ring: usize,
        /// Its name (`cpu1`, `cpu0.shared`).
        name: String,
        /// Slots it held that were left out.
        dropped: u64,
    },
    /// Slots of a ring, by index.
    Slots {
        /// The ring's index.
        ring: usize,
        /// Its name.
        name: String,
        /// The slots.
        slots: Range<u64>,
    },
    /// Bytes of a ring's aux buffer, by offset in the buffer.
    Aux {
        /// The ring's index.
        ring: usize,
        /// Its name.
        name: String,
        /// The bytes.
        bytes: Range<u64>,
    },
    /// The metadata header (rebuilt: it follows from the device header).
    MetaHeader,
    /// The tracepoint word table: which tracepoints were enabled.
    TracepointWords,
    /// Tracepoint definitions and value tables.
    Records,
    /// Thread and process names.
    Names,
    /// Bytes between parts, which hold nothing.
    Padding,
}

impl core::fmt::Display for Part {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Part::RingHeader { name, dropped, .. } => write!(
                f,
                "the header of ring {name}: the ring ({dropped} slots) and its aux buffer are \
                 left out"
            ),
            Part::Slots { name, slots, .. } => {
                write!(f, "ring {name}, slots {}..{}", slots.start, slots.end)
            }
            Part::Aux { name, bytes, .. } => write!(
                f,
                "aux buffer of ring {name}, bytes {}..{}",
                bytes.start, bytes.end
            ),
            Part::MetaHeader => f.write_str("the metadata header, rebuilt"),
            Part::TracepointWords => {
                f.write_str("the tracepoint table: tracepoints show as disabled")
            }
            Part::Records => f.write_str("tracepoint definitions"),
            Part::Names => f.write_str("thread and process names"),
            Part::Padding => f.write_str("unused bytes"),
        }
    }
}

/// An extent of a snapshot file whose bytes did not match their checksum: left out of the
/// image, as the [module](self) says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DamagedExtent {
    /// Its number in the file (extent 0 is the device header).
    pub index: u64,
    /// Where its head is in the file.
    pub offset: u64,
    /// The image bytes it covered.
    pub image: Range<u64>,
    /// What those bytes were part of.
    pub parts: Vec<Part>,
}

/// `extent 7 (ring cpu1, slots 128..192)`.
impl core::fmt::Display for DamagedExtent {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "extent {} (", self.index)?;
        for (i, p) in self.parts.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{p}")?;
        }
        f.write_str(")")
    }
}

/// Where the parts of an image of a device with header `h` lie.
struct Parts<'a> {
    h: &'a DeviceHeader,
    layout: &'a Layout,
    rings: usize,
    ring_len: u64,
}

impl Parts<'_> {
    /// The parts `range` (image offsets) covers, in order.
    fn of(&self, range: Range<u64>) -> Vec<Part> {
        let mut out = Vec::new();
        let mut at = range.start;
        while at < range.end {
            let (part, end) = self.at(at, range.end);
            out.push(part);
            at = end.max(at + 8);
        }
        out
    }

    /// The part image offset `at` is in, as far as it goes before `until`, and where that
    /// piece ends.
    fn at(&self, at: u64, until: u64) -> (Part, u64) {
        let (l, h) = (self.layout, self.h);
        let name = |r: usize| ring_name(r, h.num_cpus);
        if at >= l.rings_at && at < l.aux_at {
            let r = ((at - l.rings_at) / l.ring_stride) as usize;
            let base = l.rings_at + r as u64 * l.ring_stride;
            let header = base + RING_HEADER_BYTES as u64;
            if at < header {
                let part = Part::RingHeader {
                    ring: r,
                    name: name(r),
                    dropped: 0,
                };
                return (part, header.min(until));
            }
            let slots_end = base + self.ring_len;
            if at < slots_end {
                let end = slots_end.min(until);
                let slot = SLOT_BYTES as u64;
                let slots = (at - header) / slot..(end - header).div_ceil(slot);
                let part = Part::Slots {
                    ring: r,
                    name: name(r),
                    slots,
                };
                return (part, end);
            }
            return (Part::Padding, (base + l.ring_stride).min(until));
        }
        let aux_end = l.aux_at + h.aux_size * self.rings as u64;
        if at >= l.aux_at && at < aux_end {
            let r = ((at - l.aux_at) / h.aux_size) as usize;
            let buffer = l.aux_at + r as u64 * h.aux_size;
            let end = (buffer + h.aux_size).min(until);
            let part = Part::Aux {
                ring: r,
                name: name(r),
                bytes: at - buffer..end - buffer,
            };
            return (part, end);
        }
        let meta_end = l.meta_at + h.meta_size;
        if at >= l.meta_at && at < meta_end {
            let records = l.meta_at + ttrace_layouts::meta::records_offset(h.max_tracepoints);
            let names = l.meta_at + ttrace_layouts::meta::split(h.max_tracepoints, h.meta_size).1;
            let (part, end) = if at < l.meta_at + META_HEADER_BYTES {
                (Part::MetaHeader, l.meta_at + META_HEADER_BYTES)
            } else if at < records {
                (Part::TracepointWords, records)
            } else if at < names {
                (Part::Records, names)
            } else {
                (Part::Names, meta_end)
            };
            return (part, end.min(until));
        }
        let next = [l.rings_at, l.aux_at, l.meta_at]
            .into_iter()
            .find(|&p| p > at)
            .unwrap_or(until);
        (Part::Padding, next.min(until))
    }
}

/// Merges `piece` into the last part of `parts` when both are of the same kind and ring
/// (consecutive slots, or bytes, of one ring), else appends it.
fn merge(parts: &mut Vec<Part>, piece: Part) {
    match (parts.last_mut(), piece) {
        (
            Some(Part::Slots {
                ring: a, slots: s, ..
            }),
            Part::Slots {
                ring: b, slots: t, ..
            },
        ) if *a == b && s.end == t.start => s.end = t.end,
        (
            Some(Part::Aux {
                ring: a, bytes: s, ..
            }),
            Part::Aux {
                ring: b, bytes: t, ..
            },
        ) if *a == b && s.end == t.start => s.end = t.end,
        (Some(last), piece) if *last == piece && !matches!(piece, Part::Slots { .. }) => {}
        (_, piece) => parts.push(piece),
    }
}

/// Leaves the extents `damaged` (their number, where their heads are in the file, and the
/// image ranges they covered, all checked to lie within `image` past its device header) out
/// of `image`, the image of a device with the checked header `h` laid out as `layout`, as
/// the [module](self) says; returns them, named.
pub(crate) fn leave_out(
    image: &mut [u8],
    h: &DeviceHeader,
    layout: &Layout,
    damaged: &[(u64, u64, Range<u64>)],
) -> Vec<DamagedExtent> {
    let rings = num_rings(h.num_cpus);
    let parts = Parts {
        h,
        layout,
        rings,
        ring_len: ring_file_bytes(h.ring_slots),
    };
    let ring_at = |r: usize| (layout.rings_at + r as u64 * layout.ring_stride) as usize;
    let mut dropped_rings = Vec::new();
    let mut out = Vec::with_capacity(damaged.len());
    for (index, offset, range) in damaged {
        image[range.start as usize..range.end as usize].fill(0);
        let mut named = Vec::new();
        for part in parts.of(range.clone()) {
            match &part {
                Part::Slots { ring, slots, .. } => {
                    // Whole slots, though only part of one may have been in the extent:
                    // marked overwritten, as a reader's copy marks a slot that changed.
                    let at = ring_at(*ring) + RING_HEADER_BYTES;
                    let (from, to) = (slots.start as usize, slots.end as usize);
                    for slot in image[at + from * SLOT_BYTES..at + to * SLOT_BYTES]
                        .chunks_exact_mut(SLOT_BYTES)
                    {
                        slot.fill(0);
                        slot[..8].copy_from_slice(&Stamp::CHANGED.0.to_ne_bytes());
                    }
                }
                Part::RingHeader { ring, .. } => dropped_rings.push(*ring),
                Part::MetaHeader => {
                    let at = layout.meta_at as usize;
                    image[at..at + META_HEADER_BYTES as usize].copy_from_slice(
                        MetaHeader::new(h.max_tracepoints, h.meta_size).as_bytes(),
                    );
                }
                Part::Aux { .. }
                | Part::TracepointWords
                | Part::Records
                | Part::Names
                | Part::Padding => {}
            }
            merge(&mut named, part);
        }
        out.push(DamagedExtent {
            index: *index,
            offset: *offset,
            image: range.clone(),
            parts: named,
        });
    }
    // A ring whose header is gone: rebuilt with its identity only, its slots emptied.
    dropped_rings.sort_unstable();
    dropped_rings.dedup();
    for &r in &dropped_rings {
        let at = ring_at(r);
        let ring = &mut image[at..at + parts.ring_len as usize];
        let (head, slots) = ring.split_at_mut(RING_HEADER_BYTES);
        let dropped = slots
            .chunks_exact(SLOT_BYTES)
            .filter(|s| s.iter().any(|&b| b != 0))
            .count() as u64;
        slots.fill(0);
        head.fill(0);
        if let Ok(rh) = RingHeader::mut_from_bytes(head) {
            rh.identify(r, h.num_cpus, h.ring_slots);
        }
        for p in out.iter_mut().flat_map(|d| d.parts.iter_mut()) {
            if let Part::RingHeader {
                ring, dropped: d, ..
            } = p
            {
                if *ring == r {
                    *d = dropped;
                }
            }
        }
    }
    out
}
