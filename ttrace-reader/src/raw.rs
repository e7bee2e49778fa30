//! A CPU's events as raw 64-byte entries: what the `cpuN` files of a mounted device hold
//! (`ttrace-reader mount`), and what `ttrace-reader decode` reads back.
//!
//! Each event is its parent entry, then its continuation if it has one, word for word as a
//! ring slot holds them (see `ttrace_layouts::entry` and `docs/DESIGN.md`): stamp, type
//! word, context, five data words; a continuation's stamp is its parent's `| 1`, then seven
//! data words. Events are oldest first, the CPU's two rings merged by time. Only complete
//! entries are written: they were read with the stamp check.

use devttrace::{Accounting, Event, Mark, Reader, RingSnapshot, Snapshot, Version, View};
use std::ops::RangeInclusive;
use ttrace_layouts::entry::{Stamp, ENTRY_ARGS, SLOT_BYTES, SLOT_WORDS};
use zerocopy::IntoBytes;

/// Why bytes are not a sequence of entries.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("byte {offset}: {what}")]
pub struct RawError {
    /// Offset of the first byte that is not part of a whole, well-formed entry.
    pub offset: u64,
    /// What is wrong there.
    pub what: String,
}

/// Appends `event`'s entries to `out`.
pub fn put_event(out: &mut Vec<u8>, event: &Event) {
    let args = event.args();
    let mut words = [0u64; 2 * SLOT_WORDS];
    words[0] = event.stamp;
    words[1] = event.type_word.0;
    words[2] = event.ctx;
    let first = args.len().min(ENTRY_ARGS);
    words[3..3 + first].copy_from_slice(&args[..first]);
    // A continuation lost before the copy stays lost: the parent still says it had one.
    let slots = if event.type_word.has_continuation() && !event.continuation_lost {
        let cont = &mut words[SLOT_WORDS..];
        cont[0] = event.stamp | Stamp::CONTINUATION;
        let rest = &args[first..];
        cont[1..1 + rest.len()].copy_from_slice(rest);
        2
    } else {
        1
    };
    out.extend_from_slice(words[..slots * SLOT_WORDS].as_bytes());
}

/// The events of CPU `cpu` (its restartable and its shared ring, merged by time) as
/// entries, read now with the stamp check: the two rings copied and indexed as a
/// [`View`] reads them, then each event's entries written from the copy.
pub fn cpu_entries(dev: &Reader, cpu: usize) -> devttrace::Result<Vec<u8>> {
    let shared = dev.version().num_cpus as usize + cpu;
    let view = View::of_rings(dev, 0, &[cpu, shared])?;
    let (a, b) = (&view.cpus[cpu].events, &view.cpus[shared].events);
    let slots = |m: &[Mark]| m.iter().map(|m| 1 + m.continued as usize).sum::<usize>();
    let mut out = Vec::with_capacity((slots(a) + slots(b)) * SLOT_BYTES);
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let (ring, mark) = match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x.stamp <= y.stamp => (cpu, x),
            (Some(x), None) => (cpu, x),
            (_, Some(y)) => (shared, y),
            (None, None) => unreachable!("one of the rings has events left"),
        };
        if ring == cpu {
            i += 1;
        } else {
            j += 1;
        }
        if let Some(event) = view.event(ring, *mark) {
            put_event(&mut out, &event);
        }
    }
    Ok(out)
}

/// What the entries of one device can hold: a CPU it has rings for, a time in its life.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// CPUs `0..cpus`.
    pub cpus: u32,
    /// Timestamps.
    pub stamps: RangeInclusive<u64>,
}

impl Limits {
    /// Anything well-formed.
    pub const ANY: Limits = Limits {
        cpus: u32::MAX,
        stamps: 0..=u64::MAX,
    };

