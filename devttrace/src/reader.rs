//! The reader's role, after Akaros's `#ttrace` device: the `version` header, consistent
//! copies of the per-CPU rings (`cpuN`) and of the `aux` buffers, the metadata that names
//! everything, the control state (`ctl`), and whole-device snapshots.

use crate::aux::{Aux, AuxCopy, AuxSnapshots};
use crate::clear::Cleared;
use crate::damage::Check;
use crate::damaged_extent::DamagedExtent;
use crate::error::{Error, FileKind, Problem, Result};
use crate::event::RingSnapshot;
use crate::files::Trust;
use crate::mapping::ReadMapping;
use crate::meta::Metadata;
use crate::ring::Ring;
use crate::snapshot::Snapshot;
use crate::status::Status;
use crate::version::Version;
use crate::walk::Keep;
use core::ops::RangeInclusive;
use core::sync::atomic::AtomicU64;
use std::path::Path;
use ttrace_layouts::entry::Slot;
use ttrace_layouts::snapshot::{Cause, CauseKind};

/// A ttrace device opened to be read: a device directory (mapped read-only), a snapshot
/// file, or the mapping of a [`Device`](crate::Device) that this process also changes
/// ([`Device::reader`](crate::Device::reader)).
///
/// It may belong to a running process or to one that has died; opening checks the magic and
/// byte order, the layout versions, and every file's length against the header, so that
/// nothing read later can fall outside a file.
///
/// ```
/// # let tmp = tempfile::tempdir().unwrap();
/// # let dir = tmp.path().join("dev");
/// # let w = devttrace::Device::open(&devttrace::Config {
/// #     ring_slots: 64, cpus: Some(2), ..devttrace::Config::at(&dir) }).unwrap();
/// # let (_, word) = w.register_tracepoint(&devttrace::meta::Definition::untyped(
/// #     "hello", devttrace::Kind::Start, 1, "n={n}")).unwrap();
/// # w.mapping().shared_ring(0).write(w.mapping().now(), 1, &[word, 1 << 32 | 2, 42, 0, 0, 0, 0]);
/// let dev = devttrace::Reader::open(&dir)?;
/// assert_eq!(dev.version().num_cpus, 2);
/// let events: usize = (0..dev.cpus()).map(|n| dev.cpu(n).map(|s| s.events.len())).sum::<Result<_, _>>()?;
/// assert_eq!(events, 1);
/// # Ok::<(), devttrace::Error>(())
/// ```
///
/// A reader cannot change what it reads: it has no control methods (a [`Device`](crate::Device)
/// has them).
///
/// ```compile_fail
/// let dev = devttrace::Reader::open_default().unwrap();
/// dev.apply_text("clrbits 1"); // no such method on a reader
/// ```
pub struct Reader {
    map: ReadMapping,
    /// The header's facts, read once at open: they never change, and a header truncated
    /// later must not change them.
    version: Version,
    /// A snapshot file's own facts (none for a device).
    image: Option<Image>,
}

/// What a snapshot file says besides its image.
struct Image {
    /// When it was taken (`CLOCK_REALTIME`, ns).
    taken_realtime_ns: u64,
    /// The latest timestamp an event of it can have.
    latest_stamp: u64,
    /// Its extents whose bytes failed their checksum, left out.
    damaged: Vec<DamagedExtent>,
    /// Why it was taken.
    cause: ttrace_layouts::snapshot::Cause,
}

