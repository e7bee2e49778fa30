//! The metadata file `meta`: tracepoint definitions, thread and process names.
//!
//! Layout of the file:
//!
//! | offset                | content                                                   |
//! |-----------------------|-----------------------------------------------------------|
//! | 0                     | [`MetaHeader`]                                            |
//! | 4096                  | tracepoint words: `max_tracepoints` × `u64`, by id        |
//! | `records_offset`      | tracepoint records, `meta_used` bytes of them             |
//! | `names_offset`        | names half 0: thread and process records                  |
//! | `names_offset + names_half` | names half 1                                        |
//!
//! A tracepoint's word is its [`TypeWord`](crate::entry::TypeWord) while it is enabled and
//! `0` while it is disabled: writers test and use it with a single load.
//!
//! Tracepoint records are append-only and never overwritten: their space is bounded by the
//! distinct definitions (processes registering the same definition share one record). Each
//! is published by advancing the header's `meta_used` past it after it is fully written, so
//! a reader never sees a partial record below `meta_used`.
//!
//! Thread and process names live in the names area, two halves of `names_half` bytes. The
//! device header's `names_generation` says which half is in use (`generation & 1`) and
//! `names_used[half]` how many of its bytes hold records, published the same way. When the
//! half in use is full, the writer that needs room copies the records some reader may still
//! need into the other half and bumps the generation (a compaction, see `docs/DESIGN.md`):
//! names do not grow with uptime. A reader copies the half of the generation it loaded and
//! checks afterwards that the generation did not move.

use static_assertions::{assert_eq_size, const_assert_eq};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Magic of the metadata header.
pub const META_MAGIC: u64 = u64::from_le_bytes(*b"ttmeta\x00\x01");
/// Bytes of the metadata header page.
pub const META_HEADER_BYTES: u64 = 4096;
/// Longest name or format string a record may hold.
pub const MAX_STRING: usize = 4096;

/// Offset of the records area for a table of `max_tracepoints` words.
pub const fn records_offset(max_tracepoints: u32) -> u64 {
    let table = max_tracepoints as u64 * 8;
    META_HEADER_BYTES + table.div_ceil(4096) * 4096
}

/// The first page of the `meta` file.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct MetaHeader {
    /// [`META_MAGIC`].
    pub magic: u64,
    /// Entries of the tracepoint word table.
    pub max_tracepoints: u32,
    /// Reserved, zero.
    pub reserved: u32,
    /// Offset of the records area in the file.
    pub records_offset: u64,
    /// Bytes of the tracepoint records area.
    pub records_size: u64,
    /// Offset of the names area (two halves) in the file.
    pub names_offset: u64,
    /// Bytes of each half of the names area.
    pub names_half: u64,
    _pad: [u64; 506],
}

assert_eq_size!(MetaHeader, [u8; META_HEADER_BYTES as usize]);
const_assert_eq!(core::mem::offset_of!(MetaHeader, max_tracepoints), 8);
const_assert_eq!(core::mem::offset_of!(MetaHeader, records_offset), 16);
const_assert_eq!(core::mem::offset_of!(MetaHeader, records_size), 24);
const_assert_eq!(core::mem::offset_of!(MetaHeader, names_offset), 32);
const_assert_eq!(core::mem::offset_of!(MetaHeader, names_half), 40);

/// How a `meta` file of `file_size` bytes is divided: `(records_size, names_offset,
/// names_half)`. A quarter of what follows the tracepoint table goes to each names half,
/// the rest (about half) to tracepoint records.
///
/// ```
/// use ttrace_layouts::meta::{records_offset, split};
/// let (records, names, half) = split(64, 4 << 20);
/// assert_eq!(names, records_offset(64) + records);
/// assert_eq!(names + 2 * half, 4 << 20);
/// assert!(half % 8 == 0 && half > 1 << 19);
/// ```
pub const fn split(max_tracepoints: u32, file_size: u64) -> (u64, u64, u64) {
    let off = records_offset(max_tracepoints);
    let rest = file_size.saturating_sub(off);
    let half = (rest / 4) & !7;
    let records = rest - 2 * half;
    (records, off + records, half)
}
impl MetaHeader {
    /// A header for a `meta` file of `file_size` bytes.
    pub const fn new(max_tracepoints: u32, file_size: u64) -> MetaHeader {
        let (records_size, names_offset, names_half) = split(max_tracepoints, file_size);
        MetaHeader {
            magic: META_MAGIC,
            max_tracepoints,
            reserved: 0,
            records_offset: records_offset(max_tracepoints),
            records_size,
            names_offset,
            names_half,
            _pad: [0; 506],
        }
    }
}

