//! Perfetto's native format: a `Trace` of `TracePacket`s carrying `TrackEvent`s
//! (`perfetto/protos/perfetto/trace/track_event/`), for ui.perfetto.dev and
//! trace_processor, written with the hand encoder of [`super::proto`].
//!
//! Every event `dump` shows is one track event here, at its time, on its thread's packet
//! sequence, named by its tracepoint, its arguments as debug annotations (their types
//! kept, value tables' names as strings):
//!
//! - **Tracks.** A process track per process and a thread track per thread (its pid and
//!   tid, as reused ids show in every export: [`Identities`]), named as the writer was at
//!   the event's time.
//! - **Slices** render the model's steps ([`ttrace_model::model`]): a call (an entry and
//!   the exit the model closes it with) begins and ends a slice on the thread track; a stem
//!   pair (a start and the stop of its name stem on the same thread) one on an async track
//!   of that stem under the thread's. Each poll of a `tracing` span (an enter and its exit)
//!   is a slice on the thread that polled. What the model leaves unpaired (its other half
//!   lost, or before the horizon) is an instant, in the category `unpaired`, with the
//!   model's reason as its argument `why` (`before_horizon`, `partner_missing`); a slice
//!   whose end is not in the trace is left open (Perfetto shows it as not ended).
//! - **Span instances** are slices from their new to their close on *lanes*: async tracks
//!   under the process's, grouped per process and name of the root span (a `request` group
//!   holds `request` instances and everything under them), all of a group named as its
//!   root, so that the UI shows a group as one track. A child instance is a slice on the
//!   lane of its parent, nested in it, when its parent is the innermost slice open there; a
//!   root takes the group's first free lane (a lane is free when nothing is open on it), so
//!   a group has as many lanes as trees were ever open at once in it, whatever the number of
//!   instances. A child whose parent's lane holds a sibling still open (children run at
//!   once) takes a free lane of the group, and a flow goes from it to its parent's close. An
//!   instance still open on a lane when an instance under it there closes (a subscriber that
//!   does not keep parents alive) ends there and goes on on a free lane, from that moment, a
//!   flow joining the two (both halves carry the argument `moved`). An instance whose new is
//!   not in the trace has no slice: its steps are instants on the thread.
//! - **The drop re-entry** (`tracing` enters a span once more to drop its future, then
//!   closes it: the model's `PollDrop`) is no poll: its enter and exit are instants of the
//!   category `drop` on the instance's lane. The model gives a poll's steps up to two events
//!   of its thread late (what tells the drop re-entry), so they are written then.
//! - **Where the time went** ([`ttrace_model::anatomy`]): where the trace records a thread's
//!   context switches, its stretches on and off the CPU are slices (`on_cpu`, `preempted`,
//!   `blocked`, category `sched`) on a track `cpu state` under the thread's; and a call's,
//!   a pair's or a span instance's end carries its parts as arguments (`<part>_ns`, those not
//!   zero, and `dominant`) where the trace tells any.
//! - **Instants:** every other event; a span's records and `follows_from` on its lane
//!   (on the thread where a slice under it is open there), each `follows_from` a flow to
//!   the close of the span it names (a flow id for each).
//! - **Counters:** the arguments the user marks (`--counter NAME.ARG`) also set a counter
//!   track of that name under the process's, at each event.
//! - **Losses:** a ring's lost, dropped and damaged entries are an instant `lost` on the
//!   thread track of its first event (the gap is before it), with the CPU and the counts.
//! - **Sequences.** Each writer thread's events form one packet sequence: its first packet
//!   clears the incremental state and makes the thread track the sequence's default track,
//!   so thread events name no track; the others need that state. Event names, categories
//!   and argument names are interned per sequence, defined in the packet that first uses
//!   them.
//! - **Time** is nanoseconds since the device was created (small numbers, short varints):
//!   a clock of the sequence's own ([`TRACE_CLOCK`], set as its default), which a
//!   `ClockSnapshot` before its first event ties to `CLOCK_REALTIME` at the device's
//!   anchor; the first snapshot makes `CLOCK_REALTIME` the trace's clock, so the UI shows
//!   wall-clock time, as `dump --utc` does.
//!
//! Memory holds the tracks and interned strings seen, the model's state (what is open) and
//! the span instances' lanes and flows, never the events: the trace is written as it is
//! read.

use super::pipeline::Walked;
use super::proto::{bytes, close, double, fixed64, message, open, uint};
use super::{Identities, Schema, Written};
use crate::decode::Context;
use crate::format::Spec;
use crate::merge::Merge;
use devttrace::{AuxSnapshots, Clock, Event, Mark, RingSnapshot, Role};
use foldhash::HashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Write;
use ttrace_model::anatomy::{Parts, Stretch};
use ttrace_model::model::{Model, Step, Why};
use ttrace_model::pairs::Stems;

/// `TracePacket` fields.
mod packet {
    pub const CLOCK_SNAPSHOT: u32 = 6;
    pub const TIMESTAMP: u32 = 8;
    pub const SEQUENCE_ID: u32 = 10;
    pub const TRACK_EVENT: u32 = 11;
    pub const INTERNED_DATA: u32 = 12;
    pub const SEQUENCE_FLAGS: u32 = 13;
    pub const TRACK_DESCRIPTOR: u32 = 60;
    /// `trace_packet_defaults`, and its `TracePacketDefaults.track_event_defaults`.
    pub const DEFAULTS: u32 = 59;
    pub const TRACK_EVENT_DEFAULTS: u32 = 11;
    /// `TracePacketDefaults.timestamp_clock_id`.
    pub const TIMESTAMP_CLOCK_ID: u32 = 58;
    /// `SequenceFlags`.
    pub const INCREMENTAL_STATE_CLEARED: u64 = 1;
    pub const NEEDS_INCREMENTAL_STATE: u64 = 2;
}

/// `TrackEvent` fields and types.
mod event {
    pub const CATEGORY_IIDS: u32 = 3;
    pub const DEBUG_ANNOTATIONS: u32 = 4;
    pub const TYPE: u32 = 9;
    pub const NAME_IID: u32 = 10;
    pub const TRACK_UUID: u32 = 11;
    pub const COUNTER_VALUE: u32 = 30;
    pub const DOUBLE_COUNTER_VALUE: u32 = 44;
    pub const FLOW_IDS: u32 = 47;
    pub const SLICE_BEGIN: u64 = 1;
    pub const SLICE_END: u64 = 2;
    pub const INSTANT: u64 = 3;
    pub const COUNTER: u64 = 4;
}

