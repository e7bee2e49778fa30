//! A uftrace data directory, for `uftrace replay`, `report`, `dump`, `graph` and `info`
//! (checked against uftrace 0.13).
//!
//! - Each tracepoint is a "function" of a module `/ttrace/tracepoints` whose symbol file
//!   (`tracepoints.sym`) names it: the tracepoint with id `i` is at offset `0x10 * (i + 1)`;
//!   its point function (below) follows those of all `n` tracepoints, at `0x10 * (n + i + 1)`.
//! - The records render the model's steps ([`ttrace_model::model`]): an entry that begins
//!   a call is an ENTRY record at its thread's depth, the exit the model closes it with an
//!   EXIT record of the same function and depth; a poll of a `tracing` span (an enter and
//!   its exit) likewise, as a call of the enter's tracepoint. An exit whose partner is
//!   missing is an EXIT at depth 0 of its own tracepoint. Entries and exits before the
//!   horizon, which cannot be paired, are calls of their point functions, and so is the
//!   drop re-entry, which is no poll. uftrace has no place for why an event is unpaired.
//! - An ENTRY record carries its entry's arguments, typed from the format string, as the
//!   `argspec` in `info` describes them (`uftrace replay` shows `file_open("/etc/hosts",
//!   0x8000, -25)`; an argument shown with a value table is the string of its names); not
//!   for a name uftrace would read as a pattern (other characters than letters, digits, `_`
//!   and `:`), nor for an event whose continuation was lost. Strings share 960 bytes per
//!   event: uftrace 0.13 crashes on much more.
//! - An EXIT record carries its exit's arguments as a return value (`retspec`), one string
//!   as `dump` shows the exit: `} = "read_done(fd=3 bytes=4096)"; /* read */`. uftrace
//!   has one return value per function, and an exit tracepoint may close several entries.
//! - Other trace points, messages, and entries and exits before the horizon are calls of
//!   *point functions*, one per tracepoint, `ttrace:<name>` (`ttrace:info` for messages,
//!   `ttrace:unknown` for tracepoints the metadata does not know):
//!   an ENTRY and an EXIT record at the event's time and its thread's depth, the EXIT
//!   returning the event's text as `dump` shows it (`uftrace replay` shows
//!   `ttrace:tick() = "tick(n=7)";`). A text is data of its own thread's records, so uftrace
//!   shows it on that thread whatever it reads and skips. Not user events with their text in
//!   `extern.dat` (before): uftrace reads no data with a user event, and gives an external
//!   data line to the thread whose record it consumed last, which is another thread's when
//!   `replay` skipped the event (an event outside any function, `--event-full` not given)
//!   while looking ahead past an entry of that other thread.
//! - uftrace names a thread by its process's executable (`task.txt` has no names) unless
//!   perf data renames it: `perf-cpu0.dat` holds a `PERF_RECORD_COMM` for each thread (and
//!   each renaming) just before its first event, with the thread's name (cut to 15 bytes,
//!   the kernel's limit) as it was then. `uftrace replay` shows it as an event
//!   (`/* linux:task-name (comm="worker-1") */`) and in its `task` field
//!   (`uftrace replay -f +task`), `uftrace report --task` and `uftrace info --task` too.
//! - The entries a ring lost are a LOST record, in the stream of the first thread seen on
//!   that ring, before its first event.
//! - Times are nanoseconds since the device was created, as `dump` shows them; one process
//!   is one session (`sid-<pid>.map`), one thread one `<tid>.dat` of 16-byte records.
//! - Every entry and exit of a pair is one record (ENTRY or EXIT), every other trace point
//!   and message one call (two records).
//!
//! **On every core.** The model's steps come in parts ([`super::pipeline::walk_in_parts`]),
//! each formatted by a worker of its own, the records of each thread appended to its file
//! in order. A record's depth depends on the records before it, so a part writes each with
//! its depth as a function of the depth its thread began the part at (`Depth`), and the
//! caller settles it once the parts before have set that depth. The files are the same on
//! one core or many.
//!
//! The layout of the files is uftrace's `info` header and text sections, `task.txt`,
//! `/proc/<pid>/maps`-style map files, `nm`-style symbol files, `struct uftrace_record`
//! (see uftrace's `uftrace.h`) and perf's `struct perf_event_header` records
//! (`utils/perf.h`).

use super::pipeline::Walked;
use super::{Identities, Schema, Written};
use crate::decode::{Context, Decoder, TimeFormat};
use crate::format::Spec;
use crate::merge::{Item, Merge};
use devttrace::{AuxSnapshots, Clock, Event, Mark, RingSnapshot, Role};
use foldhash::HashMap as FoldHashMap;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use ttrace_layouts::entry::Kind;
use ttrace_model::model::{Model, Step, Why};

