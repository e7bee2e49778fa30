//! Chrome Trace Event JSON, for Perfetto UI and `chrome://tracing`.
//!
//! What the events mean is the model's ([`ttrace_model::model`]): this writer renders its
//! steps.
//!
//! - Process and thread names are metadata events (`"ph":"M"`).
//! - An entry and the exit that closes it (a call) are one complete slice
//!   (`"ph":"X"`) on their thread, with the entry's arguments and, under the exit's name,
//!   the exit's.
//! - A half whose other half is not in the trace (overwritten, or not yet written) is an
//!   async slice (`"ph":"b"`/`"e"`, category `unpaired`) from the start of the trace to the
//!   exit (stop), or from the entry (start) to the end of the trace; its half's side has
//!   the arguments, `missing` (`entry`, `exit`, `start`, `stop`) and `why` (the model's
//!   reason: `partner_missing`, `open_at_end`, `thread_ended`, `across_gap`).
//! - An entry, exit, start or stop that cannot be paired, before the horizon, is an instant
//!   event whose `unpaired` argument says why (`before the horizon`).
//! - A start and the stop that closes it are an async slice named by their stem (category
//!   `start/stop`), each also an instant event with its arguments.
//! - A `tracing` span instance ([`ttrace_model::spans`]) is an async slice (`"ph":"b"`/`"e"`,
//!   category `span`, `id` its pid and id) from its new to its close, with its fields, and
//!   each of its polls a complete slice on the thread that polled it (argument `span`, the
//!   id); the drop re-entry is left out. Its begin is on the thread of its new, its end on
//!   the thread that closed it. Written once the instance closes (or at the end, with
//!   `"open":true`, its end on the thread of its beginning); `"whole":false` when it began
//!   before every ring is complete (or was open at a gap): polls may be missing. Where the
//!   trace tells where its time went (`ttrace_model::anatomy`), the arguments `parts` (each
//!   part, ns) and `dominant`.
//! - Other trace points, and messages, are instant events (`"ph":"i"`) on their thread;
//!   a `tracing` event's category is its level (`info`).
//! - `ts` is in microseconds since the device was created, with three decimals: to the
//!   nanosecond. `otherData`, after the events, holds the device's facts, each ring's
//!   counts as `dump`'s footer shows them, and the totals `dump`'s last line shows
//!   (`events`, `trace_points`, `messages`, `entries_lost`, `events_dropped`,
//!   `strings_lost`, and `summary`, the line itself), losses during the export included;
//!   for a snapshot file that says why it was taken, `snapshot` (as `report --json` has it).
//!
//! The output is written as the items come; memory holds only the entries still open.
//!
//! **On every core.** The model's steps come in parts ([`super::pipeline::walk_in_parts`]),
//! each formatted on any core by a writer of its own, and written out in order. A part's
//! text depends on nothing before it: every element begins with a comma (the first one
//! written loses it), an async slice's `id` is its part's index times 2^32 plus its count
//! in the part (1, 2, ... in the first part), and each part says which writers it saw under
//! which names, merged in order (a writer shows the last name it was seen with). So the
//! output is the same on one core or many.

use super::pipeline::Walked;
use super::{Identities, Schema, Written};
use crate::append::{self, Text};
use crate::decode::Context;
use crate::format::Spec;
use crate::merge::Merge;
use devttrace::{AuxSnapshots, Clock, Event, Mark, RingSnapshot};
use foldhash::HashMap as FoldHashMap;
use std::io::Write;
use ttrace_layouts::entry::Kind;
use ttrace_model::model::{Model, Step, Why};
use ttrace_model::spans::Instance;

/// Appends `bytes` as the contents of a JSON string (no quotes); invalid UTF-8 becomes
/// U+FFFD.
pub fn escape(out: &mut Vec<u8>, bytes: &[u8]) {
    if bytes
        .iter()
        .all(|&b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\')
    {
        out.extend_from_slice(bytes);
        return;
    }
    for c in String::from_utf8_lossy(bytes).chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\r' => out.extend_from_slice(b"\\r"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let mut b = [0; 4];
                out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            }
        }
    }
}

