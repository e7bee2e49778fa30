//! The device directory: creating it atomically, attaching to it, and the typed views of its
//! memory-mapped files.

use crate::error::{io, Error, Problem, Result};
use crate::ring::Ring;
use core::ptr::NonNull;
use core::sync::atomic::AtomicU64;
use memmap2::MmapMut;
use std::fs::{DirBuilder, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;
use ttrace_layouts::device::{self as layout, ClockSource, DeviceHeader, HEADER_BYTES};
use ttrace_layouts::entry::Slot;
use ttrace_layouts::meta::{MetaHeader, META_MAGIC};
use ttrace_layouts::ring::{
    num_rings, ring_file_bytes, ring_name, RingHeader, RESTARTABLE, RING_HEADER_BYTES, RING_MAGIC,
    SHARED,
};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

/// Environment variable naming the device directory.
pub const ENV_DIR: &str = "TTRACE_DIR";
/// Environment variable that, set to anything but the empty string, makes this process's
/// writers use the shared rings (the atomic protocol) instead of restartable sequences.
pub const ENV_NO_RSEQ: &str = "TTRACE_NO_RSEQ";
/// Environment variable: slots per ring of a device created by [`Config::from_env`].
pub const ENV_RING_SLOTS: &str = "TTRACE_RING_SLOTS";
/// Environment variable: bytes of each ring's aux buffer ([`Config::from_env`]).
pub const ENV_AUX_SIZE: &str = "TTRACE_AUX_SIZE";
/// Environment variable: the class mask to set at start-up ([`Config::from_env`]).
pub const ENV_MASK: &str = "TTRACE_MASK";
/// Environment variable: `1` sets the class mask to 0 at start-up, so that nothing records
/// until `ttrace-reader ctl` turns it on ([`Config::from_env`]).
pub const ENV_DISABLED: &str = "TTRACE_DISABLED";

/// The default of [`Config::ring_slots`].
pub const DEFAULT_RING_SLOTS: u64 = 16384;
/// The default of [`Config::aux_bytes`].
pub const DEFAULT_AUX_BYTES: u64 = 256 << 10;
/// The default of [`Config::max_tracepoints`].
pub const DEFAULT_MAX_TRACEPOINTS: u32 = 4096;

/// How to create a device. Opening an existing device checks every size that differs from
/// its default against the device's, and fails with [`Error::SizeMismatch`] where they
/// differ (a size left at its default accepts the device's).
#[derive(Clone, Debug)]
pub struct Config {
    /// The device directory; `None` means [`default_dir`].
    pub dir: Option<PathBuf>,
    /// Slots per ring: a power of two, at least 2 (default 16384 = 1 MiB).
    pub ring_slots: u64,
    /// Bytes of each ring's aux buffer: a power of two (default 256 KiB; the `aux` file holds
    /// one per ring, two rings per CPU, and pages never written cost nothing).
    pub aux_bytes: u64,
    /// Bytes of the metadata file; `0` (the default) sizes it for the rings
    /// ([`meta_bytes_for`]). Untouched pages cost nothing.
    pub meta_bytes: u64,
    /// Capacity of the tracepoint table (default 4096).
    pub max_tracepoints: u32,
    /// Number of CPUs to make rings for (two each: a restartable and a shared one); `None`
    /// means the number of configured CPUs.
    pub cpus: Option<u32>,
    /// Clock; `None` means the best one this machine has.
    pub clock: Option<ClockSource>,
    /// How long to calibrate the TSC rate against `CLOCK_MONOTONIC` (default 20 ms).
    pub calibration: Duration,
    /// A class mask to set when the device is opened (created or attached): the mask is
    /// the device's, so this changes it for every process, as `ttrace-reader ctl setmask`
    /// does. `None` (the default) leaves it as it is.
    pub mask: Option<u64>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            dir: None,
            ring_slots: DEFAULT_RING_SLOTS,
            aux_bytes: DEFAULT_AUX_BYTES,
            meta_bytes: 0,
            max_tracepoints: DEFAULT_MAX_TRACEPOINTS,
            cpus: None,
            clock: None,
            calibration: Duration::from_millis(20),
            mask: None,
        }
    }
}

