//! Damaged events: an entry read whole (its stamp checked twice, its type word well
//! formed) whose fields no writer of this device can have written — a bit flipped in a
//! device file on a failing disk or in a copy of it. Such an event is never shown: a
//! [`Check`] tells a reader, per event, whether it is *sound*, and the reader counts the
//! entries of one that is not in [`Accounting::damaged`](crate::event::Accounting::damaged) instead.
//!
//! What a sound event of ring `r` has, each against what the device or its metadata
//! records (see `docs/DESIGN.md`, *Entries*):
//!
//! - a time within the device's life: not before its clock anchor (taken when it was
//!   created, before any writer could attach), not after the copy was taken ([`latest`]);
//! - the CPU its ring belongs to: `r` in restartable ring `r` (written only there), one
//!   that folds onto `r` in a shared ring (`cpu % cpus`);
//! - in a shared ring, a position tag that is its slot's;
//! - a writer context whose pid and tid are possible on Linux (at most 2^22);
//! - a tracepoint the metadata defines, of the definition's kind and argument count;
//! - each argument within its recorded type: a `bool` 0 or 1, a `char` a Unicode scalar
//!   value, a string a reference to a string record of an aux buffer the device has (or the
//!   word of a string that could not be recorded); a placeholder that names a value table
//!   the metadata lost (a damaged snapshot) cannot be shown;
//! - in a snapshot with damaged extents ([`crate::damaged_extent`]): not an event whose
//!   continuation, string or thread name was left out (it would show something else).
//!
//! An integer of a width (`u8` ... `i32`) must be one such a
//! value can be; 64-bit integers, floats and pointers can hold any word: a flipped bit there
//! is not found.
//!
//! The checks cost a few comparisons per event (the arguments are looked at only for
//! tracepoints that have arguments of the types above), on the read path of every reader.

use crate::aux::AuxSnapshots;
use crate::damaged_extent::{DamagedExtent, Part};
use crate::event::{Event, RingSnapshot};
use crate::meta::{Metadata, TaskIndex};
use crate::version::Version;
use core::ops::{Range, RangeInclusive};
use ttrace_layouts::aux::{aux_ref_parts, AuxTag, AUX_NONE};
use ttrace_layouts::entry::{Kind, MAX_ARGS};
use ttrace_layouts::format::{Letter, Token, Tokens};
use ttrace_layouts::meta::ArgType;

/// The largest pid or tid Linux hands out (`PID_MAX_LIMIT` on 64-bit systems).
pub const PID_MAX: u64 = 1 << 22;

/// The latest timestamp an event of a device with clock `clock` can have when its clock
/// reads `now` and the wall clock `realtime_ns`: `now` and a second (a stamp is raised a
/// few ticks above the clock where two writes read the same time), where the device is of
/// this boot — its clock has run as long as the wall clock since it was created, give or
/// take a minute. A device of an earlier boot (on a disk: its clock restarted since) is
/// bounded by the wall clock instead, give or take an hour (a clock set back, NTP).
pub fn latest(clock: &crate::clock::Clock, now: u64, realtime_ns: u64) -> u64 {
    let ticks = |ns: u64| clock.ns_to_ticks(ns);
    let life = ticks(realtime_ns.saturating_sub(clock.anchor_realtime_ns));
    let by_wall = clock.anchor_ticks.saturating_add(life);
    let by_clock = now.saturating_add(ticks(1_000_000_000));
    let this_boot = now >= clock.anchor_ticks && now.abs_diff(by_wall) < ticks(60_000_000_000);
    match this_boot {
        true => by_clock,
        false => by_clock.max(by_wall.saturating_add(ticks(3_600_000_000_000))),
    }
}

/// Whether `ctx` (`pid << 32 | tid`) names a thread Linux can have.
#[inline]
fn possible(ctx: u64) -> bool {
    ctx >> 32 <= PID_MAX && ctx & 0xffff_ffff <= PID_MAX
}

