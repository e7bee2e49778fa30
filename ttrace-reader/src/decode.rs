//! Events as text: one line per event.
//!
//! A line is `<seconds since the device was created> cpu<N> <pid>/<tid> (<thread name>)
//! <tracepoint>(<arguments>)`, the arguments rendered with the tracepoint's format string.
//!
//! **Span paths** (`dump --spans`, [`SpanPaths`]): a line can also show, before the
//! tracepoint, the `tracing` span instances its thread was in when it was recorded, as
//! `tracing`'s fmt shows them: `svc::request{method="GET" uri="/work/1"}:svc::work{id=1}: `.
//! The paths render the model's steps ([`ttrace_model::model`]): a thread is in an instance
//! during each of its polls, from the enter that begins it to the exit the model ends it
//! with (innermost last; `tracing` allows exits out of order); the path of an `enter` or
//! `exit` line is the one around that instance (the instance itself left out), that of
//! every other line all its thread is in. Each
//! instance shows as its name (its tracepoint's, `target::name`) and the fields its `new`
//! and the `record`s before the line gave (as dump shows arguments; a field with no value
//! is left out; `{?}` when its `new` is not in the trace, below).
//!
//! A path is never guessed: it holds only instances the trace shows the thread in. A ring
//! that lost entries may have held any thread's steps (threads migrate) from before its
//! oldest one kept, so before the *horizon* ([`span_horizon`]: the latest oldest event of
//! the rings that lost entries, as the model has it) no path can be told: such a
//! line shows `?: ` in its place. From the horizon on every step is in the trace, and the
//! paths are built from those steps alone: every thread's stack starts empty there, so a
//! path leaves out an instance its thread entered before the horizon (as it leaves out one
//! entered before `--since`), and an instance whose `new` is before it shows as `name{?}`
//! (what was lost may have recorded its fields, or closed it and given its id to another
//! instance). A `close` takes the instance off every thread's stack, even one whose exit
//! the trace lacks (its callsite turned off meanwhile), and so does a step that shows its
//! id free again: a `new` of the id, or a step of another span under it (an instance whose
//! `new` was not recorded: `name{?}`). Losses whose time the trace cannot tell (events
//! writers dropped, entries left out as damaged or malformed) put the horizon at the end:
//! every line shows `?: `.

use crate::append::{self, Text};
use crate::format::{self, Piece, Spec};
use crate::merge::{Filter, Item, Merge};
use crate::ordered;
use devttrace::event::Kept;
use devttrace::Role;
use devttrace::{
    AuxSnapshots, Clock, Event, Metadata, RingSnapshot, Snapshot, Status, TaskIndex,
    TracepointInfo, Version, View,
};
use foldhash::HashMap as FoldHashMap;
use std::io::Write;
use std::ops::Range;
use ttrace_model::incarnation::{Thread, Threads};
use ttrace_model::model::{Model, Step};

use std::path::Path;
use ttrace_layouts::ring::ring_name;
use ttrace_layouts::snapshot::Cause;

/// Everything besides the events that decoding needs: a snapshot's or a view's header,
/// metadata and aux buffer.
#[derive(Clone, Copy)]
pub struct Context<'s> {
    /// The device directory.
    pub dir: &'s Path,
    /// The header.
    pub version: &'s Version,
    /// Counters.
    pub status: &'s Status,
    /// Definitions and names.
    pub meta: &'s Metadata,
    /// Strings and messages.
    pub aux: &'s AuxSnapshots,
    /// Why the aux buffer could not be copied, if it could not.
    pub aux_error: Option<&'s str>,
    /// Why the snapshot file read was taken, if it says (known from a [`View`], which
    /// holds its reader; a copy made apart from its reader leaves it `None`).
    pub cause: Option<&'s Cause>,
}

impl<'s> From<&'s Snapshot> for Context<'s> {
    fn from(s: &'s Snapshot) -> Context<'s> {
        Context {
            dir: &s.dir,
            version: &s.version,
            status: &s.status,
            meta: &s.meta,
            aux: &s.aux,
            aux_error: s.aux_error.as_deref(),
            cause: None,
        }
    }
}

impl<'s> From<&'s View<'_>> for Context<'s> {
    fn from(v: &'s View<'_>) -> Context<'s> {
        Context {
            dir: v.reader().dir(),
            version: &v.version,
            status: &v.status,
            meta: &v.meta,
            aux: &v.aux,
            aux_error: v.aux_error.as_deref(),
            cause: v.reader().cause(),
        }
    }
}

/// How the time column is shown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TimeFormat {
    /// Seconds since the device was created, to the nanosecond.
    #[default]
    Relative,
    /// UTC wall-clock time, to the nanosecond.
    Utc,
}

/// What a tracepoint's line needs, prepared once.
#[derive(Clone)]
struct Compiled {
    /// `name(` and the format's first text.
    open: Text,
    /// The format's arguments, each with the text that follows it (the last ends with `)`).
    args: Vec<(Spec, Text)>,
}

impl Compiled {
    fn new(t: &TracepointInfo, meta: &Metadata) -> Compiled {
        let mut open = format!("{}(", crate::format::marked_name(t)).into_bytes();
        let mut args: Vec<(Spec, Vec<u8>)> = Vec::new();
        for p in format::pieces(t, meta) {
            match p {
                Piece::Text(t) => match args.last_mut() {
                    Some((_, after)) => after.extend_from_slice(t.as_bytes()),
                    None => open.extend_from_slice(t.as_bytes()),
                },
                Piece::Arg(_, spec) => args.push((spec, Vec::new())),
            }
        }
        match args.last_mut() {
            Some((_, after)) => after.push(b')'),
            None => open.push(b')'),
        }
        Compiled {
            open: Text::new(&open),
            args: args.into_iter().map(|(s, t)| (s, Text::new(&t))).collect(),
        }
    }
}

/// Turns the items of one snapshot into text lines.
#[derive(Clone)]
pub struct Decoder<'s> {
    aux: &'s AuxSnapshots,
    cpus: usize,
    clock: Clock,
    time: TimeFormat,
    tracepoints: Vec<Compiled>,
    /// ` pid/tid (name) ` of each thread record (by its index in the metadata), then of
    /// each writer with no record.
    writers: Vec<Text>,
    /// The thread records by id and time.
    threads: TaskIndex,
    /// `pid << 32 | tid` of a writer with no record → index in `writers`.
    unnamed: FoldHashMap<u64, usize>,
    /// The writers from here on in `writers` have no record.
    named: usize,
    /// Per ring: the last writer seen (writers come in runs), the times its record is
    /// current for, and its index in `writers`.
    recent: Vec<Option<(u64, Range<u64>, usize)>>,
    /// The span paths each line shows, when asked ([`Decoder::with_spans`]).
    spans: Option<Box<SpanPaths<'s>>>,
}

