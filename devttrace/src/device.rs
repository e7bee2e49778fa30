//! The role of a process that changes a device: it creates the device or attaches to it
//! read-write, registers tracepoints, names its threads, controls what is recorded and
//! clears it. (Recording itself is the writer front end's: `ttrace-core` builds its hot path
//! on a [`Device`].)

use crate::config::Config;
use crate::control::Command;
use crate::error::{Error, Result};
use crate::files::Trust;
use crate::mapping::{Mapping, ReadMapping};
use crate::meta::{task_record, Definition};
use crate::names::Compaction;
use crate::reader::{is_device_dir, missing_file, Reader};
use crate::ring::Ring;
use core::sync::atomic::AtomicU64;
use std::path::Path;
use ttrace_layouts::entry::Slot;
use ttrace_layouts::meta::RecordKind;

/// A device mapped shared and writable, to change it.
///
/// ```
/// # let tmp = tempfile::tempdir().unwrap();
/// use devttrace::{Config, Device};
/// let dev = Device::open(&Config { ring_slots: 64, cpus: Some(2), ..Config::at(tmp.path().join("dev")) })?;
/// dev.apply_text("disable sched_*")?;
/// // A second open of the same directory attaches to the same device.
/// let again = Device::open(&Config::at(tmp.path().join("dev")))?;
/// assert_eq!(again.mapping().ring_slots(), 64);
/// assert!(again.reader().ctl().contains("disable sched_*"));
/// # Ok::<(), devttrace::Error>(())
/// ```
///
/// A `Device` changes the device; what a reader does, it does through its reader, named
/// ([`Device::reader`]), not as a `Reader` itself. This compiles:
///
/// ```no_run
/// # fn f(device: &devttrace::Device) -> devttrace::Result<()> {
/// let reader = device.reader();
/// let _ = (reader.version(), reader.snapshot()?);
/// # Ok(()) }
/// ```
///
/// and this, the same call on the device, does not (a pair of doctests, for the reason
/// [`Reader::ring`] gives):
///
/// ```compile_fail
/// # fn f(device: &devttrace::Device) -> devttrace::Result<()> {
/// let reader = device.reader();
/// let _ = (reader.version(), device.snapshot()?);
/// # Ok(()) }
/// ```
pub struct Device {
    /// Everything a reader can do, over the same memory. Declared before `map`, which keeps
    /// that memory mapped: it is dropped first.
    reader: Reader,
    /// The device's files, mapped shared and writable.
    map: Mapping,
}

impl Device {
    /// Attaches to the device at the configured directory, creating it first if it does not
    /// exist. When several processes race to create it, exactly one does (the directory is
    /// built under a temporary name and renamed into place); the others attach.
    ///
    /// An existing device must have the sizes `config` asks for ([`Config`]): else
    /// [`Error::SizeMismatch`]. Then `config.mask`, if any, is set.
    pub fn open(config: &Config) -> Result<Device> {
        let dir = config.resolved_dir();
        let dev = match Device::attach(&dir) {
            Err(Error::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound && !dir.exists() =>
            {
                crate::files::create(&dir, config)?;
                Device::attach(&dir)
            }
            other => other,
        }?;
        // A device created by another process (this one lost the race to create it, or it
        // existed) may have other sizes; one this process made has them all.
        config.check_sizes(dev.mapping().dir(), dev.mapping().header())?;
        if let Some(mask) = config.mask {
            dev.apply(&Command::SetMask {
                value: mask,
                mask: u64::MAX,
            })?;
        }
        Ok(dev)
    }

    /// Attaches to an existing device of this user; refuses one whose layout versions
    /// differ.
    pub fn attach(dir: &Path) -> Result<Device> {
        Ok(Device::of(Mapping::attach(dir, Trust::Own)?))
    }

    /// The device of the writable mapping `map`, with its reader over the same memory.
    fn of(map: Mapping) -> Device {
        Device {
            reader: Reader::of(ReadMapping::of_device(map.parts())),
            map,
        }
    }

    /// Attaches to the existing device at `dir` to control it, as `ttrace-reader ctl` does:
    /// a snapshot file cannot be changed ([`Error::ReadOnly`]), a missing or foreign
    /// directory is said to be so, and [`Trust`] says whose devices are accepted.
    pub fn attach_with(dir: &Path, trust: Trust) -> Result<Device> {
        if dir.is_file() {
            return Err(Error::ReadOnly(dir.to_path_buf()));
        }
        is_device_dir(dir)?;
        let map = Mapping::attach(dir, trust).map_err(missing_file)?;
        Ok(Device::of(map))
    }

    /// Everything a reader can do ([`Reader`]), on this device.
    pub fn reader(&self) -> &Reader {
        &self.reader
    }

    /// The device's files as mapped for writing: its parts, and the writer halves of the
    /// protocols over them ([`Mapping::ring`], [`Mapping::aux`]), which the writer front
    /// end (`ttrace-core`) records through.
    pub fn mapping(&self) -> &Mapping {
        &self.map
    }

    /// Every ring, to read, for the names' compaction.
    fn rings(&self) -> Vec<Ring<'_, Slot>> {
        let map = self.mapping();
        (0..map.num_rings()).map(|r| map.ring(r).reader()).collect()
    }

