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
//!
//! When the records still needed fill too much of a half, the compaction *evicts* the oldest
//! of them (never a live thread's or process's latest) and says so in an [`EvictedRecord`]
//! at the start of the new half: events stamped before its `before` whose id has no record
//! at or before them show no name (rather than the id's first record's), and are counted.

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
    /// A [`ValuesRecord`]: a table of names for an argument's values.
    Values = 4,
    /// An [`EvictedRecord`]: the names area's evictions (names area only).
    Evicted = 5,
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
    /// [`Kind`](crate::entry::Kind) as a raw value in bits 0..2, and a
    /// [`Role`](crate::role::Role) in bits 4..8 (zero: a native point).
    pub kind: u8,
    /// Number of argument words.
    pub nargs: u8,
    /// The Rust type of each argument, an [`ArgType`] in 4 bits each (argument `i` in byte
    /// `i / 2`, the low half for even `i`); zero (unknown, the format alone says how to
    /// show it) in definitions made at run time.
    pub types: [u8; 6],
}

/// The Rust type of a tracepoint argument, as recorded with its definition: how the
/// argument is shown where its placeholder gives no spec.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ArgType {
    /// Not recorded: the format's spec decides (unsigned without one).
    #[default]
    Unknown = 0,
    /// An unsigned integer.
    Unsigned = 1,
    /// A signed integer, sign-extended to the word.
    Signed = 2,
    /// `bool`: 0 or 1.
    Bool = 3,
    /// `f64` (or `f32` widened): the word holds its bits.
    Float = 4,
    /// A string or byte slice: the word refers to an aux record.
    Str = 5,
    /// `char`: the word holds its scalar value.
    Char = 6,
    /// A raw pointer.
    Pointer = 7,
    /// `u8`: an unsigned integer below 2^8.
    U8 = 8,
    /// `u16`.
    U16 = 9,
    /// `u32`.
    U32 = 10,
    /// `i8`, sign-extended to the word.
    I8 = 11,
    /// `i16`, sign-extended.
    I16 = 12,
    /// `i32`, sign-extended.
    I32 = 13,
}

impl ArgType {
    /// The type of a raw 4-bit value; unknown values read as [`ArgType::Unknown`].
    pub const fn from_bits(bits: u8) -> ArgType {
        match bits {
            1 => ArgType::Unsigned,
            2 => ArgType::Signed,
            3 => ArgType::Bool,
            4 => ArgType::Float,
            5 => ArgType::Str,
            6 => ArgType::Char,
            7 => ArgType::Pointer,
            8 => ArgType::U8,
            9 => ArgType::U16,
            10 => ArgType::U32,
            11 => ArgType::I8,
            12 => ArgType::I16,
            13 => ArgType::I32,
            _ => ArgType::Unknown,
        }
    }

    /// The type as far as showing it goes: the integers of a width as
    /// [`ArgType::Unsigned`] or [`ArgType::Signed`], the others as they are.
    ///
    /// ```
    /// use ttrace_layouts::meta::ArgType;
    /// assert_eq!(ArgType::I8.shown_as(), ArgType::Signed);
    /// assert_eq!(ArgType::Str.shown_as(), ArgType::Str);
    /// ```
    pub const fn shown_as(self) -> ArgType {
        match self {
            ArgType::U8 | ArgType::U16 | ArgType::U32 => ArgType::Unsigned,
            ArgType::I8 | ArgType::I16 | ArgType::I32 => ArgType::Signed,
            other => other,
        }
    }

    /// Whether this is an integer of a width (`u8` ... `i32`): not every word can be one.
    pub const fn is_sized(self) -> bool {
        (self as u8) >= ArgType::U8 as u8 && (self as u8) <= ArgType::I32 as u8
    }