impl<'s> Decoder<'s> {
    /// A decoder for the events of a snapshot or view (see [`Context`]).
    pub fn new(ctx: impl Into<Context<'s>>, time: TimeFormat) -> Decoder<'s> {
        let ctx = ctx.into();
        let tracepoints = ctx
            .meta
            .tracepoints
            .iter()
            .map(|t| Compiled::new(t, ctx.meta))
            .collect();
        // Each event shows the name its writer had at its time (a reused tid has several).
        let writers = ctx
            .meta
            .threads
            .iter()
            .map(|t| Text::new(format!(" {}/{} ({}) ", t.pid, t.tid, t.name).as_bytes()))
            .collect();
        let cpus = ttrace_layouts::ring::num_rings(ctx.version.num_cpus);
        Decoder {
            aux: ctx.aux,
            cpus,
            clock: ctx.version.clock,
            time,
            tracepoints,
            writers,
            threads: TaskIndex::threads(ctx.meta),
            unnamed: FoldHashMap::default(),
            named: ctx.meta.threads.len(),
            recent: vec![None; cpus + 1],
            spans: None,
        }
    }

    /// Each line shows its span path (see the module's documentation), told from `horizon`
    /// on ([`span_horizon`] of the rings read): the items must then come to
    /// [`Decoder::line`] one by one, in time order, from the first; a trace written in one go
    /// ([`Decoder::write_counted`]) is formatted on this thread.
    pub fn with_spans(mut self, ctx: impl Into<Context<'s>>, horizon: u64) -> Decoder<'s> {
        self.spans = Some(Box::new(SpanPaths::new(ctx, horizon)));
        self
    }

    /// Feeds `item`, an item not shown, to the span paths (a no-op without them): what
    /// [`dump`] does with the items its filter leaves out, so that the paths of those it
    /// shows are whole.
    pub fn pass(&mut self, item: &Item<'_>) {
        if let Some(s) = &mut self.spans {
            s.step(item);
        }
    }

    /// Appends the line of `item`, newline included, to `out`; false if its writer shows
    /// unnamed (no record of its thread names it at its time).
    pub fn line(&mut self, item: &Item<'_>, out: &mut Vec<u8>) -> bool {
        let (ctx, cpu, slot) = match item {
            Item::Point { event, cpu } => (event.ctx, event.type_word.cpu(), (*cpu).min(self.cpus)),
            Item::Message(r) => (r.ctx, r.cpu, self.cpus),
        };
        self.time(item.timestamp(), out);
        out.extend_from_slice(b" cpu");
        append::put_u64(out, cpu as u64);
        let stamp = item.timestamp();
        let writer = match &self.recent[slot] {
            Some((c, during, i)) if *c == ctx && during.contains(&stamp) => *i,
            _ => {
                let (i, during) = match self.threads.resolve(ctx, stamp) {
                    Ok(found) => (found.index, found.during),
                    Err(during) => {
                        let writers = &mut self.writers;
                        let i = *self.unnamed.entry(ctx).or_insert_with(|| {
                            writers.push(Text::new(
                                format!(" {}/{} (?) ", ctx >> 32, ctx as u32).as_bytes(),
                            ));
                            writers.len() - 1
                        });
                        (i, during)
                    }
                };
                self.recent[slot] = Some((ctx, during, i));
                i
            }
        };
        append::put_text(out, &self.writers[writer]);
        if let Some(s) = &mut self.spans {
            s.step(item);
            s.path(item, out);
        }
        self.text(item, out);
        out.push(b'\n');
        writer < self.named
    }

    /// Appends what a line shows of `item` after its writer: `name(arguments)` of a trace
    /// point, `info("text")` of a message.
    pub fn text(&self, item: &Item<'_>, out: &mut Vec<u8>) {
        match item {
            Item::Point { event, .. } => self.point(event, out),
            Item::Message(m) => {
                out.extend_from_slice(b"info(");
                match m.text {
                    Some(text) => {
                        format::quoted(out, text);
                        if m.truncated {
                            out.extend_from_slice(b"...");
                        }
                    }
                    None => out.extend_from_slice(b"<lost>"),
                }
                out.push(b')');
            }
        }
    }

    /// Appends what a line shows of the trace point `event` after its writer (as
    /// [`Decoder::text`] does for its item).
    pub(crate) fn point(&self, event: &Event, out: &mut Vec<u8>) {
        let id = event.type_word.tracepoint() as usize;
        let Some(tp) = self.tracepoints.get(id) else {
            // One line whatever the arguments: `tracepoint#7(0x1 0xff)`.
            let _ = write!(out, "tracepoint#{id}(");
            for (i, a) in event.args().iter().enumerate() {
                let _ = write!(out, "{}{a:#x}", if i == 0 { "" } else { " " });
            }
            out.push(b')');
            return;
        };
        append::put_text(out, &tp.open);
        let args = event.args();
        for (i, (spec, after)) in tp.args.iter().enumerate() {
            match args.get(i) {
                Some(&w) => format::word(out, spec, w, self.aux),
                None => out.push(b'?'),
            }
            append::put_text(out, after);
        }
        if event.continuation_lost {
            out.extend_from_slice(b" [continuation lost]");
        }
    }

    /// The time column.
    fn time(&self, ticks: u64, out: &mut Vec<u8>) {
        match self.time {
            TimeFormat::Relative => {
                let ns = self.clock.since_anchor_ns(ticks);
                let abs = ns.unsigned_abs();
                let secs = abs / 1_000_000_000;
                // Right-aligned in 14 columns: "   0.000000000".
                let width = (secs.max(1).ilog10() as usize + 1) + 10 + (ns < 0) as usize;
                for _ in width..14 {
                    out.push(b' ');
                }
                if ns < 0 {
                    out.push(b'-');
                }
                append::put_u64(out, secs);
                out.push(b'.');
                append::put_nine_digits(out, (abs % 1_000_000_000) as u32);
            }
            TimeFormat::Utc => out.extend_from_slice(utc(self.clock.realtime_ns(ticks)).as_bytes()),
        }
    }

    /// Writes the lines of the merged items to `out`, in large blocks; returns how many.
    pub fn write_all(&mut self, items: Merge<'_>, out: &mut impl Write) -> std::io::Result<u64> {
        self.write_counted(items, None, out).map(|t| t.events())
    }

    /// Writes the lines of the merged items to `out`, in large blocks; returns what they
    /// were (trace points and messages; the [`Tally`]'s losses are left to the caller).
    ///
    /// Without a limit, a long trace is cut by time into parts formatted on every core
    /// (`crate::ordered`), each part's text written as soon as the parts before it were.
    pub fn write_counted(
        &mut self,
        items: Merge<'_>,
        limit: Option<u64>,
        out: &mut impl Write,
    ) -> std::io::Result<Tally> {
        if limit.is_some() || items.len() < 2 * PART_ITEMS || self.spans.is_some() {
            return self.write_part(items, limit, out);
        }
        let parts = items.split(items.len() / PART_ITEMS);
        let mut n = Tally {
            strings_lost: items.strings_lost(),
            ..Tally::default()
        };
        let proto: &Decoder<'s> = self;
        // The parts' text buffers, used again once written (fresh memory costs a page
        // fault a page).
        let buffers = std::sync::Mutex::new(Vec::<Vec<u8>>::new());
        let buffer = || {
            buffers
                .lock()
                .ok()
                .and_then(|mut b| b.pop())
                .unwrap_or_default()
        };
        ordered::in_order(
            parts,
            || proto.clone(),
            |decoder, part| {
                let mut text = buffer();
                let tally = decoder.write_part(part, None, &mut text).map(|t| (t, text));
                tally.expect("writing to memory cannot fail")
            },
            |(tally, mut text)| {
                n.add(&tally);
                out.write_all(&text)?;
                text.clear();
                if let Ok(mut b) = buffers.lock() {
                    b.push(text);
                }
                Ok::<(), std::io::Error>(())
            },
        )?;
        Ok(n)
    }

    /// [`Decoder::write_counted`] on this thread.
    fn write_part(
        &mut self,
        mut items: Merge<'_>,
        limit: Option<u64>,
        out: &mut impl Write,
    ) -> std::io::Result<Tally> {
        /// Why the walk over the items ended early.
        enum Stop {
            Limit,
            Write(std::io::Error),
        }
        let mut buf = Vec::with_capacity(1 << 17);
        let mut n = Tally::default();
        let walked = items.try_for_each_ref(|item| {
            if limit.is_some_and(|l| n.events() >= l) {
                return Err(Stop::Limit);
            }
            n.count(item);
            n.unnamed += !self.line(item, &mut buf) as u64;
            if buf.len() >= 1 << 16 {
                out.write_all(&buf).map_err(Stop::Write)?;
                buf.clear();
            }
            Ok(())
        });
        if let Err(Stop::Write(e)) = walked {
            return Err(e);
        }
        out.write_all(&buf)?;
        n.strings_lost = items.strings_lost();
        Ok(n)
    }
}

/// Items of a part of a trace formatted on its own core (`Decoder::write_counted`): large
/// enough that a part's start costs nothing next to it, small enough that its text (about
/// 100 bytes an item) is a few MiB.
const PART_ITEMS: usize = 1 << 16;

/// Writes what `ttrace-reader dump` prints of `view`: the header line, one line per event
/// that `filter` keeps (the first `limit` of them, if given), the per-CPU counts and the
/// aux line.
pub fn dump(
    view: &View<'_>,
    filter: &Filter,
    time: TimeFormat,
    limit: Option<u64>,
    out: &mut impl Write,
) -> std::io::Result<()> {
    dump_with(view, filter, time, limit, false, out)
}

/// All of the device (or snapshot file) `dev` as `ttrace-reader dump` prints it, times
/// relative to its creation: a program's way to read a device as text.
///
/// ```
/// # let tmp = tempfile::tempdir().unwrap();
/// # let dir = tmp.path().join("dev");
/// # drop(devttrace::Device::open(&devttrace::Config { ring_slots: 64, cpus: Some(1), ..devttrace::Config::at(&dir) }).unwrap());
/// let dev = devttrace::Reader::open(&dir)?;
/// let text = ttrace_reader::decode::text(&dev)?;
/// assert!(text.starts_with("# ttrace "));
/// # Ok::<(), devttrace::Error>(())
/// ```
pub fn text(dev: &devttrace::Reader) -> devttrace::Result<String> {
    let view = View::of(dev, 0)?;
    let mut out = Vec::new();
    dump(
        &view,
        &Filter::default(),
        TimeFormat::Relative,
        None,
        &mut out,
    )
    .map_err(|e| devttrace::Error::Io {
        path: dev.dir().to_path_buf(),
        source: e,
    })?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// [`dump`], each line with its span path if `spans` (`dump --spans`: see the module's
/// documentation). The paths are built from every event of the rings read in the time
/// window, whatever `--cpu` and `--filter` leave out of the lines.
pub fn dump_with(
    view: &View<'_>,
    filter: &Filter,
    time: TimeFormat,
    limit: Option<u64>,
    spans: bool,
    out: &mut impl Write,
) -> std::io::Result<()> {
    writeln!(out, "{}", header_line(view))?;
    let mut decoder = Decoder::new(view, time);
    let mut tally = match spans {
        false => decoder.write_counted(Merge::view(view, filter), limit, out)?,
        true => {
            let decoder = decoder.with_spans(view, span_horizon(&view.cpus));
            write_with_spans(decoder, view, filter, limit, out)?
        }
    };
    for (ring, r) in view.cpus.iter().enumerate() {
        if shown(ring, r, view.version.num_cpus, filter) {
            let name = ring_name(ring, view.version.num_cpus);
            writeln!(out, "# {}", ring_counts(&name, r))?;
        }
    }
    tally.losses(view, filter);
    writeln!(out, "{}", aux_line(view))?;
    writeln!(out, "# {}", tally.line())
}

/// Whether `a` and `b` are the same item of a trace (one ring's event, or one message).
fn same(a: &Item<'_>, b: &Item<'_>) -> bool {
    match (a, b) {
        (Item::Point { cpu: c, event: e }, Item::Point { cpu: d, event: f }) => {
            c == d && e.slot == f.slot && e.stamp == f.stamp
        }
        (Item::Message(m), Item::Message(n)) => m.timestamp == n.timestamp && m.ctx == n.ctx,
        _ => false,
    }
}

/// The lines of the items of `view` that `filter` keeps, each with its span path, built
/// from every item of the rings in the filter's time window: those the filter leaves out
/// (another CPU's ring, another name) are fed to the paths as they come, in time order.
fn write_with_spans(
    mut decoder: Decoder<'_>,
    view: &View<'_>,
    filter: &Filter,
    limit: Option<u64>,
    out: &mut impl Write,
) -> std::io::Result<Tally> {
    if filter.cpus.is_empty() && filter.name.is_none() {
        return decoder.write_counted(Merge::view(view, filter), limit, out);
    }
    let every = Filter {
        cpus: Vec::new(),
        name: None,
        ..filter.clone()
    };
    // The shown items are a subsequence of these: both merges order by time, then ring.
    let mut all = Merge::view(view, &every).peekable();
    let mut shown = Merge::view(view, filter);
    let mut buf = Vec::with_capacity(1 << 17);
    let mut n = Tally::default();
    let walked = shown.try_for_each_ref(|item| {
        if limit.is_some_and(|l| n.events() >= l) {
            return Err(None);
        }
        while let Some(a) = all.peek() {
            if same(a, item) {
                all.next();
                break;
            }
            if a.timestamp() > item.timestamp() {
                break;
            }
            if let Some(a) = all.next() {
                decoder.pass(&a);
            }
        }
        n.count(item);
        n.unnamed += !decoder.line(item, &mut buf) as u64;
        if buf.len() >= 1 << 16 {
            out.write_all(&buf).map_err(Some)?;
            buf.clear();
        }
        Ok(())
    });
    if let Err(Some(e)) = walked {
        return Err(e);
    }
    out.write_all(&buf)?;
    n.strings_lost = shown.strings_lost();
    Ok(n)
}

/// A field of a span instance: its name, how it shows, its word.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// Its name.
    pub name: String,
    /// How its word shows (as `dump` shows an argument).
    pub spec: Spec,
    /// Its word.
    pub word: u64,
}

/// What a span's steps name and hold: each tracepoint's name, and for a `new` or `record`
/// step, its fields (the arguments after the instance's id, and after the parent's for a
/// `new`).
#[derive(Clone)]
pub struct SpanFields<'s> {
    aux: &'s AuxSnapshots,
    /// Per tracepoint id.
    tracepoints: Vec<StepFields>,
}

/// What [`SpanFields`] knows of one tracepoint.
#[derive(Clone)]
struct StepFields {
    name: String,
    /// The index of its first field (a step that gives no field: its arguments are none).
    first: usize,
    /// The names and specs of its arguments.
    args: Vec<(String, Spec)>,
}

impl<'s> SpanFields<'s> {
    /// The span steps of a snapshot's or view's tracepoints.
    pub fn new(ctx: impl Into<Context<'s>>) -> SpanFields<'s> {
        let ctx = ctx.into();
        let tracepoints = ctx
            .meta
            .tracepoints
            .iter()
            .map(|t| {
                let first = match t.role {
                    Role::SpanNew => 2,
                    Role::SpanRecord => 1,
                    _ => {
                        return StepFields {
                            name: t.name.clone(),
                            first: 0,
                            args: Vec::new(),
                        }
                    }
                };
                let args = format::named_specs(t, ctx.meta);
                StepFields {
                    name: t.name.clone(),
                    first,
                    args,
                }
            })
            .collect();
        SpanFields {
            aux: ctx.aux,
            tracepoints,
        }
    }

    /// The name of tracepoint `id` (`tracepoint#ID` for one the metadata does not define).
    pub fn name(&self, id: u16) -> String {
        match self.tracepoints.get(id as usize) {
            Some(t) => t.name.clone(),
            None => format!("tracepoint#{id}"),
        }
    }

    /// Whether tracepoints `a` and `b` are steps of one span (they have one name).
    fn same_span(&self, a: u16, b: u16) -> bool {
        let name = |id: u16| self.tracepoints.get(id as usize).map(|t| t.name.as_str());
        a == b || name(a).is_some_and(|n| Some(n) == name(b))
    }

    /// Sets in `fields` those that `e` (a span's `new` or `record`) gives a value: a later
    /// value of a field replaces the earlier one. A string field with no value (a `tracing`
    /// field declared `Empty`, and not recorded) has the word 0, and is left out.
    pub fn set(&self, e: &Event, fields: &mut Vec<Field>) {
        let Some(t) = self.tracepoints.get(e.type_word.tracepoint() as usize) else {
            return;
        };
        let words = e.args().iter().zip(&t.args).skip(t.first);
        for (&word, (name, spec)) in words {
            if word == 0 && *spec == Spec::Str {
                continue;
            }
            match fields.iter_mut().find(|f| f.name == *name) {
                Some(f) => {
                    f.spec = spec.clone();
                    f.word = word;
                }
                None => fields.push(Field {
                    name: name.clone(),
                    spec: spec.clone(),
                    word,
                }),
            }
        }
    }

    /// Writes `field`'s value as `dump` shows an argument.
    pub fn value(&self, out: &mut Vec<u8>, field: &Field) {
        format::word(out, &field.spec, field.word, self.aux);
    }

    /// Writes an instance as a path shows it: `name{a=1 b="x"}`; `name` with no field;
    /// `name{?}` when its fields are not known (`None`: its `new` is not in the trace).
    pub fn scope(&self, out: &mut Vec<u8>, tracepoint: u16, fields: Option<&[Field]>) {
        out.extend_from_slice(self.name(tracepoint).as_bytes());
        match fields {
            None => out.extend_from_slice(b"{?}"),
            Some([]) => {}
            Some(fields) => {
                out.push(b'{');
                for (i, f) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(b' ');
                    }
                    out.extend_from_slice(f.name.as_bytes());
                    out.push(b'=');
                    self.value(out, f);
                }
                out.push(b'}');
            }
        }
    }
}

