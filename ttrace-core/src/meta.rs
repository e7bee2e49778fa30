//! Metadata: tracepoint definitions, thread names and process names, appended to the
//! device's metadata area and never overwritten.

use crate::device::Device;
use crate::error::{Error, Result};
use crate::lock::{lock, Guard};
use crate::sync::Ordering::*;
use ttrace_layouts::entry::{Kind, TypeWord};
use ttrace_layouts::meta::{
    self as layout, record_bytes, Record, RecordHeader, RecordKind, TaskRecord, TracepointRecord,
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
}

/// A thread or process name read back from a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskInfo {
    /// Process id.
    pub pid: u32,
    /// Thread id (0 for a process).
    pub tid: u32,
    /// When it was recorded.
    pub timestamp: u64,
    /// Name.
    pub name: String,
}

/// Everything in a device's metadata area.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Metadata {
    /// Tracepoints, by id.
    pub tracepoints: Vec<TracepointInfo>,
    /// Thread names, in the order recorded.
    pub threads: Vec<TaskInfo>,
    /// Process names, in the order recorded.
    pub processes: Vec<TaskInfo>,
    /// The first malformed record, if any ended the walk.
    pub error: Option<layout::MetaError>,
}

impl Metadata {
    /// Parses a copy of a metadata area. Names that are not UTF-8 are decoded lossily.
    pub fn parse(area: &[u8]) -> Metadata {
        let mut m = Metadata::default();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        for r in layout::records(area) {
            match r {
                Ok(Record::Tracepoint { def, name, format }) => {
                    m.tracepoints.push(TracepointInfo {
                        id: def.id as u16,
                        name: text(name),
                        kind: Kind::from_bits(def.kind as u64),
                        classes: def.classes,
                        format: text(format),
                        nargs: def.nargs,
                    })
                }
                Ok(Record::Thread { task, name }) => m.threads.push(task_info(&task, text(name))),
                Ok(Record::Process { task, name }) => {
                    m.processes.push(task_info(&task, text(name)))
                }
                Ok(Record::Unknown { .. }) => {}
                Err(e) => m.error = Some(e),
            }
        }
        m
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

fn task_info(task: &TaskRecord, name: String) -> TaskInfo {
    TaskInfo {
        pid: task.pid,
        tid: task.tid,
        timestamp: task.timestamp,
        name,
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
    /// A copy of the metadata area in use.
    pub fn metadata_bytes(&self) -> Vec<u8> {
        let used = self.header().meta_used.load(Acquire) as usize;
        let words = self.meta_words();
        let n = (used / 8).min(words.len());
        // Relaxed: every record below `meta_used` was complete before the Release store
        // that published it, which the Acquire load above read.
        words[..n]
            .iter()
            .flat_map(|w| w.load(Relaxed).to_ne_bytes())
            .collect()
    }

    /// Everything in the metadata area.
    pub fn metadata(&self) -> Metadata {
        Metadata::parse(&self.metadata_bytes())
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
        for (i, chunk) in rec.chunks_exact(8).enumerate() {
            let w = u64::from_ne_bytes(chunk.try_into().expect("8-byte chunk"));
            // Relaxed: published by the Release store of `meta_used` below.
            words[used as usize / 8 + i].store(w, Relaxed);
        }
        h.meta_used.store(used + len, Release);
        Ok(())
    }

    /// Records a name for thread `tid` of process `pid`.
    pub fn note_thread(&self, pid: u32, tid: u32, name: &str) -> Result<()> {
        self.note_task(RecordKind::Thread, pid, tid, name)
    }

    /// Records a name for process `pid`.
    pub fn note_process(&self, pid: u32, name: &str) -> Result<()> {
        self.note_task(RecordKind::Process, pid, 0, name)
    }

    fn note_task(&self, kind: RecordKind, pid: u32, tid: u32, name: &str) -> Result<()> {
        let name = cut(name, MAX_NAME);
        let task = TaskRecord {
            pid,
            tid,
            timestamp: self.now(),
            name_len: name.len() as u16,
            reserved: [0; 6],
        };
        let Some(guard) = lock(&self.header().meta_lock) else {
            return Err(Error::Reentered);
        };
        self.repair_if_recovered(&guard);
        self.append(&guard, kind, task.as_bytes(), &[name.as_bytes()])
    }

    /// Registers a tracepoint (or finds the one another process registered with the same
    /// definition) and returns its id and current word (its type word if enabled, else 0).
    pub fn register_tracepoint(&self, def: &Definition) -> Result<(u16, u64)> {
        let h = self.header();
        let name = cut(def.name, MAX_NAME);
        let format = cut(def.format, layout::MAX_STRING);
        let Some(guard) = lock(&h.meta_lock) else {
            return Err(Error::Reentered);
        };
        self.repair_if_recovered(&guard);
        let meta = self.metadata();
        let existing = meta.tracepoints.iter().find(|t| {
            t.name == name
                && t.format == format
                && t.kind == def.kind
                && t.classes == def.classes
                && t.nargs == def.nargs
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
                    reserved: [0; 6],
                };
                self.append(
                    &guard,
                    RecordKind::Tracepoint,
                    rec.as_bytes(),
                    &[name.as_bytes(), format.as_bytes()],
                )?;
                h.tp_count.store(id + 1, Release);
                id as u16
            }
        };
        let word = self.effective_word(name, def.kind, def.classes, def.nargs, id);
        // Relaxed: the word is self-contained (writers need nothing else to use it).
        self.tp_words()[id as usize].store(word, Relaxed);
        Ok((id, word))
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

    /// Recomputes every tracepoint word; the caller holds the metadata lock.
    pub(crate) fn recompute_words(&self, _guard: &Guard<'_>) -> usize {
        let meta = self.metadata();
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
