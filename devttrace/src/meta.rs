//! Metadata: tracepoint definitions (appended to the device's metadata area and never
//! overwritten), and thread and process names with the time each took effect (kept in the
//! names area, see [`crate::names`]).

use crate::sync::Ordering::Relaxed;
use crate::values::{ValueTable, ValuesKind};
use core::sync::atomic::AtomicU64;
use ttrace_layouts::entry::Kind;
use ttrace_layouts::meta::{
    self as layout, record_bytes, ArgType, Record, RecordHeader, RecordKind, TaskRecord,
};
use ttrace_layouts::role::Role;
use zerocopy::IntoBytes;

/// What a tracepoint is: the part of its definition that travels in the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Definition {
    /// Name, e.g. `sched_switch`; wildcard rules match it.
    pub name: &'static str,
    /// What it marks.
    pub kind: Kind,
    /// Class bits, tested against the device's type mask.
    pub classes: u64,
    /// Format of its arguments, e.g. `prev={prev} next={next:x}`.
    pub format: &'static str,
    /// Number of argument words (the placeholders of `format`).
    pub nargs: u8,
    /// The Rust type of each argument, or empty where the format alone says how to show
    /// them (a definition made at run time). A trace point registers with its own.
    pub types: &'static [ArgType],
    /// The value tables the format's specs name ([`crate::values`]).
    pub tables: &'static [&'static ValueTable],
    /// What its events mean beyond their kind ([`Role::Point`] for a native trace point;
    /// `kind` is then the role's own, [`Role::kind`]).
    pub role: Role,
}

impl Definition {
    /// A definition with untyped arguments and no value tables (the format's specs alone
    /// say how to show them), for tracepoints made at run time.
    ///
    /// ```
    /// use devttrace::{meta::Definition, Kind};
    /// let d = Definition::untyped("tick", Kind::Start, 1, "n={n} at={at:x}");
    /// assert_eq!(d.nargs, 2);
    /// ```
    pub const fn untyped(
        name: &'static str,
        kind: Kind,
        classes: u64,
        format: &'static str,
    ) -> Definition {
        Definition {
            name,
            kind,
            classes,
            format,
            nargs: ttrace_layouts::format::count_args(format) as u8,
            types: &[],
            tables: &[],
            role: Role::Point,
        }
    }

    /// The same definition with `role`, and the kind the role is recorded with.
    ///
    /// ```
    /// use devttrace::{meta::Definition, Kind, Role};
    /// let d = Definition::untyped("handle", Kind::Start, 1 << 10, "id={id}").with_role(Role::SpanEnter);
    /// assert_eq!((d.kind, d.role), (Kind::Entry, Role::SpanEnter));
    /// ```
    pub const fn with_role(self, role: Role) -> Definition {
        Definition {
            kind: match role.kind() {
                Some(k) => k,
                None => self.kind,
            },
            role,
            ..self
        }
    }

    /// The record's `kind` byte: the kind, and the role in the high half.
    pub const fn kind_byte(&self) -> u8 {
        self.role.kind_byte(self.kind)
    }
}

/// A tracepoint definition read back from a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TracepointInfo {
    /// Its id.
    pub id: u16,
    /// Name.
    pub name: String,
    /// Kind.
    pub kind: Kind,
    /// Class bits.
    pub classes: u64,
    /// Format string.
    pub format: String,
    /// Number of argument words.
    pub nargs: u8,
    /// Each argument's Rust type ([`ArgType::Unknown`] where not recorded), `nargs` of them.
    pub types: Vec<ArgType>,
    /// Each argument's value table, an index in [`Metadata::values`], `nargs` of them.
    pub tables: Vec<Option<usize>>,
    /// What its events mean beyond their kind ([`Role::Point`] for a native trace point).
    pub role: Role,
}

impl TracepointInfo {
    /// Its `tracing` level, for a `tracing` callsite's tracepoint (a native point's class
    /// bits mean what its program says, not a level).
    pub fn level(&self) -> Option<ttrace_layouts::level::Level> {
        match self.role {
            Role::Point => None,
            _ => ttrace_layouts::level::Level::of_classes(self.classes),
        }
    }