/// `"text"` as JSON.
fn string(s: &str) -> String {
    let mut v = b"\"".to_vec();
    escape(&mut v, s.as_bytes());
    v.push(b'"');
    String::from_utf8(v).expect("escaped text is UTF-8")
}

/// Why an entry or exit is not paired: events may be missing before it.
const BEFORE_HORIZON: &str = "before the horizon";

/// Largest integer a JSON reader that uses doubles (JavaScript, Perfetto) keeps exactly.
const EXACT: u64 = 1 << 53;

/// One argument word as a JSON value.
fn value(out: &mut Vec<u8>, spec: &Spec, w: u64, aux: &AuxSnapshots) {
    match spec {
        Spec::Bool => out.extend_from_slice(if w != 0 { b"true" } else { b"false" }),
        Spec::Unsigned if w <= EXACT => append::put_u64(out, w),
        Spec::Signed if (w as i64).unsigned_abs() <= EXACT => append::put_i64(out, w as i64),
        Spec::Unsigned => {
            out.push(b'"');
            append::put_u64(out, w);
            out.push(b'"');
        }
        Spec::Signed => {
            out.push(b'"');
            append::put_i64(out, w as i64);
            out.push(b'"');
        }
        Spec::Hex => {
            out.push(b'"');
            append::put_hex(out, w);
            out.push(b'"');
        }
        Spec::Float => {
            let f = f64::from_bits(w);
            if f.is_finite() {
                let _ = write!(out, "{f:?}");
            } else {
                let _ = write!(out, "\"{f}\"");
            }
        }
        Spec::Char | Spec::Values { .. } => {
            // As text: the character, or the table's names.
            let mut text = Vec::new();
            crate::format::word(&mut text, spec, w, aux);
            out.push(b'"');
            escape(out, &text);
            out.push(b'"');
        }
        Spec::Str => {
            out.push(b'"');
            match crate::format::string_arg(aux, w) {
                Some(r) => {
                    escape(out, r.bytes);
                    if r.truncated {
                        out.extend_from_slice(b"...");
                    }
                }
                None => out.extend_from_slice(b"<lost>"),
            }
            out.push(b'"');
        }
    }
}

/// A tracepoint's JSON pieces, prepared once.
struct Compiled {
    /// `{"name":"<name>","cat":"<kind>","ph":"i","s":"t","ts":`
    instant: Text,
    /// `{"name":"<name>","cat":"entry","ph":"X","ts":`
    slice: Text,
    /// `"<name>"`
    name: Text,
    /// Per argument: `"<arg>":`, with a leading comma after the first.
    keys: Vec<(Spec, Text)>,
}

impl Compiled {
    fn new(s: &Schema) -> Compiled {
        let name = string(&s.name);
        let cat = match (s.role, s.level) {
            (devttrace::Role::Point, _) => s.kind.name().to_string(),
            (_, Some(level)) => level.name().to_ascii_lowercase(),
            (role, None) => role.label().unwrap_or("event").to_string(),
        };
        Compiled {
            instant: Text::new(
                format!("{{\"name\":{name},\"cat\":\"{cat}\",\"ph\":\"i\",\"s\":\"t\",\"ts\":")
                    .as_bytes(),
            ),
            slice: Text::new(
                format!("{{\"name\":{name},\"cat\":\"entry\",\"ph\":\"X\",\"ts\":").as_bytes(),
            ),
            name: Text::new(name.as_bytes()),
            keys: s
                .args
                .iter()
                .enumerate()
                .map(|(i, (n, spec))| {
                    let comma = if i > 0 { "," } else { "" };
                    (
                        spec.clone(),
                        Text::new(format!("{comma}{}:", string(n)).as_bytes()),
                    )
                })
                .collect(),
        }
    }
}

