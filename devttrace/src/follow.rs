//! Following a device live: each poll releases, in time order, the events committed since
//! the last, reading only what is new.
//!
//! **What is new.** Every ring keeps a cursor, the next position to read. A poll loads each
//! ring's `head` and reads the positions between the cursor and it, each slot once with the
//! stamp check and the position tag ([`Ring::at`](crate::ring::Ring::at)): an entry tagged with its position
//! is that position's, whole; one tagged with a later position means that position was
//! overwritten before it could be read (counted lost). An idle ring costs one load. In a
//! shared ring a position below `head` may still be being written (writers reserve before
//! they write): it waits, and is read again at the next polls until it commits, or until it
//! leaves the ring uncommitted: lost if something was overwritten there, else given up (its
//! writer skipped it, finding the slot still claimed by a stalled or dead one, or died
//! before writing). Aux buffers are copied only when their `last` moved, the metadata only
//! when it grew.
//!
//! **Every position once.** Each position from where following began settles exactly once,
//! as read (the slot of an event taken, its parent's or its continuation's), lost or given
//! up, so that per ring the three add up to the positions passed ([`Follower::totals`]). A
//! continuation has no position tag: it is read with its parent when the parent, read at the
//! position before, stitched it; it settles as its parent did when the parent was lost or
//! given up, and waits with a parent still being written (a shared ring's writer commits the
//! continuation first). Any other continuation is not this position's: a later lap's (lost),
//! or, in a shared ring, an earlier lap's at a position not yet claimed by its writer (it
//! waits).
//!
//! **Time order.** Events read are held, then released in time order once no ring can still
//! deliver an older one: the *watermark* is the time of the poll's read, less the reorder
//! window where a ring has positions still being written, and never earlier than the window
//! allows. A restartable ring takes its timestamp inside the restartable sequence that
//! commits it, so its events are never held long; a writer stalled between its timestamp and
//! its commit for longer than the window (a shared-ring writer preempted, or SIGSTOPped)
//! commits an event older than what was already released: it is released at once and counted
//! as *late* ([`Poll::late`]; [`Poll::released_before`] tells which are). A device whose
//! writers record context switches (its header's `switch_threads`) gets those a drain period
//! after they happened: there, the watermark is always a window behind. An event stamped
//! at a time no event of the device can have ([`Reader::stamps`]: damaged) is released at
//! once, to be counted damaged by its check: never held, never late, no gap's time.

use crate::aux::AuxSnapshots;
use crate::error::Result;
use crate::event::{Accounting, Event, RingSnapshot};
use crate::mapping::ReadMapping;
use crate::meta::{Metadata, TaskInfo};
use crate::reader::Reader;
use crate::ring::{Found, Ring, SlotWords};
use crate::snapshot::Snapshot;
use crate::status::Status;
use crate::sync::AtomicWord;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;

/// The default reorder window: how long a read event may wait for older ones.
pub const DEFAULT_WINDOW_NS: u64 = 30_000_000;

/// Follows one device.
pub struct Follower<'d> {
    dev: &'d Reader,
    /// The reorder window, in clock ticks.
    window: u64,
    rings: Vec<Cursor>,
    /// Per ring, the events read and not yet released, in the order read. A poll sorts
    /// them, hands out the released ones in this vector (no copy), and keeps the rest in a
    /// vector of the pool.
    held: Vec<Vec<Event>>,
    /// Per ring, a bound on the tracepoint ids of its held events (none above it).
    held_top: Vec<u16>,
    /// Emptied event vectors of polls given back ([`Follower::recycle`]), for the next
    /// polls' rings.
    pool: Vec<Vec<Event>>,
    /// Losses placed in time and not yet released ([`Poll::gaps`]).
    held_gaps: Vec<u64>,
    /// Every event released so far is stamped at or before this.
    released: u64,
    aux: AuxSnapshots,
    /// The device's metadata as last copied.
    meta: Metadata,
    /// What that copy reflects: tracepoint bytes, names generation and names bytes.
    meta_seen: (u64, u64, u64),
    /// Names the last compaction reclaimed: events read before it and still held may need
    /// them.
    reclaimed: Metadata,
    /// The counters as of the last poll that released something.
    status: Status,
    /// Its own copy of the rings, if it keeps one ([`Follower::keep_copy`]).
    copy: Option<crate::shadow::Shadow>,
}

