//! A device opened by a reader: Akaros's `version`, `cpuN`, `aux` and `ctl` files as methods.

use crate::error::{Error, Problem, Result};
use crate::snapshot::Snapshot;
use crate::version::Version;
use crate::view::View;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Acquire;
use ttrace_core::aux::AuxSnapshots;
use ttrace_core::meta::Metadata;
use ttrace_core::ring::RingSnapshot;
pub use ttrace_core::{device::Access, Trust};

/// A ttrace device directory opened for reading (and, if asked, for control).
///
/// It may belong to a running process or to one that has died; opening checks the magic and
/// byte order, the layout versions, and every file's length against the header, so that
/// nothing read later can fall outside a file.
///
/// ```
/// # let tmp = tempfile::tempdir().unwrap();
/// # let dir = tmp.path().join("dev");
/// # let w = ttrace_core::Device::open(&ttrace_core::Config {
/// #     ring_slots: 64, cpus: Some(2), ..ttrace_core::Config::at(&dir) }).unwrap();
/// # let (_, word) = w.register_tracepoint(&ttrace_core::meta::Definition::untyped(
/// #     "hello", ttrace_core::Kind::Start, 1, "n={n}")).unwrap();
/// # w.emit(word, 1 << 32 | 2, &[42]);
/// let dev = devttrace::Device::open(&dir)?;
/// assert_eq!(dev.version().num_cpus, 2);
/// let events: usize = (0..dev.cpus()).map(|n| dev.cpu(n).map(|s| s.events.len())).sum::<Result<_, _>>()?;
/// assert_eq!(events, 1);
/// assert!(dev.ctl_write("clrbits 1").is_err(), "opened read-only");
/// # Ok::<(), devttrace::Error>(())
/// ```
pub struct Device {
    dev: ttrace_core::Device,
    /// The header's facts, read once at open: they never change, and a header truncated
    /// later must not change them.
    version: Version,
}

/// The device's counters and control words at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// Class mask: a tracepoint records only if its classes intersect it.
    pub mask: u64,
    /// Control changes so far.
    pub ctl_generation: u64,
    /// Aux bytes written since creation, in all buffers.
    pub aux_bytes: u64,
    /// Aux records written since creation into the shared rings' buffers (those of the
    /// restartable rings are counted in what a reader finds: a restartable sequence cannot
    /// keep a second counter exact).
    pub aux_records: u64,
    /// Of those, records whose payload was truncated.
    pub aux_truncated: u64,
    /// Aux writes dropped (only a shared ring's buffer drops: it does not overtake a record
    /// still being written).
    pub aux_dropped: u64,
    /// Bytes of tracepoint records.
    pub meta_used: u64,
    /// Tracepoint records dropped (area full).
    pub meta_dropped: u64,
    /// Tracepoints registered.
    pub tracepoints: u64,
    /// Compactions of the names area so far.
    pub names_generation: u64,
    /// Bytes of names in the half in use.
    pub names_used: u64,
    /// Names reclaimed by compactions since creation.
    pub names_reclaimed: u64,
    /// Names dropped: they did not fit even after a compaction.
    pub names_dropped: u64,
    /// Clears so far (`ttrace-reader clear`).
    pub clears: u64,
    /// The timestamp of the last clear (0: never cleared): nothing stamped at or before it
    /// is shown.
    pub cleared_at: u64,
}

/// Refuses `dir` before anything else is checked when it is no device at all: missing, or a
/// directory without a `header` file (so that `/tmp` is "not a ttrace device", not a
/// directory of the wrong owner).
fn is_device_dir(dir: &Path) -> Result<()> {
    if !dir.is_dir() {
        return Err(Error::Missing(dir.to_path_buf()));
    }
    match std::fs::symlink_metadata(dir.join("header")) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(Error::NotADevice(dir.to_path_buf()))
        }
        // Anything else (a header that exists, or a directory this user may not search) is
        // left to the full checks, which name the cause.
        _ => Ok(()),
    }
}

