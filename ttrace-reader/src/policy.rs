//! How snapshots are taken and kept: the window around a trigger, the rate, the retention.

use crate::snapshot_error::{Result, SnapshotError as Error};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The snapshot directory (default: next to the device, `<device>.snapshots`).
pub const ENV_SNAPSHOT_DIR: &str = "TTRACE_SNAPSHOT_DIR";
/// [`Policy::after`], a duration (`5ms`).
pub const ENV_SNAPSHOT_AFTER: &str = "TTRACE_SNAPSHOT_AFTER";
/// [`Policy::interval`], a duration (`1s`).
pub const ENV_SNAPSHOT_INTERVAL: &str = "TTRACE_SNAPSHOT_INTERVAL";
/// [`Policy::max_files`], a number.
pub const ENV_SNAPSHOT_KEEP: &str = "TTRACE_SNAPSHOT_KEEP";
/// [`Policy::max_bytes`], a size (`256m`).
pub const ENV_SNAPSHOT_BYTES: &str = "TTRACE_SNAPSHOT_BYTES";

/// How snapshots are taken and kept.
///
/// ```
/// use std::time::Duration;
/// let p = ttrace_reader::policy::Policy::default();
/// assert_eq!(p.after, Duration::from_millis(5));
/// assert_eq!(ttrace_reader::policy::parse_duration("250us"), Some(Duration::from_micros(250)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// How long after a trigger the copy is taken, so that its consequences are in it.
    /// Triggers within this span of the first are merged into its snapshot.
    pub after: Duration,
    /// What a snapshot keeps before its trigger, as asked, recorded in its cause (it holds
    /// what the rings hold, or `watch`'s copy of them: readers say how much that is).
    pub before: Duration,
    /// At most one snapshot per interval, across every process of the device; a trigger
    /// sooner is put off to an interval after the last one (and counted).
    pub interval: Duration,
    /// At most this many snapshot files in the directory (the oldest removed first).
    pub max_files: usize,
    /// At most this many bytes of snapshot files in the directory (the newest is kept even
    /// if it alone is larger).
    pub max_bytes: u64,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            after: Duration::from_millis(5),
            before: Duration::from_secs(1),
            interval: Duration::from_secs(1),
            max_files: 16,
            max_bytes: 1 << 30,
        }
    }
}

impl Policy {
    /// The defaults, with what the environment sets (`TTRACE_SNAPSHOT_AFTER`, `_INTERVAL`,
    /// `_KEEP`, `_BYTES`).
    pub fn from_env() -> Result<Policy> {
        let mut p = Policy::default();
        let var = |name: &'static str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let bad = |name, value: String, why| Error::Setting { name, value, why };
        if let Some(v) = var(ENV_SNAPSHOT_AFTER) {
            p.after = parse_duration(&v).ok_or_else(|| bad(ENV_SNAPSHOT_AFTER, v, DURATION))?;
        }
        if let Some(v) = var(ENV_SNAPSHOT_INTERVAL) {
            p.interval =
                parse_duration(&v).ok_or_else(|| bad(ENV_SNAPSHOT_INTERVAL, v, DURATION))?;
        }
        if let Some(v) = var(ENV_SNAPSHOT_KEEP) {
            p.max_files =
                v.trim().parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                    bad(ENV_SNAPSHOT_KEEP, v, "not a number of files (1 or more)")
                })?;
        }
        if let Some(v) = var(ENV_SNAPSHOT_BYTES) {
            p.max_bytes = parse_bytes(&v).ok_or_else(|| bad(ENV_SNAPSHOT_BYTES, v, BYTES))?;
        }
        Ok(p)
    }
}

const DURATION: &str = "not a duration (a number and a unit: ns, us, ms, s, m, h)";
const BYTES: &str = "not a size (a number, with k, m or g for binary units)";

