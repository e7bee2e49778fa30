//! A reader of the uftrace data directories `ttrace-reader export --format uftrace` writes,
//! so that every machine checks an export's content without uftrace: the `info` header and
//! its sections, `task.txt`, the map and symbol files, each thread's records with their
//! arguments and return values, resolved to names as `uftrace dump` resolves them, and the
//! thread names of `perf-cpu0.dat`. It refuses what uftrace would refuse or misread: a wrong
//! header, a record without uftrace's magic, an address no symbol names, arguments no
//! `argspec` describes; and what would show a text on another thread than its own: user
//! events and `extern.dat` (uftrace gives an external data line to the thread it read last,
//! which is not always the one whose event it follows), which the export writes none of.
//!
//! The tests that need uftrace check that `uftrace dump` reads every export as this reader
//! does.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// Feature bits: records may carry arguments, return values; perf data; info bit: the
/// `argspec` section.
const FEAT_ARGUMENT: u64 = 1 << 3;
const FEAT_RETVAL: u64 = 1 << 4;
const FEAT_PERF_EVENT: u64 = 1 << 8;
const INFO_ARG_SPEC: u64 = 1 << 10;

/// What a record is.
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    /// A function entry, with the arguments its `argspec` names (if it carries any).
    Entry(Vec<Arg>),
    /// A function exit.
    Exit,
    /// Records lost: how many.
    Lost(u64),
}

/// An argument of an entry, typed by the `argspec`.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    /// `u64`.
    Unsigned(u64),
    /// `i64`.
    Signed(i64),
    /// `x64`.
    Hex(u64),
    /// `f64`.
    Float(f64),
    /// `s`.
    Str(String),
}

/// One record of a thread.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// Nanoseconds, as `uftrace dump` shows them.
    pub ns: u64,
    /// The function (entries and exits) or event name; empty for a lost record.
    pub name: String,
    /// The call depth.
    pub depth: u32,
    pub kind: Kind,
    /// An exit's return value (a string).
    pub data: Option<String>,
}

impl Record {
    /// What `uftrace dump` shows of the record: `(time, kind, name, depth)` as in
    /// `0.002295942   8610: [entry] file_open(400020) depth: 0`; a lost record's name is its
    /// count in hexadecimal, in angle brackets.
    pub fn dump_line(&self) -> (String, String, String, u32) {
        let time = format!("{}.{:09}", self.ns / 1_000_000_000, self.ns % 1_000_000_000);
        let (kind, name) = match &self.kind {
            Kind::Entry(_) => ("entry", self.name.clone()),
            Kind::Exit => ("exit", self.name.clone()),
            Kind::Lost(n) => ("lost", format!("<{n:x}>")),
        };
        (time, kind.to_string(), name, self.depth)
    }
}

/// A data directory as read.
#[derive(Clone, Debug, PartialEq)]
pub struct Data {
    /// `exename:` of `info`.
    pub exename: String,
    /// Sessions of `task.txt`: pid and executable name.
    pub sessions: Vec<(u32, String)>,
    /// Tasks of `task.txt`: tid and pid.
    pub tasks: Vec<(u32, u32)>,
    /// Each thread's records, by tid.
    pub threads: BTreeMap<u32, Vec<Record>>,
    /// The names `perf-cpu0.dat` gives threads (the last, for a thread renamed), by tid.
    pub names: BTreeMap<u32, String>,
}

impl Data {
    /// The events the records stand for: an entry or an exit each, a call of a point function
    /// (`ttrace:<name>`, which no tracepoint of the tests is named) one, losses none.
    pub fn events(&self) -> usize {
        self.threads
            .values()
            .flatten()
            .filter(|r| match r.kind {
                Kind::Entry(_) => !r.name.starts_with("ttrace:"),
                Kind::Exit => true,
                Kind::Lost(_) => false,
            })
            .count()
    }

    /// Every thread's records as `uftrace dump` shows them.
    pub fn dump_lines(&self) -> HashMap<u32, Vec<(String, String, String, u32)>> {
        self.threads
            .iter()
            .map(|(tid, r)| (*tid, r.iter().map(Record::dump_line).collect()))
            .collect()
    }
}

