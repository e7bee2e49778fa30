//! Common Trace Format 1.8, for babeltrace2 and Trace Compass: a directory with a TSDL
//! `metadata` file and one binary stream per ring (`stream_<cpu>`).
//!
//! - One event class per tracepoint, its fields named and typed from the format string
//!   (`{n}` `uint64`, `{n:d}` `int64`, `{n:x}` hexadecimal `uint64`, `{n:f}` `double`,
//!   `{n:s}` `string`); a 12-argument event whose continuation was lost is an event of a
//!   second class, `<name>.partial`, with the first five fields. Messages are `info` events.
//! - Every event carries the writer's `pid` and `tid` (the stream's event context); every
//!   packet the ring it came from (`cpu_id`).
//! - The clock counts nanoseconds since the Unix epoch: timestamps are converted with the
//!   device's calibration, so that what babeltrace2 shows is, to the nanosecond, what
//!   `ttrace-reader dump --utc` shows.
//! - Entries a ring lost are its stream's discarded events: an empty first packet with a
//!   count of 0, then the count, so that readers report them ("discarded N events").
//!
//! Field names are written with a leading `_`, which CTF readers remove: a field may then be
//! named like a TSDL keyword.

use super::{Schema, Written};
use crate::decode::Context;
use crate::format::Spec;
use crate::merge::{Item, Merge};
use devttrace::{AuxSnapshots, Event, Mark, RingSnapshot};
use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use ttrace_layouts::entry::ENTRY_ARGS;

/// Packet header magic.
const MAGIC: u32 = 0xC1FC_1FC1;
/// Bytes of a packet's header and context.
const PACKET_HEAD: usize = 4 + 16 + 4 + 8 * 5 + 4;
/// A packet is closed when its content reaches this size.
const PACKET_BYTES: usize = 1 << 18;

/// A TSDL string literal.
fn literal(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\x{:02x}", c as u32 & 0xff);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A field name: `_` then the name with anything not alphanumeric made `_`.
fn field(name: &str) -> String {
    std::iter::once('_')
        .chain(
            name.chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }),
        )
        .collect()
}

/// Per tracepoint and argument of a flags table, the values seen that no one name has:
/// each becomes a label of its own (`"O_WRONLY|O_CREAT" = 65`), since babeltrace2 2.0
/// shows only labels whose value is the field's.
pub type Combinations = std::collections::HashMap<(usize, usize), std::collections::BTreeSet<u64>>;

fn tsdl_type(spec: &Spec, seen: Option<&std::collections::BTreeSet<u64>>) -> String {
    match spec {
        Spec::Unsigned | Spec::Bool | Spec::Char => "uint64_t".into(),
        Spec::Signed => "int64_t".into(),
        Spec::Hex => "hex64_t".into(),
        Spec::Float => "double_t".into(),
        Spec::Str => "string".into(),
        // An enumeration: babeltrace2 prints a value's labels (for flags, the labels of its
        // bits), and the number where no label applies.
        Spec::Values { table, signed } => {
            let container = if *signed { "int64_t" } else { "uint64_t" };
            let mut t = format!("enum : {container} {{ ");
            for (i, (name, value)) in table.entries.iter().enumerate() {
                let comma = if i > 0 { ", " } else { "" };
                let value = match signed {
                    true => (*value as i64).to_string(),
                    false => value.to_string(),
                };
                let _ = write!(t, "{comma}{} = {value}", literal(name));
            }
            for &value in seen.into_iter().flatten() {
                let mut label = Vec::new();
                table.show(&mut label, value);
                let label = String::from_utf8_lossy(&label);
                let _ = write!(t, ", {} = {value}", literal(&label));
            }
            t.push_str(" }");
            t
        }
    }
}

