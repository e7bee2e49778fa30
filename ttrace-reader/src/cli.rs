//! The `ttrace-reader` command line.

use crate::decode::{self, Decoder, TimeFormat};
use crate::merge::{Filter, Merge};
use crate::output::{output_target, quiet_pipe, write_output, Shape, Target};
use crate::when::{parse_time, resolve, When};
use crate::Error;
use clap::{Args, Parser, Subcommand};
use devttrace::{Device, Follower, Reader, Trust, View};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "ttrace-reader",
    version,
    about = "Decode, follow and control ttrace traces",
    after_help = "DEVICE defaults to $TTRACE_DIR, else /dev/shm/ttrace-<uid>; a snapshot file \
                  (`ttrace-reader snapshot`) can be given in its place."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Open devices of other users too (by default a device must belong to this user, be
    /// writable by nobody else, and not be reached through a symlink).
    #[arg(long, global = true)]
    any_owner: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Run a built-in multi-threaded workload into a fresh device and print its trace.
    Demo {
        /// Threads per CPU.
        #[arg(long, default_value_t = 2)]
        threads: usize,
        /// Requests per thread.
        #[arg(long, default_value_t = 4)]
        requests: u64,
        /// Record into this device directory (kept) instead of a fresh temporary one.
        #[arg(long)]
        device: Option<PathBuf>,
        /// Repeat the workload until killed, printing nothing (to try `follow`, `ctl`, ...).
        #[arg(long)]
        forever: bool,
    },
    /// Print the whole trace as text: a header line, one line per event in time order
    /// (time, cpu, pid/tid (thread), tracepoint(arguments)), and the lost counts.
    Dump {
        /// The device directory.
        device: Option<PathBuf>,
        #[command(flatten)]
        select: Select,
        #[command(flatten)]
        window: Window,
        /// Show wall-clock UTC time instead of seconds since the device was created.
        #[arg(long)]
        utc: bool,
    },
    /// Print events as they are written, until interrupted; says how many were lost when the
    /// writers overwrite entries before they could be read.
    Follow {
        /// The device directory.
        device: Option<PathBuf>,
        #[command(flatten)]
        select: Select,
        /// Stop after this many events.
        #[arg(long)]
        limit: Option<u64>,
        /// Milliseconds between polls while events come (idle, the interval doubles up to
        /// 100 ms, and drops back at the first event).
        #[arg(long, default_value_t = 20)]
        interval_ms: u64,
        /// Milliseconds an event may wait for older ones before it is printed: events print
        /// in time order; one whose writer stalled longer than this prints marked `(late)`.
        #[arg(long, default_value_t = 30)]
        reorder_window_ms: u64,
        /// Show wall-clock UTC time instead of seconds since the device was created.
        #[arg(long)]
        utc: bool,
        /// Wait for the device to be created (checking at the interval) and follow it from
        /// its start; when it is removed and created again, follow the new one.
        #[arg(long)]
        wait: bool,
    },
    /// Show or change what is recorded: `setmask <value> <mask>`, `setbits <bits>`,
    /// `clrbits <bits>`, `enable <wildcard>`, `disable <wildcard>`, `reset`.
    Ctl {
        /// `[DEVICE] [COMMAND ARGS...]`; with no command, prints the control state.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        words: Vec<String>,
    },
    /// Write the trace in another tool's format: `uftrace` (a uftrace data directory, for
    /// uftrace replay/report/dump), `ctf` (Common Trace Format 1.8, for babeltrace2 and Trace
    /// Compass; a directory) or `chrome` (Chrome Trace Event JSON, for Perfetto UI and
    /// chrome://tracing; a file).
    Export {
        /// The output format.
        #[arg(long, value_enum)]
        format: ExportFormat,
        /// The device directory, or a snapshot file.
        device: Option<PathBuf>,
        /// Where to write: a file for `chrome` (`-` or `/dev/stdout` for standard output), a
        /// new or empty directory for `ctf` and `uftrace`.
        #[arg(short, long, value_name = "PATH")]
        output: PathBuf,
        /// Replace PATH if it exists (for `ctf` and `uftrace`, only an earlier export of the
        /// same format).
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        select: Select,
        #[command(flatten)]
        window: Window,
    },
    /// Save a consistent copy of the device to one file, which `dump`, `stats` and `export`
    /// read in place of a device (the file to attach to a bug report).
    Snapshot {
        /// The device directory.
        device: Option<PathBuf>,
        /// The file to write.
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
        /// Replace FILE if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Where the time went: how often each point fired, and the durations of entry/exit
    /// and start/stop pairs (count, min, p50, p90, p99, p99.9, max, total).
    Report {
        /// The device directory.
        device: Option<PathBuf>,
        #[command(flatten)]
        select: Select,
        #[command(flatten)]
        window: Window,
        /// Split the durations by thread, process, CPU, or the value of the entry's
        /// argument named ARG (`--by flags`; `arg:NAME` for an argument named like a
        /// keyword), shown as dump shows it.
        #[arg(long, value_name = "thread|process|cpu|ARG")]
        by: Option<crate::report::By>,
        /// Sort the durations by count, total, p99 or max (largest first).
        #[arg(long, value_enum, default_value = "total")]
        sort: ReportSort,
        /// Only the first N rows.
        #[arg(long, value_name = "N")]
        top: Option<usize>,
        /// Draw the log2 histogram of the durations of the pairs named NAME.
        #[arg(long, value_name = "NAME")]
        histogram: Option<String>,
        /// The same figures as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Per-CPU entries, lost and incomplete counts, time span; aux use; tracepoints.
    Stats {
        /// The device directory.
        device: Option<PathBuf>,
    },
    /// Empty the trace (as ftrace's `echo > trace`): readers then show only what is recorded
    /// after now, and count losses from here; `stats` counts the clears. Safe while programs
    /// write: nothing in the rings is changed, the clear is a time published in the header.
    Clear {
        /// The device directory.
        device: Option<PathBuf>,
    },
    /// Serve a device as files any program reads, as Akaros's #ttrace: `version`, `cpuN`
    /// (CPU N's entries, oldest first), `aux`, `meta`, `ctl` (read: the mask and rules;
    /// write: commands), `trace` (dump's lines), `trace_pipe` (new events, blocking),
    /// `stats`. Runs in the foreground until Ctrl-C or SIGTERM, or `ttrace-reader umount`.
    Mount {
        /// The device directory.
        device: Option<PathBuf>,
        /// Where to mount it: default /dev/ttrace as root, else $XDG_RUNTIME_DIR/ttrace
        /// (created if missing, removed after).
        mountpoint: Option<PathBuf>,
    },
    /// Unmount a device mounted by `ttrace-reader mount` (its mount then exits).
    Umount {
        /// The mount point: default as for `mount`.
        mountpoint: Option<PathBuf>,
    },
    /// Decode raw entries (the `cpuN` files of a mounted device, or copies of them) to the
    /// lines `dump` prints, merged in time order across the files.
    Decode {
        /// Files of 64-byte entries; `-` reads standard input.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// The device the entries come from, for names, formats and strings: a device
        /// directory, a mounted one, or a snapshot file. Default: the directory holding the
        /// first file.
        #[arg(long, value_name = "DEVICE")]
        device: Option<PathBuf>,
        /// Print UTC wall-clock times instead of seconds since the device was created.
        #[arg(long)]
        utc: bool,
    },
}

/// `report --sort`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum ReportSort {
    /// Pairs.
    Count,
    /// Total time.
    Total,
    /// 99th percentile.
    P99,
    /// Longest.
    Max,
}

/// Formats of `export`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum ExportFormat {
    /// A uftrace data directory.
    Uftrace,
    /// Chrome Trace Event JSON.
    Chrome,
    /// Common Trace Format 1.8.
    Ctf,
}

