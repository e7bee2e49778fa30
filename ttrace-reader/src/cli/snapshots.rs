//! `ttrace-reader snapshots`: the snapshot files of a directory, oldest first, one line each:
//! its moment (its trigger's, else when it was taken), why, its size, events and their time span, the triggers merged, its
//! file name. A file that cannot be read is listed with the reason; the rest are listed.

use super::open::trust;
use crate::cause::Taken;
use crate::decode;
use crate::output::quiet_pipe;
use crate::store::{Listed, Store};
use crate::Error;
use devttrace::{Counts, Reader};
use std::io::Write;
use std::path::{Path, PathBuf};
use ttrace_layouts::snapshot::CauseKind;

/// One snapshot file read.
struct Read {
    /// Its moment, UTC: its trigger's, else when it was taken.
    taken: String,
    /// Why (none: a person asked for it, or the file is older than causes).
    cause: Option<Taken>,
    /// Its events.
    events: u64,
    /// The time span of its events, in seconds since the device was created.
    window: Option<(String, String)>,
}

/// Reads the snapshot file `path`.
fn read(path: &Path) -> Result<Read, Error> {
    let dev = Reader::open_with(path, trust())?;
    let counts = Counts::of(&dev)?;
    dev.check_intact()?;
    let clock = counts.version.clock;
    let secs = |t| decode::seconds(&clock, t);
    let cause = Taken::of(&dev).map(|t| t.holding(crate::cause::Held::of_counts(&counts)));
    // One time for the snapshot: its trigger's where it has one (as its file's name and
    // the line that announced it say), else when it was taken.
    let taken = dev.taken_realtime_ns().unwrap_or_default();
    let at = dev
        .cause()
        .map_or(taken, |c| crate::store::moment(&clock, c, taken));
    Ok(Read {
        taken: decode::utc(at),
        cause,
        events: crate::stats::tally(&counts).events(),
        window: crate::stats::span(&counts).map(|(a, b)| (secs(a), secs(b))),
    })
}

/// Its file name, for people.
fn name(l: &Listed) -> String {
    l.path.file_name().map_or_else(
        || l.path.display().to_string(),
        |n| n.to_string_lossy().into(),
    )
}

/// The line of a file read: `2026-11-24T10:15:12.345678901Z  trigger "slow request"  40960
/// bytes  1234 events  window 1.000000000 .. 1.020000000 s  2 merged  <file name>`.
fn line(l: &Listed, r: &Read) -> String {
    let why = match &r.cause {
        Some(t) => format!("{} {:?}", t.kind.name(), t.reason),
        None => CauseKind::Asked.name().to_string(),
    };
    let window = match &r.window {
        Some((a, b)) => format!("window {a} .. {b} s"),
        None => "no window".to_string(),
    };
    let merged = r.cause.as_ref().map_or(0, |t| t.merged);
    format!(
        "{}  {why}  {} bytes  {} events  {window}  {merged} merged  {}",
        r.taken,
        l.bytes,
        r.events,
        name(l)
    )
}

/// The JSON object of a file: `file`, `path`, `bytes`, then `taken_utc`, `kind`, `reason`,
/// `events`, `first` and `last` (the window), `merged` and `snapshot` (the cause, as
/// `report --json` has it), or `error`.
fn json(l: &Listed, r: &Result<Read, Error>) -> serde_json::Value {
    let mut v = serde_json::json!({
        "file": name(l),
        "path": l.path.display().to_string(),
        "bytes": l.bytes,
    });
    match r {
        Ok(r) => {
            let (first, last) = match &r.window {
                Some((a, b)) => (Some(a), Some(b)),
                None => (None, None),
            };
            v["taken_utc"] = r.taken.clone().into();
            v["kind"] = r
                .cause
                .as_ref()
                .map_or(CauseKind::Asked, |t| t.kind)
                .name()
                .into();
            v["reason"] = r.cause.as_ref().map_or("", |t| &t.reason).into();
            v["events"] = r.events.into();
            v["first"] = serde_json::json!(first);
            v["last"] = serde_json::json!(last);
            v["merged"] = r.cause.as_ref().map_or(0, |t| t.merged).into();
            v["snapshot"] = r.cause.as_ref().map(Taken::json).into();
        }
        Err(e) => v["error"] = e.to_string().into(),
    }
    v
}

/// Lists the snapshot files of `dir` (default: the snapshot directory of `device`, or of the
/// default device), as text or, with `json`, a JSON array.
pub(super) fn run(
    dir: Option<PathBuf>,
    device: Option<PathBuf>,
    json_out: bool,
) -> Result<(), Error> {
    // A device directory given where the snapshot directory goes means its snapshots (a
    // device's directory holds a `header` file; a snapshot directory never does).
    let (dir, device) = match dir {
        Some(d) if d.join("header").is_file() => (None, Some(d)),
        dir => (dir, device),
    };
    let dir = dir.unwrap_or_else(|| {
        let device = device.unwrap_or_else(devttrace::default_dir);
        crate::policy::default_snapshot_dir(&device)
    });
    if !dir.is_dir() {
        return Err(match dir.exists() {
            true => Error::File {
                path: dir,
                source: std::io::Error::from(std::io::ErrorKind::NotADirectory),
            },
            false => Error::NoSnapshotDir(dir),
        });
    }
    let listed = Store::new(&dir).list().map_err(|e| match e {
        crate::snapshot_error::SnapshotError::Directory { path, source } => {
            Error::File { path, source }
        }
        e => Error::File {
            path: dir.clone(),
            source: std::io::Error::other(e.to_string()),
        },
    })?;
    let read: Vec<_> = listed.iter().map(|l| (l, read(&l.path))).collect();
    let out = if json_out {
        let all: Vec<_> = read.iter().map(|(l, r)| json(l, r)).collect();
        serde_json::Value::Array(all).to_string() + "\n"
    } else {
        if read.is_empty() {
            eprintln!("ttrace-reader: no snapshots in {}", dir.display());
        }
        read.iter()
            .map(|(l, r)| match r {
                Ok(r) => line(l, r) + "\n",
                Err(e) => format!("{}: cannot be read: {e}\n", name(l)),
            })
            .collect()
    };
    quiet_pipe(std::io::stdout().lock().write_all(out.as_bytes()))
}
