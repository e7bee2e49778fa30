//! Thread and process names: a two-half area that is compacted, never appended to forever.
//!
//! A name record says which name a thread (or process) id had from its timestamp on;
//! readers resolve an event's `pid/tid` to the record of that id current at the event's
//! time. Records are appended to the half in use under the metadata lock; when it is full,
//! the appender compacts ([`Names::compact`]) into the other half and flips the generation.
//!
//! What the code relies on, argued in `docs/DESIGN.md` (*Names that do not grow with
//! uptime*): liveness is decided before the rings are scanned, so a record is reclaimed only
//! if its thread is dead and no event in the rings resolves to it; a reader that finds the
//! same generation before and after its copy of the rings has every name they need.
//!
//! When the records still needed would leave less than a quarter of the half free, the
//! appender's compaction *evicts* the oldest of them (never a live thread's or process's
//! latest record) and writes an [`EvictedRecord`] first in the new half: every event of an
//! evicted record is stamped before its `before`, and readers show an event before it whose
//! id has no record at or before it unnamed (and count it) instead of taking the id's first
//! record. A compaction thus always leaves a quarter free, or, when live threads' names fill
//! the half, records that it could not, and writers drop names without compacting until a
//! quarter of a half's worth more were dropped: never a compaction per new thread.

use crate::error::{Error, Result};
use crate::lock::Guard;
use crate::meta::{copy_words, record, store_record};
use crate::ring::{Ring, SlotRead};
use crate::sync::{AtomicWord, Ordering::*};
use core::sync::atomic::{fence, AtomicU64};
use std::collections::HashMap;
use ttrace_layouts::device::DeviceHeader;
use ttrace_layouts::entry::{Slot, Stamp};
use ttrace_layouts::meta::{self as layout, EvictedRecord, Record, RecordHeader, RecordKind};
use zerocopy::{FromBytes, IntoBytes};

/// What one compaction did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Compaction {
    /// Records kept.
    pub kept: u64,
    /// Records reclaimed (no event in the rings needed them, their thread gone).
    pub reclaimed: u64,
    /// Records evicted though events in the rings still needed them (the oldest, to leave
    /// a quarter of the half free): those events show unnamed.
    pub evicted: u64,
    /// Bytes in use afterwards.
    pub used: u64,
}

/// Bytes of the [`EvictedRecord`] that starts a half after an eviction. A half keeps room for
/// it: records are appended only up to its capacity less these bytes.
const EVICTED_BYTES: u64 = layout::record_bytes(0);

/// The position of a record in the area, and the facts compaction needs.
struct Found {
    start: usize,
    len: usize,
    thread: bool,
    pid: u32,
    tid: u32,
    timestamp: u64,
}

/// The names area of a device ([`Mapping::names`](crate::Mapping::names)): two halves, the
/// header's `names_generation` saying which is in use and `names_used[half]` how much of it.
#[derive(Clone, Copy)]
pub struct Names<'a> {
    header: &'a DeviceHeader,
    /// Both halves, one after the other.
    area: &'a [AtomicU64],
}