fn checked(dir: &Path, r: ttrace_core::Result<ttrace_core::Device>) -> Result<Device> {
    is_device_dir(dir)?;
    match r {
        Ok(dev) => Ok(Device {
            version: Version::of(dev.header()),
            dev,
        }),
        Err(ttrace_core::Error::Io { path, source })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            Err(Error::Invalid {
                path,
                problem: Problem::Missing,
            })
        }
        Err(e) => Err(e.into()),
    }
}

/// Opens a snapshot file as a device; a file that does not start like one is no device.
fn snapshot(path: &Path) -> Result<Device> {
    use std::io::Read;
    let mut magic = [0u8; 8];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic));
    if read.is_err() || !ttrace_layouts::snapshot::SnapshotHeader::is_snapshot(&magic) {
        return Err(Error::Missing(path.to_path_buf()));
    }
    let dev = ttrace_core::Device::attach_snapshot(path).map_err(|e| match Error::from(e) {
        Error::Invalid { path, problem } => Error::BadSnapshot { path, problem },
        e => e,
    })?;
    Ok(Device {
        version: Version::of(dev.header()),
        dev,
    })
}

impl Device {
    /// Opens the device at `dir` read-only: its files are opened `O_RDONLY` and mapped
    /// private, so nothing can be changed through it, and it still sees every new entry.
    pub fn open(dir: impl AsRef<Path>) -> Result<Device> {
        let dir = dir.as_ref();
        if dir.is_file() {
            return snapshot(dir);
        }
        is_device_dir(dir)?;
        checked(dir, ttrace_core::Device::attach_read_only(dir))
    }

    /// Opens with an explicit access and trust: [`Trust::Any`] opts in to devices of other
    /// users (the other open functions refuse them, and symlinks, and files others may
    /// write).
    pub fn open_with(dir: impl AsRef<Path>, access: Access, trust: Trust) -> Result<Device> {
        let dir = dir.as_ref();
        if dir.is_file() {
            if access == Access::ReadWrite {
                return Err(Error::ReadOnly(dir.to_path_buf()));
            }
            return snapshot(dir);
        }
        is_device_dir(dir)?;
        checked(dir, ttrace_core::Device::attach_with(dir, access, trust))
    }

    /// Opens the user's default device (`$TTRACE_DIR`, else `/dev/shm/ttrace-<uid>`).
    pub fn open_default() -> Result<Device> {
        Device::open(default_dir())
    }

    /// Opens the device at `dir` read-write, as [`Device::ctl_write`] needs.
    pub fn open_for_control(dir: impl AsRef<Path>) -> Result<Device> {
        let dir = dir.as_ref();
        if dir.is_file() {
            return Err(Error::ReadOnly(dir.to_path_buf()));
        }
        is_device_dir(dir)?;
        checked(dir, ttrace_core::Device::attach(dir))
    }

    /// The device directory.
    pub fn dir(&self) -> &Path {
        self.dev.dir()
    }

    /// The writer-side view of the same mappings (for tools that need the raw protocol).
    pub fn core(&self) -> &ttrace_core::Device {
        &self.dev
    }

    /// The header as a value.
    pub fn version(&self) -> Version {
        self.version
    }