/// Record types.
const ENTRY: u64 = 0;
const EXIT: u64 = 1;
const LOST: u64 = 2;
/// `RECORD_MAGIC` of the version 4 format.
const MAGIC: u64 = 5;
/// Where the tracepoint module is mapped.
const MAP_START: u64 = 0x40_0000;
/// Bytes buffered per thread before they are appended to its file.
const FLUSH: usize = 1 << 16;
/// The `more` bit of a record word: argument data follows the record.
const MORE: u64 = 1 << 2;
/// Feature bit: records may carry arguments.
const FEAT_ARGUMENT: u64 = 1 << 3;
/// Feature bit: exit records may carry return values.
const FEAT_RETVAL: u64 = 1 << 4;
/// Feature bit: perf event data (`perf-cpu*.dat`).
const FEAT_PERF_EVENT: u64 = 1 << 8;
/// `PERF_RECORD_COMM`: a task's name.
const PERF_RECORD_COMM: u32 = 3;
/// The bytes of a task name uftrace keeps, its NUL included (`TASK_COMM_LEN`).
const COMM_LEN: usize = 16;
/// Info bit: the `argspec` section, which says how to read them.
const INFO_ARG_SPEC: u64 = 1 << 10;
/// String bytes one entry's arguments may carry in all: `uftrace replay` 0.13 overruns a
/// buffer (and crashes) past about 2 KiB of argument data.
const STRING_BUDGET: usize = 960;

/// The 16-byte record.
fn record(out: &mut Vec<u8>, ns: u64, kind: u64, depth: usize, addr: u64) {
    let word = kind | MAGIC << 3 | (depth.min(1023) as u64) << 6 | (addr & ((1 << 48) - 1)) << 16;
    out.extend_from_slice(&ns.to_le_bytes());
    out.extend_from_slice(&word.to_le_bytes());
}

/// The argument type uftrace reads for `spec`.
fn arg_type(spec: &Spec) -> &'static str {
    match spec {
        Spec::Unsigned | Spec::Bool | Spec::Char => "u64",
        Spec::Signed => "i64",
        Spec::Hex => "x64",
        Spec::Float => "f64",
        // A value table's names, as `dump` shows them.
        Spec::Str | Spec::Values { .. } => "s",
    }
}

/// Whether uftrace's argspec can name `name`: it matches other characters (`.`, `-`, `$`
/// ...) as patterns, and then finds no spec for the function.
fn spec_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(spec_char)
}

/// Whether uftrace's argspec takes `c` literally.
fn spec_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// What the records of each tracepoint carry, and the `info` sections that say so.
struct Specs {
    /// The `argspec` line (`name@arg1/u64,...` joined by `;`), empty if none.
    args: String,
    /// The `retspec` line (`name@retval/s;...`), empty if none.
    rets: String,
    /// By tracepoint id: whether its entries' records carry their arguments.
    with_args: Vec<bool>,
    /// By tracepoint id: whether an EXIT record at its address may carry a return value.
    with_ret: Vec<bool>,
}

/// The argument and return value specs of `schemas` and of the point functions `points`: an
/// entry's arguments are its own; the return value of an entry's function (or of an exit's,
/// for an exit with no entry) is the text of the exit that closed it, where an exit has
/// arguments to show; a point function's is the point's text.
fn specs(schemas: &[Schema], points: &[String]) -> Specs {
    // uftrace merges the specs of one name: a name two tracepoints share gets none.
    let mut uses: HashMap<&str, usize> = HashMap::new();
    for s in schemas {
        *uses.entry(&s.name).or_default() += 1;
    }
    let named = |s: &Schema| spec_name(&s.name) && uses[s.name.as_str()] == 1;
    let exit_args = schemas
        .iter()
        .any(|s| s.kind == Kind::Exit && !s.args.is_empty());
    let (mut args, mut rets) = (Vec::new(), Vec::new());
    let mut with_args = Vec::with_capacity(schemas.len());
    let mut with_ret = Vec::with_capacity(schemas.len());
    for s in schemas {
        let entry = s.kind == Kind::Entry && named(s);
        if entry && !s.args.is_empty() {
            let list: Vec<String> = s
                .args
                .iter()
                .enumerate()
                .map(|(i, (_, spec))| format!("arg{}/{}", i + 1, arg_type(spec)))
                .collect();
            args.push(format!("{}@{}", s.name, list.join(",")));
        }
        with_args.push(entry && !s.args.is_empty());
        let ret = (entry && exit_args) || (s.kind == Kind::Exit && named(s) && !s.args.is_empty());
        if ret {
            rets.push(format!("{}@retval/s", s.name));
        }
        with_ret.push(ret);
    }
    rets.extend(points.iter().map(|p| format!("{p}@retval/s")));
    Specs {
        args: args.join(";"),
        rets: rets.join(";"),
        with_args,
        with_ret,
    }
}

/// Appends `bytes` as uftrace reads a string argument: a `u16` length, the bytes (up to
/// the first NUL, at most `share` of them, cut with `...`), zeros to 4 bytes from `start`.
fn put_string(out: &mut Vec<u8>, start: usize, bytes: &[u8], share: usize) {
    // A C string for uftrace: up to the first NUL.
    let bytes = &bytes[..bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len())];
    let (kept, cut) = shorten(bytes, share);
    let len = kept.len() + if cut { 3 } else { 0 };
    out.extend_from_slice(&(len as u16).to_le_bytes());
    out.extend_from_slice(kept);
    if cut {
        out.extend_from_slice(b"...");
    }
    out.resize(start + (out.len() - start).next_multiple_of(4), 0);
}