/// A failure to read a data directory: what and where.
pub type Error = String;

fn text(dir: &Path, name: &str) -> Result<String, Error> {
    std::fs::read_to_string(dir.join(name)).map_err(|e| format!("{name}: {e}"))
}

/// Reads the uftrace data directory `dir`.
pub fn read(dir: &Path) -> Result<Data, Error> {
    let info = std::fs::read(dir.join("info")).map_err(|e| format!("info: {e}"))?;
    if info.len() < 40 || &info[..8] != b"Ftrace!\0" {
        return Err("info: not a uftrace header".into());
    }
    let u16_at = |i: usize| u16::from_le_bytes([info[i], info[i + 1]]);
    let u64_at = |i: usize| u64::from_le_bytes(info[i..i + 8].try_into().unwrap());
    let version = u32::from_le_bytes(info[8..12].try_into().unwrap());
    if (version, u16_at(12), info[14], info[15]) != (4, 40, 1, 2) {
        return Err("info: not a version 4, 64-bit little-endian header".into());
    }
    let (features, mask) = (u64_at(16), u64_at(24));
    let sections = std::str::from_utf8(&info[40..]).map_err(|_| "info: sections not UTF-8")?;
    let section = |key: &str| -> Vec<&str> {
        sections
            .lines()
            .filter_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .collect()
    };
    let exename = section("exename")
        .first()
        .ok_or("info: no exename")?
        .to_string();
    // argspec: `name@arg1/u64,arg2/s;name2@...`, present exactly when the bits say so.
    let mut argspec: HashMap<String, Vec<String>> = HashMap::new();
    let specs: Vec<&str> = section("argspec")
        .into_iter()
        .filter(|l| !l.starts_with("lines="))
        .collect();
    let mut retspec: HashMap<String, String> = HashMap::new();
    for spec in section("retspec").iter().flat_map(|l| l.split(';')) {
        match spec.split_once("@retval/") {
            Some((name, ty)) if ty == "s" => retspec.insert(name.to_string(), ty.to_string()),
            _ => return Err(format!("retspec `{spec}`")),
        };
    }
    // The section (its info bit) holds the argument specs, the return value specs or both,
    // each there exactly when its feature bit says records may carry it.
    if (features & FEAT_ARGUMENT != 0, mask & INFO_ARG_SPEC != 0)
        != (!specs.is_empty(), !specs.is_empty() || !retspec.is_empty())
    {
        return Err("info: argspec section and its feature bits disagree".into());
    }
    if (features & FEAT_RETVAL != 0) == retspec.is_empty() {
        return Err("info: retspec section and its feature bit disagree".into());
    }
    for spec in specs.iter().flat_map(|l| l.split(';')) {
        let (name, args) = spec.split_once('@').ok_or(format!("argspec `{spec}`"))?;
        let types = args
            .split(',')
            .enumerate()
            .map(|(i, a)| match a.split_once('/') {
                Some((n, t)) if n == format!("arg{}", i + 1) => Ok(t.to_string()),
                _ => Err(format!("argspec `{spec}`: `{a}`")),
            })
            .collect::<Result<_, _>>()?;
        if argspec.insert(name.to_string(), types).is_some() {
            return Err(format!("argspec: {name} twice"));
        }
    }
    // task.txt: sessions and their map files, tasks.
    let mut sessions = Vec::new();
    let mut tasks = Vec::new();
    let mut maps: HashMap<u32, u64> = HashMap::new();
    for l in text(dir, "task.txt")?.lines() {
        let field = |key: &str| {
            l.split(' ')
                .find_map(|f| f.strip_prefix(key)?.strip_prefix('='))
                .ok_or(format!("task.txt: no {key} in `{l}`"))
        };
        let num = |key: &str| -> Result<u32, Error> {
            field(key)?.parse().map_err(|_| format!("task.txt: `{l}`"))
        };
        if l.starts_with("SESS ") {
            let pid = num("pid")?;
            let name = l
                .split_once("exename=\"")
                .and_then(|(_, r)| r.strip_suffix('"'))
                .ok_or(format!("task.txt: `{l}`"))?;
            let map = text(dir, &format!("sid-{}.map", field("sid")?))?;
            let start = map
                .lines()
                .find(|m| m.ends_with(&format!(" {exename}")))
                .and_then(|m| u64::from_str_radix(m.split('-').next()?, 16).ok())
                .ok_or(format!("sid map of {pid}: no mapping of {exename}"))?;
            maps.insert(pid, start);
            sessions.push((pid, name.to_string()));
        } else if l.starts_with("TASK ") {
            tasks.push((num("tid")?, num("pid")?));
        } else {
            return Err(format!("task.txt: `{l}`"));
        }
    }
    // Symbols of the module, by offset.
    let module = exename.rsplit('/').next().unwrap_or(&exename);
    let mut symbols: HashMap<u64, String> = HashMap::new();
    for l in text(dir, &format!("{module}.sym"))?
        .lines()
        .filter(|l| !l.starts_with('#'))
    {
        let mut f = l.splitn(3, ' ');
        let (Some(off), Some(_), Some(name)) = (f.next(), f.next(), f.next()) else {
            return Err(format!("{module}.sym: `{l}`"));
        };
        let off = u64::from_str_radix(off, 16).map_err(|_| format!("{module}.sym: `{l}`"))?;
        symbols.insert(off, name.to_string());
    }
    for other in ["events.txt", "extern.dat"] {
        if dir.join(other).exists() {
            return Err(format!("{other}: the export writes no user events"));
        }
    }
    let tids: Vec<u32> = section("taskinfo")
        .iter()
        .find_map(|l| l.strip_prefix("tids="))
        .ok_or("info: no taskinfo:tids")?
        .split(',')
        .map(|t| t.parse().map_err(|_| format!("taskinfo: tid `{t}`")))
        .collect::<Result<_, _>>()?;
    let mut threads = BTreeMap::new();
    for tid in tids {
        let pid = tasks
            .iter()
            .find(|(t, _)| *t == tid)
            .ok_or(format!("{tid}: no TASK"))?
            .1;
        let base = *maps
            .get(&pid)
            .ok_or(format!("{tid}: no session of pid {pid}"))?;
        let bytes =
            std::fs::read(dir.join(format!("{tid}.dat"))).map_err(|e| format!("{tid}.dat: {e}"))?;
        let resolve = |addr: u64| -> Result<String, Error> {
            addr.checked_sub(base)
                .and_then(|off| symbols.get(&off).cloned())
                .ok_or(format!("{tid}.dat: no symbol at {addr:#x}"))
        };
        let mut records = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let word = |i: usize| -> Result<u64, Error> {
                bytes
                    .get(i..i + 8)
                    .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
                    .ok_or(format!("{tid}.dat: record cut at {i}"))
            };
            let (ns, w) = (word(at)?, word(at + 8)?);
            at += 16;
            let (kind, more, magic) = (w & 3, w >> 2 & 1 == 1, w >> 3 & 7);
            let (depth, addr) = ((w >> 6 & 1023) as u32, w >> 16);
            if magic != 5 {
                return Err(format!(
                    "{tid}.dat: record at {} without uftrace's magic",
                    at - 16
                ));
            }
            let (name, kind) = match kind {
                0 => {
                    let name = resolve(addr)?;
                    let args = match more {
                        false => Vec::new(),
                        true => {
                            let spec = argspec
                                .get(&name)
                                .ok_or(format!("{tid}.dat: {name} has arguments and no argspec"))?;
                            arguments(&bytes, &mut at, spec)
                                .map_err(|e| format!("{tid}.dat: {name}: {e}"))?
                        }
                    };
                    (name, Kind::Entry(args))
                }
                1 => (resolve(addr)?, Kind::Exit),
                2 => (String::new(), Kind::Lost(addr)),
                _ => return Err(format!("{tid}.dat: a user event at {}", at - 16)),
            };
            let mut data = None;
            if more && kind == Kind::Exit {
                let spec = retspec.get(&name).ok_or(format!(
                    "{tid}.dat: {name} returns a value and has no retspec"
                ))?;
                match arguments(&bytes, &mut at, std::slice::from_ref(spec))
                    .map_err(|e| format!("{tid}.dat: {name}: {e}"))?
                    .pop()
                {
                    Some(Arg::Str(s)) => data = Some(s),
                    other => return Err(format!("{tid}.dat: {name} returns {other:?}")),
                }
            } else if more && !matches!(kind, Kind::Entry(_)) {
                return Err(format!("{tid}.dat: a {kind:?} record with data"));
            }
            records.push(Record {
                ns,
                name,
                depth,
                kind,
                data,
            });
        }
        threads.insert(tid, records);
    }
    // perf-cpu0.dat: PERF_RECORD_COMM records (the only kind written), present exactly when
    // the feature bit says so.
    let mut names = BTreeMap::new();
    match std::fs::read(dir.join("perf-cpu0.dat")) {
        Ok(_) if features & FEAT_PERF_EVENT == 0 => {
            return Err("perf-cpu0.dat without the PERF_EVENT feature".into())
        }
        Ok(perf) => {
            let mut at = 0;
            while at < perf.len() {
                let u32_at = |i: usize| -> Result<u32, Error> {
                    perf.get(i..i + 4)
                        .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
                        .ok_or(format!("perf-cpu0.dat: cut at {i}"))
                };
                let (ty, size) = (u32_at(at)?, (u32_at(at + 4)? >> 16) as usize);
                if ty != 3 || size < 40 || at + size > perf.len() {
                    return Err(format!("perf-cpu0.dat: record at {at}"));
                }
                let tid = u32_at(at + 12)?;
                let comm = &perf[at + 16..at + size - 16];
                let end = comm
                    .iter()
                    .position(|&b| b == 0)
                    .ok_or("perf-cpu0.dat: comm")?;
                if end >= 16 {
                    return Err(format!(
                        "perf-cpu0.dat: name of {tid} longer than uftrace keeps"
                    ));
                }
                let name = std::str::from_utf8(&comm[..end]).map_err(|_| "comm not UTF-8")?;
                names.insert(tid, name.to_string());
                at += size;
            }
        }
        Err(_) if features & FEAT_PERF_EVENT != 0 => {
            return Err("PERF_EVENT feature without perf-cpu0.dat".into())
        }
        Err(_) => {}
    }
    Ok(Data {
        exename,
        sessions,
        tasks,
        threads,
        names,
    })
}