/// What one argument word must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rule {
    /// Any word.
    Any,
    /// 0 or 1.
    Bool,
    /// A Unicode scalar value.
    Char,
    /// A string reference ([`ttrace_layouts::aux::aux_ref`]) or [`AUX_NONE`].
    Str,
    /// An integer of a width: a word one can be ([`ArgType::holds`]).
    Int(ArgType),
    /// Nothing: its value table was lost with a damaged snapshot's metadata.
    Lost,
}

/// What the events of one tracepoint must be.
#[derive(Clone, Debug)]
struct Point {
    kind: Kind,
    nargs: u8,
    /// Whether any argument has a rule other than [`Rule::Any`].
    strict: bool,
    rules: [Rule; MAX_ARGS],
}

/// What a snapshot's damaged extents left out of one ring.
#[derive(Clone, Debug, Default)]
struct LeftOut {
    /// Slots (each held something).
    slots: u64,
    /// Which, where the ring is still read.
    ranges: Vec<Range<u64>>,
}

/// Tells sound events from damaged ones (see the [module](self)), for one read of a device.
pub struct Check<'a> {
    /// By tracepoint id.
    points: Vec<Option<Point>>,
    num_cpus: usize,
    rings: usize,
    /// `ring_slots - 1`.
    mask: u64,
    stamps: RangeInclusive<u64>,
    aux: Option<&'a AuxSnapshots>,
    /// Per ring: what damaged extents left out of it and of its aux buffer.
    left_out: Vec<LeftOut>,
    aux_left_out: Vec<bool>,
    /// The thread names, where some were left out (events of a thread without one then
    /// cannot be shown as they were).
    names: Option<TaskIndex>,
    /// Whether slots or names were left out (so that [`Check::whole`] has something to
    /// check).
    partial: bool,
}