impl<'a> Names<'a> {
    /// The names area of the device `header`.
    pub(crate) fn new(header: &'a DeviceHeader, area: &'a [AtomicU64]) -> Names<'a> {
        Names { header, area }
    }

    /// Half `half` (0 or 1) of the area.
    fn half(&self, half: usize) -> &'a [AtomicU64] {
        let n = self.area.len() / 2;
        &self.area[half * n..(half + 1) * n]
    }

    /// Bytes of a half.
    fn capacity(&self) -> u64 {
        (self.area.len() / 2) as u64 * 8
    }

    /// Bytes of a half that records may take (the rest is kept for an [`EvictedRecord`]).
    fn space(&self) -> u64 {
        self.capacity().saturating_sub(EVICTED_BYTES)
    }

    /// The generation of the names area: how many compactions it has had. A reader that
    /// copies the rings and then the names, and finds the same generation before and after,
    /// has every name its events need.
    pub fn generation(&self) -> u64 {
        // Acquire: pairs with the Release of a compaction, as in `names_bytes`.
        self.header.names_generation.load_acquire()
    }

    /// A consistent copy of the names records in use, with the generation they belong to.
    pub fn copy(&self) -> (u64, Vec<u8>) {
        let h = self.header;
        let mut tries = 0;
        loop {
            // Acquire: a compaction's copy into the new half happened before its Release
            // store of the generation.
            let g = h.names_generation.load_acquire();
            let half = (g & 1) as usize;
            // Acquire: pairs with the Release store that published the records below it.
            let used = h.names_used[half].load_acquire();
            let bytes = copy_words(self.half(half), used);
            // Acquire fence: the copy's loads come before the generation is read again, so
            // a compaction that overwrote this half (two flips later) is seen.
            fence(Acquire);
            tries += 1;
            if h.names_generation.load(Relaxed) == g || tries >= 64 {
                return (g, bytes);
            }
        }
    }

    /// The [`EvictedRecord`] that starts half `half`, holding `used` bytes, if it has one;
    /// the caller holds the metadata lock.
    fn evictions(&self, half: usize, used: u64) -> Option<EvictedRecord> {
        if used < EVICTED_BYTES {
            return None;
        }
        // Only a compaction writes it, under the lock the caller holds (and before the
        // Release store that made the half current): the lock ordered us after it.
        let bytes = copy_words(
            &self.half(half)[..EVICTED_BYTES as usize / 8],
            EVICTED_BYTES,
        );
        let (head, body) = RecordHeader::read_from_prefix(&bytes).ok()?;
        (head.kind == RecordKind::Evicted as u16 && head.len as u64 == EVICTED_BYTES)
            .then(|| EvictedRecord::read_from_prefix(body).ok().map(|(e, _)| e))
            .flatten()
    }

    /// Appends a name record; the caller holds the metadata lock. When the half in use is
    /// full, compacts (keeping what the events in `rings` need, evicting the oldest of that
    /// if a quarter of the half would not be free) unless the last compaction could not
    /// free a quarter and too few names were dropped since; a record that does not fit then
    /// is dropped and counted.
    pub(crate) fn append(
        &self,
        guard: &Guard<'_>,
        rec: &[u8],
        rings: &[Ring<'_, Slot>],
    ) -> Result<()> {
        let h = self.header;
        // Relaxed: only holders of the metadata lock change these; the lock ordered us.
        let half = (h.names_generation.load(Relaxed) & 1) as usize;
        let used = h.names_used[half].load(Relaxed);
        let len = rec.len() as u64;
        // The last compaction could not free a quarter (live names fill the half): not again
        // before enough names more were dropped.
        let quiet = || {
            self.evictions(half, used)
                // Relaxed: a counter that only holders of the lock change, as we are.
                .is_some_and(|e| h.names_dropped.load(Relaxed) < e.quiet_until_dropped)
        };
        let (half, used) = if used + len <= self.space() || quiet() {
            (half, used)
        } else {
            let c = self.compact_for(guard, rings, len);
            (1 - half, c.used)
        };
        if used + len > self.space() {
            h.names_dropped.fetch_add(1, Relaxed);
            return Err(Error::MetadataFull);
        }
        store_record(self.half(half), used, rec);
        // Release: publishes the record to readers that acquire the count.
        h.names_used[half].store(used + len, Release);
        Ok(())
    }

    /// Copies the records that a live thread or an event in `rings` may still need into
    /// the other half and makes it the half in use; the caller holds the metadata lock.
    /// Evicts nothing: the half is left as full as what is needed makes it.
    pub fn compact(&self, guard: &Guard<'_>, rings: &[Ring<'_, Slot>]) -> Compaction {
        self.compact_for(guard, rings, 0)
    }

    /// [`Names::compact`], for an appender that needs `room` bytes (0: none). With `room`,
    /// the oldest records still needed are evicted until a quarter of the half (and
    /// `room`) is free, except live threads' (processes') latest records; if those alone
    /// leave less than a quarter free, writers are told not to compact again until a
    /// quarter of a half's worth of names more were dropped.
    fn compact_for(&self, _guard: &Guard<'_>, rings: &[Ring<'_, Slot>], room: u64) -> Compaction {
        let h = self.header;
        // Relaxed: only holders of the metadata lock change these.
        let g = h.names_generation.load(Relaxed);
        let from = (g & 1) as usize;
        let to = 1 - from;
        let bytes = copy_words(self.half(from), h.names_used[from].load(Relaxed));
        let mut evictions = EvictedRecord::default();
        let mut found = Vec::new();
        let mut walk = layout::records(&bytes);
        loop {
            let start = walk.offset();
            let Some(Ok(r)) = walk.next() else { break };
            let (thread, task) = match r {
                Record::Thread { task, .. } => (true, task),
                Record::Process { task, .. } => (false, task),
                Record::Evicted { evicted } => {
                    evictions = evicted;
                    continue;
                }
                _ => continue,
            };
            found.push(Found {
                start,
                len: walk.offset() - start,
                thread,
                pid: task.pid,
                tid: task.tid,
                timestamp: task.timestamp,
            });
        }
        // Each id's records in time order: threads by `pid << 32 | tid`, processes by pid.
        let key = |f: &Found| (f.thread, (f.pid as u64) << 32 | f.tid as u64);
        let mut by_id: HashMap<(bool, u64), Vec<usize>> = HashMap::new();
        for (i, f) in found.iter().enumerate() {
            by_id.entry(key(f)).or_default().push(i);
        }
        for list in by_id.values_mut() {
            list.sort_by_key(|&i| found[i].timestamp);
        }
        let mut keep = vec![false; found.len()];
        // A live thread's (process's) latest record: kept, never evicted.
        let mut live = vec![false; found.len()];
        // Liveness first (see the module's comment for why the order matters): one listing
        // of `/proc/<pid>/task` per process named.
        let mut tasks: HashMap<u32, Tasks> = HashMap::new();
        for (&(thread, id), list) in &by_id {
            let (pid, tid) = ((id >> 32) as u32, id as u32);
            let alive = match tasks.entry(pid).or_insert_with(|| Tasks::of(pid)) {
                Tasks::Unknown => true,
                Tasks::Live(tids) => !thread || tids.contains(&tid),
                Tasks::Gone => false,
            };
            if alive {
                let latest = *list.last().expect("an id has a record");
                keep[latest] = true;
                live[latest] = true;
            }
        }
        // Then every record an event in the rings resolves to, as readers resolve it: the
        // id's latest record at or before the event, or its first for an event that
        // precedes them all, unless the event is older than the evictions' `before` (it
        // shows unnamed whatever is kept). The latest such event of each record is noted:
        // if the record is evicted, `before` moves past it.
        let before = evictions.before;
        let pick = |list: &Vec<usize>, stamp: u64| {
            let k = list.partition_point(|&i| found[i].timestamp <= stamp);
            (k > 0 || stamp >= before).then(|| list[k.saturating_sub(1)])
        };
        let mut latest_event = vec![0u64; found.len()];
        // Entries come in runs from one writer: its lists are looked up once per run.
        type Lists<'a> = (Option<&'a Vec<usize>>, Option<&'a Vec<usize>>);
        let mut last: Option<(u64, Lists<'_>)> = None;
        for ring in rings {
            for i in 0..scanned(ring) {
                let SlotRead::Committed(w) = ring.read(i) else {
                    continue;
                };
                let stamp = Stamp(w[0]);
                if stamp.is_continuation() {
                    continue;
                }
                let ctx = w[2];
                let (threads, processes) = match last {
                    Some((c, lists)) if c == ctx => lists,
                    _ => {
                        let lists = (
                            by_id.get(&(true, ctx)),
                            by_id.get(&(false, ctx >> 32 << 32)),
                        );
                        last = Some((ctx, lists));
                        lists
                    }
                };
                for list in [threads, processes].into_iter().flatten() {
                    if let Some(k) = pick(list, stamp.0) {
                        keep[k] = true;
                        latest_event[k] = latest_event[k].max(stamp.0);
                    }
                }
            }
        }
        let space = self.space();
        let quarter = self.capacity() / 4;
        let mut kept_bytes: u64 = (found.iter().zip(&keep))
            .filter(|(_, &k)| k)
            .map(|(f, _)| f.len as u64)
            .sum();
        let mut evicted = 0;
        // Evict (oldest first, so that an id's evicted records all precede its kept ones)
        // until a quarter and `room` are free, the record of the evictions included.
        let target = space.saturating_sub(room.max(quarter));
        if room > 0 && kept_bytes + EVICTED_BYTES > target {
            let mut oldest: Vec<usize> =
                (0..found.len()).filter(|&i| keep[i] && !live[i]).collect();
            oldest.sort_by_key(|&i| (found[i].timestamp, i));
            for i in oldest {
                if kept_bytes + EVICTED_BYTES <= target {
                    break;
                }
                keep[i] = false;
                kept_bytes -= found[i].len as u64;
                evicted += 1;
                evictions.before = evictions.before.max(latest_event[i].saturating_add(1));
            }
        }
        evictions.count += evicted;
        let marked = evictions.before > 0 || evictions.count > 0;
        let used_after = kept_bytes + if marked { EVICTED_BYTES } else { 0 };
        if used_after + quarter > space {
            if room > 0 {
                // In vain: live names fill the half. Not again before a quarter of a half's
                // worth of names more were dropped.
                let names = (quarter / layout::record_bytes(15)).max(1);
                // Relaxed: a counter; writers that change it hold the lock, as we do.
                evictions.quiet_until_dropped = h.names_dropped.load(Relaxed) + names;
            }
        } else {
            evictions.quiet_until_dropped = 0;
        }
        let words = self.half(to);
        let mut used = 0u64;
        if marked || evictions.quiet_until_dropped > 0 {
            let rec = record(RecordKind::Evicted, evictions.as_bytes(), &[]);
            store_record(words, used, &rec);
            used += rec.len() as u64;
        }
        let mut kept = 0;
        for (f, _) in found.iter().zip(&keep).filter(|(_, &k)| k) {
            store_record(words, used, &bytes[f.start..f.start + f.len]);
            used += f.len as u64;
            kept += 1;
        }
        let reclaimed = found.len() as u64 - kept - evicted;
        h.names_used[to].store(used, Relaxed);
        h.names_reclaimed.fetch_add(reclaimed, Relaxed);
        // Release: the new half and its count are complete before a reader that acquires
        // the new generation looks at them.
        h.names_generation.store(g + 1, Release);
        Compaction {
            kept,
            reclaimed,
            evicted,
            used,
        }
    }
}

