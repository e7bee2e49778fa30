//! A reader of the Perfetto traces `ttrace-reader export --format perfetto` writes, so that
//! every machine checks an export's content without Perfetto's tools: the protobuf wire
//! format decoded field by field, the packets' sequences followed (interned strings defined
//! before use, incremental state cleared first), tracks resolved to their process and
//! thread, each event's time put on the wall clock through the clock snapshots. It reads
//! the fields ttrace writes and fails loudly on a malformed message.

use std::collections::HashMap;

/// A decoded field: its number and value.
#[derive(Clone, Debug)]
pub(crate) enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
}

/// The fields of one message, in order.
pub(crate) fn fields(mut b: &[u8]) -> Result<Vec<(u32, Wire<'_>)>, String> {
    let mut out = Vec::new();
    let varint = |b: &mut &[u8]| -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = b.split_first().ok_or("a varint cut short")?;
            *b = rest;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("a varint of more than ten bytes".into())
    };
    while !b.is_empty() {
        let key = varint(&mut b)?;
        let field = (key >> 3) as u32;
        let wire = match key & 7 {
            0 => Wire::Varint(varint(&mut b)?),
            1 => {
                let (w, rest) = b.split_at_checked(8).ok_or("a fixed64 cut short")?;
                b = rest;
                Wire::Fixed64(u64::from_le_bytes(w.try_into().unwrap()))
            }
            2 => {
                let len = varint(&mut b)? as usize;
                let (w, rest) = b.split_at_checked(len).ok_or("a length past the end")?;
                b = rest;
                Wire::Bytes(w)
            }
            other => return Err(format!("wire type {other} of field {field}")),
        };
        out.push((field, wire));
    }
    Ok(out)
}

pub(crate) fn bytes<'a>(f: &[(u32, Wire<'a>)], n: u32) -> Option<&'a [u8]> {
    f.iter().find_map(|(k, w)| match (k, w) {
        (k, Wire::Bytes(b)) if *k == n => Some(*b),
        _ => None,
    })
}

pub(crate) fn varint(f: &[(u32, Wire<'_>)], n: u32) -> Option<u64> {
    f.iter().find_map(|(k, w)| match (k, w) {
        (k, Wire::Varint(v)) if *k == n => Some(*v),
        _ => None,
    })
}

fn text(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|e| e.to_string())
}

/// A debug annotation's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Bool(bool),
    Uint(u64),
    Int(i64),
    Double(f64),
    Str(String),
    Pointer(u64),
}

/// `BUILTIN_CLOCK_REALTIME`.
pub const REALTIME: u64 = 1;

/// A `ClockSnapshot` packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClockSnapshot {
    /// The sequence it is on, if any.
    pub sequence: Option<u64>,
    /// Its clocks: (id, time).
    pub clocks: Vec<(u64, u64)>,
    /// The trace's clock it names, if it does.
    pub primary: Option<u64>,
}

/// One track event, resolved.
#[derive(Clone, Debug)]
pub struct Event {
    /// Nanoseconds since the device was created (the packet's timestamp).
    pub ns: u64,
    /// Its time on the wall clock (ns since the Unix epoch), through the snapshot of its
    /// clock.
    pub realtime: u64,
    /// `1` slice begin, `2` slice end, `3` instant, `4` counter.
    pub kind: u64,
    /// Its name and category (a counter's: its track's name, and none).
    pub name: String,
    pub category: String,
    /// The process and thread whose sequence it is on: the writer's.
    pub pid: u64,
    pub tid: u64,
    /// Whether its track is that thread's (else an async or counter track).
    pub on_thread: bool,
    /// Its track.
    pub track: u64,
    /// Its debug annotations, in order.
    pub args: Vec<(String, Value)>,
    /// Its flows.
    pub flows: Vec<u64>,
    /// A counter's value.
    pub value: Option<Value>,
}