    /// Registers a tracepoint (or finds the one another process registered with the same
    /// definition) and returns its id and current word (its type word if enabled, else 0).
    pub fn register_tracepoint(&self, def: &Definition) -> Result<(u16, u64)> {
        self.mapping().registry().register(def)
    }

    /// The shared word of tracepoint `id` (as [`Device::register_tracepoint`] returned it):
    /// its type word while enabled, 0 while not.
    ///
    /// # Panics
    /// If `id` was not returned by [`Device::register_tracepoint`] for this device.
    pub fn tracepoint_word(&self, id: u16) -> &AtomicU64 {
        self.mapping().registry().word(id)
    }

    /// Records the name of a new thread `tid` of process `pid` (from now on, until the next
    /// record of this id).
    pub fn note_thread(&self, pid: u32, tid: u32, name: &str) -> Result<()> {
        self.note_task(RecordKind::Thread, pid, tid, name, false)
    }

    /// Records a new name of the thread `tid` of process `pid` that was named before.
    pub fn note_rename(&self, pid: u32, tid: u32, name: &str) -> Result<()> {
        self.note_task(RecordKind::Thread, pid, tid, name, true)
    }

    /// Records the name of a new process `pid`.
    pub fn note_process(&self, pid: u32, name: &str) -> Result<()> {
        self.note_task(RecordKind::Process, pid, 0, name, false)
    }

    fn note_task(
        &self,
        kind: RecordKind,
        pid: u32,
        tid: u32,
        name: &str,
        renamed: bool,
    ) -> Result<()> {
        let map = self.mapping();
        // The time is read before the record is written, and the caller's events after:
        // each of its events is at or after the record that names it.
        let rec = task_record(kind, pid, tid, name, renamed, map.now());
        let guard = map.registry().lock()?;
        map.names().append(&guard, &rec, &self.rings())
    }

    /// Compacts the names area now (`ttrace-reader clear` and tests use it).
    pub fn compact_names_now(&self) -> Result<Compaction> {
        let guard = self.mapping().registry().lock()?;
        Ok(self.mapping().names().compact(&guard, &self.rings()))
    }

    /// Applies a command atomically with respect to every other control change and
    /// tracepoint registration. Returns the number of tracepoints enabled afterwards.
    pub fn apply(&self, command: &Command) -> Result<usize> {
        let map = self.mapping();
        crate::control::apply(map.header(), &map.registry(), command)
    }

    /// Parses and applies one command line (see [`Command`]).
    pub fn apply_text(&self, line: &str) -> Result<usize> {
        self.apply(&line.parse()?)
    }

    /// Whether the wildcard `pattern` matches a name the device knows: a registered
    /// tracepoint's, or `info` (messages).
    pub fn pattern_matches_known(&self, pattern: &str) -> bool {
        crate::control::matches_known(&self.mapping().registry(), pattern)
    }

    /// Clears the device: from now on readers show only entries and messages stamped after
    /// this moment, and count losses from here (see [`crate::clear`]). Returns the number of
    /// clears so far (this one included).
    pub fn clear(&self) -> Result<u64> {
        let map = self.mapping();
        let guard = map.registry().lock()?;
        let rings = (0..map.num_rings()).map(|r| map.ring_header(r));
        Ok(crate::clear::clear(
            &guard,
            map.header(),
            rings,
            map.num_cpus() as usize,
            map.now(),
        ))
    }

    /// Notes the calling thread as the one that applies the snapshot rules installed in
    /// the device (its rules thread), so that `ctl on` can tell whether a live process
    /// applies them ([`Reader::rules_applied`]).
    pub fn note_rules_applier(&self) {
        // Relaxed: a word read on its own, to tell a person whether a thread lives; nothing
        // is published with it.
        self.mapping()
            .header()
            .rules_applier
            .store(crate::thread::lock_id(), crate::sync::Ordering::Relaxed);
    }

    /// Adds `n` to a snapshot counter of the device ([`crate::triggers`]).
    pub fn count_snapshots(&self, counter: crate::triggers::Counter, n: u64) {
        crate::triggers::add(self.mapping().header(), counter, n);
    }

    /// Claims a snapshot for a trigger at `now` (the device's clock): at once if no process
    /// of the device was granted one less than `interval_ns` before it, else put off to an
    /// interval after that one, or covered by one granted for a time at or after `now`
    /// ([`crate::triggers`]).
    pub fn claim_snapshot(&self, now: u64, interval_ns: u64) -> crate::triggers::Grant {
        let clock = self.reader.version().clock;
        let interval = clock.ns_to_ticks(interval_ns);
        // A grant is a time a clock of the device read before now (a second's slack: the
        // clocks of CPUs differ a little), or one put off to an interval after such a time.
        let latest = self
            .mapping()
            .now()
            .saturating_add(clock.ns_to_ticks(1_000_000_000))
            .saturating_add(interval);
        crate::triggers::claim(self.mapping().header(), now, interval, latest)
    }
}