/// The slots of `ring` that can hold an entry: all of them once its positions wrapped, else
/// those below its head (and the two above, which a restartable writer stopped between its
/// commit and its head store may have filled). A ring written by few events is not read to
/// its end (nor its untouched pages brought in).
fn scanned(ring: &Ring<'_, Slot>) -> usize {
    // Acquire: pairs with a restartable writer's Release store of the head (a shared
    // ring's positions are taken before their slots are claimed, so its head is already
    // past every slot written).
    let head = ring.head();
    let n = ring.slot_count();
    usize::try_from(head.saturating_add(2)).map_or(n, |h| h.min(n))
}

/// What `/proc` says of a process's threads.
enum Tasks {
    /// It cannot tell (no `/proc`, no permission): everything counts as alive.
    Unknown,
    /// The process is alive with these threads.
    Live(std::collections::HashSet<u32>),
    /// The process is gone.
    Gone,
}

impl Tasks {
    fn of(pid: u32) -> Tasks {
        match std::fs::read_dir(format!("/proc/{pid}/task")) {
            Ok(dir) => Tasks::Live(
                dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                    .collect(),
            ),
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    && std::path::Path::new("/proc/self").exists() =>
            {
                Tasks::Gone
            }
            Err(_) => Tasks::Unknown,
        }
    }
}

