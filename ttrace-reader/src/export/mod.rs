//! Traces for other tools: uftrace data, CTF for babeltrace2 and Trace Compass, Chrome Trace
//! Event JSON, Perfetto's own protobuf, and OpenTelemetry spans (OTLP) for a tracing backend.
//!
//! Every exporter reads the merged items of a [`View`](devttrace::View) once, in time order,
//! and writes as it goes: memory holds only what a format needs across events (per thread,
//! the entries still open), never the trace.

pub mod proto;
pub mod pipeline;
pub mod chrome;
pub mod ctf;
pub mod perfetto;
pub mod otlp;
#[cfg(feature = "post")]
pub mod post;
pub mod uftrace;

use crate::decode::Tally;
use crate::format::{self, Spec};
use crate::merge::{Item, Merge};
use devttrace::{Mark, Metadata, RingSnapshot};
use ttrace_layouts::entry::Kind;

// Argument names are the model's, shared with the snapshot rules.
pub use ttrace_model::arguments::unique;

/// A tracepoint as exporters see it: its name, kind, and its arguments' names and specs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schema {
    /// Name.
    pub name: String,
    /// Kind.
    pub kind: Kind,
    /// Argument names (`argN` for an unnamed one, names made unique) and how each is shown.
    pub args: Vec<(String, Spec)>,
    /// What its events mean beyond their kind.
    pub role: devttrace::Role,
    /// Its `tracing` level, for a `tracing` callsite's.
    pub level: Option<devttrace::Level>,
}

impl Schema {
    /// The schemas of every tracepoint in `meta`, by id.
    pub fn all(meta: &Metadata) -> Vec<Schema> {
        meta.tracepoints
            .iter()
            .map(|t| {
                let args = format::named_specs(t, meta);
                Schema {
                    name: t.name.clone(),
                    kind: t.kind,
                    args,
                    role: t.role,
                    level: t.level(),
                }
            })
            .collect()
    }
}

/// Bytes a streaming exporter gathers before it writes them out.
pub const SPILL_AT: usize = 1 << 16;

/// Writes `buf` to `out` and empties it once it holds [`SPILL_AT`] bytes, then reports
/// `progress`: what an exporter writing one stream does after each event.
pub fn spill(
    buf: &mut Vec<u8>,
    out: &mut impl std::io::Write,
    progress: impl FnOnce(),
) -> std::io::Result<()> {
    if buf.len() >= SPILL_AT {
        out.write_all(buf)?;
        buf.clear();
        progress();
    }
    Ok(())
}

/// What an exporter wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Trace points and messages written: as many as `dump` prints lines of the same trace.
    pub events: u64,
    /// Of these, messages.
    pub messages: u64,
    /// Ring entries lost, of the rings exported (overwritten before they were copied).
    pub lost: u64,
    /// Events writers dropped, in the rings exported.
    pub dropped: u64,
    /// Ring entries left out as damaged, of the rings exported.
    pub damaged: u64,
    /// Entry/exit pairs, and start/stop pairs of one name stem, written as one slice.
    pub pairs: u64,
    /// Entries whose exit is not in the trace, and exits whose entry is not.
    pub unpaired: u64,
    /// Entries and exits left unpaired because events of their thread may be missing
    /// around them (before the model's horizon: [`ttrace_model::model::Why::BeforeHorizon`]).
    pub uncertain: u64,
    /// Strings of the events written that show as `<lost>` ([`Merge::strings_lost`]).
    pub strings_lost: u64,
}

impl Written {
    /// Adds what `other` counts: a part's, to the whole's.
    pub fn add(&mut self, other: &Written) {
        let Written {
            events,
            messages,
            lost,
            dropped,
            damaged,
            pairs,
            unpaired,
            uncertain,
            strings_lost,
        } = *other;
        self.events += events;
        self.messages += messages;
        self.lost += lost;
        self.dropped += dropped;
        self.damaged += damaged;
        self.pairs += pairs;
        self.unpaired += unpaired;
        self.uncertain += uncertain;
        self.strings_lost += strings_lost;
    }

