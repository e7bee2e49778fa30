//! OpenTelemetry's trace format (OTLP `TracesData`, `opentelemetry/proto/trace/v1`), for a
//! fleet's tracing backend behind an OpenTelemetry collector: as JSON lines (what the
//! collector's file exporter writes and its `otlpjsonfile` receiver reads: one `TracesData`
//! a line) or as protobuf (one `TracesData`, which is also the body of an OTLP/HTTP
//! `ExportTraceServiceRequest`), written with the hand encoder of [`super::proto`].
//!
//! What the events mean is the model's ([`ttrace_model::model`]): this writer renders its
//! steps.
//!
//! - **Spans.** An entry and the exit that closes it, a start and the stop of
//!   its name stem on one thread, and a `tracing` span instance (its new to its close) are
//!   each one span, named by its tracepoint, from its first half to its second; the
//!   arguments of both halves (and a span's fields recorded later) are its attributes. Its
//!   parent: a `tracing` span's own parent; an entry's, the entry or poll open on its thread
//!   when it began (the drop re-entry is no poll). A root begins a trace of its own; a
//!   child is in its parent's.
//!   `follows_from` is a link.
//! - **Where the time went.** A span whose anatomy the trace tells
//!   ([`ttrace_model::anatomy`]) has the attributes `ttrace.<part>_ns` (`on_cpu`,
//!   `preempted`, `blocked`, `scheduled`, `idle`, `unknown`: those not zero, adding up to
//!   its length) and `ttrace.dominant`, the largest part's name.
//! - **Span events.** An event of a thread (a `tracing` event, a trace point that is no
//!   pair's half, a message) inside an entry or a poll of that thread is an event of that
//!   span (at most [`MAX_EVENTS`] a span; the rest counted as dropped). Events inside no
//!   span are not sent: OTLP traces have no place for them.
//! - **Resource.** Each process: `service.name` (its name), `process.pid`, `host.name` (of
//!   the machine that reads), `ttrace.device` (the device or snapshot read).
//! - **Ids.** Trace and span ids are made from the device's creation time and a counter:
//!   the same export of the same trace gives the same ids.
//!
//! Spans are sent as they end (a span still open at the end of the trace ends there, with
//! the attribute `ttrace.open`; an instance begun before every ring is complete has
//! `ttrace.whole` false), in batches of at most [`BATCH`] spans: memory holds what is
//! open, not the trace.

use super::pipeline::Walked;
use super::proto::{bytes, fixed64, message, uint};
use super::{Identities, Schema, Written};
use crate::decode::Context;
use crate::format::Spec;
use crate::merge::Merge;
use devttrace::{AuxSnapshots, Clock, Event, Mark, RingSnapshot, Role};
use foldhash::HashMap;
use ttrace_layouts::entry::Kind;
use ttrace_model::anatomy::Parts;
use ttrace_model::model::{Model, Step, Why};

/// Spans a batch holds at most: a JSON line, a protobuf `ResourceSpans` group, a request.
pub const BATCH: usize = 512;

/// Events a span keeps at most.
pub const MAX_EVENTS: usize = 128;

/// How the spans are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// JSON lines: a `TracesData` a line (OTLP's JSON mapping: ids in hex, 64-bit integers
    /// as strings).
    Json,
    /// Protobuf: each batch a `TracesData` (their concatenation is one).
    Proto,
}

/// An attribute's value.
#[derive(Clone, Debug, PartialEq)]
enum Value {
    Str(String),
    Int(i64),
    Double(f64),
    Bool(bool),
}

/// A span event.
struct SpanEvent {
    ns: u64,
    name: String,
    attrs: Vec<(String, Value)>,
}

/// A span being built.
struct Span {
    pid: u64,
    trace: u128,
    id: u64,
    parent: u64,
    name: String,
    start: u64,
    end: u64,
    attrs: Vec<(String, Value)>,
    events: Vec<SpanEvent>,
    dropped_events: u32,
    links: Vec<(u128, u64)>,
}