/// `TrackDescriptor`, `ProcessDescriptor` and `ThreadDescriptor` fields.
mod track {
    pub const UUID: u32 = 1;
    pub const NAME: u32 = 2;
    pub const PROCESS: u32 = 3;
    pub const THREAD: u32 = 4;
    pub const PARENT_UUID: u32 = 5;
    pub const COUNTER: u32 = 8;
    pub const PID: u32 = 1;
    pub const TID: u32 = 2;
    pub const PROCESS_NAME: u32 = 6;
    pub const THREAD_NAME: u32 = 5;
}

/// `ClockSnapshot` and `ClockSnapshot.Clock` fields.
mod clock {
    pub const CLOCKS: u32 = 1;
    pub const PRIMARY_TRACE_CLOCK: u32 = 2;
    pub const ID: u32 = 1;
    pub const TIMESTAMP: u32 = 2;
    /// `BUILTIN_CLOCK_REALTIME`.
    pub const REALTIME: u64 = 1;
}

/// The clock of every packet's timestamp: nanoseconds since the device's anchor (its
/// creation), a clock of each sequence's own (ids 64 to 127 are), tied to `CLOCK_REALTIME`
/// by a snapshot on the sequence.
pub const TRACE_CLOCK: u64 = 64;

/// `InternedData` fields (each entry: `iid = 1`, `name = 2`), in the order of [`Strings`].
const INTERNED: [u32; 3] = [1, 2, 3];

/// `DebugAnnotation` fields.
mod annotation {
    pub const NAME_IID: u32 = 1;
    pub const BOOL: u32 = 2;
    pub const UINT: u32 = 3;
    pub const INT: u32 = 4;
    pub const DOUBLE: u32 = 5;
    pub const STRING: u32 = 6;
    pub const POINTER: u32 = 7;
}

/// `Trace.packet`.
const TRACE_PACKET: u32 = 1;

/// The kinds of interned strings, as indexes of [`Sequence::interned`].
mod strings {
    pub const CATEGORY: usize = 0;
    pub const NAME: usize = 1;
    pub const ANNOTATION: usize = 2;
}

/// The names of a loss instant's arguments.
const LOSS_ARGS: [&str; 4] = ["cpu", "lost", "dropped", "damaged"];

/// One thread's packet sequence.
struct Sequence {
    id: u64,
    /// Its thread track.
    track: u64,
    /// The track of its process.
    process: u64,
    /// The name the track has (`None`: not described yet).
    named: Option<Option<String>>,
    /// Interned strings: per kind ([`strings`]), string -> iid.
    interned: [HashMap<String, u64>; 3],
    /// Whether a packet was written on it.
    started: bool,
    /// Per tracepoint id, its iids here once interned.
    points: Vec<Option<PointIids>>,
}

/// Strings a packet's event needs interned: (kind, iid, text), defined in that packet.
type NewStrings = Vec<(usize, u64, String)>;

/// A tracepoint's iids on one sequence: its name, its category, its arguments' names.
type PointIids = (u64, u64, Vec<u64>);

/// The name and category of a track event.
#[derive(Clone, Copy)]
enum Name<'a> {
    /// Tracepoint `id`'s own (interned once per sequence, with its arguments' names).
    Point(u16),
    /// These.
    Given(&'a str, &'a str),
}

/// The arguments of a track event.
#[derive(Clone, Copy)]
enum Args<'e> {
    /// An event's, named by its tracepoint.
    Of(&'e Event),
    /// An unpaired event's, then why the model left it unpaired: the argument `why`
    /// ([`Why::name`]).
    Unpaired(&'e Event, Why),
    /// A message's text, the argument `message`.
    Message(&'e str),
    /// A loss: the CPU, then the entries lost, dropped and damaged ([`LOSS_ARGS`]).
    Loss([u64; 4]),
    /// A half of an instance moved to another lane: the argument `moved` ([`MOVED`]).
    Moved,
    /// An end's, then where its slice's time went (ns, those not zero, `<part>_ns`) and
    /// the largest part (`dominant`): [`ttrace_model::anatomy`].
    Parts(&'e Event, Parts),
    /// None.
    Nothing,
}

/// The argument of both halves of an instance moved to another lane: its name and value.
pub const MOVED: (&str, &str) = ("moved", "a span under it closed first");

/// The arguments of a slice's end that say where its time went, by part
/// ([`ttrace_model::anatomy::Part::ALL`]'s order).
pub const PART_ARGS: [&str; 6] = [
    "on_cpu_ns",
    "preempted_ns",
    "blocked_ns",
    "scheduled_ns",
    "idle_ns",
    "unknown_ns",
];

/// A track event to write.
struct TrackEvent<'a> {
    /// The writer and time: which sequence it goes on, and when.
    ctx: u64,
    stamp: u64,
    /// Its track; `None`: its writer's thread track.
    track: Option<u64>,
    kind: u64,
    name: Name<'a>,
    args: Args<'a>,
    /// The flows it is a step of.
    flows: &'a [u64],
}

/// A writer's sequence, as [`Writer::sequence`] finds it.
#[derive(Clone, Copy)]
struct Seq {
    /// Its thread's identity (pid, tid), as exports show reused ids.
    key: (u64, u64),
    id: u64,
    track: u64,
    process: u64,
}

/// The last writer seen: its `ctx`, the times its identity holds for, its sequence.
type Recent = (u64, core::ops::Range<u64>, Seq);

/// A `tracing` span instance open in the trace.
struct Instance {
    /// What its lane knows it by.
    serial: u64,
    /// Its lane while its slice is open there: group and lane (`None`: no slice, its new
    /// is not in the trace).
    lane: Option<(usize, usize)>,
}

/// An instance's slice open on a lane.
#[derive(Clone, Copy)]
struct Open {
    serial: u64,
    /// Its process and span id.
    key: (u32, u64),
    /// The tracepoint of its new: its name and category.
    point: u16,
}

/// One async track of a group, and the slices open on it, outermost first: a root and
/// the chain of its descendants nested in it.
struct Lane {
    track: u64,
    open: Vec<Open>,
}

/// The lanes of a process for the trees of one root span name.
struct Group {
    /// The process's track, and the name every lane has.
    process: u64,
    name: String,
    lanes: Vec<Lane>,
    /// The lanes with nothing open, lowest first.
    free: BinaryHeap<Reverse<usize>>,
}

/// An argument the user marks as a counter: tracepoint `point`'s argument `arg`, a counter
/// track named `name` in each process that records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counter {
    point: u16,
    arg: usize,
    name: String,
    float: bool,
}

/// Why a counter the user named cannot be one.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CounterError {
    /// No tracepoint has the name.
    #[error("--counter {0}: the trace has no tracepoint named {1}")]
    NoTracepoint(String, String),
    /// The tracepoint has no such argument.
    #[error("--counter {0}: {1} has no argument {2} (it has: {3})")]
    NoArgument(String, String, String, String),
    /// The argument is not a number.
    #[error(
        "--counter {0}: {1} is not a number (counters are unsigned, signed or float arguments)"
    )]
    NotANumber(String, String),
}

