//! Binary layouts of a ttrace device, shared by every writer and reader.
//!
//! *An implementation crate*: a program names `ttrace-core` (to write), `ttrace-tracing`
//! (from `tracing`) or `ttrace-reader` (to read), which depend on this one; its API follows
//! theirs, not semantic versioning of its own.
//!
//! A ttrace *device* is a directory of memory-mapped files. All multi-byte values are in the
//! writer's native byte order; the header's [`MAGIC`](device::MAGIC) reveals that order to a
//! reader. Every struct here is `#[repr(C)]`, derives the zerocopy traits, and has its size,
//! alignment and field offsets asserted at compile time, so the byte tables below are checked
//! by the compiler, not just documented.
//!
//! | file      | layout                                                                 |
//! |-----------|------------------------------------------------------------------------|
//! | `header`  | [`DeviceHeader`](device::DeviceHeader), one 4 KiB page                 |
//! | `cpuN`    | [`RingHeader`](ring::RingHeader) page, then `ring_slots` 64-byte slots: CPU N's restartable ring |
//! | `cpuN.shared` | the same: CPU N's shared ring (see [`ring`])                       |
//! | `aux`     | one buffer of `aux_size` bytes per ring, in ring order: 8-byte aligned [`aux`] records, wrapping |
//! | `meta`    | [`MetaHeader`](meta::MetaHeader) page, tracepoint word table, tracepoint records, two names halves |
//!
//! # Trace entry (one slot, 64 bytes, one cache line)
//!
//! | bytes | parent [`Entry`](entry::Entry) | [`Continuation`](entry::Continuation) |
//! |-------|--------------------------------|---------------------------------------|
//! | 0..8  | stamp: timestamp, bit 0 = 0    | stamp: parent's timestamp \| 1        |
//! | 8..16 | [`TypeWord`](entry::TypeWord)  | data 5                                |
//! | 16..24| context: pid << 32 \| tid      | data 6                                |
//! | 24..64| data 0..4                      | data 7..11                            |
//!
//! The stamp word is also the slot's state (see [`entry::Stamp`]): `0` empty, top bit set
//! while a writer owns the slot, otherwise the committed timestamp.
//!
//! Type word bits: `0..2` kind, `2` has-continuation, `3` present (1), `4..8` argument count,
//! `8..20` CPU, `20..36` tracepoint id, `36..64` position tag (restartable rings; else 0).
//!
//! # Aux record (8-byte aligned, may wrap at the end of the buffer)
//!
//! `path u64 | timestamp u64 | ident u64 | payload bytes (not NUL terminated)`.
//! Path bits: `0` invalid (being written), `1` truncated, `4..16` payload length,
//! `16..32` CPU, `32..48` tag; the rest is reserved (zero). See [`aux::AuxPath`].
//!
//! # Metadata record (8-byte aligned)
//!
//! `kind u16 | reserved u16 | len u32` then a kind-specific fixed part and its strings.
//! Tracepoint records are append-only; thread and process names are kept in a names area
//! whose records are compacted once no event can refer to them. See [`meta`].

#![deny(missing_docs)]
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

// Listed from the bottom up: each module uses only modules listed before it.
pub mod entry;
pub mod role;
pub mod level;
// not `aux.rs`: a name Windows reserves, which a package may not hold.
#[path = "aux_records.rs"]
pub mod aux;
pub mod meta;
pub mod format;
pub mod ring;
pub mod device;
pub mod sum;
pub mod snapshot;

/// Rounds `n` up to the next multiple of 8 (the alignment of aux and metadata records).
///
/// The Akaros sketch rounded down; rounding up is what keeps every record's successor aligned.
///
/// ```
/// assert_eq!(ttrace_layouts::align8(0), 0);
/// assert_eq!(ttrace_layouts::align8(1), 8);
/// assert_eq!(ttrace_layouts::align8(24), 24);
/// ```
pub const fn align8(n: u64) -> u64 {
    (n + 7) & !7
}

/// Extracts `width` bits of `word` starting at bit `shift`.
#[inline(always)]
const fn bits(word: u64, shift: u32, width: u32) -> u64 {
    (word >> shift) & ((1u64 << width) - 1)
}
