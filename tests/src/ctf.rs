//! A reader of the CTF 1.8 traces `ttrace-reader export --format ctf` writes, so that every
//! machine checks an export's content without babeltrace2: the TSDL metadata is parsed for
//! its type aliases and event classes, and each stream is decoded packet by packet with the
//! field types the metadata declares, as a CTF reader does. It reads the subset of TSDL that
//! ttrace writes (byte-aligned little-endian integers, enumerations of them, doubles,
//! strings, one sequence) and fails loudly on anything else.
//!
//! The tests that need babeltrace2 check that it reads every export as this reader does.

use std::collections::HashMap;
use std::path::Path;

/// The packet header magic of CTF.
const MAGIC: u32 = 0xC1FC_1FC1;

/// A field type the metadata declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Type {
    /// An integer of `bits` (8, 32 or 64), signed or not, shown in `base`.
    Int { bits: u32, signed: bool, base: u32 },
    /// An IEEE 754 double.
    Double,
    /// A NUL-terminated UTF-8 string.
    Str,
}

/// One field of an event class: its name (as readers show it: the leading `_` removed),
/// its type, and for a sequence the field that holds its length.
#[derive(Clone, Debug)]
struct Field {
    name: String,
    ty: Type,
    length_of: Option<String>,
    /// For an enumeration, its labels and their values.
    labels: Option<Vec<(String, i128)>>,
}

/// A field's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// An unsigned integer, shown in decimal.
    Unsigned(u64),
    /// A signed integer.
    Signed(i64),
    /// An unsigned integer shown in hexadecimal.
    Hex(u64),
    /// A double.
    Float(f64),
    /// A string.
    Str(String),
    /// A sequence of integers.
    Sequence(Vec<Value>),
    /// An enumeration: the labels whose value it has, and the integer.
    Enum(Vec<String>, Box<Value>),
}

impl std::fmt::Display for Value {
    /// The value as babeltrace2's text output shows it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Unsigned(v) => write!(f, "{v}"),
            Value::Signed(v) => write!(f, "{v}"),
            Value::Hex(v) => write!(f, "0x{v:X}"),
            Value::Float(v) => write!(f, "{v:.6}"),
            Value::Str(s) => write!(f, "{s:?}"),
            Value::Sequence(v) => {
                let items: Vec<String> = v
                    .iter()
                    .enumerate()
                    .map(|(i, v)| format!("[{i}] = {v}"))
                    .collect();
                write!(f, "[ {} ]", items.join(", "))
            }
            Value::Enum(labels, v) if labels.is_empty() => {
                write!(f, "( <unknown> : container = {v} )")
            }
            Value::Enum(labels, v) => {
                let labels: Vec<String> = labels.iter().map(|l| format!("{l:?}")).collect();
                write!(f, "( {} : container = {v} )", labels.join(", "))
            }
        }
    }
}

/// One event of a stream.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Nanoseconds since the Unix epoch.
    pub ns: u64,
    /// The packet's `cpu_id`.
    pub cpu: u32,
    /// The writer's process and thread.
    pub pid: u32,
    pub tid: u32,
    /// The event class's name.
    pub name: String,
    /// The payload, in the order the class declares it.
    pub fields: Vec<(String, Value)>,
}

/// A trace as read from its directory.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// Every event of every stream, merged by time (stable: streams in file-name order).
    pub events: Vec<Event>,
    /// Per stream (by `cpu_id`), each rise of `events_discarded` from one packet to the
    /// next: what a CTF reader reports as "discarded N events".
    pub discarded: Vec<(u32, u64)>,
}

/// A failure to read a trace: what and where.
pub type Error = String;