/// The counters `specs` (each `NAME.ARG`, or `NAME` for each numeric argument of `NAME`)
/// name among the tracepoints of `meta`.
///
/// ```
/// use devttrace::{Kind, Metadata, Role, TracepointInfo};
/// use ttrace_reader::export::perfetto::counters;
/// let point = |name: &str, format: &str| TracepointInfo {
///     name: name.into(), kind: Kind::Start, classes: 0, format: format.into(), nargs: 1,
///     types: vec![], tables: vec![], id: 0, role: Role::Point,
/// };
/// let meta = Metadata { tracepoints: vec![point("queue", "depth={depth}")], ..Default::default() };
/// assert_eq!(counters(&meta, &["queue.depth".into()]).unwrap().len(), 1);
/// assert_eq!(
///     counters(&meta, &["queue.dpth".into()]).unwrap_err().to_string(),
///     "--counter queue.dpth: queue has no argument dpth (it has: depth)"
/// );
/// ```
pub fn counters(
    meta: &devttrace::Metadata,
    specs: &[String],
) -> Result<Vec<Counter>, CounterError> {
    let schemas = Schema::all(meta);
    let numeric = |s: &Spec| match s {
        Spec::Unsigned | Spec::Signed | Spec::Float => Some(*s == Spec::Float),
        _ => None,
    };
    let mut out = Vec::new();
    for spec in specs {
        // The longest tracepoint name that the spec is or starts with (names hold dots).
        let found = schemas
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                *spec == s.name
                    || spec
                        .strip_prefix(s.name.as_str())
                        .is_some_and(|r| r.starts_with('.'))
            })
            .max_by_key(|(_, s)| s.name.len());
        let Some((id, schema)) = found else {
            let name = spec.split('.').next().unwrap_or(spec);
            return Err(CounterError::NoTracepoint(spec.clone(), name.to_string()));
        };
        let counter = |arg: usize, float| Counter {
            point: id as u16,
            arg,
            name: format!("{}.{}", schema.name, schema.args[arg].0),
            float,
        };
        match spec.get(schema.name.len() + 1..) {
            None | Some("") => out.extend(
                schema
                    .args
                    .iter()
                    .enumerate()
                    .filter_map(|(i, (_, s))| Some(counter(i, numeric(s)?))),
            ),
            Some(arg) => {
                let Some(i) = schema.args.iter().position(|(a, _)| a == arg) else {
                    let names: Vec<&str> = schema.args.iter().map(|(a, _)| a.as_str()).collect();
                    return Err(CounterError::NoArgument(
                        spec.clone(),
                        schema.name.clone(),
                        arg.to_string(),
                        names.join(", "),
                    ));
                };
                let float = numeric(&schema.args[i].1)
                    .ok_or_else(|| CounterError::NotANumber(spec.clone(), spec.clone()))?;
                out.push(counter(i, float));
            }
        }
    }
    Ok(out)
}

/// Writes a view's items as a Perfetto trace.
struct Writer<'s> {
    aux: &'s AuxSnapshots,
    clock: Clock,
    schemas: Vec<Schema>,
    /// Per tracepoint id, the name and category its events show.
    labels: Vec<(String, String)>,
    identities: Identities<'s>,
    /// The sequences, by id - 1, and by their thread's identity.
    sequences: Vec<Sequence>,
    by_thread: HashMap<(u64, u64), usize>,
    /// Process tracks: pid -> its uuid and the name given.
    processes: HashMap<u64, (u64, Option<String>)>,
    /// The last writer seen (events come in runs of one thread).
    recent: Option<Recent>,
    next_uuid: u64,
    /// Per tracepoint id, the stem of a start or stop, as a small number (what names its
    /// async tracks).
    stems: Stems,
    /// Per thread and stem: its async track.
    starts: HashMap<((u64, u64), usize), u64>,
    /// Per thread: the track of its states on and off the CPU, under its own.
    states: HashMap<(u64, u64), u64>,
    /// Span instances open, by process and span id.
    instances: HashMap<(u32, u64), Instance>,
    next_serial: u64,
    /// Lanes: groups, by the process's id and the root's name.
    groups: Vec<Group>,
    by_group: HashMap<(u64, usize), usize>,
    /// Per tracepoint id, its name as a small number (the names of groups).
    names: Vec<usize>,
    /// The flows waiting for the close of a span (by process and span id).
    flows: HashMap<(u32, u64), Vec<u64>>,
    next_flow: u64,
    /// Whether a clock snapshot was written (the first names the trace's clock).
    clocked: bool,
    /// Per tracepoint id, the counters its events set.
    counters: Vec<Vec<Counter>>,
    /// Counter tracks: (process, tracepoint, argument) -> uuid.
    counter_tracks: HashMap<(u64, u16, usize), u64>,
    /// Per ring, its losses not yet shown: CPU, lost, dropped, damaged.
    losses: Vec<Option<[u64; 4]>>,
    written: Written,
    buf: Vec<u8>,
}

impl<'s> Writer<'s> {
    /// A new track's uuid.
    fn uuid(&mut self) -> u64 {
        self.next_uuid += 1;
        self.next_uuid
    }

    /// The sequence of the writer `ctx` at `stamp`, its tracks described first if new (or
    /// renamed).
    fn sequence(&mut self, ctx: u64, stamp: u64) -> Seq {
        if let Some((c, during, seq)) = &self.recent {
            if *c == ctx && during.contains(&stamp) {
                return *seq;
            }
        }
        let id = self.identities.of(ctx, stamp);
        let key = (id.pid, id.tid);
        let process_name = id.process.map(str::to_string);
        let process = match self.processes.get(&id.pid) {
            Some((uuid, name)) if *name == process_name => *uuid,
            known => {
                let uuid = match known {
                    Some(p) => p.0,
                    None => self.uuid(),
                };
                self.processes.insert(id.pid, (uuid, process_name.clone()));
                self.descriptor(uuid, None, None, |d| {
                    message(d, track::PROCESS, |p| {
                        uint(p, track::PID, id.pid);
                        if let Some(n) = &process_name {
                            bytes(p, track::PROCESS_NAME, n.as_bytes());
                        }
                    })
                });
                uuid
            }
        };
        let index = match self.by_thread.get(&key) {
            Some(&i) => i,
            None => {
                let (id, track) = (self.sequences.len() as u64 + 1, self.uuid());
                self.sequences.push(Sequence {
                    id,
                    track,
                    process,
                    named: None,
                    interned: Default::default(),
                    started: false,
                    points: Vec::new(),
                });
                self.by_thread.insert(key, self.sequences.len() - 1);
                self.sequences.len() - 1
            }
        };
        let seq = &mut self.sequences[index];
        seq.process = process;
        let found = Seq {
            key,
            id: seq.id,
            track: seq.track,
            process,
        };
        let thread_name = id.thread.map(str::to_string);
        if seq.named.as_ref() != Some(&thread_name) {
            seq.named = Some(thread_name.clone());
            self.descriptor(found.track, Some(process), None, |d| {
                message(d, track::THREAD, |t| {
                    uint(t, track::PID, id.pid);
                    uint(t, track::TID, id.tid);
                    if let Some(n) = &thread_name {
                        bytes(t, track::THREAD_NAME, n.as_bytes());
                    }
                })
            });
        }
        self.recent = Some((ctx, id.during.clone(), found));
        found
    }

