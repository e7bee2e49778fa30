//! How a device is made: its sizes and clock ([`Config`]), as a program gives them or as the
//! environment changes them (`TTRACE_*`), and where it lives by default.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;
use ttrace_layouts::device::{self as layout, ClockSource, DeviceHeader};

/// Environment variable naming the device directory.
pub const ENV_DIR: &str = "TTRACE_DIR";
/// Environment variable: slots per ring of a device created by [`Config::from_env`].
pub const ENV_RING_SLOTS: &str = "TTRACE_RING_SLOTS";
/// Environment variable: bytes of each ring's aux buffer ([`Config::from_env`]).
pub const ENV_AUX_SIZE: &str = "TTRACE_AUX_SIZE";
/// Environment variable: the class mask to set at start-up ([`Config::from_env`]).
pub const ENV_MASK: &str = "TTRACE_MASK";
/// Environment variable: `1` sets the class mask to 0 at start-up, so that nothing records
/// until `ttrace-reader ctl` turns it on ([`Config::from_env`]).
pub const ENV_DISABLED: &str = "TTRACE_DISABLED";

/// The bytes of trace a device keeps by default, rings and aux buffers of every CPU
/// together ([`Config::ring_slots`] 0): 128 MiB, so that a service instrumented with
/// `tracing` at 25,000 requests a second (about 17 entries and 290 bytes of strings a
/// request) keeps a second or more on the busiest of its CPUs, when one takes twice its
/// share (`docs/BENCHMARKS.md`). Memory is taken as it is written: a CPU that records
/// nothing costs nothing, and pages of a ring are touched once it laps.
pub const DEFAULT_BUFFER_BYTES: u64 = 128 << 20;
/// The variable that sizes the rings and their aux buffers together: the bytes of trace the
/// device keeps ([`Config::from_env`]; default [`DEFAULT_BUFFER_BYTES`]).
pub const ENV_BUFFER: &str = "TTRACE_BUFFER";
/// Environment variable: `1` to record each traced thread's context switches (the
/// writer's [`Config::switches`]), `0` not to.
pub const ENV_SCHED: &str = "TTRACE_SCHED";
/// Thread names each half of the names area has room for, at most: what the events in the
/// rings can refer to is bounded by the threads that wrote them, not by the slots
/// ([`meta_bytes_for`]).
pub const NAMES_BUDGET: u64 = 1 << 16;
/// The default of [`Config::max_tracepoints`].
pub const DEFAULT_MAX_TRACEPOINTS: u32 = 4096;

