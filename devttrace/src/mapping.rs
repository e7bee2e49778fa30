//! A device as this process maps it: its files (or a snapshot file's image) in memory, and
//! the parts every role works on: the device header, each ring with its header and its aux
//! buffer, the tracepoint registry and the names area.
//!
//! A [`Mapping`] only finds the parts; what may be done with them is the business of the
//! protocol modules (`ring`, `aux`, `registry`, `names`, `control`, `clear`) and of the roles
//! built on it: a [`Reader`](crate::Reader) maps the files read-only and private, a
//! [`Device`](crate::Device) maps them shared and writable.

use crate::aux::Aux;
use crate::error::{bad, io, Problem, Result};
use crate::files::{check_trust, euid, map, open_existing, Access, Maps, Trust};
use crate::names::Names;
use crate::registry::Registry;
use crate::ring::Ring;
use core::ptr::NonNull;
use core::sync::atomic::AtomicU64;
use memmap2::MmapMut;
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
struct RingView {
    header: NonNull<RingHeader>,
    slots: NonNull<[Slot]>,
    aux: NonNull<[AtomicU64]>,
}

/// The parts of one device, mapped into this process.
///
/// ```
/// # let tmp = tempfile::tempdir().unwrap();
/// use devttrace::{Config, Device};
/// let dev = Device::open(&Config { ring_slots: 64, cpus: Some(2), ..Config::at(tmp.path().join("dev")) })?;
/// let map = dev.mapping();
/// assert_eq!(map.num_rings(), 4); // a restartable and a shared ring per CPU
/// assert_eq!(map.ring(0).slots.len(), 64);
/// # Ok::<(), devttrace::Error>(())
/// ```
pub struct Mapping {
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
    /// Whether this process may drop the pages of the mappings it has read (files mapped
    /// read-only: the data stays in the page cache, and reading it again maps it again).
    releasable: bool,
    /// Whether the parts are a snapshot file's image rather than a device's files.
    image: bool,
    /// A read-only device's mappings, watched for their files shrinking, with the files'
    /// paths. Declared before `maps`: the watches end before the mappings do.
    watches: Vec<(PathBuf, crate::sigbus::Watch)>,
    maps: Vec<MmapMut>,
}