/// A writer's process and thread names, as last seen.
type Names<'s> = (Option<&'s str>, Option<&'s str>);

/// Writes a view's items as Chrome JSON, a part at a time.
struct Writer<'s> {
    aux: &'s AuxSnapshots,
    clock: Clock,
    tracepoints: Vec<Compiled>,
    identities: Identities<'s>,
    /// `,"pid":P,"tid":T` per writer, and the index of each writer's, with its identity.
    writers: Vec<Text>,
    by_id: FoldHashMap<(u64, u64), usize>,
    ids: Vec<(u64, u64)>,
    /// Per writer, the names it was seen with in this part, if it was; and which were.
    names: Vec<Option<Names<'s>>>,
    seen: Vec<usize>,
    /// The last writer seen (`ctx`, the times its identity holds, index): events come in
    /// runs of one thread.
    recent: Option<(u64, core::ops::Range<u64>, usize)>,
    /// The last async slice id given.
    next_id: u64,
    written: Written,
    buf: Vec<u8>,
    /// Elements written to `traceEvents`.
    elements: u64,
}

/// What a part of the walk gave: its text, what it counts, the writers it saw.
struct Rendered<'s> {
    text: Vec<u8>,
    written: Written,
    elements: u64,
    names: Vec<((u64, u64), Names<'s>)>,
}

impl<'s> Writer<'s> {
    fn new(ctx: &Context<'s>, schemas: &[Schema]) -> Writer<'s> {
        Writer {
            aux: ctx.aux,
            clock: ctx.version.clock,
            tracepoints: schemas.iter().map(Compiled::new).collect(),
            identities: Identities::new(ctx.meta),
            writers: Vec::new(),
            by_id: FoldHashMap::default(),
            ids: Vec::new(),
            names: Vec::new(),
            seen: Vec::new(),
            recent: None,
            next_id: 0,
            written: Written::default(),
            buf: Vec::new(),
            elements: 0,
        }
    }

    /// Starts part `index` (its text into `buf`).
    fn begin(&mut self, index: usize, buf: Vec<u8>) {
        self.next_id = (index as u64) << 32;
        self.recent = None;
        self.written = Written::default();
        self.elements = 0;
        self.buf = buf;
    }

    /// Ends the part begun: what it gave.
    fn end(&mut self) -> Rendered<'s> {
        let names = (self.seen.drain(..))
            .filter_map(|i| Some((self.ids[i], self.names[i].take()?)))
            .collect();
        Rendered {
            text: std::mem::take(&mut self.buf),
            written: std::mem::take(&mut self.written),
            elements: self.elements,
            names,
        }
    }

    /// Starts an element of `traceEvents`: a comma before it (taken off the first one
    /// written: [`write_on`]).
    fn element(&mut self) {
        self.buf.extend_from_slice(b",\n");
        self.elements += 1;
    }

    fn ts(&mut self, ticks: u64) {
        let ns = self.clock.since_anchor_ns(ticks);
        let out = &mut self.buf;
        if ns < 0 {
            out.push(b'-');
        }
        let abs = ns.unsigned_abs();
        append::put_u64(out, abs / 1000);
        let frac = abs % 1000;
        out.extend_from_slice(&[
            b'.',
            b'0' + (frac / 100) as u8,
            b'0' + (frac / 10 % 10) as u8,
            b'0' + (frac % 10) as u8,
        ]);
    }

    /// `,"dur":` and the microseconds from `from` to `to`, to the nanosecond.
    fn dur(&mut self, from: u64, to: u64) {
        self.buf.extend_from_slice(b",\"dur\":");
        let dur = self.clock.ticks_to_ns(to.saturating_sub(from));
        append::put_u64(&mut self.buf, dur / 1000);
        let _ = write!(self.buf, ".{:03}", dur % 1000);
    }

