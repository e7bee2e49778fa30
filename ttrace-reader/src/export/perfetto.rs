//! Perfetto's native format: a `Trace` of `TracePacket`s carrying `TrackEvent`s
//! (`perfetto/protos/perfetto/trace/track_event/`), for ui.perfetto.dev and
//! trace_processor, written with the hand encoder of [`super::proto`].
//!
//! - **Tracks.** A process track per process and a thread track per thread (its pid and
//!   tid, as reused ids show in every export: [`Identities`]), named as the writer was at
//!   the event's time; a span instance of `tracing` has an async track of its own under its
//!   process's.
//! - **Sequences.** Each writer thread's events form one packet sequence: its first packet
//!   clears the incremental state, the others need it. Event names, categories and argument
//!   names are interned per sequence, defined in the packet that first uses them.
//! - **Events.** An entry and the exit that closes it ([`Pairing`]) are a slice on the
//!   thread track (a `SLICE_BEGIN` at the entry, a `SLICE_END` at the exit); a span
//!   instance is a slice on its async track from its new to its close, its fields as
//!   arguments, and each poll a slice on the thread that polled it (the drop re-entry
//!   left out); everything else, and an entry or exit that cannot be paired, is an instant
//!   on the thread track, with its arguments as debug annotations (their types kept,
//!   value tables' names as strings).
//! - **Time** is nanoseconds since the device was created (small numbers, short varints),
//!   on the trace's default clock (no clock snapshots); the thread track of each sequence is
//!   its default track (`TrackEventDefaults`), so thread events name no track.
//!
//! Memory holds the tracks and interned strings seen and the entries and instances open.

use super::proto::{bytes, double, message, uint};
use super::{Closes, Identities, Pairing, Schema, Written};
use crate::decode::Context;
use crate::format::Spec;
use crate::merge::{Item, Merge};
use devttrace::spans::{Added, Instance, Spans};
use devttrace::{AuxSnapshots, Clock, Event, RingIndex};
use std::collections::HashMap;
use std::io::Write;
use ttrace_layouts::entry::Kind;

/// `TracePacket` fields.
mod packet {
    pub const TIMESTAMP: u32 = 8;
    pub const SEQUENCE_ID: u32 = 10;
    pub const TRACK_EVENT: u32 = 11;
    pub const INTERNED_DATA: u32 = 12;
    pub const SEQUENCE_FLAGS: u32 = 13;
    pub const TRACK_DESCRIPTOR: u32 = 60;
    /// `trace_packet_defaults`, and its `TracePacketDefaults.track_event_defaults`.
    pub const DEFAULTS: u32 = 59;
    pub const TRACK_EVENT_DEFAULTS: u32 = 11;
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
    pub const SLICE_BEGIN: u64 = 1;
    pub const SLICE_END: u64 = 2;
    pub const INSTANT: u64 = 3;
}

/// `TrackDescriptor`, `ProcessDescriptor` and `ThreadDescriptor` fields.
mod track {
    pub const UUID: u32 = 1;
    pub const NAME: u32 = 2;
    pub const PROCESS: u32 = 3;
    pub const THREAD: u32 = 4;
    pub const PARENT_UUID: u32 = 5;
    pub const PID: u32 = 1;
    pub const TID: u32 = 2;
    pub const PROCESS_NAME: u32 = 6;
    pub const THREAD_NAME: u32 = 5;
}

/// `InternedData` fields (each entry: `iid = 1`, `name = 2`).
mod interned {
    pub const CATEGORIES: u32 = 1;
    pub const NAMES: u32 = 2;
    pub const ANNOTATION_NAMES: u32 = 3;
}

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

/// One thread's packet sequence.
struct Sequence {
    id: u64,
    /// Its thread track.
    track: u64,
    /// The name the track has (`None`: not described yet).
    named: Option<Option<String>>,
    /// Interned strings: per kind (category, name, annotation name), string -> iid.
    interned: [HashMap<String, u64>; 3],
    /// Whether a packet was written on it.
    started: bool,
    /// Per tracepoint id, its iids here once interned.
    points: Vec<Option<PointIids>>,
}