/// A process's resource: its pid and its name.
type Process = (u64, Option<String>);

/// Builds spans from a view's items and hands them on in batches.
struct Writer<'s, 'o> {
    aux: &'s AuxSnapshots,
    clock: Clock,
    schemas: Vec<Schema>,
    identities: Identities<'s>,
    /// Spans open (a slab: freed slots reused).
    open: Vec<Option<Span>>,
    free: Vec<usize>,
    /// Per thread: its entries and polls open, innermost last (slab slots; whether an
    /// entry).
    scopes: HashMap<(u64, u64), Vec<(usize, bool)>>,
    /// The starts open, by stamp, writer, slot and tracepoint: their spans.
    starts: HashMap<(u64, u64, u32, u16), usize>,
    /// `tracing` span instances open, by process and span id.
    instances: HashMap<(u64, u64), usize>,
    /// Spans ended, waiting for their batch; per process, its resource.
    done: Vec<Span>,
    processes: HashMap<u64, Option<String>>,
    host: String,
    device: String,
    /// Seeds the ids; counts the ids given.
    seed: u64,
    next_id: u64,
    encoding: Encoding,
    out: &'o mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    written: Written,
}

/// SplitMix64's finalizer: a well-mixed id of a counter.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Writer<'_, '_> {
    fn ns(&self, ticks: u64) -> u64 {
        self.clock.realtime_ns(ticks)
    }

    /// A new nonzero id.
    fn id(&mut self) -> u64 {
        self.next_id += 1;
        mix(self.seed.wrapping_add(self.next_id)).max(1)
    }

    /// The thread (pid, tid) of writer `ctx` at `stamp`, its process's name noted.
    fn thread(&mut self, ctx: u64, stamp: u64) -> (u64, u64) {
        let id = self.identities.of(ctx, stamp);
        // Noted once, and again only when the process is named otherwise.
        match self.processes.get(&id.pid) {
            Some(name) if id.process.is_none() || name.as_deref() == id.process => {}
            _ => {
                self.processes
                    .insert(id.pid, id.process.map(str::to_string));
            }
        }
        (id.pid, id.tid)
    }

    /// The arguments of `e` as attributes.
    fn attrs(&self, e: &Event) -> Vec<(String, Value)> {
        self.args(e, false)
    }

    /// The fields of a `tracing` span step `e` that hold a value: an empty field's string
    /// word is 0 (`dump` shows it as `<lost>`), and is left out.
    fn fields(&self, e: &Event) -> Vec<(String, Value)> {
        self.args(e, true)
    }

    /// The arguments of `e`, without the empty strings if `set_only`.
    fn args(&self, e: &Event, set_only: bool) -> Vec<(String, Value)> {
        let Some(s) = self.schemas.get(e.type_word.tracepoint() as usize) else {
            return Vec::new();
        };
        e.args()
            .iter()
            .zip(&s.args)
            .filter(|(&w, (_, spec))| !(set_only && w == 0 && *spec == Spec::Str))
            .map(|(&w, (name, spec))| (name.clone(), value(spec, w, self.aux)))
            .collect()
    }

    fn name(&self, e: &Event) -> String {
        let id = e.type_word.tracepoint();
        self.schemas
            .get(id as usize)
            .map_or_else(|| format!("tracepoint#{id}"), |s| s.name.clone())
    }

    /// Opens a span begun by `e` under `parent` (a slab slot, or a known span: trace, id).
    fn begin(&mut self, e: &Event, parent: Option<(u128, u64)>) -> usize {
        let (pid, _) = self.thread(e.ctx, e.stamp);
        let (trace, parent) = match parent {
            Some(p) => p,
            None => {
                let (a, b) = (self.id(), self.id());
                ((u128::from(a) << 64) | u128::from(b), 0)
            }
        };
        let span = Span {
            pid,
            trace,
            id: self.id(),
            parent,
            name: self.name(e),
            start: self.ns(e.stamp),
            end: 0,
            attrs: self.attrs(e),
            events: Vec::new(),
            dropped_events: 0,
            links: Vec::new(),
        };
        match self.free.pop() {
            Some(slot) => {
                self.open[slot] = Some(span);
                slot
            }
            None => {
                self.open.push(Some(span));
                self.open.len() - 1
            }
        }
    }

    /// The trace and id of the span in `slot`.
    fn ids(&self, slot: usize) -> Option<(u128, u64)> {
        self.open[slot].as_ref().map(|s| (s.trace, s.id))
    }

    /// Ends the span in `slot` at `ticks`, with the arguments of `e` (its second half).
    fn end(&mut self, slot: usize, ticks: u64, e: Option<&Event>) -> std::io::Result<()> {
        let more = e.map(|e| self.attrs(e)).unwrap_or_default();
        let Some(mut span) = self.open[slot].take() else {
            return Ok(());
        };
        self.free.push(slot);
        span.end = self.ns(ticks).max(span.start);
        for (k, v) in more {
            let k = match span.attrs.iter().any(|a| a.0 == k) {
                true => format!("end.{k}"),
                false => k,
            };
            span.attrs.push((k, v));
        }
        self.written.pairs += 1;
        self.done.push(span);
        if self.done.len() >= BATCH {
            self.flush()?;
        }
        Ok(())
    }

    /// Gives the span in `slot` its anatomy as attributes, where the trace tells any of
    /// it: `ttrace.<part>_ns` for each part not zero, and `ttrace.dominant`.
    fn parts(&mut self, slot: usize, parts: &Parts) {
        if !parts.known() {
            return;
        }
        let ns = parts.scaled(|t| self.clock.ticks_to_ns(t));
        let Some(span) = self.open.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        for (p, v) in ns.iter().filter(|p| p.1 > 0) {
            let v = Value::Int(i64::try_from(v).unwrap_or(i64::MAX));
            span.attrs.push((format!("ttrace.{}_ns", p.name()), v));
        }
        if let Some(d) = ns.dominant() {
            span.attrs
                .push(("ttrace.dominant".into(), Value::Str(d.name().into())));
        }
    }

    /// Adds an event to the innermost span open on its thread.
    fn event(&mut self, ctx: u64, stamp: u64, name: String, attrs: Vec<(String, Value)>) {
        let thread = self.thread(ctx, stamp);
        let Some(&(slot, _)) = self.scopes.get(&thread).and_then(|s| s.last()) else {
            return;
        };
        let ns = self.ns(stamp);
        if let Some(span) = self.open[slot].as_mut() {
            match span.events.len() < MAX_EVENTS {
                true => span.events.push(SpanEvent { ns, name, attrs }),
                false => span.dropped_events += 1,
            }
        }
    }

    /// An event that is no pair's half: an event of the span open on its thread.
    fn point(&mut self, e: &Event) {
        let attrs = self.attrs(e);
        self.event(e.ctx, e.stamp, self.name(e), attrs)
    }

    /// Renders a step of the model; `now` is the stamp of the event fed.
    fn render(&mut self, step: Step<&Event>, now: u64) -> std::io::Result<()> {
        let key = |e: &Event| (e.stamp, e.ctx, e.slot, e.type_word.tracepoint());
        match step {
            Step::Instant(e) => {
                let role = self
                    .schemas
                    .get(e.type_word.tracepoint() as usize)
                    .map(|s| s.role);
                // A span's step without its id is nothing.
                if !role.is_some_and(Role::is_span) {
                    self.point(e);
                }
            }
            Step::CallBegin { event, .. } => {
                let thread = self.thread(event.ctx, event.stamp);
                let parent = self.scopes.get(&thread).and_then(|s| s.last().copied());
                let parent = parent.and_then(|p| self.ids(p.0));
                let slot = self.begin(event, parent);
                self.scopes.entry(thread).or_default().push((slot, true));
            }
            Step::CallEnd { end, parts, .. } => {
                let thread = self.thread(end.ctx, end.stamp);
                let scopes = self.scopes.entry(thread).or_default();
                // The innermost call: the one the model closes.
                let at = scopes.iter().rposition(|s| s.1);
                if let Some((slot, _)) = at.map(|at| scopes.remove(at)) {
                    if let Some(parts) = parts {
                        self.parts(slot, &parts);
                    }
                    self.end(slot, end.stamp, Some(end))?;
                }
            }
            Step::StemBegin(e) => {
                let thread = self.thread(e.ctx, e.stamp);
                let parent = self.scopes.get(&thread).and_then(|s| s.last().copied());
                let parent = parent.and_then(|p| self.ids(p.0));
                let slot = self.begin(e, parent);
                // A start/stop span is named by its stem, as `report` names it.
                let name = ttrace_model::pairs::stem(
                    &self.schemas[e.type_word.tracepoint() as usize].name,
                    Kind::Start,
                )
                .to_string();
                if let Some(s) = self.open[slot].as_mut() {
                    s.name = name;
                }
                self.starts.insert(key(e), slot);
            }
            Step::StemEnd { begin, end, parts } => {
                if let Some(slot) = self.starts.remove(&key(begin)) {
                    if let Some(parts) = parts {
                        self.parts(slot, &parts);
                    }
                    self.end(slot, end.stamp, Some(end))?;
                }
            }
            Step::Unpaired { event, why } => {
                let Some(s) = self.schemas.get(event.type_word.tracepoint() as usize) else {
                    return Ok(());
                };
                match (s.role, s.kind, why) {
                    (role, _, _) if role.is_span() => {}
                    (_, Kind::Entry | Kind::Exit, Why::BeforeHorizon) => {
                        self.written.uncertain += 1
                    }
                    (_, Kind::Exit, _) => self.written.unpaired += 1,
                    // Open at the end: it ends with the trace, as every span open then.
                    (_, Kind::Entry | Kind::Start, Why::OpenAtEnd | Why::ThreadEnded) => {}
                    // A start or stop that pairs with nothing is an event.
                    _ => self.point(event),
                }
            }
            Step::SpanNew(e) => {
                let pid = self.thread(e.ctx, e.stamp).0;
                let key = (pid, e.args()[0]);
                let parent = e.args().get(1).copied().unwrap_or(0);
                let parent = self
                    .instances
                    .get(&(pid, parent))
                    .and_then(|&p| self.ids(p));
                let slot = self.begin(e, parent);
                // The span id and parent id are the ids OTLP gives: not attributes.
                let mut fields = self.fields(e);
                fields.drain(..2.min(fields.len()));
                if let Some(s) = self.open[slot].as_mut() {
                    s.attrs = fields;
                }
                if let Some(old) = self.instances.insert(key, slot) {
                    self.end(old, e.stamp, None)?;
                }
            }
            Step::SpanUnended {
                instance,
                why: Why::Superseded,
            } => {
                let key = (u64::from(instance.pid), instance.id);
                if let Some(slot) = self.instances.remove(&key) {
                    self.end(slot, now, None)?;
                }
            }
            Step::SpanEnd(i) => {
                if let Some(slot) = self.instances.remove(&(u64::from(i.pid), i.id)) {
                    // Begun before every ring is complete: polls may be missing.
                    if let (false, Some(s)) = (i.whole, self.open[slot].as_mut()) {
                        s.attrs.push(("ttrace.whole".into(), Value::Bool(false)));
                    }
                    for scopes in self.scopes.values_mut() {
                        scopes.retain(|s| s.0 != slot);
                    }
                    if i.whole {
                        self.parts(slot, &i.parts);
                    }
                    self.end(slot, i.close.unwrap_or(now), None)?;
                }
            }
            Step::PollBegin(e) => {
                let thread = self.thread(e.ctx, e.stamp);
                if let Some(&slot) = self.instances.get(&(thread.0, e.args()[0])) {
                    self.scopes.entry(thread).or_default().push((slot, false));
                }
            }
            Step::PollEnd { end, .. } => {
                let thread = self.thread(end.ctx, end.stamp);
                if let (Some(&slot), Some(scopes)) = (
                    self.instances.get(&(thread.0, end.args()[0])),
                    self.scopes.get_mut(&thread),
                ) {
                    if let Some(at) = scopes.iter().rposition(|s| s.0 == slot) {
                        scopes.remove(at);
                    }
                }
            }
            Step::SpanRecord(e) => {
                let pid = self.thread(e.ctx, e.stamp).0;
                let mut attrs = self.fields(e);
                attrs.drain(..1.min(attrs.len()));
                if let Some(s) = self
                    .instances
                    .get(&(pid, e.args()[0]))
                    .and_then(|&s| self.open[s].as_mut())
                {
                    for (k, v) in attrs {
                        match s.attrs.iter_mut().find(|a| a.0 == k) {
                            Some(a) => a.1 = v,
                            None => s.attrs.push((k, v)),
                        }
                    }
                }
            }
            Step::SpanFollows(e) => {
                let pid = self.thread(e.ctx, e.stamp).0;
                let follows = e.args().get(1).copied().unwrap_or(0);
                let target = self
                    .instances
                    .get(&(pid, follows))
                    .and_then(|&s| self.ids(s));
                let slot = self.instances.get(&(pid, e.args()[0])).copied();
                if let (Some(link), Some(slot)) = (target, slot) {
                    if let Some(s) = self.open[slot].as_mut() {
                        s.links.push(link);
                    }
                }
            }
            // The drop re-entry is no scope; what is open at the end ends with the trace.
            Step::PollDrop { .. } | Step::SpanUnended { .. } | Step::Cpu { .. } => {}
        }
        Ok(())
    }

    /// Hands on the spans ended as one batch.
    fn flush(&mut self) -> std::io::Result<()> {
        if self.done.is_empty() {
            return Ok(());
        }
        let mut spans = std::mem::take(&mut self.done);
        spans.sort_by_key(|s| s.pid);
        let groups: Vec<(Process, &[Span])> = spans
            .chunk_by(|a, b| a.pid == b.pid)
            .map(|g| {
                (
                    (g[0].pid, self.processes.get(&g[0].pid).cloned().flatten()),
                    g,
                )
            })
            .collect();
        let mut buf = Vec::new();
        match self.encoding {
            Encoding::Proto => {
                for (process, spans) in &groups {
                    message(&mut buf, 1, |r| self.resource_spans(r, process, spans));
                }
            }
            Encoding::Json => {
                let groups: Vec<serde_json::Value> = groups
                    .iter()
                    .map(|(process, spans)| self.resource_spans_json(process, spans))
                    .collect();
                let line = serde_json::json!({ "resourceSpans": groups });
                serde_json::to_writer(&mut buf, &line)?;
                buf.push(b'\n');
            }
        }
        (self.out)(&buf)
    }

    /// The resource's attributes of a process.
    fn resource(&self, (pid, name): &Process) -> Vec<(String, Value)> {
        vec![
            (
                "service.name".into(),
                Value::Str(name.clone().unwrap_or_else(|| format!("pid {pid}"))),
            ),
            ("process.pid".into(), Value::Int(*pid as i64)),
            ("host.name".into(), Value::Str(self.host.clone())),
            ("ttrace.device".into(), Value::Str(self.device.clone())),
        ]
    }

    /// A `ResourceSpans`' body.
    fn resource_spans(&self, out: &mut Vec<u8>, process: &Process, spans: &[Span]) {
        message(out, 1, |r| {
            for (k, v) in self.resource(process) {
                message(r, 1, |kv| key_value(kv, &k, &v));
            }
        });
        message(out, 2, |scope| {
            message(scope, 1, |s| {
                bytes(s, 1, b"ttrace");
                bytes(s, 2, env!("CARGO_PKG_VERSION").as_bytes());
            });
            for span in spans {
                message(scope, 2, |s| {
                    bytes(s, 1, &span.trace.to_be_bytes());
                    bytes(s, 2, &span.id.to_be_bytes());
                    if span.parent != 0 {
                        bytes(s, 4, &span.parent.to_be_bytes());
                    }
                    bytes(s, 5, span.name.as_bytes());
                    uint(s, 6, 1); // SPAN_KIND_INTERNAL
                    fixed64(s, 7, span.start);
                    fixed64(s, 8, span.end);
                    for (k, v) in &span.attrs {
                        message(s, 9, |kv| key_value(kv, k, v));
                    }
                    for e in &span.events {
                        message(s, 11, |ev| {
                            fixed64(ev, 1, e.ns);
                            bytes(ev, 2, e.name.as_bytes());
                            for (k, v) in &e.attrs {
                                message(ev, 3, |kv| key_value(kv, k, v));
                            }
                        });
                    }
                    if span.dropped_events > 0 {
                        uint(s, 12, u64::from(span.dropped_events));
                    }
                    for (trace, id) in &span.links {
                        message(s, 13, |l| {
                            bytes(l, 1, &trace.to_be_bytes());
                            bytes(l, 2, &id.to_be_bytes());
                        });
                    }
                });
            }
        });
    }

    /// A `ResourceSpans` in OTLP's JSON mapping.
    fn resource_spans_json(&self, process: &Process, spans: &[Span]) -> serde_json::Value {
        use serde_json::json;
        let attrs = |a: &[(String, Value)]| -> Vec<serde_json::Value> {
            a.iter()
                .map(|(k, v)| json!({ "key": k, "value": any_json(v) }))
                .collect()
        };
        let spans: Vec<serde_json::Value> = spans
            .iter()
            .map(|s| {
                let mut span = json!({
                    "traceId": format!("{:032x}", s.trace),
                    "spanId": format!("{:016x}", s.id),
                    "name": s.name,
                    "kind": 1,
                    "startTimeUnixNano": s.start.to_string(),
                    "endTimeUnixNano": s.end.to_string(),
                    "attributes": attrs(&s.attrs),
                    "events": s.events.iter().map(|e| json!({
                        "timeUnixNano": e.ns.to_string(),
                        "name": e.name,
                        "attributes": attrs(&e.attrs),
                    })).collect::<Vec<_>>(),
                    "links": s.links.iter().map(|(t, i)| json!({
                        "traceId": format!("{t:032x}"),
                        "spanId": format!("{i:016x}"),
                    })).collect::<Vec<_>>(),
                });
                if s.parent != 0 {
                    span["parentSpanId"] = json!(format!("{:016x}", s.parent));
                }
                if s.dropped_events > 0 {
                    span["droppedEventsCount"] = json!(s.dropped_events);
                }
                span
            })
            .collect();
        json!({
            "resource": { "attributes": attrs(&self.resource(process)) },
            "scopeSpans": [{
                "scope": { "name": "ttrace", "version": env!("CARGO_PKG_VERSION") },
                "spans": spans,
            }],
        })
    }
}

