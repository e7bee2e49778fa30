//! The device header: the file `header`, one 4 KiB page.
//!
//! The first 128 bytes are written once, before the device directory becomes visible, and
//! never change. The rest is shared control state, changed atomically by writers and by
//! `ctl` commands. Each group of control words sits in its own 128-byte block so that aux
//! writers, metadata writers and mask changes do not share cache lines.

use core::sync::atomic::{AtomicU64, AtomicU8};
use static_assertions::{assert_eq_size, const_assert_eq};
use zerocopy::{FromBytes, IntoBytes, KnownLayout};

/// Device magic: `"ttrace-1"` in the writer's byte order. A reader that sees
/// `MAGIC.swap_bytes()` is looking at a device written with the other byte order.
pub const MAGIC: u64 = u64::from_le_bytes(*b"ttrace-1");
/// The magic of the devices of pre-release ttrace (`"ttrace\x01\x02"`, layouts up to
/// [`PRE_RELEASE_LAYOUT`]): such a device is recognised as older than this layout, and
/// refused ([`HeaderError::PreRelease`]), never read.
pub const PRE_RELEASE_MAGIC: u64 = u64::from_le_bytes(*b"ttrace\x01\x02");
/// The last header layout of pre-release ttrace, as its devices are named in errors.
pub const PRE_RELEASE_LAYOUT: &str = "3.3";

/// Version of this header layout (major in the high 16 bits, minor in the low 16).
pub const HEADER_VERSION: u32 = 0x0001_0000;
/// Version of the shared data layouts (aux and metadata files).
pub const SHARED_DATA_VERSION: u32 = 0x0001_0000;
/// Version of the per-CPU data layouts (ring files and entries).
pub const PERCPU_DATA_VERSION: u32 = 0x0001_0000;

/// The major part of a version: readers accept any minor version of the major they know.
pub const fn major(version: u32) -> u16 {
    (version >> 16) as u16
}

/// The class bit of `info()` messages: the mask must have it, and the rules enable the name
/// [`INFO_NAME`], for a message to be recorded. The highest bit, left to ttrace itself.
pub const CLASS_MESSAGES: u64 = 1 << 63;
/// The name under which rules enable or disable `info()` messages, and readers show them.
pub const INFO_NAME: &str = "info";
/// The format of the tracepoint that records `info()` messages: its one argument refers to
/// the text in the aux buffer. A tracepoint named [`INFO_NAME`] of class [`CLASS_MESSAGES`]
/// with this format is the messages' (readers show its events as messages).
pub const INFO_FORMAT: &str = "{message:s}";

/// The name of the built-in tracepoint that records a thread leaving its CPU (kind
/// [`Stop`](crate::entry::Kind::Stop), class [`CLASS_MESSAGES`]), written for the thread by
/// the process's drain of the kernel's switch records, stamped when the switch happened.
pub const SWITCH_OUT_NAME: &str = "sched_out";
/// The format of [`SWITCH_OUT_NAME`]: 1 if the thread was preempted (still runnable), 0 if
/// it blocked; the time of the switch, in the device's clock (the entry's stamp is that
/// time unless the shared ring's protocol had to move it later).
pub const SWITCH_OUT_FORMAT: &str = "preempted={preempted} at={at}";
/// The name of the built-in tracepoint that records a thread coming back on a CPU (kind
/// [`Start`](crate::entry::Kind::Start)).
pub const SWITCH_IN_NAME: &str = "sched_in";
/// The format of [`SWITCH_IN_NAME`].
pub const SWITCH_IN_FORMAT: &str = "at={at}";
/// The name of the built-in tracepoint that says, on a thread, that switch records were
/// lost between two that were not (the kernel's buffer was full): its time off the CPU
/// in between is unknown.
pub const SWITCH_LOST_NAME: &str = "sched_lost";
/// The format of [`SWITCH_LOST_NAME`].
pub const SWITCH_LOST_FORMAT: &str = "records={records}";
/// The name of the built-in tracepoint that says, on a thread's first event, that its
/// switches are not recorded (its process observes as many threads as its bound allows, or
/// the kernel refused).
pub const SWITCH_UNOBSERVED_NAME: &str = "sched_unobserved";
/// The format of [`SWITCH_UNOBSERVED_NAME`]: the `errno` of the refusal, or 0 for the bound.
pub const SWITCH_UNOBSERVED_FORMAT: &str = "errno={errno}";

