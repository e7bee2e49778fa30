//! A device as this process maps it: its files (or a snapshot file's image) in memory, and
//! the parts every role works on: the device header, each ring with its header and its aux
//! buffer, the tracepoint registry and the names area.
//!
//! There are two mappings, by what the memory allows. A [`Mapping`] is a device's files
//! mapped shared and writable: what a role that changes the device holds (a
//! [`Device`](crate::Device), and through it the writer), and the only thing that hands out
//! the writer halves of the ring and aux protocols ([`RingWriter`], [`AuxWriter`]). A
//! `ReadMapping` (this crate's own) is a device's files, or a snapshot file's image, mapped
//! read-only (`PROT_READ`): what a [`Reader`](crate::Reader) holds, which hands out only the
//! reader halves ([`Ring`], [`Aux`]), whose every access is a load. A store through a
//! reader's mapping is not a method it lacks by convention: the page would refuse it.
//!
//! Both find the same parts the same way (`Parts`); what may be done with them is the
//! business of the protocol modules (`ring`, `aux`, `registry`, `names`, `control`, `clear`).

use crate::aux::{Aux, AuxWriter};
use crate::error::{bad, io, Problem, Result};
use crate::files::{check_trust, euid, map_read_only, map_writable, open_existing, Access, Trust};
use crate::names::Names;
use crate::registry::Registry;
use crate::ring::{Ring, RingWriter};
use core::ptr::NonNull;
use core::sync::atomic::AtomicU64;
use memmap2::{Mmap, MmapMut};
use std::path::{Path, PathBuf};
use ttrace_layouts::device::{ClockSource, DeviceHeader, HEADER_BYTES};
use ttrace_layouts::entry::Slot;
use ttrace_layouts::meta::{MetaHeader, META_HEADER_BYTES, META_MAGIC};
use ttrace_layouts::ring::{
    num_rings, ring_file_bytes, ring_name, RingHeader, RESTARTABLE, RING_HEADER_BYTES, RING_MAGIC,
    SHARED,
};
use zerocopy::FromBytes;

/// One ring's parts.
#[derive(Clone)]
struct RingView {
    header: NonNull<RingHeader>,
    slots: NonNull<[Slot]>,
    aux: NonNull<[AtomicU64]>,
}

/// A `T` at the start of `part`, if `part` is long enough and aligned for one. Any bytes are
/// a `T` (`FromBytes`); the pointer is only ever read through shared references, as the
/// atomics and plain fields of a layout. (zerocopy's own `ref_from_bytes` cannot be used
/// here: it views shared bytes only as a type without interior mutability (`Immutable`),
/// and a layout's words are atomics; so the two checks it would make, size and alignment,
/// are made here, and `FromBytes` still vouches for the bytes.)
fn view<T: FromBytes>(part: NonNull<[u8]>) -> Option<NonNull<T>> {
    let p = part.cast::<T>();
    (part.len() >= size_of::<T>() && p.as_ptr().is_aligned()).then_some(p)
}

/// `part` as a slice of `T`, if its length is a multiple of one and it is aligned for one.
fn view_slice<T: FromBytes>(part: NonNull<[u8]>) -> Option<NonNull<[T]>> {
    let p = part.cast::<T>();
    (part.len() % size_of::<T>() == 0 && p.as_ptr().is_aligned())
        .then(|| NonNull::slice_from_raw_parts(p, part.len() / size_of::<T>()))
}

/// Bytes `at .. at + len` of `part`, if it has them.
fn range(part: NonNull<[u8]>, at: usize, len: usize) -> Option<NonNull<[u8]>> {
    if at.checked_add(len)? > part.len() {
        return None;
    }
    // SAFETY: `at + len <= part.len()`, so the offset stays within (or one past) `part`.
    let start = unsafe { part.cast::<u8>().add(at) };
    Some(NonNull::slice_from_raw_parts(start, len))
}

/// Bytes `at ..` of `part`, if it has them.
fn from(part: NonNull<[u8]>, at: usize) -> Option<NonNull<[u8]>> {
    range(part, at, part.len().checked_sub(at)?)
}