    /// Counts an item written (a trace point or a message).
    pub fn item(&mut self, item: &Item<'_>) {
        self.walked(matches!(item, Item::Message(_)));
    }

    /// Counts an item walked: a message, or an event.
    pub fn walked(&mut self, message: bool) {
        self.events += 1;
        self.messages += message as u64;
    }

    /// Adds the losses of the rings `items` reads.
    pub fn losses(&mut self, rings: &[RingSnapshot<Mark>], items: &Merge<'_>) {
        for (ring, r) in rings.iter().enumerate() {
            if items.selects_ring(ring) {
                self.lost += r.lost;
                self.dropped += r.dropped;
                self.damaged += r.damaged;
            }
        }
    }

    /// The events and losses written, as `dump` counts them.
    pub fn tally(&self) -> Tally {
        Tally {
            points: self.events - self.messages,
            messages: self.messages,
            lost: self.lost,
            dropped: self.dropped,
            strings_lost: self.strings_lost,
            damaged: self.damaged,
            unnamed: 0,
        }
    }
}

/// What a reused id's later threads (processes) are shown as in an export: the `k`-th
/// thread after the first to have an id is shown as `id + k * REUSED_STRIDE`. Linux ids
/// stay below `PID_MAX_LIMIT` (2^22), so these never clash with a real id.
pub const REUSED_STRIDE: u64 = 1 << 22;

/// The identities exports give writers: one per thread (process), even when ids are
/// reused, each with the name it had.
pub struct Identities<'m> {
    meta: &'m devttrace::Metadata,
    threads: devttrace::TaskIndex,
    processes: devttrace::TaskIndex,
}

/// One writer as an export shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity<'m> {
    /// Process id (shifted for a later process with a reused pid).
    pub pid: u64,
    /// Thread id (shifted for a later thread with a reused tid).
    pub tid: u64,
    /// The process's name at the time, if recorded.
    pub process: Option<&'m str>,
    /// The thread's name at the time, if recorded.
    pub thread: Option<&'m str>,
    /// The times the answer holds for (until a record of either id changes it).
    pub during: core::ops::Range<u64>,
}

impl<'m> Identities<'m> {
    /// The identities of the writers named in `meta`.
    pub fn new(meta: &'m devttrace::Metadata) -> Identities<'m> {
        Identities {
            meta,
            threads: devttrace::TaskIndex::threads(meta),
            processes: devttrace::TaskIndex::processes(meta),
        }
    }

    /// The writer of an event by `ctx` (`pid << 32 | tid`) at `timestamp`.
    pub fn of(&self, ctx: u64, timestamp: u64) -> Identity<'m> {
        let (pid, tid) = (ctx >> 32, ctx & 0xffff_ffff);
        let mut id = Identity {
            pid,
            tid,
            process: None,
            thread: None,
            during: 0..u64::MAX,
        };
        if let Some(c) = self.threads.at(ctx, timestamp) {
            id.tid += c.incarnation as u64 * REUSED_STRIDE;
            id.thread = Some(self.meta.threads[c.index].name.as_str());
            id.during = c.during;
        }
        if let Some(c) = self.processes.at(pid << 32, timestamp) {
            id.pid += c.incarnation as u64 * REUSED_STRIDE;
            id.process = Some(self.meta.processes[c.index].name.as_str());
            id.during = id.during.start.max(c.during.start)..id.during.end.min(c.during.end);
        }
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_names_are_made_unique() {
        let meta = Metadata {
            tracepoints: vec![devttrace::TracepointInfo {
                id: 0,
                name: "t".into(),
                kind: Kind::Start,
                classes: 1,
                format: "{a} {a} {a_1} {} {}".into(),
                nargs: 5,
                types: vec![],
                tables: vec![],
                role: devttrace::Role::Point,
            }],
            ..Metadata::default()
        };
        let names: Vec<String> = Schema::all(&meta)[0]
            .args
            .iter()
            .map(|(n, _)| n.clone())
            .collect();
        assert_eq!(names, ["a", "a_1", "a_1_1", "arg3", "arg4"]);
    }
}