/// The name of the built-in tracepoint that records an async task being woken (kind
/// [`Start`](crate::entry::Kind::Start), class [`CLASS_MESSAGES`]), written on the waking
/// thread when it wakes the task: from then until the task's next poll the task is
/// scheduled, not idle. `ttrace-tracing` writes it from tokio's waker events (tokio built
/// with `--cfg tokio_unstable` and its `tracing` feature).
pub const WAKE_NAME: &str = "task_wake";
/// The format of [`WAKE_NAME`]: the id of the woken task's span instance (tokio's
/// `runtime.spawn` span, entered around each poll of the task), as the span's own events
/// record it.
pub const WAKE_FORMAT: &str = "span={span:x}";

/// Bytes of the `header` file.
pub const HEADER_BYTES: usize = 4096;
/// Bytes of the rules text area (enable/disable wildcard rules, one per line).
pub const RULES_BYTES: usize = HEADER_BYTES - 512;

/// Which clock the device's timestamps come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum ClockSource {
    /// The x86-64 time-stamp counter (invariant TSC), at `tsc_hz` ticks per second.
    Tsc = 1,
    /// `CLOCK_MONOTONIC` in nanoseconds (`tsc_hz` is then 1e9).
    MonotonicNs = 2,
}

impl ClockSource {
    /// The clock for a raw header value, if known.
    pub const fn from_raw(raw: u32) -> Option<ClockSource> {
        match raw {
            1 => Some(ClockSource::Tsc),
            2 => Some(ClockSource::MonotonicNs),
            _ => None,
        }
    }
}

/// The device header (`version` in Akaros terms), plus the shared control words.
#[derive(FromBytes, IntoBytes, KnownLayout)]
#[repr(C, align(128))]
pub struct DeviceHeader {
    // ---- identity: written once before publication, read-only afterwards ----
    /// [`MAGIC`], also revealing the byte order.
    pub magic: u64,
    /// [`HEADER_VERSION`] of the writer that created the device.
    pub header_version: u32,
    /// [`SHARED_DATA_VERSION`].
    pub shared_data_version: u32,
    /// [`PERCPU_DATA_VERSION`].
    pub percpu_data_version: u32,
    /// Number of CPUs the device has rings for: each CPU `c` has a restartable ring (file
    /// `cpu{c}`, index `c`) and a shared ring (file `cpu{c}.shared`, index `num_cpus + c`);
    /// see [`crate::ring`]. Higher CPU ids fold onto the shared rings.
    pub num_cpus: u32,
    /// Slots per ring, a power of two, at least 2.
    pub ring_slots: u64,
    /// Bytes of each ring's aux buffer, a power of two (the `aux` file holds one per ring,
    /// in ring order).
    pub aux_size: u64,
    /// `aux_size - 1`.
    pub aux_mask: u64,
    /// Bytes of the `meta` file.
    pub meta_size: u64,
    /// Capacity of the tracepoint table.
    pub max_tracepoints: u32,
    /// [`ClockSource`] as a raw value.
    pub clock: u32,
    /// Ticks per second of the clock (calibrated at creation for the TSC).
    pub tsc_hz: u64,
    /// Clock anchor: a timestamp read at the same moment as the two times below.
    pub anchor_tsc: u64,
    /// `CLOCK_REALTIME` at the anchor, nanoseconds since the Unix epoch.
    pub anchor_realtime_ns: u64,
    /// `CLOCK_MONOTONIC` at the anchor, nanoseconds.
    pub anchor_monotonic_ns: u64,
    /// Process that created the device.
    pub creator_pid: u32,
    /// Reserved flags, zero.
    pub flags: u32,
    _reserved: [u64; 3],

    // ---- control (offset 128) ----
    /// Class mask: a tracepoint records only if `type_mask & classes != 0`.
    pub type_mask: AtomicU64,
    /// Incremented by every control change (mask or rules).
    pub ctl_generation: AtomicU64,
    /// The timestamp of the last clear (`ttrace-reader clear`): readers show no entry and no
    /// message stamped at or before it. 0: never cleared (a stamp is never 0). Only grows.
    pub cleared_at: AtomicU64,
    /// Clears so far (each under `meta_lock`, after `cleared_at` and the rings' clear words).
    pub clears: AtomicU64,
    /// The kernel's view of the threads ([`SWITCH_OUT_NAME`]): threads whose context
    /// switches a process of the device records, since the device was created.
    pub switch_threads: AtomicU64,
    /// Threads whose switches are not recorded because their process observes as many as
    /// its bound allows (their time off the CPU is unknown, never guessed).
    pub switch_unobserved: AtomicU64,
    /// The `errno` of the last refusal of `perf_event_open` to a process of the device
    /// (0: never refused): its threads' switches are not recorded.
    pub switch_refused: AtomicU64,
    /// Switch records the kernel dropped because a thread's buffer was full before it was
    /// drained.
    pub switch_lost: AtomicU64,
    _pad_ctl: [u64; 8],

