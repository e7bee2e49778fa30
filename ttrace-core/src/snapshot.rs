//! A device saved to one file, and read back as a device whose writers stopped.
//!
//! Each part is copied with its reader protocol, so the file holds only what a reader of
//! the live device could have accepted: a ring slot is copied with the stamp check (a
//! complete entry as it was, a slot still being written as its claimed stamp alone, a slot
//! overwritten during the copy as empty, counted as lost), each aux buffer with the aux
//! protocol (the records at or after the `first` the copy ends with), the metadata up to
//! the length published when it was copied. A ring's header is copied before its slots (its
//! `head` is the cut: what is committed during the copy is above it), the other counters
//! (`last`, ...) after what they count, and the locks are saved free. See `ttrace_layouts::snapshot` for
//! the layout.

use crate::device::{Access, Device};
use crate::error::{Error, Problem, Result};
use crate::ring::SlotRead;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use ttrace_layouts::device::{DeviceHeader, HeaderError, HEADER_BYTES};
use ttrace_layouts::entry::SLOT_WORDS;
use ttrace_layouts::meta::{MetaHeader, META_HEADER_BYTES};
use ttrace_layouts::ring::{RingHeader, RING_HEADER_BYTES};
use ttrace_layouts::snapshot::{Layout, SnapshotHeader, PAGE, SNAPSHOT_MAGIC, SNAPSHOT_VERSION};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

/// What a snapshot holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Saved {
    /// Complete entries (parents and continuations) copied.
    pub entries: u64,
    /// Slots still being written, saved as claimed.
    pub claimed: u64,
    /// Slots overwritten while they were copied, saved empty.
    pub changed: u64,
    /// Bytes of the file.
    pub bytes: u64,
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

fn bad(path: &Path, problem: Problem) -> Error {
    Error::BadDevice {
        path: path.to_path_buf(),
        problem,
    }
}

impl Device {
    /// Saves a consistent copy of the device to the file `path` (created, or replaced;
    /// mode 0600). Parts of the file that the device does not use are left as holes. The
    /// copy is written to a new file beside `path` and renamed over it when complete, so a
    /// failed save leaves `path` as it was, and saving over the file being read is safe.
    pub fn save(&self, path: &Path) -> Result<Saved> {
        let name = path
            .file_name()
            .ok_or_else(|| io(path)(std::io::ErrorKind::InvalidInput.into()))?;
        let tmp = path.with_file_name(format!(
            ".{}.tmp-{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        let saved = self.save_to(&tmp).and_then(|saved| {
            std::fs::rename(&tmp, path).map_err(io(path))?;
            Ok(saved)
        });
        if saved.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        saved
    }