/// An instance a span path can show.
#[derive(Clone)]
struct PathScope {
    tracepoint: u16,
    /// `None`: its `new` is not in the trace.
    fields: Option<Vec<Field>>,
    /// How it shows, with the `:` after it.
    text: Vec<u8>,
}

/// The time from which `dump --spans` tells paths (see the module's documentation), for
/// the rings `rings` read: every ring holds every entry it was given from then on.
///
/// That of each ring that lost entries is its oldest event kept (the *horizon* of
/// `ttrace_model::model`), or, where writers overwrote some of its oldest entries while it was
/// copied (`after_cut`, `changed`), the event after as many as they may have overtaken
/// (the entries lost then may lie between events kept); none for a ring whose losses are
/// all older than an event left out by `--since` (`older`). A ring that kept no event after
/// its losses, or lost entries whose time the trace cannot tell (events dropped by their
/// writers, entries damaged or malformed), gives `u64::MAX`: no path can be told.
///
/// ```
/// use devttrace::{event::Accounting, Mark, RingSnapshot};
/// use ttrace_reader::decode::span_horizon;
/// let ring = |stamps: &[u64], lost| RingSnapshot::<Mark> {
///     counts: Accounting { lost, ..Accounting::default() },
///     events: stamps.iter().map(|&stamp| Mark { stamp, ..Mark::default() }).collect(),
///     ..RingSnapshot::<Mark>::default()
/// };
/// assert_eq!(span_horizon(&[ring(&[10, 20], 0), ring(&[30, 40], 0)]), 0);
/// assert_eq!(span_horizon(&[ring(&[10, 20], 0), ring(&[30, 40], 5)]), 30);
/// let mut overtaken = ring(&[30, 40], 5);
/// overtaken.after_cut = 1;
/// assert_eq!(span_horizon(&[ring(&[10, 20], 0), overtaken]), 40);
/// // Losses older than an event before `--since`: none after it.
/// let mut since = ring(&[30, 40], 5);
/// since.older = 2;
/// assert_eq!(span_horizon(&[ring(&[10, 20], 0), since]), 0);
/// let mut dropped = ring(&[10, 20], 0);
/// dropped.dropped = 1;
/// assert_eq!(span_horizon(&[dropped, ring(&[30, 40], 5)]), u64::MAX);
/// ```
pub fn span_horizon<T: Kept>(rings: &[RingSnapshot<T>]) -> u64 {
    let of = |r: &RingSnapshot<T>| {
        if r.dropped > 0 || r.damaged > 0 || r.malformed > 0 {
            return u64::MAX;
        }
        if r.lost == 0 {
            return 0;
        }
        // The events kept before the last entry overwritten while the copy ran: at most one
        // per position written meanwhile, those of `--since` first.
        let overtaken = r.after_cut.saturating_add(r.changed);
        if r.older > overtaken {
            return 0;
        }
        usize::try_from(overtaken - r.older)
            .ok()
            .and_then(|k| r.events.get(k))
            .map_or(u64::MAX, Kept::stamp)
    };
    rings.iter().map(of).max().unwrap_or(0)
}

