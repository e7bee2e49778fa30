//! A snapshot file: a whole device, copied consistently, in one file.
//!
//! A snapshot describes an *image* of the device: every device file laid out in one
//! address space, each on a page boundary and holding exactly the bytes of the device file
//! of the same name, so that a reader reads the image as a device whose writers stopped.
//!
//! | image offset    | part                                              |
//! |-----------------|---------------------------------------------------|
//! | 0               | [`SnapshotHeader`] (one page)                     |
//! | `header_at`     | the device header ([`HEADER_BYTES`])              |
//! | `rings_at + i * ring_stride` | ring `i` (file `cpu<i>` or `cpu<i>.shared`) |
//! | `aux_at`        | the `aux` file (one buffer per ring)              |
//! | `meta_at`       | the `meta` file                                   |
//!
//! The offsets follow from the device header ([`Layout::of`]); the snapshot header repeats
//! them so that the file describes itself, and a reader checks that both agree.
//!
//! The file stores only the image's bytes in use: the header page, then *extents*, each an [`ExtentHead`] (where its bytes go in the image, how many, and their
//! checksum) followed by those bytes. Everything no extent covers is zero: the empty slots,
//! the aux bytes outside the records kept, unused metadata. So a snapshot's size follows what
//! the device holds, not its capacity. Checksums ([`crate::sum`]) find damage: the header
//! page's (`header_sum`) and each head's (`head_sum`) make damage there an error (nothing
//! after a damaged head can be found); a damaged extent's bytes (`sum`) are left out and
//! named, and the rest is read. A writer puts each part's header (a ring's header page, the
//! metadata header) in extents of its own, so that damage to the bytes after it never
//! takes the structure with it.
//!
//! | file offset     | part                                               |
//! |-----------------|----------------------------------------------------|
//! | 0               | [`SnapshotHeader`] (one page): `stored_len`, `extents`, `header_sum` |
//! | [`PAGE`]        | extent 0: the device header, whole (`at` = `header_at`, `len` = [`HEADER_BYTES`]) |
//! | ...             | extents 1 .. `extents`, in the order they were copied |
//! | `stored_len`    | end of the file                                    |
//!
//! Each extent's `at` and `len` are multiples of 8, `len` is not zero, it lies within the
//! image (`at + len <= layout.file_len`) and beyond the header page, and no two overlap.

use crate::device::{DeviceHeader, HEADER_BYTES};
use crate::ring::ring_file_bytes;
use static_assertions::{assert_eq_size, const_assert_eq};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

/// Magic of a snapshot file (`"ttsnap-1"` in the writer's byte order).
pub const SNAPSHOT_MAGIC: u64 = u64::from_le_bytes(*b"ttsnap-1");
/// Version of this layout: major in the high 16 bits.
pub const SNAPSHOT_VERSION: u32 = 1 << 16;
/// The magic of the snapshot files of pre-release ttrace (`"ttsnap\0\x01"`, formats up to
/// [`PRE_RELEASE_FORMAT`]): such a file is recognised as older than this format, and
/// refused, never read.
pub const SNAPSHOT_PRE_RELEASE_MAGIC: u64 = u64::from_le_bytes(*b"ttsnap\x00\x01");
/// The last format of pre-release snapshot files, as they are named in errors.
pub const PRE_RELEASE_FORMAT: u32 = 4;
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
    /// Length of the image.
    pub file_len: u64,
}

const fn page_up(n: u64) -> u64 {
    n.div_ceil(PAGE) * PAGE
}

impl Layout {
    /// The layout for a device with header `h` (whose sizes were checked), or `None` if
    /// it would not fit in 64 bits.
    pub fn of(h: &DeviceHeader) -> Option<Layout> {
        Layout::for_sizes(h.num_cpus, h.ring_slots, h.aux_size, h.meta_size)
    }