/// `bytes`, or its first bytes (not cutting a UTF-8 sequence) and `true` if it is longer
/// than `max` (room left for `...`).
fn shorten(bytes: &[u8], max: usize) -> (&[u8], bool) {
    if bytes.len() <= max {
        return (bytes, false);
    }
    let mut end = max.saturating_sub(3);
    // Not inside a UTF-8 sequence.
    while end > 0 && bytes[end] & 0xc0 == 0x80 {
        end -= 1;
    }
    (&bytes[..end], true)
}

/// Appends the arguments of `event` as uftrace reads them after a record with [`MORE`], in
/// the order of its argspec: integers in 8 bytes, a string (and the names of a value
/// table) as [`put_string`] writes it, sharing [`STRING_BUDGET`] (`<lost>` if overwritten);
/// all padded to 8 bytes.
fn arguments(out: &mut Vec<u8>, event: &Event, schema: &Schema, aux: &AuxSnapshots) {
    let strings = schema
        .args
        .iter()
        .filter(|(_, s)| arg_type(s) == "s")
        .count();
    let share = STRING_BUDGET / strings.max(1);
    let start = out.len();
    let mut names = Vec::new();
    for (&w, (_, spec)) in event.args().iter().zip(&schema.args) {
        match spec {
            Spec::Str => {
                let bytes: &[u8] = crate::format::string_arg(aux, w).map_or(b"<lost>", |r| r.bytes);
                put_string(out, start, bytes, share);
            }
            Spec::Values { .. } => {
                names.clear();
                crate::format::word(&mut names, spec, w, aux);
                put_string(out, start, &names, share);
            }
            _ => out.extend_from_slice(&w.to_le_bytes()),
        }
    }
    out.resize(start + (out.len() - start).next_multiple_of(8), 0);
}

/// Appends `text` as a string return value after a record with [`MORE`].
fn return_value(out: &mut Vec<u8>, text: &[u8]) {
    let start = out.len();
    put_string(out, start, text, STRING_BUDGET);
    out.resize(start + (out.len() - start).next_multiple_of(8), 0);
}

fn addr(tracepoint: impl Into<u64>) -> u64 {
    MAP_START + 0x10 * (tracepoint.into() + 1)
}

/// The address of point function `k` (see [`point_names`]) of a trace of `n` tracepoints:
/// after the tracepoints' own.
fn point_addr(n: usize, k: usize) -> u64 {
    addr((n + k) as u64)
}

/// The names of the point functions: per tracepoint id `ttrace:<name>`, then messages'
/// (`ttrace:info`) and that of tracepoints the metadata does not know (`ttrace:unknown`).
/// A name keeps only what uftrace's specs take literally (letters, digits, `_`, `:`), and
/// is made unique among these and the tracepoints' names (uftrace merges the specs of one
/// name). A span's steps other than its enter and exit are named with the step
/// (`ttrace:app::handle_new`, `_close`).
fn point_names(schemas: &[Schema]) -> Vec<String> {
    let mut taken: HashSet<String> = schemas.iter().map(|s| s.name.clone()).collect();
    let wanted: Vec<String> = (schemas.iter().map(|s| match s.role.label() {
        Some(step) if s.role.is_span() => format!("{}_{step}", s.name),
        _ => s.name.clone(),
    }))
    .chain(["info".to_string(), "unknown".to_string()])
    .collect();
    // The messages' name is made first: the `info` tracepoint's own function is never
    // called (its events are the messages), so it is the one made unique.
    let n = schemas.len();
    let mut names = vec![String::new(); wanted.len()];
    for i in [n].into_iter().chain(0..n).chain([n + 1]) {
        let base: String = "ttrace:"
            .chars()
            .chain(
                wanted[i]
                    .chars()
                    .map(|c| if spec_char(c) { c } else { '_' }),
            )
            .collect();
        let name = super::unique(&base, |n| taken.contains(n));
        taken.insert(name.clone());
        names[i] = name;
    }
    names
}

/// A thread's depth (the ENTRY records it has open in the output) as a function of its depth
/// where a part began, `d`: `max(d + add, floor)`. An ENTRY adds one; an EXIT takes one
/// off, down to 0 at most: `max(max(d + a, b) - 1, 0) = max(d + a - 1, max(b - 1, 0))`, the
/// same form, so a part's records can be written before the depth it began at is known
/// (from the parts before it), and settled once it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Depth {
    add: i64,
    floor: i64,
}

impl Depth {
    /// After an ENTRY record.
    fn enter(self) -> Depth {
        Depth {
            add: self.add + 1,
            floor: self.floor + 1,
        }
    }

    /// After an EXIT record that closes one.
    fn leave(self) -> Depth {
        Depth {
            add: self.add - 1,
            floor: (self.floor - 1).max(0),
        }
    }

    /// The depth, the part having begun at depth `base`.
    fn at(self, base: usize) -> usize {
        (base as i64 + self.add).max(self.floor) as usize
    }
}

/// A thread's records of one part, their depths relative to the depth it began at.
#[derive(Default)]
struct Stream {
    bytes: Vec<u8>,
    /// The thread's depth now.
    depth: Depth,
    /// The records at the thread's depth: where each is, and that depth.
    depths: Vec<(usize, Depth)>,
}