/// The TSDL metadata of a trace whose tracepoints are `schemas`, and whose flags arguments
/// took the `combinations` of values (see [`Combinations`]).
pub fn metadata(
    schemas: &[Schema],
    uuid: &[u8; 16],
    ctx: &Context<'_>,
    combinations: &Combinations,
) -> String {
    let u = uuid;
    let uuid = format!(
        "{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
        u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]
    );
    let mut m = format!(
        r#"/* CTF 1.8 */

typealias integer {{ size = 8; align = 8; signed = false; }} := uint8_t;
typealias integer {{ size = 32; align = 8; signed = false; }} := uint32_t;
typealias integer {{ size = 64; align = 8; signed = false; }} := uint64_t;
typealias integer {{ size = 64; align = 8; signed = true; }} := int64_t;
typealias integer {{ size = 64; align = 8; signed = false; base = 16; }} := hex64_t;
typealias floating_point {{ exp_dig = 11; mant_dig = 53; align = 8; }} := double_t;

trace {{
	major = 1;
	minor = 8;
	uuid = "{uuid}";
	byte_order = le;
	packet.header := struct {{
		uint32_t magic;
		uint8_t uuid[16];
		uint32_t stream_id;
	}};
}};

env {{
	tracer_name = "ttrace";
	source = {source};
	creator_pid = {pid};
	clock_hz = {hz};
}};

clock {{
	name = ttrace_realtime;
	description = "CLOCK_REALTIME, from the device's calibrated clock";
	freq = 1000000000;
	precision = 1;
	offset_s = 0;
	offset = 0;
	absolute = TRUE;
}};

typealias integer {{ size = 64; align = 8; signed = false; map = clock.ttrace_realtime.value; }} := clock_t;

stream {{
	id = 0;
	packet.context := struct {{
		clock_t timestamp_begin;
		clock_t timestamp_end;
		uint64_t content_size;
		uint64_t packet_size;
		uint64_t events_discarded;
		uint32_t cpu_id;
	}};
	event.header := struct {{
		uint32_t id;
		clock_t timestamp;
	}};
	event.context := struct {{
		uint32_t _pid;
		uint32_t _tid;
	}};
}};
"#,
        source = literal(&ctx.dir.display().to_string()),
        pid = ctx.version.creator_pid,
        hz = ctx.version.clock.hz,
    );
    let class = |m: &mut String, id: usize, tp: usize, name: &str, fields: &[(String, Spec)]| {
        let _ = write!(
            m,
            "\nevent {{\n\tname = {};\n\tid = {id};\n\tstream_id = 0;\n\tfields := struct {{\n",
            literal(name)
        );
        // Distinct names become one once mangled (`a b`, `a_b`): made unique again.
        let mut used: Vec<String> = Vec::new();
        for (i, (f, spec)) in fields.iter().enumerate() {
            let name = super::unique(&field(f), |n| used.iter().any(|u| u == n));
            let ty = tsdl_type(spec, combinations.get(&(tp, i)));
            let _ = writeln!(m, "\t\t{ty} {name};");
            used.push(name);
        }
        m.push_str("\t};\n};\n");
    };
    let n = schemas.len();
    for (id, s) in schemas.iter().enumerate() {
        class(&mut m, id, id, &s.name, &s.args);
        if s.args.len() > ENTRY_ARGS {
            class(
                &mut m,
                n + id,
                id,
                &format!("{}.partial", s.name),
                &s.args[..ENTRY_ARGS],
            );
        }
    }
    let _ = write!(
        m,
        "\nevent {{\n\tname = \"info\";\n\tid = {};\n\tstream_id = 0;\n\tfields := struct {{\n\t\tstring _message;\n\t}};\n}};\n",
        2 * n
    );
    let _ = write!(
        m,
        "\nevent {{\n\tname = \"unknown\";\n\tid = {};\n\tstream_id = 0;\n\tfields := struct {{\n\t\tuint32_t _tracepoint;\n\t\tuint8_t _n;\n\t\tuint64_t _words[_n];\n\t}};\n}};\n",
        2 * n + 1
    );
    m
}

/// One stream (a ring): the packet being filled, and the file, created with the first
/// packet (a shared ring nobody wrote to has none).
struct Stream {
    path: std::path::PathBuf,
    file: Option<std::io::BufWriter<std::fs::File>>,
    cpu: u32,
    /// The events of the open packet.
    content: Vec<u8>,
    first: u64,
    last: u64,
    /// Entries the ring lost, reported in the second packet.
    discarded: u64,
    packets: u64,
}