    /// The layout for a device of `num_cpus` CPUs, `ring_slots` slots a ring, `aux_size`
    /// bytes an aux buffer and `meta_size` bytes of metadata (checked sizes), or `None` if
    /// it would not fit in 64 bits.
    pub fn for_sizes(
        num_cpus: u32,
        ring_slots: u64,
        aux_size: u64,
        meta_size: u64,
    ) -> Option<Layout> {
        let header_at = PAGE;
        let rings_at = header_at + page_up(HEADER_BYTES as u64);
        let ring_stride = page_up(ring_file_bytes(ring_slots));
        let rings = crate::ring::num_rings(num_cpus) as u64;
        let aux_at = rings_at.checked_add(ring_stride.checked_mul(rings)?)?;
        let meta_at = aux_at.checked_add(page_up(aux_size.checked_mul(rings)?))?;
        let file_len = meta_at.checked_add(page_up(meta_size))?;
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
    /// The length of the file.
    pub stored_len: u64,
    /// How many extents follow the header page.
    pub extents: u64,
    /// The latest timestamp an event of the snapshot can have, in the device's clock: when
    /// it was taken, after the copy (give or take what a reader of the device allowed then:
    /// `devttrace::damage::latest`).
    pub latest_stamp: u64,
    /// [`sum64`](crate::sum::sum64) of this page with this field zero, seed
    /// [`SUM_HEADER`].
    pub header_sum: u64,
    /// Why it was taken ([`Cause`]; all zero in a snapshot a person asked for:
    /// [`CauseKind::Asked`]).
    pub cause: Cause,
    _pad: [u64; 299],
}

/// Why a snapshot was taken, in its header page (covered by its checksum).
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct Cause {
    /// [`CauseKind`] as a raw value.
    pub kind: u32,
    /// The process that took it (0: unknown).
    pub pid: u32,
    /// The timestamp of the trigger, in the device's clock (0: none, a snapshot saved at
    /// once).
    pub trigger_stamp: u64,
    /// The window asked for: nanoseconds before the trigger, and after it (the saver waited
    /// that long before it copied).
    pub before_ns: u64,
    /// See `before_ns`.
    pub after_ns: u64,
    /// Triggers besides the first that this snapshot covers (merged into it).
    pub merged: u64,
    /// Bytes of `reason` in use.
    pub reason_len: u64,
    /// The reason given (UTF-8, cut at a character boundary): a trigger's text, a rule, a
    /// panic's message.
    pub reason: [u8; CAUSE_REASON_BYTES],
    /// Where a rule matched an interval (a latency rule's pair or span instance, which
    /// ended at `trigger_stamp`): when it began, in the device's clock (0: no interval).
    pub interval_stamp: u64,
}

/// Bytes of [`Cause::reason`].
pub const CAUSE_REASON_BYTES: usize = 512;

const_assert_eq!(core::mem::size_of::<Cause>(), 56 + CAUSE_REASON_BYTES);
const_assert_eq!(core::mem::offset_of!(SnapshotHeader, cause), 1136);

/// Who took a snapshot, and on what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum CauseKind {
    /// A person or tool asked for it (`ttrace-reader snapshot`).
    Asked = 0,
    /// The program saved it (`save_snapshot`).
    Saved = 1,
    /// The program triggered it (`trigger`).
    Trigger = 2,
    /// A rule matched (`ttrace-reader watch`, or a rule installed through `ctl`).
    Rule = 3,
    /// The program panicked.
    Panic = 4,
}

impl CauseKind {
    /// The kind of raw value `v` (an unknown value is taken as [`CauseKind::Asked`]).
    pub const fn from_raw(v: u32) -> CauseKind {
        match v {
            1 => CauseKind::Saved,
            2 => CauseKind::Trigger,
            3 => CauseKind::Rule,
            4 => CauseKind::Panic,
            _ => CauseKind::Asked,
        }
    }

    /// Its name, as listings and footers show it.
    pub const fn name(self) -> &'static str {
        match self {
            CauseKind::Asked => "asked",
            CauseKind::Saved => "saved",
            CauseKind::Trigger => "trigger",
            CauseKind::Rule => "rule",
            CauseKind::Panic => "panic",
        }
    }
}