/// Strings a packet's event needs interned: (kind, iid, text), defined in that packet.
type NewStrings = Vec<(usize, u64, String)>;

/// The name and category of a track event.
#[derive(Clone, Copy)]
enum Name<'a> {
    /// Tracepoint `id`'s own (interned once per sequence, with its arguments' names).
    Point(u16),
    /// These.
    Given(&'a str, &'a str),
}

/// The last writer seen: its `ctx`, the times its identity holds for, its sequence's key,
/// id and thread track.
type Recent = (u64, core::ops::Range<u64>, (u64, u64), u64, u64);

/// A tracepoint's iids on one sequence: its name, its category, its arguments' names.
type PointIids = (u64, u64, Vec<u64>);

/// The arguments of a track event.
#[derive(Clone, Copy)]
enum Args<'e> {
    None,
    /// An event's, named by its tracepoint.
    Of(&'e Event),
    /// A message's text, the argument `message`.
    Message(&'e str),
}

/// Writes a view's items as a Perfetto trace.
struct Writer<'s> {
    aux: &'s AuxSnapshots,
    clock: Clock,
    schemas: Vec<Schema>,
    identities: Identities<'s>,
    sequences: HashMap<(u64, u64), Sequence>,
    /// Process tracks: pid -> its uuid and the name given.
    processes: HashMap<u64, (u64, Option<String>)>,
    /// Per tracepoint id, the name and category its events show.
    labels: Vec<(String, String)>,
    /// The last writer seen (events come in runs of one thread): its `ctx`, the times its
    /// identity holds for, its sequence's key, id and thread track.
    recent: Option<Recent>,
    next_uuid: u64,
    pairing: Pairing,
    written: Written,
    buf: Vec<u8>,
    /// One packet, built before it is framed into `buf`.
    packet: Vec<u8>,
}

impl<'s> Writer<'s> {
    /// The sequence of the writer `ctx` at `stamp`, its tracks described first if new (or
    /// renamed).
    fn sequence(&mut self, ctx: u64, stamp: u64) -> ((u64, u64), u64, u64) {
        if let Some((c, during, key, seq, track)) = &self.recent {
            if *c == ctx && during.contains(&stamp) {
                return (*key, *seq, *track);
            }
        }
        let id = self.identities.of(ctx, stamp);
        let next = self.sequences.len() as u64 + 1;
        let key = (id.pid, id.tid);
        let uuids = &mut self.next_uuid;
        let seq = self.sequences.entry(key).or_insert_with(|| Sequence {
            id: next,
            track: {
                *uuids += 1;
                *uuids
            },
            named: None,
            interned: Default::default(),
            started: false,
            points: Vec::new(),
        });
        let (seq_id, track) = (seq.id, seq.track);
        let thread_name = id.thread.map(str::to_string);
        let process_name = id.process.map(str::to_string);
        let process = match self.processes.get(&id.pid) {
            Some((uuid, name)) if *name == process_name => *uuid,
            known => {
                let uuid = known.map_or_else(
                    || {
                        self.next_uuid += 1;
                        self.next_uuid
                    },
                    |p| p.0,
                );
                self.processes.insert(id.pid, (uuid, process_name.clone()));
                self.packet.clear();
                message(&mut self.packet, packet::TRACK_DESCRIPTOR, |d| {
                    uint(d, track::UUID, uuid);
                    message(d, track::PROCESS, |p| {
                        uint(p, track::PID, id.pid);
                        if let Some(n) = &process_name {
                            bytes(p, track::PROCESS_NAME, n.as_bytes());
                        }
                    });
                });
                self.frame();
                uuid
            }
        };
        let seq = self.sequences.get_mut(&key).expect("made above");
        if seq.named.as_ref() != Some(&thread_name) {
            seq.named = Some(thread_name.clone());
            self.packet.clear();
            message(&mut self.packet, packet::TRACK_DESCRIPTOR, |d| {
                uint(d, track::UUID, track);
                uint(d, track::PARENT_UUID, process);
                message(d, track::THREAD, |t| {
                    uint(t, track::PID, id.pid);
                    uint(t, track::TID, id.tid);
                    if let Some(n) = &thread_name {
                        bytes(t, track::THREAD_NAME, n.as_bytes());
                    }
                });
            });
            self.frame();
        }
        self.recent = Some((ctx, id.during.clone(), key, seq_id, track));
        (key, seq_id, track)
    }