/// How to create a device. Opening an existing device checks every size that differs from
/// its default against the device's, and fails with [`Error::SizeMismatch`] where they
/// differ (a size left at its default accepts the device's).
#[derive(Clone, Debug)]
pub struct Config {
    /// The device directory; `None` means [`default_dir`].
    pub dir: Option<PathBuf>,
    /// Slots per ring: a power of two, at least 2; `0` (the default) sizes the rings and
    /// their aux buffers to keep [`DEFAULT_BUFFER_BYTES`] over the device's CPUs
    /// ([`Config::sized`]: on 2 CPUs, rings of 524,288 slots, 32 MiB).
    pub ring_slots: u64,
    /// Bytes of each ring's aux buffer: a power of two; `0` (the default) grows it with the
    /// rings, half a ring's bytes ([`aux_bytes_for`]). The `aux` file holds one per ring,
    /// two rings per CPU, and pages never written cost nothing.
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
    /// Whether the writer that opens the device records each traced thread's context
    /// switches from the kernel (`ttrace_core::switches`; default off). The device records
    /// whatever its writers give it; this is the writing process's choice, not the device's.
    pub switches: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            dir: None,
            ring_slots: 0,
            aux_bytes: 0,
            meta_bytes: 0,
            max_tracepoints: DEFAULT_MAX_TRACEPOINTS,
            cpus: None,
            clock: None,
            calibration: Duration::from_millis(20),
            mask: None,
            switches: false,
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
    /// directory, as [`default_dir`]), `TTRACE_BUFFER` (the bytes of trace to keep, rings
    /// and aux buffers together, over every CPU: `64m`; [`Config::sized`]), or
    /// `TTRACE_RING_SLOTS` (slots per ring, the aux buffers growing with them) and
    /// `TTRACE_AUX_SIZE` (bytes per aux buffer) — sizes in decimal or `0x` hex, with an
    /// optional `k`/`m`/`g` suffix for bytes —
    /// `TTRACE_MASK` (the class mask to set), `TTRACE_DISABLED=1` (set the mask to 0:
    /// everything off) and `TTRACE_SCHED=1` (record context switches: [`Config::switches`]).
    /// This is what the first trace point of a process that never called
    /// `ttrace_core::init` uses. A value that is not a number, or out of range, is an
    /// [`Error::Config`] naming the variable; an empty one counts as unset.
    ///
    /// ```
    /// let c = devttrace::Config::from_env()?;
    /// assert!(c.resolved_ring_slots().is_power_of_two());
    /// # Ok::<(), devttrace::Error>(())
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
        if let Some(v) = var(ENV_BUFFER) {
            if var(ENV_RING_SLOTS).is_some() {
                return Err(bad(
                    ENV_BUFFER,
                    &v,
                    &format!("set it or {ENV_RING_SLOTS}, not both"),
                ));
            }
            let n = parse_size(&v, true).ok_or_else(|| bad(ENV_BUFFER, &v, "not a size"))?;
            c = c.sized(n).map_err(|why| bad(ENV_BUFFER, &v, &why))?;
        }
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
        match var(ENV_SCHED).as_deref() {
            None | Some("0") => {}
            Some("1") => c.switches = true,
            Some(v) => return Err(bad(ENV_SCHED, v, "must be 1 (or 0)")),
        }
        Ok(c)
    }

    /// This configuration with rings and aux buffers that keep `bytes` of trace over all
    /// the CPUs (`cpus`, else the configured ones): per CPU, the largest ring whose bytes
    /// and its aux buffer's (half as many) fit its share. An error says why if even the
    /// smallest does not fit.
    ///
    /// ```
    /// let c = devttrace::Config { cpus: Some(4), ..Default::default() }.sized(64 << 20).unwrap();
    /// // 16 MiB per CPU: rings of 8 MiB, aux buffers of 4 MiB.
    /// assert_eq!((c.ring_slots, c.resolved_aux_bytes()), (1 << 17, 4 << 20));
    /// ```
    pub fn sized(self, bytes: u64) -> std::result::Result<Config, String> {
        let cpus = self.cpus.unwrap_or_else(configured_cpus).max(1) as u64;
        match slots_for(bytes, cpus) {
            Some(slots) => Ok(Config {
                ring_slots: slots,
                aux_bytes: 0,
                ..self
            }),
            None => Err(format!(
                "too small: {cpus} CPUs need at least {} bytes",
                cpus * 2 * BYTES_PER_SLOT
            )),
        }
    }

    /// The slots per ring this configuration makes ([`Config::ring_slots`]).
    pub fn resolved_ring_slots(&self) -> u64 {
        match self.ring_slots {
            0 => {
                let cpus = self.cpus.unwrap_or_else(configured_cpus).max(1) as u64;
                slots_for(DEFAULT_BUFFER_BYTES, cpus).unwrap_or(2)
            }
            n => n,
        }
    }

    /// The aux bytes per ring this configuration makes ([`Config::aux_bytes`]).
    pub fn resolved_aux_bytes(&self) -> u64 {
        match self.aux_bytes {
            0 => aux_bytes_for(self.resolved_ring_slots()),
            n => n,
        }
    }

    /// Fails with [`Error::SizeMismatch`] if the existing device at `dir`, whose header is
    /// `h`, does not have a size this configuration asks for (one that differs from its
    /// default).
    pub(crate) fn check_sizes(&self, dir: &Path, h: &DeviceHeader) -> Result<()> {
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
                    path: dir.to_path_buf(),
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

/// The bytes a slot of a ring takes with its share of the aux buffer: 64, and 32 of strings
/// ([`aux_bytes_for`]).
const BYTES_PER_SLOT: u64 = 96;

/// The slots per ring of rings that, with their aux buffers, keep `bytes` over `cpus` CPUs:
/// the largest power of two whose slots fit a CPU's share (`None` if not even 2 fit).
fn slots_for(bytes: u64, cpus: u64) -> Option<u64> {
    let fits = bytes / cpus.max(1) / BYTES_PER_SLOT;
    let slots = 1u64 << fits.checked_ilog2()?;
    (slots >= 2).then_some(slots.min(layout::MAX_RING_SLOTS))
}

/// The slots per ring a device made with the default sizes has on `cpus` CPUs
/// ([`DEFAULT_BUFFER_BYTES`] over them).
///
/// ```
/// assert_eq!(devttrace::config::default_ring_slots(2), 524_288);
/// ```
pub fn default_ring_slots(cpus: u32) -> u64 {
    slots_for(DEFAULT_BUFFER_BYTES, u64::from(cpus)).unwrap_or(2)
}

/// What to say of a device of `cpus` CPUs whose rings have `ring_slots` slots, where that
/// is not what the default sizes make (a device made by an older version, or with
/// `TTRACE_BUFFER`, is kept with its sizes by a program that asks for none): its sizes and
/// the defaults', in bytes, and what to do. `None` where they are the defaults.
///
/// ```
/// let note = devttrace::config::other_sizes(2, 16_384).unwrap();
/// assert!(note.starts_with("keeps the sizes it was made with: 16384 slots a ring (3 MiB"));
/// assert_eq!(devttrace::config::other_sizes(2, 524_288), None);
/// ```
pub fn other_sizes(cpus: u32, ring_slots: u64) -> Option<String> {
    let default = default_ring_slots(cpus);
    let bytes = |slots: u64| match slots * BYTES_PER_SLOT * u64::from(cpus.max(1)) {
        b if b < 1 << 20 => format!("{} KiB", b >> 10),
        b => format!("{} MiB", b >> 20),
    };
    (ring_slots != default).then(|| {
        format!(
            "keeps the sizes it was made with: {ring_slots} slots a ring ({} with its \
             strings over {cpus} CPUs), where the defaults make {default} ({}); remove it, \
             or set TTRACE_BUFFER, for others",
            bytes(ring_slots),
            bytes(default)
        )
    })
}

/// The aux bytes per ring that grow with rings of `ring_slots` slots: half a ring's bytes,
/// within the bounds of an aux buffer. (A service's `tracing` events hold about 17 bytes of
/// strings per entry: a quarter, 16, lost the strings of the oldest events before the
/// events themselves.)
///
/// ```
/// assert_eq!(devttrace::config::aux_bytes_for(16384), 512 << 10);
/// ```
pub fn aux_bytes_for(ring_slots: u64) -> u64 {
    (ring_slots.saturating_mul(ttrace_layouts::entry::SLOT_BYTES as u64) / 2)
        .clamp(layout::MIN_AUX_BYTES, layout::MAX_AUX_BYTES)
}

/// The size of a `meta` file for rings of `ring_slots` slots on `cpus` CPUs: each half of
/// the names area holds a name (of up to 15 bytes, as the kernel keeps them) for as many
/// threads as the rings have slots, up to [`NAMES_BUDGET`] (a name is kept while an event
/// of its thread is in a ring, and compaction reclaims the others; past the budget the
/// oldest names still needed are evicted, their events counted unnamed: see
/// [`crate::names`]); at least 4 MiB, at most `MAX_META_BYTES`. So metadata is sized by
/// what it holds: a device of large rings does not get a metadata file to match.
///
/// ```
/// let bytes = devttrace::config::meta_bytes_for(2, 16384, 4096);
/// let (_, _, half) = ttrace_layouts::meta::split(4096, bytes);
/// assert!(half >= 2 * 2 * 16384 * 48);
/// // 16 CPUs of a million slots: names for 65,536 threads, not for 33 million slots.
/// assert!(devttrace::config::meta_bytes_for(16, 1 << 20, 4096) < 16 << 20);
/// ```
pub fn meta_bytes_for(cpus: u32, ring_slots: u64, max_tracepoints: u32) -> u64 {
    let slots = ttrace_layouts::ring::num_rings(cpus) as u64 * ring_slots;
    let half = slots
        .min(NAMES_BUDGET)
        .saturating_mul(ttrace_layouts::meta::record_bytes(15));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn from(vars: &[(&str, &str)]) -> Result<Config> {
        Config::from_vars(|name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn one_knob_sizes_the_rings_and_their_aux_buffers_together() {
        let c = Config {
            cpus: Some(2),
            ..from(&[(ENV_BUFFER, "64m")]).unwrap()
        };
        // 32 MiB per CPU: rings of 2^18 slots (16 MiB) and aux of 8 MiB fit, twice as large
        // would not.
        let c = c.sized(64 << 20).unwrap();
        assert_eq!(c.ring_slots, 1 << 18);
        assert_eq!(c.resolved_aux_bytes(), 8 << 20);
        assert!(c.ring_slots * 96 <= 32 << 20 && c.ring_slots * 2 * 96 > 32 << 20);
        // The rings alone: the aux buffers grow with them.
        let c = from(&[(ENV_RING_SLOTS, "1048576")]).unwrap();
        assert_eq!(c.resolved_aux_bytes(), 32 << 20);
        // A given aux size stays.
        let c = from(&[(ENV_RING_SLOTS, "1048576"), (ENV_AUX_SIZE, "64k")]).unwrap();
        assert_eq!(c.resolved_aux_bytes(), 64 << 10);
        // Nothing set: the default buffer, over the device's CPUs.
        let two = Config {
            cpus: Some(2),
            ..Config::default()
        };
        assert_eq!(two.resolved_ring_slots(), 1 << 19);
        let many = Config {
            cpus: Some(64),
            ..Config::default()
        };
        assert_eq!(many.resolved_ring_slots(), 1 << 14);
        // Context switches: off unless asked for.
        assert!(!from(&[]).unwrap().switches);
        assert!(from(&[(ENV_SCHED, "1")]).unwrap().switches);
        assert!(!from(&[(ENV_SCHED, "0")]).unwrap().switches);
    }

    #[test]
    fn a_wrong_buffer_setting_names_the_variable_and_the_fault() {
        for (vars, says) in [
            (
                &[(ENV_BUFFER, "lots")][..],
                "TTRACE_BUFFER=\"lots\": not a size",
            ),
            (
                &[(ENV_BUFFER, "64m"), (ENV_RING_SLOTS, "1024")],
                "TTRACE_BUFFER=\"64m\": set it or TTRACE_RING_SLOTS, not both",
            ),
            (&[(ENV_BUFFER, "100")], "TTRACE_BUFFER=\"100\": too small"),
            (
                &[(ENV_SCHED, "yes")],
                "TTRACE_SCHED=\"yes\": must be 1 (or 0)",
            ),
        ] {
            let e = from(vars).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
    }
}