    /// Whether it is the tracepoint of `info()` messages (named
    /// [`INFO_NAME`](ttrace_layouts::device::INFO_NAME), of class
    /// [`CLASS_MESSAGES`](ttrace_layouts::device::CLASS_MESSAGES), with
    /// [`INFO_FORMAT`](ttrace_layouts::device::INFO_FORMAT)): readers show its events as
    /// messages.
    pub fn is_message(&self) -> bool {
        use ttrace_layouts::device::{CLASS_MESSAGES, INFO_FORMAT, INFO_NAME};
        self.name == INFO_NAME
            && self.classes == CLASS_MESSAGES
            && self.format == INFO_FORMAT
            && self.nargs == 1
    }

    /// Its string arguments (whose words refer to aux records), bit `i` for argument `i`:
    /// those whose spec is `s`, and those with no spec that were recorded as strings.
    pub fn string_args(&self) -> u16 {
        use ttrace_layouts::format::{Letter, Token, Tokens};
        Tokens::new(&self.format)
            .filter_map(|t| match t {
                Token::Arg { index, spec, .. } => Some((index, spec)),
                Token::Text(_) => None,
            })
            .filter(|&(i, spec)| {
                let ty = self.types.get(i).copied().unwrap_or_default();
                let letter = match spec {
                    "" => Some(Letter::of_type(ty)),
                    spec => Letter::of(spec.as_bytes()),
                };
                i < 16 && letter == Some(Letter::Str)
            })
            .fold(0, |mask, (i, _)| mask | 1 << i)
    }
}

/// A value table read back from a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValuesInfo {
    /// Its offset in the records area (how tracepoint records name it).
    pub offset: u64,
    /// Name.
    pub name: String,
    /// Flags or enum.
    pub kind: ValuesKind,
    /// Names and values, in the order defined.
    pub entries: Vec<(String, u64)>,
}

impl ValuesInfo {
    /// Writes `value` as this table names it; false, having written nothing, for an enum
    /// value with no name. See [`crate::values::show`].
    pub fn show(&self, out: &mut Vec<u8>, value: u64) -> bool {
        crate::values::show(
            out,
            self.kind,
            self.entries.iter().map(|(n, v)| (n.as_str(), *v)),
            value,
        )
    }
}

/// A thread or process name read back from a device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskInfo {
    /// Process id.
    pub pid: u32,
    /// Thread id (0 for a process).
    pub tid: u32,
    /// When it took effect (the thread's first event, or its rename).
    pub timestamp: u64,
    /// Name.
    pub name: String,
    /// Whether the same thread took a new name (else a new thread got this id).
    pub renamed: bool,
}

impl TaskInfo {
    /// What tells records apart: the id and the time (an id takes one name at a time).
    pub fn key(&self) -> (u32, u32, u64) {
        (self.pid, self.tid, self.timestamp)
    }
}

/// Everything in a device's metadata: tracepoints, and thread and process names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Metadata {
    /// Tracepoints, by id.
    pub tracepoints: Vec<TracepointInfo>,
    /// Value tables, in the order recorded.
    pub values: Vec<ValuesInfo>,
    /// Thread names, in time order (a thread id has one record per name it took).
    pub threads: Vec<TaskInfo>,
    /// Process names, in time order.
    pub processes: Vec<TaskInfo>,
    /// The first malformed record, if any ended a walk.
    pub error: Option<layout::MetaError>,
    /// The generation of the names area the names were copied from.
    pub names_generation: u64,
    /// Names still needed by events were evicted from the names area (see
    /// [`crate::names`]), each of whose events is stamped before this: an event before it
    /// whose id has no record at or before it shows unnamed. 0 if none was.
    pub names_evicted_before: u64,
    /// Names evicted so far (all compactions of the device).
    pub names_evicted: u64,
}

impl Metadata {
    /// Parses a copy of the tracepoint records area. Names that are not UTF-8 are decoded
    /// lossily.
    pub fn parse(area: &[u8]) -> Metadata {
        let mut m = Metadata::default();
        m.add(area);
        m.sort_names();
        m
    }

