//! The ring files: a header page, then `ring_slots` slots.
//!
//! A device for `n` CPUs has `2n` rings. Ring `c < n` (file `cpu{c}`) is CPU `c`'s
//! *restartable* ring: it is written only by threads running on CPU `c`, each write a Linux
//! restartable sequence (rseq), so at most one writer is inside it at a time and a writer
//! interrupted before its commit leaves nothing a reader accepts. Its `head` is advanced by a
//! plain store, as the commit, after the entry is complete; a reader accepts the entry at
//! position `p` only if `p < head` before the copy and `p > head - ring_slots` after it (the
//! oldest slot is the one the next writer is filling).
//!
//! Ring `n + c` (file `cpu{c}.shared`) is CPU `c`'s *shared* ring, for writers that cannot
//! use a restartable sequence (no rseq registration, a CPU id at or above `n`, other
//! architectures): several may write it at once, each reserving a position with a
//! `fetch_add` of `head` and claiming its slot with a compare-and-exchange of the stamp
//! (`devttrace::ring`). The two kinds never share a ring, so neither protocol has to
//! defend against the other.
//!
//! Each ring also owns one aux buffer (region `index` of the `aux` file) whose control words
//! sit in the ring's header.

use core::sync::atomic::AtomicU64;
use static_assertions::{assert_eq_size, const_assert_eq};
use zerocopy::{FromBytes, IntoBytes, KnownLayout};

/// Bytes before the first slot of a ring file.
pub const RING_HEADER_BYTES: usize = 4096;

/// Magic of a ring file header (`"ttring\0\x02"` in the writer's byte order).
pub const RING_MAGIC: u64 = u64::from_le_bytes(*b"ttring\x00\x02");

/// [`RingHeader::kind`] of a restartable ring.
pub const RESTARTABLE: u32 = 1;
/// [`RingHeader::kind`] of a shared ring.
pub const SHARED: u32 = 2;

/// The header page of a ring file.
///
/// The position counter `head` sits alone in its own 128-byte block: it is the one word every
/// trace point on this CPU modifies. The aux control words share a block of their own.
#[derive(FromBytes, IntoBytes, KnownLayout)]
#[repr(C, align(128))]
pub struct RingHeader {
    /// [`RING_MAGIC`].
    pub magic: u64,
    /// Index of this ring (see the module documentation).
    pub index: u32,
    /// [`RESTARTABLE`] or [`SHARED`].
    pub kind: u32,
    /// Number of slots, a power of two; equals the device header's `ring_slots`.
    pub slots: u64,
    /// The ring's `head` at the device's last clear (0: never cleared). Written only by a
    /// clear, before the device header's `cleared_at`; writers never touch it.
    pub clear_head: AtomicU64,
    /// The ring's `skipped` at the last clear.
    pub clear_skipped: AtomicU64,
    /// The ring's `dropped` at the last clear.
    pub clear_dropped: AtomicU64,
    _pad0: [u64; 2],
    /// Positions given up because their slot was still owned by a stalled or dead writer
    /// (shared rings only). Nothing was recorded at those positions.
    pub skipped: AtomicU64,
    /// Events dropped because no free slot was found in a bounded number of attempts
    /// (shared rings only).
    pub dropped: AtomicU64,
    _pad1: [u64; 6],
    /// Positions reserved (shared ring) or committed (restartable ring) so far; position `p`
    /// lives in slot `p & (slots - 1)`.
    pub head: AtomicU64,
    /// Restartable rings: the last stamp committed (or attempted) in this ring. Each new
    /// stamp is above it, so stamps strictly increase along the ring, whatever the clock
    /// does, without reading the slot being overwritten.
    pub last_stamp: AtomicU64,
    _pad2: [u64; 14],
    /// The aux buffer's reservation lock (shared rings only): 0 free, else the owner's
    /// `tid << 32 | start tag` (see the device header's `meta_lock`).
    pub aux_lock: AtomicU64,
    /// Offset of the oldest aux record still intact.
    pub aux_first: AtomicU64,
    /// Offset one past the newest aux record (where the next one goes).
    pub aux_last: AtomicU64,
    /// Aux records written since creation.
    pub aux_records: AtomicU64,
    /// Aux records whose payload was truncated.
    pub aux_truncated: AtomicU64,
    /// Aux writes dropped (shared rings: the oldest record was still being written by a live
    /// writer).
    pub aux_dropped: AtomicU64,
    _pad3: [u64; 10],
    _tail: [u64; (RING_HEADER_BYTES - 384) / 8],
}

