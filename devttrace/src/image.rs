//! A device saved to one file (a snapshot), and read back as a device whose writers
//! stopped.
//!
//! `save` copies each part with its reader protocol into memory, as the device file lays
//! it out, and writes the runs of 64-byte blocks that are not all zero as *extents*
//! (`ttrace_layouts::snapshot`), each with the checksum of its bytes; `open` places the
//! extents in a zeroed anonymous mapping the size of the image and checks every one, so a
//! reader reads the image as it reads a device. An extent whose bytes fail their checksum is
//! left out and named ([`crate::damaged_extent`]); the rest is read. Why extents of the
//! image, and what the copy guarantees: `docs/DESIGN.md`, *Snapshots and exports*.

use crate::copy::RingCopy;
use crate::damaged_extent::DamagedExtent;
use crate::error::{bad, Error, Problem, Result};
use crate::event::Accounting;
use crate::mapping::{Parts, ReadMapping};
use crate::shadow::Shadow;
use crate::sync::AtomicWord;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::io::{BufRead, Read, Seek, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use ttrace_layouts::device::{DeviceHeader, HeaderError, HEADER_BYTES};
use ttrace_layouts::entry::SLOT_WORDS;
use ttrace_layouts::meta::{MetaHeader, META_HEADER_BYTES};
use ttrace_layouts::ring::{RingHeader, RING_HEADER_BYTES};
use ttrace_layouts::snapshot::{
    used_runs, Cause, ExtentHead, Layout, SnapshotHeader, EXTENTS_AT, EXTENT_HEAD_BYTES,
    HEADER_DATA_AT, PAGE, SNAPSHOT_MAGIC, SNAPSHOT_PRE_RELEASE_MAGIC, SNAPSHOT_VERSION,
};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

/// What a snapshot holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Saved {
    /// What the copy found in the slots of every ring together: `committed` (complete
    /// entries, parents and continuations, saved whole), `claimed` (slots still being
    /// written, saved as claimed) and `changed` (slots overwritten while they were copied,
    /// saved empty).
    pub counts: Accounting,
    /// Bytes of the file.
    pub bytes: u64,
    /// Bytes of the device image it describes (what the device's files take).
    pub image_bytes: u64,
    /// Why the aux buffer could not be copied (it is then saved empty), if it could not.
    pub aux_error: Option<crate::aux::AuxError>,
}

/// `bytes` bytes at `ptr`, as atomic words.
///
/// # Safety
/// `ptr` must point to `bytes` bytes (a multiple of 8) of a live mapping, 8-aligned, that
/// others change only through atomics, for as long as the result is used.
unsafe fn words<'a>(ptr: *const u8, bytes: usize) -> &'a [AtomicU64] {
    // SAFETY: the caller's contract; AtomicU64 has the size and alignment of u64.
    unsafe { core::slice::from_raw_parts(ptr.cast::<AtomicU64>(), bytes / 8) }
}

