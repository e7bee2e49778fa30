//! The snapshot directory: names that say when and why, and the retention limits.
//!
//! A snapshot file is named `<UTC time>-<kind>-<reason>-<pid>.ttrace`, for example
//! `20261124T101512.345Z-trigger-slow-request-4242.ttrace`: names sort by time, and say at a
//! glance what made each. Only files named so are listed or removed: the directory may
//! hold others. A save writes a hidden temporary file and renames it, so a listing never
//! sees half a snapshot.

use crate::policy::Policy;
use crate::snapshot_error::{Result, SnapshotError as Error};
use devttrace::{Counter, Device};
use std::path::{Path, PathBuf};
use ttrace_layouts::snapshot::Cause;
use ttrace_layouts::snapshot::CauseKind;

/// The extension of snapshot files.
pub const EXTENSION: &str = "ttrace";

/// A snapshot directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Store {
    dir: PathBuf,
}

/// A snapshot file of a [`Store`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    /// Its path.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
}

impl Store {
    /// The snapshot directory `dir` (made when the first snapshot is saved).
    pub fn new(dir: impl Into<PathBuf>) -> Store {
        Store { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of a new snapshot taken at `realtime_ns` (ns since the Unix epoch) by
    /// process `pid`, of `kind`, for `reason`; the directory is made if missing.
    pub fn path_for(
        &self,
        realtime_ns: u64,
        kind: CauseKind,
        reason: &str,
        pid: u32,
    ) -> Result<PathBuf> {
        std::fs::create_dir_all(&self.dir).map_err(|source| Error::Directory {
            path: self.dir.clone(),
            source,
        })?;
        let slug = slug(reason);
        let mut name = format!("{}-{}", utc(realtime_ns), kind.name());
        if !slug.is_empty() {
            name.push('-');
            name.push_str(&slug);
        }
        let base = format!("{name}-{pid}");
        // Two snapshots in the same millisecond for the same reason: numbered.
        let mut path = self.dir.join(format!("{base}.{EXTENSION}"));
        let mut k = 1;
        while path.exists() {
            path = self.dir.join(format!("{base}-{k}.{EXTENSION}"));
            k += 1;
        }
        Ok(path)
    }

    /// The snapshot files, oldest first (none if the directory does not exist).
    pub fn list(&self) -> Result<Vec<Listed>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(Error::Directory {
                    path: self.dir.clone(),
                    source,
                })
            }
        };
        let mut found = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if !is_snapshot_name(name) {
                continue;
            }
            // A file removed since the directory was read is no longer listed.
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_file() {
                found.push(Listed {
                    path: entry.path(),
                    bytes: meta.len(),
                });
            }
        }
        found.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(found)
    }

    /// Removes the oldest snapshot files until at most `max_files` files and `max_bytes`
    /// bytes remain (the newest is kept whatever its size); returns how many it removed.
    pub fn retain(&self, max_files: usize, max_bytes: u64) -> Result<u64> {
        let listed = self.list()?;
        let (mut files, mut bytes, mut removed) = (0usize, 0u64, 0u64);
        // Newest first: once one does not fit, it and every older one go (a smaller,
        // older file is never kept in place of newer ones).
        let mut full = false;
        for l in listed.iter().rev() {
            full |= files > 0 && (files >= max_files || bytes + l.bytes > max_bytes);
            if !full {
                files += 1;
                bytes += l.bytes;
            } else if std::fs::remove_file(&l.path).is_ok() {
                // Another process's retention may have removed it first: counted once.
                removed += 1;
            }
        }
        Ok(removed)
    }
}

/// Whether `name` is one [`Store::path_for`] makes: `YYYYMMDDTHHMMSS.mmmZ-...ttrace`.
pub fn is_snapshot_name(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() > 21
        && b[..8].iter().all(u8::is_ascii_digit)
        && b[8] == b'T'
        && b[9..15].iter().all(u8::is_ascii_digit)
        && b[15] == b'.'
        && b[16..19].iter().all(u8::is_ascii_digit)
        && &b[19..21] == b"Z-"
        && name.ends_with(&format!(".{EXTENSION}"))
}

/// `reason` as a file name part: lower-case letters, digits and single dashes, at most 40.
fn slug(reason: &str) -> String {
    let mut out = String::new();
    for c in reason.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
        if out.len() >= 40 {
            break;
        }
    }
    out.trim_end_matches('-').to_string()
}

/// `realtime_ns` as `YYYYMMDDTHHMMSS.mmmZ` (UTC).
pub fn utc(realtime_ns: u64) -> String {
    let t = crate::calendar::Utc::of(realtime_ns);
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}.{:03}Z",
        t.year,
        t.month,
        t.day,
        t.hour,
        t.minute,
        t.second,
        t.nanos / 1_000_000
    )
}

/// A snapshot saved.
#[derive(Clone, Debug)]
pub struct SaveInfo {
    /// Its file.
    pub path: PathBuf,
    /// What it holds.
    pub saved: devttrace::image::Saved,
    /// Why it was taken, as its header says.
    pub cause: Cause,
    /// Snapshot files the retention limits removed after it was saved.
    pub removed: u64,
}