/// One ring's cursor.
#[derive(Default)]
struct Cursor {
    /// The next position to read.
    next: u64,
    /// Positions below `next` not settled yet, and what holds each up.
    waiting: BTreeMap<u64, Wait>,
    /// What became of the positions passed since following began.
    totals: Followed,
}

/// Why a position below the cursor is not settled yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    /// Not committed yet.
    Unwritten,
    /// Its slot was found claimed for an older position: its writer will skip it.
    Blocked,
    /// A continuation whose parent, the position before, is not settled yet.
    Parent,
}

/// How one position settled, in a walk over a ring's positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Settled {
    /// An event was taken from it, stitched to the continuation in the next position.
    ReadWithNext,
    /// An event was taken from it whose continuation was overwritten: the next position is
    /// lost.
    ReadLosingNext,
    /// An event was taken from it, or it is the continuation of the one before.
    Read,
    Lost,
    GaveUp,
    Waits(Wait),
}

/// What became of the positions of one ring since a [`Follower`] began: each position from
/// `from` to `from + counts.head` is counted once, in one of the [`Accounting`]'s
/// `committed` (entries of the events taken and released: one per event, two per continued
/// one, those still held for the reorder window too), `lost` (overwritten before they could
/// be read), `skipped` (left the ring never written: skipped by their writer, or reserved by
/// one that died), `damaged` (entries of events read that were damaged, `crate::damage`:
/// not shown) and `claimed` (still being written).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Followed {
    /// The first position followed.
    pub from: u64,
    /// What became of the positions passed: `head` of them (the ring's `head` at the last
    /// poll, less `from`).
    pub counts: Accounting,
}

impl Followed {
    /// One past the last position looked at (the ring's `head` at the last poll).
    pub fn through(&self) -> u64 {
        self.from + self.counts.head
    }
}

/// What one poll found.
pub struct Poll {
    /// The events released (in `cpus[n].events`, in time order), with the device's current
    /// metadata and aux buffers to decode them.
    pub snapshot: Snapshot,
    /// Per ring: entries found overwritten before they could be read, since the last poll.
    pub lost: Vec<u64>,
    /// Per ring that lost entries in this poll: a time before which every one of them was
    /// stamped (the gap this poll placed for that ring, [`Poll::gaps`] holds it once
    /// released); 0 for a ring that lost none.
    pub lost_before: Vec<u64>,
    /// Per ring: positions that left the ring never written (skipped by their writer, or
    /// reserved by one that died).
    pub gave_up: Vec<u64>,
    /// Events released by this poll that are older than what earlier polls
    /// released (their writer stalled longer than the window).
    pub late: u64,
    /// The watermark of the previous poll: a released item stamped before it is late.
    pub released_before: u64,
    /// Where in time entries were lost, released with the events in time order: for each
    /// loss a time `G` such that every entry lost was stamped before `G` (the first event
    /// read after it, or the poll's time). A consumer that pairs events gives up what is
    /// open before it takes an event stamped at or after `G`: the exit of an entry open
    /// then may be among those lost (`ttrace_reader::matcher::Matcher`). Sorted.
    pub gaps: Vec<u64>,
    /// Every event stamped at or before this that the follower will read is released (in
    /// this poll or before).
    pub released_through: u64,
    /// Whether anything was read or is still held: a caller may poll less often when not.
    pub active: bool,
}