impl RingHeader {
    /// Sets what a new ring's header says of it, never changed afterwards: the magic, its
    /// index `index` among the rings of a device of `num_cpus` CPUs, its kind (restartable
    /// below `num_cpus`, shared above) and its `slots`.
    pub fn identify(&mut self, index: usize, num_cpus: u32, slots: u64) {
        self.magic = RING_MAGIC;
        self.index = index as u32;
        self.kind = if index < num_cpus as usize {
            RESTARTABLE
        } else {
            SHARED
        };
        self.slots = slots;
    }
}

assert_eq_size!(RingHeader, [u8; RING_HEADER_BYTES]);
const_assert_eq!(core::mem::align_of::<RingHeader>(), 128);
const_assert_eq!(core::mem::offset_of!(RingHeader, magic), 0);
const_assert_eq!(core::mem::offset_of!(RingHeader, index), 8);
const_assert_eq!(core::mem::offset_of!(RingHeader, kind), 12);
const_assert_eq!(core::mem::offset_of!(RingHeader, slots), 16);
const_assert_eq!(core::mem::offset_of!(RingHeader, clear_head), 24);
const_assert_eq!(core::mem::offset_of!(RingHeader, clear_skipped), 32);
const_assert_eq!(core::mem::offset_of!(RingHeader, clear_dropped), 40);
const_assert_eq!(core::mem::offset_of!(RingHeader, skipped), 64);
const_assert_eq!(core::mem::offset_of!(RingHeader, dropped), 72);
const_assert_eq!(core::mem::offset_of!(RingHeader, head), 128);
const_assert_eq!(core::mem::offset_of!(RingHeader, last_stamp), 136);
const_assert_eq!(core::mem::offset_of!(RingHeader, aux_lock), 256);
const_assert_eq!(core::mem::offset_of!(RingHeader, aux_first), 264);
const_assert_eq!(core::mem::offset_of!(RingHeader, aux_last), 272);
const_assert_eq!(core::mem::offset_of!(RingHeader, aux_records), 280);
const_assert_eq!(core::mem::offset_of!(RingHeader, aux_truncated), 288);
const_assert_eq!(core::mem::offset_of!(RingHeader, aux_dropped), 296);

/// Bytes of a ring file with `slots` slots.
pub const fn ring_file_bytes(slots: u64) -> u64 {
    RING_HEADER_BYTES as u64 + slots * crate::entry::SLOT_BYTES as u64
}

/// Number of rings of a device for `num_cpus` CPUs.
pub const fn num_rings(num_cpus: u32) -> usize {
    2 * num_cpus as usize
}

/// Whether ring `index` of a device for `num_cpus` CPUs is restartable.
pub const fn is_restartable(index: usize, num_cpus: u32) -> bool {
    index < num_cpus as usize
}

/// The CPU ring `index` serves.
pub const fn ring_cpu(index: usize, num_cpus: u32) -> u32 {
    (index % num_cpus as usize) as u32
}

/// The name of ring `index`, which is also its file's name: `cpu3`, or `cpu3.shared`.
///
/// ```
/// use ttrace_layouts::ring::ring_name;
/// assert_eq!((ring_name(1, 2), ring_name(3, 2)), ("cpu1".to_string(), "cpu1.shared".to_string()));
/// ```
pub fn ring_name(index: usize, num_cpus: u32) -> alloc::string::String {
    let cpu = ring_cpu(index, num_cpus);
    if is_restartable(index, num_cpus) {
        alloc::format!("cpu{cpu}")
    } else {
        alloc::format!("cpu{cpu}.shared")
    }
}