impl Config {
    /// The default configuration for the device directory `dir`.
    pub fn at(dir: impl Into<PathBuf>) -> Config {
        Config {
            dir: Some(dir.into()),
            ..Config::default()
        }
    }

    /// The directory this configuration names.
    pub fn resolved_dir(&self) -> PathBuf {
        self.dir.clone().unwrap_or_else(default_dir)
    }

    /// The default configuration as the environment changes it: `TTRACE_DIR` (the
    /// directory, as [`default_dir`]), `TTRACE_RING_SLOTS` and `TTRACE_AUX_SIZE` (sizes, in
    /// decimal or `0x` hex, with an optional `k`/`m` suffix for the aux size),
    /// `TTRACE_MASK` (the class mask to set) and `TTRACE_DISABLED=1` (set the mask to 0:
    /// everything off). This is what the first trace point of a process that never called
    /// [`crate::init`] uses. A value that is not a number, or out of range, is an
    /// [`Error::Config`] naming the variable; an empty one counts as unset.
    ///
    /// ```
    /// let c = ttrace_core::Config::from_env()?;
    /// assert!(c.ring_slots.is_power_of_two());
    /// # Ok::<(), ttrace_core::Error>(())
    /// ```
    pub fn from_env() -> Result<Config> {
        Config::from_vars(|name| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(|v| v.to_string_lossy().into_owned())
        })
    }

    /// [`Config::from_env`] with the variables given by `var`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Config> {
        let mut c = Config::default();
        let bad =
            |name: &str, value: &str, why: &str| Error::Config(format!("{name}={value:?}: {why}"));
        if let Some(v) = var(ENV_RING_SLOTS) {
            let n = parse_size(&v, false).ok_or_else(|| bad(ENV_RING_SLOTS, &v, "not a number"))?;
            if !n.is_power_of_two() || !(2..=layout::MAX_RING_SLOTS).contains(&n) {
                return Err(bad(
                    ENV_RING_SLOTS,
                    &v,
                    &format!(
                        "slots per ring must be a power of two from 2 to {}",
                        layout::MAX_RING_SLOTS
                    ),
                ));
            }
            c.ring_slots = n;
        }
        if let Some(v) = var(ENV_AUX_SIZE) {
            let n = parse_size(&v, true).ok_or_else(|| bad(ENV_AUX_SIZE, &v, "not a size"))?;
            if !n.is_power_of_two() || !(layout::MIN_AUX_BYTES..=layout::MAX_AUX_BYTES).contains(&n)
            {
                return Err(bad(
                    ENV_AUX_SIZE,
                    &v,
                    &format!(
                        "bytes per aux buffer must be a power of two from {} to {}",
                        layout::MIN_AUX_BYTES,
                        layout::MAX_AUX_BYTES
                    ),
                ));
            }
            c.aux_bytes = n;
        }
        if let Some(v) = var(ENV_MASK) {
            c.mask = Some(parse_size(&v, false).ok_or_else(|| bad(ENV_MASK, &v, "not a number"))?);
        }
        match var(ENV_DISABLED).as_deref() {
            None | Some("0") => {}
            Some("1") => c.mask = Some(0),
            Some(v) => return Err(bad(ENV_DISABLED, v, "must be 1 (or 0)")),
        }
        Ok(c)
    }

    /// Fails with [`Error::SizeMismatch`] if the existing device `dev` does not have a size
    /// this configuration asks for (one that differs from its default).
    fn check_sizes(&self, dev: &Device) -> Result<()> {
        let h = dev.header();
        let d = Config::default();
        let checks = [
            (
                "slots per ring",
                self.ring_slots,
                d.ring_slots,
                h.ring_slots,
            ),
            (
                "aux bytes per ring",
                self.aux_bytes,
                d.aux_bytes,
                h.aux_size,
            ),
            ("metadata bytes", self.meta_bytes, d.meta_bytes, h.meta_size),
            (
                "tracepoint capacity",
                self.max_tracepoints as u64,
                d.max_tracepoints as u64,
                h.max_tracepoints as u64,
            ),
            ("cpus", self.cpus.map_or(0, u64::from), 0, h.num_cpus as u64),
        ];
        for (what, asked, default, found) in checks {
            if asked != default && asked != found {
                return Err(Error::SizeMismatch {
                    path: dev.dir().to_path_buf(),
                    what,
                    asked,
                    found,
                });
            }
        }
        Ok(())
    }
}