impl Trace {
    /// Checks that the slices of each track nest: every end closes a slice begun on its
    /// track (in time order, packets of the same time in file order).
    pub fn check_nesting(&self) -> Result<(), String> {
        let mut events: Vec<&Event> = self.events.iter().collect();
        events.sort_by_key(|e| e.ns);
        let mut depth: HashMap<u64, usize> = HashMap::new();
        for e in events {
            let d = depth.entry(e.track).or_default();
            match e.kind {
                1 => *d += 1,
                2 if *d == 0 => {
                    return Err(format!(
                        "{} at {} ends no slice on {}",
                        e.name, e.ns, e.track
                    ))
                }
                2 => *d -= 1,
                _ => {}
            }
        }
        Ok(())
    }
}

/// A slice: a begin and the end that closes it on its track (in time order, packets of
/// the same time in file order), or an instant.
#[derive(Clone, Debug)]
pub struct Slice {
    pub track: u64,
    /// Indexes in [`Trace::events`] of its begin (or instant) and of its end, if any.
    pub begin: usize,
    pub end: Option<usize>,
    /// The slices open on its track when it began, outermost first (indexes in what
    /// [`Trace::slices`] returns).
    pub under: Vec<usize>,
}

impl Trace {
    /// The slices of every track, in order of their beginning.
    pub fn slices(&self) -> Vec<Slice> {
        let mut order: Vec<usize> = (0..self.events.len()).collect();
        order.sort_by_key(|&i| self.events[i].ns);
        let mut open: HashMap<u64, Vec<usize>> = HashMap::new();
        let mut out: Vec<Slice> = Vec::new();
        for i in order {
            let e = &self.events[i];
            let stack = open.entry(e.track).or_default();
            match e.kind {
                1 | 3 => {
                    out.push(Slice {
                        track: e.track,
                        begin: i,
                        end: None,
                        under: stack.clone(),
                    });
                    if e.kind == 1 {
                        stack.push(out.len() - 1);
                    }
                }
                2 => {
                    if let Some(s) = stack.pop() {
                        out[s].end = Some(i);
                    }
                }
                _ => {}
            }
        }
        out
    }
}

/// A Perfetto trace as this reader reads it.
#[derive(Debug, Default)]
pub struct Trace {
    pub events: Vec<Event>,
    /// The clock snapshots, in order.
    pub snapshots: Vec<ClockSnapshot>,
    /// Thread tracks: uuid -> (pid, tid, name).
    pub threads: HashMap<u64, (u64, u64, Option<String>)>,
    /// Process tracks: uuid -> (pid, name).
    pub processes: HashMap<u64, (u64, Option<String>)>,
    /// Other tracks: uuid -> (parent, name).
    pub tracks: HashMap<u64, (u64, Option<String>)>,
}