/// What to show.
#[derive(Args, Clone)]
struct Select {
    /// Only these rings (`--cpu 0 --cpu 2` or `--cpu 0,2`).
    #[arg(long, value_delimiter = ',', value_name = "N")]
    cpu: Vec<usize>,
    /// Only tracepoints whose name matches this wildcard (`*`, `?`); messages are `info`.
    #[arg(long, value_name = "WILDCARD")]
    filter: Option<String>,
}

/// Which part of the trace, in time.
#[derive(Args)]
struct Window {
    /// Only events at or after TIME: seconds since the device was created as the first
    /// column shows them (`12.5`, `300ms`), a UTC time as `--utc` shows it
    /// (`2026-11-22T15:47:37.581Z`), or a span before the newest event of the trace (`-10s`:
    /// the last ten seconds).
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    since: Option<String>,
    /// Only events at or before TIME (the same forms as `--since`).
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    until: Option<String>,
}

const CTL_COMMANDS: [&str; 6] = [
    "setmask", "setbits", "clrbits", "enable", "disable", "reset",
];

/// Whose devices this run opens (`--any-owner`).
static TRUST: std::sync::OnceLock<Trust> = std::sync::OnceLock::new();

fn trust() -> Trust {
    *TRUST.get().unwrap_or(&Trust::Own)
}