impl Stream {
    /// A record at the thread's depth (ENTRY or EXIT) of `kind`, at `ns`, of `addr`.
    fn record(&mut self, ns: u64, kind: u64, addr: u64) {
        self.depths.push((self.bytes.len(), self.depth));
        record(&mut self.bytes, ns, kind, 0, addr);
    }

    /// Writes each record's depth, the part having begun at depth `base`; returns the depth
    /// it ends at.
    fn settle(&mut self, base: usize) -> usize {
        for &(at, depth) in &self.depths {
            let field = &mut self.bytes[at + 8..at + 16];
            let word = u64::from_le_bytes(field.try_into().expect("8 bytes"));
            let depth = depth.at(base).min(1023) as u64;
            field.copy_from_slice(&(word & !(1023 << 6) | depth << 6).to_le_bytes());
        }
        self.depth.at(base)
    }
}

/// The streams of a part, by thread (its tid as uftrace shows it).
type Buffers = FoldHashMap<u64, Stream>;

/// What a part of the walk gave: each thread's records, and what the files beside them need.
#[derive(Default)]
struct Part<'s> {
    streams: Buffers,
    written: Written,
    /// Per thread: its pid, its first and last time in the part.
    times: FoldHashMap<u64, (u64, u64, u64)>,
    /// Each process's first name in the part.
    processes: Vec<(u64, &'s str)>,
    /// Each thread's name where the part first shows it, and each change after (`t`, pid,
    /// tid, name): a renaming unless the thread had the name already.
    names: Vec<(u64, u64, u64, &'s str)>,
    /// The rings whose first item was in the part.
    rings: Vec<usize>,
}

/// Formats parts of the walk (a worker's own).
struct Worker<'s, 'a> {
    p: Points<'s, 'a>,
    /// Entries each ring lost (of a ring exported).
    lost: &'a [u64],
    /// Per ring, whether an item of it was read, in the part or before; the processes the
    /// part named.
    read: Vec<bool>,
    named: foldhash::HashSet<u64>,
    /// Each thread's name as the part last showed it.
    thread_names: FoldHashMap<u64, &'s str>,
    /// The thread (its uftrace tid) and time of the item last walked.
    at: (u64, u64),
    /// What the part gave so far.
    out: Part<'s>,
    /// The records of each thread the last part wrote to (bytes, and records at its
    /// depth): the next part's buffers start that large, rather than grow.
    sizes: Vec<(u64, usize, usize)>,
}

impl<'s> super::pipeline::Parts<'s> for Worker<'s, '_> {
    type Out = Part<'s>;

    fn begin(&mut self, _: usize, rings_before: &[bool]) {
        self.out = Part::default();
        for &(tid, bytes, depths) in &self.sizes {
            // A little more, for a part a little longer.
            let stream = Stream {
                bytes: Vec::with_capacity(bytes + bytes / 4),
                depth: Depth::default(),
                depths: Vec::with_capacity(depths + depths / 4),
            };
            self.out.streams.insert(tid, stream);
        }
        self.read.clear();
        self.read
            .extend((0..self.lost.len()).map(|r| rings_before.get(r) == Some(&true)));
        self.named.clear();
        self.thread_names.clear();
    }

    fn walked(&mut self, walked: Walked<'_, 's>) {
        let (p, out) = (&mut self.p, &mut self.out);
        let (ring, who, stamp) = match walked {
            Walked::Point { cpu, event } => (cpu, event.ctx, event.stamp),
            Walked::Message(r) => (r.cpu as usize, r.ctx, r.timestamp),
            // What is open at the end writes nothing: it is counted.
            Walked::Step { step, fed, .. } => {
                let now = fed.map(|event| Now {
                    event,
                    tid: self.at.0,
                    t: self.at.1,
                });
                p.step(&step, &mut out.streams, now.as_ref());
                return;
            }
            Walked::Fed(_) => return,
        };
        let id = p.identities.of(who, stamp);
        let (pid, tid) = (id.pid, id.tid);
        if let Some(name) = id.process {
            if self.named.insert(pid) {
                out.processes.push((pid, name));
            }
        }
        let t = p.clock.since_anchor_ns(stamp).max(0) as u64;
        self.at = (tid, t);
        out.times.entry(tid).or_insert((pid, t, t)).2 = t;
        if let Some(name) = id.thread {
            if self.thread_names.insert(tid, name) != Some(name) {
                out.names.push((t.saturating_sub(1), pid, tid, name));
            }
        }
        // A ring's losses before its first item (its first in the walk).
        if let Some(read) = self.read.get_mut(ring).filter(|read| !**read) {
            *read = true;
            out.rings.push(ring);
            if self.lost[ring] > 0 {
                let bytes = &mut out.streams.entry(tid).or_default().bytes;
                record(bytes, t, LOST, 0, self.lost[ring]);
            }
        }
        match walked {
            Walked::Message(m) => {
                let stream = out.streams.entry(tid).or_default();
                p.call(stream, t, p.schemas.len(), &Item::Message(*m));
                p.written.walked(true);
            }
            _ => p.written.walked(false),
        }
    }

    fn end(&mut self) -> Part<'s> {
        let mut out = std::mem::take(&mut self.out);
        out.streams.retain(|_, s| !s.bytes.is_empty());
        self.sizes.clear();
        let sizes = (out.streams.iter()).map(|(&tid, s)| (tid, s.bytes.len(), s.depths.len()));
        self.sizes.extend(sizes);
        out.written = std::mem::take(&mut self.p.written);
        out
    }
}

