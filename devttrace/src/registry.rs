//! The tracepoint registry: each tracepoint's word in the shared table, and its definition
//! appended to the records area, with the metadata lock that orders every change to them.
//!
//! A tracepoint's definition (name, kind, classes, format with argument names and types,
//! value tables) is appended once, under the metadata lock, and published by advancing
//! `meta_used` (Release); records are never overwritten, so they outlive any wrap of the
//! rings. Identical definitions from any number of processes share one record and one id.
//! Each id has a word in the table: its type word while the class mask and the rules enable
//! it, else 0; a trace point tests that one word, and every control change recomputes all of
//! them under the lock, so writers in every process see it at
//! their next trace point. See `docs/DESIGN.md`, *Metadata and control*.

use crate::error::{Error, Result};
use crate::lock::{lock, Guard};
use crate::meta::{
    copy_words, cut, record, store_record, Definition, Metadata, ValuesInfo, MAX_NAME,
};
use crate::sync::{AtomicWord, Ordering::*};
use crate::values::{ValueTable, ValuesKind};
use core::sync::atomic::AtomicU64;
use ttrace_layouts::device::DeviceHeader;
use ttrace_layouts::entry::{Kind, TypeWord};
use ttrace_layouts::format::{next_placeholder, part, Letter};
use ttrace_layouts::meta::{
    self as layout, record_bytes, ArgType, RecordKind, TracepointRecord, ValuesRecord,
};
use zerocopy::IntoBytes;

/// The tracepoint table and records of a device ([`Mapping::registry`](crate::Mapping::registry)).
#[derive(Clone, Copy)]
pub struct Registry<'a> {
    header: &'a DeviceHeader,
    /// One word per tracepoint id.
    table: &'a [AtomicU64],
    /// The records area.
    records: &'a [AtomicU64],
}