/// Reads the CTF trace in `dir`.
pub fn read(dir: &Path) -> Result<Trace, Error> {
    let text =
        std::fs::read_to_string(dir.join("metadata")).map_err(|e| format!("metadata: {e}"))?;
    let meta = Metadata::parse(&text)?;
    let mut streams: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .map(|e| e.map(|e| e.path()).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    streams.retain(|p| p.file_name().is_some_and(|n| n != "metadata"));
    streams.sort();
    let mut trace = Trace {
        events: Vec::new(),
        discarded: Vec::new(),
    };
    for path in streams {
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        meta.stream(&bytes, &mut trace)
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    trace.events.sort_by_key(|e| e.ns);
    Ok(trace)
}

/// What the metadata declares.
struct Metadata {
    uuid: [u8; 16],
    classes: HashMap<u32, (String, Vec<Field>)>,
}

impl Metadata {
    fn parse(text: &str) -> Result<Metadata, Error> {
        if !text.starts_with("/* CTF 1.8 */") {
            return Err("metadata: no `/* CTF 1.8 */` signature".into());
        }
        // Type aliases: `typealias integer { ... } := name;`.
        let mut aliases: HashMap<String, Type> = HashMap::new();
        for decl in text.split("typealias ").skip(1) {
            let (body, rest) = decl.split_once("} := ").ok_or("typealias without `:=`")?;
            let name = rest.split(';').next().unwrap_or("").trim().to_string();
            let attr = |key: &str| {
                body.split(';')
                    .filter_map(|a| a.split_once('='))
                    .find(|(k, _)| k.split_whitespace().last() == Some(key))
                    .map(|(_, v)| v.trim().to_string())
            };
            let ty = if body.trim_start().starts_with("integer") {
                if attr("byte_order").is_some() || attr("align").as_deref() != Some("8") {
                    return Err(format!("typealias {name}: not a byte-aligned integer"));
                }
                Type::Int {
                    bits: attr("size").and_then(|s| s.parse().ok()).ok_or("size")?,
                    signed: attr("signed").as_deref() == Some("true"),
                    base: attr("base")
                        .map_or(Ok(10), |b| b.parse())
                        .map_err(|_| "base")?,
                }
            } else if body.trim_start().starts_with("floating_point") {
                if attr("exp_dig").as_deref() != Some("11")
                    || attr("mant_dig").as_deref() != Some("53")
                {
                    return Err(format!("typealias {name}: not a double"));
                }
                Type::Double
            } else {
                return Err(format!("typealias {name}: unknown kind"));
            };
            aliases.insert(name, ty);
        }
        aliases.insert("string".into(), Type::Str);
        let uuid = text
            .split_once("uuid = \"")
            .and_then(|(_, r)| r.split_once('"'))
            .map(|(u, _)| u.replace('-', ""))
            .ok_or("metadata: no trace uuid")?;
        let mut bytes = [0u8; 16];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = u8::from_str_radix(uuid.get(2 * i..2 * i + 2).ok_or("uuid")?, 16)
                .map_err(|_| "uuid")?;
        }
        let mut classes = HashMap::new();
        for block in text.split("\nevent {").skip(1) {
            let name = block
                .split_once("name = ")
                .map(|(_, r)| unquote(r))
                .ok_or("event without a name")??;
            let id: u32 = block
                .split_once("\tid = ")
                .and_then(|(_, r)| r.split(';').next())
                .and_then(|v| v.trim().parse().ok())
                .ok_or(format!("event {name}: no id"))?;
            let body = block
                .split_once("fields := struct {")
                .and_then(|(_, r)| r.split_once("};"))
                .map(|(b, _)| b)
                .ok_or(format!("event {name}: no fields"))?;
            let mut fields = Vec::new();
            for decl in body.split(';').map(str::trim).filter(|d| !d.is_empty()) {
                // `enum : <integer> { "label" = value, ... } <field>`
                let (decl, labels) = match decl.strip_prefix("enum : ") {
                    Some(e) => {
                        let (container, rest) = e
                            .split_once(" { ")
                            .ok_or(format!("event {name}: `{decl}`"))?;
                        let (mappings, field) = rest
                            .rsplit_once(" } ")
                            .ok_or(format!("event {name}: `{decl}`"))?;
                        let mut labels = Vec::new();
                        for m in mappings.split(", ") {
                            let label = unquote(m)?;
                            let value = m
                                .rsplit_once(" = ")
                                .and_then(|(_, v)| v.parse().ok())
                                .ok_or(format!("event {name}: mapping `{m}`"))?;
                            labels.push((label, value));
                        }
                        (format!("{container} {field}"), Some(labels))
                    }
                    None => (decl.to_string(), None),
                };
                let (ty, field) = decl
                    .split_once(' ')
                    .ok_or(format!("event {name}: `{decl}`"))?;
                let ty = *aliases
                    .get(ty)
                    .ok_or(format!("event {name}: unknown type {ty}"))?;
                let (field, length_of) = match field.split_once('[') {
                    Some((f, len)) => (
                        f,
                        Some(
                            len.trim_end_matches(']')
                                .trim_start_matches('_')
                                .to_string(),
                        ),
                    ),
                    None => (field, None),
                };
                // CTF readers drop one leading underscore of a field name.
                let field = field.strip_prefix('_').unwrap_or(field).to_string();
                fields.push(Field {
                    name: field,
                    ty,
                    length_of,
                    labels,
                });
            }
            if classes.insert(id, (name.clone(), fields)).is_some() {
                return Err(format!("event id {id} declared twice"));
            }
        }
        Ok(Metadata {
            uuid: bytes,
            classes,
        })
    }

    /// Decodes the packets of one stream into `trace`.
    fn stream(&self, bytes: &[u8], trace: &mut Trace) -> Result<(), Error> {
        let mut at = 0;
        let mut discarded_before = 0;
        while at < bytes.len() {
            let mut r = Cursor { bytes, at };
            if r.u32()? != MAGIC {
                return Err(format!("packet at {at}: bad magic"));
            }
            if r.take(16)? != self.uuid {
                return Err(format!("packet at {at}: uuid is not the trace's"));
            }
            if r.u32()? != 0 {
                return Err(format!("packet at {at}: unknown stream id"));
            }
            let (begin, end) = (r.u64()?, r.u64()?);
            let (content_bits, packet_bits) = (r.u64()?, r.u64()?);
            let discarded = r.u64()?;
            let cpu = r.u32()?;
            if content_bits % 8 != 0 || content_bits > packet_bits {
                return Err(format!(
                    "packet at {at}: content {content_bits} bits of {packet_bits}"
                ));
            }
            let content_end = at + (content_bits / 8) as usize;
            if content_end > bytes.len() {
                return Err(format!("packet at {at}: runs past the file"));
            }
            if discarded < discarded_before {
                return Err(format!("packet at {at}: discarded count went down"));
            }
            if discarded > discarded_before {
                trace.discarded.push((cpu, discarded - discarded_before));
            }
            discarded_before = discarded;
            let mut r = Cursor {
                bytes: &bytes[..content_end],
                at: r.at,
            };
            while r.at < content_end {
                let id = r.u32()?;
                let ns = r.u64()?;
                if ns < begin || ns > end {
                    return Err(format!("event at {}: time {ns} outside its packet", r.at));
                }
                let (pid, tid) = (r.u32()?, r.u32()?);
                let (name, classes) = self
                    .classes
                    .get(&id)
                    .ok_or(format!("event at {}: unknown class {id}", r.at))?;
                let mut fields: Vec<(String, Value)> = Vec::new();
                for f in classes {
                    let value = match &f.length_of {
                        None => match (&f.labels, r.value(f.ty)?) {
                            (None, v) => v,
                            (Some(labels), v) => {
                                let n = match v {
                                    Value::Unsigned(n) | Value::Hex(n) => n as i128,
                                    Value::Signed(n) => n as i128,
                                    _ => return Err(format!("enum {}: not an integer", f.name)),
                                };
                                let names = labels.iter().filter(|l| l.1 == n);
                                Value::Enum(names.map(|l| l.0.clone()).collect(), Box::new(v))
                            }
                        },
                        Some(len) => {
                            let n = match fields.iter().find(|(n, _)| n == len) {
                                Some((_, Value::Unsigned(n))) => *n,
                                _ => return Err(format!("sequence {}: no length field", f.name)),
                            };
                            Value::Sequence(
                                (0..n).map(|_| r.value(f.ty)).collect::<Result<_, _>>()?,
                            )
                        }
                    };
                    fields.push((f.name.clone(), value));
                }
                trace.events.push(Event {
                    ns,
                    cpu,
                    pid,
                    tid,
                    name: name.clone(),
                    fields,
                });
            }
            at += (packet_bits / 8) as usize;
        }
        Ok(())
    }
}

/// A TSDL string literal at the start of `s` (`"..."` with `\"`, `\\` and `\xNN`).
fn unquote(s: &str) -> Result<String, Error> {
    let mut chars = s.strip_prefix('"').ok_or("name is not a string")?.chars();
    let mut out = String::new();
    loop {
        match chars.next().ok_or("unterminated string")? {
            '"' => return Ok(out),
            '\\' => match chars.next() {
                Some('x') => {
                    let hex: String = chars.by_ref().take(2).collect();
                    out.push(u8::from_str_radix(&hex, 16).map_err(|_| "bad \\x")? as char);
                }
                Some(c) => out.push(c),
                None => return Err("unterminated string".into()),
            },
            c => out.push(c),
        }
    }
}

/// Little-endian reads with bounds checks.
struct Cursor<'b> {
    bytes: &'b [u8],
    at: usize,
}