    /// Whether an argument of this type can be the word `w` (as its writer stores it: a
    /// signed integer sign-extended). Any word can be an argument of another type.
    ///
    /// ```
    /// use ttrace_layouts::meta::ArgType;
    /// assert!(ArgType::I8.holds(-128i64 as u64) && ArgType::I8.holds(127));
    /// assert!(!ArgType::I8.holds(128) && !ArgType::I8.holds(-129i64 as u64));
    /// assert!(ArgType::U16.holds(65535) && !ArgType::U16.holds(65536));
    /// assert!(ArgType::Signed.holds(u64::MAX));
    /// ```
    pub const fn holds(self, w: u64) -> bool {
        let i = w as i64;
        match self {
            ArgType::U8 => w <= u8::MAX as u64,
            ArgType::U16 => w <= u16::MAX as u64,
            ArgType::U32 => w <= u32::MAX as u64,
            ArgType::I8 => i >= i8::MIN as i64 && i <= i8::MAX as i64,
            ArgType::I16 => i >= i16::MIN as i64 && i <= i16::MAX as i64,
            ArgType::I32 => i >= i32::MIN as i64 && i <= i32::MAX as i64,
            _ => true,
        }
    }

    /// Packs up to 12 types into a record's [`TracepointRecord::types`].
    ///
    /// ```
    /// use ttrace_layouts::meta::ArgType;
    /// let packed = ArgType::pack(&[ArgType::Signed, ArgType::Str, ArgType::Bool]);
    /// assert_eq!(packed, [0x52, 0x03, 0, 0, 0, 0]);
    /// assert_eq!(ArgType::unpack(&packed, 1), ArgType::Str);
    /// assert_eq!(ArgType::unpack(&packed, 7), ArgType::Unknown);
    /// ```
    pub const fn pack(types: &[ArgType]) -> [u8; 6] {
        let mut out = [0u8; 6];
        let mut i = 0;
        while i < types.len() && i < 12 {
            out[i / 2] |= (types[i] as u8) << (4 * (i % 2));
            i += 1;
        }
        out
    }

    /// The type of argument `i` in a record's packed types.
    pub const fn unpack(types: &[u8; 6], i: usize) -> ArgType {
        if i >= 12 {
            return ArgType::Unknown;
        }
        ArgType::from_bits((types[i / 2] >> (4 * (i % 2))) & 0xf)
    }
}

/// [`ValuesRecord::kind`]: the names are bits, a value shows as the names of its set bits.
pub const VALUES_FLAGS: u8 = 1;
/// [`ValuesRecord::kind`]: the names are values, a value shows as its one name.
pub const VALUES_ENUM: u8 = 2;

/// Fixed part of a value table, followed by `count` values (`u64` each), `count` name
/// lengths (`u16` each), the table's name and then its entries' names.
///
/// A tracepoint record names the tables of its arguments by their offsets in the records
/// area: after its name and format, padded to 4 bytes, come `nargs` `u32` words, each the
/// offset of the argument's table record plus one, or 0 for an argument without a table.
/// The record of a tracepoint none of whose arguments has a table ends after its format.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct ValuesRecord {
    /// [`VALUES_FLAGS`] or [`VALUES_ENUM`].
    pub kind: u8,
    /// Reserved, zero.
    pub reserved: u8,
    /// Bytes of the table's name.
    pub name_len: u16,
    /// Entries.
    pub count: u32,
    /// Bytes of all entry names together.
    pub names_len: u32,
    /// Reserved, zero.
    pub reserved2: [u32; 3],
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

/// The names area's evictions, the first record of a half once a compaction has evicted a
/// name still needed (see the module docs): what readers need to show no wrong name, and
/// what writers need to not compact in vain.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct EvictedRecord {
    /// Every event of an evicted record is stamped before this: an event before it whose
    /// id has no record at or before it is shown unnamed (an event at or after it takes
    /// its id's first record, as always).
    pub before: u64,
    /// Records evicted so far (all compactions).
    pub count: u64,
    /// Writers do not compact again while the device's `names_dropped` is below this: the
    /// last compaction could not free a quarter of the half (live threads' names fill it).
    pub quiet_until_dropped: u64,
}