    /// The start of an edge `ph` (`b` or `e`) of a span instance's async slice: its name,
    /// category, id, time `at` and writer (`ctx` at `since`: the thread that wrote it); the
    /// caller closes it.
    fn span_edge(&mut self, tp: usize, ph: char, id: &str, at: u64, ctx: u64, since: u64) {
        self.element();
        self.buf.extend_from_slice(b"{\"name\":");
        append::put_text(&mut self.buf, &self.tracepoints[tp].name);
        let _ = write!(
            self.buf,
            ",\"cat\":\"span\",\"ph\":\"{ph}\",\"id\":{id},\"ts\":"
        );
        self.ts(at);
        self.who(ctx, since);
    }

    fn who(&mut self, ctx: u64, timestamp: u64) {
        let i = match &self.recent {
            Some((c, during, i)) if *c == ctx && during.contains(&timestamp) => *i,
            _ => {
                let id = self.identities.of(ctx, timestamp);
                let (writers, ids, names) = (&mut self.writers, &mut self.ids, &mut self.names);
                let i = *self.by_id.entry((id.pid, id.tid)).or_insert_with(|| {
                    writers.push(Text::new(
                        format!(",\"pid\":{},\"tid\":{}", id.pid, id.tid).as_bytes(),
                    ));
                    ids.push((id.pid, id.tid));
                    names.push(None);
                    writers.len() - 1
                });
                // A renamed thread keeps its identity and shows its latest name.
                let n = self.names[i].get_or_insert_with(|| {
                    self.seen.push(i);
                    (None, None)
                });
                n.0 = id.process.or(n.0);
                n.1 = id.thread.or(n.1);
                self.recent = Some((ctx, id.during, i));
                i
            }
        };
        append::put_text(&mut self.buf, &self.writers[i]);
    }

    /// The arguments of `event` as `"key":value` pairs; whether there were any.
    fn fields(&mut self, event: &Event) -> bool {
        let start = self.buf.len();
        let args = event.args();
        match self.tracepoints.get(event.type_word.tracepoint() as usize) {
            Some(tp) => {
                for (i, (spec, key)) in tp.keys.iter().enumerate() {
                    let Some(&w) = args.get(i) else {
                        break;
                    };
                    append::put_text(&mut self.buf, key);
                    value(&mut self.buf, spec, w, self.aux);
                }
            }
            None => {
                let _ = write!(self.buf, "\"words\":\"{args:x?}\"");
            }
        }
        if event.continuation_lost {
            if self.buf.len() > start {
                self.buf.push(b',');
            }
            self.buf.extend_from_slice(b"\"continuation\":\"lost\"");
        }
        self.buf.len() > start
    }

    /// The JSON string of `event`'s tracepoint name.
    fn name(&mut self, event: &Event) {
        match self.tracepoints.get(event.type_word.tracepoint() as usize) {
            Some(tp) => append::put_text(&mut self.buf, &tp.name),
            None => {
                let _ = write!(self.buf, "\"tracepoint#{}\"", event.type_word.tracepoint());
            }
        }
    }

    fn instant(&mut self, event: &Event) {
        self.noted_instant(event, None);
    }

    /// An entry or exit that cannot be paired (before the horizon): an instant event, with
    /// `why` as its `unpaired` argument.
    fn uncertain(&mut self, event: &Event, why: &str) {
        self.noted_instant(event, Some(why));
        self.written.uncertain += 1;
    }

    fn noted_instant(&mut self, event: &Event, note: Option<&str>) {
        self.element();
        match self.tracepoints.get(event.type_word.tracepoint() as usize) {
            Some(tp) => append::put_text(&mut self.buf, &tp.instant),
            None => {
                let _ = write!(
                    self.buf,
                    "{{\"name\":\"tracepoint#{}\",\"ph\":\"i\",\"s\":\"t\",\"ts\":",
                    event.type_word.tracepoint()
                );
            }
        }
        self.ts(event.stamp);
        self.who(event.ctx, event.stamp);
        self.buf.extend_from_slice(b",\"args\":{");
        let any = self.fields(event);
        if let Some(note) = note {
            if any {
                self.buf.push(b',');
            }
            let _ = write!(self.buf, "\"unpaired\":\"{note}\"");
        }
        self.buf.extend_from_slice(b"}}");
    }