/// The span paths of `dump --spans` (see the module's documentation), built from the items
/// fed in time order: the model's steps ([`Model`]) say which instances each thread is in.
#[derive(Clone)]
pub struct SpanPaths<'s> {
    fields: SpanFields<'s>,
    /// Per tracepoint id, its role.
    roles: Vec<Role>,
    /// Whether any tracepoint is a span's step (else no line has a path to tell).
    any: bool,
    /// What the steps mean: fed the items from the horizon on (taken while it feeds).
    model: Option<Model>,
    threads: Threads,
    /// Steps before it are not fed: paths are told from it on ([`span_horizon`]).
    horizon: u64,
    /// The instances open, by pid and id: how each shows.
    open: FoldHashMap<(u32, u64), PathScope>,
    /// Per thread in some instance, the instances it is polling (the model's polls begun
    /// and not ended), innermost last.
    stacks: FoldHashMap<Thread, Vec<(u32, u64)>>,
    /// Per instance on some stack, how many times it is there.
    entered: FoldHashMap<(u32, u64), u32>,
    /// The instance whose poll the item fed began (an enter's path is the one before it).
    began: Option<(u32, u64)>,
    /// The `record` fed last, applied at the next item (a `record`'s path shows the fields
    /// before it).
    recorded: Option<Event>,
}