/// Per-thread record streams, appended to their files in blocks.
struct Streams<'d> {
    dir: &'d Path,
    /// Each thread's records not yet appended, and its depth after them.
    buffers: FoldHashMap<u64, (Vec<u8>, usize)>,
}

impl Streams<'_> {
    /// Appends the records of `tid` not yet written to its file.
    fn flush(&mut self, tid: u64) -> std::io::Result<()> {
        let Some((buf, _)) = self.buffers.get_mut(&tid) else {
            return Ok(());
        };
        let path = self.dir.join(format!("{tid}.dat"));
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        f.write_all(buf)?;
        buf.clear();
        Ok(())
    }

    /// Appends a part's records of `tid`, their depths settled from the depth the thread
    /// was at; writes them out once [`FLUSH`] bytes wait.
    fn append(&mut self, tid: u64, mut part: Stream) -> std::io::Result<()> {
        let (buf, depth) = self.buffers.entry(tid).or_default();
        *depth = part.settle(*depth);
        buf.extend_from_slice(&part.bytes);
        match buf.len() >= FLUSH {
            true => self.flush(tid),
            false => Ok(()),
        }
    }
}

/// Writes the items of `ctx` (merged by `items`) as a uftrace data directory `dir`
/// (created; it must not exist or be empty).
pub fn write(
    ctx: Context<'_>,
    rings: &[RingSnapshot<Mark>],
    items: Merge<'_>,
    dir: &Path,
    progress: impl FnMut(u64),
) -> std::io::Result<Written> {
    write_on(ctx, rings, items, dir, progress, super::pipeline::workers())
}

/// [`write()`], formatted in parts on `workers` threads for a long trace, the merge and the
/// model on a thread of their own ([`super::pipeline::walk_in_parts`]; [`write()`] takes
/// [`super::pipeline::workers()`]), or all on the calling thread (0): the same files.
pub fn write_on(
    ctx: Context<'_>,
    rings: &[RingSnapshot<Mark>],
    items: Merge<'_>,
    dir: &Path,
    mut progress: impl FnMut(u64),
    workers: usize,
) -> std::io::Result<Written> {
    std::fs::create_dir_all(dir)?;
    let schemas = Schema::all(ctx.meta);
    let mut streams = Streams {
        dir,
        buffers: FoldHashMap::default(),
    };
    // pid, first and last time of each thread.
    let mut thread_times: BTreeMap<u64, (u64, u64, u64)> = BTreeMap::new();
    let mut process_names: FoldHashMap<u64, String> = FoldHashMap::default();
    // Each thread's name as last given to uftrace, and the records that give them.
    let mut thread_names: FoldHashMap<u64, &str> = FoldHashMap::default();
    let mut comms = Vec::new();
    let lost: Vec<u64> = (rings.iter().enumerate())
        .map(|(ring, r)| if items.selects_ring(ring) { r.lost } else { 0 })
        .collect();
    let mut read = vec![false; lost.len()];
    let points = point_names(&schemas);
    let specs = specs(&schemas, &points);
    let new = || Points {
        schemas: &schemas,
        points: &points,
        specs: &specs,
        aux: ctx.aux,
        decoder: Decoder::new(ctx, TimeFormat::Relative),
        identities: Identities::new(ctx.meta),
        clock: ctx.version.clock,
        written: Written::default(),
        text: Vec::new(),
    };
    let model = Model::new(ctx.meta, rings);
    let mut written = Written::default();
    written.losses(rings, &items);
    let strings_lost = super::pipeline::walk_in_parts(
        items,
        model,
        workers,
        || Worker {
            p: new(),
            lost: &lost,
            read: Vec::new(),
            named: foldhash::HashSet::default(),
            thread_names: FoldHashMap::default(),
            at: (0, 0),
            out: Part::default(),
            sizes: Vec::new(),
        },
        |part| {
            written.add(&part.written);
            for (tid, (pid, first, last)) in part.times {
                thread_times.entry(tid).or_insert((pid, first, last)).2 = last;
            }
            for (pid, name) in part.processes {
                process_names.entry(pid).or_insert_with(|| name.to_string());
            }
            for (t, pid, tid, name) in part.names {
                if thread_names.insert(tid, name) != Some(name) {
                    comm(&mut comms, t, pid, tid, name);
                }
            }
            for ring in part.rings {
                read[ring] = true;
            }
            for (tid, stream) in part.streams {
                streams.append(tid, stream)?;
            }
            progress(written.events);
            Ok::<(), std::io::Error>(())
        },
    )?;
    written.strings_lost = strings_lost;
    // Losses of rings none of whose events are exported: at the end of the first thread's
    // stream (uftrace has no other place for them; with no thread at all there is no trace).
    let unreported: u64 = (lost.iter().zip(&read))
        .filter(|(_, &read)| !read)
        .map(|(n, _)| n)
        .sum();
    if let (true, Some((&tid, &(_, _, t)))) = (unreported > 0, thread_times.iter().next()) {
        let (buf, _) = streams.buffers.entry(tid).or_default();
        record(buf, t, LOST, 0, unreported);
    }
    let mut tids: Vec<u64> = streams.buffers.keys().copied().collect();
    tids.sort_unstable();
    for tid in tids {
        streams.flush(tid)?;
    }
    if !comms.is_empty() {
        std::fs::write(dir.join("perf-cpu0.dat"), &comms)?;
    }
    files(
        dir,
        &ctx,
        &new(),
        &thread_times,
        &process_names,
        !comms.is_empty(),
    )?;
    progress(written.events);
    Ok(written)
}