    /// The entries a device of `version` can have written: from a second before it was
    /// created (clocks of CPUs differ a little) to an hour from now (the wall clock of the
    /// machine decoding a copy may be behind that of the one that wrote it).
    pub fn of(version: &Version) -> Limits {
        let c = &version.clock;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let life = now.saturating_sub(c.anchor_realtime_ns);
        let slack = 3_600_000_000_000;
        Limits {
            cpus: version.num_cpus,
            stamps: c.anchor_ticks.saturating_sub(c.ns_to_ticks(1_000_000_000))
                ..=c.anchor_ticks
                    .saturating_add(c.ns_to_ticks(life.saturating_add(slack))),
        }
    }
}

/// The events of `bytes` (whole entries, each parent followed by its continuation if it has
/// one), in their order; each must be within `limits`.
///
/// ```
/// use ttrace_reader::raw::{parse, Limits};
/// let mut bytes = Vec::new();
/// assert_eq!(parse(&bytes, &Limits::ANY).unwrap().len(), 0);
/// bytes.extend_from_slice(&[0u8; 10]);
/// assert_eq!(parse(&bytes, &Limits::ANY).unwrap_err().offset, 0);
/// ```
pub fn parse(bytes: &[u8], limits: &Limits) -> Result<Vec<Event>, RawError> {
    let whole = bytes.len() / SLOT_BYTES * SLOT_BYTES;
    let slot = |k: usize| -> [u64; SLOT_WORDS] {
        let mut w = [0u64; SLOT_WORDS];
        for (i, word) in w.iter_mut().enumerate() {
            let at = k * SLOT_BYTES + i * 8;
            *word = u64::from_ne_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        }
        w
    };
    let bad = |k: usize, what: &str| RawError {
        offset: (k * SLOT_BYTES) as u64,
        what: what.to_string(),
    };
    let n = whole / SLOT_BYTES;
    let mut events = Vec::with_capacity(n);
    let mut k = 0;
    while k < n {
        let w = slot(k);
        let stamp = Stamp(w[0]);
        if stamp == Stamp::EMPTY || stamp.is_claimed() {
            return Err(bad(
                k,
                "not a complete entry (its stamp is empty or claimed)",
            ));
        }
        if stamp.is_continuation() {
            return Err(bad(k, "a continuation entry without its parent before it"));
        }
        let next = if k + 1 < n {
            devttrace::SlotRead::Committed(slot(k + 1))
        } else {
            devttrace::SlotRead::Empty
        };
        let reads = [devttrace::SlotRead::Committed(w), next];
        let Some((event, cont)) = devttrace::event_at(&reads, 0) else {
            return Err(bad(k, "not a ttrace entry (its type word is malformed)"));
        };
        if !limits.stamps.contains(&event.stamp) {
            return Err(bad(
                k,
                "not an entry of this device (its time is outside the device's life)",
            ));
        }
        if event.type_word.cpu() >= limits.cpus {
            return Err(bad(
                k,
                &format!(
                    "not an entry of this device (cpu{} of {})",
                    event.type_word.cpu(),
                    limits.cpus
                ),
            ));
        }
        events.push(event);
        k += 1 + cont.is_some() as usize;
    }
    if whole != bytes.len() {
        return Err(RawError {
            offset: whole as u64,
            what: format!(
                "{} bytes left: not a whole {SLOT_BYTES}-byte entry",
                bytes.len() - whole
            ),
        });
    }
    Ok(events)
}

/// A snapshot to decode `files` (each a sequence of events) with: the names, formats and
/// strings of `dev` as they are now, no messages.
pub fn snapshot(dev: &Reader, files: Vec<Vec<Event>>) -> Snapshot {
    let meta = dev.metadata();
    let (aux, aux_error) = match dev.aux() {
        Ok(aux) => (aux, None),
        Err(e) => (Default::default(), Some(e.to_string())),
    };
    Snapshot {
        dir: dev.dir().to_path_buf(),
        version: dev.version(),
        status: dev.status(),
        enabled: dev.enabled_all(&meta),
        meta,
        cpus: files
            .into_iter()
            .map(|events| RingSnapshot {
                counts: Accounting {
                    committed: events.len() as u64,
                    ..Accounting::default()
                },
                events,
                ..RingSnapshot::default()
            })
            .collect(),
        aux,
        aux_error,
    }
}
