//! A device's counters and control words at one moment.

use crate::mapping::ReadMapping;
use crate::sync::AtomicWord;

/// The device's counters and control words at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// Class mask: a tracepoint records only if its classes intersect it.
    pub mask: u64,
    /// Control changes so far.
    pub ctl_generation: u64,
    /// Aux bytes written since creation, in all buffers.
    pub aux_bytes: u64,
    /// Aux records written since creation into the shared rings' buffers (those of the
    /// restartable rings are counted in what a reader finds: a restartable sequence cannot
    /// keep a second counter exact).
    pub aux_records: u64,
    /// Of those, records whose payload was truncated.
    pub aux_truncated: u64,
    /// Aux writes dropped (only a shared ring's buffer drops: it does not overtake a record
    /// still being written).
    pub aux_dropped: u64,
    /// Bytes of tracepoint records.
    pub meta_used: u64,
    /// Tracepoint records dropped (area full).
    pub meta_dropped: u64,
    /// Tracepoints registered.
    pub tracepoints: u64,
    /// Compactions of the names area so far.
    pub names_generation: u64,
    /// Bytes of names in the half in use.
    pub names_used: u64,
    /// Names reclaimed by compactions since creation.
    pub names_reclaimed: u64,
    /// Names dropped: they did not fit even after a compaction.
    pub names_dropped: u64,
    /// Clears so far (`ttrace-reader clear`).
    pub clears: u64,
    /// The timestamp of the last clear (0: never cleared): nothing stamped at or before it
    /// is shown.
    pub cleared_at: u64,
    /// Triggers and snapshots taken by the device's programs.
    pub snapshots: crate::triggers::SnapshotCounts,
    /// The kernel's view of the threads: whose context switches are recorded.
    pub switches: Switches,
}

/// Whose context switches the device's processes record (`ttrace_core::switches`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Switches {
    /// Threads observed since the device was created.
    pub threads: u64,
    /// Threads not observed: their process observed as many as its bound allows.
    pub unobserved: u64,
    /// The `errno` of the last refusal of `perf_event_open` (0: never refused).
    pub refused: u64,
    /// Switch records the kernel dropped (a thread's buffer full before it was drained).
    pub lost: u64,
}

impl Switches {
    /// What a reader says of them, once (`stats`, a dump's header), or `None` where no
    /// process asked for them.
    ///
    /// ```
    /// let s = devttrace::status::Switches { refused: 1, ..Default::default() };
    /// assert_eq!(s.line().unwrap(), "switches: not recorded: perf_event_open refused (EPERM)");
    /// ```
    pub fn line(&self) -> Option<String> {
        if self.refused != 0 {
            let name = match self.refused as i32 {
                libc::EPERM => "EPERM".to_string(),
                libc::EACCES => "EACCES".to_string(),
                libc::ENOSYS => "ENOSYS".to_string(),
                libc::EMFILE => "EMFILE".to_string(),
                libc::ENOMEM => "ENOMEM".to_string(),
                e => format!("errno {e}"),
            };
            let mut s = format!("switches: not recorded: perf_event_open refused ({name})");
            if self.threads > 0 {
                s += &format!(" (recorded for {} threads before)", self.threads);
            }
            return Some(s);
        }
        if self.threads == 0 && self.unobserved == 0 {
            return None;
        }
        Some(format!(
            "switches: recorded for {} threads, {} threads not observed (over the bound), {} records lost",
            self.threads, self.unobserved, self.lost
        ))
    }
}

impl Status {
    /// The counters and control words of `map` now.
    pub(crate) fn of(map: &ReadMapping) -> Status {
        let h = map.header();
        let load = |a: &std::sync::atomic::AtomicU64| a.load_acquire();
        let rings = || (0..map.num_rings()).map(|r| map.ring_header(r));
        let sum = |f: fn(&ttrace_layouts::ring::RingHeader) -> &std::sync::atomic::AtomicU64| {
            rings().map(|r| load(f(r))).fold(0u64, u64::wrapping_add)
        };
        Status {
            mask: load(&h.type_mask),
            ctl_generation: load(&h.ctl_generation),
            aux_bytes: sum(|r| &r.aux_last),
            aux_records: sum(|r| &r.aux_records),
            aux_truncated: sum(|r| &r.aux_truncated),
            aux_dropped: sum(|r| &r.aux_dropped),
            meta_used: load(&h.meta_used),
            meta_dropped: load(&h.meta_dropped),
            tracepoints: load(&h.tp_count),
            names_generation: load(&h.names_generation),
            names_used: load(&h.names_used[(load(&h.names_generation) & 1) as usize]),
            names_reclaimed: load(&h.names_reclaimed),
            names_dropped: load(&h.names_dropped),
            clears: crate::clear::clears(h),
            cleared_at: crate::clear::cleared_at(h),
            snapshots: crate::triggers::counts(h),
            switches: Switches {
                threads: load(&h.switch_threads),
                unobserved: load(&h.switch_unobserved),
                refused: load(&h.switch_refused),
                lost: load(&h.switch_lost),
            },
        }
    }
}