    fn slice(&mut self, entry: &Event, exit: &Event) {
        let id = entry.type_word.tracepoint() as usize;
        if id >= self.tracepoints.len() {
            return self.instant(entry);
        }
        self.element();
        append::put_text(&mut self.buf, &self.tracepoints[id].slice);
        self.ts(entry.stamp);
        self.dur(entry.stamp, exit.stamp);
        self.who(entry.ctx, entry.stamp);
        self.buf.extend_from_slice(b",\"args\":{");
        if self.fields(entry) {
            self.buf.push(b',');
        }
        self.name(exit);
        self.buf.extend_from_slice(b":{");
        self.fields(exit);
        self.buf.extend_from_slice(b"}}}");
        self.written.pairs += 1;
    }

    /// A start/stop pair as an async slice named by its stem (such pairs need not nest
    /// like calls); the start and the stop keep their own instant events, with their
    /// arguments.
    fn span(&mut self, stem: &str, start: &Event, stop: &Event) {
        self.next_id += 1;
        let id = self.next_id;
        for (ph, e) in [("b", start), ("e", stop)] {
            self.element();
            let _ = write!(
                self.buf,
                "{{\"name\":{},\"cat\":\"start/stop\",\"ph\":\"{ph}\",\"id\":{id},\"ts\":",
                string(stem)
            );
            self.ts(e.stamp);
            self.who(e.ctx, e.stamp);
            self.buf.push(b'}');
        }
        self.written.pairs += 1;
    }

    /// Renders a step of the model; `closer` is the writer of the event fed (the close of
    /// an instance that ends), `first` and `last` the trace's first and latest stamps.
    fn step(
        &mut self,
        step: Step<&Event>,
        schemas: &[Schema],
        closer: Option<u64>,
        (first, last): (u64, u64),
    ) {
        match step {
            Step::Instant(e) => self.instant(e),
            Step::CallEnd { begin, end, .. } => self.slice(begin, end),
            Step::StemBegin(e) => self.instant(e),
            Step::StemEnd { begin, end, .. } => {
                self.instant(end);
                let id = begin.type_word.tracepoint() as usize;
                let name = &schemas[id].name;
                self.span(ttrace_model::pairs::stem(name, Kind::Start), begin, end);
            }
            Step::SpanEnd(i) => self.instance(&i, last, closer),
            Step::SpanUnended { instance, .. } => self.instance(&instance, last, None),
            Step::Unpaired { event, why } => {
                let id = event.type_word.tracepoint() as usize;
                let Some(schema) = schemas.get(id) else {
                    return self.instant(event);
                };
                match (schema.kind, why) {
                    // A poll's half is the instance's.
                    _ if schema.role.is_span() => {}
                    (Kind::Entry | Kind::Exit, Why::BeforeHorizon) => {
                        self.uncertain(event, BEFORE_HORIZON)
                    }
                    (Kind::Exit, why) => self.unpaired(event, first, event.stamp, "entry", why),
                    (Kind::Entry, why) => self.unpaired(event, event.stamp, last, "exit", why),
                    (_, Why::BeforeHorizon) => self.uncertain(event, BEFORE_HORIZON),
                    // A stop closes nothing: its instant, and a half from the start.
                    (Kind::Stop, why) => {
                        self.instant(event);
                        self.unpaired(event, first, event.stamp, "start", why)
                    }
                    // A start left open (its instant is written): a half to the end.
                    (_, why) => self.unpaired(event, event.stamp, last, "stop", why),
                }
            }
            // What opens is written when it ends; a poll with its instance; the drop
            // re-entry not at all.
            Step::CallBegin { .. }
            | Step::SpanNew(_)
            | Step::SpanRecord(_)
            | Step::SpanFollows(_)
            | Step::PollBegin(_)
            | Step::PollEnd { .. }
            | Step::PollDrop { .. }
            | Step::Cpu { .. } => {}
        }
    }

