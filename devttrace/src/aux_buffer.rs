//! The aux protocols, both halves: variable-length records (strings) in each
//! ring's wrapping aux buffer.
//!
//! A shared ring's buffer is written in two steps: [`AuxWriter::reserve`] under the buffer's
//! lock (a few instructions: advance `first` past what the record will overwrite, stamp its
//! header invalid with its length and writer, move `last`), then [`AuxWriter::commit`]
//! outside it (payload, then the valid header, Release). A restartable ring's buffer is
//! written by one restartable sequence, whose Rust model is [`AuxWriter::write_restartable`].
//! Readers copy with [`copy`] and parse with [`parse`] ([`snapshot`] does both).
//!
//! As for the rings (`crate::ring`), the halves are two types over the same words: an [`Aux`]
//! only loads (a reader's lies in memory mapped read-only), an [`AuxWriter`] stores, and only
//! a mapping made for writing hands one out ([`Mapping::aux`](crate::Mapping::aux)).
//!
//! What the code relies on, argued in `docs/DESIGN.md` (*The aux protocols*): a writer moves
//! `first` past a record (then a Release fence) before it stores over it, so a reader that
//! loads `first` again after its copy (an Acquire fence before) drops exactly what may have
//! been overwritten; a record still being written by a live writer is never overtaken.
//!
//! Both halves are written once over any [`AtomicWord`]: the device runs them on its mapped
//! words, and `devttrace/tests/loom_aux.rs` and `loom_restartable.rs` model-check the very
//! same code with loom.

pub use crate::error::AuxError;
use crate::sync::{AtomicWord, Ordering::*};
use core::sync::atomic::AtomicU64;
use crossbeam_utils::Backoff;
use ttrace_layouts::aux::{aux_ref_parts, full_offset, AuxPath, AUX_HEADER_BYTES};
use zerocopy::IntoBytes;

/// Tries before an aux write blocked by a record still being written is dropped.
const BLOCKED_TRIES: u32 = 64;

/// `first` as a writer may trust it, given `last` (`start`) and the buffer's `size`: offsets a
/// damaged device could hold (first past last, more than a buffer apart, misaligned) are
/// repaired by dropping every record, never trusted.
#[inline(always)]
fn repaired(first: u64, start: u64, size: u64) -> u64 {
    if first > start || start - first > size || first % 8 != 0 {
        start
    } else {
        first
    }
}

/// Copies `bytes` into the buffer at `offset` (8-aligned), word by word, wrapping at the
/// end of the buffer (the last word padded with zeros).
#[inline]
fn store_bytes<W: AtomicWord>(words: &[W], offset: u64, bytes: &[u8]) {
    let start = ((offset / 8) & (words.len() as u64 - 1)) as usize;
    // The words up to the end of the buffer, then those from its start.
    let (before, from) = words.split_at(start);
    let mut dst = from.iter().chain(before);
    let mut chunks = bytes.chunks_exact(8);
    // Chunks first: `zip` stops at the first exhausted iterator without taking from the next.
    for (c, d) in chunks.by_ref().zip(dst.by_ref()) {
        // Relaxed: published by the Release store of the record's valid path.
        d.store(u64::from_ne_bytes(c.try_into().expect("8 bytes")), Relaxed);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        if let Some(d) = dst.next() {
            // Relaxed: as above.
            d.store(u64::from_ne_bytes(w), Relaxed);
        }
    }
}

/// An aux buffer with its offsets and counters as its readers see it, over any atomic word
/// (the device's, or a [`HeapAux`]'s for tests and model checks): to be loaded, never stored.
/// The reader half of the protocol is [`snapshot`](Aux::snapshot).
pub struct Aux<'a, W> {
    /// Offset of the oldest record.
    first: &'a W,
    /// Offset one past the newest record.
    last: &'a W,
    /// Records reserved.
    records: &'a W,
    /// Records truncated.
    truncated: &'a W,
    /// Writes dropped.
    dropped: &'a W,
    /// The buffer (a power-of-two number of words).
    words: &'a [W],
}

impl<W> Clone for Aux<'_, W> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<W> Copy for Aux<'_, W> {}

/// An aux buffer as its writers see it: the writer half of the protocol
/// ([`reserve`](AuxWriter::reserve) then [`commit`](AuxWriter::commit), or
/// [`write_restartable`](AuxWriter::write_restartable)) over the same words as an [`Aux`].
/// Only memory this process may store to gives one: a mapping made for writing
/// ([`Mapping::aux`](crate::Mapping::aux)), or a [`HeapAux`].
pub struct AuxWriter<'a, W> {
    aux: Aux<'a, W>,
}