    /// Writes the descriptor of track `uuid`, under `parent`, named `name`, the rest of
    /// its body from `body`.
    fn descriptor(
        &mut self,
        uuid: u64,
        parent: Option<u64>,
        name: Option<&str>,
        body: impl FnOnce(&mut Vec<u8>),
    ) {
        message(&mut self.buf, TRACE_PACKET, |p| {
            message(p, packet::TRACK_DESCRIPTOR, |d| {
                uint(d, track::UUID, uuid);
                if let Some(parent) = parent {
                    uint(d, track::PARENT_UUID, parent);
                }
                if let Some(name) = name {
                    bytes(d, track::NAME, name.as_bytes());
                }
                body(d);
            })
        });
    }

    /// A new track named `name` under `parent`.
    fn child_track(&mut self, parent: u64, name: &str) -> u64 {
        let uuid = self.uuid();
        self.descriptor(uuid, Some(parent), Some(name), |_| {});
        uuid
    }

    /// Nanoseconds of `ticks` since the device's anchor (its creation).
    fn ns(&self, ticks: u64) -> u64 {
        self.clock.since_anchor_ns(ticks).max(0) as u64
    }

    /// The iid of `text` of kind `kind` on sequence `seq`, added to `new` if it is new there.
    fn iid(seq: &mut Sequence, kind: usize, text: &str, new: &mut NewStrings) -> u64 {
        if let Some(&iid) = seq.interned[kind].get(text) {
            return iid;
        }
        let iid = seq.interned[kind].len() as u64 + 1;
        seq.interned[kind].insert(text.to_string(), iid);
        new.push((kind, iid, text.to_string()));
        iid
    }