impl Cause {
    /// A cause of `kind` with `reason` (cut to [`CAUSE_REASON_BYTES`] at a character
    /// boundary).
    pub fn new(kind: CauseKind, reason: &str) -> Cause {
        let mut c = Cause::new_zeroed();
        c.kind = kind as u32;
        let mut n = reason.len().min(CAUSE_REASON_BYTES);
        while !reason.is_char_boundary(n) {
            n -= 1;
        }
        c.reason[..n].copy_from_slice(&reason.as_bytes()[..n]);
        c.reason_len = n as u64;
        c
    }

    /// The reason, as far as it is UTF-8 (a damaged length is cut to the field).
    pub fn reason(&self) -> &str {
        let n = (self.reason_len as usize).min(CAUSE_REASON_BYTES);
        match core::str::from_utf8(&self.reason[..n]) {
            Ok(s) => s,
            Err(e) => core::str::from_utf8(&self.reason[..e.valid_up_to()]).unwrap_or_default(),
        }
    }
}

impl core::fmt::Debug for Cause {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Cause")
            .field("kind", &CauseKind::from_raw(self.kind))
            .field("pid", &self.pid)
            .field("trigger_stamp", &self.trigger_stamp)
            .field("before_ns", &self.before_ns)
            .field("after_ns", &self.after_ns)
            .field("merged", &self.merged)
            .field("reason", &self.reason())
            .field("interval_stamp", &self.interval_stamp)
            .finish()
    }
}

assert_eq_size!(SnapshotHeader, [u8; PAGE as usize]);
const_assert_eq!(core::mem::align_of::<SnapshotHeader>(), 8);
const_assert_eq!(core::mem::offset_of!(SnapshotHeader, magic), 0);
const_assert_eq!(core::mem::offset_of!(SnapshotHeader, version), 8);
const_assert_eq!(core::mem::offset_of!(SnapshotHeader, layout), 16);
const_assert_eq!(core::mem::offset_of!(SnapshotHeader, taken_realtime_ns), 64);
const_assert_eq!(core::mem::offset_of!(SnapshotHeader, source_len), 72);
const_assert_eq!(core::mem::offset_of!(SnapshotHeader, source), 80);
const_assert_eq!(core::mem::offset_of!(SnapshotHeader, stored_len), 1104);
const_assert_eq!(core::mem::offset_of!(SnapshotHeader, extents), 1112);
const_assert_eq!(core::mem::offset_of!(SnapshotHeader, latest_stamp), 1120);
const_assert_eq!(core::mem::offset_of!(SnapshotHeader, header_sum), 1128);
assert_eq_size!(Layout, [u8; 48]);

/// The head of an extent: `len` bytes follow it, to be placed at image offset `at`, with
/// their checksum and its own.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct ExtentHead {
    /// Where the bytes go in the image (a multiple of 8).
    pub at: u64,
    /// How many bytes follow (a multiple of 8, not zero).
    pub len: u64,
    /// [`sum64`](crate::sum::sum64) of those bytes, seed [`SUM_EXTENT`].
    pub sum: u64,
    /// `sum64` of the three words before, seed [`SUM_HEAD`].
    pub head_sum: u64,
}

/// Bytes of an [`ExtentHead`].
pub const EXTENT_HEAD_BYTES: u64 = 32;
assert_eq_size!(ExtentHead, [u8; EXTENT_HEAD_BYTES as usize]);
const_assert_eq!(core::mem::offset_of!(ExtentHead, at), 0);
const_assert_eq!(core::mem::offset_of!(ExtentHead, len), 8);
const_assert_eq!(core::mem::offset_of!(ExtentHead, sum), 16);
const_assert_eq!(core::mem::offset_of!(ExtentHead, head_sum), 24);

/// The seed of [`SnapshotHeader::header_sum`].
pub const SUM_HEADER: u64 = u64::from_le_bytes(*b"ttsnhead");
/// The seed of [`ExtentHead::head_sum`].
pub const SUM_HEAD: u64 = u64::from_le_bytes(*b"ttsnexth");
/// The seed of [`ExtentHead::sum`].
pub const SUM_EXTENT: u64 = u64::from_le_bytes(*b"ttsnextb");

