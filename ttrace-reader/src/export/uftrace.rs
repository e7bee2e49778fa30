//! A uftrace data directory, for `uftrace replay`, `report`, `dump`, `graph` and `info`
//! (checked against uftrace 0.13).
//!
//! - Each tracepoint is a "function" of a module `/ttrace/tracepoints` whose symbol file
//!   (`tracepoints.sym`) names it: the tracepoint with id `i` is at offset `0x10 * (i + 1)`.
//! - An entry is an ENTRY record at its thread's depth; the exit that closes it (see
//!   [`Pairing`]) is an EXIT record of the same function and depth. An exit whose entry is
//!   not in the trace is an EXIT at depth 0 of its own tracepoint. Entries and exits before
//!   the horizon, which cannot be paired, are user events.
//! - An ENTRY record carries its entry's arguments, typed from the format string, as the
//!   `argspec` in `info` describes them (`uftrace replay` shows `file_open("/etc/hosts",
//!   0x8000, -25)`); not for a name uftrace would read as a pattern (other characters than
//!   letters, digits, `_` and `:`), nor for an event whose continuation was lost. Strings
//!   share 960 bytes per event: uftrace 0.13 crashes on much more.
//! - Other trace points are user events (`ttrace:<name>` in `events.txt`), and messages the
//!   event `ttrace:info`; uftrace events carry no data.
//! - The entries a ring lost are a LOST record, in the stream of the first thread seen on
//!   that ring, before its first event; those overwritten while exported ([`Item::Gap`]),
//!   one before the ring's next event.
//! - Times are nanoseconds since the device was created, as `dump` shows them; one process
//!   is one session (`sid-<pid>.map`), one thread one `<tid>.dat` of 16-byte records.
//!
//! The layout of the files is uftrace's `info` header and text sections, `task.txt`,
//! `/proc/<pid>/maps`-style map files, `nm`-style symbol files, and `struct uftrace_record`
//! (see uftrace's `uftrace.h`).

use super::{Closes, Identities, Pairing, Schema, Written};
use crate::decode::{Context, Item};
use crate::format::Spec;
use crate::merge::Merge;
use devttrace::{AuxSnapshots, Event, RingIndex};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use ttrace_layouts::entry::Kind;

/// Record types.
const ENTRY: u64 = 0;
const EXIT: u64 = 1;
const LOST: u64 = 2;
const EVENT: u64 = 3;
/// `RECORD_MAGIC` of the version 4 format.
const MAGIC: u64 = 5;
/// Where the tracepoint module is mapped.
const MAP_START: u64 = 0x40_0000;
/// User event ids start here; messages are the last one.
const USER_EVENTS: u64 = 1_000_000;
const INFO_EVENT: u64 = 1_999_999;
/// Bytes buffered per thread before they are appended to its file.
const FLUSH: usize = 1 << 16;
/// The `more` bit of a record word: argument data follows the record.
const MORE: u64 = 1 << 2;
/// Feature bit: records may carry arguments.
const FEAT_ARGUMENT: u64 = 1 << 3;
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
        Spec::Values { signed: false, .. } => "u64",
        Spec::Signed | Spec::Values { signed: true, .. } => "i64",
        Spec::Hex => "x64",
        Spec::Float => "f64",
        Spec::Str => "s",
    }
}