impl<'b> Cursor<'b> {
    fn take(&mut self, n: usize) -> Result<&'b [u8], Error> {
        let s = self
            .bytes
            .get(self.at..self.at + n)
            .ok_or(format!("{n} bytes at {} run past the content", self.at))?;
        self.at += n;
        Ok(s)
    }

    fn u32(&mut self) -> Result<u32, Error> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }

    fn u64(&mut self) -> Result<u64, Error> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }

    fn value(&mut self, ty: Type) -> Result<Value, Error> {
        Ok(match ty {
            Type::Int { bits, signed, base } => {
                let raw = match bits {
                    8 => self.take(1)?[0] as u64,
                    32 => self.u32()? as u64,
                    64 => self.u64()?,
                    _ => return Err(format!("{bits}-bit integer")),
                };
                match (signed, base) {
                    (true, _) => Value::Signed(raw as i64),
                    (false, 16) => Value::Hex(raw),
                    _ => Value::Unsigned(raw),
                }
            }
            Type::Double => Value::Float(f64::from_bits(self.u64()?)),
            Type::Str => {
                let rest = &self.bytes[self.at..];
                let len = rest
                    .iter()
                    .position(|&b| b == 0)
                    .ok_or("unterminated string")?;
                let s = std::str::from_utf8(&rest[..len]).map_err(|_| "string not UTF-8")?;
                self.at += len + 1;
                Value::Str(s.to_string())
            }
        })
    }
}