/// Where the parts of one device lie in this process, and its geometry: the same for both
/// mappings. It only finds them; the mapping that holds it keeps the memory mapped.
#[derive(Clone)]
pub(crate) struct Parts {
    dir: PathBuf,
    header: NonNull<DeviceHeader>,
    rings: Box<[RingView]>,
    tp_words: NonNull<[AtomicU64]>,
    records: NonNull<[AtomicU64]>,
    /// The names area: two halves.
    names: NonNull<[AtomicU64]>,
    clock: ClockSource,
    ring_mask: u64,
    num_cpus: u32,
}

impl Parts {
    /// The parts named by a checked header `h` (at `header`): `part(name, len)` returns where
    /// the part `name` (`cpu0`, `aux`, `meta`) of `len` bytes is mapped, and the path to name
    /// in errors about it. The caller keeps the memory mapped as long as the parts are used,
    /// and checks the rings' headers ([`Parts::check_files`]).
    pub(crate) fn assemble(
        dir: &Path,
        header: NonNull<DeviceHeader>,
        h: &DeviceHeader,
        mut part: impl FnMut(&str, u64) -> Result<(PathBuf, NonNull<[u8]>)>,
    ) -> Result<Parts> {
        let n = num_rings(h.num_cpus);
        let (aux_path, aux_all) = part("aux", h.aux_size * n as u64)?;
        let misaligned = |path: &Path| bad(path, Problem::Misaligned);
        let aux_words = (h.aux_size / 8) as usize;
        let mut rings = Vec::with_capacity(n);
        for r in 0..n {
            let (path, m) = part(&ring_name(r, h.num_cpus), ring_file_bytes(h.ring_slots))?;
            let header = range(m, 0, RING_HEADER_BYTES)
                .and_then(view::<RingHeader>)
                .ok_or_else(|| misaligned(&path))?;
            let slots = from(m, RING_HEADER_BYTES)
                .and_then(view_slice::<Slot>)
                .ok_or_else(|| misaligned(&path))?;
            let aux = range(aux_all, r * aux_words * 8, aux_words * 8)
                .and_then(view_slice::<AtomicU64>)
                .ok_or_else(|| misaligned(&aux_path))?;
            rings.push(RingView { header, slots, aux });
        }
        let (path, m) = part("meta", h.meta_size)?;
        // SAFETY: `m` lies in a live mapping the caller keeps; the copy reads its first bytes,
        // which only a registration under the lock changes (and never those of the header).
        let mh = MetaHeader::read_from_prefix(unsafe { m.as_ref() })
            .map_err(|_| misaligned(&path))?
            .0;
        let off = ttrace_layouts::meta::records_offset(h.max_tracepoints) as usize;
        let (records_size, names_offset, names_half) =
            ttrace_layouts::meta::split(h.max_tracepoints, h.meta_size);
        if mh.magic != META_MAGIC
            || mh.max_tracepoints != h.max_tracepoints
            || mh.records_offset != off as u64
            || mh.records_size != records_size
            || mh.names_offset != names_offset
            || mh.names_half != names_half
        {
            return Err(bad(&path, Problem::Mismatch));
        }
        let table_bytes = h.max_tracepoints as usize * 8;
        let front_bytes = META_HEADER_BYTES as usize;
        let words = |at: usize, len: usize| {
            range(m, at, len)
                .and_then(view_slice::<AtomicU64>)
                .ok_or_else(|| misaligned(&path))
        };
        Ok(Parts {
            dir: dir.to_path_buf(),
            header,
            rings: rings.into_boxed_slice(),
            tp_words: words(front_bytes, table_bytes)?,
            records: words(off, records_size as usize)?,
            names: words(off + records_size as usize, 2 * names_half as usize)?,
            clock: ClockSource::from_raw(h.clock).unwrap_or(ClockSource::MonotonicNs),
            ring_mask: h.ring_slots - 1,
            num_cpus: h.num_cpus,
        })
    }