    // ---- snapshots (offset 256) ----
    /// Snapshots asked for by triggers (a program's `trigger()`, its panic hook, the rules
    /// its saver applies), in every process of the device.
    pub triggers: AtomicU64,
    /// Of those, triggers a snapshot already coming covered (asked for within its window).
    pub triggers_merged: AtomicU64,
    /// Of those, triggers the rate policy put off (within an interval of the last snapshot:
    /// granted a snapshot one interval after it).
    pub triggers_put_off: AtomicU64,
    /// Snapshots saved by the device's processes.
    pub snapshots_saved: AtomicU64,
    /// Snapshots that could not be saved (the reason goes to the saver's standard error).
    pub snapshots_failed: AtomicU64,
    /// Snapshot files removed to keep within the retention limits.
    pub snapshots_removed: AtomicU64,
    /// When the last snapshot was granted (a timestamp of the device's clock; 0: never):
    /// the rate policy of every process of the device measures from it.
    pub last_snapshot_at: AtomicU64,
    /// The thread that last began to apply the snapshot rules installed in the device
    /// (`ttrace_snapshots::apply_snapshot_rules`), as a lock word names its owner (`tid << 32 |
    /// start tag`; 0: none ever did), so that `ctl on` can say when no live process applies
    /// them.
    pub rules_applier: AtomicU64,
    _reserved_snapshots: [u64; 8],

    // ---- metadata control (offset 384), written under `meta_lock` ----
    /// Metadata and control lock word: 0 free, else the owner's `tid << 32 | start tag`
    /// (the low 32 bits of the thread's start time, so that a reused tid is not taken for
    /// the owner).
    pub meta_lock: AtomicU64,
    /// Bytes of the tracepoint record area in use.
    pub meta_used: AtomicU64,
    /// Tracepoint records that did not fit and were dropped.
    pub meta_dropped: AtomicU64,
    /// Tracepoints registered (ids `0..tp_count`).
    pub tp_count: AtomicU64,
    /// Bytes of `rules` in use.
    pub rules_len: AtomicU64,
    /// Compactions of the names area so far; the half in use is `names_generation & 1`.
    pub names_generation: AtomicU64,
    /// Bytes of records in each half of the names area.
    pub names_used: [AtomicU64; 2],
    /// Names that did not fit even after a compaction, and were dropped.
    pub names_dropped: AtomicU64,
    /// Names reclaimed by compactions (no event in the rings named by them, their thread gone).
    pub names_reclaimed: AtomicU64,
    _pad_meta: [u64; 6],

    // ---- rules (offset 512) ----
    /// Wildcard enable/disable rules, one per line: `+pattern` or `-pattern`.
    pub rules: [AtomicU8; RULES_BYTES],
}

assert_eq_size!(DeviceHeader, [u8; HEADER_BYTES]);
const_assert_eq!(core::mem::align_of::<DeviceHeader>(), 128);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, magic), 0);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, header_version), 8);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, shared_data_version), 12);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, percpu_data_version), 16);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, num_cpus), 20);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, aux_size), 32);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, aux_mask), 40);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, meta_size), 48);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, max_tracepoints), 56);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, clock), 60);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, anchor_tsc), 72);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, anchor_realtime_ns), 80);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, anchor_monotonic_ns), 88);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, flags), 100);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, ctl_generation), 136);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, cleared_at), 144);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, clears), 152);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, switch_threads), 160);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, switch_unobserved), 168);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, switch_refused), 176);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, switch_lost), 184);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, _pad_ctl), 192);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, triggers), 256);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, last_snapshot_at), 304);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, rules_applier), 312);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, meta_used), 392);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, meta_dropped), 400);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, tp_count), 408);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, rules_len), 416);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, names_generation), 424);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, names_used), 432);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, names_dropped), 448);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, names_reclaimed), 456);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, ring_slots), 24);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, tsc_hz), 64);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, creator_pid), 96);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, type_mask), 128);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, meta_lock), 384);
const_assert_eq!(core::mem::offset_of!(DeviceHeader, rules), 512);