/// Appends a `PERF_RECORD_COMM` naming thread `tid` of `pid` `name` at `t`, as uftrace
/// reads it: the header, pid and tid, the name (cut to [`COMM_LEN`] less its NUL) padded
/// to 8 bytes, and the sample's pid, tid and time.
fn comm(out: &mut Vec<u8>, t: u64, pid: u64, tid: u64, name: &str) {
    // Cut as the kernel cuts names, with no `...`, but not inside a character.
    let mut end = name.len().min(COMM_LEN - 1);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    let kept = &name.as_bytes()[..end];
    let padded = (kept.len() + 1).next_multiple_of(8);
    let size = 8 + 8 + padded + 16;
    out.extend_from_slice(&PERF_RECORD_COMM.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&(size as u16).to_le_bytes());
    for id in [pid, tid] {
        out.extend_from_slice(&(id as u32).to_le_bytes());
    }
    let start = out.len();
    out.extend_from_slice(kept);
    out.resize(start + padded, 0);
    for id in [pid, tid] {
        out.extend_from_slice(&(id as u32).to_le_bytes());
    }
    out.extend_from_slice(&t.to_le_bytes());
}

/// The event being written, its thread's stream (its tid, as uftrace shows it) and its
/// time in nanoseconds.
struct Now<'e> {
    event: &'e Event,
    tid: u64,
    t: u64,
}

/// What the records of trace points need from one event to the next.
struct Points<'s, 'a> {
    schemas: &'a [Schema],
    /// The names of the point functions ([`point_names`]).
    points: &'a [String],
    specs: &'a Specs,
    aux: &'s AuxSnapshots,
    /// Shows events as `dump` does, for return values.
    decoder: Decoder<'s>,
    /// A reused id's later threads (processes) are tasks (sessions) of their own.
    identities: Identities<'s>,
    clock: Clock,
    written: Written,
    /// A buffer for an event's text.
    text: Vec<u8>,
}

impl Points<'_, '_> {
    /// Writes what the model's `step` says into the streams `buffers`: a call's or a poll's
    /// beginning and end are ENTRY and EXIT records of the entry's (enter's) tracepoint;
    /// an exit with nothing open an EXIT record of its own at depth 0; every other event
    /// a call of its point function (the drop re-entry too: it is no poll). `now` is the
    /// event fed (`None` at the end, where steps only count what was left open).
    fn step(&mut self, step: &Step<&Event>, buffers: &mut Buffers, now: Option<&Now<'_>>) {
        let Some(now) = now else {
            if let Step::Unpaired { event, .. } = step {
                let id = event.type_word.tracepoint() as usize;
                let call = self.schemas.get(id).map(|s| (s.kind, s.role));
                self.written.unpaired += u64::from(call == Some((Kind::Entry, Role::Point)));
            }
            return;
        };
        match step {
            Step::CallBegin { event, .. } | Step::PollBegin(event) => {
                let (tid, t) = self.at(event, now);
                let stream = buffers.entry(tid).or_default();
                let id = event.type_word.tracepoint();
                match self.schemas.get(id as usize) {
                    // Every argument the spec names is there (not a lost continuation).
                    Some(s)
                        if self.specs.with_args[id as usize]
                            && event.args().len() >= s.args.len() =>
                    {
                        stream.record(t, ENTRY | MORE, addr(id));
                        arguments(&mut stream.bytes, event, s, self.aux);
                    }
                    _ => stream.record(t, ENTRY, addr(id)),
                }
                stream.depth = stream.depth.enter();
            }
            Step::CallEnd { begin, end, .. } | Step::PollEnd { begin, end } => {
                self.written.pairs += 1;
                let (tid, t) = self.at(end, now);
                let stream = buffers.entry(tid).or_default();
                stream.depth = stream.depth.leave();
                self.exit(stream, end, t, begin.type_word.tracepoint(), None);
            }
            Step::Unpaired { event, why } => {
                let id = event.type_word.tracepoint();
                match (self.schemas.get(id as usize).map(|s| s.kind), why) {
                    (Some(Kind::Exit), Why::PartnerMissing) => {
                        self.written.unpaired += 1;
                        let (tid, t) = self.at(event, now);
                        self.exit(buffers.entry(tid).or_default(), event, t, id, Some(0));
                    }
                    // Before the horizon: a call of its point function.
                    (Some(Kind::Entry | Kind::Exit), _) => {
                        self.written.uncertain += 1;
                        self.point(buffers, event, now);
                    }
                    _ => self.point(buffers, event, now),
                }
            }
            Step::PollDrop { begin, end } => {
                self.point(buffers, begin, now);
                self.point(buffers, end, now);
            }
            Step::Instant(e)
            | Step::StemBegin(e)
            | Step::StemEnd { end: e, .. }
            | Step::SpanNew(e)
            | Step::SpanRecord(e)
            | Step::SpanFollows(e) => self.point(buffers, e, now),
            // The close is the event fed.
            Step::SpanEnd(_) => self.point(buffers, now.event, now),
            // Stretches on and off the CPU: uftrace has no place for them.
            Step::SpanUnended { .. } | Step::Cpu { .. } => {}
        }
    }