impl<'a, W: AtomicWord> Aux<'a, W> {
    /// The buffer whose offsets are `first` and `last`, whose counters are `records`,
    /// `truncated` and `dropped`, and whose words are `words` (a power-of-two number).
    pub(crate) fn new(
        first: &'a W,
        last: &'a W,
        records: &'a W,
        truncated: &'a W,
        dropped: &'a W,
        words: &'a [W],
    ) -> Aux<'a, W> {
        debug_assert!(words.len().is_power_of_two());
        Aux {
            first,
            last,
            records,
            truncated,
            dropped,
            words,
        }
    }

    /// The word at byte offset `off` (masked).
    #[inline(always)]
    fn at(&self, off: u64) -> &'a W {
        &self.words[((off / 8) & (self.words.len() as u64 - 1)) as usize]
    }

    /// Its size in bytes.
    #[inline]
    pub fn size(&self) -> u64 {
        self.words.len() as u64 * 8
    }

    /// Offset of the oldest record (loaded with Acquire).
    #[inline]
    pub fn first(&self) -> u64 {
        self.first.load_acquire()
    }

    /// Offset one past the newest record (loaded with Acquire: the headers of the records
    /// before it are visible).
    #[inline]
    pub fn last(&self) -> u64 {
        self.last.load_acquire()
    }
}

impl<'a, W: AtomicWord> AuxWriter<'a, W> {
    /// The writer half over the words of `aux`; the caller may store to them.
    pub(crate) fn new(aux: Aux<'a, W>) -> AuxWriter<'a, W> {
        AuxWriter { aux }
    }

    /// The same buffer, to read.
    #[inline(always)]
    pub fn reader(&self) -> Aux<'a, W> {
        self.aux
    }

    /// The buffer's words themselves: what the writer front end's restartable sections store
    /// to (by address), and what a test that damages a device on purpose changes.
    #[inline(always)]
    pub fn words(&self) -> &'a [W] {
        self.aux.words
    }

    /// Reserves a record for `path` (a valid path) on behalf of the writer `ctx`: up to `tries`
    /// times, takes the aux lock with `lock` (whose guard unlocks on drop; `None` gives up)
    /// and tries [`reserve_locked`](AuxWriter::reserve_locked), calling `wait` after each blocked
    /// try. Returns the record's offset, or `None` if the write was dropped (and counted).
    #[inline]
    pub fn reserve<G>(
        &self,
        path: AuxPath,
        ctx: u64,
        tries: u32,
        mut lock: impl FnMut() -> Option<G>,
        alive: impl Fn(u64) -> bool,
        mut wait: impl FnMut(),
    ) -> Option<u64> {
        for _ in 0..tries {
            let Some(guard) = lock() else {
                break;
            };
            let reserved = self.reserve_locked(path, ctx, &alive);
            drop(guard);
            if reserved.is_some() {
                return reserved;
            }
            wait();
        }
        // Relaxed: a counter, read only as a statistic.
        self.aux.dropped.fetch_add(1, Relaxed);
        None
    }

    /// The reservation proper; the caller holds the aux lock. Advances `first` past the
    /// records the new one will overwrite, stamps the new record's header invalid (with its
    /// length and `ctx`), moves `last` past it and counts it. Returns its offset, or `None`
    /// (changing nothing) if that would overtake a record still being written by a writer
    /// that is `alive`.
    #[inline]
    pub fn reserve_locked(
        &self,
        path: AuxPath,
        ctx: u64,
        alive: impl Fn(u64) -> bool,
    ) -> Option<u64> {
        let size = self.aux.words.len() as u64 * 8;
        let rec = path.record_bytes();
        // Relaxed: the lock orders these with every earlier reservation.
        let start = self.aux.last.load(Relaxed);
        // Relaxed: as above.
        let old_first = self.aux.first.load(Relaxed);
        let mut first = repaired(old_first, start, size);
        while start + rec - first > size {
            // Acquire: if the record is complete, its payload stores happen-before the
            // stores with which we are about to overwrite it.
            let p = AuxPath(self.aux.at(first).load(Acquire));
            // Relaxed: the ident was stored under the lock (which orders it before us) with
            // the invalid path, and no later store changes it while the path is invalid.
            if p.is_invalid() && alive(self.aux.at(first + 16).load(Relaxed)) {
                return None;
            }
            // A malformed length (a damaged buffer) drops everything up to `start`.
            first = if p.is_well_formed() {
                first + p.record_bytes()
            } else {
                start
            };
        }
        if first != old_first {
            // Release: a reader that loads this `first` also sees a `last` at least `start`
            // (stored before our lock), so its retry after finding `first` past the `last` it
            // loaded earlier makes progress. (The fence below orders the overwriting stores.)
            self.aux.first.store(first, Release);
            // Release fence: a reader that sees any of our stores below also sees the
            // new `first`, and so drops the records we overwrite.
            W::fence(Release);
        }
        // Relaxed: published to readers by the Release store of `last` below.
        self.aux.at(start).store(path.invalid().0, Relaxed);
        // Relaxed: as above.
        self.aux.at(start + 16).store(ctx, Relaxed);
        // Release: a reader that loads this `last` sees the invalid header and its length.
        self.aux.last.store(start + rec, Release);
        // Counted under the lock, which every writer of these counters holds: a plain
        // increment, not a locked one. Relaxed: statistics, ordered among writers by the lock.
        let bump = |c: &W| c.store(c.load(Relaxed) + 1, Relaxed);
        bump(self.aux.records);
        if path.is_truncated() {
            bump(self.aux.truncated);
        }
        Some(start)
    }

    /// Completes the record reserved at `start` for `path` (the valid path given to
    /// [`reserve`](AuxWriter::reserve)): stores the timestamp and the payload (`path.len()` bytes),
    /// then the valid path (Release). No lock is held.
    #[inline]
    pub fn commit(&self, start: u64, path: AuxPath, timestamp: u64, bytes: &[u8]) {
        debug_assert_eq!(bytes.len() as u64, path.len());
        // Relaxed: published by the Release store of the valid path below.
        self.aux.at(start + 8).store(timestamp, Relaxed);
        store_bytes(self.aux.words, start + AUX_HEADER_BYTES, bytes);
        // Release: a reader that acquires the valid path sees the timestamp and payload.
        self.aux.at(start).store(path.valid().0, Release);
    }

    /// The restartable aux write of the writer front end's assembly
    /// (`ttrace_core::rseq::Restartable::aux_write`) as Rust code over any atomic
    /// word: the same loads and stores in the same order, for the record of `path` (valid,
    /// with its CPU) holding `bytes`. Only `steps` stores are made (a writer preempted or
    /// killed inside its section), so `usize::MAX` is a whole write; returns the record's
    /// offset once the commit (`last`) is made. The caller is the buffer's only writer while
    /// it runs, as for [`crate::ring::RingWriter::write_restartable`].
    pub fn write_restartable(
        &self,
        path: AuxPath,
        timestamp: u64,
        ctx: u64,
        bytes: &[u8],
        steps: usize,
    ) -> Option<u64> {
        let mut step = crate::sync::steps(steps);
        self.write_restartable_steps(path, timestamp, ctx, bytes, &mut step)
    }

    /// [`AuxWriter::write_restartable`], each store first asking `step` (false: stop there), so
    /// that a longer section can go on after it ([`crate::restartable`]).
    pub(crate) fn write_restartable_steps(
        &self,
        path: AuxPath,
        timestamp: u64,
        ctx: u64,
        bytes: &[u8],
        step: &mut impl FnMut() -> bool,
    ) -> Option<u64> {
        let size = self.aux.words.len() as u64 * 8;
        let rec = path.record_bytes();
        // Relaxed: this thread is the buffer's only writer.
        let start = self.aux.last.load(Relaxed);
        // Relaxed: as above.
        let old_first = self.aux.first.load(Relaxed);
        let mut first = repaired(old_first, start, size);
        while start + rec - first > size {
            // Relaxed: every record of this buffer was written by this CPU's earlier sections.
            first += AuxPath(self.aux.at(first).load(Relaxed)).record_bytes();
        }
        if first != old_first {
            if !step() {
                return None;
            }
            // Release, and the fence: a reader that sees any of the stores below also sees
            // this `first`, and drops the records they overwrite.
            self.aux.first.store(first, Release);
            W::fence(Release);
        }
        let mut header = [path.0, timestamp, ctx].into_iter();
        let mut payload = bytes.chunks(8).map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_ne_bytes(w)
        });
        let words = header.by_ref().chain(payload.by_ref());
        for (k, w) in words.enumerate() {
            if !step() {
                return None;
            }
            // Relaxed: published by the Release store of `last` below.
            self.aux.at(start + 8 * k as u64).store(w, Relaxed);
        }
        if !step() {
            return None;
        }
        // Release: the commit; a reader that acquires this `last` sees the whole record.
        self.aux.last.store(start + rec, Release);
        Some(start)
    }
}