    /// Maps the files of the existing device at `dir` (see [`Access`] and [`Trust`]) with
    /// `map` (which keeps each mapping, and returns where its bytes are), after checking the
    /// directory, the header (magic, byte order, versions, sizes) and every file's length
    /// and own header against it.
    fn attach(
        dir: &Path,
        access: Access,
        trust: Trust,
        mut map: impl FnMut(&Path, &std::fs::File, u64) -> Result<NonNull<[u8]>>,
    ) -> Result<Parts> {
        let meta = std::fs::symlink_metadata(dir).map_err(io(dir))?;
        check_trust(dir, &meta, trust, euid())?;
        let hpath = dir.join("header");
        let hfile = open_existing(&hpath, access, trust)?;
        let hmap = map(&hpath, &hfile, HEADER_BYTES as u64)?;
        // SAFETY: `hmap` is the header mapping just kept by `map`, which lives as long as the
        // parts; the header is read once here, as a copy, to check it.
        let header = DeviceHeader::read_from_bytes(unsafe { hmap.as_ref() })
            .map_err(|_| bad(&hpath, Problem::Misaligned))?;
        header
            .check()
            .map_err(|e| crate::error::bad_header(dir, &hpath, e))?;
        let header_ptr =
            view::<DeviceHeader>(hmap).ok_or_else(|| bad(&hpath, Problem::Misaligned))?;
        let parts = |name: &str, len: u64| {
            let path = dir.join(name);
            let file = open_existing(&path, access, trust)?;
            Ok((path.clone(), map(&path, &file, len)?))
        };
        let parts = Parts::assemble(dir, header_ptr, &header, parts)?;
        parts.check_files()?;
        Ok(parts)
    }

    /// Checks each ring's own header against the device header: a file swapped for another
    /// ring's, or of another device, is refused.
    pub(crate) fn check_files(&self) -> Result<()> {
        let n = self.num_cpus;
        for r in 0..self.rings.len() {
            let rh = self.ring_header(r);
            let kind = if r < n as usize { RESTARTABLE } else { SHARED };
            if rh.magic != RING_MAGIC
                || rh.index as usize != r
                || rh.kind != kind
                || rh.slots != self.ring_mask + 1
            {
                return Err(bad(&self.dir.join(ring_name(r, n)), Problem::Mismatch));
            }
        }
        Ok(())
    }

    fn header(&self) -> &DeviceHeader {
        // SAFETY: points into a live mapping kept by the mapping that holds these parts; its
        // mutable fields are atomics.
        unsafe { self.header.as_ref() }
    }

    fn ring_header(&self, index: usize) -> &RingHeader {
        // SAFETY: as in `header`.
        unsafe { self.rings[index].header.as_ref() }
    }

    #[inline(always)]
    fn ring(&self, view: &RingView, restartable: bool) -> Ring<'_, Slot> {
        // SAFETY: both pointers refer to a live mapping kept by the mapping that holds these
        // parts; the header's mutable fields are atomics and so are the slots.
        let (header, slots) = unsafe { (view.header.as_ref(), view.slots.as_ref()) };
        Ring::new(
            restartable,
            &header.head,
            &header.skipped,
            &header.dropped,
            slots,
        )
    }

    #[inline]
    fn aux(&self, index: usize) -> Aux<'_, AtomicU64> {
        let h = self.ring_header(index);
        Aux::new(
            &h.aux_first,
            &h.aux_last,
            &h.aux_records,
            &h.aux_truncated,
            &h.aux_dropped,
            // SAFETY: as in `ring`.
            unsafe { self.rings[index].aux.as_ref() },
        )
    }

    fn registry(&self) -> Registry<'_> {
        // SAFETY: as in `ring`.
        let (table, records) = unsafe { (self.tp_words.as_ref(), self.records.as_ref()) };
        Registry::new(self.header(), table, records)
    }

    fn names(&self) -> Names<'_> {
        // SAFETY: as in `ring`.
        Names::new(self.header(), unsafe { self.names.as_ref() })
    }
}

/// The parts of one device, its files mapped shared and writable into this process: what a
/// role that changes the device works on, and the only source of the writer halves of the
/// protocols ([`Mapping::ring`], [`Mapping::aux`]). A [`Device`](crate::Device) holds one
/// ([`Device::mapping`](crate::Device::mapping)).
///
/// ```
/// # let tmp = tempfile::tempdir().unwrap();
/// use devttrace::{Config, Device};
/// let dev = Device::open(&Config { ring_slots: 64, cpus: Some(2), ..Config::at(tmp.path().join("dev")) })?;
/// let map = dev.mapping();
/// assert_eq!(map.num_rings(), 4); // a restartable and a shared ring per CPU
/// assert_eq!(map.ring(0).reader().slot_count(), 64);
/// # Ok::<(), devttrace::Error>(())
/// ```
pub struct Mapping {
    parts: Parts,
    /// The memory `parts` points into, kept mapped as long as the Mapping.
    _maps: Vec<MmapMut>,
}