/// Record kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum RecordKind {
    /// A [`TracepointRecord`].
    Tracepoint = 1,
    /// A [`TaskRecord`] naming a thread.
    Thread = 2,
    /// A [`TaskRecord`] naming a process (`tid` is 0).
    Process = 3,
}

/// Header of every metadata record.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct RecordHeader {
    /// [`RecordKind`] as a raw value.
    pub kind: u16,
    /// Reserved, zero.
    pub reserved: u16,
    /// Bytes of the whole record, header included, a multiple of 8.
    pub len: u32,
}

/// Fixed part of a tracepoint definition, followed by the name and the format string.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct TracepointRecord {
    /// Tracepoint id (the type word's tracepoint field).
    pub id: u32,
    /// Bytes of the name.
    pub name_len: u16,
    /// Bytes of the format string.
    pub format_len: u16,
    /// Class bits, tested against the device's type mask.
    pub classes: u64,
    /// [`Kind`](crate::entry::Kind) as a raw value.
    pub kind: u8,
    /// Number of argument words.
    pub nargs: u8,
    /// Reserved, zero.
    pub reserved: [u8; 6],
}

/// Fixed part of a thread or process name record, followed by the name.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct TaskRecord {
    /// Process id.
    pub pid: u32,
    /// Thread id (0 in a process record).
    pub tid: u32,
    /// When the name was recorded, in the device's clock.
    pub timestamp: u64,
    /// Bytes of the name.
    pub name_len: u16,
    /// [`TASK_RENAMED`] if the same thread (process) took a new name; else 0, a new thread
    /// (process) with this id.
    pub flags: u8,
    /// Reserved, zero.
    pub reserved: [u8; 5],
}

/// [`TaskRecord::flags`]: the record renames the thread of the id's previous record.
pub const TASK_RENAMED: u8 = 1;

assert_eq_size!(RecordHeader, u64);
assert_eq_size!(TracepointRecord, [u8; 24]);
assert_eq_size!(TaskRecord, [u8; 24]);
const_assert_eq!(core::mem::offset_of!(RecordHeader, len), 4);
const_assert_eq!(core::mem::offset_of!(TracepointRecord, name_len), 4);
const_assert_eq!(core::mem::offset_of!(TracepointRecord, format_len), 6);
const_assert_eq!(core::mem::offset_of!(TracepointRecord, classes), 8);
const_assert_eq!(core::mem::offset_of!(TracepointRecord, kind), 16);
const_assert_eq!(core::mem::offset_of!(TracepointRecord, nargs), 17);
const_assert_eq!(core::mem::offset_of!(TaskRecord, tid), 4);
const_assert_eq!(core::mem::offset_of!(TaskRecord, timestamp), 8);
const_assert_eq!(core::mem::offset_of!(TaskRecord, name_len), 16);
const_assert_eq!(core::mem::offset_of!(TaskRecord, flags), 18);

/// Bytes of a record whose fixed part is 24 bytes and whose strings total `strings` bytes.
pub const fn record_bytes(strings: usize) -> u64 {
    crate::align8(8 + 24 + strings as u64)
}