impl<W: AtomicWord> Aux<'_, W> {
    /// A consistent snapshot of the buffer (see [`snapshot`]).
    pub fn snapshot(&self) -> Result<AuxSnapshot, AuxError> {
        snapshot(self.first, self.last, self.words)
    }

    /// A consistent copy of the buffer's words (see [`copy`]).
    pub fn copy(&self) -> Result<AuxCopy, AuxError> {
        copy(self.first, self.last, self.words)
    }

    /// [`Aux::copy`], calling `release` with each range of word indices it is done reading
    /// ([`copy_releasing`]).
    pub fn copy_releasing(
        &self,
        release: impl FnMut(core::ops::Range<usize>),
    ) -> Result<AuxCopy, AuxError> {
        copy_releasing(self.first, self.last, self.words, release)
    }

    /// [`Aux::snapshot`], calling `release` with each range of word indices it is done
    /// reading ([`copy_releasing`]).
    pub fn snapshot_releasing(
        &self,
        release: impl FnMut(core::ops::Range<usize>),
    ) -> Result<AuxSnapshot, AuxError> {
        copy_releasing(self.first, self.last, self.words, release)
            .map(|c| parse(c.words, c.base, c.first, c.last))
    }

    /// The extent of a copy of the buffer ([`extent`]), releasing as
    /// [`Aux::snapshot_releasing`] does.
    pub fn extent_releasing(
        &self,
        release: impl FnMut(core::ops::Range<usize>),
    ) -> Result<AuxExtent, AuxError> {
        copy_releasing(self.first, self.last, self.words, release).map(|c| extent(&c))
    }
}