    /// The iids of tracepoint `id` on `seq` (interned there first if new).
    fn point_iids<'q>(
        seq: &'q mut Sequence,
        id: usize,
        labels: &[(String, String)],
        schemas: &[Schema],
        new: &mut NewStrings,
    ) -> Option<&'q PointIids> {
        let (n, c) = labels.get(id)?;
        if seq.points.len() <= id {
            seq.points.resize(id + 1, None);
        }
        if seq.points[id].is_none() {
            let iids = (
                Self::iid(seq, strings::NAME, n, new),
                Self::iid(seq, strings::CATEGORY, c, new),
                schemas[id]
                    .args
                    .iter()
                    .map(|(a, _)| Self::iid(seq, strings::ANNOTATION, a, new))
                    .collect(),
            );
            seq.points[id] = Some(iids);
        }
        seq.points[id].as_ref()
    }

    /// Starts a packet on sequence `seq` at `stamp`, with the strings of `new` interned:
    /// the packet's header, up to its track event; [`close`] ends it, given what this
    /// returns.
    fn packet_header(&mut self, seq: Seq, stamp: u64, new: &NewStrings) -> usize {
        let ts = self.ns(stamp);
        let sequence = &mut self.sequences[seq.id as usize - 1];
        let flags = match std::mem::replace(&mut sequence.started, true) {
            false => packet::INCREMENTAL_STATE_CLEARED,
            true => packet::NEEDS_INCREMENTAL_STATE,
        };
        let realtime = self.clock.anchor_realtime_ns;
        let first = flags == packet::INCREMENTAL_STATE_CLEARED
            && !std::mem::replace(&mut self.clocked, true);
        let p = &mut self.buf;
        if flags == packet::INCREMENTAL_STATE_CLEARED {
            // The sequence's clock, tied to the wall clock at the device's anchor (0 there).
            message(p, TRACE_PACKET, |s| {
                uint(s, packet::SEQUENCE_ID, seq.id);
                message(s, packet::CLOCK_SNAPSHOT, |c| {
                    message(c, clock::CLOCKS, |k| {
                        uint(k, clock::ID, TRACE_CLOCK);
                        uint(k, clock::TIMESTAMP, 0);
                    });
                    message(c, clock::CLOCKS, |k| {
                        uint(k, clock::ID, clock::REALTIME);
                        uint(k, clock::TIMESTAMP, realtime);
                    });
                    if first {
                        uint(c, clock::PRIMARY_TRACE_CLOCK, clock::REALTIME);
                    }
                })
            });
        }
        let at = open(p, TRACE_PACKET);
        uint(p, packet::TIMESTAMP, ts);
        uint(p, packet::SEQUENCE_ID, seq.id);
        uint(p, packet::SEQUENCE_FLAGS, flags);
        if flags == packet::INCREMENTAL_STATE_CLEARED {
            message(p, packet::DEFAULTS, |d| {
                uint(d, packet::TIMESTAMP_CLOCK_ID, TRACE_CLOCK);
                message(d, packet::TRACK_EVENT_DEFAULTS, |t| {
                    uint(t, event::TRACK_UUID, seq.track);
                })
            });
        }
        if !new.is_empty() {
            message(p, packet::INTERNED_DATA, |d| {
                for (kind, iid, text) in new {
                    message(d, INTERNED[*kind], |m| {
                        uint(m, 1, *iid);
                        bytes(m, 2, text.as_bytes());
                    });
                }
            });
        }
        at
    }

    /// Writes one track event.
    fn track_event(&mut self, e: TrackEvent<'_>) {
        let seq = self.sequence(e.ctx, e.stamp);
        let mut new = Vec::new();
        let sequence = &mut self.sequences[seq.id as usize - 1];
        let (labels, schemas) = (&self.labels, &self.schemas);
        // The argument names: a tracepoint's (interned with it), or the event's own.
        let mut own = [0u64; 4];
        // The parts' names (interned) and values.
        let mut parted: Vec<(u64, u64)> = Vec::new();
        match e.args {
            Args::Of(event) => {
                let id = event.type_word.tracepoint() as usize;
                Self::point_iids(sequence, id, labels, schemas, &mut new);
            }
            Args::Unpaired(event, _) => {
                let id = event.type_word.tracepoint() as usize;
                Self::point_iids(sequence, id, labels, schemas, &mut new);
                own[0] = Self::iid(sequence, strings::ANNOTATION, "why", &mut new);
            }
            Args::Message(_) => {
                own[0] = Self::iid(sequence, strings::ANNOTATION, "message", &mut new)
            }
            Args::Loss(_) => {
                for (iid, name) in own.iter_mut().zip(LOSS_ARGS) {
                    *iid = Self::iid(sequence, strings::ANNOTATION, name, &mut new);
                }
            }
            Args::Moved => own[0] = Self::iid(sequence, strings::ANNOTATION, MOVED.0, &mut new),
            Args::Parts(event, parts) => {
                let id = event.type_word.tracepoint() as usize;
                Self::point_iids(sequence, id, labels, schemas, &mut new);
                for (p, ns) in parts.iter().filter(|p| p.1 > 0) {
                    let name = PART_ARGS[p as usize];
                    parted.push((Self::iid(sequence, strings::ANNOTATION, name, &mut new), ns));
                }
                own[0] = Self::iid(sequence, strings::ANNOTATION, "dominant", &mut new);
            }
            Args::Nothing => {}
        }
        let (name_iid, category_iid) = match e.name {
            Name::Point(id) => {
                let p = Self::point_iids(sequence, id as usize, labels, schemas, &mut new);
                p.map_or((0, 0), |p| (p.0, p.1))
            }
            Name::Given(n, c) => (
                Self::iid(sequence, strings::NAME, n, &mut new),
                Self::iid(sequence, strings::CATEGORY, c, &mut new),
            ),
        };
        let at = self.packet_header(seq, e.stamp, &new);
        let sequence = &self.sequences[seq.id as usize - 1];
        let (aux, schemas) = (self.aux, &self.schemas);
        message(&mut self.buf, packet::TRACK_EVENT, |t| {
            uint(t, event::TYPE, e.kind);
            if let Some(track) = e.track {
                uint(t, event::TRACK_UUID, track);
            }
            // An end names its own event too (an exit's name is its own tracepoint's):
            // readers of the slice use its begin's, and merge the arguments of both.
            uint(t, event::NAME_IID, name_iid);
            uint(t, event::CATEGORY_IIDS, category_iid);
            for &flow in e.flows {
                fixed64(t, event::FLOW_IDS, flow);
            }
            match e.args {
                Args::Of(ev) | Args::Unpaired(ev, _) | Args::Parts(ev, _) => {
                    let id = ev.type_word.tracepoint() as usize;
                    if let (Some(s), Some(Some(iids))) = (schemas.get(id), sequence.points.get(id))
                    {
                        for ((&w, (_, spec)), &iid) in ev.args().iter().zip(&s.args).zip(&iids.2) {
                            message(t, event::DEBUG_ANNOTATIONS, |a| {
                                uint(a, annotation::NAME_IID, iid);
                                value(a, spec, w, aux);
                            });
                        }
                    }
                    if let Args::Unpaired(_, why) = e.args {
                        message(t, event::DEBUG_ANNOTATIONS, |a| {
                            uint(a, annotation::NAME_IID, own[0]);
                            bytes(a, annotation::STRING, why.name().as_bytes());
                        });
                    }
                    if let Args::Parts(_, parts) = e.args {
                        for &(iid, ns) in &parted {
                            message(t, event::DEBUG_ANNOTATIONS, |a| {
                                uint(a, annotation::NAME_IID, iid);
                                uint(a, annotation::UINT, ns);
                            });
                        }
                        if let Some(d) = parts.dominant() {
                            message(t, event::DEBUG_ANNOTATIONS, |a| {
                                uint(a, annotation::NAME_IID, own[0]);
                                bytes(a, annotation::STRING, d.name().as_bytes());
                            });
                        }
                    }
                }
                Args::Message(text) => message(t, event::DEBUG_ANNOTATIONS, |a| {
                    uint(a, annotation::NAME_IID, own[0]);
                    bytes(a, annotation::STRING, text.as_bytes());
                }),
                Args::Loss(counts) => {
                    for (&iid, count) in own.iter().zip(counts) {
                        message(t, event::DEBUG_ANNOTATIONS, |a| {
                            uint(a, annotation::NAME_IID, iid);
                            uint(a, annotation::UINT, count);
                        });
                    }
                }
                Args::Moved => message(t, event::DEBUG_ANNOTATIONS, |a| {
                    uint(a, annotation::NAME_IID, own[0]);
                    bytes(a, annotation::STRING, MOVED.1.as_bytes());
                }),
                Args::Nothing => {}
            }
        });
        close(&mut self.buf, at);
    }

    /// Writes `event` (tracepoint `id`'s) as a track event of `kind` on `track`.
    fn own(&mut self, event: &Event, track: Option<u64>, kind: u64, flows: &[u64]) {
        let name = Name::Point(event.type_word.tracepoint());
        self.track_event(TrackEvent {
            ctx: event.ctx,
            stamp: event.stamp,
            track,
            kind,
            name,
            args: Args::Of(event),
            flows,
        });
    }

    /// Ends a call's or pair's slice with `end` (on `track`, `None`: its thread's), its
    /// parts (ticks) among its arguments where the trace tells any.
    fn end(&mut self, end: &Event, track: Option<u64>, parts: Option<&Parts>, flows: &[u64]) {
        let Some(parts) = parts.filter(|p| p.known()) else {
            return self.own(end, track, event::SLICE_END, flows);
        };
        let parts = parts.scaled(|t| self.clock.ticks_to_ns(t));
        self.track_event(TrackEvent {
            ctx: end.ctx,
            stamp: end.stamp,
            track,
            kind: event::SLICE_END,
            name: Name::Point(end.type_word.tracepoint()),
            args: Args::Parts(end, parts),
            flows,
        });
    }

    /// A stretch of thread `ctx`'s time on or off its CPU: a slice named by its state
    /// (`on_cpu`, `preempted`, `blocked`), category `sched`, on the thread's state track
    /// (`cpu state`, under the thread's).
    fn stretch(&mut self, ctx: u64, stretch: &Stretch) {
        let seq = self.sequence(ctx, stretch.from);
        let track = match self.states.get(&seq.key) {
            Some(&t) => t,
            None => {
                let t = self.child_track(seq.track, "cpu state");
                self.states.insert(seq.key, t);
                t
            }
        };
        for (stamp, kind) in [
            (stretch.from, event::SLICE_BEGIN),
            (stretch.to, event::SLICE_END),
        ] {
            self.track_event(TrackEvent {
                ctx,
                stamp,
                track: Some(track),
                kind,
                name: Name::Given(stretch.state.name(), "sched"),
                args: Args::Nothing,
                flows: &[],
            });
        }
    }

    /// Writes `event` as an instant on its thread, in the category `unpaired`: the other
    /// half of its pair is not in the trace, or cannot be told (`why`, its argument `why`).
    fn unpaired(&mut self, event: &Event, why: Why) {
        let label = self.labels[event.type_word.tracepoint() as usize].0.clone();
        self.track_event(TrackEvent {
            ctx: event.ctx,
            stamp: event.stamp,
            track: None,
            kind: event::INSTANT,
            name: Name::Given(&label, "unpaired"),
            args: Args::Unpaired(event, why),
            flows: &[],
        });
    }

    /// A ring's losses, shown on the thread of `event`, its first event.
    fn loss(&mut self, counts: [u64; 4], ctx: u64, stamp: u64) {
        self.track_event(TrackEvent {
            ctx,
            stamp,
            track: None,
            kind: event::INSTANT,
            name: Name::Given("lost", "loss"),
            args: Args::Loss(counts),
            flows: &[],
        });
    }

    /// A trace point: what the model says it did (`model.feed`), then the counters it sets.
    /// The counters of `event`'s tracepoint, once the model's steps of it are written.
    fn counted(&mut self, event: &Event) {
        let id = event.type_word.tracepoint();
        if self
            .counters
            .get(id as usize)
            .is_some_and(|c| !c.is_empty())
        {
            let counters = std::mem::take(&mut self.counters[id as usize]);
            self.count(event, &counters);
            self.counters[id as usize] = counters;
        }
    }

    /// Writes a step of the model ([`ttrace_model::model`]); `now` is the event fed (what
    /// closes an instance that ends). Calls and polls are slices on their thread, stem
    /// pairs slices on an async track of the thread's, instances slices on lanes; what is
    /// left unpaired an instant `unpaired`, the drop re-entry instants `drop`; what is open
    /// at the end stays open (`now`: `None`).
    fn step(&mut self, step: Step<&Event>, now: Option<&Event>) {
        match step {
            Step::Instant(e) => self.instant(e),
            Step::CallBegin { event, .. } | Step::PollBegin(event) => {
                self.own(event, None, event::SLICE_BEGIN, &[])
            }
            Step::CallEnd { end, parts, .. } => {
                self.written.pairs += 1;
                self.end(end, None, parts.as_deref(), &[]);
            }
            Step::PollEnd { end, .. } => {
                self.written.pairs += 1;
                self.own(end, None, event::SLICE_END, &[]);
            }
            Step::StemBegin(e) => {
                let track = self.stem_track(e);
                self.own(e, Some(track), event::SLICE_BEGIN, &[]);
            }
            Step::StemEnd { end, parts, .. } => {
                self.written.pairs += 1;
                let track = self.stem_track(end);
                self.end(end, Some(track), parts.as_deref(), &[]);
            }
            Step::Unpaired { event, why } => match why {
                // Written when it began; left open.
                Why::OpenAtEnd | Why::ThreadEnded | Why::AcrossGap | Why::Superseded => {
                    self.written.unpaired += 1
                }
                Why::BeforeHorizon => {
                    self.written.uncertain += 1;
                    self.unpaired(event, why);
                }
                Why::PartnerMissing => {
                    self.written.unpaired += 1;
                    self.unpaired(event, why);
                }
            },
            Step::PollDrop { begin, end } => {
                // Instants on its lane (where the instance is innermost, as at its close),
                // else on the thread.
                let key = span_key(begin);
                let track = self.innermost(key);
                for e in [&begin, &end] {
                    let label = self.labels[e.type_word.tracepoint() as usize].0.clone();
                    self.track_event(TrackEvent {
                        ctx: e.ctx,
                        stamp: e.stamp,
                        track,
                        kind: event::INSTANT,
                        name: Name::Given(&label, "drop"),
                        args: Args::Of(e),
                        flows: &[],
                    });
                }
            }
            Step::SpanNew(e) => {
                let key = span_key(e);
                self.new_instance(e, key);
            }
            Step::SpanEnd(i) => {
                if let Some(now) = now {
                    let parts = i.parts.scaled(|t| self.clock.ticks_to_ns(t));
                    let parts = (i.whole && parts.known()).then_some(parts);
                    self.close(now, (i.pid, i.id), parts);
                }
            }
            // Its slice stays open (a new one took its id, or the trace ends).
            Step::SpanUnended { instance: i, .. } => {
                self.instances.remove(&(i.pid, i.id));
            }
            Step::Cpu { ctx, stretch } => self.stretch(ctx, &stretch),
            Step::SpanFollows(e) => {
                let key = span_key(e);
                let track = self.innermost(key);
                let follows = e.args().get(1).copied().unwrap_or(0);
                self.next_flow += 1;
                let flow = self.next_flow;
                self.flows.entry((key.0, follows)).or_default().push(flow);
                self.own(e, track, event::INSTANT, &[flow]);
            }
            Step::SpanRecord(e) => {
                let key = span_key(e);
                let track = self.innermost(key);
                self.own(e, track, event::INSTANT, &[]);
            }
        }
    }

    /// An instant on `event`'s thread (of the category `unknown` for a tracepoint the
    /// metadata does not know).
    fn instant(&mut self, event: &Event) {
        let id = event.type_word.tracepoint();
        if (id as usize) < self.schemas.len() {
            return self.own(event, None, event::INSTANT, &[]);
        }
        let name = format!("tracepoint#{id}");
        self.track_event(TrackEvent {
            ctx: event.ctx,
            stamp: event.stamp,
            track: None,
            kind: event::INSTANT,
            name: Name::Given(&name, "unknown"),
            args: Args::Of(event),
            flows: &[],
        });
    }

    /// The async track, under its thread's, of the stem of `event` (a start or stop the
    /// model paired).
    fn stem_track(&mut self, event: &Event) -> u64 {
        let stem = self.stems.of[event.type_word.tracepoint() as usize].unwrap_or(0);
        let seq = self.sequence(event.ctx, event.stamp);
        if let Some(&track) = self.starts.get(&(seq.key, stem)) {
            return track;
        }
        let name = self.stems.names[stem].clone();
        let track = self.child_track(seq.track, &name);
        self.starts.insert((seq.key, stem), track);
        track
    }

    /// The close `event` of the instance `key`: its slice ends on its lane (the slices
    /// above it there move to a free lane); an instant if it has no slice.
    fn close(&mut self, event: &Event, key: (u32, u64), parts: Option<Parts>) {
        let flows = self.flows.remove(&key).unwrap_or_default();
        let lane = self
            .instances
            .remove(&key)
            .and_then(|i| Some((i.lane?, i.serial)));
        let Some(((g, l), serial)) = lane else {
            return self.own(event, None, event::INSTANT, &flows);
        };
        let open = &self.groups[g].lanes[l].open;
        let Some(at) = open.iter().rposition(|o| o.serial == serial) else {
            return self.own(event, None, event::INSTANT, &flows);
        };
        if at + 1 < open.len() {
            self.move_above(g, l, at + 1, event);
        }
        let lane = &mut self.groups[g].lanes[l];
        lane.open.truncate(at);
        let track = lane.track;
        if lane.open.is_empty() {
            self.groups[g].free.push(Reverse(l));
        }
        match parts {
            Some(parts) => self.track_event(TrackEvent {
                ctx: event.ctx,
                stamp: event.stamp,
                track: Some(track),
                kind: event::SLICE_END,
                name: Name::Point(event.type_word.tracepoint()),
                args: Args::Parts(event, parts),
                flows: &flows,
            }),
            None => self.own(event, Some(track), event::SLICE_END, &flows),
        }
    }

    /// A new instance: its slice begins on its parent's lane, nested in it, if its parent
    /// is the innermost slice there; else on a free lane of its parent's group (a flow
    /// from it to its parent's close), or of the group of its own name for a root (or an
    /// instance whose parent has no slice).
    fn new_instance(&mut self, event: &Event, key: (u32, u64)) {
        // One with the id of one open: that one's close was lost; its slice stays open.
        self.instances.remove(&key);
        let parent = event.args().get(1).copied().unwrap_or(0);
        let under = match parent {
            0 => None,
            p => self
                .instances
                .get(&(key.0, p))
                .and_then(|i| Some((i.lane?, i.serial))),
        };
        let mut flow = None;
        let (g, l) = match under {
            Some(((g, l), serial))
                if self.groups[g].lanes[l].open.last().map(|o| o.serial) == Some(serial) =>
            {
                (g, l)
            }
            Some(((g, _), _)) => {
                self.next_flow += 1;
                flow = Some(self.next_flow);
                self.flows
                    .entry((key.0, parent))
                    .or_default()
                    .push(self.next_flow);
                (g, self.free_lane(g))
            }
            None => {
                let g = self.group(event);
                (g, self.free_lane(g))
            }
        };
        self.next_serial += 1;
        let serial = self.next_serial;
        let point = event.type_word.tracepoint();
        let lane = &mut self.groups[g].lanes[l];
        lane.open.push(Open { serial, key, point });
        let track = lane.track;
        let instance = Instance {
            serial,
            lane: Some((g, l)),
        };
        self.instances.insert(key, instance);
        let flows: &[u64] = match &flow {
            Some(f) => std::slice::from_ref(f),
            None => &[],
        };
        self.own(event, Some(track), event::SLICE_BEGIN, flows);
    }

    /// The slices open on lane `l` of group `g` from index `from` on (instances under one
    /// that closes now, at `at`, on that lane) end there and go on on a free lane of the
    /// group, each half joined to the other by a flow and marked [`MOVED`].
    fn move_above(&mut self, g: usize, l: usize, from: usize, at: &Event) {
        let chain = self.groups[g].lanes[l].open.split_off(from);
        let to = self.free_lane(g);
        let (old, new) = (
            self.groups[g].lanes[l].track,
            self.groups[g].lanes[to].track,
        );
        let first = self.next_flow + 1;
        self.next_flow += chain.len() as u64;
        for (k, o) in chain.iter().enumerate().rev() {
            self.moved(o, at, old, event::SLICE_END, first + k as u64);
        }
        for (k, o) in chain.iter().enumerate() {
            let flow = first + k as u64;
            self.moved(o, at, new, event::SLICE_BEGIN, flow);
            if let Some(i) = self.instances.get_mut(&o.key) {
                if i.serial == o.serial {
                    i.lane = Some((g, to));
                }
            }
        }
        self.groups[g].lanes[to].open = chain;
    }

    /// A half of the moved slice `o`: its end on `track` or its beginning there, at `at`.
    fn moved(&mut self, o: &Open, at: &Event, track: u64, kind: u64, flow: u64) {
        let (name, category) = self.labels[o.point as usize].clone();
        self.track_event(TrackEvent {
            ctx: at.ctx,
            stamp: at.stamp,
            track: Some(track),
            kind,
            name: Name::Given(&name, &category),
            args: Args::Moved,
            flows: &[flow],
        });
    }

    /// The lane of `key` if its slice is the innermost open there (what an instant of its
    /// own nests in); else its thread's track (`None`).
    fn innermost(&mut self, key: (u32, u64)) -> Option<u64> {
        let i = self.instance(key);
        let (lane, serial) = (i.lane?, i.serial);
        let lane = &self.groups[lane.0].lanes[lane.1];
        (lane.open.last()?.serial == serial).then_some(lane.track)
    }

    /// The open span instance of `key` (made, with no slice, if its new is not in the
    /// trace).
    fn instance(&mut self, key: (u32, u64)) -> &mut Instance {
        if !self.instances.contains_key(&key) {
            self.next_serial += 1;
            let i = Instance {
                serial: self.next_serial,
                lane: None,
            };
            self.instances.insert(key, i);
        }
        self.instances.get_mut(&key).expect("made above")
    }

    /// The group of the root instance whose new is `event`: its process's and its name's.
    fn group(&mut self, event: &Event) -> usize {
        let seq = self.sequence(event.ctx, event.stamp);
        let point = event.type_word.tracepoint() as usize;
        let key = (seq.key.0, self.names[point]);
        if let Some(&g) = self.by_group.get(&key) {
            return g;
        }
        self.groups.push(Group {
            process: seq.process,
            name: self.labels[point].0.clone(),
            lanes: Vec::new(),
            free: BinaryHeap::new(),
        });
        self.by_group.insert(key, self.groups.len() - 1);
        self.groups.len() - 1
    }

    /// The first free lane of group `g` (a new one if none is).
    fn free_lane(&mut self, g: usize) -> usize {
        if let Some(Reverse(l)) = self.groups[g].free.pop() {
            return l;
        }
        let (process, name) = (self.groups[g].process, self.groups[g].name.clone());
        let track = self.child_track(process, &name);
        let lanes = &mut self.groups[g].lanes;
        lanes.push(Lane {
            track,
            open: Vec::new(),
        });
        lanes.len() - 1
    }

    /// The counters of `event`: each argument marked as one sets its track.
    fn count(&mut self, event: &Event, counters: &[Counter]) {
        let seq = self.sequence(event.ctx, event.stamp);
        for c in counters {
            let Some(&w) = event.args().get(c.arg) else {
                continue;
            };
            let key = (seq.key.0, c.point, c.arg);
            let track = match self.counter_tracks.get(&key) {
                Some(&t) => t,
                None => {
                    let uuid = self.uuid();
                    self.descriptor(uuid, Some(seq.process), Some(&c.name), |d| {
                        message(d, track::COUNTER, |_| {})
                    });
                    self.counter_tracks.insert(key, uuid);
                    uuid
                }
            };
            let at = self.packet_header(seq, event.stamp, &Vec::new());
            message(&mut self.buf, packet::TRACK_EVENT, |t| {
                uint(t, event::TYPE, event::COUNTER);
                uint(t, event::TRACK_UUID, track);
                match c.float {
                    true => double(t, event::DOUBLE_COUNTER_VALUE, f64::from_bits(w)),
                    false => uint(t, event::COUNTER_VALUE, w),
                }
            });
            close(&mut self.buf, at);
        }
    }
}