impl<'s> SpanPaths<'s> {
    /// Paths of a snapshot's or view's spans, told from `horizon` on ([`span_horizon`]).
    pub fn new(ctx: impl Into<Context<'s>>, horizon: u64) -> SpanPaths<'s> {
        let ctx = ctx.into();
        SpanPaths {
            fields: SpanFields::new(ctx),
            roles: ctx.meta.tracepoints.iter().map(|t| t.role).collect(),
            any: ctx.meta.tracepoints.iter().any(|t| t.role.is_span()),
            model: Some(Model::whole(ctx.meta)),
            threads: Threads::new(ctx.meta),
            horizon,
            open: FoldHashMap::default(),
            stacks: FoldHashMap::default(),
            entered: FoldHashMap::default(),
            began: None,
            recorded: None,
        }
    }

    /// Writes the span path of `item` (nothing if its thread is in no instance), then `: `;
    /// `?: ` before the horizon, where no path can be told. Call it after [`SpanPaths::step`]
    /// of the same item: a line's path is what its thread is in once the model said what
    /// the item did, less the instance whose poll it began (an enter's path is the one
    /// before it; an exit's, the one around its instance; a close's or new's has no
    /// instance of its id).
    pub fn path(&mut self, item: &Item<'_>, out: &mut Vec<u8>) {
        let (ctx, stamp) = match item {
            Item::Point { event, .. } => (event.ctx, event.stamp),
            Item::Message(m) => (m.ctx, m.timestamp),
        };
        if stamp < self.horizon {
            if self.any {
                out.extend_from_slice(b"?: ");
            }
            return;
        }
        if !self.any {
            return;
        }
        let thread = self.threads.of(ctx, stamp);
        // A message inside a poll whose enter the model still holds (its steps come at the
        // thread's next event) is in that instance.
        let held = match item {
            Item::Message(_) => self
                .model
                .as_ref()
                .and_then(|m| m.held_enter(ctx))
                .and_then(|e| {
                    let id = *e.args().first()?;
                    Some(((e.ctx >> 32) as u32, id))
                }),
            Item::Point { .. } => None,
        };
        let stack = self.stacks.get(&thread).map_or(&[][..], Vec::as_slice);
        let own = self
            .began
            .and_then(|key| stack.iter().rposition(|k| *k == key));
        let before = out.len();
        for (i, key) in stack.iter().chain(held.as_ref()).enumerate() {
            if Some(i) == own {
                continue;
            }
            if let Some(s) = self.open.get(key) {
                out.extend_from_slice(&s.text);
            }
        }
        if out.len() > before {
            out.push(b' ');
        }
    }

    /// Feeds `item`, the next in time order, to the model, and renders its steps: what it
    /// does to the instances and the threads (nothing before the horizon).
    pub fn step(&mut self, item: &Item<'_>) {
        self.began = None;
        if let Some(e) = self.recorded.take() {
            self.record(&e);
        }
        let Item::Point { event, .. } = item else {
            return;
        };
        if !self.any || event.stamp < self.horizon {
            return;
        }
        let tracepoint = event.type_word.tracepoint();
        let role = self.roles.get(tracepoint as usize).copied();
        if let (Some(role), Some(&id)) = (role, event.args().first()) {
            if role.is_span() {
                self.check_span(((event.ctx >> 32) as u32, id), tracepoint);
            }
        }
        if let Some(mut model) = self.model.take() {
            model.feed(event, &mut |step| self.render(step, event));
            self.model = Some(model);
        }
    }

    /// What the model's `step` does to the paths; `now` is the event fed.
    fn render(&mut self, step: Step<&Event>, now: &Event) {
        let key = |e: &Event| ((e.ctx >> 32) as u32, e.args().first().copied().unwrap_or(0));
        match step {
            Step::SpanNew(e) => {
                let mut fields = Vec::new();
                self.fields.set(e, &mut fields);
                let scope = self.scope(e.type_word.tracepoint(), Some(fields));
                self.open.insert(key(e), scope);
            }
            Step::SpanRecord(e) => self.recorded = Some(*e),
            Step::PollBegin(e) => {
                let k = key(e);
                if !self.open.contains_key(&k) {
                    // Its `new` is not in the trace (or is before the horizon): its name is
                    // its enter's, its fields unknown.
                    let scope = self.scope(e.type_word.tracepoint(), None);
                    self.open.insert(k, scope);
                }
                let thread = self.threads.of(e.ctx, e.stamp);
                self.stacks.entry(thread).or_default().push(k);
                *self.entered.entry(k).or_default() += 1;
                if e == now {
                    self.began = Some(k);
                }
            }
            Step::PollEnd { begin, .. } => {
                let k = key(begin);
                let thread = self.threads.of(begin.ctx, begin.stamp);
                let Some(stack) = self.stacks.get_mut(&thread) else {
                    return;
                };
                // Usually the innermost; `tracing` allows exits out of order.
                let Some(at) = stack.iter().rposition(|x| *x == k) else {
                    return;
                };
                stack.remove(at);
                if stack.is_empty() {
                    self.stacks.remove(&thread);
                }
                if let Some(n) = self.entered.get_mut(&k) {
                    *n -= 1;
                    if *n == 0 {
                        self.entered.remove(&k);
                    }
                }
            }
            // A thread still in it (its exit not recorded) is not in the next instance of
            // its id.
            Step::SpanEnd(i) | Step::SpanUnended { instance: i, .. } => {
                self.open.remove(&(i.pid, i.id));
                self.leave_everywhere((i.pid, i.id));
            }
            _ => {}
        }
    }

    /// Sets the fields the `record` `e` gives in the instance it is of.
    fn record(&mut self, e: &Event) {
        let key = ((e.ctx >> 32) as u32, e.args().first().copied().unwrap_or(0));
        if let Some(mut s) = self.open.remove(&key) {
            if let Some(f) = &mut s.fields {
                self.fields.set(e, f);
            }
            s = self.scope(s.tracepoint, s.fields);
            self.open.insert(key, s);
        }
    }

    /// Forgets what is open under `key`, and takes it off every stack, if it is another
    /// span's than `tracepoint`'s: this is a step of another instance, whose `new` was not
    /// recorded (its callsite off then), given the id of one whose close was not recorded.
    fn check_span(&mut self, key: (u32, u64), tracepoint: u16) {
        if !self.fits(key, tracepoint) {
            self.leave_everywhere(key);
            let scope = self.scope(tracepoint, None);
            self.open.insert(key, scope);
        }
    }

    /// Whether what is open under `key`, if anything, is an instance of `tracepoint`'s span.
    fn fits(&self, key: (u32, u64), tracepoint: u16) -> bool {
        self.open
            .get(&key)
            .is_none_or(|s| self.fields.same_span(s.tracepoint, tracepoint))
    }

    /// Takes instance `key` off every thread's stack.
    fn leave_everywhere(&mut self, key: (u32, u64)) {
        if self.entered.remove(&key).is_some() {
            self.stacks.retain(|_, stack| {
                stack.retain(|k| *k != key);
                !stack.is_empty()
            });
        }
    }

    fn scope(&self, tracepoint: u16, fields: Option<Vec<Field>>) -> PathScope {
        let mut text = Vec::new();
        self.fields.scope(&mut text, tracepoint, fields.as_deref());
        text.push(b':');
        PathScope {
            tracepoint,
            fields,
            text,
        }
    }
}

/// What a trace's events were and what it lost: the totals `dump`'s last line, `stats`,
/// and every export's summary show, counted the same way.
///
/// An *event* is a line of `dump`: a trace point (one or two ring entries) or a message
/// (an entry of the `info` tracepoint). Losses are counted in ring *entries* (64-byte
/// slots: an event of more than 5 arguments takes two), because an overwritten slot cannot
/// tell whose it was; *dropped* events are those writers found no free slot for; *strings
/// lost* are the string arguments and message texts of the events shown whose aux record
/// was overwritten before the copy (they show as `<lost>`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Trace points.
    pub points: u64,
    /// Messages (`ttrace_core::info`).
    pub messages: u64,
    /// Ring entries overwritten before they were read (including while reading).
    pub lost: u64,
    /// Events writers dropped.
    pub dropped: u64,
    /// Strings of the events counted that show as `<lost>`.
    pub strings_lost: u64,
    /// Ring entries left out as damaged (`devttrace::damage`: a field no writer of the
    /// device can have written, or a snapshot's damaged extent).
    pub damaged: u64,
    /// Events counted whose thread shows unnamed (`(?)`): no record names it at the
    /// event's time (its name was dropped, or evicted, from a full names area).
    pub unnamed: u64,
}