    /// Parses a copy of the tracepoint records area and one of the names area.
    pub fn parse_parts(records: &[u8], names: &[u8], names_generation: u64) -> Metadata {
        let mut m = Metadata::default();
        m.add(records);
        m.add(names);
        m.sort_names();
        m.names_generation = names_generation;
        m
    }

    fn sort_names(&mut self) {
        // Stable: records of one id with equal times keep their order (the later wins).
        self.threads.sort_by_key(|t| t.timestamp);
        self.processes.sort_by_key(|t| t.timestamp);
    }

    /// Adds the names of `other` that this copy does not have (a copy taken before a
    /// compaction reclaimed them).
    pub fn merge_names(&mut self, other: &Metadata) {
        self.names_evicted_before = self.names_evicted_before.max(other.names_evicted_before);
        self.names_evicted = self.names_evicted.max(other.names_evicted);
        for (mine, theirs) in [
            (&mut self.threads, &other.threads),
            (&mut self.processes, &other.processes),
        ] {
            let have: std::collections::HashSet<_> = mine.iter().map(TaskInfo::key).collect();
            let missing: Vec<TaskInfo> = theirs
                .iter()
                .filter(|t| !have.contains(&t.key()))
                .cloned()
                .collect();
            mine.extend(missing);
        }
        self.sort_names();
    }

    fn add(&mut self, area: &[u8]) {
        let m = self;
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let mut walk = layout::records(area);
        loop {
            let offset = walk.offset() as u64;
            let Some(r) = walk.next() else { break };
            match r {
                Ok(Record::Tracepoint {
                    def,
                    name,
                    format,
                    tables,
                }) => {
                    let n = def.nargs as usize;
                    let table = |i| {
                        let at = layout::table_ref(tables, i)?;
                        m.values.iter().position(|v| v.offset == at)
                    };
                    let tables = (0..n).map(table).collect();
                    m.tracepoints.push(TracepointInfo {
                        id: def.id as u16,
                        name: text(name),
                        kind: Kind::from_bits(def.kind as u64),
                        role: Role::of_kind_byte(def.kind),
                        classes: def.classes,
                        format: text(format),
                        nargs: def.nargs,
                        types: (0..n).map(|i| ArgType::unpack(&def.types, i)).collect(),
                        tables,
                    })
                }
                Ok(Record::Values {
                    table,
                    name,
                    values,
                    lens,
                    names,
                }) => m.values.push(ValuesInfo {
                    offset,
                    name: text(name),
                    kind: if table.kind == layout::VALUES_FLAGS {
                        ValuesKind::Flags
                    } else {
                        ValuesKind::Enum
                    },
                    entries: layout::value_entries(values, lens, names)
                        .map(|(n, v)| (text(n), v))
                        .collect(),
                }),
                Ok(Record::Thread { task, name }) => m.threads.push(task_info(&task, text(name))),
                Ok(Record::Process { task, name }) => {
                    m.processes.push(task_info(&task, text(name)))
                }
                Ok(Record::Evicted { evicted }) => {
                    // A copy joined from two (`names::union`) may hold two: the later wins.
                    m.names_evicted_before = m.names_evicted_before.max(evicted.before);
                    m.names_evicted = m.names_evicted.max(evicted.count);
                }
                Ok(Record::Unknown { .. }) => {}
                Err(e) => m.error = m.error.or(Some(e)),
            }
        }
    }

    /// The name thread `tid` of process `pid` had at `timestamp`: that of its latest record
    /// at or before it (its first, for an earlier time, unless names were evicted after it:
    /// [`Metadata::names_evicted_before`]). A reused tid has one record per thread, so each
    /// event gets its own writer's name.
    ///
    /// ```
    /// use devttrace::meta::{Metadata, TaskInfo};
    /// let task = |timestamp, name: &str| TaskInfo {
    ///     pid: 1, tid: 2, timestamp, name: name.into(), ..Default::default()
    /// };
    /// let meta = Metadata { threads: vec![task(100, "old"), task(200, "new")], ..Default::default() };
    /// assert_eq!(meta.thread_name_at(1, 2, 150), Some("old"));
    /// assert_eq!(meta.thread_name_at(1, 2, 200), Some("new"));
    /// assert_eq!(meta.thread_name_at(1, 3, 200), None);
    /// ```
    pub fn thread_name_at(&self, pid: u32, tid: u32, timestamp: u64) -> Option<&str> {
        at(&self.threads, timestamp, self.names_evicted_before, |t| {
            t.pid == pid && t.tid == tid
        })
        .map(|t| t.name.as_str())
    }

