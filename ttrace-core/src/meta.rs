//! Metadata: tracepoint definitions (appended to the device's metadata area and never
//! overwritten), and thread and process names with the time each took effect (kept in the
//! names area, see [`crate::names`]).

use crate::device::Device;
use crate::error::{Error, Result};
use crate::lock::{lock, Guard};
use crate::sync::Ordering::*;
use crate::values::{ValueTable, ValuesKind};
use std::collections::HashMap;
use ttrace_layouts::device::{CLASS_MESSAGES, INFO_NAME};
use ttrace_layouts::entry::{Kind, TypeWord};
use ttrace_layouts::meta::{
    self as layout, record_bytes, ArgType, Record, RecordHeader, RecordKind, TaskRecord,
    TracepointRecord, ValuesRecord,
};
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
}

impl Definition {
    /// A definition with untyped arguments and no value tables (the format's specs alone
    /// say how to show them), for tracepoints made at run time.
    ///
    /// ```
    /// use ttrace_core::{meta::Definition, Kind};
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
            nargs: crate::count_args(format) as u8,
            types: &[],
            tables: &[],
        }
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
                Ok(Record::Unknown { .. }) => {}
                Err(e) => m.error = m.error.or(Some(e)),
            }
        }
    }

    /// The name thread `tid` of process `pid` had at `timestamp`: that of its latest record
    /// at or before it (its first, for an earlier time). A reused tid has one record per
    /// thread, so each event gets its own writer's name.
    ///
    /// ```
    /// use ttrace_core::meta::{Metadata, TaskInfo};
    /// let task = |timestamp, name: &str| TaskInfo {
    ///     pid: 1, tid: 2, timestamp, name: name.into(), ..Default::default()
    /// };
    /// let meta = Metadata { threads: vec![task(100, "old"), task(200, "new")], ..Default::default() };
    /// assert_eq!(meta.thread_name_at(1, 2, 150), Some("old"));
    /// assert_eq!(meta.thread_name_at(1, 2, 200), Some("new"));
    /// assert_eq!(meta.thread_name_at(1, 3, 200), None);
    /// ```
    pub fn thread_name_at(&self, pid: u32, tid: u32, timestamp: u64) -> Option<&str> {
        at(&self.threads, timestamp, |t| t.pid == pid && t.tid == tid).map(|t| t.name.as_str())
    }

    /// The name process `pid` had at `timestamp` (as [`Metadata::thread_name_at`]).
    pub fn process_name_at(&self, pid: u32, timestamp: u64) -> Option<&str> {
        at(&self.processes, timestamp, |t| t.pid == pid).map(|t| t.name.as_str())
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
/// first matching.
fn at(tasks: &[TaskInfo], timestamp: u64, id: impl Fn(&TaskInfo) -> bool) -> Option<&TaskInfo> {
    let mut found = None;
    for t in tasks.iter().filter(|t| id(t)) {
        if t.timestamp > timestamp && found.is_some() {
            break;
        }
        found = Some(t);
        if t.timestamp > timestamp {
            break;
        }
    }
    found
}

/// Thread (or process) records by id, for resolving many events: `pid << 32 | tid` for
/// threads, `pid << 32` for processes.
#[derive(Clone, Debug, Default)]
pub struct TaskIndex {
    /// Per id, in time order: `(timestamp, index in the list, incarnation)`.
    by_id: HashMap<u64, Vec<(u64, usize, u32)>>,
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
        TaskIndex::of(&meta.threads)
    }

    /// The index of `meta.processes`.
    pub fn processes(meta: &Metadata) -> TaskIndex {
        TaskIndex::of(&meta.processes)
    }

    fn of(tasks: &[TaskInfo]) -> TaskIndex {
        let mut by_id: HashMap<u64, Vec<(u64, usize, u32)>> = HashMap::new();
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
        TaskIndex { by_id }
    }

    /// The record of `id` current at `timestamp`.
    ///
    /// ```
    /// use ttrace_core::meta::{Metadata, TaskIndex, TaskInfo};
    /// let task = |timestamp, name: &str| TaskInfo {
    ///     pid: 1, tid: 2, timestamp, name: name.into(), ..Default::default()
    /// };
    /// let meta = Metadata { threads: vec![task(100, "a"), task(200, "b")], ..Default::default() };
    /// let index = TaskIndex::threads(&meta);
    /// assert_eq!(index.at(1 << 32 | 2, 150).unwrap().during, 0..200);
    /// let later = index.at(1 << 32 | 2, 250).unwrap();
    /// assert_eq!((later.index, later.during, later.incarnation), (1, 200..u64::MAX, 1));
    /// ```
    pub fn at(&self, id: u64, timestamp: u64) -> Option<Current> {
        let list = self.by_id.get(&id)?;
        let k = list
            .partition_point(|&(t, _, _)| t <= timestamp)
            .saturating_sub(1);
        let from = if k == 0 { 0 } else { list[k].0 };
        let until = list.get(k + 1).map_or(u64::MAX, |&(t, _, _)| t);
        Some(Current {
            index: list[k].1,
            during: from..until,
            incarnation: list[k].2,
        })
    }
}