fn open(device: Option<PathBuf>) -> Result<Reader, Error> {
    Reader::open_with(device.unwrap_or_else(devttrace::default_dir), trust()).map_err(refusal)
}

fn open_control(device: Option<PathBuf>) -> Result<Device, Error> {
    Device::attach_with(&device.unwrap_or_else(devttrace::default_dir), trust()).map_err(refusal)
}

/// An open error; a device refused for whom it belongs to says how to open it.
fn refusal(e: devttrace::Error) -> Error {
    use devttrace::Problem::{Owner, Symlink, Writable};
    match e {
        devttrace::Error::Invalid {
            problem: Owner { .. } | Writable { .. } | Symlink,
            ..
        } => Error::Untrusted(e),
        e => Error::Device(e),
    }
}

fn filter(dev: &Reader, select: Select) -> Result<Filter, Error> {
    let n = dev.version().num_cpus as usize;
    if let Some(&c) = select.cpu.iter().find(|&&c| c >= n) {
        return Err(Error::NoCpu { cpu: c, cpus: n });
    }
    // Each CPU's rings: its restartable one and its shared one.
    let rings = select.cpu.iter().flat_map(|&c| [c, n + c]).collect();
    Ok(Filter {
        cpus: rings,
        name: select.filter,
        since_ns: None,
        until_ns: None,
    })
}

fn time_format(utc: bool) -> TimeFormat {
    if utc {
        TimeFormat::Utc
    } else {
        TimeFormat::Relative
    }
}

/// Writes a dump to standard output.
fn print(view: &View<'_>, filter: &Filter, time: TimeFormat) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    decode::dump(view, filter, time, &mut out)?;
    out.flush()
}

fn dump(device: Option<PathBuf>, select: Select, window: Window, utc: bool) -> Result<(), Error> {
    let dev = open(device)?;
    let (view, filter) = view_window(&dev, select, window)?;
    quiet_pipe(print(&view, &filter, time_format(utc)))?;
    // Events are copied as they are printed: a file cut meanwhile made some read as empty.
    Ok(dev.check_intact()?)
}

/// A view of `dev` and the filter of `--cpu`, `--filter`, `--since` and `--until`.
fn view_window(dev: &Reader, select: Select, window: Window) -> Result<(View<'_>, Filter), Error> {
    let mut filter = filter(dev, select)?;
    let since = window
        .since
        .map(|s| parse_time("--since", &s))
        .transpose()?;
    let until = window
        .until
        .map(|s| parse_time("--until", &s))
        .transpose()?;
    let clock = dev.version().clock;
    let mut newer_than = 0;
    if let Some(When::Since(_) | When::Wall(_)) = since {
        let ns = since.map_or(0, |w| resolve(w, &clock, 0));
        // The rings keep what is after `ns - 1` (an event shown at `ns` was rounded from at
        // least `ns - 0.5`); the exact cut is then made on the time as shown.
        if ns > 0 {
            newer_than = clock
                .anchor_ticks
                .saturating_add(clock.ns_to_ticks(ns as u64 - 1));
        }
    }
    let view = View::of(dev, newer_than)?;
    // The newest event of every ring, and the newest message, for `-10s`.
    let info = ttrace_layouts::aux::AuxTag::Info as u16;
    let messages = view.aux.records().filter(|r| r.tag == info);
    let end = (view.cpus.iter())
        .filter_map(|r| r.events.last().map(|e| e.stamp))
        .chain(messages.map(|r| r.timestamp))
        .max()
        .map_or(0, |t| clock.since_anchor_ns(t));
    filter.since_ns = since.map(|w| resolve(w, &clock, end));
    filter.until_ns = until.map(|w| resolve(w, &clock, end));
    Ok((view, filter))
}