/// A size: decimal or `0x` hex, with a `k`, `m` or `g` suffix (binary units) if `units`.
fn parse_size(v: &str, units: bool) -> Option<u64> {
    let v = v.trim();
    let (digits, shift) = match v.as_bytes().last().map(u8::to_ascii_lowercase) {
        Some(b'k') if units => (&v[..v.len() - 1], 10),
        Some(b'm') if units => (&v[..v.len() - 1], 20),
        Some(b'g') if units => (&v[..v.len() - 1], 30),
        _ => (v, 0),
    };
    let n = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16).ok()?,
        None => digits.parse::<u64>().ok()?,
    };
    n.checked_mul(1 << shift)
}

/// The default device directory of this user: `$TTRACE_DIR` if set, else
/// `/dev/shm/ttrace-<uid>` (or `<tmp>/ttrace-<uid>` where `/dev/shm` does not exist).
pub fn default_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(ENV_DIR).filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    base.join(format!("ttrace-{uid}"))
}

/// The size of a `meta` file for rings of `ring_slots` slots on `cpus` CPUs: each half of
/// the names area holds a name (of up to 15 bytes, as the kernel keeps them) for every slot
/// of every ring, so that however many threads wrote the events in the rings, every one
/// keeps its name; at least 4 MiB, at most `MAX_META_BYTES`.
///
/// ```
/// let bytes = ttrace_core::device::meta_bytes_for(2, 16384, 4096);
/// let (_, _, half) = ttrace_layouts::meta::split(4096, bytes);
/// assert!(half >= 2 * 2 * 16384 * 48);
/// ```
pub fn meta_bytes_for(cpus: u32, ring_slots: u64, max_tracepoints: u32) -> u64 {
    let slots = ttrace_layouts::ring::num_rings(cpus) as u64 * ring_slots;
    let half = slots.saturating_mul(ttrace_layouts::meta::record_bytes(15));
    let bytes = ttrace_layouts::meta::records_offset(max_tracepoints)
        .saturating_add(half.saturating_mul(4))
        .next_multiple_of(4096);
    bytes.clamp(4 << 20, layout::MAX_META_BYTES)
}

/// Number of CPUs the system is configured with (at least 1).
pub fn configured_cpus() -> u32 {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    (n.max(1) as u64).min(layout::MAX_CPUS as u64) as u32
}

struct RingView {
    header: NonNull<RingHeader>,
    slots: NonNull<[Slot]>,
    aux: NonNull<[AtomicU64]>,
}

/// An open device: every file of the directory mapped shared, read-write.
///
/// ```
/// # let tmp = tempfile::tempdir().unwrap();
/// use ttrace_core::{Config, Device};
/// let dev = Device::open(&Config { ring_slots: 64, cpus: Some(2), ..Config::at(tmp.path().join("dev")) })?;
/// assert_eq!(dev.num_rings(), 4); // a restartable and a shared ring per CPU
/// // A second open of the same directory attaches to the same rings.
/// let again = Device::open(&Config::at(tmp.path().join("dev")))?;
/// assert_eq!(again.ring_slots(), 64);
/// # Ok::<(), ttrace_core::Error>(())
/// ```
pub struct Device {
    dir: PathBuf,
    header: NonNull<DeviceHeader>,
    rings: Box<[RingView]>,
    tp_words: NonNull<[AtomicU64]>,
    meta_records: NonNull<[AtomicU64]>,
    /// The names area: two halves of `names_half` bytes.
    names: NonNull<[AtomicU64]>,
    clock: ClockSource,
    access: Access,
    cpu_mode: i64,
    ring_mask: u64,
    num_cpus: u32,
    /// glibc's rseq area offset when this device takes the restartable path (0: it does not).
    rseq_offset: i64,
    /// The table of restartable rings the sections read (see [`crate::rseq`]).
    #[cfg_attr(loom, allow(dead_code))] // the restartable path is not built under loom
    rseq_table: crate::rseq::Table,
    /// A read-only device's mappings, watched for their files shrinking, with the files'
    /// paths (dropped before the mappings).
    pub(crate) watches: Vec<(PathBuf, crate::sigbus::Watch)>,
    pub(crate) _maps: Vec<MmapMut>,
}

