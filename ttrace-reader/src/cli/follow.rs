//! `ttrace-reader follow`: events printed as they are written, in time order, until the
//! limit, a closed output or an ending signal (Ctrl-C); with `--wait`, device after device
//! at one path. It ends by printing what it still holds and, per ring, what became of every
//! position it passed. A snapshot file never changes: what it holds is printed as `dump`
//! prints it, and `follow` ends.

use super::open::{absent, open, refusal, trust};
use super::select::{filter, Select};
use crate::decode::{self, Decoder, TimeFormat};
use crate::merge::{Filter, Merge};
use crate::output::quiet_pipe;
use crate::Error;
use devttrace::{Follower, Reader, View};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

/// How `follow` runs.
pub(super) struct FollowOptions {
    /// Stop after this many events.
    pub(super) limit: Option<u64>,
    /// The time between polls while events come.
    pub(super) interval: Duration,
    /// How long an event may wait for older ones before it is printed.
    pub(super) window_ns: u64,
    /// How the time column is shown.
    pub(super) time: TimeFormat,
    /// Wait for the device, and follow each one created at its path in turn.
    pub(super) wait: bool,
}

/// Set when an ending signal (SIGINT, SIGTERM, SIGHUP) came: `follow` prints what it holds
/// and its counts, and ends. Relaxed: a flag read at the next poll, ordering nothing.
static STOPPED: AtomicBool = AtomicBool::new(false);

/// Why following one device ended.
enum Ended {
    /// The limit was reached, the output closed, or an ending signal came.
    Done,
    /// The device's directory or header is gone.
    Removed,
    /// Another device was created at its path.
    Replaced,
}

/// Opens the device at `dir`, waiting (a check per `interval`, at least a millisecond)
/// while there is none.
/// `None` if an ending signal came first.
fn wait_for(dir: &Path, interval: Duration) -> Result<Option<Reader>, Error> {
    loop {
        if STOPPED.load(Relaxed) {
            return Ok(None);
        }
        match Reader::open_with(dir, trust()) {
            Err(e) if absent(&e) => std::thread::sleep(interval.max(Duration::from_millis(1))),
            opened => return opened.map(Some).map_err(refusal),
        }
    }
}

/// What is at `path` where a device was looked for and none found: a file that is no
/// snapshot, or a directory that is no device (`None`: nothing).
fn no_device_there(path: &Path) -> Option<&'static str> {
    let meta = std::fs::metadata(path).ok()?;
    Some(match meta.is_dir() {
        true => "a directory with no `header` file",
        false => "a file that is no snapshot",
    })
}

/// `follow` of a snapshot file, which never changes: prints what it holds, as `dump` does
/// (the first `--limit` events), and says so on standard error.
fn print_snapshot(dev: &Reader, select: Select, opts: &FollowOptions) -> Result<(), Error> {
    let filter = filter(dev, select)?;
    let view = View::of(dev, 0)?;
    eprintln!(
        "ttrace-reader: follow: {} is a snapshot file, which never changes: printed what it \
         holds, as dump does",
        dev.dir().display()
    );
    let mut out = std::io::stdout().lock();
    quiet_pipe(
        decode::dump(&view, &filter, opts.time, opts.limit, &mut out)
            .and_then(|_| {
                crate::cause::footer(dev, Some(crate::cause::Held::of_view(&view)), &mut out)
            })
            .and_then(|_| out.flush()),
    )?;
    Ok(dev.check_intact()?)
}

/// `follow`: the device at `dir`; with `--wait`, waits for it, and follows each device
/// created there in turn. A snapshot file is printed whole, once.
pub(super) fn run(dir: PathBuf, select: Select, opts: FollowOptions) -> Result<(), Error> {
    if opts.interval.is_zero() {
        return Err(Error::ZeroInterval);
    }
    crate::signals::take().on_signal(|_| STOPPED.store(true, Relaxed));
    let mut out = std::io::stdout().lock();
    let mut say = |line: String| quiet_pipe(writeln!(out, "{line}").and_then(|_| out.flush()));
    let (mut dev, mut from_start) = match opts.wait {
        false => (open(Some(dir.clone()))?, false),
        true => match Reader::open_with(&dir, trust()) {
            Ok(dev) => {
                super::open::announce(&dev);
                (dev, false)
            }
            Err(e) if !absent(&e) => return Err(refusal(e)),
            // Something that is no device is there: it will not become one.
            Err(devttrace::Error::Missing(_) | devttrace::Error::NotADevice(_))
                if no_device_there(&dir).is_some() =>
            {
                return Err(Error::NothingToWaitFor {
                    what: no_device_there(&dir).unwrap_or_default(),
                    path: dir,
                })
            }
            Err(_) => {
                say(format!(
                    "# waiting for {} to be created (follow --wait)",
                    dir.display()
                ))?;
                match wait_for(&dir, opts.interval)? {
                    Some(dev) => (dev, true),
                    None => return Ok(()),
                }
            }
        },
    };
    if dev.is_snapshot() {
        return print_snapshot(&dev, select, &opts);
    }
    let mut printed = 0u64;
    let mut first = true;
    loop {
        let filter = filter(&dev, select.clone())?;
        let follower = match from_start {
            true => Follower::from_start(&dev, opts.window_ns),
            false => Follower::with_window(&dev, opts.window_ns),
        };
        if first {
            // Once the follower has taken its baseline: what is written after this line
            // shows.
            say(format!(
                "# following {} (new events as they are written, in time order)",
                dev.dir().display()
            ))?;
            first = false;
        }
        let ended = follow_device(follower, &filter, &opts, &mut printed)?;
        if matches!(ended, Ended::Removed) {
            say(format!(
                "# device {} was removed; waiting for it to be created again",
                dir.display()
            ))?;
        }
        if matches!(ended, Ended::Done) {
            return Ok(());
        }
        dev = match wait_for(&dir, opts.interval)? {
            Some(dev) => dev,
            None => return Ok(()),
        };
        if dev.is_snapshot() {
            return print_snapshot(&dev, select, &opts);
        }
        let v = dev.version();
        say(format!(
            "# device {} was replaced (created {} by pid {}); following the new one",
            dir.display(),
            decode::utc(v.clock.anchor_realtime_ns),
            v.creator_pid
        ))?;
        from_start = true;
    }
}