impl Stream {
    fn packet(&mut self, uuid: &[u8; 16], discarded: u64) -> std::io::Result<()> {
        let bytes = (PACKET_HEAD + self.content.len()) as u64;
        let mut head = Vec::with_capacity(PACKET_HEAD);
        head.extend_from_slice(&MAGIC.to_le_bytes());
        head.extend_from_slice(uuid);
        head.extend_from_slice(&0u32.to_le_bytes());
        for v in [self.first, self.last, bytes * 8, bytes * 8, discarded] {
            head.extend_from_slice(&v.to_le_bytes());
        }
        head.extend_from_slice(&self.cpu.to_le_bytes());
        let file = match &mut self.file {
            Some(f) => f,
            None => self.file.insert(std::io::BufWriter::with_capacity(
                1 << 16,
                std::fs::File::create(&self.path)?,
            )),
        };
        file.write_all(&head)?;
        file.write_all(&self.content)?;
        self.content.clear();
        self.packets += 1;
        Ok(())
    }

    /// Closes the open packet (if it has events, or to report losses).
    fn flush(&mut self, uuid: &[u8; 16]) -> std::io::Result<()> {
        if self.packets == 0 && self.discarded > 0 {
            // An empty packet counting nothing, so that the next one's count is a loss.
            let (content, last) = (std::mem::take(&mut self.content), self.last);
            self.last = self.first;
            self.packet(uuid, 0)?;
            (self.content, self.last) = (content, last);
            if self.content.is_empty() {
                // No event of this ring is exported: an empty packet carries the count.
                return self.packet(uuid, self.discarded);
            }
        }
        if !self.content.is_empty() {
            let d = self.discarded;
            self.packet(uuid, d)?;
        }
        Ok(())
    }
}