// SAFETY: the pointers refer to the mappings in `_maps`, which live as long as the Mapping
// and are never remapped; everything reachable through them that can change is atomic.
unsafe impl Send for Mapping {}
// SAFETY: as above; shared access only ever goes through atomics.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps the files of the existing device at `dir` shared and writable (see [`Trust`]),
    /// after checking the directory, the header (magic, byte order, versions, sizes) and
    /// every file's length and own header against it.
    pub(crate) fn attach(dir: &Path, trust: Trust) -> Result<Mapping> {
        let mut maps = Vec::new();
        let parts = Parts::attach(dir, Access::ReadWrite, trust, |path, file, len| {
            let mut m = map_writable(path, file, len)?;
            let p = NonNull::from(&mut m[..]);
            maps.push(m);
            Ok(p)
        })?;
        Ok(Mapping { parts, _maps: maps })
    }

    /// The device's parts, to read them over the same memory (the read mapping that a
    /// [`Device`](crate::Device)'s [`Reader`](crate::Reader) holds). The caller keeps this
    /// mapping alive as long as they are used.
    pub(crate) fn parts(&self) -> Parts {
        self.parts.clone()
    }

    /// The device directory.
    pub fn dir(&self) -> &Path {
        &self.parts.dir
    }

    /// The device header.
    pub fn header(&self) -> &DeviceHeader {
        self.parts.header()
    }

    /// Number of rings: for a device of `n` CPUs, `cpu0` .. `cpu{n-1}` (restartable) then
    /// `cpu0.shared` .. (see `ttrace_layouts::ring`).
    pub fn num_rings(&self) -> usize {
        self.parts.rings.len()
    }

    /// Number of CPUs the device has rings for (it has twice as many rings).
    pub fn num_cpus(&self) -> u32 {
        self.parts.num_cpus
    }

    /// Slots per ring.
    pub fn ring_slots(&self) -> u64 {
        self.parts.ring_mask + 1
    }

    /// The clock of this device.
    pub fn clock(&self) -> ClockSource {
        self.parts.clock
    }

    /// The current time in this device's clock.
    #[inline(always)]
    pub fn now(&self) -> u64 {
        crate::clock::now(self.parts.clock)
    }

    /// Ring `index` (`index < num_rings()`), to write (and, through
    /// [`RingWriter::reader`], to read).
    #[inline(always)]
    pub fn ring(&self, index: usize) -> RingWriter<'_, Slot> {
        let p = &self.parts;
        RingWriter::new(p.ring(&p.rings[index], index < p.num_cpus as usize))
    }

    /// The index of the shared ring a writer on `cpu` uses when it cannot use a restartable
    /// sequence: that CPU's, or, for a CPU id beyond the count fixed when the device was
    /// created (hot-plug), one it folds onto.
    #[inline(always)]
    pub fn shared_ring_index(&self, cpu: u32) -> usize {
        let n = self.parts.num_cpus as usize;
        let cpu = cpu as usize;
        n + if cpu < n { cpu } else { cpu % n }
    }

    /// The shared ring of [`shared_ring_index`](Self::shared_ring_index), to write.
    #[inline(always)]
    pub fn shared_ring(&self, cpu: u32) -> RingWriter<'_, Slot> {
        let index = self.shared_ring_index(cpu);
        // SAFETY: `index < 2n = rings.len()`: n plus either `cpu < n` or a remainder mod n.
        let view = unsafe { self.parts.rings.get_unchecked(index) };
        RingWriter::new(self.parts.ring(view, false))
    }

    /// The header page of ring `index`.
    pub fn ring_header(&self, index: usize) -> &RingHeader {
        self.parts.ring_header(index)
    }

    /// The aux buffer of ring `index`, with its offsets and counters, to write (and, through
    /// [`AuxWriter::reader`], to read).
    #[inline]
    pub fn aux(&self, index: usize) -> AuxWriter<'_, AtomicU64> {
        AuxWriter::new(self.parts.aux(index))
    }

    /// The tracepoint registry: the word table and the records area.
    pub fn registry(&self) -> Registry<'_> {
        self.parts.registry()
    }

    /// The names area.
    pub fn names(&self) -> Names<'_> {
        self.parts.names()
    }
}