/// Reads the trace `data`, checking that each sequence clears its state first and that
/// every interned string is defined before it is used, and every track described.
pub fn read(data: &[u8]) -> Result<Trace, String> {
    let mut trace = Trace::default();
    // Per sequence: interned strings by (kind, iid).
    let mut interned: HashMap<u64, HashMap<(u32, u64), String>> = HashMap::new();
    // Per sequence: its default track, and its clock.
    let mut default_track: HashMap<u64, u64> = HashMap::new();
    let mut default_clock: HashMap<u64, u64> = HashMap::new();
    // The trace's clock, and per clock of a sequence ((sequence, id)): its time and the
    // wall clock's then.
    let mut trace_clock = None;
    let mut clocks: HashMap<(u64, u64), (u64, u64)> = HashMap::new();
    let mut pending = Vec::new();
    for (n, w) in fields(data)? {
        let (1, Wire::Bytes(packet)) = (n, w) else {
            return Err(format!("field {n} in Trace"));
        };
        let p = fields(packet)?;
        if let Some(c) = bytes(&p, 6) {
            let c = fields(c)?;
            let mut snapshot = ClockSnapshot {
                sequence: varint(&p, 10),
                clocks: Vec::new(),
                primary: varint(&c, 2),
            };
            for (k, w) in &c {
                if let (1, Wire::Bytes(clock)) = (k, w) {
                    let clock = fields(clock)?;
                    let id = varint(&clock, 1).ok_or("a clock without an id")?;
                    snapshot
                        .clocks
                        .push((id, varint(&clock, 2).ok_or("a clock without a time")?));
                }
            }
            match (trace_clock, snapshot.primary) {
                (None, Some(c)) => trace_clock = Some(c),
                (None, None) => return Err("the first clock snapshot names no trace clock".into()),
                (Some(t), Some(c)) if t != c => {
                    return Err(format!("a clock snapshot names clock {c}, not {t}"))
                }
                _ => {}
            }
            let wall = snapshot
                .clocks
                .iter()
                .find(|c| c.0 == REALTIME)
                .ok_or("a clock snapshot without REALTIME")?
                .1;
            for &(id, at) in &snapshot.clocks {
                if (64..128).contains(&id) {
                    let seq = snapshot
                        .sequence
                        .ok_or("a sequence's clock on no sequence")?;
                    clocks.insert((seq, id), (at, wall));
                }
            }
            trace.snapshots.push(snapshot);
            continue;
        }
        if let Some(d) = bytes(&p, 60) {
            let d = fields(d)?;
            let uuid = varint(&d, 1).ok_or("a track without a uuid")?;
            if let Some(pr) = bytes(&d, 3) {
                let pr = fields(pr)?;
                let name = bytes(&pr, 6).map(text).transpose()?;
                trace
                    .processes
                    .insert(uuid, (varint(&pr, 1).unwrap_or(0), name));
            } else if let Some(t) = bytes(&d, 4) {
                let t = fields(t)?;
                let name = bytes(&t, 5).map(text).transpose()?;
                let (pid, tid) = (varint(&t, 1).unwrap_or(0), varint(&t, 2).unwrap_or(0));
                trace.threads.insert(uuid, (pid, tid, name));
            } else {
                let parent = varint(&d, 5).ok_or("a track without a parent")?;
                let name = bytes(&d, 2).map(text).transpose()?;
                trace.tracks.insert(uuid, (parent, name));
            }
            continue;
        }
        let Some(e) = bytes(&p, 11) else {
            return Err("a packet with neither a track, a clock snapshot nor an event".into());
        };
        let seq = varint(&p, 10).ok_or("an event without a sequence")?;
        let flags = varint(&p, 13).unwrap_or(0);
        let strings = match (interned.contains_key(&seq), flags) {
            (false, 1) => interned.entry(seq).or_default(),
            (false, _) => return Err(format!("sequence {seq} does not clear its state first")),
            (true, 2) => interned.get_mut(&seq).unwrap(),
            (true, f) => return Err(format!("sequence {seq}: flags {f} after its first packet")),
        };
        if let Some(d) = bytes(&p, 59) {
            if flags != 1 {
                return Err(format!("defaults on {seq} without its state cleared"));
            }
            let d = fields(d)?;
            let track = bytes(&d, 11)
                .map(fields)
                .transpose()?
                .and_then(|t| varint(&t, 11));
            if let Some(track) = track {
                default_track.insert(seq, track);
            }
            if let Some(clock) = varint(&d, 58) {
                default_clock.insert(seq, clock);
            }
        }
        if let Some(d) = bytes(&p, 12) {
            for (kind, entry) in fields(d)? {
                let Wire::Bytes(entry) = entry else {
                    return Err("interned data of another wire type".into());
                };
                let entry = fields(entry)?;
                let iid = varint(&entry, 1).ok_or("an interned string without an iid")?;
                let name = text(bytes(&entry, 2).ok_or("an interned string without its text")?)?;
                if strings.insert((kind, iid), name).is_some() {
                    return Err(format!("iid {iid} of kind {kind} defined twice on {seq}"));
                }
            }
        }
        let e = fields(e)?;
        let lookup = |kind: u32, iid: Option<u64>| -> Result<String, String> {
            let iid = iid.ok_or("an event without a name or a category")?;
            strings.get(&(kind, iid)).cloned().ok_or(format!(
                "iid {iid} of kind {kind} used before it is defined on {seq}"
            ))
        };
        let mut args = Vec::new();
        let flows = e
            .iter()
            .filter_map(|(n, w)| match (n, w) {
                (47, Wire::Fixed64(f)) => Some(*f),
                _ => None,
            })
            .collect();
        for (n, w) in &e {
            let (4, Wire::Bytes(a)) = (n, w) else {
                continue;
            };
            let a = fields(a)?;
            let name = lookup(3, varint(&a, 1))?;
            let value = a.iter().find_map(|(k, w)| match (k, w) {
                (2, Wire::Varint(v)) => Some(Value::Bool(*v != 0)),
                (3, Wire::Varint(v)) => Some(Value::Uint(*v)),
                (4, Wire::Varint(v)) => Some(Value::Int(*v as i64)),
                (5, Wire::Fixed64(v)) => Some(Value::Double(f64::from_bits(*v))),
                (6, Wire::Bytes(b)) => Some(Value::Str(String::from_utf8_lossy(b).into_owned())),
                (7, Wire::Varint(v)) => Some(Value::Pointer(*v)),
                _ => None,
            });
            args.push((name, value.ok_or("an annotation without a value")?));
        }
        let kind = varint(&e, 9).ok_or("an event without a type")?;
        let (name, category, value) = match kind {
            4 => {
                let value = e.iter().find_map(|(k, w)| match (k, w) {
                    (30, Wire::Varint(v)) => Some(Value::Int(*v as i64)),
                    (44, Wire::Fixed64(v)) => Some(Value::Double(f64::from_bits(*v))),
                    _ => None,
                });
                (
                    String::new(),
                    String::new(),
                    Some(value.ok_or("a counter without a value")?),
                )
            }
            _ => (lookup(2, varint(&e, 10))?, lookup(1, varint(&e, 3))?, None),
        };
        let thread = *default_track
            .get(&seq)
            .ok_or("a sequence without a default track")?;
        let ns = varint(&p, 8).ok_or("an event without a timestamp")?;
        let clock = varint(&p, 58).or(default_clock.get(&seq).copied());
        let realtime = match clock {
            None => (trace_clock == Some(REALTIME)).then_some(ns),
            Some(c) if Some(c) == trace_clock && c == REALTIME => Some(ns),
            Some(c) => clocks
                .get(&(seq, c))
                .and_then(|&(at, wall)| (wall + ns).checked_sub(at)),
        }
        .ok_or(format!(
            "an event on {seq} whose clock no snapshot before it ties to REALTIME"
        ))?;
        pending.push((
            thread,
            Event {
                ns,
                realtime,
                kind,
                name,
                category,
                pid: 0,
                tid: 0,
                on_thread: false,
                track: varint(&e, 11).unwrap_or(thread),
                args,
                flows,
                value,
            },
        ));
    }
    for (thread, mut e) in pending {
        let &(pid, tid, _) = trace
            .threads
            .get(&thread)
            .ok_or(format!("a sequence's track {thread} is no thread's"))?;
        (e.pid, e.tid, e.on_thread) = (pid, tid, e.track == thread);
        // Every track is described, and leads up to a process.
        let mut up = e.track;
        for _ in 0..8 {
            if trace.processes.contains_key(&up) {
                break;
            }
            up = match (trace.threads.get(&up), trace.tracks.get(&up)) {
                (Some(_), _) => trace
                    .processes
                    .iter()
                    .find(|(_, p)| p.0 == pid)
                    .map(|(u, _)| *u)
                    .ok_or(format!("thread track {up} of no process"))?,
                (None, Some((parent, name))) => {
                    if e.kind == 4 && e.name.is_empty() {
                        e.name = name.clone().unwrap_or_default();
                    }
                    *parent
                }
                (None, None) => return Err(format!("an event on track {up}, never described")),
            };
        }
        trace.events.push(e);
    }
    Ok(trace)
}