/// An aux buffer with its offsets and counters on the heap: the protocol without a device,
/// for tests and model checks (any [`AtomicWord`], loom's included).
///
/// ```
/// use core::sync::atomic::AtomicU64;
/// use ttrace_layouts::aux::{AuxPath, AuxTag};
/// let mem = devttrace::aux::HeapAux::<AtomicU64>::new(16);
/// let (aux, lock) = (mem.writer(), std::sync::Mutex::new(()));
/// let path = AuxPath::new(AuxTag::String, 0, 5, false);
/// let at = aux.reserve(path, 7, 1, || lock.lock().ok(), |_| true, || {});
/// aux.commit(at.unwrap(), path, 1000, b"hello");
/// assert_eq!(mem.aux().snapshot().unwrap().records().next().unwrap().bytes, b"hello");
/// ```
pub struct HeapAux<W> {
    /// Offset of the oldest record.
    pub first: W,
    /// Offset one past the newest record.
    pub last: W,
    /// Records reserved.
    pub records: W,
    /// Records truncated.
    pub truncated: W,
    /// Writes dropped.
    pub dropped: W,
    /// The buffer.
    pub words: Vec<W>,
}

impl<W: AtomicWord> HeapAux<W> {
    /// An empty buffer of `words` words (a power of two).
    pub fn new(words: usize) -> HeapAux<W> {
        assert!(
            words.is_power_of_two(),
            "an aux buffer has a power-of-two number of words"
        );
        HeapAux {
            first: W::new(0),
            last: W::new(0),
            records: W::new(0),
            truncated: W::new(0),
            dropped: W::new(0),
            words: (0..words).map(|_| W::new(0)).collect(),
        }
    }

    /// The buffer, to read.
    pub fn aux(&self) -> Aux<'_, W> {
        Aux::new(
            &self.first,
            &self.last,
            &self.records,
            &self.truncated,
            &self.dropped,
            &self.words,
        )
    }

    /// The buffer, to write.
    pub fn writer(&self) -> AuxWriter<'_, W> {
        AuxWriter::new(self.aux())
    }
}

impl AuxWriter<'_, AtomicU64> {
    /// Writes a record holding `bytes` (at most
    /// [`AUX_MAX_PAYLOAD`](ttrace_layouts::aux::AUX_MAX_PAYLOAD)) with the shared
    /// protocol: reserved under `lock` (the buffer's lock word, its ring header's
    /// `aux_lock`), then committed. `path` is the record's valid path (with its CPU);
    /// `timestamp` is 0 for a string argument (its entry carries the time). Returns the
    /// record's offset, or `None` if the write was dropped (and counted in `dropped`): the
    /// oldest record was still being written by a live writer, or the calling thread holds
    /// the lock already (a signal handler interrupted its own reservation).
    pub fn write(
        &self,
        lock: &AtomicU64,
        path: AuxPath,
        ctx: u64,
        timestamp: u64,
        bytes: &[u8],
    ) -> Option<u64> {
        let backoff = Backoff::new();
        let start = self.reserve(
            path,
            ctx,
            BLOCKED_TRIES,
            || crate::lock::lock(lock),
            crate::thread::alive,
            || backoff.snooze(),
        )?;
        self.commit(start, path, timestamp, bytes);
        Some(start)
    }
}

/// Snapshots of every aux buffer of a device, by ring: what string references resolve
/// against. Each buffer's is shared (a follower hands its copies to every poll's view
/// without copying them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuxSnapshots {
    /// Each ring's buffer.
    pub buffers: Vec<std::sync::Arc<AuxSnapshot>>,
}

impl AuxSnapshots {
    /// The record an argument word refers to ([`aux_ref`](ttrace_layouts::aux::aux_ref)), if
    /// the snapshot holds it.
    #[inline]
    pub fn get(&self, word: u64) -> Option<AuxRecord<'_>> {
        let (buffer, low) = aux_ref_parts(word)?;
        let b = self.buffers.get(buffer)?;
        b.get(full_offset(low, b.last))
    }

    /// Every record of every buffer (by buffer, then oldest first).
    pub fn records(&self) -> impl Iterator<Item = AuxRecord<'_>> + '_ {
        self.buffers.iter().flat_map(|b| b.records())
    }

    /// Records still being written when copied, in all buffers.
    pub fn incomplete(&self) -> u64 {
        self.buffers.iter().map(|b| b.incomplete).sum()
    }

    /// Whether a malformed header ended the walk of some buffer early.
    pub fn corrupt(&self) -> bool {
        self.buffers.iter().any(|b| b.corrupt)
    }

    /// Bytes in use, in all buffers.
    pub fn bytes_in_use(&self) -> u64 {
        self.buffers.iter().map(|b| b.last - b.first).sum()
    }
}