/// The parts of one device as a reader maps them: the device's files mapped read-only
/// (`PROT_READ`), or a snapshot file's image made read-only once it is built, or the
/// writable mapping of the [`Device`](crate::Device) whose reader this is (which keeps it).
/// It hands out only the reader halves of the protocols, and this crate's readers make only
/// loads through it (`Relaxed` ones: see [`crate::sync`]).
pub(crate) struct ReadMapping {
    parts: Parts,
    /// Whether this process may drop the pages of the mappings it has read (files mapped
    /// read-only: the data stays in the page cache, and reading it again maps it again).
    releasable: bool,
    /// Whether the parts are a snapshot file's image rather than a device's files.
    image: bool,
    /// The mappings' watches for their files shrinking, with the files' paths. Declared
    /// before `maps`: the watches end before the mappings do.
    watches: Vec<(PathBuf, crate::sigbus::Watch)>,
    /// The memory it maps; empty where a [`Device`](crate::Device)'s mapping keeps it.
    maps: Vec<Mmap>,
}

// SAFETY: as for `Mapping`: the pointers refer to memory kept mapped as long as the
// ReadMapping (by `maps`, or by the Device that holds it), never remapped; everything
// reachable through them that can change is atomic.
unsafe impl Send for ReadMapping {}
// SAFETY: as above; access only ever goes through loads of atomics.
unsafe impl Sync for ReadMapping {}

impl ReadMapping {
    /// Maps the files of the existing device at `dir` read-only (see [`Trust`]), each
    /// watched for its file shrinking from the moment it is mapped (`crate::sigbus`), after
    /// the checks of [`Mapping::attach`].
    pub(crate) fn attach(dir: &Path, trust: Trust) -> Result<ReadMapping> {
        // Declared after the mappings, the watches drop first, should attaching fail.
        let mut maps = Vec::new();
        let mut watches = Vec::new();
        let parts = Parts::attach(dir, Access::ReadOnly, trust, |path, file, len| {
            let m = map_read_only(path, file, len)?;
            if let Some(w) = crate::sigbus::watch(m.as_ptr(), m.len()) {
                watches.push((path.to_path_buf(), w));
            }
            let p = NonNull::from(&m[..]);
            maps.push(m);
            Ok(p)
        })?;
        Ok(ReadMapping {
            parts,
            releasable: true,
            image: false,
            watches,
            maps,
        })
    }

    /// The parts of a snapshot file's image `map` (read-only), watched by `watch`.
    pub(crate) fn of_image(
        parts: Parts,
        map: Mmap,
        watches: Vec<(PathBuf, crate::sigbus::Watch)>,
    ) -> ReadMapping {
        ReadMapping {
            parts,
            releasable: false,
            image: true,
            watches,
            maps: vec![map],
        }
    }

    /// The parts of a [`Device`](crate::Device)'s writable mapping, read over the same
    /// memory; the Device keeps it mapped, and drops this first.
    pub(crate) fn of_device(parts: Parts) -> ReadMapping {
        ReadMapping {
            parts,
            releasable: false,
            image: false,
            watches: Vec::new(),
            maps: Vec::new(),
        }
    }

    /// The device directory (or snapshot file).
    pub(crate) fn dir(&self) -> &Path {
        &self.parts.dir
    }

    /// The device header. Only loads may be made through it.
    pub(crate) fn header(&self) -> &DeviceHeader {
        self.parts.header()
    }

    /// Number of rings.
    pub(crate) fn num_rings(&self) -> usize {
        self.parts.rings.len()
    }

    /// Slots per ring.
    pub(crate) fn ring_slots(&self) -> u64 {
        self.parts.ring_mask + 1
    }

    /// The current time in this device's clock.
    #[inline(always)]
    pub(crate) fn now(&self) -> u64 {
        crate::clock::now(self.parts.clock)
    }