/// The bytes of a metadata record: header, fixed part, strings, padded to 8 bytes.
pub(crate) fn record(kind: RecordKind, fixed: &[u8], strings: &[&[u8]]) -> Vec<u8> {
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
const MAX_NAME: usize = 255;

fn cut(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

impl Device {
    /// A copy of the tracepoint records in use.
    pub fn metadata_bytes(&self) -> Vec<u8> {
        // Acquire: every record below `meta_used` was complete before the Release store
        // that published it.
        let used = self.header().meta_used.load(Acquire);
        crate::names::copy_words(self.meta_words(), used)
    }

    /// The tracepoint definitions alone (what registration and control need: the names
    /// area is not copied).
    fn tracepoints_only(&self) -> Metadata {
        Metadata::parse(&self.metadata_bytes())
    }

    /// Everything in the metadata: tracepoints, then the names in use.
    pub fn metadata(&self) -> Metadata {
        let records = self.metadata_bytes();
        let (generation, names) = self.names_bytes();
        Metadata::parse_parts(&records, &names, generation)
    }

    /// Appends one record; the caller holds the metadata lock.
    fn append(
        &self,
        _guard: &Guard<'_>,
        kind: RecordKind,
        fixed: &[u8],
        strings: &[&[u8]],
    ) -> Result<()> {
        let h = self.header();
        let total: usize = strings.iter().map(|s| s.len()).sum();
        let len = record_bytes(total);
        let used = h.meta_used.load(Relaxed);
        let words = self.meta_words();
        if used + len > words.len() as u64 * 8 {
            h.meta_dropped.fetch_add(1, Relaxed);
            return Err(Error::MetadataFull);
        }
        let rec = record(kind, fixed, strings);
        crate::names::store_record(words, used, &rec);
        h.meta_used.store(used + len, Release);
        Ok(())
    }

    /// Records the name of a new thread `tid` of process `pid` (from now on, until the next
    /// record of this id).
    pub fn note_thread(&self, pid: u32, tid: u32, name: &str) -> Result<()> {
        self.note_task(RecordKind::Thread, pid, tid, name, 0)
    }

    /// Records a new name of the thread `tid` of process `pid` that was named before.
    pub fn note_rename(&self, pid: u32, tid: u32, name: &str) -> Result<()> {
        self.note_task(RecordKind::Thread, pid, tid, name, layout::TASK_RENAMED)
    }

    /// Records the name of a new process `pid`.
    pub fn note_process(&self, pid: u32, name: &str) -> Result<()> {
        self.note_task(RecordKind::Process, pid, 0, name, 0)
    }

    fn note_task(&self, kind: RecordKind, pid: u32, tid: u32, name: &str, flags: u8) -> Result<()> {
        let name = cut(name, MAX_NAME);
        // The time is read before the record is written, and the caller's events after:
        // each of its events is at or after the record that names it.
        let task = TaskRecord {
            pid,
            tid,
            timestamp: self.now(),
            name_len: name.len() as u16,
            flags,
            reserved: [0; 5],
        };
        let rec = record(kind, task.as_bytes(), &[name.as_bytes()]);
        let Some(guard) = lock(&self.header().meta_lock) else {
            return Err(Error::Reentered);
        };
        self.repair_if_recovered(&guard);
        self.append_name(&guard, &rec)
    }

    /// Registers a tracepoint (or finds the one another process registered with the same
    /// definition) and returns its id and current word (its type word if enabled, else 0).
    /// Its value tables are recorded first, once per device.
    pub fn register_tracepoint(&self, def: &Definition) -> Result<(u16, u64)> {
        let h = self.header();
        let name = cut(def.name, MAX_NAME);
        let format = cut(def.format, layout::MAX_STRING);
        let types = ArgType::pack(def.types);
        let Some(guard) = lock(&h.meta_lock) else {
            return Err(Error::Reentered);
        };
        self.repair_if_recovered(&guard);
        let mut meta = self.tracepoints_only();
        let refs = self.table_refs(&guard, &mut meta, def, format)?;
        let existing = meta.tracepoints.iter().find(|t| {
            t.name == name
                && t.format == format
                && t.kind == def.kind
                && t.classes == def.classes
                && t.nargs == def.nargs
                && ArgType::pack(&t.types) == types
                && t.tables
                    .iter()
                    .map(|i| i.map_or(0, |i| meta.values[i].offset as u32 + 1))
                    .eq(refs.iter().copied())
        });
        let id = match existing {
            Some(t) => t.id,
            None => {
                let id = h.tp_count.load(Relaxed);
                let capacity = self.tp_words().len() as u32;
                if id >= capacity as u64 {
                    return Err(Error::TooManyTracepoints(capacity));
                }
                let rec = TracepointRecord {
                    id: id as u32,
                    name_len: name.len() as u16,
                    format_len: format.len() as u16,
                    classes: def.classes,
                    kind: def.kind as u8,
                    nargs: def.nargs,
                    types,
                };
                // The tables' references follow the strings, 4-byte aligned.
                let pad = [0u8; 3];
                let pad = &pad[..(name.len() + format.len()).next_multiple_of(4)
                    - (name.len() + format.len())];
                let refs: Vec<u8> = refs.iter().flat_map(|r| r.to_ne_bytes()).collect();
                let strings: &[&[u8]] = if def.tables.is_empty() {
                    &[name.as_bytes(), format.as_bytes()]
                } else {
                    &[name.as_bytes(), format.as_bytes(), pad, &refs]
                };
                self.append(&guard, RecordKind::Tracepoint, rec.as_bytes(), strings)?;
                h.tp_count.store(id + 1, Release);
                id as u16
            }
        };
        let word = self.effective_word(name, def.kind, def.classes, def.nargs, id);
        // Relaxed: the word is self-contained (writers need nothing else to use it).
        self.tp_words()[id as usize].store(word, Relaxed);
        Ok((id, word))
    }

    /// For each argument of `def`, its value table's record offset plus one, or 0; records
    /// the tables `meta` does not have yet. The caller holds the metadata lock.
    fn table_refs(
        &self,
        guard: &Guard<'_>,
        meta: &mut Metadata,
        def: &Definition,
        format: &str,
    ) -> Result<Vec<u32>> {
        let mut refs = Vec::new();
        let mut from = 0;
        while let Ok(Some(p)) = crate::format::next_placeholder(format, from) {
            from = p.whole.1;
            let spec = crate::format::part(format, p.spec);
            let crate::format::SpecKind::Table(t) = crate::format::spec_kind(spec, def.tables)
            else {
                refs.push(0);
                continue;
            };
            let table = def.tables[t];
            let found = meta.values.iter().find(|v| {
                v.name == table.name
                    && v.kind == table.kind
                    && v.entries
                        .iter()
                        .map(|(n, v)| (n.as_str(), *v))
                        .eq(table.entries.iter().copied())
            });
            let offset = match found {
                Some(v) => v.offset,
                None => {
                    let offset = self.append_values(guard, table)?;
                    meta.values.push(ValuesInfo {
                        offset,
                        name: table.name.into(),
                        kind: table.kind,
                        entries: table.entries.iter().map(|&(n, v)| (n.into(), v)).collect(),
                    });
                    offset
                }
            };
            refs.push(offset as u32 + 1);
        }
        Ok(refs)
    }

    /// Appends a value table's record and returns its offset in the records area.
    fn append_values(&self, guard: &Guard<'_>, table: &ValueTable) -> Result<u64> {
        let name = cut(table.name, MAX_NAME);
        let entries: Vec<(&str, u64)> = table
            .entries
            .iter()
            .map(|&(n, v)| (cut(n, MAX_NAME), v))
            .collect();
        let values: Vec<u8> = entries.iter().flat_map(|e| e.1.to_ne_bytes()).collect();
        let lens: Vec<u8> = entries
            .iter()
            .flat_map(|e| (e.0.len() as u16).to_ne_bytes())
            .collect();
        let names: Vec<u8> = entries.iter().flat_map(|e| e.0.bytes()).collect();
        let rec = ValuesRecord {
            kind: match table.kind {
                ValuesKind::Flags => layout::VALUES_FLAGS,
                ValuesKind::Enum => layout::VALUES_ENUM,
            },
            reserved: 0,
            name_len: name.len() as u16,
            count: entries.len() as u32,
            names_len: names.len() as u32,
            reserved2: [0; 3],
        };
        // Relaxed: the metadata lock orders this with every other append.
        let offset = self.header().meta_used.load(Relaxed);
        let strings: &[&[u8]] = &[&values, &lens, name.as_bytes(), &names];
        self.append(guard, RecordKind::Values, rec.as_bytes(), strings)?;
        Ok(offset)
    }

    /// The word of tracepoint `id`: its type word if the mask and the rules enable it, else 0.
    pub(crate) fn effective_word(
        &self,
        name: &str,
        kind: Kind,
        classes: u64,
        nargs: u8,
        id: u16,
    ) -> u64 {
        let mask = self.header().type_mask.load(Relaxed);
        if mask & classes != 0 && crate::control::rules_enable(&self.rules_text(), name) {
            TypeWord::new(kind, nargs, id).0
        } else {
            0
        }
    }

    /// Whether tracepoint `id` is enabled now.
    pub fn tracepoint_enabled(&self, id: u16) -> bool {
        self.tp_words()
            .get(id as usize)
            .is_some_and(|w| w.load(Relaxed) != 0)
    }

    /// The shared word of tracepoint `id` (as [`Device::register_tracepoint`] returned it):
    /// its type word while enabled, 0 while not. A trace point keeps a reference to it and
    /// tests it with one load; `ctl` changes it for every process at once.
    ///
    /// # Panics
    /// If `id` was not returned by [`Device::register_tracepoint`] for this device.
    pub fn tracepoint_word(&self, id: u16) -> &core::sync::atomic::AtomicU64 {
        self.tp_word(id)
    }

    /// The shared word of tracepoint `id`, tested by its trace points.
    pub(crate) fn tp_word(&self, id: u16) -> &core::sync::atomic::AtomicU64 {
        &self.tp_words()[id as usize]
    }

    /// After taking the metadata lock over from a dead owner: its control change may have
    /// stopped half way, so recompute every tracepoint word from the mask and the rules.
    fn repair_if_recovered(&self, guard: &Guard<'_>) {
        if guard.recovered() {
            self.recompute_words(guard);
        }
    }

    /// Recomputes every tracepoint word, and whether `info()` messages record; the caller
    /// holds the metadata lock.
    pub(crate) fn recompute_words(&self, _guard: &Guard<'_>) -> usize {
        let h = self.header();
        // Relaxed: the mask changes only under the metadata lock, which the caller holds.
        let info_on = h.type_mask.load(Relaxed) & CLASS_MESSAGES != 0
            && crate::control::rules_enable(&self.rules_text(), INFO_NAME);
        // Relaxed: the word is self-contained (as a tracepoint's word); `info()` needs no
        // other store of this change to be visible with it.
        h.info_off.store(u64::from(!info_on), Relaxed);
        let meta = self.tracepoints_only();
        let mut enabled = 0;
        for t in &meta.tracepoints {
            if let Some(w) = self.tp_words().get(t.id as usize) {
                let word = self.effective_word(&t.name, t.kind, t.classes, t.nargs, t.id);
                enabled += (word != 0) as usize;
                w.store(word, Relaxed);
            }
        }
        enabled
    }
}

/// The name of the calling thread as the kernel knows it (`comm`, at most 15 bytes).
pub fn current_thread_name() -> String {
    let mut buf = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes, NUL included, into the buffer.
    let rc = unsafe {
        libc::prctl(
            libc::PR_GET_NAME,
            buf.as_mut_ptr() as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The name of this process: the file name of `argv[0]`, else the kernel's `comm`.
pub fn current_process_name() -> String {
    std::fs::read("/proc/self/cmdline")
        .ok()
        .and_then(|c| {
            let arg0 = c.split(|&b| b == 0).next()?.to_vec();
            let arg0 = String::from_utf8_lossy(&arg0).into_owned();
            let base = arg0.rsplit('/').next()?.to_string();
            (!base.is_empty()).then_some(base)
        })
        .or_else(|| {
            std::fs::read_to_string("/proc/self/comm")
                .ok()
                .map(|s| s.trim_end().to_string())
        })
        .unwrap_or_default()
}