    /// A span instance: an async slice from its beginning to its close (or `end`), its
    /// polls inside as complete slices on their threads; `closer`, the writer (`ctx`) of
    /// its close, when it closed.
    fn instance(&mut self, i: &Instance, end: u64, closer: Option<u64>) {
        let tp = i.tracepoint as usize;
        if tp >= self.tracepoints.len() {
            return;
        }
        let ctx = i
            .new
            .as_ref()
            .map(|e| e.ctx)
            .or(i.polls.first().map(|p| p.ctx))
            .unwrap_or(u64::from(i.pid) << 32);
        let id = format!("\"{}:{:#x}\"", i.pid, i.id);
        let begin = i.begin();
        self.span_edge(tp, 'b', &id, begin, ctx, begin);
        self.buf.extend_from_slice(b",\"args\":{");
        let mut any = match &i.new {
            Some(new) => self.fields(new),
            None => {
                self.buf.extend_from_slice(b"\"new\":\"not in the trace\"");
                true
            }
        };
        if i.close.is_none() {
            self.buf.extend_from_slice(if any {
                b",\"open\":true"
            } else {
                b"\"open\":true"
            });
            any = true;
        }
        // Begun before every ring is complete, or across a gap: polls may be missing.
        if !i.whole && i.new.is_some() {
            self.buf.extend_from_slice(if any {
                b",\"whole\":false"
            } else {
                b"\"whole\":false"
            });
            any = true;
        }
        if !i.follows.is_empty() {
            let follows: Vec<String> = i.follows.iter().map(|f| format!("\"{f:#x}\"")).collect();
            let comma = if any { "," } else { "" };
            let _ = write!(self.buf, "{comma}\"follows\":[{}]", follows.join(","));
            any = true;
        }
        // Where its time went, when the trace tells (`ttrace_model::anatomy`): each part
        // in ns, and the largest.
        if i.whole && i.close.is_some() && i.parts.known() {
            let ns = i.parts.scaled(|t| self.clock.ticks_to_ns(t));
            let comma = if any { "," } else { "" };
            let each: Vec<String> = (ns.iter())
                .map(|(p, v)| format!("\"{}\":{v}", p.name()))
                .collect();
            let _ = write!(self.buf, "{comma}\"parts\":{{{}}}", each.join(","));
            if let Some(d) = ns.dominant() {
                let _ = write!(self.buf, ",\"dominant\":\"{}\"", d.name());
            }
        }
        self.buf.extend_from_slice(b"}}");
        for p in &i.polls {
            self.element();
            self.buf.extend_from_slice(b"{\"name\":");
            append::put_text(&mut self.buf, &self.tracepoints[tp].name);
            self.buf
                .extend_from_slice(b",\"cat\":\"poll\",\"ph\":\"X\",\"ts\":");
            self.ts(p.enter);
            self.dur(p.enter, p.exit);
            self.who(p.ctx, p.enter);
            let _ = write!(self.buf, ",\"args\":{{\"span\":\"{:#x}\"}}}}", i.id);
            self.written.pairs += 1;
        }
        // The end on the thread that closed it; one the trace lacks, on its beginning's.
        match (i.close, closer) {
            (Some(close), Some(closer)) => self.span_edge(tp, 'e', &id, close, closer, close),
            (close, _) => self.span_edge(tp, 'e', &id, close.unwrap_or(end), ctx, begin),
        }
        self.buf.push(b'}');
    }

