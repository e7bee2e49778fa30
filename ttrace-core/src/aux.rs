//! The aux protocol: variable-length records in the wrapping aux buffer.
//!
//! **Writer.** Under the aux lock, and only for a few instructions: take `start = last`,
//! advance `first` past the records the new one will overwrite, stamp the new record's header
//! invalid (with its exact length and the writer's context), and move `last` past it. After
//! unlocking, copy the payload and stamp the header valid (release).
//!
//! A record still being written is never overtaken: if the oldest record is invalid and its
//! writer (named by the record's `ident`) is alive, the new write waits briefly outside the
//! lock and is finally dropped and counted. Overwriting it would let the slow writer's late
//! stores land in the newcomer's record. A record whose writer died is overtaken normally.
//!
//! **Reader.** Load `last`, then `first`, copy `[first, last)` with acquire loads, fence,
//! load `first` again, and keep only valid records at or after the second `first`: everything
//! before it may have been overwritten during the copy; nothing after it was, because the
//! writer moves `first` before it writes over a record (see `docs/DESIGN.md`).

use crate::device::Device;
use crate::lock::{lock, owner_alive};
use crate::sync::{AtomicWord, Ordering::*};
use core::sync::atomic::AtomicU64;
use crossbeam_utils::Backoff;
use ttrace_layouts::aux::{AuxPath, AuxTag, AUX_HEADER_BYTES, AUX_MAX_PAYLOAD};

/// Tries before an aux write blocked by a record still being written is dropped.
const BLOCKED_TRIES: u32 = 64;

/// Copies `bytes` into the buffer at `offset` (8-aligned), word by word, wrapping at the
/// end of the buffer (the last word padded with zeros).
fn store_bytes(words: &[AtomicU64], offset: u64, bytes: &[u8]) {
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

impl Device {
    /// Appends an aux record holding `bytes` (truncated to 4072 bytes and flagged if longer)
    /// for the writer `ctx` (`pid << 32 | tid`). Returns its offset, or `None` if the write
    /// was dropped (and counted in the header's `aux_dropped`).
    pub fn aux_write(&self, tag: AuxTag, ctx: u64, bytes: &[u8]) -> Option<u64> {
        let h = self.header();
        let words = self.aux_words();
        let (size, wmask) = (words.len() as u64 * 8, words.len() as u64 - 1);
        let at = |off: u64| &words[((off / 8) & wmask) as usize];
        let truncated = bytes.len() as u64 > AUX_MAX_PAYLOAD;
        let bytes = &bytes[..bytes.len().min(AUX_MAX_PAYLOAD as usize)];
        let path = AuxPath::new(tag, self.cpu(), bytes.len() as u64, truncated);
        let rec = path.record_bytes();
        let backoff = Backoff::new();
        let mut reserved = None;
        for _ in 0..BLOCKED_TRIES {
            let Some(guard) = lock(&h.aux_lock) else {
                break;
            };
            // Relaxed: the lock orders these with every earlier reservation.
            let start = h.aux_last.load(Relaxed);
            let old_first = h.aux_first.load(Relaxed);
            // Offsets a damaged device could hold (first past last, or more than a buffer
            // apart) are repaired by dropping every record, never trusted.
            let mut first = if old_first > start || start - old_first > size || old_first % 8 != 0 {
                start
            } else {
                old_first
            };
            let mut blocked = false;
            while start + rec - first > size {
                // Acquire: if the record is complete, its payload stores happen-before the
                // stores with which we are about to overwrite it.
                let p = AuxPath(at(first).load(Acquire));
                if p.is_invalid() && owner_alive(at(first + 16).load(Relaxed)) {
                    blocked = true;
                    break;
                }
                // A malformed length (a damaged buffer) drops everything up to `start`.
                first = if p.is_well_formed() {
                    first + p.record_bytes()
                } else {
                    start
                };
            }
            if blocked {
                drop(guard);
                backoff.snooze();
                continue;
            }
            if first != old_first {
                h.aux_first.store(first, Relaxed);
                // Release fence: a reader that sees any of our stores below also sees the
                // new `first`, and so drops the records we overwrite.
                core::sync::atomic::fence(Release);
            }
            at(start).store(path.invalid().0, Relaxed);
            at(start + 16).store(ctx, Relaxed);
            // Release: a reader that loads this `last` sees the invalid header and its length.
            h.aux_last.store(start + rec, Release);
            // Counted under the lock, which every writer of these counters holds: a plain
            // increment, not a locked one.
            let bump = |c: &AtomicU64| c.store(c.load(Relaxed) + 1, Relaxed);
            bump(&h.aux_records);
            if truncated {
                bump(&h.aux_truncated);
            }
            drop(guard);
            reserved = Some(start);
            break;
        }
        let Some(start) = reserved else {
            h.aux_dropped.fetch_add(1, Relaxed);
            return None;
        };
        // A message carries its own time; a string is timed by the entry that refers to it,
        // which spares a second clock read on the hot path.
        let timestamp = if tag == AuxTag::String { 0 } else { self.now() };
        at(start + 8).store(timestamp, Relaxed);
        store_bytes(words, start + AUX_HEADER_BYTES, bytes);
        at(start).store(path.0, Release);
        Some(start)
    }

    /// A consistent snapshot of the aux buffer.
    pub fn aux_snapshot(&self) -> Result<AuxSnapshot, AuxError> {
        let h = self.header();
        snapshot(&h.aux_first, &h.aux_last, self.aux_words())
    }
}

/// One complete aux record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuxRecord {
    /// Its offset (what trace entries refer to).
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
    pub bytes: Vec<u8>,
}