    /// The uuid of the track of the process of writer `ctx` at `stamp` (described).
    fn process_track(&mut self, ctx: u64, stamp: u64) -> u64 {
        let ((pid, _), _, _) = self.sequence(ctx, stamp);
        self.processes[&pid].0
    }

    /// Frames the packet built into the output.
    fn frame(&mut self) {
        bytes(&mut self.buf, TRACE_PACKET, &self.packet);
    }

    /// Nanoseconds of `ticks` since the device's anchor (its creation).
    fn ns(&self, ticks: u64) -> u64 {
        self.clock.since_anchor_ns(ticks).max(0) as u64
    }

    /// The iid of `text` of kind `kind` on sequence `key`, added to `new` if it is new there.
    fn iid(seq: &mut Sequence, kind: usize, text: &str, new: &mut NewStrings) -> u64 {
        if let Some(&iid) = seq.interned[kind].get(text) {
            return iid;
        }
        let iid = seq.interned[kind].len() as u64 + 1;
        seq.interned[kind].insert(text.to_string(), iid);
        new.push((kind, iid, text.to_string()));
        iid
    }

    /// Writes one track event of `kind` on track `track` (`None`: its writer's thread) of
    /// the writer `ctx` at `stamp`, named `name`, with the arguments `args`.
    fn track_event(
        &mut self,
        ctx: u64,
        stamp: u64,
        track: Option<u64>,
        kind: u64,
        name: Name<'_>,
        args: Args<'_>,
    ) {
        let (key, seq_id, thread_track) = self.sequence(ctx, stamp);
        let ts = self.ns(stamp);
        let mut new = Vec::new();
        let seq = self.sequences.get_mut(&key).expect("made by sequence()");
        let (name_iid, category_iid) = match name {
            Name::Point(id) => {
                let id = id as usize;
                if seq.points.len() <= id {
                    seq.points.resize(id + 1, None);
                }
                if seq.points[id].is_none() {
                    let (n, c) = &self.labels[id];
                    let iids = (
                        Self::iid(seq, 1, n, &mut new),
                        Self::iid(seq, 0, c, &mut new),
                        self.schemas[id]
                            .args
                            .iter()
                            .map(|(a, _)| Self::iid(seq, 2, a, &mut new))
                            .collect(),
                    );
                    seq.points[id] = Some(iids);
                }
                let p = seq.points[id].as_ref().expect("set above");
                (p.0, p.1)
            }
            Name::Given(n, c) => (
                Self::iid(seq, 1, n, &mut new),
                Self::iid(seq, 0, c, &mut new),
            ),
        };
        let message_iid = match args {
            Args::Message(_) => Self::iid(seq, 2, "message", &mut new),
            _ => 0,
        };
        // The arguments' names of an event's tracepoint, interned with it.
        if let (Args::Of(e), Name::Given(..)) = (args, name) {
            let id = e.type_word.tracepoint() as usize;
            if seq.points.len() <= id {
                seq.points.resize(id + 1, None);
            }
            if seq.points[id].is_none() && id < self.labels.len() {
                let (n, c) = &self.labels[id];
                let iids = (
                    Self::iid(seq, 1, n, &mut new),
                    Self::iid(seq, 0, c, &mut new),
                    self.schemas[id]
                        .args
                        .iter()
                        .map(|(a, _)| Self::iid(seq, 2, a, &mut new))
                        .collect(),
                );
                seq.points[id] = Some(iids);
            }
        }
        let flags = match std::mem::replace(&mut seq.started, true) {
            false => packet::INCREMENTAL_STATE_CLEARED,
            true => packet::NEEDS_INCREMENTAL_STATE,
        };
        let seq = &self.sequences[&key];
        let p = &mut self.packet;
        p.clear();
        uint(p, packet::TIMESTAMP, ts);
        uint(p, packet::SEQUENCE_ID, seq_id);
        uint(p, packet::SEQUENCE_FLAGS, flags);
        if flags == packet::INCREMENTAL_STATE_CLEARED {
            message(p, packet::DEFAULTS, |d| {
                message(d, packet::TRACK_EVENT_DEFAULTS, |t| {
                    uint(t, event::TRACK_UUID, thread_track);
                })
            });
        }
        if !new.is_empty() {
            message(p, packet::INTERNED_DATA, |d| {
                for (kind, iid, text) in &new {
                    let field = [
                        interned::CATEGORIES,
                        interned::NAMES,
                        interned::ANNOTATION_NAMES,
                    ][*kind];
                    message(d, field, |m| {
                        uint(m, 1, *iid);
                        bytes(m, 2, text.as_bytes());
                    });
                }
            });
        }
        let (aux, schemas) = (self.aux, &self.schemas);
        message(p, packet::TRACK_EVENT, |t| {
            uint(t, event::TYPE, kind);
            if let Some(track) = track {
                uint(t, event::TRACK_UUID, track);
            }
            // An end names its own event too (an exit's name is its own tracepoint's):
            // readers of the slice use its begin's, and merge the arguments of both.
            uint(t, event::NAME_IID, name_iid);
            uint(t, event::CATEGORY_IIDS, category_iid);
            match args {
                Args::Of(e) => {
                    let id = e.type_word.tracepoint() as usize;
                    let (Some(s), Some(Some(iids))) = (schemas.get(id), seq.points.get(id)) else {
                        return;
                    };
                    for ((&w, (_, spec)), &iid) in e.args().iter().zip(&s.args).zip(&iids.2) {
                        message(t, event::DEBUG_ANNOTATIONS, |a| {
                            uint(a, annotation::NAME_IID, iid);
                            value(a, spec, w, aux);
                        });
                    }
                }
                Args::Message(text) => message(t, event::DEBUG_ANNOTATIONS, |a| {
                    uint(a, annotation::NAME_IID, message_iid);
                    bytes(a, annotation::STRING, text.as_bytes());
                }),
                Args::None => {}
            }
        });
        self.frame();
    }