    /// The stream (tid) and time (ns) of `event`'s records: `now`'s if it is the event fed,
    /// else its own (a step the model gave late).
    fn at(&self, event: &Event, now: &Now<'_>) -> (u64, u64) {
        if (event.ctx, event.stamp) == (now.event.ctx, now.event.stamp) {
            return (now.tid, now.t);
        }
        let t = self.clock.since_anchor_ns(event.stamp).max(0) as u64;
        (self.identities.of(event.ctx, event.stamp).tid, t)
    }

    /// An EXIT record of `function` at `depth` (the thread's, for `None`) for `event`
    /// (written at `t`) in `stream`, its text the return value where the function's spec
    /// has one.
    fn exit(
        &mut self,
        stream: &mut Stream,
        event: &Event,
        t: u64,
        function: u16,
        depth: Option<usize>,
    ) {
        let has_args = (self.schemas.get(event.type_word.tracepoint() as usize))
            .is_some_and(|s| !s.args.is_empty());
        let with_ret = has_args && self.specs.with_ret.get(function as usize) == Some(&true);
        let kind = if with_ret { EXIT | MORE } else { EXIT };
        match depth {
            None => stream.record(t, kind, addr(function)),
            Some(depth) => record(&mut stream.bytes, t, kind, depth, addr(function)),
        }
        if with_ret {
            self.text.clear();
            self.decoder.point(event, &mut self.text);
            return_value(&mut stream.bytes, &self.text);
        }
    }

    /// `event` as a call of its point function, at its thread's depth.
    fn point(&mut self, buffers: &mut Buffers, event: &Event, now: &Now<'_>) {
        let id = event.type_word.tracepoint() as usize;
        let k = match self.schemas.get(id) {
            Some(_) => id,
            None => self.schemas.len() + 1,
        };
        let (tid, t) = self.at(event, now);
        let stream = buffers.entry(tid).or_default();
        let at = point_addr(self.schemas.len(), k);
        stream.record(t, ENTRY, at);
        stream.record(t, EXIT | MORE, at);
        self.text.clear();
        self.decoder.point(event, &mut self.text);
        return_value(&mut stream.bytes, &self.text);
    }

    /// Appends a call of point function `k` (see [`point_names`]) at `t`, at the thread's
    /// depth, that returns the text of `item` as `dump` shows it: an ENTRY record and an
    /// EXIT record with the text, both in `stream`, that of `item`'s own thread.
    fn call(&mut self, stream: &mut Stream, t: u64, k: usize, item: &Item<'_>) {
        let at = point_addr(self.schemas.len(), k);
        stream.record(t, ENTRY, at);
        stream.record(t, EXIT | MORE, at);
        self.text.clear();
        self.decoder.text(item, &mut self.text);
        return_value(&mut stream.bytes, &self.text);
    }
}