/// A snapshot of the aux buffer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuxSnapshot {
    /// Offset of the oldest record that was intact after the copy.
    pub first: u64,
    /// Offset one past the newest record.
    pub last: u64,
    /// Complete records, oldest first.
    pub records: Vec<AuxRecord>,
    /// Records still being written when copied.
    pub incomplete: u64,
    /// Offset of the first of them.
    pub first_incomplete: Option<u64>,
    /// Whether a malformed header ended the walk early.
    pub corrupt: bool,
}

impl AuxSnapshot {
    /// The record at `offset`, if the snapshot holds it.
    pub fn get(&self, offset: u64) -> Option<&AuxRecord> {
        self.records
            .binary_search_by_key(&offset, |r| r.offset)
            .ok()
            .map(|i| &self.records[i])
    }
}

/// Why an aux snapshot failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuxError {
    /// Writers overwrote the whole buffer during every attempt to copy it.
    #[error("the aux buffer changed too fast to copy")]
    Busy,
    /// `first` and `last` are inconsistent with the buffer size (a damaged device).
    #[error("aux offsets out of range (first {first}, last {last})")]
    Offsets {
        /// `first`.
        first: u64,
        /// `last`.
        last: u64,
    },
}

/// The reader half of the aux protocol over any atomic word type.
pub fn snapshot<W: AtomicWord>(first: &W, last: &W, words: &[W]) -> Result<AuxSnapshot, AuxError> {
    let size = words.len() as u64 * 8;
    let wmask = words.len() as u64 - 1;
    let mut bad = None;
    for _ in 0..16 {
        let l = last.load(Acquire);
        let f0 = first.load(Acquire);
        if f0 > l || l - f0 > size || f0 % 8 != 0 || l % 8 != 0 {
            bad = Some(AuxError::Offsets { first: f0, last: l });
            continue;
        }
        let copy: Vec<u64> = (f0 / 8..l / 8)
            .map(|i| words[(i & wmask) as usize].load(Acquire))
            .collect();
        W::fence(Acquire);
        let f1 = first.load(Relaxed);
        if f1 > l {
            bad = Some(AuxError::Busy);
            continue;
        }
        return Ok(parse(&copy, f0, f1.max(f0), l));
    }
    Err(bad.unwrap_or(AuxError::Busy))
}

/// Parses records in `[from, to)` of a copy of the buffer that starts at offset `base`.
/// Every length is checked against the copy; a malformed header ends the walk.
pub fn parse(copy: &[u64], base: u64, from: u64, to: u64) -> AuxSnapshot {
    let mut snap = AuxSnapshot {
        first: from,
        last: to,
        ..AuxSnapshot::default()
    };
    let word = |off: u64| copy.get((off.wrapping_sub(base) / 8) as usize).copied();
    let mut off = from;
    if from < base || from % 8 != 0 {
        snap.corrupt = from < to;
        return snap;
    }
    while off < to {
        let Some(path) = word(off).map(AuxPath) else {
            break;
        };
        let rec = path.record_bytes();
        if !path.is_well_formed() || off + rec > to || off % 8 != 0 {
            snap.corrupt = true;
            break;
        }
        if path.is_invalid() {
            snap.incomplete += 1;
            snap.first_incomplete.get_or_insert(off);
        } else {
            let start = ((off - base) / 8 + 3) as usize;
            let Some(payload_words) =
                copy.get(start..start + (rec as usize - AUX_HEADER_BYTES as usize) / 8)
            else {
                snap.corrupt = true;
                break;
            };
            let mut bytes: Vec<u8> = payload_words.iter().flat_map(|w| w.to_ne_bytes()).collect();
            bytes.truncate(path.len() as usize);
            snap.records.push(AuxRecord {
                offset: off,
                tag: path.raw_tag(),
                cpu: path.cpu(),
                timestamp: word(off + 8).unwrap_or(0),
                ctx: word(off + 16).unwrap_or(0),
                truncated: path.is_truncated(),
                bytes,
            });
        }
        off += rec;
    }
    snap
}