/// The names records of two copies, `before` and `after` some other copy (of the rings):
/// `after`'s, and if a compaction came between them, also `before`'s records that `after`
/// lacks, as far as `limit` bytes hold them.
pub(crate) fn union(before: (u64, Vec<u8>), after: (u64, Vec<u8>), limit: usize) -> Vec<u8> {
    let (mut out, old) = (after.1, before.1);
    if before.0 == after.0 {
        return out;
    }
    let mut have = std::collections::HashSet::new();
    let mut walk = layout::records(&out);
    loop {
        let start = walk.offset();
        let Some(Ok(_)) = walk.next() else { break };
        have.insert(out[start..walk.offset()].to_vec());
    }
    let mut walk = layout::records(&old);
    loop {
        let start = walk.offset();
        let Some(Ok(_)) = walk.next() else { break };
        let rec = &old[start..walk.offset()];
        if !have.contains(rec) && out.len() + rec.len() <= limit {
            out.extend_from_slice(rec);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ttrace_layouts::meta::{RecordKind, TaskRecord};
    use zerocopy::IntoBytes;

    fn rec(tid: u32, name: &str) -> Vec<u8> {
        let task = TaskRecord {
            pid: 1,
            tid,
            timestamp: tid as u64,
            name_len: name.len() as u16,
            ..TaskRecord::default()
        };
        crate::meta::record(RecordKind::Thread, task.as_bytes(), &[name.as_bytes()])
    }

    #[test]
    fn a_union_adds_what_a_compaction_reclaimed_between_the_copies() {
        let (a, b, c) = (rec(1, "a"), rec(2, "b"), rec(3, "c"));
        let before = [a.clone(), b.clone()].concat();
        let after = [b.clone(), c.clone()].concat();
        // No compaction between: the later copy holds everything.
        assert_eq!(
            union((4, before.clone()), (4, after.clone()), 1 << 20),
            after
        );
        // One between: `a` was reclaimed after the first copy, and comes back once.
        let both = union((4, before.clone()), (5, after.clone()), 1 << 20);
        assert_eq!(both, [b.clone(), c.clone(), a.clone()].concat());
        // Never past the limit: the later copy first, then what fits.
        let cut = union((4, before), (5, after.clone()), after.len());
        assert_eq!(cut, after);
    }
}