/// Writes the items of `ctx` (merged by `items`) as a CTF trace in the directory `dir`
/// (created; it must not exist or be empty).
pub fn write(
    ctx: Context<'_>,
    rings: &[RingSnapshot<Mark>],
    mut items: Merge<'_>,
    dir: &Path,
    mut progress: impl FnMut(u64),
) -> std::io::Result<Written> {
    std::fs::create_dir_all(dir)?;
    let schemas = Schema::all(ctx.meta);
    let uuid = uuid(&ctx);
    let mut combinations = Combinations::new();
    let n = ctx.version.num_cpus;
    let cpus = ttrace_layouts::ring::num_rings(n);
    let mut streams = (0..cpus)
        .map(|ring| {
            Ok(Stream {
                path: dir.join(format!(
                    "stream_{}",
                    ttrace_layouts::ring::ring_name(ring, n)
                )),
                file: None,
                cpu: ttrace_layouts::ring::ring_cpu(ring, n),
                content: Vec::with_capacity(PACKET_BYTES + 8192),
                first: 0,
                last: 0,
                discarded: rings.get(ring).map_or(0, |r| r.lost),
                packets: 0,
            })
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    let clock = ctx.version.clock;
    let n = schemas.len();
    let mut written = Written::default();
    written.losses(rings, &items);
    items.try_for_each_ref(|item| {
        let (cpu, stamp, who) = match *item {
            Item::Point { cpu, ref event } => (cpu, event.stamp, event.ctx),
            Item::Message(r) => (r.cpu as usize, r.timestamp, r.ctx),
        };
        let s = &mut streams[cpu.min(cpus - 1)];
        let ns = clock.realtime_ns(stamp);
        if s.content.is_empty() {
            s.first = ns;
        }
        s.last = ns;
        let out = &mut s.content;
        let id = match item {
            Item::Point { event, .. } => class_of(event, &schemas),
            Item::Message(_) => 2 * n,
        };
        out.extend_from_slice(&(id as u32).to_le_bytes());
        out.extend_from_slice(&ns.to_le_bytes());
        out.extend_from_slice(&((who >> 32) as u32).to_le_bytes());
        out.extend_from_slice(&(who as u32).to_le_bytes());
        match item {
            Item::Point { event, .. } => fields(out, event, &schemas, ctx.aux, &mut combinations),
            Item::Message(r) => string(out, r.text_or_lost()),
        }
        written.item(item);
        if out.len() >= PACKET_BYTES {
            s.flush(&uuid)?;
            progress(written.events);
        }
        Ok::<(), std::io::Error>(())
    })?;
    written.strings_lost = items.strings_lost();
    for s in &mut streams {
        s.flush(&uuid)?;
        if let Some(f) = &mut s.file {
            f.flush()?;
        }
    }
    // Last: the flags values seen are labels of their own.
    let metadata = metadata(&schemas, &uuid, &ctx, &combinations);
    std::fs::write(dir.join("metadata"), metadata)?;
    progress(written.events);
    Ok(written)
}

/// The event class of `event`: its tracepoint's, the partial one, or `unknown`.
fn class_of(event: &Event, schemas: &[Schema]) -> usize {
    let n = schemas.len();
    let id = event.type_word.tracepoint() as usize;
    match schemas.get(id) {
        Some(s) if event.continuation_lost && s.args.len() > ENTRY_ARGS => n + id,
        Some(_) => id,
        None => 2 * n + 1,
    }
}

/// The fields of `event`, as its class says.
fn fields(
    out: &mut Vec<u8>,
    event: &Event,
    schemas: &[Schema],
    aux: &AuxSnapshots,
    combinations: &mut Combinations,
) {
    let args = event.args();
    let Some(s) = schemas.get(event.type_word.tracepoint() as usize) else {
        out.extend_from_slice(&event.type_word.tracepoint().to_le_bytes());
        out.push(args.len() as u8);
        for w in args {
            out.extend_from_slice(&w.to_le_bytes());
        }
        return;
    };
    let count = if event.continuation_lost && s.args.len() > ENTRY_ARGS {
        ENTRY_ARGS
    } else {
        s.args.len()
    };
    for (i, (_, spec)) in s.args[..count].iter().enumerate() {
        // An argument the event lacks (a damaged entry) is written as zero.
        let w = args.get(i).copied().unwrap_or(0);
        match spec {
            Spec::Str => match crate::format::string_arg(aux, w) {
                Some(r) if r.truncated => {
                    let mut b = r.bytes.to_vec();
                    b.extend_from_slice(b"...");
                    string(out, &b)
                }
                Some(r) => string(out, r.bytes),
                None => string(out, b"<lost>"),
            },
            Spec::Values { table, .. } => {
                if table.kind == devttrace::ValuesKind::Flags
                    && !table.entries.iter().any(|e| e.1 == w)
                {
                    let tp = event.type_word.tracepoint() as usize;
                    combinations.entry((tp, i)).or_default().insert(w);
                }
                out.extend_from_slice(&w.to_le_bytes())
            }
            _ => out.extend_from_slice(&w.to_le_bytes()),
        }
    }
}

/// A CTF string: UTF-8 up to the first NUL, then a NUL.
fn string(out: &mut Vec<u8>, bytes: &[u8]) {
    let bytes = &bytes[..bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len())];
    match std::str::from_utf8(bytes) {
        Ok(_) => out.extend_from_slice(bytes),
        Err(_) => out.extend_from_slice(String::from_utf8_lossy(bytes).as_bytes()),
    }
    out.push(0);
}

/// A trace UUID (version 4 form) from the device's identity and the time of the export.
fn uuid(ctx: &Context<'_>) -> [u8; 16] {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write(ctx.dir.as_os_str().as_encoded_bytes());
    h.write_u64(ctx.version.clock.anchor_realtime_ns);
    let a = h.finish();
    h.write_u64(a);
    let b = h.finish();
    let mut u = [0u8; 16];
    u[..8].copy_from_slice(&a.to_le_bytes());
    u[8..].copy_from_slice(&b.to_le_bytes());
    u[6] = (u[6] & 0x0f) | 0x40;
    u[8] = (u[8] & 0x3f) | 0x80;
    u
}