    /// Counters and control words.
    pub fn status(&self) -> Status {
        let h = self.dev.header();
        let load = |a: &std::sync::atomic::AtomicU64| a.load(Acquire);
        let rings = || (0..self.dev.num_rings()).map(|r| self.dev.ring_header(r));
        let sum = |f: fn(&ttrace_layouts::ring::RingHeader) -> &std::sync::atomic::AtomicU64| {
            rings().map(|r| load(f(r))).fold(0u64, u64::wrapping_add)
        };
        Status {
            mask: load(&h.type_mask),
            ctl_generation: load(&h.ctl_generation),
            aux_bytes: sum(|r| &r.aux_last),
            aux_records: sum(|r| &r.aux_records),
            aux_truncated: sum(|r| &r.aux_truncated),
            aux_dropped: sum(|r| &r.aux_dropped),
            meta_used: load(&h.meta_used),
            meta_dropped: load(&h.meta_dropped),
            tracepoints: load(&h.tp_count),
            names_generation: load(&h.names_generation),
            names_used: load(&h.names_used[(load(&h.names_generation) & 1) as usize]),
            names_reclaimed: load(&h.names_reclaimed),
            names_dropped: load(&h.names_dropped),
            clears: self.dev.clears(),
            cleared_at: self.dev.cleared_at(),
        }
    }

    /// Number of rings: for a device of `n` CPUs, `cpu0` .. `cpu{n-1}` (restartable) then
    /// `cpu0.shared` .. (see `ttrace_layouts::ring`).
    pub fn cpus(&self) -> usize {
        self.dev.num_rings()
    }

    /// The name of ring `index` (`cpu3`, `cpu3.shared`).
    pub fn ring_name(&self, index: usize) -> String {
        self.version.ring_name(index)
    }