/// The arguments after an entry record at `*at`, typed by `spec`: integers in 8 bytes, a
/// string as a `u16` length and its bytes padded to 4; the whole padded to 8.
fn arguments(bytes: &[u8], at: &mut usize, spec: &[String]) -> Result<Vec<Arg>, Error> {
    let start = *at;
    let take = |at: &mut usize, n: usize| -> Result<&[u8], Error> {
        let s = bytes
            .get(*at..*at + n)
            .ok_or("arguments run past the file")?;
        *at += n;
        Ok(s)
    };
    let mut args = Vec::new();
    for ty in spec {
        let arg = if ty == "s" {
            let len = u16::from_le_bytes(take(at, 2)?.try_into().unwrap()) as usize;
            let s = std::str::from_utf8(take(at, len)?).map_err(|_| "string not UTF-8")?;
            *at = start + (*at - start).next_multiple_of(4);
            Arg::Str(s.to_string())
        } else {
            let w = u64::from_le_bytes(take(at, 8)?.try_into().unwrap());
            match ty.as_str() {
                "u64" => Arg::Unsigned(w),
                "i64" => Arg::Signed(w as i64),
                "x64" => Arg::Hex(w),
                "f64" => Arg::Float(f64::from_bits(w)),
                _ => return Err(format!("argument type {ty}")),
            }
        };
        args.push(arg);
    }
    *at = start + (*at - start).next_multiple_of(8);
    if *at > bytes.len() {
        return Err("argument padding runs past the file".into());
    }
    Ok(args)
}