/// One complete aux record, as a snapshot holds it (its payload borrowed from the copy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuxRecord<'a> {
    /// The buffer (ring) it is in.
    pub buffer: u32,
    /// Its offset in that buffer.
    pub offset: u64,
    /// Raw tag.
    pub tag: u16,
    /// CPU of the writer.
    pub cpu: u32,
    /// When it was written (0 for a string argument: see its entry).
    pub timestamp: u64,
    /// The writer's `pid << 32 | tid`.
    pub ctx: u64,
    /// Whether the payload was truncated.
    pub truncated: bool,
    /// The payload.
    pub bytes: &'a [u8],
}

/// Where a complete record lies in a snapshot's copy: 16 bytes per record, whatever its
/// length (the payload stays in the copy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Located {
    /// Its offset in the buffer.
    offset: u64,
    /// The payload's length.
    len: u16,
    /// Raw tag.
    tag: u16,
    /// CPU of the writer (the path holds 16 bits of it).
    cpu: u16,
    /// Whether the payload was truncated.
    truncated: bool,
}

impl Located {
    /// The offset one past its last byte (its last word).
    fn end(&self) -> u64 {
        self.offset + AUX_HEADER_BYTES + (self.len as u64).next_multiple_of(8)
    }
}

/// A snapshot of one aux buffer: its copy, and where each complete record is in it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuxSnapshot {
    /// Offset of the oldest record that was intact after the copy.
    pub first: u64,
    /// Offset one past the newest record.
    pub last: u64,
    /// Records still being written when copied.
    pub incomplete: u64,
    /// Offset of the first of them.
    pub first_incomplete: Option<u64>,
    /// Whether a malformed header ended the walk early.
    pub corrupt: bool,
    /// The buffer (ring) it is of.
    pub buffer: u32,
    /// The words copied, from offset `base` on.
    words: Vec<u64>,
    base: u64,
    /// The complete records, oldest first.
    located: Vec<Located>,
    /// Where the records still being written are.
    incomplete_at: Vec<u64>,
}

impl AuxSnapshot {
    /// The words of the records from the offset `from` on (those that begin there or later;
    /// a record still being written is copied as such), as the copy it was parsed from
    /// ([`AuxCopy`]): what a snapshot of a follower's shadow saves ([`crate::shadow`]).
    pub(crate) fn as_copy_from(&self, from: u64) -> AuxCopy {
        let held = self.held();
        let first = held
            .get(held.partition_point(|r| r.offset < from))
            .map_or(self.last, |r| r.offset)
            .min(
                self.first_incomplete
                    .filter(|&i| i >= from)
                    .unwrap_or(u64::MAX),
            )
            .max(self.first);
        let skip = ((first - self.base) / 8) as usize;
        AuxCopy {
            words: self.words.get(skip..).unwrap_or_default().to_vec(),
            base: first,
            first,
            last: self.last,
        }
    }

    /// The complete records, oldest first.
    pub fn records(&self) -> impl Iterator<Item = AuxRecord<'_>> + '_ {
        self.held().iter().map(|r| self.record(r))
    }

    /// How many complete records it holds.
    pub fn len(&self) -> usize {
        self.held().len()
    }

    /// Whether it holds no complete record.
    pub fn is_empty(&self) -> bool {
        self.held().is_empty()
    }