/// Refuses `dir` before anything else is checked when it is no device at all: missing, or a
/// directory without a `header` file (so that `/tmp` is "not a ttrace device", not a
/// directory of the wrong owner).
pub(crate) fn is_device_dir(dir: &Path) -> Result<()> {
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

/// A file of the device that is missing is [`Problem::Missing`], named, not an I/O error.
pub(crate) fn missing_file(e: Error) -> Error {
    match e {
        Error::Io { path, source } if source.kind() == std::io::ErrorKind::NotFound => {
            Error::Invalid {
                path,
                problem: Problem::Missing,
            }
        }
        e => e,
    }
}

impl Reader {
    /// Opens the device at `dir` read-only: its files are opened `O_RDONLY` and mapped
    /// read-only (`PROT_READ`), so nothing can be changed through it, and it still sees every
    /// new entry. A file at `dir` is opened as a snapshot file.
    pub fn open(dir: impl AsRef<Path>) -> Result<Reader> {
        Reader::open_with(dir, Trust::Own)
    }

    /// [`Reader::open`] with an explicit [`Trust`]: [`Trust::Any`] opts in to devices of
    /// other users (the other open functions refuse them, and symlinks, and files others may
    /// write).
    pub fn open_with(dir: impl AsRef<Path>, trust: Trust) -> Result<Reader> {
        let dir = dir.as_ref();
        match std::fs::metadata(dir) {
            Ok(m) if m.is_file() => return Reader::open_snapshot(dir),
            // A FIFO, a socket, a device node: neither, and never opened (a FIFO would block).
            Ok(m) if !m.is_dir() => {
                return Err(Error::Invalid {
                    path: dir.to_path_buf(),
                    problem: Problem::NotADeviceOrSnapshot(FileKind::of(&m)),
                })
            }
            _ => {}
        }
        is_device_dir(dir)?;
        let map = ReadMapping::attach(dir, trust).map_err(missing_file)?;
        Ok(Reader::of(map))
    }

    /// Opens the user's default device (`$TTRACE_DIR`, else `/dev/shm/ttrace-<uid>`).
    pub fn open_default() -> Result<Reader> {
        Reader::open(crate::config::default_dir())
    }

    /// Opens a snapshot file; a file that does not start like one is no device.
    fn open_snapshot(path: &Path) -> Result<Reader> {
        use std::io::Read;
        let mut magic = [0u8; 8];
        let file = crate::files::open_regular(path, std::fs::OpenOptions::new().read(true), true);
        let read = match file {
            // Replaced by something that is no file since it was looked at.
            Err(e @ Error::Invalid { .. }) => return Err(e),
            Err(_) => Err(std::io::ErrorKind::NotFound.into()),
            Ok(mut f) => f.read_exact(&mut magic),
        };
        use ttrace_layouts::snapshot::{SnapshotHeader, SNAPSHOT_MAGIC};
        let found = u64::from_ne_bytes(magic);
        // A snapshot's magic with a few bits flipped is a damaged snapshot, not some other
        // file.
        if read.is_ok()
            && !SnapshotHeader::is_snapshot(&magic)
            && (found ^ SNAPSHOT_MAGIC).count_ones() <= 4
        {
            return Err(Error::BadSnapshot {
                path: path.to_path_buf(),
                problem: Problem::Header(ttrace_layouts::device::HeaderError::BadMagic(found)),
            });
        }
        if read.is_err() || !SnapshotHeader::is_snapshot(&magic) {
            return Err(Error::Missing(path.to_path_buf()));
        }
        let opened = crate::image::open(path).map_err(|e| match e {
            Error::Invalid { path, problem } => Error::BadSnapshot { path, problem },
            Error::Io { path, source } if source.kind() == std::io::ErrorKind::NotFound => {
                Error::Missing(path)
            }
            e => e,
        })?;
        let mut reader = Reader::of(opened.map);
        reader.image = Some(Image {
            taken_realtime_ns: opened.taken_realtime_ns,
            latest_stamp: opened.latest_stamp,
            damaged: opened.damaged,
            cause: opened.cause,
        });
        Ok(reader)
    }

    /// A reader of `map`.
    pub(crate) fn of(map: ReadMapping) -> Reader {
        Reader {
            version: Version::of(map.header()),
            map,
            image: None,
        }
    }

    /// The extents of a snapshot file whose bytes failed their checksum: left out of what
    /// is read, which reads as if they had held nothing (what they held is counted as
    /// damaged), and to be named to the user. Empty for a device, and for an intact file.
    pub fn damaged_extents(&self) -> &[DamagedExtent] {
        self.image.as_ref().map_or(&[], |i| &i.damaged)
    }

    /// When the snapshot file read was taken (`CLOCK_REALTIME`, ns since the Unix epoch);
    /// `None` for a device.
    pub fn taken_realtime_ns(&self) -> Option<u64> {
        self.image.as_ref().map(|i| i.taken_realtime_ns)
    }

    /// The timestamps an event of this device can have now: from its clock anchor (taken
    /// when it was created) to [`damage::latest`](crate::damage::latest) now; in a snapshot
    /// file, to when it was taken (as the file says).
    pub fn stamps(&self) -> core::ops::RangeInclusive<u64> {
        let c = &self.version.clock;
        let latest = match &self.image {
            None => crate::damage::latest(c, self.map.now(), crate::clock::realtime_ns()),
            Some(i) => i.latest_stamp,
        };
        c.anchor_ticks..=latest
    }

    /// The [`Check`] of this device's events, as defined by `meta` (copied after them),
    /// their strings in `aux` if copied (see [`crate::damage`]).
    pub fn check<'a>(&self, meta: &Metadata, aux: Option<&'a AuxSnapshots>) -> Check<'a> {
        Check::new(
            &self.version,
            meta,
            aux,
            self.stamps(),
            self.damaged_extents(),
        )
    }

    /// Takes the damaged events out of `snap` (a copy of this device: its metadata and aux
    /// buffers copied after its rings) and counts them ([`Check::sift`]).
    pub fn sift(&self, snap: &mut Snapshot) {
        self.sift_within(snap, self.stamps());
    }

    /// [`Reader::sift`], with the timestamps an event can have taken as `stamps` (what
    /// [`Reader::stamps`] gave when the copy was made): a follower decides with them which
    /// events it releases.
    pub(crate) fn sift_within(&self, snap: &mut Snapshot, stamps: RangeInclusive<u64>) {
        let damaged = self.damaged_extents();
        let check = Check::new(&self.version, &snap.meta, Some(&snap.aux), stamps, damaged);
        for (r, ring) in snap.cpus.iter_mut().enumerate() {
            check.sift(r, ring);
        }
    }

    /// Whether this reads a snapshot file (rather than a device directory).
    pub fn is_snapshot(&self) -> bool {
        self.map.is_image()
    }

    /// The device directory (or snapshot file).
    pub fn dir(&self) -> &Path {
        self.map.dir()
    }

    /// The mapped parts, to read them.
    pub(crate) fn map(&self) -> &ReadMapping {
        &self.map
    }

    /// The current time in the device's clock (for a snapshot file, the clock of the
    /// machine reading it: compare with [`Reader::stamps`]).
    pub fn now(&self) -> u64 {
        self.map.now()
    }

    /// The header as a value.
    pub fn version(&self) -> Version {
        self.version
    }

    /// Counters and control words.
    pub fn status(&self) -> Status {
        Status::of(&self.map)
    }

    /// Number of rings: for a device of `n` CPUs, `cpu0` .. `cpu{n-1}` (restartable) then
    /// `cpu0.shared` .. (see `ttrace_layouts::ring`).
    pub fn cpus(&self) -> usize {
        self.map.num_rings()
    }

    /// The name of ring `index` (`cpu3`, `cpu3.shared`).
    pub fn ring_name(&self, index: usize) -> String {
        self.version.ring_name(index)
    }

    /// Ring `cpu`, to read (a [`Ring`] only loads), or [`Error::NoSuchCpu`].
    ///
    /// A reader cannot write what it reads: its ring has the reader half of the protocol
    /// only. This compiles:
    ///
    /// ```no_run
    /// # fn f(reader: &devttrace::Reader, device: &devttrace::Device) -> devttrace::Result<()> {
    /// let _ = device.mapping().ring(0).write(1000, 1, &[0; 7]);
    /// let _ = reader.ring(0)?.read(0);
    /// # Ok(()) }
    /// ```
    ///
    /// and the same with the reader's ring written does not (the write of a
    /// [`Device`](crate::Device)'s mapping above shows the call itself is well-formed):
    ///
    /// ```compile_fail
    /// # fn f(reader: &devttrace::Reader, device: &devttrace::Device) -> devttrace::Result<()> {
    /// let _ = device.mapping().ring(0).write(1000, 1, &[0; 7]);
    /// let _ = reader.ring(0)?.write(1000, 1, &[0; 7]);
    /// # Ok(()) }
    /// ```
    ///
    /// (A pair of doctests rather than a `trybuild` test with the compiler's message: that
    /// message changes between toolchains, and these two differ only in the call under
    /// test, so the second fails for no other reason.)
    pub fn ring(&self, cpu: usize) -> Result<Ring<'_, Slot>> {
        if cpu >= self.cpus() {
            return Err(Error::NoSuchCpu {
                cpu,
                rings: self.cpus(),
            });
        }
        Ok(self.map.ring(cpu))
    }

    /// The aux buffer of ring `index`, to read (an [`Aux`] only loads), or
    /// [`Error::NoSuchCpu`]. As for [`Reader::ring`], this compiles:
    ///
    /// ```no_run
    /// # use ttrace_layouts::aux::{AuxPath, AuxTag};
    /// # fn f(reader: &devttrace::Reader, device: &devttrace::Device) -> devttrace::Result<()> {
    /// let (lock, path) = (&device.mapping().ring_header(0).aux_lock, AuxPath::new(AuxTag::String, 0, 2, false));
    /// let _ = device.mapping().aux(0).write(lock, path, 0, 0, b"hi");
    /// let _ = reader.aux_buffer(0)?.snapshot();
    /// # Ok(()) }
    /// ```
    ///
    /// and this does not:
    ///
    /// ```compile_fail
    /// # use ttrace_layouts::aux::{AuxPath, AuxTag};
    /// # fn f(reader: &devttrace::Reader, device: &devttrace::Device) -> devttrace::Result<()> {
    /// let (lock, path) = (&device.mapping().ring_header(0).aux_lock, AuxPath::new(AuxTag::String, 0, 2, false));
    /// let _ = device.mapping().aux(0).write(lock, path, 0, 0, b"hi");
    /// let _ = reader.aux_buffer(0)?.write(lock, path, 0, 0, b"hi");
    /// # Ok(()) }
    /// ```
    pub fn aux_buffer(&self, index: usize) -> Result<Aux<'_, AtomicU64>> {
        if index >= self.cpus() {
            return Err(Error::NoSuchCpu {
                cpu: index,
                rings: self.cpus(),
            });
        }
        Ok(self.map.aux(index))
    }

    /// What the device's last clear left for ring `cpu` (`cpu < cpus()`).
    pub fn cleared(&self, cpu: usize) -> Cleared {
        Cleared::of(self.map.header(), self.map.ring_header(cpu))
    }

    /// A consistent copy of ring `cpu`: only complete entries (each copied between two reads
    /// of its stamp that agree), continuations stitched to their parents, in time order, with
    /// exact counts of what was overwritten and of what was incomplete.
    pub fn cpu(&self, cpu: usize) -> Result<RingSnapshot> {
        self.cpu_newer_than(cpu, 0)
    }

    /// [`Reader::cpu`], keeping only the events stamped after `timestamp` (Akaros's
    /// `settimestamp`). See [`crate::Follower`] for reading exactly what is new.
    /// Entries stamped at or before the device's last clear are left out (counted in
    /// `cleared`).
    ///
    /// Damaged events ([`crate::damage`]) are left out and counted: checked against the
    /// metadata as copied after the ring (strings only for their form: the aux buffers are
    /// not copied).
    pub fn cpu_newer_than(&self, cpu: usize, timestamp: u64) -> Result<RingSnapshot> {
        let mut snap = self.cpu_unchecked(cpu, timestamp)?;
        self.check(&self.metadata(), None).sift(cpu, &mut snap);
        Ok(snap)
    }

    /// [`Reader::cpu_newer_than`] with every complete event, sound or not.
    fn cpu_unchecked(&self, cpu: usize, timestamp: u64) -> Result<RingSnapshot> {
        let ring = self.ring(cpu)?;
        let snap = ring.walk(&Keep::newer_than(timestamp, self.cleared(cpu)), &mut ());
        self.check_intact()?;
        Ok(snap)
    }

    /// A consistent copy of every aux buffer: the records complete and within `[first, last)`,
    /// less the messages stamped at or before the device's last clear. (Strings carry no
    /// time: they stay, for the entries after the clear that may refer to them.)
    pub fn aux(&self) -> Result<AuxSnapshots> {
        let cleared_at = crate::clear::cleared_at(self.map.header());
        let buffers = (0..self.cpus())
            .map(|r| {
                let release = |w| self.map.release_aux_words(r, w);
                let mut b = self.map.aux(r).snapshot_releasing(release)?;
                b.buffer = r as u32;
                if cleared_at > 0 {
                    b.retain(|r| r.timestamp == 0 || r.timestamp > cleared_at);
                }
                Ok(std::sync::Arc::new(b))
            })
            .collect::<Result<_, _>>()
            .map(|buffers| AuxSnapshots { buffers })
            .map_err(|source| Error::Aux {
                path: self.dir().join("aux"),
                source,
            });
        self.check_intact()?;
        buffers
    }

    /// A consistent copy of each ring's aux buffer's words (what [`Reader::aux`] parses), by
    /// ring.
    pub fn aux_copies(&self) -> Result<Vec<AuxCopy>> {
        let copies = (0..self.cpus())
            .map(|r| self.map.aux(r).copy())
            .collect::<Result<_, _>>()
            .map_err(|source| Error::Aux {
                path: self.dir().join("aux"),
                source,
            });
        self.check_intact()?;
        copies
    }

    /// Fails with [`Problem::Shrunk`] if a file of the device shrank while it was being read
    /// (another process truncated it). The pages lost read as zeros, so what was read since
    /// is incomplete; a reader that copies events late (a [`View`](crate::View)) checks this
    /// at the end.
    pub fn check_intact(&self) -> Result<()> {
        self.map.check_intact()
    }

    /// The aux buffer, or an empty one and why: a whole-device read does not fail because
    /// strings were overwritten faster than they could be copied.
    pub(crate) fn aux_or_empty(&self) -> (AuxSnapshots, Option<String>) {
        match self.aux() {
            Ok(aux) => (aux, None),
            Err(e) => (AuxSnapshots::default(), Some(e.to_string())),
        }
    }

    /// Tracepoint definitions, thread and process names.
    pub fn metadata(&self) -> Metadata {
        let records = self.map.registry().records_bytes();
        let (generation, names) = self.map.names().copy();
        Metadata::parse_parts(&records, &names, generation)
    }

    /// Whether tracepoint `id` records now (its classes meet the mask and the rules allow it).
    pub fn enabled(&self, id: u16) -> bool {
        self.map.registry().enabled(id)
    }

    /// Whether each tracepoint defined in `meta` (by id) records now.
    pub fn enabled_all(&self, meta: &Metadata) -> Vec<bool> {
        (0..meta.tracepoints.len() as u16)
            .map(|id| self.enabled(id))
            .collect()
    }

    /// The class mask: a tracepoint records only if its classes intersect it (and the rules
    /// enable its name).
    pub fn mask(&self) -> u64 {
        crate::control::mask(self.map.header())
    }

    /// The rules, one `+pattern` (enable) or `-pattern` (disable) per line, the last
    /// matching one deciding ([`crate::rules`]).
    pub fn rules(&self) -> String {
        crate::rules::text(self.map.header())
    }

    /// The snapshot rules installed with `ctl on RULE` ([`crate::rules::snapshot_rules`]).
    pub fn snapshot_rules(&self) -> Vec<String> {
        crate::rules::snapshot_rules(&self.rules())
    }

    /// Whether a live thread applies the snapshot rules installed in the device (the last
    /// one that began to: [`Device::note_rules_applier`](crate::Device::note_rules_applier)).
    /// Always false for a snapshot file.
    pub fn rules_applied(&self) -> bool {
        // Relaxed: see `note_rules_applier`.
        let owner = self
            .map
            .header()
            .rules_applier
            .load(crate::sync::Ordering::Relaxed);
        self.image.is_none() && owner != 0 && crate::thread::lock_owner_alive(owner)
    }

    /// A number that changes with every control change (mask, rules, snapshot rules): a
    /// follower of the rules reads them again when it moves.
    pub fn ctl_generation(&self) -> u64 {
        // Acquire: pairs with the Release increment after a change, so the rules read
        // after this are at least as new.
        use crate::sync::AtomicWord;
        self.map.header().ctl_generation.load_acquire()
    }

    /// Whether a tracepoint named `name` of `classes` records now (see
    /// [`crate::control::enables`]).
    pub fn enables(&self, name: &str, classes: u64) -> bool {
        crate::control::enables(self.map.header(), name, classes)
    }

    /// Whether `info()` messages record now.
    pub fn info_enabled(&self) -> bool {
        crate::control::info_enabled(self.map.header())
    }

    /// The control state as text: `setmask <mask> <all bits>` then one line per rule; writing
    /// these lines back with [`Device::apply_text`](crate::Device::apply_text) restores it.
    pub fn ctl(&self) -> String {
        crate::control::text(self.map.header())
    }

    /// Saves a consistent copy of the device to the file `path` (see
    /// `docs/DESIGN.md`, *Snapshots*): every command that reads a device reads it in its
    /// place.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<crate::image::Saved> {
        let asked = Cause::new(CauseKind::Asked, "");
        self.save_because(path, &asked)
    }

    /// [`Reader::save`], the snapshot saying why it was taken ([`Reader::cause`] of the
    /// file).
    pub fn save_because(
        &self,
        path: impl AsRef<Path>,
        cause: &Cause,
    ) -> Result<crate::image::Saved> {
        let saved = crate::image::save(&self.map, None, path.as_ref(), cause, || {
            *self.stamps().end()
        })?;
        self.check_intact()?;
        Ok(saved)
    }

    /// [`Reader::save_because`], the rings (their slots, heads and aux buffers) taken from
    /// `shadow`, what a follower of this device read ([`crate::shadow`]), the rest (header,
    /// counters, metadata) from the device now, as a device whose rings are as long as the
    /// copy's longest ([`Shadow::slots`](crate::Shadow::slots)). An error if `shadow` is of
    /// another device's shape.
    pub fn save_shadow(
        &self,
        path: impl AsRef<Path>,
        cause: &Cause,
        shadow: &crate::shadow::Shadow,
    ) -> Result<crate::image::Saved> {
        if shadow.rings() != self.cpus() || shadow.base() != self.version().ring_slots {
            return Err(crate::error::bad(
                self.dir(),
                crate::error::Problem::Mismatch,
            ));
        }
        let saved = crate::image::save(&self.map, Some(shadow), path.as_ref(), cause, || {
            *self.stamps().end()
        })?;
        self.check_intact()?;
        Ok(saved)
    }

    /// The copy [`Reader::save_because`] makes, held in memory to be written later
    /// ([`Image::write`](crate::image::Image::write)): a saver copies at the moment it is
    /// due, and no file system delays the copy.
    pub fn copy_because(&self, cause: &Cause) -> Result<crate::image::Image> {
        let image = crate::image::copy(&self.map, None, cause, || *self.stamps().end())?;
        self.check_intact()?;
        Ok(image)
    }

    /// The snapshot [`Reader::save_shadow`] saves, held in memory to be written later
    /// ([`Image::write`](crate::image::Image::write)): a program's saver makes it from its
    /// follower's copy when a trigger's window is due, and goes on following while a thread
    /// of its own writes it.
    pub fn copy_shadow(
        &self,
        cause: &Cause,
        shadow: &crate::shadow::Shadow,
    ) -> Result<crate::image::Image> {
        if shadow.rings() != self.cpus() || shadow.base() != self.version().ring_slots {
            return Err(crate::error::bad(
                self.dir(),
                crate::error::Problem::Mismatch,
            ));
        }
        let image = crate::image::copy(&self.map, Some(shadow), cause, || *self.stamps().end())?;
        self.check_intact()?;
        Ok(image)
    }

    /// Why the snapshot file read was taken (`None` for a device, and for a file a person
    /// asked for or older than causes).
    pub fn cause(&self) -> Option<&Cause> {
        let cause = &self.image.as_ref()?.cause;
        (CauseKind::from_raw(cause.kind) != CauseKind::Asked).then_some(cause)
    }

    /// Everything at once: every ring, then the aux buffer, then the metadata (in that
    /// order, so that every tracepoint and string an entry refers to was written before the
    /// copy of it was taken).
    pub fn snapshot(&self) -> Result<Snapshot> {
        self.snapshot_newer_than(0)
    }

    /// [`Reader::snapshot`] with [`Reader::cpu_newer_than`].
    pub fn snapshot_newer_than(&self, timestamp: u64) -> Result<Snapshot> {
        // A compaction of the names during the copy may reclaim the name of an event that
        // was copied and then overwritten: the copy is taken again (compactions are rare:
        // one per names half filled).
        let mut tries = 0;
        let (cpus, aux, aux_error, meta) = loop {
            let generation = self.map.names().generation();
            let cpus = (0..self.cpus())
                .map(|n| self.cpu_unchecked(n, timestamp))
                .collect::<Result<Vec<_>>>()?;
            let (aux, aux_error) = self.aux_or_empty();
            let meta = self.metadata();
            tries += 1;
            if meta.names_generation == generation || tries == 4 {
                break (cpus, aux, aux_error, meta);
            }
        };
        self.check_intact()?;
        let mut snap = Snapshot {
            dir: self.dir().to_path_buf(),
            version: self.version(),
            status: self.status(),
            enabled: self.enabled_all(&meta),
            meta,
            cpus,
            aux,
            aux_error,
        };
        self.sift(&mut snap);
        Ok(snap)
    }
}