/// A name as uftrace's text files can hold it: one line, no quotes or backslashes.
fn plain(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() || c == '"' || c == '\\' {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// `info`, `task.txt`, and the map and symbol files.
fn files(
    dir: &Path,
    ctx: &Context<'_>,
    points: &Points<'_, '_>,
    threads: &BTreeMap<u64, (u64, u64, u64)>,
    process_names: &FoldHashMap<u64, String>,
    perf: bool,
) -> std::io::Result<()> {
    let specs = &points.specs;
    let schemas = &points.schemas;
    const MODULE: &str = "/ttrace/tracepoints";
    // info: the header, then a text section for each bit of the info mask, in bit order.
    let (exe_name, cmdline, taskinfo) = (1u64 << 0, 1u64 << 3, 1u64 << 7);
    let (task_session, sym_rel_addr, max_stack) = (1u64 << 1, 1u64 << 5, 1u64 << 6);
    let mut info = Vec::new();
    info.extend_from_slice(b"Ftrace!\0");
    info.extend_from_slice(&4u32.to_le_bytes());
    info.extend_from_slice(&40u16.to_le_bytes());
    info.push(1); // little-endian
    info.push(2); // 64-bit
    let argument = if specs.args.is_empty() {
        0
    } else {
        FEAT_ARGUMENT
    };
    let retval = if specs.rets.is_empty() {
        0
    } else {
        FEAT_RETVAL
    };
    let arg_spec = if argument | retval != 0 {
        INFO_ARG_SPEC
    } else {
        0
    };
    let perf = if perf { FEAT_PERF_EVENT } else { 0 };
    let features = task_session | argument | retval | sym_rel_addr | max_stack | perf;
    info.extend_from_slice(&features.to_le_bytes());
    info.extend_from_slice(&(exe_name | cmdline | taskinfo | arg_spec).to_le_bytes());
    info.extend_from_slice(&1024u16.to_le_bytes());
    info.extend_from_slice(&[0; 6]);
    let tids: Vec<String> = threads.keys().map(u64::to_string).collect();
    let _ = write!(
        info,
        "exename:{MODULE}\ncmdline:ttrace-reader export --format uftrace {}\ntaskinfo:lines=2\ntaskinfo:nr_tid={}\ntaskinfo:tids={}\n",
        plain(&ctx.dir.display().to_string()),
        tids.len(),
        tids.join(",")
    );
    if arg_spec != 0 {
        let lines: Vec<String> = [("argspec", &specs.args), ("retspec", &specs.rets)]
            .into_iter()
            .filter(|(_, spec)| !spec.is_empty())
            .map(|(key, spec)| format!("{key}:{spec}\n"))
            .collect();
        let _ = write!(info, "argspec:lines={}\n{}", lines.len(), lines.concat());
    }
    std::fs::write(dir.join("info"), info)?;
    // task.txt: a session per process, then its threads, all from time 0.
    let mut task = String::new();
    let mut pids: Vec<u64> = threads.values().map(|(p, _, _)| *p).collect();
    pids.sort_unstable();
    pids.dedup();
    // The tracepoints' functions, the point functions, the sentinel.
    let end = point_addr(schemas.len(), points.points.len());
    let map_end = (end + 0x10).next_multiple_of(0x1000);
    for pid in &pids {
        let sid = format!("{:016x}", pid);
        let name = process_names
            .get(pid)
            .map_or_else(|| format!("pid {pid}"), |n| plain(n));
        task += &format!("SESS timestamp=0.000000000 pid={pid} sid={sid} exename=\"{name}\"\n");
        std::fs::write(
            dir.join(format!("sid-{sid}.map")),
            format!(
                "{MAP_START:x}-{map_end:x} r-xp 00000000 00:00 0 {MODULE}\n7ffff0000000-7ffff0021000 rw-p 00000000 00:00 0 [stack]\n"
            ),
        )?;
    }
    for (tid, (pid, _, _)) in threads {
        task += &format!("TASK timestamp=0.000000000 tid={tid} pid={pid}\n");
    }
    std::fs::write(dir.join("task.txt"), task)?;
    // The symbols: sorted, relative to the map start, ending with the sentinel.
    let functions = schemas.iter().map(|s| s.name.as_str()).enumerate();
    let calls = (points.points.iter().enumerate())
        .map(|(k, name)| (point_addr(schemas.len(), k), name.as_str()));
    let all: Vec<(u64, &str)> = (functions.map(|(i, name)| (addr(i as u64), name)))
        .chain(calls)
        .collect();
    let mut sym = format!("# symbols: {}\n# path name: {MODULE}\n", all.len() + 1);
    for (at, name) in all {
        sym += &format!("{:016x} T {}\n", at - MAP_START, plain(name));
    }
    sym += &format!("{:016x} ? __sym_end\n", end - MAP_START);
    let module = PathBuf::from(MODULE);
    let base = module.file_name().expect("module name").to_string_lossy();
    std::fs::write(dir.join(format!("{base}.sym")), sym)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A part's depths, settled from any depth it began at, are the depths a walk from that
    /// depth gives: every sequence of up to 10 entries and exits, from depths 0 to 3.
    #[test]
    fn depths_settled_after_the_part_are_the_depths_of_one_walk() {
        for steps in 0..1u32 << 10 {
            for len in 0..=10 {
                let (mut rel, mut seen) = (Depth::default(), Vec::new());
                for i in 0..len {
                    seen.push(rel);
                    rel = match steps >> i & 1 {
                        1 => rel.enter(),
                        _ => rel.leave(),
                    };
                }
                for base in 0..4usize {
                    let mut depth = base;
                    for (i, d) in seen.iter().enumerate() {
                        assert_eq!(d.at(base), depth, "{steps:b} {base} {i}");
                        depth = match steps >> i & 1 {
                            1 => depth + 1,
                            _ => depth.saturating_sub(1),
                        };
                    }
                    assert_eq!(rel.at(base), depth, "{steps:b} {base}");
                }
            }
        }
    }

    #[test]
    fn a_settled_record_has_its_depth_and_the_rest_of_its_word() {
        let mut stream = Stream::default();
        stream.record(7, EXIT, addr(3u64));
        stream.depth = stream.depth.enter().enter();
        stream.record(8, ENTRY | MORE, addr(4u64));
        assert_eq!(stream.settle(5), 7);
        let mut want = Vec::new();
        record(&mut want, 7, EXIT, 5, addr(3u64));
        record(&mut want, 8, ENTRY | MORE, 7, addr(4u64));
        assert_eq!(stream.bytes, want);
    }
}