/// Copies atomic words into bytes.
fn load(words: &[AtomicU64], out: &mut [u8]) {
    for (w, o) in words.iter().zip(out.chunks_exact_mut(8)) {
        // Relaxed: these are counters and fields no protocol orders against the copy; the
        // protocol-ordered parts (slots, aux, metadata) are copied with their own loads.
        o.copy_from_slice(&w.load(Relaxed).to_ne_bytes());
    }
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Saves a consistent copy of the device `map` to the file `path` (created, or replaced;
/// mode 0600): only the bytes in use (slots written, aux records kept, metadata
/// published), so its size follows what the device holds. The copy is written to a new
/// file beside `path` and renamed over it when complete, so a failed save leaves `path` as
/// it was, and saving over the file being read is safe. `latest_stamp` says, once the copy
/// is made, how late an event of it can be ([`SnapshotHeader::latest_stamp`]).
///
/// The extents are streamed to the file as each ring is copied (memory: one ring); an
/// [`Image`] ([`copy`]) holds them all in memory instead, so that no I/O delays the copy.
pub(crate) fn save(
    map: &ReadMapping,
    shadow: Option<&Shadow>,
    path: &Path,
    cause: &Cause,
    latest_stamp: impl FnOnce() -> u64,
) -> Result<Saved> {
    replace(path, |tmp| {
        let file = create(tmp)?;
        // Extent 0 (the device header) and the header page are written last, in place.
        (&file)
            .seek(std::io::SeekFrom::Start(EXTENTS_AT))
            .map_err(io(tmp))?;
        let out = std::io::BufWriter::with_capacity(1 << 16, &file);
        let (out, tail) = emit(map, shadow, tmp, out, cause, latest_stamp)?;
        out.into_inner()
            .map_err(|e| io(tmp)(e.into_error()))?
            .flush()
            .map_err(io(tmp))?;
        tail.write(&file, tmp)
    })
}

/// A consistent copy of a device held in memory, as the snapshot file it is written as
/// ([`Image::write`]): what a saver copies at the moment it is due and writes afterwards,
/// so that the time the file system takes never lets a ring lap what it should keep.
pub struct Image {
    /// The extents after the first, as the file holds them from [`EXTENTS_AT`] on.
    body: Vec<u8>,
    tail: Tail,
}

impl Image {
    /// What it holds (`bytes`: the file it is written as).
    pub fn saved(&self) -> &Saved {
        &self.tail.saved
    }

    /// Why it was taken.
    pub fn cause(&self) -> &Cause {
        &self.tail.head.cause
    }

    /// When it was copied (`CLOCK_REALTIME`, ns).
    pub fn taken_realtime_ns(&self) -> u64 {
        self.tail.head.taken_realtime_ns
    }

    /// Writes it to the file `path` as [`Reader::save`](crate::Reader::save) would have (a
    /// new file renamed over `path` when complete).
    pub fn write(&self, path: impl AsRef<Path>) -> Result<Saved> {
        replace(path.as_ref(), |tmp| {
            let file = create(tmp)?;
            file.write_all_at(&self.body, EXTENTS_AT).map_err(io(tmp))?;
            self.tail.write(&file, tmp)
        })
    }
}

impl core::fmt::Debug for Image {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Image")
            .field("saved", &self.tail.saved)
            .field("cause", &self.tail.head.cause)
            .finish_non_exhaustive()
    }
}

/// Copies the device `map` into memory (see [`save`]).
pub(crate) fn copy(
    map: &ReadMapping,
    shadow: Option<&Shadow>,
    cause: &Cause,
    latest_stamp: impl FnOnce() -> u64,
) -> Result<Image> {
    // Room for the whole image at once, so that the copy never stops to grow it (memory
    // reserved is not memory used: only the pages written are); else grown as it goes.
    let mut body = Vec::new();
    if let (Some(layout), None) = (Layout::of(map.header()), shadow) {
        let _ = body.try_reserve_exact(layout.file_len as usize);
    }
    let (body, tail) = emit(map, shadow, map.dir(), body, cause, latest_stamp)?;
    Ok(Image { body, tail })
}

/// Makes the file `path` with `write`, which writes a new file beside it (named so that
/// `snapshots` and the retention pass it by) that is renamed over `path` once written.
fn replace(path: &Path, write: impl FnOnce(&Path) -> Result<Saved>) -> Result<Saved> {
    let name = path
        .file_name()
        .ok_or_else(|| io(path)(std::io::ErrorKind::InvalidInput.into()))?;
    let tmp = path.with_file_name(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let saved = write(&tmp).and_then(|saved| {
        std::fs::rename(&tmp, path).map_err(io(path))?;
        Ok(saved)
    });
    if saved.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    saved
}

fn create(path: &Path) -> Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
        .map_err(io(path))
}

/// What a snapshot file holds besides its extents from [`EXTENTS_AT`] on: its header page
/// and extent 0 (the device header), written last, in place.
struct Tail {
    head: SnapshotHeader,
    first: ExtentHead,
    /// The device header's bytes.
    header: Vec<u8>,
    saved: Saved,
}

impl Tail {
    /// Writes the header page and extent 0 into `file` (at `path`), whose extents are
    /// written, and makes an asked-for snapshot durable.
    fn write(&self, file: &std::fs::File, path: &Path) -> Result<Saved> {
        let put_at = |at: u64, bytes: &[u8]| file.write_all_at(bytes, at).map_err(io(path));
        put_at(PAGE, self.first.as_bytes())?;
        put_at(HEADER_DATA_AT, &self.header)?;
        put_at(0, self.head.as_bytes())?;
        // A snapshot asked for is made durable before it is renamed into place. A triggered
        // one is not waited for: its saver must be free to copy the next moment, and a file
        // cut by a power loss fails its checksums and is named as damaged, never misread.
        use ttrace_layouts::snapshot::CauseKind;
        if matches!(
            CauseKind::from_raw(self.head.cause.kind),
            CauseKind::Asked | CauseKind::Saved
        ) {
            file.sync_all().map_err(io(path))?;
        }
        Ok(self.saved)
    }
}

/// Copies the device `map` as the extents of a snapshot into `out` (the file
/// from [`EXTENTS_AT`] on; `path` names it in errors), and returns what the file holds
/// besides.
/// Writes the extents of `map`'s image, its rings (slots, heads and aux buffers) taken from
/// `shadow` where given ([`crate::shadow`]), else copied from the device.
fn emit<W: Write>(
    map: &ReadMapping,
    shadow: Option<&Shadow>,
    path: &Path,
    out: W,
    cause: &Cause,
    latest_stamp: impl FnOnce() -> u64,
) -> Result<(W, Tail)> {
    let h = map.header();
    // A follower's copy may hold more positions a ring than the device: it is saved as a
    // device with rings as long as its longest.
    let n = shadow.map_or(map.ring_slots(), Shadow::slots);
    // Its strings may span more than a buffer (it keeps those of its window): saved in
    // buffers as long as its longest.
    let mut shadow_aux: Option<Vec<crate::aux::AuxCopy>> =
        shadow.map(|s| (0..map.num_rings()).map(|r| s.aux_copy(r)).collect());
    let aux_size = shadow_aux.iter().flatten().fold(h.aux_size, |size, c| {
        let span = c.last.saturating_sub(c.first).next_power_of_two();
        size.max(span.min(ttrace_layouts::device::MAX_AUX_BYTES))
    });
    let layout = Layout::for_sizes(h.num_cpus, n, aux_size, h.meta_size).ok_or_else(|| {
        bad(
            map.dir(),
            Problem::Header(HeaderError::Field {
                which: "device size",
                value: u64::MAX,
            }),
        )
    })?;
    let mut out = Extents {
        out,
        end: EXTENTS_AT,
        count: 1,
    };
    let mut put = |at: u64, bytes: &[u8]| out.part(at, bytes).map_err(io(path));
    let mut saved = Saved {
        image_bytes: layout.file_len,
        ..Saved::default()
    };
    // The names before and after the rings: a compaction in between may have reclaimed
    // the name of an event copied (see `Names::generation`).
    let names_before = map.names().copy();
    // Rings: each one's aux records, its slots, then its header with the counters.
    let mut aux_part = vec![0u8; aux_size as usize];
    let slot_bytes = SLOT_WORDS * 8;
    let n = n as usize;
    // Zeroed lazily by the kernel: only the pages of the slots copied into it take room.
    let mut part = vec![0u8; RING_HEADER_BYTES + n * slot_bytes];
    // The bytes of `part` the ring before may have written (the rest are still zero), so
    // that clearing it for the next takes no room either.
    let mut dirty = 0;
    for r in 0..map.num_rings() {
        let aux = match &mut shadow_aux {
            Some(copies) => std::mem::take(&mut copies[r]),
            None => {
                let release = |w| map.release_aux_words(r, w);
                map.aux(r).copy_releasing(release).unwrap_or_else(|e| {
                    saved.aux_error.get_or_insert(e);
                    Default::default()
                })
            }
        };
        aux_part.fill(0);
        aux.place_into(&mut aux_part);
        put(layout.aux_at + r as u64 * aux_size, &aux_part)?;
        part[..dirty].fill(0);
        let rh: *const RingHeader = map.ring_header(r);
        // SAFETY: a ring header is RING_HEADER_BYTES of a live mapping, 128-aligned,
        // changed by writers only through its atomics.
        load(
            unsafe { words(rh.cast(), RING_HEADER_BYTES) },
            &mut part[..RING_HEADER_BYTES],
        );
        let used = match shadow {
            // A shadow is the follower's memory: read whole, its cut where it had read to.
            Some(s) => {
                let slots = &mut part[RING_HEADER_BYTES..];
                // The slots up to the last one placed: the rest are still zero.
                let mut top = 0;
                s.place_ring(r, n as u64, |i, w| {
                    slots[i * slot_bytes..(i + 1) * slot_bytes].copy_from_slice(w.as_bytes());
                    saved.counts.committed += 1;
                    top = top.max(i + 1);
                });
                map.release_slots(r, 0..map.ring_slots() as usize);
                top
            }
            // The slots as a view copies them ([`RingCopy`]), at the cut of their copy: its
            // `head` (and `skipped`) loaded before the slots, so that an entry committed
            // while they are copied lies at or above the cut, and a reader of the file then
            // counts it as neither shown nor lost; one it overwrote is lost, as it was. Only
            // the slots that can hold data are read (a read of a page never written would
            // make a device on tmpfs allocate it, so a snapshot would fill every ring it
            // saves).
            None => {
                let copy = RingCopy::of(&map.ring(r), |slots| map.release_slots(r, slots));
                let ring = copy.ring();
                let mut set =
                    |at: usize, v: u64| part[at..at + 8].copy_from_slice(&v.to_ne_bytes());
                set(core::mem::offset_of!(RingHeader, head), ring.head());
                set(core::mem::offset_of!(RingHeader, skipped), ring.skipped());
                set(core::mem::offset_of!(RingHeader, dropped), ring.dropped());
                saved.counts += copy.found();
                copy.place_into(&mut part[RING_HEADER_BYTES..]) / slot_bytes
            }
        };
        dirty = RING_HEADER_BYTES + used * slot_bytes;
        // The aux lock saved free, the offsets those of the records copied.
        let mut set = |at: usize, v: u64| part[at..at + 8].copy_from_slice(&v.to_ne_bytes());
        set(core::mem::offset_of!(RingHeader, aux_lock), 0);
        if let Some(s) = shadow {
            // The follower's cut: where it had read to, in rings of the copy's length.
            set(core::mem::offset_of!(RingHeader, head), s.head(r));
            set(core::mem::offset_of!(RingHeader, slots), n as u64);
        }
        set(core::mem::offset_of!(RingHeader, aux_first), aux.first);
        let last = aux.last.max(aux.first);
        set(core::mem::offset_of!(RingHeader, aux_last), last);
        // The header in extents of its own: damage to the slots leaves it whole.
        let at = layout.rings_at + r as u64 * layout.ring_stride;
        let (head, slots) = part[..dirty].split_at(RING_HEADER_BYTES);
        put(at, head)?;
        // The slots not read are zero: no extent, as the whole part would give.
        put(at + RING_HEADER_BYTES as u64, slots)?;
    }
    // Metadata: the header page and the tracepoint words, then the records published,
    // then the names in half 0.
    let records = map.registry().records_bytes();
    let (_, names_at, half) = ttrace_layouts::meta::split(h.max_tracepoints, h.meta_size);
    let names = crate::names::union(names_before, map.names().copy(), half as usize);
    put(layout.meta_at + names_at, &names)?;
    let front = ttrace_layouts::meta::records_offset(h.max_tracepoints) as usize;
    let mut part = vec![0u8; front];
    let mh = MetaHeader::new(h.max_tracepoints, h.meta_size);
    part[..META_HEADER_BYTES as usize].copy_from_slice(mh.as_bytes());
    let tp = map.registry().table();
    let table = META_HEADER_BYTES as usize + tp.len() * 8;
    // The words of the ids registered: those of the records copied, and any registered
    // since (Acquire: with the `tp_count` its registration stored). A word of an id never
    // registered was never written, and is not read (as a ring's unwritten slots are not);
    // a count beyond the table (a damaged device) reads the whole table, never more.
    let defined = crate::meta::Metadata::parse(&records)
        .tracepoints
        .iter()
        .map(|t| u64::from(t.id) + 1)
        .max()
        .unwrap_or(0);
    let ids = h.tp_count.load_acquire().max(defined);
    let ids = usize::try_from(ids).map_or(tp.len(), |n| n.min(tp.len()));
    load(&tp[..ids], &mut part[META_HEADER_BYTES as usize..table]);
    let (head, table) = part.split_at(META_HEADER_BYTES as usize);
    put(layout.meta_at, head)?;
    put(layout.meta_at + META_HEADER_BYTES, table)?;
    put(layout.meta_at + front as u64, &records)?;
    let Extents { out, end, count } = out;
    // The device header last, its counters after what they count; locks free. It is
    // extent 0, whole: a reader checks it before it reads any other extent.
    let mut header = DeviceHeader::new_zeroed();
    // SAFETY: the header is HEADER_BYTES of a live mapping, changed only via atomics.
    load(
        unsafe { words((h as *const DeviceHeader).cast(), HEADER_BYTES) },
        header.as_mut_bytes(),
    );
    header.ring_slots = n as u64;
    header.aux_size = aux_size;
    header.aux_mask = aux_size - 1;
    *header.meta_lock.get_mut() = 0;
    *header.meta_used.get_mut() = records.len() as u64;
    *header.names_generation.get_mut() = 0;
    *header.names_used[0].get_mut() = names.len() as u64;
    *header.names_used[1].get_mut() = 0;
    let first = ExtentHead::of(layout.header_at, header.as_mut_bytes());
    let source = map.dir().display().to_string();
    // After the copy: no event saved is later.
    let mut head = SnapshotHeader::new(layout, crate::clock::realtime_ns(), &source);
    head.latest_stamp = latest_stamp();
    head.cause = *cause;
    head.stored_len = end;
    head.extents = count;
    head.seal();
    saved.bytes = end;
    Ok((
        out,
        Tail {
            head,
            first,
            header: header.as_mut_bytes().to_vec(),
            saved,
        },
    ))
}

/// A snapshot file opened: the device it holds, and what the file says besides.
pub(crate) struct Opened {
    /// The image, as a device's mapping.
    pub(crate) map: ReadMapping,
    /// When the snapshot was taken (`CLOCK_REALTIME`, ns).
    pub(crate) taken_realtime_ns: u64,
    /// The latest timestamp an event of it can have.
    pub(crate) latest_stamp: u64,
    /// The extents whose bytes failed their checksum, left out.
    pub(crate) damaged: Vec<DamagedExtent>,
    /// Why it was taken.
    pub(crate) cause: Cause,
}

/// Opens the snapshot file `path` (made by [`save`]) as a device's mapping.
///
/// Any readable file is accepted (a snapshot is a static file, often someone else's);
/// its contents are checked as a device's are. The file is read whole into memory: its
/// extents placed in an image of zeros, its checksums checked, a damaged extent left out
/// and named.
pub(crate) fn open(path: &Path) -> Result<Opened> {
    let file = crate::files::open_regular(path, std::fs::OpenOptions::new().read(true), true)?;
    let len = file.metadata().map_err(io(path))?.len();
    let min = PAGE + HEADER_BYTES as u64;
    if len < min {
        return Err(bad(
            path,
            Problem::Length {
                found: len,
                expected: min,
            },
        ));
    }
    let mut head = SnapshotHeader::new_zeroed();
    file.read_exact_at(head.as_mut_bytes(), 0)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => bad(path, Problem::Shrunk),
            _ => io(path)(e),
        })?;
    if head.magic == SNAPSHOT_PRE_RELEASE_MAGIC {
        return Err(Error::PreRelease {
            path: path.to_path_buf(),
            what: crate::error::PreRelease::Snapshot,
        });
    }
    if head.magic != SNAPSHOT_MAGIC {
        return Err(bad(
            path,
            Problem::Header(if head.magic == SNAPSHOT_MAGIC.swap_bytes() {
                HeaderError::ByteOrder
            } else {
                HeaderError::BadMagic(head.magic)
            }),
        ));
    }
    // The header page must agree with its checksum before anything it says is believed
    // (its version included: a flipped bit there is damage, not a format to come).
    if head.header_sum != head.own_sum() {
        return Err(bad(
            path,
            Problem::Damaged {
                offset: 0,
                what: "its header page",
            },
        ));
    }
    if head.version >> 16 != SNAPSHOT_VERSION >> 16 {
        return Err(bad(
            path,
            Problem::Header(HeaderError::Version {
                which: "snapshot version",
                found: head.version,
                expected: SNAPSHOT_VERSION,
            }),
        ));
    }
    let (image, damaged) = expand(path, &file, len, &head)?;
    // Built: from now on only read, so read-only, as a device's files are to a reader.
    let map = image.make_read_only().map_err(io(path))?;
    Ok(Opened {
        map: from_image(path, map, &head.layout)?,
        taken_realtime_ns: head.taken_realtime_ns,
        latest_stamp: head.latest_stamp,
        damaged,
        cause: head.cause,
    })
}