    /// An async slice for a half whose other half is missing, and why.
    fn unpaired(&mut self, event: &Event, begin: u64, end: u64, missing: &str, why: Why) {
        self.next_id += 1;
        let id = self.next_id;
        for (ph, at) in [("b", begin), ("e", end)] {
            self.element();
            self.buf.extend_from_slice(b"{\"name\":");
            self.name(event);
            let _ = write!(
                self.buf,
                ",\"cat\":\"unpaired\",\"ph\":\"{ph}\",\"id\":{id},\"ts\":"
            );
            self.ts(at);
            self.who(event.ctx, event.stamp);
            if (ph == "b") == matches!(missing, "exit" | "stop") {
                self.buf.extend_from_slice(b",\"args\":{");
                if self.fields(event) {
                    self.buf.push(b',');
                }
                let _ = write!(
                    self.buf,
                    "\"missing\":\"{missing}\",\"why\":\"{}\"}}}}",
                    why.name()
                );
            } else {
                self.buf.push(b'}');
            }
        }
        self.written.unpaired += 1;
    }
}

/// A worker's writer of parts, its text buffers from `buffers` (used again once written:
/// fresh memory costs a page fault a page).
struct Worker<'s, 'a> {
    w: Writer<'s>,
    schemas: &'a [Schema],
    buffers: &'a std::sync::Mutex<Vec<Vec<u8>>>,
}

impl<'s> super::pipeline::Parts<'s> for Worker<'s, '_> {
    type Out = Rendered<'s>;

    fn begin(&mut self, index: usize, _: &[bool]) {
        let buf = (self.buffers.lock().ok()).and_then(|mut b| b.pop());
        self.w.begin(index, buf.unwrap_or_default());
    }

    fn walked(&mut self, walked: Walked<'_, 's>) {
        let w = &mut self.w;
        match walked {
            Walked::Point { .. } => w.written.walked(false),
            Walked::Fed(_) => {}
            Walked::Message(r) => {
                w.written.walked(true);
                w.element();
                w.buf.extend_from_slice(
                    b"{\"name\":\"info\",\"cat\":\"message\",\"ph\":\"i\",\"s\":\"t\",\"ts\":",
                );
                w.ts(r.timestamp);
                w.who(r.ctx, r.timestamp);
                w.buf.extend_from_slice(b",\"args\":{\"message\":\"");
                escape(&mut w.buf, r.text_or_lost());
                w.buf.extend_from_slice(b"\"}}");
            }
            Walked::Step { step, fed, span } => {
                w.step(step, self.schemas, fed.map(|e| e.ctx), span)
            }
        }
    }

    fn end(&mut self) -> Rendered<'s> {
        self.w.end()
    }
}

/// Writes the items of `ctx` (merged by `items`) to `out` as Chrome JSON; `rings` gives the
/// per-ring counts for `otherData`.
pub fn write(
    ctx: Context<'_>,
    rings: &[RingSnapshot<Mark>],
    items: Merge<'_>,
    out: &mut impl Write,
    progress: impl FnMut(u64),
) -> std::io::Result<Written> {
    write_on(ctx, rings, items, out, progress, super::pipeline::workers())
}