    fn save_to(&self, path: &Path) -> Result<Saved> {
        let h = self.header();
        let layout = Layout::of(h).ok_or_else(|| {
            bad(
                self.dir(),
                Problem::Header(HeaderError::Field {
                    which: "device size",
                    value: u64::MAX,
                }),
            )
        })?;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC)
            .open(path)
            .map_err(io(path))?;
        file.set_len(layout.file_len).map_err(io(path))?;
        let put = |at: u64, bytes: &[u8]| file.write_all_at(bytes, at).map_err(io(path));
        let mut saved = Saved {
            bytes: layout.file_len,
            ..Saved::default()
        };
        // The names before and after the rings: a compaction in between may have reclaimed
        // the name of an event copied (see `Device::names_generation`).
        let names_before = self.names_bytes();
        // Rings: each one's aux records, its slots, then its header with the counters.
        let aux_size = h.aux_size;
        for r in 0..self.num_rings() {
            let aux = self.aux(r);
            let aux = crate::aux::copy(aux.first, aux.last, aux.words).unwrap_or_else(|e| {
                saved.aux_error.get_or_insert(e);
                Default::default()
            });
            let mut part = vec![0u8; aux_size as usize];
            aux.place_into(&mut part);
            put(layout.aux_at + r as u64 * aux_size, &part)?;
            let ring = self.ring(r);
            let mut part = vec![0u8; RING_HEADER_BYTES + ring.slots.len() * SLOT_WORDS * 8];
            // The header (its `head`: the cut) before the slots: an entry committed while
            // they are copied lies at or above the cut, and a reader of the file then counts
            // it as neither shown nor lost; one it overwrote is lost, as it was.
            let rh: *const RingHeader = self.ring_header(r);
            // SAFETY: a ring header is RING_HEADER_BYTES of a live mapping, 128-aligned,
            // changed by writers only through its atomics.
            load(
                unsafe { words(rh.cast(), RING_HEADER_BYTES) },
                &mut part[..RING_HEADER_BYTES],
            );
            for (i, slot) in part[RING_HEADER_BYTES..]
                .chunks_exact_mut(SLOT_WORDS * 8)
                .enumerate()
            {
                let read = (0..4)
                    .map(|_| ring.read(i))
                    .find(|r| *r != SlotRead::Changed)
                    .unwrap_or(SlotRead::Changed);
                match read {
                    SlotRead::Committed(w) => {
                        slot.copy_from_slice(w.as_bytes());
                        saved.entries += 1;
                    }
                    SlotRead::Claimed(stamp) => {
                        slot[..8].copy_from_slice(&stamp.0.to_ne_bytes());
                        saved.claimed += 1;
                    }
                    SlotRead::Changed => saved.changed += 1,
                    SlotRead::Empty => {}
                }
            }
            // The aux lock saved free, the offsets those of the records copied.
            let mut set = |at: usize, v: u64| part[at..at + 8].copy_from_slice(&v.to_ne_bytes());
            set(core::mem::offset_of!(RingHeader, aux_lock), 0);
            set(core::mem::offset_of!(RingHeader, aux_first), aux.first);
            let last = aux.last.max(aux.first);
            set(core::mem::offset_of!(RingHeader, aux_last), last);
            put(layout.rings_at + r as u64 * layout.ring_stride, &part)?;
        }
        // Metadata: the header page and the tracepoint words, then the records published,
        // then the names in half 0.
        let records = self.metadata_bytes();
        let (_, names_at, half) = ttrace_layouts::meta::split(h.max_tracepoints, h.meta_size);
        let names = crate::names::union(names_before, self.names_bytes(), half as usize);
        put(layout.meta_at + names_at, &names)?;
        let front = ttrace_layouts::meta::records_offset(h.max_tracepoints) as usize;
        let mut part = vec![0u8; front];
        let mh = MetaHeader::new(h.max_tracepoints, h.meta_size);
        part[..META_HEADER_BYTES as usize].copy_from_slice(mh.as_bytes());
        let tp = self.tp_words();
        let table = META_HEADER_BYTES as usize + tp.len() * 8;
        load(tp, &mut part[META_HEADER_BYTES as usize..table]);
        put(layout.meta_at, &part)?;
        put(layout.meta_at + front as u64, &records)?;
        // The device header last, its counters after what they count; locks free.
        let mut copy = DeviceHeader::new_zeroed();
        // SAFETY: the header is HEADER_BYTES of a live mapping, changed only via atomics.
        load(
            unsafe { words((h as *const DeviceHeader).cast(), HEADER_BYTES) },
            copy.as_mut_bytes(),
        );
        *copy.meta_lock.get_mut() = 0;
        *copy.meta_used.get_mut() = records.len() as u64;
        *copy.names_generation.get_mut() = 0;
        *copy.names_used[0].get_mut() = names.len() as u64;
        *copy.names_used[1].get_mut() = 0;
        put(layout.header_at, copy.as_mut_bytes())?;
        let source = self.dir().display().to_string();
        let head = SnapshotHeader::new(layout, crate::clock::realtime_ns(), &source);
        put(0, head.as_bytes())?;
        file.sync_all().map_err(io(path))?;
        Ok(saved)
    }

    /// Opens the snapshot file `path` (made by [`Device::save`]) as a read-only device.
    ///
    /// Any readable file is accepted (a snapshot is a static file, often someone else's);
    /// its contents are checked as a device's are, and shrinking it while it is read is
    /// reported like a device file shrinking.
    pub fn attach_snapshot(path: &Path) -> Result<Device> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(path)
            .map_err(io(path))?;
        let len = file.metadata().map_err(io(path))?.len();
        let min = PAGE + HEADER_BYTES as u64;
        let too_short = |found| {
            bad(
                path,
                Problem::Length {
                    found,
                    expected: min,
                },
            )
        };
        if len < min {
            return Err(too_short(len));
        }
        // SAFETY: a private mapping of a file only read here; a file shrunk under it is
        // caught by the SIGBUS watch set below before anything but the checks reads it.
        let mut map = unsafe { memmap2::MmapOptions::new().map_copy(&file) }.map_err(io(path))?;
        let watch = crate::sigbus::watch(map.as_ptr(), map.len());
        // From here on, the length of the mapping (the file may have changed since `len`).
        let len = map.len() as u64;
        if len < min {
            return Err(too_short(len));
        }
        let (head, _) = SnapshotHeader::read_from_prefix(&map[..])
            .map_err(|_| bad(path, Problem::Misaligned))?;
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
        let part_path = |name: &str| PathBuf::from(format!("{}[{name}]", path.display()));
        let hpath = part_path("header");
        // Every layout puts the device header on the second page (`Layout::of`).
        if head.layout.header_at != PAGE {
            return Err(bad(path, Problem::Mismatch));
        }
        let at = PAGE as usize;
        let dh = DeviceHeader::read_from_bytes(&map[at..at + HEADER_BYTES])
            .map_err(|_| bad(&hpath, Problem::Misaligned))?;
        dh.check().map_err(|e| bad(&hpath, e.into()))?;
        let layout = Layout::of(&dh).filter(|l| *l == head.layout);
        let Some(layout) = layout else {
            return Err(bad(path, Problem::Mismatch));
        };
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
        let base = NonNull::from(&mut map[..]).cast::<u8>();
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
        let mut dev = Device::assemble(path, header, &dh, Access::ReadOnly, parts)?;
        dev.watches = watch.map(|w| (path.to_path_buf(), w)).into_iter().collect();
        dev._maps = vec![map];
        dev.check_files()?;
        Ok(dev)
    }
}