    /// The name process `pid` had at `timestamp` (as [`Metadata::thread_name_at`]).
    pub fn process_name_at(&self, pid: u32, timestamp: u64) -> Option<&str> {
        at(&self.processes, timestamp, self.names_evicted_before, |t| {
            t.pid == pid
        })
        .map(|t| t.name.as_str())
    }

    /// The latest name recorded for thread `tid` of process `pid`.
    pub fn thread_name(&self, pid: u32, tid: u32) -> Option<&str> {
        self.threads
            .iter()
            .rev()
            .find(|t| t.pid == pid && t.tid == tid)
            .map(|t| t.name.as_str())
    }

    /// The latest name recorded for process `pid`.
    pub fn process_name(&self, pid: u32) -> Option<&str> {
        self.processes
            .iter()
            .rev()
            .find(|t| t.pid == pid)
            .map(|t| t.name.as_str())
    }
}

/// The latest of `tasks` (in time order) matching `id` at or before `timestamp`, else the
/// first matching, unless `timestamp` is before `evicted_before` (the record it needed may
/// have been evicted: it has none).
fn at(
    tasks: &[TaskInfo],
    timestamp: u64,
    evicted_before: u64,
    id: impl Fn(&TaskInfo) -> bool,
) -> Option<&TaskInfo> {
    let mut found = None;
    for t in tasks.iter().filter(|t| id(t)) {
        if t.timestamp > timestamp {
            if found.is_none() && timestamp >= evicted_before {
                found = Some(t);
            }
            break;
        }
        found = Some(t);
    }
    found
}

/// Thread (or process) records by id, for resolving many events: `pid << 32 | tid` for
/// threads, `pid << 32` for processes.
#[derive(Clone, Debug, Default)]
pub struct TaskIndex {
    /// Per id, in time order: `(timestamp, index in the list, incarnation)`.
    by_id: foldhash::HashMap<u64, Vec<(u64, usize, u32)>>,
    /// [`Metadata::names_evicted_before`]: an event before it that precedes all of its id's
    /// records has none.
    evicted_before: u64,
}

/// The record of an id current at some time ([`TaskIndex::at`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Current {
    /// Its position in the list indexed.
    pub index: usize,
    /// The times it is current for (the first record also covers earlier times, the last
    /// all later ones).
    pub during: core::ops::Range<u64>,
    /// Which thread (process) of those that had the id: 0 for the first, one more at each
    /// record that is not a rename.
    pub incarnation: u32,
}

impl TaskIndex {
    /// The index of `meta.threads`.
    pub fn threads(meta: &Metadata) -> TaskIndex {
        TaskIndex::of(&meta.threads, meta.names_evicted_before)
    }

    /// The index of `meta.processes`.
    pub fn processes(meta: &Metadata) -> TaskIndex {
        TaskIndex::of(&meta.processes, meta.names_evicted_before)
    }

    fn of(tasks: &[TaskInfo], evicted_before: u64) -> TaskIndex {
        let mut by_id: foldhash::HashMap<u64, Vec<(u64, usize, u32)>> = Default::default();
        for (i, t) in tasks.iter().enumerate() {
            let list = by_id
                .entry((t.pid as u64) << 32 | t.tid as u64)
                .or_default();
            let incarnation = match list.last() {
                Some(&(_, _, k)) => k + !t.renamed as u32,
                None => 0,
            };
            list.push((t.timestamp, i, incarnation));
        }
        TaskIndex {
            by_id,
            evicted_before,
        }
    }

