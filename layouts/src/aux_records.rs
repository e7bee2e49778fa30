//! Aux records: variable-length byte strings in power-of-two wrapping buffers, one per ring
//! (region `r` of the `aux` file belongs to ring `r`).
//!
//! Offsets (`first` and `last`) grow without bound; a record at offset `o` starts at byte
//! `o & mask` of its buffer and may wrap around its end. A trace entry refers to a record
//! with an [`aux_ref`] word: the buffer's index and the low 48 bits of the offset, which a
//! reader completes from the buffer's `[first, last)` window (at most one buffer long).

use static_assertions::{assert_eq_size, const_assert_eq};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Bytes of an aux record header.
pub const AUX_HEADER_BYTES: u64 = 24;
/// Largest aux record, header included.
pub const AUX_MAX_RECORD: u64 = 4096;
/// Largest payload of one record; longer strings are truncated and flagged.
pub const AUX_MAX_PAYLOAD: u64 = AUX_MAX_RECORD - AUX_HEADER_BYTES;
/// Argument word of a string that could not be recorded (the aux write was dropped).
pub const AUX_NONE: u64 = u64::MAX;
/// Bit set in a trace entry's argument word that refers to an aux record.
pub const AUX_REF: u64 = 1 << 63;
/// Bits of an [`aux_ref`] word that hold the low bits of the record's offset.
pub const AUX_REF_OFFSET_BITS: u32 = 48;
/// Most aux buffers an [`aux_ref`] word can name.
pub const AUX_REF_BUFFERS: usize = 1 << 15;

/// The argument word that refers to the record at `offset` of aux buffer `buffer`:
/// [`AUX_REF`], the buffer in bits 48..63, the low 48 bits of the offset.
///
/// ```
/// use ttrace_layouts::aux::{aux_ref, aux_ref_parts};
/// let w = aux_ref(3, (1 << 50) + 4096);
/// assert_eq!(aux_ref_parts(w), Some((3, 4096)));
/// ```
#[inline(always)]
pub const fn aux_ref(buffer: usize, offset: u64) -> u64 {
    AUX_REF
        | ((buffer as u64 & (AUX_REF_BUFFERS as u64 - 1)) << AUX_REF_OFFSET_BITS)
        | (offset & ((1 << AUX_REF_OFFSET_BITS) - 1))
}

/// The buffer and the low 48 offset bits an argument word refers to, if it is a reference.
pub const fn aux_ref_parts(word: u64) -> Option<(usize, u64)> {
    if word & AUX_REF == 0 || word == AUX_NONE {
        return None;
    }
    Some((
        ((word >> AUX_REF_OFFSET_BITS) & (AUX_REF_BUFFERS as u64 - 1)) as usize,
        word & ((1 << AUX_REF_OFFSET_BITS) - 1),
    ))
}

/// The full offset whose low 48 bits are `low`, among the offsets of a buffer whose newest
/// record ends at `last` (records older than one buffer are gone, so the nearest below
/// `last` is the one meant).
pub const fn full_offset(low: u64, last: u64) -> u64 {
    let span = 1u64 << AUX_REF_OFFSET_BITS;
    let base = last & !(span - 1);
    let candidate = base | low;
    if candidate >= last && candidate >= span {
        candidate - span
    } else {
        candidate
    }
}

/// Header of an aux record, followed by `path.len()` payload bytes.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct AuxHeader {
    /// See [`AuxPath`].
    pub path: u64,
    /// Timestamp of the write, in the device's clock; 0 for a string argument, whose time is
    /// that of the entry referring to it.
    pub timestamp: u64,
    /// The writer's context, `pid << 32 | tid`. Written with the invalid path under the
    /// reservation lock, so it also names the owner of a record still being written.
    pub ident: u64,
}

assert_eq_size!(AuxHeader, [u8; AUX_HEADER_BYTES as usize]);
const_assert_eq!(core::mem::align_of::<AuxHeader>(), 8);
const_assert_eq!(core::mem::offset_of!(AuxHeader, path), 0);
const_assert_eq!(core::mem::offset_of!(AuxHeader, timestamp), 8);
const_assert_eq!(core::mem::offset_of!(AuxHeader, ident), 16);