/// Whether uftrace's argspec can name `name`: it matches other characters (`.`, `-`, `$`
/// ...) as patterns, and then finds no spec for the function.
fn spec_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// The `argspec` of the entries whose records carry their arguments (`name@arg1/u64,...`
/// joined by `;`), and, by tracepoint id, whether an entry's record does.
fn argspec(schemas: &[Schema]) -> (String, Vec<bool>) {
    // uftrace merges the specs of one name: a name two tracepoints share gets none.
    let mut uses: HashMap<&str, usize> = HashMap::new();
    for s in schemas {
        *uses.entry(&s.name).or_default() += 1;
    }
    let mut specs = Vec::new();
    let with_args = schemas
        .iter()
        .map(|s| {
            let ok = s.kind == Kind::Entry
                && !s.args.is_empty()
                && spec_name(&s.name)
                && uses[s.name.as_str()] == 1;
            if ok {
                let args: Vec<String> = s
                    .args
                    .iter()
                    .enumerate()
                    .map(|(i, (_, spec))| format!("arg{}/{}", i + 1, arg_type(spec)))
                    .collect();
                specs.push(format!("{}@{}", s.name, args.join(",")));
            }
            ok
        })
        .collect();
    (specs.join(";"), with_args)
}

/// Appends the arguments of `event` as uftrace reads them after a record with [`MORE`], in
/// the order of its argspec: integers in 8 bytes, a string as a `u16` length, its bytes (up
/// to its share of [`STRING_BUDGET`], cut with `...`; `<lost>` if overwritten) and zeros to
/// 4 bytes; all padded to 8 bytes.
fn arguments(out: &mut Vec<u8>, event: &Event, schema: &Schema, aux: &AuxSnapshots) {
    let strings = schema.args.iter().filter(|(_, s)| *s == Spec::Str).count();
    let share = STRING_BUDGET / strings.max(1);
    let start = out.len();
    for (&w, (_, spec)) in event.args().iter().zip(&schema.args) {
        if *spec != Spec::Str {
            out.extend_from_slice(&w.to_le_bytes());
            continue;
        }
        let bytes: &[u8] = crate::format::string_arg(aux, w).map_or(b"<lost>", |r| &r.bytes);
        // A C string for uftrace: up to the first NUL.
        let bytes = &bytes[..bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len())];
        let (kept, cut) = if bytes.len() > share {
            let mut end = share - 3;
            // Not inside a UTF-8 sequence.
            while end > 0 && bytes[end] & 0xc0 == 0x80 {
                end -= 1;
            }
            (&bytes[..end], true)
        } else {
            (bytes, false)
        };
        let len = kept.len() + if cut { 3 } else { 0 };
        out.extend_from_slice(&(len as u16).to_le_bytes());
        out.extend_from_slice(kept);
        if cut {
            out.extend_from_slice(b"...");
        }
        out.resize(start + (out.len() - start).next_multiple_of(4), 0);
    }
    out.resize(start + (out.len() - start).next_multiple_of(8), 0);
}

fn addr(tracepoint: impl Into<u64>) -> u64 {
    MAP_START + 0x10 * (tracepoint.into() + 1)
}

/// Per-thread record streams, appended to their files in blocks.
struct Streams<'d> {
    dir: &'d Path,
    buffers: BTreeMap<u64, Vec<u8>>,
}