fn report(
    device: Option<PathBuf>,
    select: Select,
    window: Window,
    opts: crate::report::Options,
    json: bool,
) -> Result<(), Error> {
    let dev = open(device)?;
    let (view, filter) = view_window(&dev, select, window)?;
    let r = crate::report::build(&view, &filter, &opts);
    dev.check_intact()?;
    let out = if json {
        crate::report::json(&r) + "\n"
    } else {
        let mut s = decode::header_line(&view) + "\n" + &crate::report::text(&r);
        let n = view.version.num_cpus;
        for (ring, idx) in view.cpus.iter().enumerate() {
            if decode::shown(ring, idx, n, &filter) {
                let name = ttrace_layouts::ring::ring_name(ring, n);
                s += &format!(
                    "# {}\n",
                    decode::ring_counts(&name, idx, view.vanished(ring))
                );
            }
        }
        s
    };
    quiet_pipe(std::io::stdout().lock().write_all(out.as_bytes()))
}

/// How `follow` runs.
struct FollowOptions {
    limit: Option<u64>,
    interval: Duration,
    window_ns: u64,
    time: TimeFormat,
    wait: bool,
}

/// Why following one device ended.
enum Ended {
    /// The limit was reached, or the output closed.
    Done,
    /// The device's directory or header is gone.
    Removed,
    /// Another device was created at its path.
    Replaced,
}

/// Whether an open failed only because no device is there (yet).
fn absent(e: &devttrace::Error) -> bool {
    matches!(
        e,
        devttrace::Error::Missing(_)
            | devttrace::Error::NotADevice(_)
            | devttrace::Error::Invalid {
                problem: devttrace::Problem::Missing,
                ..
            }
    )
}

/// Opens the device at `dir`, waiting (a check per `interval`, at least a millisecond)
/// while there is none.
fn wait_for(dir: &Path, interval: Duration) -> Result<Reader, Error> {
    loop {
        match Reader::open_with(dir, trust()) {
            Err(e) if absent(&e) => std::thread::sleep(interval.max(Duration::from_millis(1))),
            opened => return opened.map_err(refusal),
        }
    }
}