/// What an aux record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum AuxTag {
    /// A string argument of a trace entry, referenced from the entry's argument word.
    String = 2,
}

impl AuxTag {
    /// The tag for a raw value, if known.
    pub const fn from_raw(raw: u16) -> Option<AuxTag> {
        match raw {
            2 => Some(AuxTag::String),
            _ => None,
        }
    }
}

/// The `path` word of an aux record.
///
/// | bits   | field                                             |
/// |--------|---------------------------------------------------|
/// | 0      | invalid: the payload is still being written       |
/// | 1      | truncated: the payload was cut at the maximum     |
/// | 2..4   | reserved (0)                                      |
/// | 4..16  | payload length in bytes (exact, 0..=4072)         |
/// | 16..32 | CPU of the writer (modulo 65536)                  |
/// | 32..48 | tag ([`AuxTag`])                                  |
/// | 48..64 | reserved (0)                                      |
///
/// The length is written together with the invalid flag, so it is readable while the
/// payload is still being copied.
///
/// ```
/// use ttrace_layouts::aux::{AuxPath, AuxTag};
/// let p = AuxPath::new(AuxTag::String, 5, 13, false).invalid();
/// assert!(p.is_invalid());
/// assert_eq!((p.len(), p.cpu(), p.tag()), (13, 5, Some(AuxTag::String)));
/// assert_eq!(p.record_bytes(), 40); // 24-byte header + 13 bytes, rounded up to 8
/// assert!(!p.valid().is_invalid());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AuxPath(pub u64);

impl AuxPath {
    /// The invalid (being written) flag.
    pub const INVALID: u64 = 1;
    /// The truncated flag.
    pub const TRUNCATED: u64 = 2;
    /// The lowest bit of the payload length.
    pub const LEN_SHIFT: u32 = 4;
    /// The payload length's bits, once shifted down.
    pub const LEN_MASK: u64 = 0xfff;
    /// The lowest bit of the writer's CPU.
    pub const CPU_SHIFT: u32 = 16;
    const RESERVED: u64 = 0b1100 | (0xffff << 48);

    /// A valid path; `len` must not exceed [`AUX_MAX_PAYLOAD`].
    pub const fn new(tag: AuxTag, cpu: u32, len: u64, truncated: bool) -> AuxPath {
        AuxPath(
            ((tag as u64) << 32)
                | ((cpu as u64 & 0xffff) << Self::CPU_SHIFT)
                | ((len & Self::LEN_MASK) << Self::LEN_SHIFT)
                | if truncated { Self::TRUNCATED } else { 0 },
        )
    }

    /// The same path marked invalid.
    pub const fn invalid(self) -> AuxPath {
        AuxPath(self.0 | Self::INVALID)
    }

    /// The same path marked valid.
    pub const fn valid(self) -> AuxPath {
        AuxPath(self.0 & !Self::INVALID)
    }

    /// Whether the payload is still being written.
    pub const fn is_invalid(self) -> bool {
        self.0 & Self::INVALID != 0
    }

    /// Whether the payload was truncated.
    pub const fn is_truncated(self) -> bool {
        self.0 & Self::TRUNCATED != 0
    }

    /// Payload length in bytes.
    pub const fn len(self) -> u64 {
        crate::bits(self.0, Self::LEN_SHIFT, 12)
    }

    /// Whether the payload is empty.
    pub const fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// CPU of the writer.
    pub const fn cpu(self) -> u32 {
        crate::bits(self.0, Self::CPU_SHIFT, 16) as u32
    }

    /// Raw tag.
    pub const fn raw_tag(self) -> u16 {
        crate::bits(self.0, 32, 16) as u16
    }

    /// Tag, if known.
    pub const fn tag(self) -> Option<AuxTag> {
        AuxTag::from_raw(self.raw_tag())
    }

    /// Bytes the whole record occupies in the buffer (header + payload, 8-aligned).
    pub const fn record_bytes(self) -> u64 {
        crate::align8(AUX_HEADER_BYTES + self.len())
    }

    /// Whether a reader may trust the path: reserved bits clear, length in range,
    /// tag known.
    pub const fn is_well_formed(self) -> bool {
        self.0 & Self::RESERVED == 0 && self.len() <= AUX_MAX_PAYLOAD && self.tag().is_some()
    }
}