impl Streams<'_> {
    fn flush(&mut self, tid: u64) -> std::io::Result<()> {
        let Some(buf) = self.buffers.get_mut(&tid) else {
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
}

/// Writes the items of `ctx` (merged by `items`) as a uftrace data directory `dir`
/// (created; it must not exist or be empty).
pub fn write(
    ctx: Context<'_>,
    rings: &[RingIndex],
    items: Merge<'_>,
    dir: &Path,
    mut progress: impl FnMut(u64),
) -> std::io::Result<Written> {
    std::fs::create_dir_all(dir)?;
    let schemas = Schema::all(ctx.meta);
    let clock = ctx.version.clock;
    let ns = |ticks: u64| clock.since_anchor_ns(ticks).max(0) as u64;
    let mut streams = Streams {
        dir,
        buffers: BTreeMap::new(),
    };
    // pid, first and last time of each thread.
    let mut threads: BTreeMap<u64, (u64, u64, u64)> = BTreeMap::new();
    // A reused id's later threads (processes) are tasks (sessions) of their own.
    let identities = Identities::new(ctx.meta);
    let mut process_names: HashMap<u64, String> = HashMap::new();
    let mut lost: Vec<u64> = rings.iter().map(|r| r.lost).collect();
    let (spec, with_args) = argspec(&schemas);
    let mut p = Points {
        schemas,
        with_args,
        aux: ctx.aux,
        pairing: Pairing::new(rings),
        events_used: BTreeMap::new(),
        written: Written::default(),
    };
    items.try_for_each_ref(|item| {
        let (ring, who, stamp) = match *item {
            Item::Point { cpu, ref event } => (cpu, event.ctx, event.stamp),
            Item::Message(r) => (r.cpu as usize, r.ctx, r.timestamp),
            Item::Gap { cpu, slots, .. } => {
                // A LOST record before the ring's next event; entries still open are
                // given up (their ENTRY records stay, as in a trace cut short).
                if let Some(n) = lost.get_mut(cpu) {
                    *n += slots;
                }
                p.written.vanished += slots;
                p.written.uncertain += p.pairing.cut().len() as u64;
                return Ok(());
            }
        };
        let id = identities.of(who, stamp);
        let (pid, tid) = (id.pid, id.tid);
        if let Some(name) = id.process {
            process_names.entry(pid).or_insert_with(|| name.to_string());
        }
        let t = ns(stamp);
        threads.entry(tid).or_insert((pid, t, t)).2 = t;
        let out = streams.buffers.entry(tid).or_default();
        if let Some(n) = lost.get_mut(ring).filter(|n| **n > 0) {
            record(out, t, LOST, 0, *n);
            *n = 0;
        }
        match item {
            Item::Point { event, .. } => p.point(out, t, event),
            Item::Message(_) => {
                record(out, t, EVENT, p.pairing.depth(who), INFO_EVENT);
                p.events_used.insert(INFO_EVENT, "info".to_string());
            }
            Item::Gap { .. } => {} // Handled above.
        }
        p.written.events += 1;
        if out.len() >= FLUSH {
            streams.flush(tid)?;
            progress(p.written.events);
        }
        Ok::<(), std::io::Error>(())
    })?;
    p.written.unpaired += std::mem::take(&mut p.pairing).into_open().len() as u64;
    // Losses of rings none of whose events are exported: at the end of the first thread's
    // stream (uftrace has no other place for them; with no thread at all there is no trace).
    let unreported: u64 = lost.iter().sum();
    if let (true, Some((&tid, &(_, _, t)))) = (unreported > 0, threads.iter().next()) {
        record(
            streams.buffers.entry(tid).or_default(),
            t,
            LOST,
            0,
            unreported,
        );
    }
    let tids: Vec<u64> = streams.buffers.keys().copied().collect();
    for tid in tids {
        streams.flush(tid)?;
    }
    files(dir, &ctx, &p, &spec, &threads, &process_names)?;
    progress(p.written.events);
    Ok(p.written)
}

/// What the records of trace points need from one event to the next.
struct Points<'s> {
    schemas: Vec<Schema>,
    /// By tracepoint id: whether its entries' records carry their arguments.
    with_args: Vec<bool>,
    aux: &'s AuxSnapshots,
    pairing: Pairing,
    /// The user events used, by id: their names.
    events_used: BTreeMap<u64, String>,
    written: Written,
}