impl<'a> Check<'a> {
    /// The check of events of the device `version`, defined by `meta`, whose strings are in
    /// `aux` (if copied: else a string reference is only checked to be well formed), with
    /// timestamps in `stamps`, read from an image that left out `damaged` (none for a
    /// device).
    pub fn new(
        version: &Version,
        meta: &Metadata,
        aux: Option<&'a AuxSnapshots>,
        stamps: RangeInclusive<u64>,
        damaged: &[DamagedExtent],
    ) -> Check<'a> {
        let rings = ttrace_layouts::ring::num_rings(version.num_cpus);
        let mut left_out = vec![LeftOut::default(); rings];
        let mut aux_left_out = vec![false; rings];
        let (mut dropped, mut tables, mut names) = (vec![false; rings], false, false);
        for part in damaged.iter().flat_map(|d| &d.parts) {
            match part {
                Part::RingHeader {
                    ring, dropped: n, ..
                } if *ring < rings => {
                    dropped[*ring] = true;
                    aux_left_out[*ring] = true;
                    left_out[*ring] = LeftOut {
                        slots: *n,
                        ranges: Vec::new(),
                    };
                }
                Part::Slots { ring, slots, .. } if *ring < rings && !dropped[*ring] => {
                    left_out[*ring].slots += slots.end - slots.start;
                    left_out[*ring].ranges.push(slots.clone());
                }
                Part::Aux { ring, .. } if *ring < rings => aux_left_out[*ring] = true,
                Part::Records => tables = true,
                Part::Names => names = true,
                _ => {}
            }
        }
        let mut points: Vec<Option<Point>> = Vec::new();
        for t in &meta.tracepoints {
            let id = t.id as usize;
            if points.len() <= id {
                points.resize(id + 1, None);
            }
            if points[id].is_some() {
                continue;
            }
            let mut rules = [Rule::Any; MAX_ARGS];
            for (i, rule) in rules.iter_mut().enumerate().take(t.nargs as usize) {
                let ty = t.types.get(i).copied().unwrap_or_default();
                *rule = match ty {
                    ArgType::Bool => Rule::Bool,
                    ArgType::Char => Rule::Char,
                    ArgType::Str => Rule::Str,
                    _ if ty.is_sized() => Rule::Int(ty),
                    _ => Rule::Any,
                };
            }
            if tables {
                // A placeholder naming a value table the metadata no longer has.
                for token in Tokens::new(&t.format) {
                    if let Token::Arg { index, spec, .. } = token {
                        let named = !spec.is_empty() && Letter::of(spec.as_bytes()).is_none();
                        let found = t
                            .tables
                            .get(index)
                            .copied()
                            .flatten()
                            .and_then(|k| meta.values.get(k))
                            .is_some_and(|v| v.name == spec);
                        if named && !found && index < MAX_ARGS {
                            rules[index] = Rule::Lost;
                        }
                    }
                }
            }
            points[id] = Some(Point {
                kind: t.kind,
                nargs: t.nargs,
                strict: rules.iter().any(|&r| r != Rule::Any),
                rules,
            });
        }
        Check {
            points,
            num_cpus: version.num_cpus.max(1) as usize,
            rings,
            mask: version.ring_slots.max(1) - 1,
            stamps,
            aux,
            aux_left_out,
            partial: names || left_out.iter().any(|l| !l.ranges.is_empty()),
            names: names.then(|| TaskIndex::threads(meta)),
            left_out,
        }
    }

    /// Whether a writer on `cpu` writes to ring `ring` (or its aux buffer).
    #[inline]
    fn of_ring(&self, ring: usize, cpu: usize) -> bool {
        match ring.checked_sub(self.num_cpus) {
            None => cpu == ring,
            Some(shared) => cpu % self.num_cpus == shared,
        }
    }

    /// Whether `e`, read from ring `ring`, is sound (see the [module](self)).
    #[inline]
    pub fn sound(&self, ring: usize, e: &Event) -> bool {
        let tw = e.type_word;
        let tagged = ring < self.num_cpus || {
            let tag = tw.position_tag() as u64;
            tag & self.mask == e.slot as u64 & self.mask
        };
        let Some(Some(p)) = self.points.get(tw.tracepoint() as usize) else {
            return false;
        };
        self.of_ring(ring, tw.cpu() as usize)
            && tagged
            && self.stamps.contains(&e.stamp)
            && possible(e.ctx)
            && tw.kind() == p.kind
            && tw.nargs() == p.nargs
            && (!p.strict || self.arguments(p, e.args()))
            && (!self.partial || self.whole(ring, e))
    }

    /// Whether each argument word is within its rule.
    fn arguments(&self, p: &Point, args: &[u64]) -> bool {
        args.iter().zip(&p.rules).all(|(&w, rule)| match rule {
            Rule::Any => true,
            Rule::Bool => w <= 1,
            Rule::Char => u32::try_from(w).is_ok_and(|c| char::from_u32(c).is_some()),
            Rule::Str => self.string(w),
            Rule::Int(ty) => ty.holds(w),
            Rule::Lost => false,
        })
    }

    /// Whether `w` refers to a string this device can have (and that was not left out).
    fn string(&self, w: u64) -> bool {
        if w == AUX_NONE {
            return true;
        }
        let Some((buffer, low)) = aux_ref_parts(w) else {
            return false;
        };
        if buffer >= self.rings || low % 8 != 0 {
            return false;
        }
        match self.aux.map(|aux| aux.get(w)) {
            Some(Some(r)) => r.tag == AuxTag::String as u16,
            // No longer in the buffer: shown as lost, unless a damaged extent took it.
            Some(None) => !self.aux_left_out[buffer],
            None => true,
        }
    }

    /// Whether nothing `e` needs was left out of a damaged snapshot: its continuation and
    /// its thread's name.
    fn whole(&self, ring: usize, e: &Event) -> bool {
        let continuation = || {
            let next = (e.slot as u64 + 1) & self.mask;
            !self.left_out[ring].ranges.iter().any(|r| r.contains(&next))
        };
        (!e.continuation_lost || continuation())
            && self
                .names
                .as_ref()
                .is_none_or(|n| n.at(e.ctx, e.stamp).is_some())
    }

    /// Counts, in ring `ring`'s `snap`, the slots that damaged extents left out of it as
    /// damaged (they were read as overwritten: lost).
    pub fn settle<T>(&self, ring: usize, snap: &mut RingSnapshot<T>) {
        let Some(left) = self.left_out.get(ring) else {
            return;
        };
        let moved = left.slots.min(snap.lost);
        snap.lost -= moved;
        snap.damaged += left.slots;
    }

    /// Takes the damaged events out of `snap`, a copy of ring `ring` already made, and
    /// counts them (and what damaged extents left out) as [`Check::settle`] does.
    pub fn sift(&self, ring: usize, snap: &mut RingSnapshot) {
        let mut damaged = 0;
        snap.events.retain(|e| {
            let sound = self.sound(ring, e);
            if !sound {
                damaged += 1 + (e.type_word.has_continuation() && !e.continuation_lost) as u64;
            }
            sound
        });
        if damaged > 0 {
            snap.damaged += damaged;
            snap.committed = snap.committed.saturating_sub(damaged);
            // The writers of the events kept.
            let mut writers = Vec::new();
            for e in &snap.events {
                let pid = (e.ctx >> 32) as u32;
                if writers.len() < crate::event::MAX_WRITERS && !writers.contains(&pid) {
                    writers.push(pid);
                }
            }
            snap.writers = writers;
        }
        self.settle(ring, snap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;
    use ttrace_layouts::device::ClockSource;

    /// A 1 GHz clock anchored at `anchor` ticks at 1.7e18 ns since the Unix epoch.
    fn clock(anchor: u64) -> Clock {
        Clock::new(
            ClockSource::Tsc,
            1_000_000_000,
            anchor,
            1_700_000_000_000_000_000,
        )
    }

    const S: u64 = 1_000_000_000;

    #[test]
    fn the_latest_stamp_of_a_device_whose_clock_just_started() {
        // Created at tick 1000 of this boot, read 5 s later by both clocks.
        let c = clock(1_000);
        assert_eq!(
            latest(&c, 1_000 + 5 * S, c.anchor_realtime_ns + 5 * S),
            1_000 + 6 * S
        );
        // Read at once (the clocks of CPUs differ a little: the reader's is behind).
        assert_eq!(latest(&c, 999, c.anchor_realtime_ns), 1_000 + 3_600 * S);
        assert_eq!(latest(&c, 1_000, c.anchor_realtime_ns), 1_000 + S);
        // An anchor of 0, or 1, read 30 s later: 31 s, by the clock.
        for anchor in [0, 1] {
            let c = clock(anchor);
            let later = c.anchor_realtime_ns + 30 * S;
            assert_eq!(latest(&c, anchor + 30 * S, later), anchor + 31 * S);
        }
        // A device of an earlier boot, its anchor far above this boot's clock.
        let c = clock(1 << 50);
        let later = c.anchor_realtime_ns + 10 * S;
        assert_eq!(latest(&c, 1_000, later), (1 << 50) + 10 * S + 3_600 * S);
        // A wall clock set back before the device's creation.
        assert_eq!(latest(&clock(1_000), 0, 0), 1_000 + 3_600 * S);
    }

    #[test]
    fn the_latest_stamp_saturates_at_the_top() {
        let c = clock(u64::MAX - 10);
        assert_eq!(latest(&c, u64::MAX, u64::MAX), u64::MAX);
        assert_eq!(latest(&c, 5, u64::MAX), u64::MAX);
        let c = Clock::new(ClockSource::Tsc, u64::MAX, 1_000, 0);
        assert_eq!(latest(&c, 2_000, u64::MAX), u64::MAX);
    }
}