impl Tally {
    /// Trace points and messages.
    pub fn events(&self) -> u64 {
        self.points + self.messages
    }

    /// Adds the counts of `other`.
    pub fn add(&mut self, other: &Tally) {
        self.points += other.points;
        self.messages += other.messages;
        self.lost += other.lost;
        self.dropped += other.dropped;
        self.strings_lost += other.strings_lost;
        self.damaged += other.damaged;
        self.unnamed += other.unnamed;
    }

    /// Counts `item`.
    pub fn count(&mut self, item: &Item<'_>) {
        match item {
            Item::Point { .. } => self.points += 1,
            Item::Message(_) => self.messages += 1,
        }
    }

    /// Adds the losses of the rings of `view` that `filter` selects (once read: entries
    /// overwritten while reading are counted as they are found).
    pub fn losses(&mut self, view: &View<'_>, filter: &Filter) {
        for (ring, r) in view.cpus.iter().enumerate() {
            if filter.cpus.is_empty() || filter.cpus.contains(&ring) {
                self.lost += r.lost;
                self.dropped += r.dropped;
                self.damaged += r.damaged;
            }
        }
    }

    /// `298 events (290 trace points, 8 messages); 6 entries lost, 0 events dropped, 2
    /// strings lost` (and `, 3 events of unnamed threads`, `, 2 entries damaged` where
    /// some were).
    pub fn line(&self) -> String {
        let mut line = format!(
            "{} events ({} trace points, {} messages); {} entries lost, {} events dropped, {} strings lost",
            self.events(),
            self.points,
            self.messages,
            self.lost,
            self.dropped,
            self.strings_lost
        );
        if self.unnamed > 0 {
            line += &format!(", {} events of unnamed threads", self.unnamed);
        }
        if self.damaged > 0 {
            line += &format!(", {} entries damaged", self.damaged);
        }
        line
    }
}