    /// The record at `offset`, if the snapshot holds it.
    pub fn get(&self, offset: u64) -> Option<AuxRecord<'_>> {
        let held = self.held();
        held.binary_search_by_key(&offset, |r| r.offset)
            .ok()
            .map(|i| self.record(&held[i]))
    }

    /// The complete records from `first` on (a refresh may leave older ones located until
    /// it drops their words: [`AuxSnapshot::refresh`]).
    fn held(&self) -> &[Located] {
        let older = self.located.partition_point(|r| r.offset < self.first);
        &self.located[older..]
    }

    /// Brings the snapshot up to date with the buffer `aux`, copying only what was written
    /// since it was taken (and the records then still being written), and keeps the
    /// records from the offset `keep_from` on, older than the buffer's oldest where the
    /// caller wants them (a follower's copy of a window longer than the buffer holds,
    /// [`crate::shadow`]); `None` keeps what a fresh [`Aux::snapshot`] would. It is then
    /// what a snapshot taken now would be, and the records it kept besides.
    ///
    /// Where the buffer moved on past what it held before its words could be copied (more
    /// than a buffer's worth written since), what it held is dropped: it begins anew, as a
    /// fresh snapshot, and a reference to a record in between is not resolved (shown lost,
    /// as it would have been).
    pub fn refresh<W: AtomicWord>(
        &mut self,
        aux: &Aux<'_, W>,
        keep_from: Option<u64>,
    ) -> Result<(), AuxError> {
        let held = self.last > 0 || !self.words.is_empty();
        let from = match held {
            true => self.first_incomplete.unwrap_or(self.last),
            false => 0,
        };
        let c = copy_from(aux.first, aux.last, aux.words, from, |_| {})?;
        let buffer = self.buffer;
        if !held || c.first > from || c.base != from {
            // Nothing held, or the buffer moved on past it: a fresh snapshot.
            *self = parse(c.words, c.base, c.first, c.last);
            self.buffer = buffer;
        } else {
            // What lies from `from` on is read again: the records then being written are
            // complete now, or still being written.
            self.words.truncate(((from - self.base) / 8) as usize);
            self.words.extend_from_slice(&c.words);
            let cut = self.located.partition_point(|r| r.offset < from);
            self.located.truncate(cut);
            self.incomplete_at.clear();
            self.incomplete = 0;
            self.first_incomplete = None;
            self.last = c.last;
            let (located, words, base) = (&mut self.located, &self.words, self.base);
            for met in walk(words, base, from, c.last) {
                match met {
                    Met::Record(r) => located.push(r),
                    Met::Incomplete(off) => {
                        self.incomplete += 1;
                        self.first_incomplete.get_or_insert(off);
                        self.incomplete_at.push(off);
                    }
                    Met::Corrupt => self.corrupt = true,
                }
            }
        }
        // Keeps from the oldest record at or after the offset asked (never past the
        // newest), or from the buffer's oldest.
        let floor = keep_from.unwrap_or(c.first).max(self.first).min(self.last);
        let first = self
            .located
            .get(self.located.partition_point(|r| r.offset < floor))
            .map_or(self.last, |r| r.offset)
            .min(self.first_incomplete.unwrap_or(u64::MAX));
        self.first = first.max(self.first);
        // The words and records below it go once they are half of what it holds: a copy
        // moved by a poll's worth of words costs its own size, not the whole buffer's.
        let dead = ((self.first - self.base) / 8) as usize;
        if dead > 0 && dead * 2 >= self.words.len() {
            self.words.drain(..dead);
            self.base = self.first;
            let older = self.located.partition_point(|r| r.offset < self.first);
            self.located.drain(..older);
        }
        Ok(())
    }

    /// Keeps only the records for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&AuxRecord<'_>) -> bool) {
        let located = core::mem::take(&mut self.located);
        let this = &*self;
        let kept = located
            .into_iter()
            .filter(|r| keep(&this.record(r)))
            .collect();
        self.located = kept;
    }

    fn word(&self, offset: u64) -> u64 {
        let at = (offset.wrapping_sub(self.base) / 8) as usize;
        self.words.get(at).copied().unwrap_or(0)
    }

    fn record(&self, r: &Located) -> AuxRecord<'_> {
        let start = ((r.offset - self.base) / 8) as usize + 3;
        let words = &self.words[start..start + (r.len as usize).div_ceil(8)];
        AuxRecord {
            buffer: self.buffer,
            offset: r.offset,
            tag: r.tag,
            cpu: r.cpu as u32,
            timestamp: self.word(r.offset + 8),
            ctx: self.word(r.offset + 16),
            truncated: r.truncated,
            bytes: &words.as_bytes()[..r.len as usize],
        }
    }
}

/// Where one aux buffer's copy held records, without the records ([`extent`]):
/// a few words whatever the buffer's size, enough to tell which string references a copy
/// taken then would have resolved.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuxExtent {
    /// Complete records start at record offsets from `from` up to `to`, but those of
    /// `incomplete`.
    pub from: u64,
    /// One past the last complete record.
    pub to: u64,
    /// The buffer's `last` (to complete a reference's offset).
    pub last: u64,
    /// Offsets of records still being written (not held).
    pub incomplete: Vec<u64>,
    /// Complete records.
    pub records: u64,
    /// Bytes between the oldest record and the end of the newest.
    pub bytes: u64,
    /// Whether a malformed header ended the walk early.
    pub corrupt: bool,
}

impl AuxExtent {
    /// Whether the record at `offset`, the offset a writer recorded in a reference, was
    /// held (a complete record there).
    pub fn holds(&self, offset: u64) -> bool {
        (self.from..self.to).contains(&offset) && !self.incomplete.contains(&offset)
    }
}

/// A consistent copy of the aux buffer's words from offset `base` to `last`: every record
/// at or after `first` is intact (complete, or still being written and marked so).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuxCopy {
    /// The words from `base` to `last`.
    pub words: Vec<u64>,
    /// Offset of the first word.
    pub base: u64,
    /// Offset of the oldest intact record.
    pub first: u64,
    /// Offset one past the newest record.
    pub last: u64,
}

impl AuxCopy {
    /// Lays the copy out in `buffer` (the buffer's bytes, `aux_size` of them) as the aux file
    /// holds it: each word copied at its offset modulo the buffer's size, from `first` on.
    pub fn place_into(&self, buffer: &mut [u8]) {
        let size = buffer.len() as u64;
        for (k, w) in self.words.iter().enumerate() {
            let off = self.base + 8 * k as u64;
            if off >= self.first {
                let at = (off % size) as usize;
                buffer[at..at + 8].copy_from_slice(&w.to_ne_bytes());
            }
        }
    }
}