/// The snapshot directory of the device at `device`: `$TTRACE_SNAPSHOT_DIR` if set; else,
/// for a device in a file system held in memory (`/dev/shm`, the default's), on disk:
/// `/var/tmp/<device name>.snapshots` (a snapshot is what is kept: it should not take the
/// memory of the machine whose moment it keeps, nor go with its reboot), where `/var/tmp`
/// is; else `<device>.snapshots` beside it.
pub fn default_snapshot_dir(device: &Path) -> PathBuf {
    match std::env::var_os(ENV_SNAPSHOT_DIR).filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None if in_memory(device) && Path::new(DISK_DIR).is_dir() => {
            Path::new(DISK_DIR).join(beside(device).file_name().unwrap_or_default())
        }
        None => beside(device),
    }
}

/// Where the snapshots of a device held in memory go: a directory of files kept across
/// reboots.
const DISK_DIR: &str = "/var/tmp";

/// Whether the directory `device` is in (or would be) is in a file system held in memory
/// (tmpfs, ramfs).
fn in_memory(device: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    let parent = device.parent().filter(|p| !p.as_os_str().is_empty());
    let Ok(path) = std::ffi::CString::new(parent.unwrap_or(Path::new(".")).as_os_str().as_bytes())
    else {
        return false;
    };
    // SAFETY: a zeroed statfs is valid for statfs to fill; `path` is a NUL-terminated string
    // that lives across the call.
    let kind = unsafe {
        let mut fs: libc::statfs = core::mem::zeroed();
        (libc::statfs(path.as_ptr(), &mut fs) == 0).then_some(fs.f_type as i64)
    };
    matches!(kind, Some(TMPFS_MAGIC | RAMFS_MAGIC))
}

/// `<device>.snapshots`, beside the device directory `device`.
pub fn beside(device: &Path) -> PathBuf {
    let mut name = device
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| "ttrace".into());
    name.push(".snapshots");
    device.with_file_name(name)
}

/// A duration: a number (decimals allowed) and a unit, `ns`, `us`, `ms`, `s`, `m` or `h`.
pub fn parse_duration(v: &str) -> Option<Duration> {
    let v = v.trim();
    let split = v.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = v.split_at(split);
    let number: f64 = number.trim().parse().ok()?;
    let ns_per = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        _ => return None,
    };
    let ns = number * ns_per;
    (ns.is_finite() && ns >= 0.0 && ns < u64::MAX as f64).then(|| Duration::from_nanos(ns as u64))
}

/// A size in bytes: a number with `k`, `m` or `g` for binary units.
pub fn parse_bytes(v: &str) -> Option<u64> {
    let v = v.trim().to_ascii_lowercase();
    let (digits, shift) = match v.as_bytes().last()? {
        b'k' => (&v[..v.len() - 1], 10),
        b'm' => (&v[..v.len() - 1], 20),
        b'g' => (&v[..v.len() - 1], 30),
        _ => (&v[..], 0),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes_read_as_written() {
        assert_eq!(parse_duration("5ms"), Some(Duration::from_millis(5)));
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("20 us"), Some(Duration::from_micros(20)));
        assert_eq!(parse_duration("5"), None);
        assert_eq!(parse_duration("5 parsecs"), None);
        assert_eq!(parse_duration("-1s"), None);
        assert_eq!(parse_bytes("256m"), Some(256 << 20));
        assert_eq!(parse_bytes("4096"), Some(4096));
        assert_eq!(parse_bytes("lots"), None);
    }

    #[test]
    fn the_default_directory_is_beside_the_device_or_on_disk() {
        assert_eq!(
            beside(Path::new("/dev/shm/ttrace-1000")),
            Path::new("/dev/shm/ttrace-1000.snapshots")
        );
        // A device in memory keeps its snapshots on disk, where there is a /var/tmp.
        if in_memory(Path::new("/dev/shm/ttrace-1000")) && Path::new(DISK_DIR).is_dir() {
            assert_eq!(
                default_snapshot_dir(Path::new("/dev/shm/ttrace-1000")),
                Path::new("/var/tmp/ttrace-1000.snapshots")
            );
        }
    }
}