impl<'d> Follower<'d> {
    /// Starts following: what the device holds now counts as seen.
    pub fn new(dev: &'d Reader) -> Follower<'d> {
        Follower::with_window(dev, DEFAULT_WINDOW_NS)
    }

    /// [`Follower::new`] with a reorder window of `window_ns` nanoseconds.
    pub fn with_window(dev: &'d Reader, window_ns: u64) -> Follower<'d> {
        let core = dev.map();
        let rings = (0..dev.cpus())
            .map(|r| Cursor::at(core.ring(r).head()))
            .collect();
        // The words first, then the copy: a definition appended between the two is then
        // seen as a change at the next poll, and copied (in the other order it would be
        // taken as already copied, and its events shown unnamed).
        let meta_seen = meta_seen(core);
        Follower {
            dev,
            window: dev.version().clock.ns_to_ticks(window_ns),
            rings,
            held: (0..dev.cpus()).map(|_| Vec::new()).collect(),
            held_top: vec![0; dev.cpus()],
            pool: Vec::new(),
            held_gaps: Vec::new(),
            released: 0,
            aux: AuxSnapshots::default(),
            meta: dev.metadata(),
            meta_seen,
            reclaimed: Metadata::default(),
            status: dev.status(),
            copy: None,
        }
    }

    /// Follows from the start of the device: everything the rings and the aux buffers still
    /// hold is released first (for a device created since the reader started waiting for
    /// it); what they no longer hold is counted lost.
    pub fn from_start(dev: &'d Reader, window_ns: u64) -> Follower<'d> {
        let mut f = Follower::with_window(dev, window_ns);
        f.rings.iter_mut().for_each(|c| *c = Cursor::at(0));
        f
    }

    /// The device followed.
    pub fn reader(&self) -> &'d Reader {
        self.dev
    }

    /// From now on, keeps a copy of the rings as this follower reads them
    /// ([`crate::shadow`]), to be saved as a snapshot ([`Follower::copy`],
    /// [`Reader::save_shadow`]) after the device's rings moved on. It begins as the rings
    /// are (what the follower has not to read: the device's past), then records each event
    /// the follower reads. Each ring's copy holds a ring's worth of positions, and grows
    /// rather than overwrite an event stamped within `window_ns` of the newest it holds, by
    /// at most `max_bytes` over all rings (0 and 0: a ring's worth).
    ///
    /// ```
    /// # let tmp = tempfile::tempdir().unwrap();
    /// # devttrace::Device::open(&devttrace::Config::at(tmp.path().join("dev")))?;
    /// # let cause = ttrace_layouts::snapshot::Cause::new(ttrace_layouts::snapshot::CauseKind::Rule, "doc");
    /// let dev = devttrace::Reader::open(tmp.path().join("dev"))?;
    /// let mut follower = devttrace::Follower::new(&dev);
    /// // A second of events kept, in at most 256 MiB beyond the rings' size.
    /// follower.keep_copy(1_000_000_000, 256 << 20);
    /// let poll = follower.poll()?;
    /// // ... the rings move on, the moment is due ...
    /// dev.save_shadow(tmp.path().join("moment.ttrace"), &cause, follower.copy().unwrap())?;
    /// # Ok::<(), devttrace::Error>(())
    /// ```
    pub fn keep_copy(&mut self, window_ns: u64, max_bytes: u64) {
        self.keep_copy_since(window_ns, max_bytes, 0);
    }

    /// [`Follower::keep_copy`], beginning with only the events the rings hold from the stamp
    /// `since` on (0: all they hold): a saver that copies at a trigger copies the window it
    /// needs before the trigger, and what the rings hold older than that costs nothing.
    pub fn keep_copy_since(&mut self, window_ns: u64, max_bytes: u64, since: u64) {
        let map = self.dev.map();
        let mut copy = crate::shadow::Shadow::new(self.rings.len(), self.dev.version().ring_slots);
        copy.keep(self.dev.version().clock.ns_to_ticks(window_ns), max_bytes);
        for (r, c) in self.rings.iter().enumerate() {
            copy.copy_ring(r, &map.ring(r), c.next, since);
        }
        self.copy = Some(copy);
    }

    /// The copy this follower keeps ([`Follower::keep_copy`]), told how far the follower
    /// reached (the positions it looked at) and given its copies of the aux buffers (the
    /// strings of the events it read): what [`Reader::save_shadow`] saves. Each ring is
    /// saved from its current run of events (since the follower last lost entries of it).
    pub fn copy(&mut self) -> Option<&crate::shadow::Shadow> {
        if let Some(copy) = &mut self.copy {
            copy.window(0, 0);
        }
        self.copy_for(None)
    }

    /// [`Follower::copy`], for a snapshot of the moment `stamp` (a rule's match): a ring
    /// whose current run begins after it (the follower lost entries of it since) is saved
    /// from its run before that loss, which holds the moment, where the copy still holds it.
    pub fn copy_around(&mut self, stamp: u64) -> Option<&crate::shadow::Shadow> {
        self.copy_window(stamp, 0)
    }

    /// [`Follower::copy_around`] the moment `stamp`, saved as a window: only the events
    /// stamped from `since` on (a snapshot's `before` the moment; 0: all the copy holds),
    /// so that the snapshot's bytes follow its window, not the copy's or the device's size.
    pub fn copy_window(&mut self, stamp: u64, since: u64) -> Option<&crate::shadow::Shadow> {
        if let Some(copy) = &mut self.copy {
            copy.window(since, self.window);
        }
        self.copy_for(Some(stamp))
    }

    /// [`Follower::copy_window`] as a copy of its own ([`Shadow::cut`](crate::shadow::Shadow::cut)):
    /// it is saved on another thread while this follower goes on (a snapshot's image
    /// takes longer to make than small rings take to turn).
    pub fn cut_window(&mut self, stamp: u64, since: u64) -> Option<crate::shadow::Shadow> {
        self.copy_window(stamp, since)
            .map(crate::shadow::Shadow::cut)
    }

    /// Whether the copy this follower keeps has used all the memory it was given beyond a
    /// ring's worth ([`Follower::keep_copy`]): from then on it keeps less than its window.
    pub fn copy_is_full(&self) -> bool {
        self.copy
            .as_ref()
            .is_some_and(crate::shadow::Shadow::is_full)
    }

    /// Says that a snapshot of the copy will be for the moment `stamp` (`None`: none
    /// pending): until it is saved ([`Follower::copy_around`]), a ring this follower loses
    /// entries of keeps the run of events before the loss that holds the moment, rather than
    /// the ones after. `watch` says it when a match is granted a snapshot.
    pub fn keep_moment(&mut self, stamp: Option<u64>) {
        if let Some(copy) = &mut self.copy {
            copy.moment(stamp);
        }
    }

    fn copy_for(&mut self, moment: Option<u64>) -> Option<&crate::shadow::Shadow> {
        let copy = self.copy.as_mut()?;
        copy.reached(self.rings.iter().map(|c| c.next), &self.aux);
        copy.saved_around(moment);
        Some(copy)
    }

    /// The events committed since the last poll, released in time order (see the module
    /// documentation).
    pub fn poll(&mut self) -> Result<Poll> {
        self.read(false)
    }

    /// Gives back the memory of `poll`, once its events are used: the next polls fill its
    /// vectors instead of allocating new ones (and touching fresh pages), so a follower
    /// whose polls are given back allocates nothing per event.
    ///
    /// ```
    /// # let tmp = tempfile::tempdir().unwrap();
    /// # devttrace::Device::open(&devttrace::Config::at(tmp.path().join("dev")))?;
    /// let dev = devttrace::Reader::open(tmp.path().join("dev"))?;
    /// let mut follower = devttrace::Follower::new(&dev);
    /// let poll = follower.poll()?;
    /// // ... the events of `poll.snapshot` shown or matched ...
    /// follower.recycle(poll);
    /// # Ok::<(), devttrace::Error>(())
    /// ```
    pub fn recycle(&mut self, poll: Poll) {
        for ring in poll.snapshot.cpus {
            if self.pool.len() < self.rings.len() {
                let mut events = ring.events;
                events.clear();
                self.pool.push(events);
            }
        }
    }

    /// The last poll: [`Follower::poll`], releasing everything read, held for the reorder
    /// window or not (what a reader that stops following prints last).
    pub fn finish(&mut self) -> Result<Poll> {
        self.read(true)
    }

    /// A poll; with `all`, one that releases everything read.
    fn read(&mut self, all: bool) -> Result<Poll> {
        let core = self.dev.map();
        let rings = self.dev.cpus();
        let (mut lost, mut gave_up) = (vec![0; rings], vec![0; rings]);
        let now = core.now();
        let mut read_any = false;
        // While some position is still being written, nothing newer than the window is sure.
        let mut waiting = false;
        // Per ring that lost entries: the events read after them (in `held`), whether shared.
        let mut losses = Vec::new();
        // Per ring, whether its held events are still in time order with those read.
        let mut ordered = vec![true; rings];
        for (r, cursor) in self.rings.iter_mut().enumerate() {
            let shared = r >= self.dev.version().num_cpus as usize;
            let held = &mut self.held[r];
            let taken = held.len();
            // What is learnt of each event as it is read, not in a pass over them all.
            let (mut last, in_order, top) = (
                held.last().map_or(0, |e| e.stamp),
                &mut ordered[r],
                &mut self.held_top[r],
            );
            let mut copy = self.copy.as_mut();
            let (settled, lost_at) = cursor.walk(&core.ring(r), shared, |p, e| {
                *in_order &= e.stamp >= last;
                last = e.stamp;
                *top = (*top).max(e.type_word.tracepoint());
                if let Some(copy) = copy.as_deref_mut() {
                    copy.record(r, p, &e);
                }
                held.push(e)
            });
            read_any |= held.len() > taken;
            if settled.lost > 0 {
                losses.push((r, taken..held.len(), shared));
                if let Some(copy) = copy {
                    copy.lost(r, lost_at, cursor.next);
                }
            }
            lost[r] = settled.lost;
            gave_up[r] = settled.skipped;
            waiting |= !cursor.waiting.is_empty();
        }
        // Aux buffers whose `last` moved.
        let mut aux_error = None;
        if self.aux.buffers.len() < rings {
            self.aux.buffers.resize(rings, Default::default());
        }
        for b in 0..rings {
            let aux = core.aux(b);
            let last = aux.last();
            let known = &self.aux.buffers[b];
            // Unchanged, and no record there was still being written: nothing new.
            if known.last == last && known.first_incomplete.is_none() {
                continue;
            }
            // What was written since the last poll is copied, not the whole buffer; a
            // copy of the rings keeps the strings of the window it keeps.
            let keep_from = self
                .copy
                .as_mut()
                .and_then(|c| c.aux_keep_from(b, self.dev.now(), self.window, aux.size(), last));
            // The poll before's view has gone (or the buffer is copied for it, once).
            let buffer = std::sync::Arc::make_mut(&mut self.aux.buffers[b]);
            buffer.buffer = b as u32;
            match buffer.refresh(&aux, keep_from) {
                Ok(()) => {
                    waiting |= buffer.first_incomplete.is_some();
                    let last = buffer.last;
                    if let Some(c) = self.copy.as_mut() {
                        c.aux_mark(b, self.dev.now(), last);
                    }
                }
                // A busy buffer (overwritten faster than it can be copied) must not lose
                // the events already taken from the rings: they go out, strings unresolved.
                Err(e) => aux_error = Some(e.to_string()),
            }
        }
        let seen = meta_seen(core);
        if seen != self.meta_seen {
            let meta = self.dev.metadata();
            if meta.names_generation != self.meta.names_generation {
                let old = std::mem::replace(&mut self.meta, meta);
                self.reclaimed.threads = missing(&old.threads, &self.meta.threads);
                self.reclaimed.processes = missing(&old.processes, &self.meta.processes);
            } else {
                self.meta = meta;
            }
            self.meta_seen = seen;
        }
        // Only new positions were read: find a file cut elsewhere too.
        core.probe();
        self.dev.check_intact()?;
        // The times an event of the device can have, now that all was read: an event stamped
        // outside them is damaged (`crate::damage`), and its check below finds it. Its time places nothing: it is released at once — never held for a
        // watermark that may not pass it for years, nor counted late for a time before the
        // device — and places no gap.
        let stamps = self.dev.stamps();
        let mut lost_before = vec![0; rings];
        for (r, read, shared) in losses {
            let times = self.held[r][read].iter().map(|e| e.stamp);
            // The entries lost were committed before those read after them (a per-CPU
            // ring's stamps grow with its positions; a shared ring's may be up to a window
            // apart), and before now if none was read.
            let gap = match (times.filter(|t| stamps.contains(t)).min(), shared) {
                (None, _) => now,
                (Some(f), true) => f.saturating_add(self.window),
                (Some(f), false) => f,
            };
            self.held_gaps.push(gap);
            lost_before[r] = gap;
        }
        // Release what the watermark passed, and anything late.
        let released_before = self.released;
        // A device whose writers record context switches gets them a drain period late
        // (`ttrace_core::switches`, 10 ms, less than the window): everything waits a window.
        // Relaxed: a counter read on its own.
        let switches = core.header().switch_threads.load(Relaxed) > 0;
        let watermark = match (all, waiting || switches) {
            (true, _) => u64::MAX,
            (false, true) => now.saturating_sub(self.window),
            (false, false) => now,
        }
        .max(released_before);
        // Whether an event held (released now or later) has an id the metadata's copy lacks
        // (see below).
        let unknown =
            (self.held_top.iter()).any(|&t| usize::from(t) >= self.meta.tracepoints.len());
        let mut late = 0;
        // A clear since (or just before) these were read: what it cleared is not released.
        let cleared_at = crate::clear::cleared_at(core.header());
        if let Some(copy) = &mut self.copy {
            copy.clear_through(cleared_at);
        }
        let mut cpus: Vec<RingSnapshot> = Vec::with_capacity(rings);
        for ((held, top), in_order) in self.held.iter_mut().zip(&mut self.held_top).zip(ordered) {
            // In time order (stable: a ring's events of one stamp stay in the order read).
            // The events kept are; those read after them usually are too (a per-CPU ring's
            // stamps grow with its positions), and are not sorted again then.
            if !in_order {
                held.sort_by_key(|e| e.stamp);
            }
            let gone = held.partition_point(|e| e.stamp <= cleared_at);
            held.drain(..gone);
            let at = held.partition_point(|e| e.stamp <= watermark);
            // The rest is kept, but for an event stamped where no event can be (damaged):
            // released at once, after the others (stamped after the watermark).
            let mut kept = self.pool.pop().unwrap_or_default();
            let mut damaged = Vec::new();
            for e in &held[at..] {
                match stamps.contains(&e.stamp) {
                    true => kept.push(*e),
                    false => damaged.push(*e),
                }
            }
            held.truncate(at);
            held.extend(damaged);
            // Released before the last watermark: late (their writer stalled past the window).
            let older = held.partition_point(|e| e.stamp < released_before);
            late += held[..older]
                .iter()
                .filter(|e| stamps.contains(&e.stamp))
                .count() as u64;
            // The bound of what is kept: exact after a poll that found an id unknown (else an
            // id no definition will name, of a damaged entry, would have the metadata copied
            // at every poll while events keep coming), else left as it is, or 0.
            if unknown {
                *top = kept
                    .iter()
                    .map(|e| e.type_word.tracepoint())
                    .max()
                    .unwrap_or(0);
            } else if kept.is_empty() {
                *top = 0;
            }
            cpus.push(RingSnapshot {
                events: std::mem::replace(held, kept),
                ..RingSnapshot::default()
            });
        }
        let mut gaps = Vec::new();
        self.held_gaps.retain(|&g| match g <= watermark {
            true => {
                gaps.push(g);
                false
            }
            false => true,
        });
        gaps.sort_unstable();
        for c in &mut cpus {
            c.committed = c.events.len() as u64;
        }
        self.released = watermark;
        // An id the copy lacks was defined after the words were loaded above (by a thread
        // other than the one that used it, which learned the id without an acquire of
        // the definition): copy again once, so that the event goes out named.
        if unknown {
            let defined = core.registry().tracepoints();
            self.meta.tracepoints = defined.tracepoints;
            self.meta.values = defined.values;
        }
        // The names, strings and counters only go with something to decode: an idle poll
        // copies nothing.
        let any = cpus.iter().any(|c| !c.events.is_empty());
        let (meta, aux, enabled) = match any {
            true => (
                {
                    let mut meta = self.meta.clone();
                    meta.merge_names(&self.reclaimed);
                    meta
                },
                self.aux.clone(),
                self.dev.enabled_all(&self.meta),
            ),
            false => Default::default(),
        };
        let mut snapshot = Snapshot {
            dir: self.dev.dir().to_path_buf(),
            version: self.dev.version(),
            status: if any {
                self.status = self.dev.status();
                self.status
            } else {
                self.status
            },
            enabled,
            meta,
            cpus,
            aux,
            aux_error,
        };
        self.dev.sift_within(&mut snapshot, stamps);
        // The entries of damaged events were read, and are not shown: damaged.
        for (cursor, ring) in self.rings.iter_mut().zip(&snapshot.cpus) {
            let totals = &mut cursor.totals.counts;
            totals.committed -= ring.damaged.min(totals.committed);
            totals.damaged += ring.damaged;
        }
        Ok(Poll {
            snapshot,
            lost,
            gave_up,
            late,
            released_before,
            released_through: watermark,
            gaps,
            lost_before,
            active: read_any
                || self.held.iter().any(|h| !h.is_empty())
                || !self.held_gaps.is_empty(),
        })
    }
}

impl Follower<'_> {
    /// Per ring, what became of the positions passed since following began: read, lost,
    /// given up or still being written, each position counted once.
    pub fn totals(&self) -> Vec<Followed> {
        self.rings
            .iter()
            .map(|c| Followed {
                counts: Accounting {
                    head: c.next - c.totals.from,
                    claimed: c.waiting.len() as u64,
                    ..c.totals.counts
                },
                ..c.totals
            })
            .collect()
    }
}

impl Cursor {
    /// A cursor that follows a ring from position `from`.
    fn at(from: u64) -> Cursor {
        Cursor {
            next: from,
            waiting: BTreeMap::new(),
            totals: Followed {
                from,
                ..Followed::default()
            },
        }
    }