    /// A trace point that is no span's step.
    fn point(&mut self, event: &Event) {
        let id = event.type_word.tracepoint();
        let (ctx, stamp) = (event.ctx, event.stamp);
        let Some(kind) = self.schemas.get(id as usize).map(|s| s.kind) else {
            let name = format!("tracepoint#{id}");
            let unknown = Name::Given(&name, "unknown");
            return self.track_event(ctx, stamp, None, event::INSTANT, unknown, Args::Of(event));
        };
        let (kind, paired) = match kind {
            Kind::Entry if self.pairing.enter(event).is_some() => (event::SLICE_BEGIN, true),
            Kind::Exit => match self.pairing.exit(event) {
                Closes::Entry(..) => {
                    self.written.pairs += 1;
                    (event::SLICE_END, true)
                }
                Closes::Nothing => {
                    self.written.unpaired += 1;
                    (event::INSTANT, false)
                }
                Closes::Uncertain => {
                    self.written.uncertain += 1;
                    (event::INSTANT, false)
                }
            },
            Kind::Entry => {
                self.written.uncertain += 1;
                (event::INSTANT, false)
            }
            _ => (event::INSTANT, true),
        };
        if paired {
            return self.track_event(ctx, stamp, None, kind, Name::Point(id), Args::Of(event));
        }
        // An unpaired half keeps its own name, in the category `unpaired`.
        let label = self.labels[id as usize].0.clone();
        let name = Name::Given(&label, "unpaired");
        self.track_event(ctx, stamp, None, kind, name, Args::Of(event));
    }