/// A `KeyValue`'s body.
fn key_value(out: &mut Vec<u8>, k: &str, v: &Value) {
    bytes(out, 1, k.as_bytes());
    message(out, 2, |a| match v {
        Value::Str(s) => bytes(a, 1, s.as_bytes()),
        Value::Bool(b) => uint(a, 2, u64::from(*b)),
        Value::Int(i) => uint(a, 3, *i as u64),
        Value::Double(d) => super::proto::double(a, 4, *d),
    });
}

/// An `AnyValue` in OTLP's JSON mapping.
fn any_json(v: &Value) -> serde_json::Value {
    use serde_json::json;
    match v {
        Value::Str(s) => json!({ "stringValue": s }),
        Value::Bool(b) => json!({ "boolValue": b }),
        Value::Int(i) => json!({ "intValue": i.to_string() }),
        Value::Double(d) => json!({ "doubleValue": d }),
    }
}

/// One argument word as an attribute's value: numbers as numbers, hex as `0x` text, the
/// rest as `dump` shows it.
fn value(spec: &Spec, w: u64, aux: &AuxSnapshots) -> Value {
    match spec {
        Spec::Bool => Value::Bool(w != 0),
        Spec::Unsigned if w <= i64::MAX as u64 => Value::Int(w as i64),
        Spec::Signed => Value::Int(w as i64),
        Spec::Float => Value::Double(f64::from_bits(w)),
        Spec::Str => Value::Str(match crate::format::string_arg(aux, w) {
            Some(r) => {
                let dots = if r.truncated { "..." } else { "" };
                format!("{}{dots}", String::from_utf8_lossy(r.bytes))
            }
            None => "<lost>".into(),
        }),
        _ => {
            let mut text = Vec::new();
            crate::format::word(&mut text, spec, w, aux);
            Value::Str(String::from_utf8_lossy(&text).into_owned())
        }
    }
}