/// What was read of the rings, as far as the header line needs it: which processes wrote
/// the events.
pub trait Writers {
    /// The process ids of the events read, each once, and whether there were more than
    /// listed (`devttrace::RingSnapshot::writers`).
    fn writers(&self) -> (Vec<u32>, bool);
}

/// The writers of `rings` (each [`devttrace::RingSnapshot::writers`], merged).
pub(crate) fn writers_of<'a, T: 'a>(
    rings: impl IntoIterator<Item = &'a devttrace::RingSnapshot<T>>,
) -> (Vec<u32>, bool) {
    let (mut pids, mut more) = (Vec::new(), false);
    for r in rings {
        pids.extend_from_slice(&r.writers);
        more |= r.writers_more;
    }
    pids.sort_unstable();
    pids.dedup();
    (pids, more)
}

impl Writers for Snapshot {
    fn writers(&self) -> (Vec<u32>, bool) {
        writers_of(&self.cpus)
    }
}

impl Writers for View<'_> {
    fn writers(&self) -> (Vec<u32>, bool) {
        writers_of(&self.cpus)
    }
}

/// How many writing processes the header line names.
const HEADER_WRITERS: usize = 8;

/// `written by 4242 (server), 4250 (worker)`: the processes whose events were read, each
/// with the latest name recorded for its id, or `no events` (and ` since the clear`).
fn written_by(ctx: &Context<'_>, (pids, more): (Vec<u32>, bool)) -> String {
    let cleared = if ctx.status.clears > 0 {
        " since the clear"
    } else {
        ""
    };
    if pids.is_empty() {
        return format!("no events{cleared}");
    }
    let name = |pid: u32| {
        ctx.meta
            .processes
            .iter()
            .rev()
            .find(|p| p.pid == pid)
            .map_or("?", |p| p.name.as_str())
    };
    let mut s = format!("written{cleared} by ");
    for (k, &pid) in pids.iter().take(HEADER_WRITERS).enumerate() {
        if k > 0 {
            s += ", ";
        }
        s += &format!("{pid} ({})", name(pid));
    }
    let rest = pids.len().saturating_sub(HEADER_WRITERS);
    if rest > 0 || more {
        s += &format!(" and {}{rest} more", if more { "at least " } else { "" });
    }
    s
}

/// The header line of a dump: the device's facts, and the processes that wrote the events.
pub fn header_line<'s, S: Writers + ?Sized>(source: &'s S) -> String
where
    &'s S: Into<Context<'s>>,
{
    let ctx: Context<'s> = source.into();
    let writers = written_by(&ctx, source.writers());
    let v = ctx.version;
    let clock = match v.clock.source {
        ttrace_layouts::device::ClockSource::Tsc => {
            format!("tsc {:.3} MHz", v.clock.hz as f64 / 1e6)
        }
        ttrace_layouts::device::ClockSource::MonotonicNs => "monotonic ns".to_string(),
    };
    let switches = match ctx.status.switches.line() {
        Some(line) => format!("; {line}"),
        None => String::new(),
    };
    format!(
        "# ttrace {}: {} cpus x {} slots, aux {} KiB, {} tracepoints, clock {clock}, created {} by pid {}; {writers}{switches}",
        ctx.dir.display(),
        v.num_cpus,
        v.ring_slots,
        v.aux_size >> 10,
        ctx.meta.tracepoints.len(),
        utc(v.clock.anchor_realtime_ns),
        v.creator_pid,
    )
}

/// Whether the footer shows ring `ring` (of a device of `num_cpus` CPUs): one `filter`
/// selects, and, for a shared ring, only one that was written to (a process without
/// restartable sequences, or a CPU id beyond the device's).
pub fn shown<T>(
    ring: usize,
    r: &devttrace::RingSnapshot<T>,
    num_cpus: u32,
    filter: &Filter,
) -> bool {
    (filter.cpus.is_empty() || filter.cpus.contains(&ring))
        && (ring < num_cpus as usize || r.head > 0 || r.dropped > 0)
}

/// The counts of one ring, named `name`, as the footer, `stats` and the Chrome export show
/// them: its events (as many as `dump` shows of it, with no filter) and the ring entries
/// they take, entries lost and incomplete, events dropped (see [`Tally`]).
pub fn ring_counts<T>(name: &str, r: &devttrace::RingSnapshot<T>) -> String {
    let mut s = format!(
        "{name}: {} events ({} entries), {} entries lost, {} incomplete, {} events dropped",
        r.events.len() as u64,
        r.committed,
        r.lost,
        r.claimed,
        r.dropped
    );
    if r.older > 0 {
        s += &format!(", {} events older than --since", r.older);
    }
    if r.orphans > 0 {
        s += &format!(", {} orphaned continuations", r.orphans);
    }
    if r.malformed > 0 {
        s += &format!(", {} malformed", r.malformed);
    }
    if r.damaged > 0 {
        s += &format!(", {} entries damaged", r.damaged);
    }
    if r.after_cut > 0 {
        s += &format!(", {} written while reading", r.after_cut);
    }
    if r.cleared > 0 {
        s += &format!(", {} cleared", r.cleared);
    }
    s
}