    /// The record of `id` current at `timestamp`, or `None` if it has none: no record of
    /// the id at all, or none at or before `timestamp` while that is before
    /// [`Metadata::names_evicted_before`] (its record may have been evicted; otherwise the
    /// id's first record also covers earlier times).
    ///
    /// ```
    /// use devttrace::meta::{Metadata, TaskIndex, TaskInfo};
    /// let task = |timestamp, name: &str| TaskInfo {
    ///     pid: 1, tid: 2, timestamp, name: name.into(), ..Default::default()
    /// };
    /// let meta = Metadata { threads: vec![task(100, "a"), task(200, "b")], ..Default::default() };
    /// let index = TaskIndex::threads(&meta);
    /// assert_eq!(index.at(1 << 32 | 2, 150).unwrap().during, 0..200);
    /// let later = index.at(1 << 32 | 2, 250).unwrap();
    /// assert_eq!((later.index, later.during, later.incarnation), (1, 200..u64::MAX, 1));
    /// // Names evicted before 50: an event at 40 has none, one at 60 takes the first.
    /// let evicted = Metadata { names_evicted_before: 50, ..meta };
    /// let index = TaskIndex::threads(&evicted);
    /// assert_eq!(index.at(1 << 32 | 2, 40), None);
    /// assert_eq!(index.at(1 << 32 | 2, 60).unwrap().during, 50..200);
    /// ```
    pub fn at(&self, id: u64, timestamp: u64) -> Option<Current> {
        self.resolve(id, timestamp).ok()
    }

    /// [`TaskIndex::at`], or, where it has no record, the times around `timestamp` for which
    /// the id has none.
    ///
    /// ```
    /// use devttrace::meta::{Metadata, TaskIndex, TaskInfo};
    /// let task = TaskInfo { pid: 1, tid: 2, timestamp: 100, ..Default::default() };
    /// let meta = Metadata { threads: vec![task], names_evicted_before: 150, ..Default::default() };
    /// let index = TaskIndex::threads(&meta);
    /// assert_eq!(index.resolve(1 << 32 | 2, 40), Err(0..100));
    /// assert_eq!(index.resolve(1 << 32 | 3, 40), Err(0..u64::MAX));
    /// ```
    pub fn resolve(&self, id: u64, timestamp: u64) -> Result<Current, core::ops::Range<u64>> {
        let Some(list) = self.by_id.get(&id) else {
            return Err(0..u64::MAX);
        };
        let first = list[0].0;
        let k = list.partition_point(|&(t, _, _)| t <= timestamp);
        if k == 0 && timestamp < self.evicted_before {
            return Err(0..first.min(self.evicted_before));
        }
        let k = k.saturating_sub(1);
        let from = if k == 0 {
            first.min(self.evicted_before)
        } else {
            list[k].0
        };
        let until = list.get(k + 1).map_or(u64::MAX, |&(t, _, _)| t);
        Ok(Current {
            index: list[k].1,
            during: from..until,
            incarnation: list[k].2,
        })
    }
}

/// The bytes of a metadata record: header, fixed part, strings, padded to 8 bytes.
pub fn record(kind: RecordKind, fixed: &[u8], strings: &[&[u8]]) -> Vec<u8> {
    let len = record_bytes(strings.iter().map(|s| s.len()).sum());
    let mut rec = Vec::with_capacity(len as usize);
    rec.extend_from_slice(
        RecordHeader {
            kind: kind as u16,
            reserved: 0,
            len: len as u32,
        }
        .as_bytes(),
    );
    rec.extend_from_slice(fixed);
    for s in strings {
        rec.extend_from_slice(s);
    }
    rec.resize(len as usize, 0);
    rec
}

fn task_info(task: &TaskRecord, name: String) -> TaskInfo {
    TaskInfo {
        pid: task.pid,
        tid: task.tid,
        timestamp: task.timestamp,
        name,
        renamed: task.flags & layout::TASK_RENAMED != 0,
    }
}

/// Longest name a record keeps (longer names are cut at a character boundary).
pub(crate) const MAX_NAME: usize = 255;

