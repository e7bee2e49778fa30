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
}

/// Strings a packet's event needs interned: (kind, iid, text), defined in that packet.
type NewStrings = Vec<(usize, u64, String)>;

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
    fn sequence(&mut self, ctx: u64, stamp: u64) -> (u64, u64) {
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
        (seq_id, track)
    }

    /// The uuid of the track of the process of writer `ctx` at `stamp` (described).
    fn process_track(&mut self, ctx: u64, stamp: u64) -> u64 {
        self.sequence(ctx, stamp);
        let pid = self.identities.of(ctx, stamp).pid;
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

    /// Writes one track event of `kind` on track `track` of the writer `ctx` at `stamp`,
    /// named `name`, in category `category`, with the arguments of `args` if given.
    #[allow(clippy::too_many_arguments)]
    fn track_event(
        &mut self,
        ctx: u64,
        stamp: u64,
        track: Option<u64>,
        kind: u64,
        name: &str,
        category: &str,
        args: Args<'_>,
    ) {
        let (seq_id, thread_track) = self.sequence(ctx, stamp);
        let key = {
            let id = self.identities.of(ctx, stamp);
            (id.pid, id.tid)
        };
        let ts = self.ns(stamp);
        let mut new = Vec::new();
        let seq = self.sequences.get_mut(&key).expect("made by sequence()");
        let name_iid = Self::iid(seq, 1, name, &mut new);
        let category_iid = Self::iid(seq, 0, category, &mut new);
        let schema = match args {
            Args::Of(e) => self.schemas.get(e.type_word.tracepoint() as usize),
            _ => None,
        };
        let mut arg_iids = Vec::new();
        if let Some(s) = schema {
            for (n, _) in &s.args {
                arg_iids.push(Self::iid(seq, 2, n, &mut new));
            }
        }
        if let Args::Message(_) = args {
            arg_iids.push(Self::iid(seq, 2, "message", &mut new));
        }
        let flags = match std::mem::replace(&mut seq.started, true) {
            false => packet::INCREMENTAL_STATE_CLEARED,
            true => packet::NEEDS_INCREMENTAL_STATE,
        };
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
        let aux = self.aux;
        message(p, packet::TRACK_EVENT, |t| {
            uint(t, event::TYPE, kind);
            if let Some(track) = track {
                uint(t, event::TRACK_UUID, track);
            }
            // An end names its own event too (an exit's name is its own tracepoint's):
            // readers of the slice use its begin's, and merge the arguments of both.
            uint(t, event::NAME_IID, name_iid);
            uint(t, event::CATEGORY_IIDS, category_iid);
            match (args, schema) {
                (Args::Of(e), Some(s)) => {
                    for ((&w, (_, spec)), &iid) in e.args().iter().zip(&s.args).zip(&arg_iids) {
                        message(t, event::DEBUG_ANNOTATIONS, |a| {
                            uint(a, annotation::NAME_IID, iid);
                            value(a, spec, w, aux);
                        });
                    }
                }
                (Args::Message(text), _) => message(t, event::DEBUG_ANNOTATIONS, |a| {
                    uint(a, annotation::NAME_IID, arg_iids[0]);
                    bytes(a, annotation::STRING, text.as_bytes());
                }),
                _ => {}
            }
        });
        self.frame();
    }

    /// The name and category of `event`'s tracepoint.
    fn names(&self, event: &Event) -> (String, String) {
        match self.schemas.get(event.type_word.tracepoint() as usize) {
            Some(s) => {
                let category = match (s.role, s.level) {
                    (devttrace::Role::Point, _) => s.kind.name().to_string(),
                    (_, Some(level)) => level.name().to_ascii_lowercase(),
                    (role, None) => role.label().unwrap_or("event").to_string(),
                };
                (s.name.clone(), category)
            }
            None => (
                format!("tracepoint#{}", event.type_word.tracepoint()),
                "unknown".into(),
            ),
        }
    }

    /// A trace point that is no span's step.
    fn point(&mut self, event: &Event) {
        let (name, category) = self.names(event);
        let kind = self
            .schemas
            .get(event.type_word.tracepoint() as usize)
            .map(|s| s.kind);
        let (ctx, stamp) = (event.ctx, event.stamp);
        match kind {
            Some(Kind::Entry) if self.pairing.enter(event).is_some() => {
                self.track_event(
                    ctx,
                    stamp,
                    None,
                    event::SLICE_BEGIN,
                    &name,
                    &category,
                    Args::Of(event),
                );
            }
            Some(Kind::Exit) => match self.pairing.exit(event) {
                Closes::Entry(..) => {
                    self.written.pairs += 1;
                    self.track_event(
                        ctx,
                        stamp,
                        None,
                        event::SLICE_END,
                        &name,
                        &category,
                        Args::Of(event),
                    );
                }
                Closes::Nothing => {
                    self.written.unpaired += 1;
                    self.track_event(
                        ctx,
                        stamp,
                        None,
                        event::INSTANT,
                        &name,
                        "unpaired",
                        Args::Of(event),
                    );
                }
                Closes::Uncertain => {
                    self.written.uncertain += 1;
                    self.track_event(
                        ctx,
                        stamp,
                        None,
                        event::INSTANT,
                        &name,
                        "unpaired",
                        Args::Of(event),
                    );
                }
            },
            Some(Kind::Entry) => {
                self.written.uncertain += 1;
                self.track_event(
                    ctx,
                    stamp,
                    None,
                    event::INSTANT,
                    &name,
                    "unpaired",
                    Args::Of(event),
                );
            }
            _ => self.track_event(
                ctx,
                stamp,
                None,
                event::INSTANT,
                &name,
                &category,
                Args::Of(event),
            ),
        }
    }

    /// A span instance: a slice on an async track of its own, its polls on their threads.
    fn instance(&mut self, i: &Instance, end: u64) {
        let tp = i.tracepoint as usize;
        let Some(name) = self.schemas.get(tp).map(|s| s.name.clone()) else {
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
            &name,
            "span",
            i.new.as_ref().map_or(Args::None, Args::Of),
        );
        for p in &i.polls {
            self.track_event(
                p.ctx,
                p.enter,
                None,
                event::SLICE_BEGIN,
                &name,
                "poll",
                Args::None,
            );
            self.track_event(
                p.ctx,
                p.exit,
                None,
                event::SLICE_END,
                &name,
                "poll",
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
            &name,
            "span",
            Args::None,
        );
    }
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
                    "info",
                    "message",
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