/// The instance a span's step `e` is of: its process and span id (its first argument,
/// which the model's span steps have).
fn span_key(e: &Event) -> (u32, u64) {
    ((e.ctx >> 32) as u32, e.args().first().copied().unwrap_or(0))
}

/// The name and category the events of a tracepoint show: a `tracing` callsite's level, a
/// span step's role, a native point's kind.
fn label(s: &Schema) -> (String, String) {
    let category = match (s.role, s.level) {
        (Role::Point, _) => s.kind.name().to_string(),
        (_, Some(level)) => level.name().to_ascii_lowercase(),
        (role, None) => role.label().unwrap_or("event").to_string(),
    };
    (s.name.clone(), category)
}

/// One argument word as a debug annotation's value.
fn value(out: &mut Vec<u8>, spec: &Spec, w: u64, aux: &AuxSnapshots) {
    match spec {
        Spec::Bool => uint(out, annotation::BOOL, (w != 0) as u64),
        Spec::Unsigned => uint(out, annotation::UINT, w),
        Spec::Signed => uint(out, annotation::INT, w),
        Spec::Hex => uint(out, annotation::POINTER, w),
        Spec::Float => double(out, annotation::DOUBLE, f64::from_bits(w)),
        Spec::Str => {
            let text = match crate::format::string_arg(aux, w) {
                Some(r) if r.truncated => [r.bytes, b"..."].concat(),
                Some(r) => r.bytes.to_vec(),
                None => b"<lost>".to_vec(),
            };
            bytes(
                out,
                annotation::STRING,
                String::from_utf8_lossy(&text).as_bytes(),
            );
        }
        Spec::Char | Spec::Values { .. } => {
            let mut text = Vec::new();
            crate::format::word(&mut text, spec, w, aux);
            bytes(
                out,
                annotation::STRING,
                String::from_utf8_lossy(&text).as_bytes(),
            );
        }
    }
}

