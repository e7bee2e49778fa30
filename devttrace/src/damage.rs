//! Damaged events: an entry read whole (its stamp checked twice, its type word well
//! formed) whose fields no writer of this device can have written — a bit flipped in a
//! device file on a failing disk or in a copy of it. Such an event is never shown: a
//! [`Check`] tells a reader, per event, whether it is *sound*, and the reader counts the
//! entries of one that is not in [`RingSnapshot::damaged`] instead.
//!
//! What a sound event of ring `r` has, each against what the device or its metadata
//! records (see `docs/DESIGN.md`, *Entries*):
//!
//! - a time within the device's life: not before its clock anchor (taken when it was
//!   created, before any writer could attach), not after the copy was taken ([`latest`]);
//! - the CPU its ring belongs to: `r` in restartable ring `r` (written only there), one
//!   that folds onto `r` in a shared ring (`cpu % cpus`);
//! - in a shared ring, a position tag that is its slot's (or none, as older writers left);
//! - a writer context whose pid and tid are possible on Linux (at most 2^22);
//! - a tracepoint the metadata defines, of the definition's kind and argument count;
//! - each argument within its recorded type: a `bool` 0 or 1, a `char` a Unicode scalar
//!   value, a string a reference to a string record of an aux buffer the device has (or the
//!   word of a string that could not be recorded).
//!
//! Integers, floats and pointers can hold any word: a flipped bit there is not found.
//!
//! The checks cost a few comparisons per event (the arguments are looked at only for
//! tracepoints that have arguments of the types above), on the read path of every reader.

use crate::aux::AuxSnapshots;
use crate::event::{Event, RingSnapshot};
use crate::meta::Metadata;
use crate::version::Version;
use core::ops::RangeInclusive;
use ttrace_layouts::aux::{aux_ref_parts, AuxTag, AUX_NONE};
use ttrace_layouts::entry::{Kind, MAX_ARGS};
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
}

impl<'a> Check<'a> {
    /// The check of events of the device `version`, defined by `meta`, whose strings are in
    /// `aux` (if copied: else a string reference is only checked to be well formed), with
    /// timestamps in `stamps`.
    pub fn new(
        version: &Version,
        meta: &Metadata,
        aux: Option<&'a AuxSnapshots>,
        stamps: RangeInclusive<u64>,
    ) -> Check<'a> {
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
                *rule = match t.types.get(i).copied().unwrap_or_default() {
                    ArgType::Bool => Rule::Bool,
                    ArgType::Char => Rule::Char,
                    ArgType::Str => Rule::Str,
                    _ => Rule::Any,
                };
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
            rings: ttrace_layouts::ring::num_rings(version.num_cpus),
            mask: version.ring_slots.max(1) - 1,
            stamps,
            aux,
        }
    }

    /// Whether `e`, read from ring `ring`, is sound (see the [module](self)).
    #[inline]
    pub fn sound(&self, ring: usize, e: &Event) -> bool {
        let tw = e.type_word;
        let cpu = tw.cpu() as usize;
        let on_ring = match ring.checked_sub(self.num_cpus) {
            None => cpu == ring,
            Some(shared) => {
                cpu % self.num_cpus == shared && {
                    let tag = tw.position_tag() as u64;
                    tag == 0 || tag & self.mask == e.slot as u64 & self.mask
                }
            }
        };
        let (pid, tid) = (e.ctx >> 32, e.ctx & 0xffff_ffff);
        let Some(Some(p)) = self.points.get(tw.tracepoint() as usize) else {
            return false;
        };
        on_ring
            && self.stamps.contains(&e.stamp)
            && pid <= PID_MAX
            && tid <= PID_MAX
            && tw.kind() == p.kind
            && tw.nargs() == p.nargs
            && (!p.strict || self.arguments(p, e.args()))
    }

    /// Whether each argument word is within its rule.
    fn arguments(&self, p: &Point, args: &[u64]) -> bool {
        args.iter().zip(&p.rules).all(|(&w, rule)| match rule {
            Rule::Any => true,
            Rule::Bool => w <= 1,
            Rule::Char => u32::try_from(w).is_ok_and(|c| char::from_u32(c).is_some()),
            Rule::Str => self.string(w),
        })
    }

    /// Whether `w` refers to a string this device can have.
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
        // One no longer in the buffer shows as lost.
        self.aux
            .and_then(|aux| aux.get(w))
            .is_none_or(|r| r.tag == AuxTag::String as u16)
    }

    /// Takes the damaged events out of `snap`, a copy of ring `ring` already made, and
    /// counts them.
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
    }
}