impl Points<'_> {
    /// Appends the records of `event`, at `t`, to its thread's stream `out`.
    fn point(&mut self, out: &mut Vec<u8>, t: u64, event: &Event) {
        let id = event.type_word.tracepoint();
        let schema = self.schemas.get(id as usize);
        match schema.map(|s| s.kind) {
            Some(Kind::Entry) => {
                if let Some(depth) = self.pairing.enter(event) {
                    return match schema {
                        // Every argument the spec names is there (not a lost continuation).
                        Some(s)
                            if self.with_args[id as usize]
                                && event.args().len() >= s.args.len() =>
                        {
                            record(out, t, ENTRY | MORE, depth, addr(id));
                            arguments(out, event, s, self.aux);
                        }
                        _ => record(out, t, ENTRY, depth, addr(id)),
                    };
                }
                self.written.uncertain += 1;
            }
            Some(Kind::Exit) => match self.pairing.exit(event) {
                Closes::Entry(open, depth) => {
                    self.written.pairs += 1;
                    let entry = open.event.type_word.tracepoint();
                    return record(out, t, EXIT, depth, addr(entry));
                }
                Closes::Nothing => {
                    self.written.unpaired += 1;
                    return record(out, t, EXIT, 0, addr(id));
                }
                Closes::Uncertain => self.written.uncertain += 1,
            },
            _ => {}
        }
        // Any other point, and an entry or exit before the horizon: an event.
        let name = schema.map_or_else(|| format!("tracepoint#{id}"), |s| s.name.clone());
        self.events_used
            .entry(USER_EVENTS + id as u64)
            .or_insert(name);
        let depth = self.pairing.depth(event.ctx);
        record(out, t, EVENT, depth, USER_EVENTS + id as u64);
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

/// `info`, `task.txt`, the map and symbol files and `events.txt`.
fn files(
    dir: &Path,
    ctx: &Context<'_>,
    points: &Points<'_>,
    argspec: &str,
    threads: &BTreeMap<u64, (u64, u64, u64)>,
    process_names: &HashMap<u64, String>,
) -> std::io::Result<()> {
    let (schemas, events_used) = (&points.schemas, &points.events_used);
    const MODULE: &str = "/ttrace/tracepoints";
    // info: the header, then a text section for each bit of the info mask, in bit order.
    let (exe_name, cmdline, taskinfo) = (1u64 << 0, 1u64 << 3, 1u64 << 7);
    let (task_session, sym_rel_addr, max_stack, event) =
        (1u64 << 1, 1u64 << 5, 1u64 << 6, 1u64 << 7);
    let mut info = Vec::new();
    info.extend_from_slice(b"Ftrace!\0");
    info.extend_from_slice(&4u32.to_le_bytes());
    info.extend_from_slice(&40u16.to_le_bytes());
    info.push(1); // little-endian
    info.push(2); // 64-bit
    let (argument, arg_spec) = match argspec.is_empty() {
        true => (0, 0),
        false => (FEAT_ARGUMENT, INFO_ARG_SPEC),
    };
    let features = task_session | argument | sym_rel_addr | max_stack | event;
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
    if !argspec.is_empty() {
        let _ = write!(info, "argspec:lines=1\nargspec:{argspec}\n");
    }
    std::fs::write(dir.join("info"), info)?;
    // task.txt: a session per process, then its threads, all from time 0.
    let mut task = String::new();
    let mut pids: Vec<u64> = threads.values().map(|(p, _, _)| *p).collect();
    pids.sort_unstable();
    pids.dedup();
    let map_end = MAP_START + (0x10 * (schemas.len() as u64 + 2)).div_ceil(0x1000) * 0x1000;
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
    let mut sym = format!("# symbols: {}\n# path name: {MODULE}\n", schemas.len() + 1);
    for (i, s) in schemas.iter().enumerate() {
        sym += &format!("{:016x} T {}\n", addr(i as u64) - MAP_START, plain(&s.name));
    }
    sym += &format!(
        "{:016x} ? __sym_end\n",
        addr(schemas.len() as u64) - MAP_START
    );
    let module = PathBuf::from(MODULE);
    let base = module.file_name().expect("module name").to_string_lossy();
    std::fs::write(dir.join(format!("{base}.sym")), sym)?;
    let mut events = String::new();
    for (id, name) in events_used {
        events += &format!("EVENT: {id} ttrace:{}\n", plain(name));
    }
    std::fs::write(dir.join("events.txt"), events)?;
    Ok(())
}