/// `follow`: the device at `dir`; with `--wait`, waits for it, and follows each device
/// created there in turn.
fn follow_path(dir: PathBuf, select: Select, opts: FollowOptions) -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    let mut say = |line: String| quiet_pipe(writeln!(out, "{line}").and_then(|_| out.flush()));
    let (mut dev, mut from_start) = match opts.wait {
        false => (open(Some(dir.clone()))?, false),
        true => match Reader::open_with(&dir, trust()) {
            Ok(dev) => (dev, false),
            Err(e) if !absent(&e) => return Err(refusal(e)),
            Err(_) => {
                say(format!(
                    "# waiting for {} to be created (follow --wait)",
                    dir.display()
                ))?;
                (wait_for(&dir, opts.interval)?, true)
            }
        },
    };
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
        let ended = follow(follower, &filter, &opts, &mut printed)?;
        if matches!(ended, Ended::Removed) {
            say(format!(
                "# device {} was removed; waiting for it to be created again",
                dir.display()
            ))?;
        }
        if matches!(ended, Ended::Done) {
            return Ok(());
        }
        dev = wait_for(&dir, opts.interval)?;
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
fn follow(
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
        let poll = follower.poll()?;
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
        }
        if poll.late > 0 {
            let _ = writeln!(
                buf,
                "# {} events late (older than events already printed: their writer stalled longer than the reorder window)",
                poll.late
            );
        }
        let mut ended = None;
        if limit.is_some_and(|l| *printed >= l) {
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
        // Idle: poll less and less often; at the first event, as often as asked again.
        sleep = match poll.active {
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

/// Whether `word` reads as a (mistyped) command rather than a path: a bare word of letters.
fn looks_like_command(word: &str) -> bool {
    !word.is_empty() && word.bytes().all(|b| b.is_ascii_alphabetic())
}

/// The edit distance between two short words.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diagonal + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// The error for a word that is not a ctl command.
fn not_a_command(word: &str) -> Error {
    let guess = CTL_COMMANDS
        .iter()
        .map(|&c| (distance(&word.to_ascii_lowercase(), c), c))
        .min()
        .filter(|(d, _)| *d <= 2)
        .map(|(_, c)| c);
    Error::NotACommand {
        word: word.to_string(),
        guess,
        commands: &CTL_COMMANDS,
    }
}

fn ctl(mut words: Vec<String>) -> Result<(), Error> {
    let device = match words.first() {
        Some(w) if !CTL_COMMANDS.contains(&w.as_str()) => {
            // A word that is no path here and reads as a command is a mistyped command.
            if looks_like_command(w) && std::fs::symlink_metadata(w).is_err() {
                return Err(not_a_command(w));
            }
            Some(PathBuf::from(words.remove(0)))
        }
        _ => None,
    };
    if let Some(w) = words
        .first()
        .filter(|w| !CTL_COMMANDS.contains(&w.as_str()))
    {
        return Err(not_a_command(w));
    }
    if words.is_empty() {
        let dev = open(device)?;
        return quiet_pipe(std::io::stdout().lock().write_all(dev.ctl().as_bytes()));
    }
    let line = words.join(" ");
    // Checked before anything is opened or created: a bad command changes nothing.
    let command: devttrace::control::Command = line.parse().map_err(Error::BadCommand)?;
    let dir = device.unwrap_or_else(devttrace::default_dir);
    let dev = match Device::attach_with(&dir, trust()) {
        // No device yet: create it as the first program would, so that the setting is
        // there before any program runs.
        Err(devttrace::Error::Missing(_)) if std::fs::symlink_metadata(&dir).is_err() => {
            let config = devttrace::Config {
                dir: Some(dir.clone()),
                ..devttrace::Config::from_env()?
            };
            let dev = Device::open(&config)?;
            let v = dev.reader().version();
            eprintln!(
                "ttrace-reader: ctl: no device at {}: created it ({} cpus x {} slots, aux {} KiB, as a program would) for `{line}` to apply to the programs that use it",
                dir.display(),
                v.num_cpus,
                v.ring_slots,
                v.aux_size >> 10
            );
            dev
        }
        opened => opened.map_err(refusal)?,
    };
    dev.apply(&command)?;
    if let devttrace::control::Command::Enable(p) | devttrace::control::Command::Disable(p) =
        &command
    {
        if !dev.pattern_matches_known(p) {
            eprintln!(
                "ttrace-reader: ctl: note: `{p}` matches nothing yet (no tracepoint of this device, nor `info`); the rule is kept for tracepoints registered later"
            );
        }
    }
    quiet_pipe(
        std::io::stdout()
            .lock()
            .write_all(dev.reader().ctl().as_bytes()),
    )
}

/// The device that raw entries belong to: `device`, else the directory of the first file;
/// a mounted device (`version` has a `source` line) stands for the device it serves.
fn entries_device(device: Option<PathBuf>, files: &[PathBuf]) -> Result<Reader, Error> {
    let dir = match device {
        Some(d) => d,
        None => match files.first() {
            Some(f) if f.as_os_str() != "-" => f
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."))
                .to_path_buf(),
            _ => return Err(Error::StdinNeedsDevice),
        },
    };
    match crate::mount::source_of(&dir) {
        Some(source) => open(Some(source)),
        None => open(Some(dir)),
    }
}

fn decode_files(device: Option<PathBuf>, files: Vec<PathBuf>, utc: bool) -> Result<(), Error> {
    use std::io::Read;
    let dev = entries_device(device, &files)?;
    let limits = crate::raw::Limits::of(&dev.version());
    let mut all = Vec::with_capacity(files.len());
    for f in &files {
        let mut bytes = Vec::new();
        let read = if f.as_os_str() == "-" {
            std::io::stdin().lock().read_to_end(&mut bytes)
        } else {
            std::fs::File::open(f).and_then(|mut file| file.read_to_end(&mut bytes))
        };
        read.map_err(|source| Error::File {
            path: f.clone(),
            source,
        })?;
        let mut events =
            crate::raw::parse(&bytes, &limits).map_err(|source| Error::NotEntries {
                path: f.clone(),
                source,
            })?;
        // Each file in time order (a file may be several CPUs' entries one after another).
        events.sort_by_key(|e| e.stamp);
        all.push(events);
    }
    let snap = crate::raw::snapshot(&dev, all);
    let mut out = std::io::stdout().lock();
    let written = Decoder::new(&snap, time_format(utc))
        .write_all(Merge::snapshot(&snap, &Filter::default()), &mut out)
        .and_then(|_| out.flush());
    quiet_pipe(written)
}

fn demo(
    threads: usize,
    requests: u64,
    device: Option<PathBuf>,
    forever: bool,
) -> Result<(), Error> {
    let tmp = tempfile::Builder::new().prefix("ttrace-demo-").tempdir()?;
    let dir = device.unwrap_or_else(|| tmp.path().join("dev"));
    let cfg = devttrace::Config {
        ring_slots: 4096,
        ..devttrace::Config::at(&dir)
    };
    let writer = ttrace_core::init(&cfg)?;
    loop {
        crate::demo::run(writer, threads, requests);
        if !forever {
            break;
        }
    }
    let dev = open(Some(dir))?;
    let view = View::of(&dev, 0)?;
    quiet_pipe(print(&view, &Filter::default(), TimeFormat::Relative))
}

fn run(cli: Cli) -> Result<(), Error> {
    let _ = TRUST.set(if cli.any_owner {
        Trust::Any
    } else {
        Trust::Own
    });
    match cli.command {
        Command::Demo {
            threads,
            requests,
            device,
            forever,
        } => demo(threads, requests, device, forever),
        Command::Dump {
            device,
            select,
            window,
            utc,
        } => dump(device, select, window, utc),
        Command::Follow {
            device,
            select,
            limit,
            interval_ms,
            reorder_window_ms,
            utc,
            wait,
        } => follow_path(
            device.unwrap_or_else(devttrace::default_dir),
            select,
            FollowOptions {
                limit,
                interval: Duration::from_millis(interval_ms),
                window_ns: reorder_window_ms.saturating_mul(1_000_000),
                time: time_format(utc),
                wait,
            },
        ),
        Command::Stats { device } => {
            let text = crate::stats::text(&open(device)?)?;
            quiet_pipe(std::io::stdout().lock().write_all(text.as_bytes()))
        }
        Command::Clear { device } => {
            let dev = open_control(device)?;
            let clears = dev.clear().map_err(|source| Error::NotCleared {
                path: dev.dir().to_path_buf(),
                source,
            })?;
            eprintln!("{}: cleared (clear {clears})", dev.dir().display());
            Ok(())
        }
        Command::Ctl { words } => ctl(words),
        Command::Report {
            device,
            select,
            window,
            by,
            sort,
            top,
            histogram,
            json,
        } => {
            use crate::report::{Options, SortBy};
            let opts = Options {
                by,
                sort: match sort {
                    ReportSort::Count => SortBy::Count,
                    ReportSort::Total => SortBy::Total,
                    ReportSort::P99 => SortBy::P99,
                    ReportSort::Max => SortBy::Max,
                },
                top,
                histogram,
            };
            report(device, select, window, opts, json)
        }
        Command::Decode { files, device, utc } => decode_files(device, files, utc),
        Command::Mount { device, mountpoint } => crate::mount::mount(
            &device.unwrap_or_else(devttrace::default_dir),
            &mountpoint.unwrap_or_else(crate::mount::default_mountpoint),
            trust(),
        ),
        Command::Umount { mountpoint } => {
            crate::mount::umount(&mountpoint.unwrap_or_else(crate::mount::default_mountpoint))
        }
        Command::Snapshot {
            device,
            output,
            force,
        } => {
            let dev = open(device)?;
            let target = output_target(&output, Shape::File, force)?;
            if target == Target::Stream {
                return Err(Error::SnapshotToStream(output));
            }
            let saved = write_output(&output, target, Shape::File, |tmp| Ok(dev.save(tmp)?))?;
            println!(
                "{}: {} entries, {} being written, {} overwritten while copied; {} bytes (of a {}-byte device)",
                output.display(),
                saved.entries,
                saved.claimed,
                saved.changed,
                saved.bytes,
                saved.image_bytes
            );
            if let Some(e) = saved.aux_error {
                println!("# aux buffer not saved: {e}");
            }
            Ok(())
        }
        Command::Export {
            format,
            device,
            output,
            force,
            select,
            window,
        } => export(format, device, &output, force, select, window),
    }
}

/// A progress bar on a terminal, counting events; hidden when standard error is not one.
fn progress_bar(total: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(total),
        indicatif::ProgressDrawTarget::stderr(),
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{bar:40} {human_pos}/{human_len} events, {per_sec}, {eta} left",
    ) {
        bar.set_style(style);
    }
    bar
}

fn export(
    format: ExportFormat,
    device: Option<PathBuf>,
    output: &Path,
    force: bool,
    select: Select,
    window: Window,
) -> Result<(), Error> {
    let dev = open(device)?;
    let shape = match format {
        ExportFormat::Chrome => Shape::File,
        ExportFormat::Ctf => Shape::Dir("metadata"),
        ExportFormat::Uftrace => Shape::Dir("info"),
    };
    let target = match output == Path::new("-") {
        true => Target::Stream,
        false => output_target(output, shape, force)?,
    };
    let (view, filter) = view_window(&dev, select, window)?;
    let total = view.cpus.iter().map(|r| r.events.len() as u64).sum();
    let bar = progress_bar(total);
    let progress = |n: u64| bar.set_position(n);
    let items = Merge::view(&view, &filter);
    let ctx = (&view).into();
    let named = |r: std::io::Result<crate::export::Written>| {
        r.map(Some).map_err(|source| Error::File {
            path: output.to_path_buf(),
            source,
        })
    };
    let done = match (format, target) {
        (ExportFormat::Chrome, Target::Stream) => {
            let stream = |out: &mut dyn Write| -> std::io::Result<crate::export::Written> {
                let mut out = std::io::BufWriter::with_capacity(1 << 20, out);
                let written =
                    crate::export::chrome::write(ctx, &view.cpus, items, &mut out, progress)?;
                out.flush().map(|()| written)
            };
            // `-o /dev/stdout | head` ends as quietly as `-o - | head`.
            let written = match output == Path::new("-") {
                true => stream(&mut std::io::stdout().lock()),
                false => std::fs::OpenOptions::new()
                    .append(true)
                    .open(output)
                    .and_then(|mut file| stream(&mut file)),
            };
            match written {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(None),
                written => named(written),
            }
        }
        (ExportFormat::Chrome, target) => write_output(output, target, shape, |tmp| {
            named(
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(tmp)
                    .and_then(|file| {
                        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
                        let written = crate::export::chrome::write(
                            ctx, &view.cpus, items, &mut out, progress,
                        )?;
                        out.flush().map(|()| written)
                    }),
            )
        }),
        (ExportFormat::Ctf, target) => write_output(output, target, shape, |tmp| {
            named(crate::export::ctf::write(
                ctx, &view.cpus, items, tmp, progress,
            ))
        }),
        (ExportFormat::Uftrace, target) => write_output(output, target, shape, |tmp| {
            named(crate::export::uftrace::write(
                ctx, &view.cpus, items, tmp, progress,
            ))
        }),
    };
    bar.finish_and_clear();
    let written = done?;
    dev.check_intact()?;
    // What was exported, counted as `dump` counts it, on a terminal (as the progress bar).
    if let (Some(written), true) = (
        written,
        std::io::IsTerminal::is_terminal(&std::io::stderr()),
    ) {
        eprintln!("{}: {}", output.display(), written.tally().line());
    }
    Ok(())
}

/// Runs the command line of the process; errors are one line on stderr and exit status 1.
pub fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ttrace-reader: {e}");
            ExitCode::FAILURE
        }
    }
}