/// This machine's host name.
fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is valid for writes of its length; gethostname writes at most that and
    // the name is read up to its NUL within `buf`.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match ok {
        true => String::from_utf8_lossy(&buf[..len]).into_owned(),
        false => "unknown".into(),
    }
}

/// Writes the items of `ctx` (merged by `items`) as OTLP spans in `encoding`, each batch
/// handed to `out`; `rings` gives the per-ring counts, `device` names what was read (the
/// resource attribute `ttrace.device`). Counts the spans as [`Written::pairs`].
pub fn write(
    ctx: Context<'_>,
    rings: &[RingSnapshot<Mark>],
    items: Merge<'_>,
    encoding: Encoding,
    device: &str,
    out: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<Written> {
    let threads = super::pipeline::threads();
    write_on(ctx, rings, items, encoding, device, out, threads)
}

/// [`write()`], with the merge and the model on a thread of their own for a long trace
/// (`threads`: on more than one core, as [`write()`] does), or all on the calling thread
/// ([`super::pipeline`]): the same output.
pub fn write_on(
    ctx: Context<'_>,
    rings: &[RingSnapshot<Mark>],
    items: Merge<'_>,
    encoding: Encoding,
    device: &str,
    out: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    threads: bool,
) -> std::io::Result<Written> {
    let model = Model::new(ctx.meta, rings);
    let mut w = Writer {
        aux: ctx.aux,
        clock: ctx.version.clock,
        schemas: Schema::all(ctx.meta),
        identities: Identities::new(ctx.meta),
        open: Vec::new(),
        free: Vec::new(),
        scopes: HashMap::default(),
        starts: HashMap::default(),
        instances: HashMap::default(),
        done: Vec::new(),
        processes: HashMap::default(),
        host: host_name(),
        device: device.to_string(),
        seed: mix(ctx.version.clock.anchor_realtime_ns),
        next_id: 0,
        encoding,
        out,
        written: Written::default(),
    };
    w.written.losses(rings, &items);
    let mut last = 0;
    let strings_lost = super::pipeline::walk(items, model, threads, &mut |walked| {
        match walked {
            Walked::Point { event, .. } => {
                w.written.walked(false);
                last = last.max(event.stamp);
            }
            Walked::Fed(_) => {}
            // A step of what is open at the end: at the trace's last time.
            Walked::Step { step, fed, span } => {
                return w.render(step, fed.map_or(span.1, |e| e.stamp));
            }
            Walked::Message(m) => {
                w.written.walked(true);
                last = last.max(m.timestamp);
                let text = String::from_utf8_lossy(m.text_or_lost()).into_owned();
                let attrs = vec![("message".to_string(), Value::Str(text))];
                w.event(m.ctx, m.timestamp, "info".into(), attrs);
            }
        }
        Ok(())
    })?;
    w.written.strings_lost = strings_lost;
    // Spans still open end with the trace.
    for slot in 0..w.open.len() {
        if let Some(s) = w.open[slot].as_mut() {
            s.attrs.push(("ttrace.open".into(), Value::Bool(true)));
            w.end(slot, last, None)?;
        }
    }
    w.flush()?;
    Ok(w.written)
}