/// What a reader says, one line each, of the damaged extents of the snapshot file `dev`
/// reads (none for a device or an intact file): `snapshot FILE: extent 7 (ring cpu1,
/// slots 128..192) is damaged; its bytes were left out, the rest is read`.
pub fn damaged_extents(dev: &devttrace::Reader) -> Vec<String> {
    dev.damaged_extents()
        .iter()
        .map(|d| {
            format!(
                "snapshot {}: {d} is damaged; its bytes were left out, the rest is read",
                dev.dir().display()
            )
        })
        .collect()
}

/// The aux line of the footer.
pub fn aux_line<'s>(ctx: impl Into<Context<'s>>) -> String {
    let ctx = ctx.into();
    if let Some(e) = ctx.aux_error {
        return format!("# aux: not copied ({e}): strings show as <lost>");
    }
    format!(
        "# aux: {} records kept, {} incomplete, {} dropped{}",
        ctx.aux.records().count(),
        ctx.aux.incomplete(),
        ctx.status.aux_dropped,
        if ctx.aux.corrupt() {
            ", walk stopped at a damaged record"
        } else {
            ""
        }
    )
}

/// `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ` for nanoseconds since the Unix epoch.
pub fn utc(ns: u64) -> String {
    let t = crate::calendar::Utc::of(ns);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}Z",
        t.year, t.month, t.day, t.hour, t.minute, t.second, t.nanos
    )
}

/// `ticks` of `clock` as seconds since the device was created, to the nanosecond
/// (`12.000345000`, `-0.000000100`): the time `stats` and footers show.
pub fn seconds(clock: &Clock, ticks: u64) -> String {
    let ns = clock.since_anchor_ns(ticks);
    format!(
        "{}{}.{:09}",
        if ns < 0 { "-" } else { "" },
        ns.unsigned_abs() / 1_000_000_000,
        ns.unsigned_abs() % 1_000_000_000
    )
}

/// Parses seconds as the time column shows them (`12.000345`, `3`), exactly, to ns.
pub fn parse_seconds(s: &str) -> Option<i64> {
    let (neg, s) = s.strip_prefix('-').map_or((false, s), |r| (true, r));
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() && frac.is_empty() || frac.len() > 9 {
        return None;
    }
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || !digits(frac) {
        return None;
    }
    let secs: i64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let nanos: i64 = format!("{frac:0<9}").parse().ok()?;
    let ns = secs.checked_mul(1_000_000_000)?.checked_add(nanos)?;
    Some(if neg { -ns } else { ns })
}

/// Parses a UTC time as [`utc`] writes it (`2026-11-22T15:47:37.581Z`: the fraction may be
/// shorter or absent, the `Z` left out, a space stand for the `T`) to nanoseconds since the
/// Unix epoch (negative before it); `None` for anything else or a date that does not exist.
pub fn parse_utc(s: &str) -> Option<i128> {
    let s = s.strip_suffix(['Z', 'z']).unwrap_or(s);
    let (date, time) = s.split_once(['T', 't', ' '])?;
    let num = |t: &str, len: usize| -> Option<i64> {
        (t.len() == len && t.bytes().all(|b| b.is_ascii_digit()))
            .then(|| t.parse().ok())
            .flatten()
    };
    let mut d = date.split('-');
    let (y, m, day) = (num(d.next()?, 4)?, num(d.next()?, 2)?, num(d.next()?, 2)?);
    let (hms, frac) = match time.split_once('.') {
        Some((_, "")) => return None,
        Some(parts) => parts,
        None => (time, ""),
    };
    let mut t = hms.split(':');
    let (hh, mm, ss) = (num(t.next()?, 2)?, num(t.next()?, 2)?, num(t.next()?, 2)?);
    if d.next().is_some() || t.next().is_some() || frac.len() > 9 {
        return None;
    }
    let nanos = match frac {
        "" => 0,
        f => num(f, f.len())? * 10i64.pow(9 - f.len() as u32),
    };
    let (m, day) = (m as u32, day as u32);
    if !(1..=12).contains(&m) || day < 1 || day > crate::calendar::days_in_month(y, m) {
        return None;
    }
    if hh > 23 || mm > 59 || ss > 59 {
        return None;
    }
    let days = crate::calendar::days_from_civil(y, m, day);
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    Some(secs as i128 * 1_000_000_000 + nanos as i128)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_utc_reads_what_utc_writes() {
        for ns in [
            0,
            951_782_400_000_000_000,
            1_700_000_000_123_456_789,
            4_102_444_799_999_999_999,
        ] {
            assert_eq!(parse_utc(&utc(ns)), Some(ns as i128), "{}", utc(ns));
        }
        assert_eq!(
            parse_utc("2026-11-22T15:47:37.581Z"),
            parse_utc("2026-11-22 15:47:37.581000000")
        );
        assert_eq!(parse_utc("1970-01-01T00:00:01"), Some(1_000_000_000));
        assert_eq!(parse_utc("1969-12-31T23:59:59Z"), Some(-1_000_000_000));
        for bad in [
            "",
            "2026-11-22",
            "2026-02-30T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-11-22T24:00:00Z",
            "2026-11-22T15:47:37.1234567890Z",
            "2026-11-22T15:47Z",
            "2026-11-22T15:47:37.Z",
            "2026-11-22T15:47:37+01:00",
            "26-11-22T15:47:37Z",
            "2026-11-22T15:47:3x",
        ] {
            assert_eq!(parse_utc(bad), None, "{bad}");
        }
    }

    #[test]
    fn utc_formats_known_instants() {
        assert_eq!(utc(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(
            utc(1_700_000_000_123_456_789),
            "2023-11-14T22:13:20.123456789Z"
        );
        assert_eq!(
            utc(951_782_400_000_000_000),
            "2000-02-29T00:00:00.000000000Z"
        );
    }

    #[test]
    fn seconds_parse_exactly() {
        assert_eq!(parse_seconds("1.5"), Some(1_500_000_000));
        assert_eq!(parse_seconds("0.000000001"), Some(1));
        assert_eq!(parse_seconds("12"), Some(12_000_000_000));
        assert_eq!(parse_seconds(".25"), Some(250_000_000));
        assert_eq!(parse_seconds("-0.5"), Some(-500_000_000));
        for bad in ["", ".", "1.2.3", "1e3", "0.0000000001", "x"] {
            assert_eq!(parse_seconds(bad), None, "{bad}");
        }
    }
}
