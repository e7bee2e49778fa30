//! A uftrace data directory, for `uftrace replay`, `report`, `dump`, `graph` and `info`
//! (checked against uftrace 0.13).
//!
//! - Each tracepoint is a "function" of a module `/ttrace/tracepoints` whose symbol file
//!   (`tracepoints.sym`) names it: the tracepoint with id `i` is at offset `0x10 * (i + 1)`.
//! - An entry is an ENTRY record at its thread's depth; the exit that closes it (see
//!   [`Pairing`]) is an EXIT record of the same function and depth. An exit whose entry is
//!   not in the trace is an EXIT at depth 0 of its own tracepoint. Entries and exits before
//!   the horizon, which cannot be paired, are user events.
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

use super::{names, Closes, Pairing, Schema, Written};
use crate::decode::{Context, Item};
use crate::merge::Merge;
use devttrace::{Event, RingIndex};
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

/// The 16-byte record.
fn record(out: &mut Vec<u8>, ns: u64, kind: u64, depth: usize, addr: u64) {
    let word = kind | MAGIC << 3 | (depth.min(1023) as u64) << 6 | (addr & ((1 << 48) - 1)) << 16;
    out.extend_from_slice(&ns.to_le_bytes());
    out.extend_from_slice(&word.to_le_bytes());
}

fn addr(tracepoint: impl Into<u64>) -> u64 {
    MAP_START + 0x10 * (tracepoint.into() + 1)
}

/// Per-thread record streams, appended to their files in blocks.
struct Streams<'d> {
    dir: &'d Path,
    buffers: BTreeMap<u32, Vec<u8>>,
}

impl Streams<'_> {
    fn flush(&mut self, tid: u32) -> std::io::Result<()> {
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
    let mut threads: BTreeMap<u32, (u32, u64, u64)> = BTreeMap::new();
    let mut lost: Vec<u64> = rings.iter().map(|r| r.lost).collect();
    let mut pairing = Pairing::new(rings);
    let mut written = Written::default();
    let mut events_used = BTreeMap::new();
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
                written.vanished += slots;
                written.uncertain += pairing.cut().len() as u64;
                return Ok(());
            }
        };
        let (pid, tid) = ((who >> 32) as u32, who as u32);
        let t = ns(stamp);
        threads.entry(tid).or_insert((pid, t, t)).2 = t;
        let out = streams.buffers.entry(tid).or_default();
        if let Some(n) = lost.get_mut(ring).filter(|n| **n > 0) {
            record(out, t, LOST, 0, *n);
            *n = 0;
        }
        match item {
            Item::Point { event, .. } => point(
                out,
                t,
                event,
                &schemas,
                &mut pairing,
                &mut events_used,
                &mut written,
            ),
            Item::Message(_) => {
                record(out, t, EVENT, pairing.depth(who), INFO_EVENT);
                events_used.insert(INFO_EVENT, "info".to_string());
            }
            Item::Gap { .. } => {} // Handled above.
        }
        written.events += 1;
        if out.len() >= FLUSH {
            streams.flush(tid)?;
            progress(written.events);
        }
        Ok::<(), std::io::Error>(())
    })?;
    written.unpaired += pairing.into_open().len() as u64;
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
    let tids: Vec<u32> = streams.buffers.keys().copied().collect();
    for tid in tids {
        streams.flush(tid)?;
    }
    let (process_names, _) = names(&ctx);
    files(dir, &ctx, &schemas, &threads, &process_names, &events_used)?;
    progress(written.events);
    Ok(written)
}

/// The records of one trace point.
fn point(
    out: &mut Vec<u8>,
    t: u64,
    event: &Event,
    schemas: &[Schema],
    pairing: &mut Pairing,
    events_used: &mut BTreeMap<u64, String>,
    written: &mut Written,
) {
    let id = event.type_word.tracepoint();
    let kind = schemas.get(id as usize).map(|s| s.kind);
    match kind {
        Some(Kind::Entry) => {
            if let Some(depth) = pairing.enter(event) {
                return record(out, t, ENTRY, depth, addr(id));
            }
            written.uncertain += 1;
        }
        Some(Kind::Exit) => match pairing.exit(event) {
            Closes::Entry(open, depth) => {
                written.pairs += 1;
                return record(out, t, EXIT, depth, addr(open.event.type_word.tracepoint()));
            }
            Closes::Nothing => {
                written.unpaired += 1;
                return record(out, t, EXIT, 0, addr(id));
            }
            Closes::Uncertain => written.uncertain += 1,
        },
        _ => {}
    }
    // Any other point, and an entry or exit before the horizon: an event.
    let name = schemas
        .get(id as usize)
        .map_or_else(|| format!("tracepoint#{id}"), |s| s.name.clone());
    events_used.entry(USER_EVENTS + id as u64).or_insert(name);
    record(
        out,
        t,
        EVENT,
        pairing.depth(event.ctx),
        USER_EVENTS + id as u64,
    );
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
    schemas: &[Schema],
    threads: &BTreeMap<u32, (u32, u64, u64)>,
    process_names: &HashMap<u32, String>,
    events_used: &BTreeMap<u64, String>,
) -> std::io::Result<()> {
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
    info.extend_from_slice(&(task_session | sym_rel_addr | max_stack | event).to_le_bytes());
    info.extend_from_slice(&(exe_name | cmdline | taskinfo).to_le_bytes());
    info.extend_from_slice(&1024u16.to_le_bytes());
    info.extend_from_slice(&[0; 6]);
    let tids: Vec<String> = threads.keys().map(u32::to_string).collect();
    let _ = write!(
        info,
        "exename:{MODULE}\ncmdline:ttrace-reader export --format uftrace {}\ntaskinfo:lines=2\ntaskinfo:nr_tid={}\ntaskinfo:tids={}\n",
        plain(&ctx.dir.display().to_string()),
        tids.len(),
        tids.join(",")
    );
    std::fs::write(dir.join("info"), info)?;
    // task.txt: a session per process, then its threads, all from time 0.
    let mut task = String::new();
    let mut pids: Vec<u32> = threads.values().map(|(p, _, _)| *p).collect();
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