/// Follows one device until the limit, a closed output, or (with `--wait`) the device's
/// removal or replacement; without `--wait`, a removal or replacement is said once and
/// the old device followed on (writers that still have it mapped may write to it).
fn follow_device(
    mut follower: Follower<'_>,
    filter: &Filter,
    opts: &FollowOptions,
    printed: &mut u64,
) -> Result<Ended, Error> {
    let (limit, interval, time) = (opts.limit, opts.interval, opts.time);
    let mut out = std::io::stdout().lock();
    let mut buf = Vec::new();
    let mut sleep = interval;
    let mut watch = Some(devttrace::Watch::new(follower.reader()));
    let dir = follower.reader().dir().to_path_buf();
    loop {
        // Checked before the poll: a device found gone has its last events read below.
        let change = watch
            .as_mut()
            .map_or(devttrace::Change::Same, devttrace::Watch::check);
        let stopping = STOPPED.load(Relaxed);
        let poll = match stopping {
            true => follower.finish()?,
            false => follower.poll()?,
        };
        let mut decoder = Decoder::new(&poll.snapshot, time);
        buf.clear();
        for item in Merge::snapshot(&poll.snapshot, filter) {
            if limit.is_some_and(|l| *printed >= l) {
                break;
            }
            decoder.line(&item, &mut buf);
            if item.timestamp() < poll.released_before {
                // Older than what was printed before: its writer stalled past the window.
                buf.pop();
                buf.extend_from_slice(b" (late)\n");
            }
            *printed += 1;
        }
        let name = |ring| poll.snapshot.version.ring_name(ring);
        for (ring, (&lost, &gave_up)) in poll.lost.iter().zip(&poll.gave_up).enumerate() {
            if !(filter.cpus.is_empty() || filter.cpus.contains(&ring)) {
                continue;
            }
            if lost > 0 {
                let _ = writeln!(
                    buf,
                    "# {}: {lost} entries lost (overwritten before they were read)",
                    name(ring)
                );
            }
            if gave_up > 0 {
                let _ = writeln!(
                    buf,
                    "# {}: {gave_up} positions not written within the reorder window (a writer stalled, died or skipped them)",
                    name(ring)
                );
            }
            let damaged = poll.snapshot.cpus.get(ring).map_or(0, |r| r.damaged);
            if damaged > 0 {
                let _ = writeln!(
                    buf,
                    "# {}: {damaged} entries damaged (a field no writer of the device can have written): not shown",
                    name(ring)
                );
            }
        }
        if poll.late > 0 {
            let _ = writeln!(
                buf,
                "# {} events late (older than events already printed: their writer stalled longer than the reorder window)",
                poll.late
            );
        }
        let mut ended = None;
        if stopping || limit.is_some_and(|l| *printed >= l) {
            ended = Some(Ended::Done);
        } else if change != devttrace::Change::Same {
            if opts.wait {
                ended = Some(match change {
                    devttrace::Change::Removed => Ended::Removed,
                    _ => Ended::Replaced,
                });
            } else {
                let what = match change {
                    devttrace::Change::Removed => "removed",
                    _ => "replaced by another",
                };
                let _ = writeln!(
                    buf,
                    "# device {} was {what}; still following the old one (follow --wait follows a new one)",
                    dir.display()
                );
                watch = None;
            }
        }
        if ended.is_some() {
            footer(&follower, filter, *printed, &mut buf);
        }
        let active = poll.active;
        follower.recycle(poll);
        // Idle: poll less and less often; at the first event, as often as asked again.
        sleep = match active {
            true => interval,
            false => (sleep * 2).clamp(interval, Duration::from_millis(100).max(interval)),
        };
        match out.write_all(&buf).and_then(|_| out.flush()) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(Ended::Done),
            Err(e) => return Err(Error::Io(e)),
            Ok(()) => match ended {
                Some(ended) => return Ok(ended),
                None => std::thread::sleep(sleep),
            },
        }
    }
}

/// The last lines of `follow`: per ring shown, what became of every position it passed
/// (each counted once: read, lost, given up or still being written), and the events
/// printed.
fn footer(follower: &Follower<'_>, filter: &Filter, printed: u64, out: &mut Vec<u8>) {
    let version = follower.reader().version();
    for (ring, t) in follower.totals().iter().enumerate() {
        let shown = filter.cpus.is_empty() || filter.cpus.contains(&ring);
        let c = &t.counts;
        if !shown || c.head == 0 {
            continue;
        }
        let _ = writeln!(
            out,
            "# {}: positions {}..{} followed: {} entries read, {} lost, {} given up, {} damaged, {} still being written",
            version.ring_name(ring),
            t.from,
            t.through(),
            c.committed,
            c.lost,
            c.skipped,
            c.damaged,
            c.claimed
        );
    }
    let _ = writeln!(out, "# {printed} events printed");
}