/// One parsed metadata record, borrowing its strings from the area.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record<'a> {
    /// A tracepoint definition.
    Tracepoint {
        /// Fixed part.
        def: TracepointRecord,
        /// Name bytes (UTF-8 when written by ttrace-core; check before trusting).
        name: &'a [u8],
        /// Format string bytes.
        format: &'a [u8],
    },
    /// A thread name.
    Thread {
        /// Fixed part.
        task: TaskRecord,
        /// Name bytes.
        name: &'a [u8],
    },
    /// A process name.
    Process {
        /// Fixed part.
        task: TaskRecord,
        /// Name bytes.
        name: &'a [u8],
    },
    /// A record of a kind this reader does not know; skipped.
    Unknown {
        /// Its raw kind.
        kind: u16,
    },
}

/// Why a metadata area could not be parsed further.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaError {
    /// A record header or fixed part runs past the end of the area.
    Truncated {
        /// Offset of the record.
        offset: u64,
    },
    /// A record length is zero, unaligned, or runs past the end of the area.
    BadLength {
        /// Offset of the record.
        offset: u64,
        /// The length it claims.
        len: u32,
    },
    /// A record's strings do not fit inside the record.
    BadStrings {
        /// Offset of the record.
        offset: u64,
    },
}

impl core::fmt::Display for MetaError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            MetaError::Truncated { offset } => {
                write!(f, "metadata record at {offset} is truncated")
            }
            MetaError::BadLength { offset, len } => {
                write!(f, "metadata record at {offset} has a bad length {len}")
            }
            MetaError::BadStrings { offset } => {
                write!(
                    f,
                    "metadata record at {offset} has strings longer than the record"
                )
            }
        }
    }
}

/// Iterates the records of a metadata area (`meta_used` bytes of it). Every length is
/// checked; the first malformed record ends the walk with an error. Each step advances at
/// least 8 bytes, so the walk ends after at most `area.len() / 8` items.
///
/// ```
/// use ttrace_layouts::meta::{records, Record};
/// assert_eq!(records(&[]).count(), 0);
/// let bad = [0u8; 8]; // a zero length
/// assert!(matches!(records(&bad).next(), Some(Err(_))));
/// ```
pub fn records(area: &[u8]) -> Records<'_> {
    Records {
        area,
        offset: 0,
        failed: false,
    }
}

/// Iterator returned by [`records`].
#[derive(Clone, Debug)]
pub struct Records<'a> {
    area: &'a [u8],
    offset: usize,
    failed: bool,
}

impl<'a> Records<'a> {
    /// Offset of the next record.
    pub fn offset(&self) -> usize {
        self.offset
    }

    fn parse(&self) -> Result<(Record<'a>, usize), MetaError> {
        let at = self.offset;
        let rest = &self.area[at..];
        let offset = at as u64;
        let (head, _) =
            RecordHeader::read_from_prefix(rest).map_err(|_| MetaError::Truncated { offset })?;
        let len = head.len as usize;
        if len < 8 || len % 8 != 0 || len > rest.len() {
            return Err(MetaError::BadLength {
                offset,
                len: head.len,
            });
        }
        let body = &rest[8..len];
        let record = match head.kind {
            k if k == RecordKind::Tracepoint as u16 => {
                let (def, strings) = TracepointRecord::read_from_prefix(body)
                    .map_err(|_| MetaError::Truncated { offset })?;
                let (n, f) = (def.name_len as usize, def.format_len as usize);
                if n + f > strings.len() {
                    return Err(MetaError::BadStrings { offset });
                }
                Record::Tracepoint {
                    def,
                    name: &strings[..n],
                    format: &strings[n..n + f],
                }
            }
            k if k == RecordKind::Thread as u16 || k == RecordKind::Process as u16 => {
                let (task, strings) = TaskRecord::read_from_prefix(body)
                    .map_err(|_| MetaError::Truncated { offset })?;
                let n = task.name_len as usize;
                if n > strings.len() {
                    return Err(MetaError::BadStrings { offset });
                }
                let name = &strings[..n];
                if k == RecordKind::Thread as u16 {
                    Record::Thread { task, name }
                } else {
                    Record::Process { task, name }
                }
            }
            kind => Record::Unknown { kind },
        };
        Ok((record, len))
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, MetaError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.offset >= self.area.len() {
            return None;
        }
        match self.parse() {
            Ok((record, len)) => {
                self.offset += len;
                Some(Ok(record))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}