    /// A span instance: a slice on an async track of its own, its polls on their threads.
    fn instance(&mut self, i: &Instance, end: u64) {
        let Some(name) = self.labels.get(i.tracepoint as usize).map(|l| l.0.clone()) else {
            return;
        };
        let ctx = i
            .new
            .as_ref()
            .map(|e| e.ctx)
            .or(i.polls.first().map(|p| p.ctx))
            .unwrap_or(u64::from(i.pid) << 32);
        let begin = i.begin();
        let process = self.process_track(ctx, begin);
        self.next_uuid += 1;
        let uuid = self.next_uuid;
        self.packet.clear();
        message(&mut self.packet, packet::TRACK_DESCRIPTOR, |d| {
            uint(d, track::UUID, uuid);
            uint(d, track::PARENT_UUID, process);
            bytes(d, track::NAME, name.as_bytes());
        });
        self.frame();
        self.track_event(
            ctx,
            begin,
            Some(uuid),
            event::SLICE_BEGIN,
            Name::Given(&name, "span"),
            i.new.as_ref().map_or(Args::None, Args::Of),
        );
        for p in &i.polls {
            self.track_event(
                p.ctx,
                p.enter,
                None,
                event::SLICE_BEGIN,
                Name::Given(&name, "poll"),
                Args::None,
            );
            self.track_event(
                p.ctx,
                p.exit,
                None,
                event::SLICE_END,
                Name::Given(&name, "poll"),
                Args::None,
            );
            self.written.pairs += 1;
        }
        let close = i.close.unwrap_or(end);
        self.track_event(
            ctx,
            close,
            Some(uuid),
            event::SLICE_END,
            Name::Given(&name, "span"),
            Args::None,
        );
    }
}

/// The name and category the events of a tracepoint show: a `tracing` callsite's level, a
/// span step's role, a native point's kind.
fn label(s: &Schema) -> (String, String) {
    let category = match (s.role, s.level) {
        (devttrace::Role::Point, _) => s.kind.name().to_string(),
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
                &String::from_utf8_lossy(&text).into_owned().into_bytes(),
            );
        }
        Spec::Char | Spec::Values { .. } => {
            let mut text = Vec::new();
            crate::format::word(&mut text, spec, w, aux);
            bytes(
                out,
                annotation::STRING,
                &String::from_utf8_lossy(&text).into_owned().into_bytes(),
            );
        }
    }
}

/// Writes the items of `ctx` (merged by `items`) to `out` as a Perfetto trace; `rings` gives
/// the per-ring counts.
pub fn write(
    ctx: Context<'_>,
    rings: &[RingIndex],
    mut items: Merge<'_>,
    out: &mut impl Write,
    mut progress: impl FnMut(u64),
) -> std::io::Result<Written> {
    let pairing = Pairing::new(rings, ctx.meta);
    let horizon = pairing.horizon();
    let mut w = Writer {
        aux: ctx.aux,
        clock: ctx.version.clock,
        labels: Schema::all(ctx.meta).iter().map(label).collect(),
        recent: None,
        schemas: Schema::all(ctx.meta),
        identities: Identities::new(ctx.meta),
        sequences: HashMap::new(),
        processes: HashMap::new(),
        next_uuid: 0,
        pairing,
        written: Written::default(),
        buf: Vec::with_capacity(1 << 17),
        packet: Vec::with_capacity(512),
    };
    let mut spans = Spans::new(ctx.meta, horizon);
    let mut last = 0;
    w.written.losses(rings, &items);
    items.try_for_each_ref(|item| {
        last = last.max(item.timestamp());
        w.written.item(item);
        match item {
            Item::Point { event, .. } => match spans.add(event) {
                Added::NotAStep => w.point(event),
                Added::Step => {}
                Added::Ended(i) => w.instance(&i, last),
            },
            Item::Message(r) => {
                let text = String::from_utf8_lossy(r.text_or_lost()).into_owned();
                let message = Args::Message(&text);
                w.track_event(
                    r.ctx,
                    r.timestamp,
                    None,
                    event::INSTANT,
                    Name::Given("info", "message"),
                    message,
                );
            }
        }
        if w.buf.len() >= 1 << 16 {
            out.write_all(&w.buf)?;
            w.buf.clear();
            progress(w.written.events);
        }
        Ok::<(), std::io::Error>(())
    })?;
    w.written.strings_lost = items.strings_lost();
    for i in spans.into_open() {
        w.instance(&i, last);
    }
    out.write_all(&w.buf)?;
    progress(w.written.events);
    Ok(w.written)
}