impl ExtentHead {
    /// The head of the extent of `bytes` placed at image offset `at`, its sums made.
    pub fn of(at: u64, bytes: &[u8]) -> ExtentHead {
        let mut h = ExtentHead {
            at,
            len: bytes.len() as u64,
            sum: crate::sum::sum64(SUM_EXTENT, bytes),
            head_sum: 0,
        };
        h.head_sum = h.own_sum();
        h
    }

    /// What `head_sum` must be.
    pub fn own_sum(&self) -> u64 {
        crate::sum::sum64(SUM_HEAD, &self.as_bytes()[..24])
    }

    /// Whether the head is as written (`head_sum` agrees).
    pub fn is_intact(&self) -> bool {
        self.head_sum == self.own_sum()
    }

    /// Whether `bytes` are the extent's bytes as written (`sum` agrees).
    pub fn holds(&self, bytes: &[u8]) -> bool {
        bytes.len() as u64 == self.len && crate::sum::sum64(SUM_EXTENT, bytes) == self.sum
    }
}

/// Where the data of extent 0 (the device header) lies in the file.
pub const HEADER_DATA_AT: u64 = PAGE + EXTENT_HEAD_BYTES;
/// Where extent 1 begins in the file.
pub const EXTENTS_AT: u64 = HEADER_DATA_AT + HEADER_BYTES as u64;

/// The image ranges worth storing of a part of `bytes` placed at an 8-aligned image offset:
/// the runs of `block`-byte blocks (a multiple of 8) that are not all zero, as `(start, end)`
/// offsets into `bytes`, whose ends are multiples of 8 (`bytes.len()` is one).
///
/// ```
/// use ttrace_layouts::snapshot::used_runs;
/// let mut b = [0u8; 64 * 5];
/// b[70] = 1; // block 1
/// (b[64 * 3], b[64 * 5 - 1]) = (2, 3); // blocks 3 and 4
/// assert_eq!(used_runs(&b, 64).collect::<Vec<_>>(), [(64, 128), (192, 320)]);
/// assert_eq!(used_runs(&b[..200], 64).collect::<Vec<_>>(), [(64, 128), (192, 200)]);
/// assert_eq!(used_runs(&[0; 64], 64).count(), 0);
/// ```
pub fn used_runs(bytes: &[u8], block: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
    let block = block.max(8) & !7;
    let mut at = 0;
    core::iter::from_fn(move || {
        // An or of the whole block, not a search for its first non-zero byte: without the
        // early exit it is a few vector instructions, where the search went byte by byte
        // through every empty block (most of a snapshot of a ring copied for a window).
        let used = |i: usize| {
            bytes[i..(i + block).min(bytes.len())]
                .iter()
                .fold(0, |any, &b| any | b)
                != 0
        };
        while at < bytes.len() && !used(at) {
            at += block;
        }
        if at >= bytes.len() {
            return None;
        }
        let start = at;
        while at < bytes.len() && used(at) {
            at += block;
        }
        Some((start, at.min(bytes.len())))
    })
}

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

    /// What `header_sum` must be.
    pub fn own_sum(&self) -> u64 {
        let mut copy = *self;
        copy.header_sum = 0;
        crate::sum::sum64(SUM_HEADER, copy.as_bytes())
    }

    /// Sets `header_sum` (the last change to a header).
    pub fn seal(&mut self) {
        self.header_sum = self.own_sum();
    }

    /// Whether the first bytes of a file are a snapshot's (its magic, in either byte order,
    /// or a pre-release ttrace's: [`SNAPSHOT_PRE_RELEASE_MAGIC`]).
    pub fn is_snapshot(prefix: &[u8]) -> bool {
        prefix.len() >= 8
            && matches!(
                u64::from_ne_bytes(prefix[..8].try_into().unwrap_or([0; 8])),
                m if m == SNAPSHOT_MAGIC
                    || m == SNAPSHOT_MAGIC.swap_bytes()
                    || m == SNAPSHOT_PRE_RELEASE_MAGIC
            )
    }

    /// The source directory, as text.
    pub fn source(&self) -> &[u8] {
        &self.source[..(self.source_len as usize).min(self.source.len())]
    }
}