impl<'a> Registry<'a> {
    /// The registry of the device `header`, over its word table and records area.
    pub(crate) fn new(
        header: &'a DeviceHeader,
        table: &'a [AtomicU64],
        records: &'a [AtomicU64],
    ) -> Registry<'a> {
        Registry {
            header,
            table,
            records,
        }
    }

    /// Takes the metadata lock (which also orders changes to the names area, the rules and
    /// clears). Taken over from a dead owner, whose control change may have stopped half
    /// way, it recomputes every tracepoint word first. [`Error::Reentered`] if the calling
    /// thread holds it already (a trace point in a signal handler that interrupted it).
    pub fn lock(&self) -> Result<Guard<'a>> {
        let guard = lock(&self.header.meta_lock).ok_or(Error::Reentered)?;
        if guard.recovered() {
            self.recompute(&guard);
        }
        Ok(guard)
    }

    /// The word table, one word per tracepoint id.
    pub(crate) fn table(&self) -> &'a [AtomicU64] {
        self.table
    }

    /// A copy of the records in use.
    pub fn records_bytes(&self) -> Vec<u8> {
        // Acquire: every record below `meta_used` was complete before the Release store
        // that published it.
        let used = self.header.meta_used.load_acquire();
        copy_words(self.records, used)
    }

    /// The tracepoint definitions and value tables (no names).
    pub fn tracepoints(&self) -> Metadata {
        Metadata::parse(&self.records_bytes())
    }

    /// The shared word of tracepoint `id` (as [`Registry::register`] returned it): its type
    /// word while enabled, 0 while not. A trace point keeps a reference to it and tests it
    /// with one load; `ctl` changes it for every process at once.
    ///
    /// # Panics
    /// If the device has no tracepoint `id`.
    pub fn word(&self, id: u16) -> &'a AtomicU64 {
        &self.table[id as usize]
    }

    /// Whether tracepoint `id` is enabled now.
    pub fn enabled(&self, id: u16) -> bool {
        // Relaxed: the word is self-contained.
        self.table
            .get(id as usize)
            .is_some_and(|w| w.load(Relaxed) != 0)
    }

    /// Registers a tracepoint (or finds the one another process registered with the same
    /// definition) and returns its id and current word (its type word if enabled, else 0).
    /// Its value tables are recorded first, once per device.
    pub fn register(&self, def: &Definition) -> Result<(u16, u64)> {
        let h = self.header;
        let name = cut(def.name, MAX_NAME);
        let format = cut(def.format, layout::MAX_STRING);
        let types = ArgType::pack(def.types);
        let guard = self.lock()?;
        let mut meta = self.tracepoints();
        let refs = self.table_refs(&guard, &mut meta, def, format)?;
        let existing = meta.tracepoints.iter().find(|t| {
            t.name == name
                && t.format == format
                && t.kind == def.kind
                && t.role == def.role
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
                // Relaxed: changed only under the lock we hold.
                let id = h.tp_count.load(Relaxed);
                let capacity = self.table.len() as u32;
                if id >= capacity as u64 {
                    return Err(Error::TooManyTracepoints(capacity));
                }
                let rec = TracepointRecord {
                    id: id as u32,
                    name_len: name.len() as u16,
                    format_len: format.len() as u16,
                    classes: def.classes,
                    kind: def.kind_byte(),
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
                // Release: a reader that sees the count sees the record (published above).
                h.tp_count.store(id + 1, Release);
                id as u16
            }
        };
        let word = self.effective_word(name, def.kind, def.classes, def.nargs, id);
        // Relaxed: the word is self-contained (writers need nothing else to use it).
        self.table[id as usize].store(word, Relaxed);
        Ok((id, word))
    }

    /// Appends one record; the caller holds the metadata lock.
    fn append(
        &self,
        _guard: &Guard<'_>,
        kind: RecordKind,
        fixed: &[u8],
        strings: &[&[u8]],
    ) -> Result<()> {
        let h = self.header;
        let total: usize = strings.iter().map(|s| s.len()).sum();
        let len = record_bytes(total);
        // Relaxed: changed only under the lock the caller holds.
        let used = h.meta_used.load(Relaxed);
        if used + len > self.records.len() as u64 * 8 {
            // Relaxed: a counter.
            h.meta_dropped.fetch_add(1, Relaxed);
            return Err(Error::MetadataFull);
        }
        let rec = record(kind, fixed, strings);
        store_record(self.records, used, &rec);
        // Release: publishes the record to readers that acquire the length.
        h.meta_used.store(used + len, Release);
        Ok(())
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
        while let Ok(Some(p)) = next_placeholder(format, from) {
            from = p.whole.1;
            let spec = part(format, p.spec);
            let table = match Letter::of(spec) {
                Some(_) => None,
                None => def.tables.iter().find(|t| t.name.as_bytes() == spec),
            };
            let Some(table) = table else {
                refs.push(0);
                continue;
            };
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
        let offset = self.header.meta_used.load(Relaxed);
        let strings: &[&[u8]] = &[&values, &lens, name.as_bytes(), &names];
        self.append(guard, RecordKind::Values, rec.as_bytes(), strings)?;
        Ok(offset)
    }

    /// The word of tracepoint `id`: its type word if the mask and the rules enable it, else 0.
    fn effective_word(&self, name: &str, kind: Kind, classes: u64, nargs: u8, id: u16) -> u64 {
        // Relaxed: the mask changes only under the metadata lock, which the caller holds.
        let mask = self.header.type_mask.load(Relaxed);
        if mask & classes != 0 && crate::rules::rules_enable(&crate::rules::text(self.header), name)
        {
            TypeWord::new(kind, nargs, id).0
        } else {
            0
        }
    }

    /// Recomputes every tracepoint word (`info()` messages' among them); the caller
    /// holds the metadata lock. Returns the number of tracepoints enabled.
    pub(crate) fn recompute(&self, _guard: &Guard<'_>) -> usize {
        let meta = self.tracepoints();
        let mut enabled = 0;
        for t in &meta.tracepoints {
            if let Some(w) = self.table.get(t.id as usize) {
                let word = self.effective_word(&t.name, t.kind, t.classes, t.nargs, t.id);
                enabled += (word != 0) as usize;
                // Relaxed: as in `register`.
                w.store(word, Relaxed);
            }
        }
        enabled
    }
}
