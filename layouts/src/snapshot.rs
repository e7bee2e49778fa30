//! A snapshot file: a whole device, copied consistently, in one file.
//!
//! | offset          | part                                              |
//! |-----------------|---------------------------------------------------|
//! | 0               | [`SnapshotHeader`] (one page)                     |
//! | `header_at`     | the device header ([`HEADER_BYTES`])              |
//! | `rings_at + i * ring_stride` | ring `i` (file `cpu<i>` or `cpu<i>.shared`) |
//! | `aux_at`        | the `aux` file (one buffer per ring)              |
//! | `meta_at`       | the `meta` file                                   |
//!
//! Every part starts on a page and holds exactly the bytes of the device file of the same
//! name, so a reader maps the snapshot once and reads it as a device whose writers stopped.
//! The offsets follow from the device header ([`Layout::of`]); the snapshot header repeats
//! them so that the file describes itself, and a reader checks that both agree.

use crate::device::{DeviceHeader, HEADER_BYTES};
use crate::ring::ring_file_bytes;
use static_assertions::assert_eq_size;
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

/// Magic of a snapshot file (`"ttsnap\0\x01"` in the writer's byte order).
pub const SNAPSHOT_MAGIC: u64 = u64::from_le_bytes(*b"ttsnap\x00\x01");
/// Version of this layout: major in the high 16 bits.
pub const SNAPSHOT_VERSION: u32 = 2 << 16;
/// Alignment of every part.
pub const PAGE: u64 = 4096;

/// Where the parts of a snapshot are.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct Layout {
    /// Offset of the device header.
    pub header_at: u64,
    /// Offset of ring 0.
    pub rings_at: u64,
    /// Distance between rings.
    pub ring_stride: u64,
    /// Offset of the aux buffer.
    pub aux_at: u64,
    /// Offset of the `meta` file.
    pub meta_at: u64,
    /// Length of the whole file.
    pub file_len: u64,
}

const fn page_up(n: u64) -> u64 {
    n.div_ceil(PAGE) * PAGE
}

impl Layout {
    /// The layout for a device with header `h` (whose sizes were checked), or `None` if
    /// it would not fit in 64 bits.
    pub fn of(h: &DeviceHeader) -> Option<Layout> {
        let header_at = PAGE;
        let rings_at = header_at + page_up(HEADER_BYTES as u64);
        let ring_stride = page_up(ring_file_bytes(h.ring_slots));
        let rings = crate::ring::num_rings(h.num_cpus) as u64;
        let aux_at = rings_at.checked_add(ring_stride.checked_mul(rings)?)?;
        let meta_at = aux_at.checked_add(page_up(h.aux_size.checked_mul(rings)?))?;
        let file_len = meta_at.checked_add(page_up(h.meta_size))?;
        Some(Layout {
            header_at,
            rings_at,
            ring_stride,
            aux_at,
            meta_at,
            file_len,
        })
    }

    /// Offset and length of the part `name` (`header`, `cpu<i>`, `cpu<i>.shared`, `aux`,
    /// `meta`) of a device with header `h`.
    pub fn part(&self, h: &DeviceHeader, name: &str) -> Option<(u64, u64)> {
        let rings = crate::ring::num_rings(h.num_cpus) as u64;
        match name {
            "header" => Some((self.header_at, HEADER_BYTES as u64)),
            "aux" => Some((self.aux_at, h.aux_size * rings)),
            "meta" => Some((self.meta_at, h.meta_size)),
            _ => {
                let (cpu, shared) = match name.strip_suffix(".shared") {
                    Some(ring) => (ring, true),
                    None => (name, false),
                };
                let c: u64 = cpu.strip_prefix("cpu")?.parse().ok()?;
                let i = if shared { h.num_cpus as u64 + c } else { c };
                (c < h.num_cpus as u64 && i < rings).then(|| {
                    (
                        self.rings_at + i * self.ring_stride,
                        ring_file_bytes(h.ring_slots),
                    )
                })
            }
        }
    }
}

/// The first page of a snapshot file.
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct SnapshotHeader {
    /// [`SNAPSHOT_MAGIC`].
    pub magic: u64,
    /// [`SNAPSHOT_VERSION`].
    pub version: u32,
    /// Reserved, zero.
    pub reserved: u32,
    /// Where the parts are.
    pub layout: Layout,
    /// When the snapshot was taken (`CLOCK_REALTIME`, ns).
    pub taken_realtime_ns: u64,
    /// Bytes of `source` in use.
    pub source_len: u64,
    /// The device directory it was taken from (UTF-8, for people).
    pub source: [u8; 1024],
    _pad: [u64; 374],
}

assert_eq_size!(SnapshotHeader, [u8; PAGE as usize]);

impl SnapshotHeader {
    /// A header for a snapshot of the device at `source`, laid out as `layout`.
    pub fn new(layout: Layout, taken_realtime_ns: u64, source: &str) -> SnapshotHeader {
        let mut h = SnapshotHeader::new_zeroed();
        h.magic = SNAPSHOT_MAGIC;
        h.version = SNAPSHOT_VERSION;
        h.layout = layout;
        h.taken_realtime_ns = taken_realtime_ns;
        let mut n = source.len().min(h.source.len());
        while !source.is_char_boundary(n) {
            n -= 1;
        }
        h.source[..n].copy_from_slice(&source.as_bytes()[..n]);
        h.source_len = n as u64;
        h
    }

    /// Whether the first bytes of a file are a snapshot's (its magic, in either byte order).
    pub fn is_snapshot(prefix: &[u8]) -> bool {
        prefix.len() >= 8
            && matches!(
                u64::from_ne_bytes(prefix[..8].try_into().unwrap_or([0; 8])),
                m if m == SNAPSHOT_MAGIC || m == SNAPSHOT_MAGIC.swap_bytes()
            )
    }

    /// The source directory, as text.
    pub fn source(&self) -> &[u8] {
        &self.source[..(self.source_len as usize).min(self.source.len())]
    }
}