/// The reader half of the aux protocol over any atomic word type.
pub fn snapshot<W: AtomicWord>(first: &W, last: &W, words: &[W]) -> Result<AuxSnapshot, AuxError> {
    copy(first, last, words).map(|c| parse(c.words, c.base, c.first, c.last))
}

/// The copy [`snapshot`] parses.
pub fn copy<W: AtomicWord>(first: &W, last: &W, words: &[W]) -> Result<AuxCopy, AuxError> {
    copy_releasing(first, last, words, |_| {})
}

/// Words copied between two calls of [`copy_releasing`]'s `release`.
const COPIED: u64 = 4096;

/// [`copy`], calling `release` with each range of word indices of `words` it is done with
/// (a reader of a mapped file gives their pages back as it goes; a retry reads them again).
pub fn copy_releasing<W: AtomicWord>(
    first: &W,
    last: &W,
    words: &[W],
    release: impl FnMut(core::ops::Range<usize>),
) -> Result<AuxCopy, AuxError> {
    copy_from(first, last, words, 0, release)
}

/// [`copy_releasing`] of the words from offset `from` on (or from the oldest record, if
/// that is later): what a copy already holding what lies below `from` needs
/// ([`AuxSnapshot::refresh`]). The copy's `first` says whether it continues that one: it
/// does where `first <= from`, else what lay between was overwritten before it was copied.
pub fn copy_from<W: AtomicWord>(
    first: &W,
    last: &W,
    words: &[W],
    from: u64,
    mut release: impl FnMut(core::ops::Range<usize>),
) -> Result<AuxCopy, AuxError> {
    let size = words.len() as u64 * 8;
    let wmask = words.len() as u64 - 1;
    let mut bad = None;
    for _ in 0..16 {
        // Acquire: the invalid headers (with their lengths) of the records before `l` are
        // visible to the copy.
        let l = last.load_acquire();
        // Acquire: keeps the copy's loads after this one (free on x86); correctness rests on
        // the re-load of `first` after the copy, not on this ordering.
        let f0 = first.load_acquire();
        if f0 > l || l - f0 > size || f0 % 8 != 0 || l % 8 != 0 {
            bad = Some(AuxError::Offsets { first: f0, last: l });
            continue;
        }
        // From `from` where it lies among the records held (8-aligned, as every offset).
        let start = from.clamp(f0, l) & !7;
        let mut copy = Vec::with_capacity(((l - start) / 8) as usize);
        let mut at = start / 8;
        while at < l / 8 {
            // Up to the next multiple of COPIED words, or the buffer's end: one range.
            let end = (l / 8).min((at / COPIED + 1) * COPIED);
            let end = end.min((at | wmask) + 1);
            // Acquire: a valid path copied makes its record's timestamp and payload visible
            // (the writer's Release store of the path).
            copy.extend((at..end).map(|i| words[(i & wmask) as usize].load_acquire()));
            release((at & wmask) as usize..((end - 1) & wmask) as usize + 1);
            at = end;
        }
        // Acquire fence: if the copy saw any store of a writer that overwrote a record, it
        // synchronizes with that writer's Release fence, so the load below sees the `first`
        // it moved past the record before overwriting it. Relaxed suffices for that load.
        W::fence(Acquire);
        let f1 = first.load(Relaxed);
        if f1 > l {
            bad = Some(AuxError::Busy);
            continue;
        }
        return Ok(AuxCopy {
            words: copy,
            base: start,
            first: f1.max(f0),
            last: l,
        });
    }
    Err(bad.unwrap_or(AuxError::Busy))
}

/// What a walk over a copy's records meets ([`walk`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Met {
    /// A complete record.
    Record(Located),
    /// A record still being written, at this offset.
    Incomplete(u64),
    /// A malformed header (or lengths beyond the copy): the walk ends.
    Corrupt,
}

/// The records in `[from, to)` of a copy of the buffer that starts at offset `base`, in
/// order. Every length is checked against the copy; a malformed header ends the walk.
fn walk(copy: &[u64], base: u64, from: u64, to: u64) -> impl Iterator<Item = Met> + '_ {
    let word = move |off: u64| copy.get((off.wrapping_sub(base) / 8) as usize).copied();
    let mut off = from;
    let mut ended = false;
    if from < base || from % 8 != 0 {
        ended = true;
    }
    let corrupt_start = ended && from < to;
    let mut first = corrupt_start;
    core::iter::from_fn(move || {
        if first {
            first = false;
            return Some(Met::Corrupt);
        }
        if ended || off >= to {
            return None;
        }
        let path = word(off).map(AuxPath)?;
        let rec = path.record_bytes();
        if !path.is_well_formed() || off + rec > to || off % 8 != 0 {
            ended = true;
            return Some(Met::Corrupt);
        }
        let met = if path.is_invalid() {
            Met::Incomplete(off)
        } else if copy.len() < ((off + rec - base) / 8) as usize {
            ended = true;
            return Some(Met::Corrupt);
        } else {
            Met::Record(Located {
                offset: off,
                len: path.len() as u16,
                tag: path.raw_tag(),
                cpu: path.cpu() as u16,
                truncated: path.is_truncated(),
            })
        };
        off += rec;
        Some(met)
    })
}