/// Writes the items of `ctx` (merged by `items`) to `out` as a Perfetto trace, with the
/// counters `counters` ([`counters`]); `rings` gives the per-ring counts.
pub fn write(
    ctx: Context<'_>,
    rings: &[RingSnapshot<Mark>],
    items: Merge<'_>,
    counters: &[Counter],
    out: &mut impl Write,
    progress: impl FnMut(u64),
) -> std::io::Result<Written> {
    let threads = super::pipeline::threads();
    write_on(ctx, rings, items, counters, out, progress, threads)
}

/// [`write()`], with the merge and the model on a thread of their own for a long trace
/// (`threads`: on more than one core, as [`write()`] does), or all on the calling thread
/// ([`super::pipeline`]): the same output.
pub fn write_on(
    ctx: Context<'_>,
    rings: &[RingSnapshot<Mark>],
    items: Merge<'_>,
    counters: &[Counter],
    out: &mut impl Write,
    mut progress: impl FnMut(u64),
    threads: bool,
) -> std::io::Result<Written> {
    let model = Model::new(ctx.meta, rings);
    let schemas = Schema::all(ctx.meta);
    let mut by_point = vec![Vec::new(); schemas.len()];
    for c in counters {
        by_point[c.point as usize].push(c.clone());
    }
    let losses = rings
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let counts = [i as u64, r.lost, r.dropped, r.damaged];
            let any = r.lost + r.dropped + r.damaged > 0 && items.selects_ring(i);
            any.then_some(counts)
        })
        .collect();
    let labels: Vec<(String, String)> = schemas.iter().map(label).collect();
    let mut numbers: HashMap<&str, usize> = HashMap::default();
    let names = labels
        .iter()
        .map(|(n, _)| {
            let next = numbers.len();
            *numbers.entry(n.as_str()).or_insert(next)
        })
        .collect();
    let mut w = Writer {
        aux: ctx.aux,
        clock: ctx.version.clock,
        labels,
        schemas,
        recent: None,
        identities: Identities::new(ctx.meta),
        sequences: Vec::new(),
        by_thread: HashMap::default(),
        processes: HashMap::default(),
        next_uuid: 0,
        stems: Stems::new(&ctx.meta.tracepoints),
        starts: HashMap::default(),
        states: HashMap::default(),
        instances: HashMap::default(),
        next_serial: 0,
        groups: Vec::new(),
        by_group: HashMap::default(),
        names,
        flows: HashMap::default(),
        next_flow: 0,
        clocked: false,
        counters: by_point,
        counter_tracks: HashMap::default(),
        losses,
        written: Written::default(),
        buf: Vec::with_capacity(1 << 17),
    };
    let mut first = None;
    w.written.losses(rings, &items);
    let strings_lost = super::pipeline::walk(items, model, threads, &mut |walked| {
        match walked {
            Walked::Point { event, cpu } => {
                w.written.walked(false);
                if let Some(counts) = w.losses.get_mut(cpu).and_then(Option::take) {
                    w.loss(counts, event.ctx, event.stamp);
                }
                first.get_or_insert((event.stamp, event.ctx));
            }
            // What is open at the end stays open; the polls the model held are written.
            Walked::Step { step, fed, .. } => w.step(step, fed),
            Walked::Fed(event) => {
                w.counted(event);
                super::spill(&mut w.buf, out, || progress(w.written.events))?;
            }
            Walked::Message(r) => {
                w.written.walked(true);
                first.get_or_insert((r.timestamp, r.ctx));
                let text = String::from_utf8_lossy(r.text_or_lost()).into_owned();
                w.track_event(TrackEvent {
                    ctx: r.ctx,
                    stamp: r.timestamp,
                    track: None,
                    kind: event::INSTANT,
                    name: Name::Given("info", "message"),
                    args: Args::Message(&text),
                    flows: &[],
                });
                super::spill(&mut w.buf, out, || progress(w.written.events))?;
            }
        }
        Ok::<(), std::io::Error>(())
    })?;
    w.written.strings_lost = strings_lost;
    // Rings whose every entry was lost: their losses at the trace's first event.
    let rest: Vec<[u64; 4]> = w.losses.iter_mut().filter_map(Option::take).collect();
    if let Some((stamp, ctx)) = first {
        for counts in rest {
            w.loss(counts, ctx, stamp);
        }
    }
    out.write_all(&w.buf)?;
    progress(w.written.events);
    Ok(w.written)
}