// SAFETY: the pointers refer to the mappings in `maps`, which live as long as the Mapping
// and are never remapped; everything reachable through them that can change is atomic.
unsafe impl Send for Mapping {}
// SAFETY: as above; shared access only ever goes through atomics.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps the files of the existing device at `dir` (see [`Access`] and [`Trust`]), after
    /// checking the directory, the header (magic, byte order, versions, sizes) and every
    /// file's length and own header against it.
    pub(crate) fn attach(dir: &Path, access: Access, trust: Trust) -> Result<Mapping> {
        let meta = std::fs::symlink_metadata(dir).map_err(io(dir))?;
        check_trust(dir, &meta, trust, euid())?;
        let hpath = dir.join("header");
        let hfile = open_existing(&hpath, access, trust)?;
        let mut maps = Maps::default();
        let mut hmap = maps.add(
            &hpath,
            map(&hpath, &hfile, HEADER_BYTES as u64, access)?,
            access,
        );
        // SAFETY: `hmap` is the header mapping just kept in `maps`, which the mapping will
        // own; nothing else refers to it yet.
        let hbytes = unsafe { hmap.as_mut() };
        let header = DeviceHeader::read_from_bytes(&hbytes[..])
            .map_err(|_| bad(&hpath, Problem::Misaligned))?;
        header
            .check()
            .map_err(|e| crate::error::bad_header(dir, &hpath, e))?;
        let header_ptr = NonNull::from(
            DeviceHeader::mut_from_bytes(hbytes).map_err(|_| bad(&hpath, Problem::Misaligned))?,
        );
        let parts = |name: &str, len: u64| {
            let path = dir.join(name);
            let file = open_existing(&path, access, trust)?;
            let p = maps.add(&path, map(&path, &file, len, access)?, access);
            Ok((path, p))
        };
        let mut m = Mapping::assemble(dir, header_ptr, &header, parts)?;
        (m.watches, m.maps) = (maps.watches, maps.maps);
        m.releasable = access == Access::ReadOnly;
        m.check_files()?;
        Ok(m)
    }

    /// The mapping of the parts named by a checked header `h` (at `header`): `part(name,
    /// len)` returns where the part `name` (`cpu0`, `aux`, `meta`) of `len` bytes is mapped,
    /// and the path to name in errors about it. The caller then gives it the mappings
    /// ([`Mapping::keep_image`], for a snapshot file) and checks the rings' headers ([`Mapping::check_files`]).
    pub(crate) fn assemble(
        dir: &Path,
        header: NonNull<DeviceHeader>,
        h: &DeviceHeader,
        mut part: impl FnMut(&str, u64) -> Result<(PathBuf, NonNull<[u8]>)>,
    ) -> Result<Mapping> {
        // SAFETY (for each `as_mut` below): the part lies in a live mapping that the caller
        // moves into the Mapping, and nothing else refers to it yet.
        let n = num_rings(h.num_cpus);
        let (aux_path, mut m) = part("aux", h.aux_size * n as u64)?;
        // SAFETY: see above.
        let aux_all: &mut [AtomicU64] = <[AtomicU64]>::mut_from_bytes(unsafe { m.as_mut() })
            .map_err(|_| bad(&aux_path, Problem::Misaligned))?;
        let mut aux_buffers = aux_all.chunks_exact_mut((h.aux_size / 8) as usize);
        let mut rings = Vec::with_capacity(n);
        for r in 0..n {
            let (path, mut m) = part(&ring_name(r, h.num_cpus), ring_file_bytes(h.ring_slots))?;
            // SAFETY: see above.
            let (head, rest) = unsafe { m.as_mut() }.split_at_mut(RING_HEADER_BYTES);
            let header = NonNull::from(
                RingHeader::mut_from_bytes(head).map_err(|_| bad(&path, Problem::Misaligned))?,
            );
            let slots = NonNull::from(
                <[Slot]>::mut_from_bytes(rest).map_err(|_| bad(&path, Problem::Misaligned))?,
            );
            let aux = NonNull::from(
                aux_buffers
                    .next()
                    .ok_or_else(|| bad(&aux_path, Problem::Misaligned))?,
            );
            rings.push(RingView { header, slots, aux });
        }
        let (path, mut m) = part("meta", h.meta_size)?;
        // SAFETY: see above.
        let m = unsafe { m.as_mut() };
        let mh = MetaHeader::read_from_prefix(&m[..])
            .map_err(|_| bad(&path, Problem::Misaligned))?
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
        let (front, rest) = m.split_at_mut(off);
        let (records, names) = rest.split_at_mut(records_size as usize);
        let table = &mut front[front_bytes..front_bytes + table_bytes];
        let words = |b: &mut [u8]| {
            <[AtomicU64]>::mut_from_bytes(b)
                .map(NonNull::from)
                .map_err(|_| bad(&path, Problem::Misaligned))
        };
        Ok(Mapping {
            dir: dir.to_path_buf(),
            header,
            rings: rings.into_boxed_slice(),
            tp_words: words(table)?,
            records: words(records)?,
            names: words(&mut names[..2 * names_half as usize])?,
            clock: ClockSource::from_raw(h.clock).unwrap_or(ClockSource::MonotonicNs),
            ring_mask: h.ring_slots - 1,
            num_cpus: h.num_cpus,
            releasable: false,
            image: false,
            watches: Vec::new(),
            maps: Vec::new(),
        })
    }

    /// Gives the mapping the image of a snapshot file its parts lie in.
    pub(crate) fn keep_image(&mut self, maps: Vec<MmapMut>) {
        (self.maps, self.image) = (maps, true);
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

    /// The device directory (or snapshot file).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The device header.
    pub fn header(&self) -> &DeviceHeader {
        // SAFETY: points into a live mapping owned by self; its mutable fields are atomics.
        unsafe { self.header.as_ref() }
    }

    /// Number of rings: for a device of `n` CPUs, `cpu0` .. `cpu{n-1}` (restartable) then
    /// `cpu0.shared` .. (see `ttrace_layouts::ring`).
    pub fn num_rings(&self) -> usize {
        self.rings.len()
    }

    /// Number of CPUs the device has rings for (it has twice as many rings).
    pub fn num_cpus(&self) -> u32 {
        self.num_cpus
    }

    /// Slots per ring.
    pub fn ring_slots(&self) -> u64 {
        self.ring_mask + 1
    }

    /// The clock of this device.
    pub fn clock(&self) -> ClockSource {
        self.clock
    }

    /// The current time in this device's clock.
    #[inline(always)]
    pub fn now(&self) -> u64 {
        crate::clock::now(self.clock)
    }

    /// Ring `index` (`index < num_rings()`).
    #[inline(always)]
    pub fn ring(&self, index: usize) -> Ring<'_, Slot> {
        Self::view(&self.rings[index], index < self.num_cpus as usize)
    }

    /// The index of the shared ring a writer on `cpu` uses when it cannot use a restartable
    /// sequence: that CPU's, or, for a CPU id beyond the count fixed when the device was
    /// created (hot-plug), one it folds onto.
    #[inline(always)]
    pub fn shared_ring_index(&self, cpu: u32) -> usize {
        let n = self.num_cpus as usize;
        let cpu = cpu as usize;
        n + if cpu < n { cpu } else { cpu % n }
    }

    /// The shared ring of [`shared_ring_index`](Self::shared_ring_index).
    #[inline(always)]
    pub fn shared_ring(&self, cpu: u32) -> Ring<'_, Slot> {
        let index = self.shared_ring_index(cpu);
        // SAFETY: `index < 2n = rings.len()`: n plus either `cpu < n` or a remainder mod n.
        Self::view(unsafe { self.rings.get_unchecked(index) }, false)
    }

    #[inline(always)]
    fn view(view: &RingView, restartable: bool) -> Ring<'_, Slot> {
        // SAFETY: both pointers refer to a live mapping owned by the Mapping that owns
        // `view`; the header's mutable fields are atomics and so are the slots.
        let (header, slots) = unsafe { (view.header.as_ref(), view.slots.as_ref()) };
        Ring {
            restartable,
            head: &header.head,
            skipped: &header.skipped,
            dropped: &header.dropped,
            slots,
        }
    }

    /// The header page of ring `index`.
    pub fn ring_header(&self, index: usize) -> &RingHeader {
        // SAFETY: as in `view`.
        unsafe { self.rings[index].header.as_ref() }
    }

    /// The aux buffer of ring `index`, with its offsets and counters.
    #[inline]
    pub fn aux(&self, index: usize) -> Aux<'_, AtomicU64> {
        let h = self.ring_header(index);
        Aux {
            first: &h.aux_first,
            last: &h.aux_last,
            records: &h.aux_records,
            truncated: &h.aux_truncated,
            dropped: &h.aux_dropped,
            // SAFETY: as in `view`.
            words: unsafe { self.rings[index].aux.as_ref() },
        }
    }

    /// The tracepoint registry: the word table and the records area.
    pub fn registry(&self) -> Registry<'_> {
        // SAFETY: as in `view`.
        let (table, records) = unsafe { (self.tp_words.as_ref(), self.records.as_ref()) };
        Registry::new(self.header(), table, records)
    }

    /// The names area.
    pub fn names(&self) -> Names<'_> {
        // SAFETY: as in `view`.
        Names::new(self.header(), unsafe { self.names.as_ref() })
    }

    /// Whether the parts are a snapshot file's image (which no writer changes), rather than a
    /// device's files.
    pub fn is_image(&self) -> bool {
        self.image
    }

    /// Lets the kernel drop this process's pages of slots `range` of ring `index`, which
    /// the caller has copied and will not read again soon, where the device's files are
    /// mapped read-only (elsewhere nothing is done): a reader that copied a ring does not
    /// keep it twice in memory. Reading the slots again maps them again. A range may take
    /// in slots never read (a scan tells a ring's unwritten slots done with the rest): it
    /// touches nothing, so the device's file allocates nothing for them.
    pub fn release_slots(&self, index: usize, range: core::ops::Range<usize>) {
        let slots = self.ring(index).slots;
        if let Some(part) = slots.get(range) {
            self.release(part.as_ptr().cast(), core::mem::size_of_val(part));
        }
    }

    /// [`Mapping::release_slots`] for words `range` of the aux buffer of ring `index`.
    pub fn release_aux_words(&self, index: usize, range: core::ops::Range<usize>) {
        if let Some(words) = self.aux(index).words.get(range) {
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
            // SAFETY: `[from, to)` lies within one of our read-only private file mappings
            // (a part of it), which nothing writes: MADV_DONTNEED drops this process's page
            // table entries for it, and a later read maps the file's pages again (or, for a
            // page beyond a file cut since, faults into the SIGBUS watch as before). It only
            // unmaps: a page never mapped (a hole of a tmpfs file) stays unallocated.
            unsafe { libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_DONTNEED) };
        }
    }

    /// The first of a read-only device's files found to have shrunk while mapped: what was
    /// read since it shrank is not to be trusted ([`Problem::Shrunk`]).
    pub fn shrunk(&self) -> Option<&Path> {
        self.watches
            .iter()
            .find(|(_, w)| w.faults() > 0)
            .map(|(p, _)| p.as_path())
    }

    /// Touches the last word of every file of the device, so that a file cut under a reader
    /// that reads only part of it (a follower reading only new positions) is found: its
    /// watch counts the fault, and [`check_intact`](Mapping::check_intact) fails. This is
    /// the one read of a page that may never have been written: on tmpfs it allocates that
    /// page of each file (once: a page, however large the file), the price of finding a cut
    /// there without a system call per file and poll.
    pub fn probe(&self) {
        for m in &self.maps {
            if m.len() >= 8 {
                // SAFETY: the last 8 bytes of a live mapping (page-aligned, so 8-aligned at
                // `len - 8`: every device file's length is a multiple of 8), which others
                // change only through atomics; a cut page is replaced by a zero page by the
                // SIGBUS watch of a read-only device.
                let w = unsafe { &*(m.as_ptr().add(m.len() - 8) as *const AtomicU64) };
                // Relaxed: the value is not used; the load only has to happen.
                core::hint::black_box(w.load(core::sync::atomic::Ordering::Relaxed));
            }
        }
    }

    /// Fails with [`Problem::Shrunk`] if a file of the device shrank while mapped.
    pub fn check_intact(&self) -> Result<()> {
        match self.shrunk() {
            Some(path) => Err(bad(path, Problem::Shrunk)),
            None => Ok(()),
        }
    }
}