/// Parses records in `[from, to)` of a copy of the buffer that starts at offset `base`,
/// keeping the copy. Every length is checked against the copy; a malformed header ends the
/// walk.
pub fn parse(copy: Vec<u64>, base: u64, from: u64, to: u64) -> AuxSnapshot {
    let mut snap = AuxSnapshot {
        first: from,
        last: to,
        base,
        ..AuxSnapshot::default()
    };
    for met in walk(&copy, base, from, to) {
        match met {
            Met::Record(r) => snap.located.push(r),
            Met::Incomplete(off) => {
                snap.incomplete += 1;
                snap.first_incomplete.get_or_insert(off);
                snap.incomplete_at.push(off);
            }
            Met::Corrupt => snap.corrupt = true,
        }
    }
    snap.words = copy;
    snap
}

/// The extent of a copy (what [`Aux::extent_releasing`] gives: its extent, without an index).
pub fn extent(c: &AuxCopy) -> AuxExtent {
    let mut x = AuxExtent {
        from: c.last,
        to: c.last,
        last: c.last,
        bytes: c.last - c.first,
        ..AuxExtent::default()
    };
    let mut any = false;
    for met in walk(&c.words, c.base, c.first, c.last) {
        match met {
            Met::Record(r) => {
                if !any {
                    x.from = r.offset;
                    any = true;
                }
                x.to = r.end();
                x.records += 1;
            }
            Met::Incomplete(off) => x.incomplete.push(off),
            Met::Corrupt => x.corrupt = true,
        }
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use ttrace_layouts::aux::AuxTag;

    /// Writes the record `text` into `mem`.
    fn put(mem: &HeapAux<AtomicU64>, text: &str) -> u64 {
        let path = AuxPath::new(AuxTag::String, 0, text.len() as u64, false);
        let lock = std::sync::Mutex::new(());
        let w = mem.writer();
        let at = w.reserve(path, 7, 1, || lock.lock().ok(), |_| true, || {});
        w.commit(at.unwrap(), path, 0, text.as_bytes());
        at.unwrap()
    }

    fn texts(s: &AuxSnapshot) -> Vec<String> {
        s.records()
            .map(|r| String::from_utf8(r.bytes.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn a_refresh_is_what_a_fresh_snapshot_is() {
        // 32 words: a record of 8 bytes takes 4 of them (its header and one word).
        let mem = HeapAux::<AtomicU64>::new(32);
        let mut kept = AuxSnapshot::default();
        kept.refresh(&mem.aux(), None).unwrap();
        assert!(kept.is_empty());
        for round in 0..5 {
            for k in 0..3 {
                put(&mem, &format!("r{round}-k{k}xx"));
            }
            kept.refresh(&mem.aux(), None).unwrap();
            let fresh = mem.aux().snapshot().unwrap();
            assert_eq!(texts(&kept), texts(&fresh), "round {round}");
            assert_eq!((kept.first, kept.last), (fresh.first, fresh.last));
        }
    }

    #[test]
    fn a_refresh_keeps_what_the_buffer_lost_from_where_it_is_asked() {
        let mem = HeapAux::<AtomicU64>::new(32);
        let mut kept = AuxSnapshot::default();
        let mut all = Vec::new();
        for round in 0..6 {
            for k in 0..3 {
                let text = format!("r{round}-k{k}xx");
                all.push((put(&mem, &text), text));
            }
            kept.refresh(&mem.aux(), Some(0)).unwrap();
        }
        // Every record, 18 of them, where the buffer holds 8.
        let expected: Vec<String> = all.iter().map(|(_, t)| t.clone()).collect();
        assert_eq!(texts(&kept), expected);
        assert_eq!(mem.aux().snapshot().unwrap().len(), 8);
        for (at, text) in &all {
            assert_eq!(kept.get(*at).unwrap().bytes, text.as_bytes());
        }
        // From an offset on: the records that begin there or later.
        kept.refresh(&mem.aux(), Some(all[10].0 - 8)).unwrap();
        assert_eq!(texts(&kept), expected[10..]);
        // Saved from a window's start.
        let c = kept.as_copy_from(all[14].0);
        assert_eq!((c.first, c.last, c.words.len()), (all[14].0, kept.last, 16));
    }

    #[test]
    fn a_refresh_after_the_buffer_moved_on_begins_anew() {
        let mem = HeapAux::<AtomicU64>::new(32);
        let mut kept = AuxSnapshot::default();
        put(&mem, "beforexx");
        kept.refresh(&mem.aux(), Some(0)).unwrap();
        // More than a buffer's worth before the next refresh: what lay between is gone.
        for k in 0..12 {
            put(&mem, &format!("after{k:02}x"));
        }
        kept.refresh(&mem.aux(), Some(0)).unwrap();
        let fresh = mem.aux().snapshot().unwrap();
        assert_eq!(texts(&kept), texts(&fresh));
        assert!(!texts(&kept).contains(&"beforexx".to_string()));
    }
}
