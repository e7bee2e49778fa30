//! Aux records: variable-length byte strings in a power-of-two wrapping buffer.
//!
//! Offsets (`first`, `last`, and the references stored in trace entries) grow without bound;
//! a record at offset `o` starts at byte `o & mask` of the buffer and may wrap around its end.

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
/// Bit set in a trace entry's argument word that refers to an aux record
/// (the rest of the word is the record's offset).
pub const AUX_REF: u64 = 1 << 63;

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
    /// A free-form message, shown by readers as an event of its own.
    Info = 1,
    /// A string argument of a trace entry, referenced from the entry's argument word.
    String = 2,
}

impl AuxTag {
    /// The tag for a raw value, if known.
    pub const fn from_raw(raw: u16) -> Option<AuxTag> {
        match raw {
            1 => Some(AuxTag::Info),
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
    const RESERVED: u64 = 0b1100 | (0xffff << 48);

    /// A valid path; `len` must not exceed [`AUX_MAX_PAYLOAD`].
    pub const fn new(tag: AuxTag, cpu: u32, len: u64, truncated: bool) -> AuxPath {
        AuxPath(
            ((tag as u64) << 32)
                | ((cpu as u64 & 0xffff) << 16)
                | ((len & 0xfff) << 4)
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
        crate::bits(self.0, 4, 12)
    }

    /// Whether the payload is empty.
    pub const fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// CPU of the writer.
    pub const fn cpu(self) -> u32 {
        crate::bits(self.0, 16, 16) as u32
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