/// The device held by `map`, the image of a snapshot file `path` laid out as `layout`
/// says (checked here against the device header the image holds).
fn from_image(path: &Path, map: memmap2::Mmap, layout: &Layout) -> Result<ReadMapping> {
    let part_path = |name: &str| PathBuf::from(format!("{}[{name}]", path.display()));
    let hpath = part_path("header");
    // Every layout puts the device header on the second page (`Layout::of`).
    if layout.header_at != PAGE {
        return Err(bad(path, Problem::Mismatch));
    }
    let at = PAGE as usize;
    let dh = map
        .get(at..at + HEADER_BYTES)
        .and_then(|b| DeviceHeader::read_from_bytes(b).ok())
        .ok_or_else(|| bad(&hpath, Problem::Misaligned))?;
    dh.check().map_err(|e| bad(&hpath, e.into()))?;
    let layout = Layout::of(&dh).filter(|l| l == layout);
    let Some(layout) = layout else {
        return Err(bad(path, Problem::Mismatch));
    };
    let len = map.len() as u64;
    if len != layout.file_len {
        return Err(bad(
            path,
            Problem::Length {
                found: len,
                expected: layout.file_len,
            },
        ));
    }
    // Every part is derived from this one pointer to the whole mapping.
    let base = NonNull::from(&map[..]).cast::<u8>();
    // SAFETY: the header lies at `header_at` (a page: aligned) within the mapping, whose
    // length is `file_len`, and any bytes are a valid `DeviceHeader`.
    let header = unsafe { base.add(layout.header_at as usize) }.cast::<DeviceHeader>();
    let parts = |name: &str, want: u64| {
        let p = part_path(name);
        match layout.part(&dh, name) {
            Some((at, len)) if len == want && at + len <= layout.file_len => Ok((
                p,
                // SAFETY: `at + len` is within the mapping (its length is `file_len`).
                NonNull::slice_from_raw_parts(unsafe { base.add(at as usize) }, len as usize),
            )),
            _ => Err(bad(&p, Problem::Mismatch)),
        }
    };
    let parts = Parts::assemble(path, header, &dh, parts)?;
    parts.check_files()?;
    Ok(ReadMapping::of_image(parts, map, Vec::new()))
}