// SAFETY: the pointers refer to the mappings in `_maps`, which live as long as the Device
// and are never remapped; everything reachable through them that can change is atomic.
unsafe impl Send for Device {}
// SAFETY: as above; shared access only ever goes through atomics.
unsafe impl Sync for Device {}

/// How a device is mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Shared and writable: writers, and control commands.
    ReadWrite,
    /// Files opened read-only and mapped private: a reader that cannot change the device,
    /// needs no write permission, and still sees every update (on Linux, pages of a private
    /// file mapping that are never written stay those of the page cache).
    ReadOnly,
}

/// Whose devices a process accepts to open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trust {
    /// Only a device that belongs to the calling user: directory and files owned by the
    /// effective user, none writable by group or others, the directory not a symlink (as ssh
    /// treats its keys). The default: a device in a shared directory could otherwise be one
    /// planted by another user, to read what is recorded or to feed readers a hostile file.
    Own,
    /// Any device the operating system lets this process open (an explicit opt-in, to read
    /// another user's trace).
    Any,
}

/// Checks that `meta` (of `path`) is the calling user's and writable by nobody else.
fn check_trust(path: &Path, meta: &std::fs::Metadata, trust: Trust, uid: u32) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    if trust == Trust::Any {
        return Ok(());
    }
    if meta.file_type().is_symlink() {
        return Err(bad(path, Problem::Symlink));
    }
    if meta.uid() != uid {
        return Err(bad(
            path,
            Problem::Owner {
                owner: meta.uid(),
                user: uid,
            },
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(bad(
            path,
            Problem::Writable {
                mode: meta.mode() & 0o7777,
            },
        ));
    }
    Ok(())
}

/// The effective user id.
fn euid() -> u32 {
    // SAFETY: geteuid has no arguments and no memory effects.
    unsafe { libc::geteuid() }
}

/// Opens a file of an existing device, refusing one that is not the user's (see [`Trust`]).
fn open_existing(path: &Path, access: Access, trust: Trust) -> Result<File> {
    let file = open_file(path, None, access).map_err(|e| match e {
        // O_NOFOLLOW refuses a symlink with ELOOP.
        Error::Io { path, source } if source.raw_os_error() == Some(libc::ELOOP) => {
            bad(&path, Problem::Symlink)
        }
        e => e,
    })?;
    check_trust(path, &file.metadata().map_err(io(path))?, trust, euid())?;
    Ok(file)
}

fn open_file(path: &Path, create_len: Option<u64>, access: Access) -> Result<File> {
    let mut opts = OpenOptions::new();
    opts.read(true)
        .write(access == Access::ReadWrite)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    if create_len.is_some() {
        opts.create_new(true).mode(0o600);
    }
    let file = opts.open(path).map_err(io(path))?;
    if let Some(len) = create_len {
        file.set_len(len).map_err(io(path))?;
    }
    Ok(file)
}

fn map(path: &Path, file: &File, expected_len: u64, access: Access) -> Result<MmapMut> {
    let len = file.metadata().map_err(io(path))?.len();
    if len != expected_len {
        return Err(bad(
            path,
            Problem::Length {
                found: len,
                expected: expected_len,
            },
        ));
    }
    // The length checked, not the file's length now: a file cut in between still gives a
    // mapping of the size the layout needs (its lost pages fault; see `sigbus`).
    let mut opts = memmap2::MmapOptions::new();
    opts.len(expected_len as usize);
    match access {
        // SAFETY: the file is a device file shared with other ttrace processes; they only
        // change it through atomics, and nothing truncates it while it is mapped (a process
        // that did would be outside the device protocol; the mapping would fault, not corrupt).
        Access::ReadWrite => unsafe { opts.map_mut(file) },
        // SAFETY: as above; the mapping is private, so nothing done through it reaches the file.
        Access::ReadOnly => unsafe { opts.map_copy(file) },
    }
    .map_err(io(path))
}

/// The mappings of a device being opened; each read-only one is watched for its file
/// shrinking from the moment it is mapped. The watches drop before the mappings.
#[derive(Default)]
pub(crate) struct Maps {
    pub(crate) watches: Vec<(PathBuf, crate::sigbus::Watch)>,
    pub(crate) maps: Vec<MmapMut>,
}

impl Maps {
    /// Keeps `m` (the file `path`); where its bytes are.
    fn add(&mut self, path: &Path, mut m: MmapMut, access: Access) -> NonNull<[u8]> {
        if access == Access::ReadOnly {
            if let Some(w) = crate::sigbus::watch(m.as_ptr(), m.len()) {
                self.watches.push((path.to_path_buf(), w));
            }
        }
        let p = NonNull::from(&mut m[..]);
        self.maps.push(m);
        p
    }
}

fn bad(path: &Path, problem: Problem) -> Error {
    Error::BadDevice {
        path: path.into(),
        problem,
    }
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
                Device::create(&dir, config)
            }
            other => other,
        }?;
        // A device created by another process (this one lost the race to create it, or it
        // existed) may have other sizes; one this process made has them all.
        config.check_sizes(&dev)?;
        if let Some(mask) = config.mask {
            dev.apply(&crate::control::Command::SetMask {
                value: mask,
                mask: u64::MAX,
            })?;
        }
        Ok(dev)
    }

    /// Attaches to an existing device; refuses one whose layout versions differ.
    pub fn attach(dir: &Path) -> Result<Device> {
        Device::attach_with(dir, Access::ReadWrite, Trust::Own)
    }

    /// Attaches to an existing device for reading only (see [`Access::ReadOnly`]): what a
    /// reader uses on a running device, or on one whose writers died.
    pub fn attach_read_only(dir: &Path) -> Result<Device> {
        Device::attach_with(dir, Access::ReadOnly, Trust::Own)
    }

    /// Attaches with an explicit [`Access`] and [`Trust`] (the other attach functions trust
    /// only the user's own devices).
    pub fn attach_with(dir: &Path, access: Access, trust: Trust) -> Result<Device> {
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
        // SAFETY: `hmap` is the header mapping just kept in `maps`, which the device will
        // own; nothing else refers to it yet.
        let hbytes = unsafe { hmap.as_mut() };
        let header = DeviceHeader::read_from_bytes(&hbytes[..])
            .map_err(|_| bad(&hpath, Problem::Misaligned))?;
        header.check().map_err(|e| bad(&hpath, e.into()))?;
        let header_ptr = NonNull::from(
            DeviceHeader::mut_from_bytes(hbytes).map_err(|_| bad(&hpath, Problem::Misaligned))?,
        );
        let mut dev = Device::assemble(
            dir,
            header_ptr,
            &header,
            access,
            Device::files(dir, access, trust, &mut maps),
        )?;
        (dev.watches, dev._maps) = (maps.watches, maps.maps);
        dev.check_files()?;
        Ok(dev)
    }

    /// Builds a device from the parts named by a checked header: `part(name, len)` returns
    /// where the part `name` (`cpu0`, `aux`, `meta`) of `len` bytes is mapped, and the path
    /// to name in errors about it. The caller keeps the mappings alive in `_maps`.
    pub(crate) fn assemble(
        dir: &Path,
        header: NonNull<DeviceHeader>,
        h: &DeviceHeader,
        access: Access,
        mut part: impl FnMut(&str, u64) -> Result<(PathBuf, NonNull<[u8]>)>,
    ) -> Result<Device> {
        // SAFETY (for each `as_mut` below): the part lies in a live mapping that the caller
        // moves into the device, and nothing else refers to it yet.
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
        let (front, rest) = m.split_at_mut(off);
        let (records, names) = rest.split_at_mut(records_size as usize);
        let table =
            &mut front[layout_meta_header_bytes()..layout_meta_header_bytes() + table_bytes];
        let tp_words = NonNull::from(
            <[AtomicU64]>::mut_from_bytes(table).map_err(|_| bad(&path, Problem::Misaligned))?,
        );
        let meta_records = NonNull::from(
            <[AtomicU64]>::mut_from_bytes(records).map_err(|_| bad(&path, Problem::Misaligned))?,
        );
        let names = NonNull::from(
            <[AtomicU64]>::mut_from_bytes(&mut names[..2 * names_half as usize])
                .map_err(|_| bad(&path, Problem::Misaligned))?,
        );
        let mut dev = Device {
            dir: dir.to_path_buf(),
            header,
            rings: rings.into_boxed_slice(),
            tp_words,
            meta_records,
            names,
            clock: ClockSource::from_raw(h.clock).unwrap_or(ClockSource::MonotonicNs),
            access,
            cpu_mode: crate::cpu::mode(),
            ring_mask: h.ring_slots - 1,
            num_cpus: h.num_cpus,
            rseq_offset: 0,
            rseq_table: Box::new([]),
            watches: Vec::new(),
            _maps: Vec::new(),
        };
        if access == Access::ReadWrite {
            dev.enable_restartable();
        }
        Ok(dev)
    }

    /// The parts of the device in directory `dir`: its files, each mapped; the mappings are
    /// pushed to `maps`.
    fn files<'m>(
        dir: &'m Path,
        access: Access,
        trust: Trust,
        maps: &'m mut Maps,
    ) -> impl FnMut(&str, u64) -> Result<(PathBuf, NonNull<[u8]>)> + 'm {
        move |name, len| {
            let path = dir.join(name);
            let file = open_existing(&path, access, trust)?;
            let p = maps.add(&path, map(&path, &file, len, access)?, access);
            Ok((path, p))
        }
    }

    pub(crate) fn check_files(&mut self) -> Result<()> {
        let n = self.num_cpus;
        for (r, view) in self.rings.iter().enumerate() {
            // SAFETY: `header` points into a live mapping owned by self (see `Device`).
            let rh = unsafe { view.header.as_ref() };
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

    /// Takes the restartable path if this thread's process has a registered rseq area, the
    /// device's clock is the TSC (read inside the sections) and `TTRACE_NO_RSEQ` is unset.
    fn enable_restartable(&mut self) {
        #[cfg(all(target_arch = "x86_64", target_os = "linux", not(loom)))]
        {
            let offset = crate::cpu::rseq_area_offset();
            let wanted = std::env::var_os(ENV_NO_RSEQ).is_none_or(|v| v.is_empty());
            let Some(offset) = offset.filter(|_| wanted && self.clock == ClockSource::Tsc) else {
                return;
            };
            let n = self.num_cpus as usize;
            let aux_mask = self.rings[0].aux.len() * 8 - 1;
            let mut table = vec![[0usize; crate::rseq::TABLE_ENTRY_WORDS]; n + 1];
            table[0] = [n, self.ring_mask as usize, aux_mask, 0];
            for (c, entry) in table[1..].iter_mut().enumerate() {
                let v = &self.rings[c];
                // SAFETY: as in `ring`.
                let header = unsafe { v.header.as_ref() };
                *entry = [
                    &header.head as *const AtomicU64 as usize,
                    v.slots.as_ptr() as *const Slot as usize,
                    &header.aux_first as *const AtomicU64 as usize,
                    v.aux.as_ptr() as *const AtomicU64 as usize,
                ];
            }
            self.rseq_table = table.into_boxed_slice();
            self.rseq_offset = offset;
        }
    }

    /// Whether writers of this process use the restartable rings (else the shared ones).
    pub fn restartable(&self) -> bool {
        self.rseq_offset != 0
    }

    /// Creates the device at `dir` (atomically), or attaches if another process won the race.
    fn create(dir: &Path, config: &Config) -> Result<Device> {
        let cpus = config.cpus.unwrap_or_else(configured_cpus);
        let clock = config.clock.unwrap_or_else(crate::clock::best_source);
        let cal = crate::clock::calibrate(clock, config.calibration);
        let mut h = DeviceHeader::new_zeroed();
        h.magic = layout::MAGIC;
        h.header_version = layout::HEADER_VERSION;
        h.shared_data_version = layout::SHARED_DATA_VERSION;
        h.percpu_data_version = layout::PERCPU_DATA_VERSION;
        h.num_cpus = cpus;
        h.ring_slots = config.ring_slots;
        h.aux_size = config.aux_bytes;
        h.aux_mask = config.aux_bytes.wrapping_sub(1);
        h.meta_size = match config.meta_bytes {
            0 => meta_bytes_for(cpus, config.ring_slots, config.max_tracepoints),
            n => n,
        };
        h.max_tracepoints = config.max_tracepoints;
        h.clock = clock as u32;
        h.tsc_hz = cal.hz;
        h.anchor_tsc = cal.anchor_ticks;
        h.anchor_realtime_ns = cal.anchor_realtime_ns;
        h.anchor_monotonic_ns = cal.anchor_monotonic_ns;
        h.creator_pid = std::process::id();
        *h.type_mask.get_mut() = u64::MAX;
        h.check().map_err(|e| Error::Config(e.to_string()))?;

        let parent = dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let name = dir
            .file_name()
            .ok_or_else(|| Error::Config(format!("{} is not a directory name", dir.display())))?;
        let nanos = crate::clock::monotonic_ns();
        let tmp = parent.join(format!(
            ".{}.tmp-{}-{nanos}",
            name.to_string_lossy(),
            std::process::id()
        ));
        // The temporary name is ours, not the user's: a failure here (a missing parent, no
        // permission) names the directory they asked for.
        DirBuilder::new()
            .mode(0o700)
            .create(&tmp)
            .map_err(io(dir))?;
        let built = Device::build(&tmp, &mut h);
        let outcome = built.and_then(|maps| {
            publish(&tmp, dir)?;
            Ok(maps)
        });
        match outcome {
            Ok(maps) => {
                let mut maps = Maps {
                    watches: Vec::new(),
                    maps,
                };
                let header_ptr = NonNull::from(
                    DeviceHeader::mut_from_bytes(&mut maps.maps[0][..])
                        .map_err(|_| bad(dir, Problem::Misaligned))?,
                );
                let mut dev = Device::assemble(
                    dir,
                    header_ptr,
                    &h,
                    Access::ReadWrite,
                    Device::files(dir, Access::ReadWrite, Trust::Own, &mut maps),
                )?;
                dev._maps = maps.maps;
                Ok(dev)
            }
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                match e {
                    Error::Io { ref source, .. }
                        if matches!(
                            source.raw_os_error(),
                            Some(libc::EEXIST) | Some(libc::ENOTEMPTY)
                        ) =>
                    {
                        Device::attach(dir)
                    }
                    e => Err(e),
                }
            }
        }
    }

    /// Writes every file of a new device into `tmp`; returns the header mapping.
    fn build(tmp: &Path, h: &mut DeviceHeader) -> Result<Vec<MmapMut>> {
        let path = tmp.join("header");
        let mut hmap = map(
            &path,
            &open_file(&path, Some(HEADER_BYTES as u64), Access::ReadWrite)?,
            HEADER_BYTES as u64,
            Access::ReadWrite,
        )?;
        let n = num_rings(h.num_cpus);
        for r in 0..n {
            let path = tmp.join(ring_name(r, h.num_cpus));
            let len = ring_file_bytes(h.ring_slots);
            let mut m = map(
                &path,
                &open_file(&path, Some(len), Access::ReadWrite)?,
                len,
                Access::ReadWrite,
            )?;
            let rh = RingHeader::mut_from_bytes(&mut m[..RING_HEADER_BYTES])
                .map_err(|_| bad(&path, Problem::Misaligned))?;
            rh.magic = RING_MAGIC;
            rh.index = r as u32;
            rh.kind = if r < h.num_cpus as usize {
                RESTARTABLE
            } else {
                SHARED
            };
            rh.slots = h.ring_slots;
        }
        let path = tmp.join("aux");
        open_file(&path, Some(h.aux_size * n as u64), Access::ReadWrite)?;
        let path = tmp.join("meta");
        let mut m = map(
            &path,
            &open_file(&path, Some(h.meta_size), Access::ReadWrite)?,
            h.meta_size,
            Access::ReadWrite,
        )?;
        m[..layout_meta_header_bytes()]
            .copy_from_slice(MetaHeader::new(h.max_tracepoints, h.meta_size).as_bytes());
        // The header goes last, magic included, though nothing can see the directory before
        // it is renamed into place.
        hmap.copy_from_slice(h.as_mut_bytes());
        Ok(vec![hmap])
    }

    /// How this device is mapped.
    pub fn access(&self) -> Access {
        self.access
    }

    /// The device directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The device header.
    pub fn header(&self) -> &DeviceHeader {
        // SAFETY: points into a live mapping owned by self; its mutable fields are atomics.
        unsafe { self.header.as_ref() }
    }

    /// Number of rings.
    pub fn num_rings(&self) -> usize {
        self.rings.len()
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
        let ring = Self::view(&self.rings[index]);
        Ring {
            restartable: index < self.num_cpus as usize,
            ..ring
        }
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
        Self::view(unsafe { self.rings.get_unchecked(index) })
    }

    /// Number of CPUs the device has rings for (it has twice as many rings).
    pub fn num_cpus(&self) -> u32 {
        self.num_cpus
    }

    /// The restartable-sequence offset and table, when this device takes that path.
    #[inline(always)]
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn rseq(&self) -> Option<(i64, *const usize)> {
        (self.rseq_offset != 0)
            .then_some((self.rseq_offset, self.rseq_table.as_ptr() as *const usize))
    }

    #[inline(always)]
    fn view(view: &RingView) -> Ring<'_, Slot> {
        // SAFETY: both pointers refer to a live mapping owned by the Device that owns `view`
        // (see `Device`); the header's mutable fields are atomics and so are the slots.
        let (header, slots) = unsafe { (view.header.as_ref(), view.slots.as_ref()) };
        Ring {
            restartable: false,
            head: &header.head,
            skipped: &header.skipped,
            dropped: &header.dropped,
            slots,
        }
    }

    /// The CPU the calling thread runs on (possibly stale by the time it is used).
    #[inline(always)]
    pub fn cpu(&self) -> u32 {
        crate::cpu::current_with(self.cpu_mode)
    }

    /// The header page of ring `index`.
    pub fn ring_header(&self, index: usize) -> &RingHeader {
        // SAFETY: as in `ring`.
        unsafe { self.rings[index].header.as_ref() }
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
    /// watch counts the fault, and [`check_intact`](Device::check_intact) fails.
    pub fn probe(&self) {
        for m in &self._maps {
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

    /// The aux buffer of ring `index` as words.
    pub(crate) fn aux_words(&self, index: usize) -> &[AtomicU64] {
        // SAFETY: as in `ring`.
        unsafe { self.rings[index].aux.as_ref() }
    }

    /// The tracepoint word table.
    pub(crate) fn tp_words(&self) -> &[AtomicU64] {
        // SAFETY: as in `ring`.
        unsafe { self.tp_words.as_ref() }
    }

    /// The tracepoint record area as words.
    pub(crate) fn meta_words(&self) -> &[AtomicU64] {
        // SAFETY: as in `ring`.
        unsafe { self.meta_records.as_ref() }
    }

    /// Half `half` (0 or 1) of the names area as words.
    pub(crate) fn names_words(&self, half: usize) -> &[AtomicU64] {
        // SAFETY: as in `ring`.
        let all = unsafe { self.names.as_ref() };
        let n = all.len() / 2;
        &all[half * n..(half + 1) * n]
    }
}

const fn layout_meta_header_bytes() -> usize {
    ttrace_layouts::meta::META_HEADER_BYTES as usize
}

/// Renames the finished directory into place, never replacing anything.
fn publish(tmp: &Path, dir: &Path) -> Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| Error::Config(format!("{} contains NUL", p.display())))
    };
    let (from, to) = (c(tmp)?, c(dir)?);
    // SAFETY: both are valid NUL-terminated paths; renameat2 only renames.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    if matches!(err.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EINVAL)) {
        // No RENAME_NOREPLACE on this file system: rename(2) still refuses a non-empty
        // target, and a device directory is never empty.
        return std::fs::rename(tmp, dir).map_err(io(dir));
    }
    Err(Error::Io {
        path: dir.to_path_buf(),
        source: err,
    })
}