    fn ring(&self, cpu: usize) -> Result<ttrace_core::ring::Ring<'_, ttrace_layouts::entry::Slot>> {
        if cpu >= self.cpus() {
            return Err(Error::NoSuchCpu {
                cpu,
                rings: self.cpus(),
            });
        }
        Ok(self.dev.ring(cpu))
    }

    /// A consistent copy of ring `cpu`: only complete entries (each copied between two reads
    /// of its stamp that agree), continuations stitched to their parents, in time order, with
    /// exact counts of what was overwritten and of what was incomplete.
    pub fn cpu(&self, cpu: usize) -> Result<RingSnapshot> {
        self.cpu_newer_than(cpu, 0)
    }

    /// [`Device::cpu`], keeping only the events stamped after `timestamp` (Akaros's
    /// `settimestamp`). See [`crate::Follower`] for reading exactly what is new.
    /// Entries stamped at or before the device's last clear are left out (counted in
    /// `cleared`).
    pub fn cpu_newer_than(&self, cpu: usize, timestamp: u64) -> Result<RingSnapshot> {
        let ring = self.ring(cpu)?;
        let snap = ring.snapshot_cleared(timestamp, self.dev.cleared(cpu));
        self.check_intact()?;
        Ok(snap)
    }

    /// A consistent copy of every aux buffer: the records complete and within `[first, last)`,
    /// less the messages stamped at or before the device's last clear. (Strings carry no
    /// time: they stay, for the entries after the clear that may refer to them.)
    pub fn aux(&self) -> Result<AuxSnapshots> {
        let cleared_at = self.dev.cleared_at();
        let aux = self
            .dev
            .aux_snapshot()
            .map(|mut aux| {
                if cleared_at > 0 {
                    for b in &mut aux.buffers {
                        b.records
                            .retain(|r| r.timestamp == 0 || r.timestamp > cleared_at);
                    }
                }
                aux
            })
            .map_err(|source| Error::Aux {
                path: self.dir().join("aux"),
                source,
            });
        self.check_intact()?;
        aux
    }

    /// Fails with [`Problem::Shrunk`] if a file of the device shrank while it was being read
    /// (another process truncated it). The pages lost read as zeros, so what was read since
    /// is incomplete; a reader that copies events late (a [`View`]) checks this at the end.
    pub fn check_intact(&self) -> Result<()> {
        Ok(self.dev.check_intact()?)
    }

    /// The aux buffer, or an empty one and why: a whole-device read does not fail because
    /// strings were overwritten faster than they could be copied.
    fn aux_or_empty(&self) -> (AuxSnapshots, Option<String>) {
        match self.aux() {
            Ok(aux) => (aux, None),
            Err(e) => (AuxSnapshots::default(), Some(e.to_string())),
        }
    }

    /// Tracepoint definitions, thread and process names.
    pub fn metadata(&self) -> Metadata {
        self.dev.metadata()
    }

    /// Whether tracepoint `id` records now (its classes meet the mask and the rules allow it).
    pub fn enabled(&self, id: u16) -> bool {
        self.dev.tracepoint_enabled(id)
    }

    /// Whether each tracepoint defined in `meta` (by id) records now.
    pub fn enabled_all(&self, meta: &Metadata) -> Vec<bool> {
        (0..meta.tracepoints.len() as u16)
            .map(|id| self.enabled(id))
            .collect()
    }

    /// The control state as text: `setmask <mask> <all bits>` then one line per rule; writing
    /// these lines back with [`Device::ctl_write`] restores it.
    pub fn ctl(&self) -> String {
        self.dev.control_text()
    }

    /// Applies one control command, atomically: `setmask <value> <mask>`, `setbits <bits>`,
    /// `clrbits <bits>`, `enable <wildcard>`, `disable <wildcard>`, `reset`. A malformed
    /// command changes nothing. Returns the number of tracepoints enabled afterwards.
    pub fn ctl_write(&self, command: &str) -> Result<usize> {
        if self.dev.access() == ttrace_core::device::Access::ReadOnly {
            return Err(Error::ReadOnly(self.dir().to_path_buf()));
        }
        Ok(self.dev.apply_text(command)?)
    }

    /// Every ring indexed, then the aux buffer and the metadata copied, as [`View`] explains.
    pub fn view_newer_than(&self, timestamp: u64) -> Result<View<'_>> {
        let cpus = (0..self.cpus())
            .map(|n| Ok(self.ring(n)?.index_cleared(timestamp, self.dev.cleared(n))))
            .collect::<Result<Vec<_>>>()?;
        let (aux, aux_error) = self.aux_or_empty();
        self.check_intact()?;
        Ok(View::new(self, cpus, aux, aux_error))
    }

    /// Saves a consistent copy of the device to the file `path` (see
    /// `ttrace_core::snapshot`): every command that reads a device reads it in its place.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<ttrace_core::snapshot::Saved> {
        let saved = self.dev.save(path.as_ref())?;
        self.check_intact()?;
        Ok(saved)
    }

    /// Everything at once: every ring, then the aux buffer, then the metadata (in that
    /// order, so that every tracepoint and string an entry refers to was written before the
    /// copy of it was taken).
    pub fn snapshot(&self) -> Result<Snapshot> {
        self.snapshot_newer_than(0)
    }

    /// [`Device::snapshot`] with [`Device::cpu_newer_than`].
    pub fn snapshot_newer_than(&self, timestamp: u64) -> Result<Snapshot> {
        // A compaction of the names during the copy may reclaim the name of an event that
        // was copied and then overwritten: the copy is taken again (compactions are rare:
        // one per names half filled).
        let mut tries = 0;
        let (cpus, aux, aux_error, meta) = loop {
            let generation = self.dev.names_generation();
            let cpus = (0..self.cpus())
                .map(|n| self.cpu_newer_than(n, timestamp))
                .collect::<Result<Vec<_>>>()?;
            let (aux, aux_error) = self.aux_or_empty();
            let meta = self.metadata();
            tries += 1;
            if meta.names_generation == generation || tries == 4 {
                break (cpus, aux, aux_error, meta);
            }
        };
        self.check_intact()?;
        Ok(Snapshot {
            dir: self.dir().to_path_buf(),
            version: self.version(),
            status: self.status(),
            enabled: self.enabled_all(&meta),
            meta,
            cpus,
            aux,
            aux_error,
            messages: None,
        })
    }
}

/// The user's default device directory: `$TTRACE_DIR`, else `/dev/shm/ttrace-<uid>`.
pub fn default_dir() -> PathBuf {
    ttrace_core::default_dir()
}