/// Writes the extents of a snapshot, from [`EXTENTS_AT`] on.
struct Extents<W> {
    out: W,
    /// The file offset after the last extent written.
    end: u64,
    /// Extents written, extent 0 (written last, in place) included.
    count: u64,
}

impl<W: Write> Extents<W> {
    /// Writes the part `bytes` of the image at `at` (8-aligned; its length a multiple of 8):
    /// each run of its 64-byte blocks that are not all zero, as an extent.
    fn part(&mut self, at: u64, bytes: &[u8]) -> std::io::Result<()> {
        for (start, end) in used_runs(bytes, SLOT_WORDS * 8) {
            let head = ExtentHead::of(at + start as u64, &bytes[start..end]);
            self.out.write_all(head.as_bytes())?;
            self.out.write_all(&bytes[start..end])?;
            self.end += EXTENT_HEAD_BYTES + head.len;
            self.count += 1;
        }
        Ok(())
    }
}

/// A snapshot file read once, in order.
struct Input<'a> {
    path: &'a Path,
    file: std::io::BufReader<&'a std::fs::File>,
    /// Where the reader is.
    off: u64,
    /// The file's length.
    len: u64,
    /// The image's length.
    image_len: u64,
}

impl Input<'_> {
    fn malformed(&self, offset: u64) -> Error {
        bad(self.path, Problem::Extent { offset })
    }

    /// Fills `into` from the file: a file that ends sooner than it said (cut while read) is
    /// one whose length is wrong.
    fn read(&mut self, into: &mut [u8]) -> Result<()> {
        self.file.read_exact(into).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => bad(
                self.path,
                Problem::Length {
                    found: self.off,
                    expected: self.len,
                },
            ),
            _ => io(self.path)(e),
        })?;
        self.off += into.len() as u64;
        Ok(())
    }

    /// The next extent's head, checked against its checksum, the image and the file: its
    /// image range, and its head (with the sum of its bytes).
    fn extent(&mut self) -> Result<(u64, u64, ExtentHead)> {
        let at = self.off;
        if self.len - at < EXTENT_HEAD_BYTES {
            return Err(self.malformed(at));
        }
        let mut h = ExtentHead::default();
        self.read(h.as_mut_bytes())?;
        if !h.is_intact() {
            return Err(bad(
                self.path,
                Problem::Damaged {
                    offset: at,
                    what: "the head of an extent",
                },
            ));
        }
        let end = h.at.checked_add(h.len).ok_or_else(|| self.malformed(at))?;
        let fits = h.len > 0 && h.at % 8 == 0 && h.len % 8 == 0 && h.at >= PAGE;
        if !fits || end > self.image_len || h.len > self.len - self.off {
            return Err(self.malformed(at));
        }
        Ok((h.at, end, h))
    }
}