/// `s` cut to at most `max` bytes, at a character boundary.
pub(crate) fn cut(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The record naming thread `tid` of process `pid` (`tid` 0 and `kind` [`RecordKind::Process`]
/// for a process) `name` from `timestamp` on; `renamed` if the same thread took a new name.
pub(crate) fn task_record(
    kind: RecordKind,
    pid: u32,
    tid: u32,
    name: &str,
    renamed: bool,
    timestamp: u64,
) -> Vec<u8> {
    let name = cut(name, MAX_NAME);
    let task = TaskRecord {
        pid,
        tid,
        timestamp,
        name_len: name.len() as u16,
        flags: if renamed { layout::TASK_RENAMED } else { 0 },
        reserved: [0; 5],
    };
    record(kind, task.as_bytes(), &[name.as_bytes()])
}

/// Copies the first `len` bytes of `words` (whole words).
pub(crate) fn copy_words(words: &[AtomicU64], len: u64) -> Vec<u8> {
    let n = (len as usize / 8).min(words.len());
    // Relaxed: the caller ordered these loads after the Acquire load that published them,
    // or checks a generation afterwards and discards the copy if it moved.
    words[..n]
        .iter()
        .flat_map(|w| w.load(Relaxed).to_ne_bytes())
        .collect()
}

/// Stores the record `rec` (a multiple of 8 bytes) at byte `at` of `words`.
pub(crate) fn store_record(words: &[AtomicU64], at: u64, rec: &[u8]) {
    for (i, chunk) in rec.chunks_exact(8).enumerate() {
        let w = u64::from_ne_bytes(chunk.try_into().expect("8-byte chunk"));
        // Relaxed: published by the caller's Release store of the area's used count.
        words[at as usize / 8 + i].store(w, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ttrace_layouts::meta::EvictedRecord;

    fn thread(tid: u32, name: &str, timestamp: u64) -> Vec<u8> {
        task_record(RecordKind::Thread, 1, tid, name, false, timestamp)
    }

    fn evicted(before: u64, count: u64) -> Vec<u8> {
        let e = EvictedRecord {
            before,
            count,
            quiet_until_dropped: 0,
        };
        record(RecordKind::Evicted, e.as_bytes(), &[])
    }

    #[test]
    fn an_event_before_the_evictions_with_no_record_before_it_has_no_name() {
        // Tid 2's thread "old" (from 100) was evicted; "new" got the tid at 300. Tid 3's
        // only record is at 250, after the evictions' 200.
        let names = [
            evicted(200, 5),
            thread(2, "new", 300),
            thread(3, "late", 250),
        ]
        .concat();
        let m = Metadata::parse_parts(&[], &names, 7);
        assert_eq!((m.names_evicted_before, m.names_evicted), (200, 5));
        // The evicted thread's event: no name, not the later thread's.
        assert_eq!(m.thread_name_at(1, 2, 150), None);
        assert_eq!(m.thread_name_at(1, 2, 300), Some("new"));
        // At or after `before`, an event that precedes its thread's record takes it.
        assert_eq!(m.thread_name_at(1, 3, 220), Some("late"));
        assert_eq!(m.thread_name_at(1, 3, 190), None);
        let index = TaskIndex::threads(&m);
        assert_eq!(index.resolve(1 << 32 | 2, 150), Err(0..200));
        assert_eq!(
            index.at(1 << 32 | 2, 250).map(|c| c.during),
            Some(200..u64::MAX)
        );
        assert_eq!(index.resolve(1 << 32 | 3, 100), Err(0..200));
        // Without evictions the first record stands for every earlier time, as before.
        let m = Metadata::parse_parts(&[], &thread(2, "new", 300), 7);
        assert_eq!(m.thread_name_at(1, 2, 150), Some("new"));
    }

    #[test]
    fn joined_copies_keep_the_later_evictions() {
        // A copy before an eviction has the name; the later one has the evictions.
        let mut later = Metadata::parse_parts(&[], &[evicted(200, 5), evicted(90, 1)].concat(), 8);
        assert_eq!(later.names_evicted_before, 200, "the later record wins");
        let earlier =
            Metadata::parse_parts(&[], &[evicted(90, 1), thread(2, "old", 100)].concat(), 7);
        later.merge_names(&earlier);
        assert_eq!((later.names_evicted_before, later.names_evicted), (200, 5));
        // The name the earlier copy had names its event again.
        assert_eq!(later.thread_name_at(1, 2, 150), Some("old"));
    }
}