/// [`write()`], formatted on `workers` threads for a long trace, the merge and the model on
/// a thread of their own ([`super::pipeline::walk_in_parts`]; [`write()`] takes
/// [`super::pipeline::workers()`]), or all on the calling thread (0): the same output.
pub fn write_on(
    ctx: Context<'_>,
    rings: &[RingSnapshot<Mark>],
    items: Merge<'_>,
    out: &mut impl Write,
    mut progress: impl FnMut(u64),
    workers: usize,
) -> std::io::Result<Written> {
    let schemas = Schema::all(ctx.meta);
    out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[")?;
    let model = Model::new(ctx.meta, rings);
    let mut written = Written::default();
    written.losses(rings, &items);
    // Elements written, and each writer's names as last seen.
    let mut elements = 0;
    let mut names: FoldHashMap<(u64, u64), Names<'_>> = FoldHashMap::default();
    // The parts' text buffers, used again once written (fresh memory costs a page fault
    // a page).
    let buffers = std::sync::Mutex::new(Vec::<Vec<u8>>::new());
    let strings_lost = super::pipeline::walk_in_parts(
        items,
        model,
        workers,
        || Worker {
            w: Writer::new(&ctx, &schemas),
            schemas: &schemas,
            buffers: &buffers,
        },
        |mut part| {
            written.add(&part.written);
            for (id, (process, thread)) in part.names {
                let n = names.entry(id).or_default();
                n.0 = process.or(n.0);
                n.1 = thread.or(n.1);
            }
            // The first element written has no comma before it.
            let skip = usize::from(elements == 0 && part.elements > 0);
            elements += part.elements;
            out.write_all(&part.text[skip..])?;
            part.text.clear();
            if let Ok(mut b) = buffers.lock() {
                b.push(part.text);
            }
            progress(written.events);
            Ok::<(), std::io::Error>(())
        },
    )?;
    written.strings_lost = strings_lost;
    let mut w = Writer::new(&ctx, &schemas);
    w.elements = elements;
    // The names of the writers seen: one process and one thread track per identity.
    let mut names: Vec<_> = names.into_iter().collect();
    names.sort_unstable();
    let mut processes: Vec<(u64, &str)> = names
        .iter()
        .filter_map(|&((pid, _), (p, _))| Some((pid, p?)))
        .collect();
    processes.dedup_by_key(|p| p.0);
    for (pid, name) in processes {
        w.element();
        let _ = write!(
            w.buf,
            "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":0,\"args\":{{\"name\":{}}}}}",
            string(name)
        );
    }
    for ((pid, tid), (_, name)) in names {
        let Some(name) = name else { continue };
        w.element();
        let _ = write!(
            w.buf,
            "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":{}}}}}",
            string(name)
        );
    }
    // The first element has no comma before it.
    if elements == 0 && !w.buf.is_empty() {
        w.buf.remove(0);
    }
    let v = ctx.version;
    let _ = write!(
        w.buf,
        "\n],\"otherData\":{{\"source\":{},\"clock_hz\":{},\"creator_pid\":{}",
        string(&ctx.dir.display().to_string()),
        v.clock.hz,
        v.creator_pid
    );
    for (ring, r) in rings.iter().enumerate() {
        if !(ring < v.num_cpus as usize || r.head > 0 || r.dropped > 0) {
            continue; // A shared ring nobody wrote to.
        }
        let name = ttrace_layouts::ring::ring_name(ring, v.num_cpus);
        let counts = crate::decode::ring_counts(&name, r);
        let counts = counts.split_once(": ").map_or("", |(_, c)| c);
        let _ = write!(w.buf, ",\"{name}\":{}", string(counts));
    }
    // Why the snapshot file was taken, if it says.
    if let Some(cause) = ctx.cause {
        // What the snapshot holds, so that the window and whether the matched interval is
        // whole in it are said, as `report` says them.
        let held = crate::cause::Held::of_rings(rings);
        let taken = crate::cause::Taken::new(cause, &v.clock).holding(held);
        let _ = write!(w.buf, ",\"snapshot\":{}", taken.json());
    }
    // The totals, as `dump`'s last line and `stats` count them.
    let t = written.tally();
    let _ = write!(
        w.buf,
        ",\"events\":{},\"trace_points\":{},\"messages\":{},\"entries_lost\":{},\"events_dropped\":{},\"strings_lost\":{},\"entries_damaged\":{},\"summary\":{}",
        t.events(),
        t.points,
        t.messages,
        t.lost,
        t.dropped,
        t.strings_lost,
        t.damaged,
        string(&t.line())
    );
    w.buf.extend_from_slice(b"}}\n");
    out.write_all(&w.buf)?;
    progress(written.events);
    Ok(written)
}