/// The image of the snapshot file `path` (`len` bytes, its header page
/// `head`): its extents, checked, read into a zeroed anonymous mapping the size of the
/// image; and the extents whose bytes failed their checksum, left out of it.
fn expand(
    path: &Path,
    file: &std::fs::File,
    len: u64,
    head: &SnapshotHeader,
) -> Result<(memmap2::MmapMut, Vec<DamagedExtent>)> {
    if len != head.stored_len {
        return Err(bad(
            path,
            Problem::Length {
                found: len,
                expected: head.stored_len,
            },
        ));
    }
    let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
    reader
        .seek(std::io::SeekFrom::Start(PAGE))
        .map_err(io(path))?;
    let mut input = Input {
        path,
        file: reader,
        off: PAGE,
        len,
        image_len: head.layout.file_len,
    };
    // Extent 0 is the device header, whole: checked before the image is made.
    if head.layout.header_at != PAGE {
        return Err(bad(path, Problem::Mismatch));
    }
    let (at, end, first) = input.extent()?;
    if (at, end) != (PAGE, PAGE + HEADER_BYTES as u64) {
        return Err(input.malformed(PAGE));
    }
    let mut dh = DeviceHeader::new_zeroed();
    input.read(dh.as_mut_bytes())?;
    if !first.holds(dh.as_mut_bytes()) {
        return Err(bad(
            path,
            Problem::Damaged {
                offset: PAGE,
                what: "extent 0 (the device header)",
            },
        ));
    }
    let hpath = PathBuf::from(format!("{}[header]", path.display()));
    dh.check().map_err(|e| bad(&hpath, e.into()))?;
    if Layout::of(&dh).as_ref() != Some(&head.layout) {
        return Err(bad(path, Problem::Mismatch));
    }
    let image_len =
        usize::try_from(head.layout.file_len).map_err(|_| bad(path, Problem::Mismatch))?;
    let mut image = memmap2::MmapMut::map_anon(image_len).map_err(io(path))?;
    image[PAGE as usize..PAGE as usize + HEADER_BYTES].copy_from_slice(dh.as_mut_bytes());
    let mut ranges = vec![(PAGE, PAGE + HEADER_BYTES as u64, PAGE)];
    let mut damaged = Vec::new();
    for index in 1..head.extents {
        let start = input.off;
        let (at, end, sums) = input.extent()?;
        // Within the image (checked), whose length is a usize.
        let bytes = &mut image[at as usize..end as usize];
        input.read(bytes)?;
        if !sums.holds(bytes) {
            damaged.push((index, start, at..end));
        }
        ranges.push((at, end, start));
    }
    // Nothing may follow the last extent.
    let more = input.file.fill_buf().map_err(io(path))?.len();
    if input.off != len || more != 0 {
        return Err(input.malformed(input.off));
    }
    ranges.sort_unstable();
    if let Some(w) = ranges.windows(2).find(|w| w[1].0 < w[0].1) {
        return Err(input.malformed(w[1].2));
    }
    let damaged = crate::damaged_extent::leave_out(&mut image, &dh, &head.layout, &damaged);
    Ok((image, damaged))
}