assert_eq_size!(RecordHeader, u64);
assert_eq_size!(TracepointRecord, [u8; 24]);
assert_eq_size!(TaskRecord, [u8; 24]);
assert_eq_size!(ValuesRecord, [u8; 24]);
assert_eq_size!(EvictedRecord, [u8; 24]);
const_assert_eq!(core::mem::offset_of!(EvictedRecord, count), 8);
const_assert_eq!(
    core::mem::offset_of!(EvictedRecord, quiet_until_dropped),
    16
);
const_assert_eq!(core::mem::offset_of!(TracepointRecord, types), 18);
const_assert_eq!(core::mem::offset_of!(ValuesRecord, count), 4);
const_assert_eq!(core::mem::offset_of!(ValuesRecord, names_len), 8);
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
        /// Per argument, its value table's offset in the records area plus one, or 0: a
        /// `u32` each (empty for a record without tables). See [`table_ref`].
        tables: &'a [u8],
    },
    /// A table of names for an argument's values.
    Values {
        /// Fixed part.
        table: ValuesRecord,
        /// The table's name.
        name: &'a [u8],
        /// `count` values, 8 bytes each. See [`ValuesRecord`] and [`value_entries`].
        values: &'a [u8],
        /// `count` name lengths, 2 bytes each.
        lens: &'a [u8],
        /// The entries' names, one after the other.
        names: &'a [u8],
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
    /// The names area's evictions.
    Evicted {
        /// Fixed part.
        evicted: EvictedRecord,
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

/// Argument `i`'s table reference in a tracepoint record's `tables`: the offset of its
/// [`ValuesRecord`] in the records area, or `None`.
///
/// ```
/// use ttrace_layouts::meta::table_ref;
/// let refs = [0, 0, 0, 0, 41, 0, 0, 0];
/// assert_eq!(table_ref(&refs, 0), None);
/// assert_eq!(table_ref(&refs, 1), Some(40));
/// assert_eq!(table_ref(&refs, 2), None);
/// ```
pub fn table_ref(tables: &[u8], i: usize) -> Option<u64> {
    let word = tables.get(4 * i..4 * i + 4)?;
    let r = u32::from_ne_bytes(word.try_into().ok()?);
    (r != 0).then(|| r as u64 - 1)
}

/// The entries of a [`Record::Values`], in order: each name's bytes and its value.
/// [`records`] checked that the parts fit; entries whose name would run past the names
/// end the walk.
///
/// ```
/// use ttrace_layouts::meta::value_entries;
/// let values = [1u64, 4].map(u64::to_ne_bytes).concat();
/// let lens = [1u16, 2].map(u16::to_ne_bytes).concat();
/// let got: Vec<_> = value_entries(&values, &lens, b"ABC").collect();
/// assert_eq!(got, [(&b"A"[..], 1), (&b"BC"[..], 4)]);
/// ```
pub fn value_entries<'a>(
    values: &'a [u8],
    lens: &'a [u8],
    names: &'a [u8],
) -> impl Iterator<Item = (&'a [u8], u64)> + 'a {
    let mut start = 0usize;
    values
        .chunks_exact(8)
        .zip(lens.chunks_exact(2))
        .map_while(move |(v, l)| {
            let value = u64::from_ne_bytes(v.try_into().ok()?);
            let len = u16::from_ne_bytes(l.try_into().ok()?) as usize;
            let name = names.get(start..start.checked_add(len)?)?;
            start += len;
            Some((name, value))
        })
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
                let refs = (n + f).next_multiple_of(4);
                let tables = strings
                    .get(refs..refs + 4 * def.nargs as usize)
                    .unwrap_or(&[]);
                Record::Tracepoint {
                    def,
                    name: &strings[..n],
                    format: &strings[n..n + f],
                    tables,
                }
            }
            k if k == RecordKind::Values as u16 => {
                let (table, strings) = ValuesRecord::read_from_prefix(body)
                    .map_err(|_| MetaError::Truncated { offset })?;
                let count = table.count as usize;
                let (values, lens) = (count.saturating_mul(8), count.saturating_mul(2));
                let name = table.name_len as usize;
                let names = table.names_len as usize;
                let total = values
                    .checked_add(lens)
                    .and_then(|t| t.checked_add(name))
                    .and_then(|t| t.checked_add(names));
                if total.is_none_or(|t| t > strings.len()) {
                    return Err(MetaError::BadStrings { offset });
                }
                let (values, rest) = strings.split_at(values);
                let (lens, rest) = rest.split_at(lens);
                let (name, rest) = rest.split_at(name);
                Record::Values {
                    table,
                    name,
                    values,
                    lens,
                    names: &rest[..names],
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
            k if k == RecordKind::Evicted as u16 => {
                let (evicted, _) = EvictedRecord::read_from_prefix(body)
                    .map_err(|_| MetaError::Truncated { offset })?;
                Record::Evicted { evicted }
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
