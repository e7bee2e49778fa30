//! The per-CPU ring file `cpuN`: a header page, then `ring_slots` slots.

use core::sync::atomic::AtomicU64;
use static_assertions::{assert_eq_size, const_assert_eq};
use zerocopy::{FromBytes, IntoBytes, KnownLayout};

/// Bytes before the first slot of a ring file.
pub const RING_HEADER_BYTES: usize = 4096;

/// Magic of a ring file header (`"ttring\0\x01"` in the writer's byte order).
pub const RING_MAGIC: u64 = u64::from_le_bytes(*b"ttring\x00\x01");

/// The header page of a ring file.
///
/// The position counter `head` sits alone in its own 128-byte block: it is the one word every
/// trace point on this CPU modifies.
#[derive(FromBytes, IntoBytes, KnownLayout)]
#[repr(C, align(128))]
pub struct RingHeader {
    /// [`RING_MAGIC`].
    pub magic: u64,
    /// Index of this ring (the CPU it serves).
    pub cpu: u32,
    /// Reserved, zero.
    pub reserved0: u32,
    /// Number of slots, a power of two; equals the device header's `ring_slots`.
    pub slots: u64,
    _pad0: [u64; 5],
    /// Positions given up because their slot was still owned by a stalled or dead writer.
    /// Nothing was recorded at those positions.
    pub skipped: AtomicU64,
    /// Events dropped because no free slot was found in a bounded number of attempts.
    pub dropped: AtomicU64,
    _pad1: [u64; 6],
    /// Positions reserved so far; position `p` lives in slot `p & (slots - 1)`.
    pub head: AtomicU64,
    _pad2: [u64; 15],
    _tail: [u64; (RING_HEADER_BYTES - 256) / 8],
}

assert_eq_size!(RingHeader, [u8; RING_HEADER_BYTES]);
const_assert_eq!(core::mem::align_of::<RingHeader>(), 128);
const_assert_eq!(core::mem::offset_of!(RingHeader, magic), 0);
const_assert_eq!(core::mem::offset_of!(RingHeader, cpu), 8);
const_assert_eq!(core::mem::offset_of!(RingHeader, slots), 16);
const_assert_eq!(core::mem::offset_of!(RingHeader, skipped), 64);
const_assert_eq!(core::mem::offset_of!(RingHeader, dropped), 72);
const_assert_eq!(core::mem::offset_of!(RingHeader, head), 128);

/// Bytes of a ring file with `slots` slots.
pub const fn ring_file_bytes(slots: u64) -> u64 {
    RING_HEADER_BYTES as u64 + slots * crate::entry::SLOT_BYTES as u64
}