/// Why a device header cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderError {
    /// The magic is that of a device written with the other byte order.
    ByteOrder,
    /// The magic is not a ttrace magic at all.
    BadMagic(u64),
    /// The magic is that of a pre-release ttrace's device ([`PRE_RELEASE_MAGIC`]): a layout
    /// older than this one, not read.
    PreRelease,
    /// A layout version whose major part this code does not know.
    Version {
        /// Which version field.
        which: &'static str,
        /// Its value.
        found: u32,
        /// The version this code implements.
        expected: u32,
    },
    /// A size or count is out of range.
    Field {
        /// Which field.
        which: &'static str,
        /// Its value.
        value: u64,
    },
}

impl core::fmt::Display for HeaderError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            HeaderError::ByteOrder => write!(f, "written with the other byte order"),
            HeaderError::BadMagic(m) => write!(f, "bad magic {m:#018x}"),
            HeaderError::PreRelease => write!(
                f,
                "a device of a pre-release ttrace (layout {PRE_RELEASE_LAYOUT}); this ttrace \
                 reads layout {}.{}",
                HEADER_VERSION >> 16,
                HEADER_VERSION & 0xffff
            ),
            HeaderError::Version {
                which,
                found,
                expected,
            } => write!(
                f,
                "{which} {}.{} is not supported (this is {}.{})",
                found >> 16,
                found & 0xffff,
                expected >> 16,
                expected & 0xffff
            ),
            HeaderError::Field { which, value } => write!(f, "{which} {value} is out of range"),
        }
    }
}

impl core::error::Error for HeaderError {}

/// Largest number of CPUs a device may have rings for (it has twice as many rings).
pub const MAX_CPUS: u32 = 4096;
/// Largest number of slots per ring.
pub const MAX_RING_SLOTS: u64 = 1 << 24;
/// Smallest aux buffer (it must hold a few maximal records).
pub const MIN_AUX_BYTES: u64 = 1 << 14;
/// Largest aux buffer (of one ring).
pub const MAX_AUX_BYTES: u64 = 1 << 30;
/// Largest metadata file.
pub const MAX_META_BYTES: u64 = 1 << 30;

impl DeviceHeader {
    /// Checks the identity part: magic, versions, and that every size is in range and
    /// consistent. A header that passes can be used to size and map the other files.
    pub fn check(&self) -> Result<(), HeaderError> {
        if self.magic != MAGIC {
            return Err(if self.magic == MAGIC.swap_bytes() {
                HeaderError::ByteOrder
            } else if self.magic == PRE_RELEASE_MAGIC {
                HeaderError::PreRelease
            } else {
                HeaderError::BadMagic(self.magic)
            });
        }
        for (which, found, expected) in [
            ("header version", self.header_version, HEADER_VERSION),
            (
                "shared data version",
                self.shared_data_version,
                SHARED_DATA_VERSION,
            ),
            (
                "per-cpu data version",
                self.percpu_data_version,
                PERCPU_DATA_VERSION,
            ),
        ] {
            if major(found) != major(expected) {
                return Err(HeaderError::Version {
                    which,
                    found,
                    expected,
                });
            }
        }
        let field = |which, value: u64, ok: bool| {
            if ok {
                Ok(())
            } else {
                Err(HeaderError::Field { which, value })
            }
        };
        let n = self.num_cpus;
        field("cpu count", n as u64, (1..=MAX_CPUS).contains(&n))?;
        let s = self.ring_slots;
        field(
            "ring size",
            s,
            s.is_power_of_two() && (2..=MAX_RING_SLOTS).contains(&s),
        )?;
        let a = self.aux_size;
        field(
            "aux size",
            a,
            a.is_power_of_two() && (MIN_AUX_BYTES..=MAX_AUX_BYTES).contains(&a),
        )?;
        field("aux mask", self.aux_mask, self.aux_mask == a - 1)?;
        let t = self.max_tracepoints;
        field(
            "tracepoint capacity",
            t as u64,
            (1..=crate::entry::TypeWord::MAX_TRACEPOINTS).contains(&t),
        )?;
        let m = self.meta_size;
        field(
            "metadata size",
            m,
            m % 8 == 0 && m > crate::meta::records_offset(t) && m <= MAX_META_BYTES,
        )?;
        field(
            "clock",
            self.clock as u64,
            ClockSource::from_raw(self.clock).is_some(),
        )?;
        field("clock rate", self.tsc_hz, self.tsc_hz > 0)?;
        Ok(())
    }
}