    /// Reads the positions of `ring` still waiting and those new up to its `head`, in
    /// order, each settled once (see the module documentation); `take` gets each event
    /// read. Returns what this walk settled (its `committed`: read, `lost` and `skipped`:
    /// given up), and the span of positions it lost (from the first to one past the last).
    fn walk<S: SlotWords>(
        &mut self,
        ring: &Ring<'_, S>,
        shared: bool,
        mut take: impl FnMut(u64, Event),
    ) -> (Accounting, core::ops::Range<u64>) {
        let n = ring.slot_count() as u64;
        let head = ring.head().max(self.next);
        let oldest = head.saturating_sub(n);
        let mut settled = Accounting::default();
        // The positions lost, from the first to one past the last (empty: none).
        let mut lost_at: Option<core::ops::Range<u64>> = None;
        let mut lose = |at: core::ops::Range<u64>| {
            lost_at = Some(match lost_at.take() {
                Some(was) => was.start.min(at.start)..was.end.max(at.end),
                None => at,
            });
        };
        // Positions passed by the ring before they could be read.
        if self.next < oldest {
            settled.lost += oldest - self.next;
            lose(self.next..oldest);
            self.next = oldest;
        }
        let waited = std::mem::take(&mut self.waiting);
        let positions = waited.iter().map(|(&p, &w)| (p, Some(w)));
        let mut prev: Option<(u64, Settled)> = None;
        for (p, was) in positions.chain((self.next..head).map(|p| (p, None))) {
            let before = prev.filter(|&(q, _)| q + 1 == p).map(|(_, s)| s);
            let now = match before {
                Some(Settled::ReadWithNext) => Settled::Read,
                Some(Settled::ReadLosingNext) => Settled::Lost,
                _ => {
                    let found = if p < oldest {
                        Found::Overwritten
                    } else {
                        ring.at(p)
                    };
                    match found {
                        Found::Entry(e, slots) => {
                            let lost_next = e.continuation_lost;
                            take(p, e);
                            match (slots, lost_next) {
                                (2, _) => Settled::ReadWithNext,
                                (_, true) => Settled::ReadLosingNext,
                                _ => Settled::Read,
                            }
                        }
                        Found::Continuation => match before {
                            Some(Settled::Waits(_)) => Settled::Waits(Wait::Parent),
                            Some(Settled::GaveUp) => Settled::GaveUp,
                            Some(Settled::Lost) => Settled::Lost,
                            // Not this position's continuation. In a restartable ring every
                            // position below `head` is committed: a later lap's, this one
                            // was overwritten. In a shared ring it may be an earlier lap's
                            // still, the position's writer not having claimed the slot yet.
                            _ if shared => Settled::Waits(Wait::Unwritten),
                            _ => Settled::Lost,
                        },
                        // Read while being written: in a shared ring maybe by the position's
                        // own writer (a later read tells); in a restartable ring, whose
                        // positions below `head` are committed, by a later lap's.
                        Found::Changed if shared => Settled::Waits(was.unwrap_or(Wait::Unwritten)),
                        Found::Changed => Settled::Lost,
                        Found::Overwritten if was == Some(Wait::Blocked) => Settled::GaveUp,
                        Found::Overwritten => Settled::Lost,
                        Found::Waiting if was == Some(Wait::Blocked) => {
                            Settled::Waits(Wait::Blocked)
                        }
                        Found::Waiting => Settled::Waits(Wait::Unwritten),
                        Found::Blocked => Settled::Waits(Wait::Blocked),
                    }
                }
            };
            match now {
                Settled::ReadWithNext | Settled::ReadLosingNext | Settled::Read => {
                    settled.committed += 1
                }
                Settled::Lost => {
                    settled.lost += 1;
                    lose(p..p + 1);
                }
                Settled::GaveUp => settled.skipped += 1,
                Settled::Waits(w) => {
                    self.waiting.insert(p, w);
                }
            }
            prev = Some((p, now));
        }
        // A continued event's positions are reserved together: one read at the last
        // position stitched nothing beyond `head`.
        self.next = head;
        self.totals.counts += settled;
        (settled, lost_at.unwrap_or(0..0))
    }
}

/// The words that say whether the metadata changed: tracepoint bytes, names generation and
/// the bytes of names in use.
fn meta_seen(core: &ReadMapping) -> (u64, u64, u64) {
    let h = core.header();
    // Acquire: as `Reader::metadata` loads them (a change seen here is copied next).
    let generation = h.names_generation.load_acquire();
    (
        h.meta_used.load_acquire(),
        generation,
        h.names_used[(generation & 1) as usize].load_acquire(),
    )
}

/// The tasks of `old` that `new` lacks.
fn missing(old: &[TaskInfo], new: &[TaskInfo]) -> Vec<TaskInfo> {
    let have: std::collections::HashSet<_> = new.iter().map(TaskInfo::key).collect();
    old.iter()
        .filter(|t| !have.contains(&t.key()))
        .cloned()
        .collect()
}