    /// Ring `index` (`index < num_rings()`), to read.
    #[inline(always)]
    pub(crate) fn ring(&self, index: usize) -> Ring<'_, Slot> {
        let p = &self.parts;
        p.ring(&p.rings[index], index < p.num_cpus as usize)
    }

    /// The header page of ring `index`. Only loads may be made through it.
    pub(crate) fn ring_header(&self, index: usize) -> &RingHeader {
        self.parts.ring_header(index)
    }

    /// The aux buffer of ring `index`, to read.
    #[inline]
    pub(crate) fn aux(&self, index: usize) -> Aux<'_, AtomicU64> {
        self.parts.aux(index)
    }

    /// The tracepoint registry, to read (its copy of the records, its words).
    pub(crate) fn registry(&self) -> Registry<'_> {
        self.parts.registry()
    }

    /// The names area, to read (its copy).
    pub(crate) fn names(&self) -> Names<'_> {
        self.parts.names()
    }

    /// Whether the parts are a snapshot file's image (which no writer changes), rather than a
    /// device's files.
    pub(crate) fn is_image(&self) -> bool {
        self.image
    }

    /// Lets the kernel drop this process's pages of slots `range` of ring `index`, which
    /// the caller has copied and will not read again soon, where the device's files are
    /// mapped read-only by this reader (elsewhere nothing is done): a reader that copied a
    /// ring does not keep it twice in memory. Reading the slots again maps them again. A
    /// range may take in slots never read (a scan tells a ring's unwritten slots done with
    /// the rest): it touches nothing, so the device's file allocates nothing for them.
    pub(crate) fn release_slots(&self, index: usize, range: core::ops::Range<usize>) {
        // SAFETY: as in `Parts::ring`.
        let slots = unsafe { self.parts.rings[index].slots.as_ref() };
        if let Some(part) = slots.get(range) {
            self.release(part.as_ptr().cast(), core::mem::size_of_val(part));
        }
    }

    /// [`ReadMapping::release_slots`] for words `range` of the aux buffer of ring `index`.
    pub(crate) fn release_aux_words(&self, index: usize, range: core::ops::Range<usize>) {
        // SAFETY: as in `Parts::ring`.
        let words = unsafe { self.parts.rings[index].aux.as_ref() };
        if let Some(words) = words.get(range) {
            self.release(words.as_ptr().cast(), core::mem::size_of_val(words));
        }
    }

    fn release(&self, start: *const u8, len: usize) {
        if !self.releasable || len == 0 {
            return;
        }
        // SAFETY: sysconf has no memory effects.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        // Whole pages only: a page shared with what the caller has not copied stays.
        let from = (start as usize).next_multiple_of(page);
        let to = (start as usize + len) / page * page;
        if to > from {
            // SAFETY: `[from, to)` lies within one of our read-only shared file mappings (a
            // part of it), which nothing writes: MADV_DONTNEED drops this process's page
            // table entries for it, and a later read maps the file's pages again (or, for a
            // page beyond a file cut since, faults into the SIGBUS watch as before). It only
            // unmaps: a page never mapped (a hole of a tmpfs file) stays unallocated.
            unsafe { libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_DONTNEED) };
        }
    }

    /// The first of the device's files found to have shrunk while mapped: what was read
    /// since it shrank is not to be trusted ([`Problem::Shrunk`]).
    pub(crate) fn shrunk(&self) -> Option<&Path> {
        self.watches
            .iter()
            .find(|(_, w)| w.faults() > 0)
            .map(|(p, _)| p.as_path())
    }

    /// Touches the last word of every file this reader mapped, so that a file cut under a
    /// reader that reads only part of it (a follower reading only new positions) is found:
    /// its watch counts the fault, and [`check_intact`](ReadMapping::check_intact) fails.
    /// This is the one read of a page that may never have been written: on tmpfs it
    /// allocates that page of each file (once: a page, however large the file), the price of
    /// finding a cut there without a system call per file and poll.
    pub(crate) fn probe(&self) {
        for m in &self.maps {
            if m.len() >= 8 {
                // SAFETY: the last 8 bytes of a live mapping (page-aligned, so 8-aligned at
                // `len - 8`: every device file's length is a multiple of 8), which others
                // change only through atomics; a cut page is replaced by a zero page by the
                // SIGBUS watch.
                let w = unsafe { &*(m.as_ptr().add(m.len() - 8) as *const AtomicU64) };
                // Relaxed: the value is not used; the load only has to happen (and a
                // Relaxed load is what read-only memory allows).
                core::hint::black_box(w.load(core::sync::atomic::Ordering::Relaxed));
            }
        }
    }

    /// Fails with [`Problem::Shrunk`] if a file of the device shrank while mapped.
    pub(crate) fn check_intact(&self) -> Result<()> {
        match self.shrunk() {
            Some(path) => Err(bad(path, Problem::Shrunk)),
            None => Ok(()),
        }
    }
}