/// Saves the device `dev` into `store` now, on the calling thread, as `kind` for `reason`
/// (with the trigger's time `stamp`, 0 if none); counts it saved or failed, then applies
/// `policy`'s retention.
pub fn save_as(dev: &Device, store: &Store, policy: &Policy, mut cause: Cause) -> Result<SaveInfo> {
    cause.pid = std::process::id();
    let at = moment(
        &dev.reader().version().clock,
        &cause,
        devttrace::clock::realtime_ns(),
    );
    let saved = name(store, at, &cause)
        .and_then(|path| Ok((dev.reader().save_because(&path, &cause)?, path)));
    kept(dev, store, policy, saved, cause)
}

/// The one time a snapshot goes by, in its file's name, its listing and the line that
/// announces it (`CLOCK_REALTIME`, ns): its trigger's, where it has one (a trigger, a rule's
/// match, a panic), else when it was `taken`.
pub fn moment(clock: &devttrace::Clock, cause: &Cause, taken: u64) -> u64 {
    match cause.trigger_stamp {
        0 => taken,
        stamp => clock.realtime_ns(stamp),
    }
}

/// The path in `store` of a snapshot of `cause` whose moment is `realtime_ns`.
pub fn name(store: &Store, realtime_ns: u64, cause: &Cause) -> Result<PathBuf> {
    let kind = CauseKind::from_raw(cause.kind);
    store.path_for(realtime_ns, kind, cause.reason(), cause.pid)
}

/// Counts the save `saved` (of `cause`) saved or failed, then applies `policy`'s retention
/// to `store`.
pub fn kept(
    dev: &Device,
    store: &Store,
    policy: &Policy,
    saved: Result<(devttrace::image::Saved, PathBuf)>,
    cause: Cause,
) -> Result<SaveInfo> {
    let (saved, path) = match saved {
        Ok(s) => s,
        Err(e) => {
            dev.count_snapshots(Counter::Failed, 1);
            return Err(e);
        }
    };
    dev.count_snapshots(Counter::Saved, 1);
    // Saved whatever the retention finds: a directory it cannot list is said, not fatal.
    let removed = store
        .retain(policy.max_files, policy.max_bytes)
        .unwrap_or_else(|e| {
            eprintln!("ttrace: snapshot retention: {e}");
            0
        });
    dev.count_snapshots(Counter::Removed, removed);
    Ok(SaveInfo {
        path,
        saved,
        cause,
        removed,
    })
}

/// Saves the device `dev` into `store` now, on the calling thread (a snapshot of kind
/// [`CauseKind::Saved`], for `reason`), then applies `policy`'s retention. No rate policy
/// applies: the caller asked for this one.
pub fn save_now(dev: &Device, store: &Store, policy: &Policy, reason: &str) -> Result<SaveInfo> {
    save_as(dev, store, policy, Cause::new(CauseKind::Saved, reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_say_when_and_why_and_sort_by_time() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::new(tmp.path().join("s"));
        // 2026-11-24 10:15:12.345 UTC
        let t = 1_795_515_312_345_000_000;
        let p = store
            .path_for(t, CauseKind::Trigger, "Slow request: 20 ms!", 42)
            .unwrap();
        let name = p.file_name().unwrap().to_str().unwrap();
        assert_eq!(
            name,
            "20261124T101512.345Z-trigger-slow-request-20-ms-42.ttrace"
        );
        assert!(is_snapshot_name(name));
        assert!(!is_snapshot_name("notes.txt"));
        assert!(!is_snapshot_name(".20261124T041512.345Z-x.ttrace.tmp-1"));
        assert_eq!(utc(0), "19700101T000000.000Z");
        assert_eq!(utc(951_782_400_000_000_000), "20000229T000000.000Z");
    }

    #[test]
    fn retention_keeps_the_newest_within_both_limits() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::new(tmp.path());
        let mut made = Vec::new();
        for i in 0..10u64 {
            let p = store
                .path_for(
                    1_000_000_000_000 + i * 1_000_000,
                    CauseKind::Trigger,
                    "x",
                    1,
                )
                .unwrap();
            std::fs::write(&p, vec![0u8; 100]).unwrap();
            made.push(p);
        }
        std::fs::write(tmp.path().join("other.txt"), b"kept").unwrap();
        assert_eq!(store.retain(4, u64::MAX).unwrap(), 6);
        let left: Vec<_> = store.list().unwrap().into_iter().map(|l| l.path).collect();
        assert_eq!(left, made[6..]);
        assert_eq!(store.retain(100, 250).unwrap(), 2);
        let left: Vec<_> = store.list().unwrap().into_iter().map(|l| l.path).collect();
        assert_eq!(left, made[8..]);
        // The newest stays even when it alone is over the limit.
        assert_eq!(store.retain(100, 10).unwrap(), 1);
        assert_eq!(store.list().unwrap().len(), 1);
        assert!(tmp.path().join("other.txt").exists());
    }

    #[test]
    fn a_smaller_older_file_never_stays_in_place_of_newer_ones() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::new(tmp.path());
        // Oldest first: a small file, then three large ones.
        let made: Vec<_> = [10usize, 100, 100, 100]
            .iter()
            .enumerate()
            .map(|(i, &len)| {
                let at = 1_000_000_000_000 + i as u64 * 1_000_000;
                let p = store.path_for(at, CauseKind::Trigger, "x", 1).unwrap();
                std::fs::write(&p, vec![0u8; len]).unwrap();
                p
            })
            .collect();
        // 250 bytes: the two newest fit; the third newest does not, and the small oldest
        // goes with it.
        assert_eq!(store.retain(100, 250).unwrap(), 2);
        let left: Vec<_> = store.list().unwrap().into_iter().map(|l| l.path).collect();
        assert_eq!(left, made[2..]);
    }
}
