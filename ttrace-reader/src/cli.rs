//! The `ttrace-reader` command line.

use crate::decode::{self, Decoder, TimeFormat};
use crate::merge::{Filter, Merge};
use clap::{Args, Parser, Subcommand};
use devttrace::{Access, Device, Follower, Trust, View};
use std::io::Write;
use std::path::PathBuf;
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
        /// Only events at or after this time (seconds since the device was created, as the
        /// first column shows them).
        #[arg(long, value_name = "SECONDS")]
        since: Option<String>,
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
        /// Where to write: a file for `chrome` (`-` for standard output), a new or empty
        /// directory for `ctf` and `uftrace`.
        #[arg(short, long, value_name = "PATH")]
        output: PathBuf,
        #[command(flatten)]
        select: Select,
    },
    /// Save a consistent copy of the device to one file, which `dump`, `stats` and `export`
    /// read in place of a device (the file to attach to a bug report).
    Snapshot {
        /// The device directory.
        device: Option<PathBuf>,
        /// The file to write.
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
    },
    /// Where the time went: how often each point fired, and the durations of entry/exit
    /// and start/stop pairs (count, min, p50, p90, p99, p99.9, max, total).
    Report {
        /// The device directory.
        device: Option<PathBuf>,
        #[command(flatten)]
        select: Select,
        /// Only events from this time on (seconds since the device was created).
        #[arg(long, value_name = "SECONDS")]
        since: Option<String>,
        /// Split the durations by thread, process or CPU.
        #[arg(long, value_enum)]
        by: Option<ReportBy>,
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

/// `report --by`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum ReportBy {
    /// Per thread.
    Thread,
    /// Per process.
    Process,
    /// Per CPU.
    Cpu,
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
#[derive(Args)]
struct Select {
    /// Only these rings (`--cpu 0 --cpu 2` or `--cpu 0,2`).
    #[arg(long, value_delimiter = ',', value_name = "N")]
    cpu: Vec<usize>,
    /// Only tracepoints whose name matches this wildcard (`*`, `?`); messages are `info`.
    #[arg(long, value_name = "WILDCARD")]
    filter: Option<String>,
}

const CTL_COMMANDS: [&str; 6] = [
    "setmask", "setbits", "clrbits", "enable", "disable", "reset",
];

/// Whose devices this run opens (`--any-owner`).
static TRUST: std::sync::OnceLock<Trust> = std::sync::OnceLock::new();

fn trust() -> Trust {
    *TRUST.get().unwrap_or(&Trust::Own)
}

fn open(device: Option<PathBuf>) -> Result<Device, String> {
    open_as(device, Access::ReadOnly)
}

fn open_as(device: Option<PathBuf>, access: Access) -> Result<Device, String> {
    Device::open_with(
        device.unwrap_or_else(devttrace::default_dir),
        access,
        trust(),
    )
    .map_err(|e| e.to_string())
}

fn filter(dev: &Device, select: Select) -> Result<Filter, String> {
    let n = dev.version().num_cpus as usize;
    if let Some(&c) = select.cpu.iter().find(|&&c| c >= n) {
        return Err(format!("no cpu{c}: the device has {n} cpus"));
    }
    // Each CPU's rings: its restartable one and its shared one.
    let rings = select.cpu.iter().flat_map(|&c| [c, n + c]).collect();
    Ok(Filter {
        cpus: rings,
        name: select.filter,
        since_ns: None,
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

fn dump(
    device: Option<PathBuf>,
    select: Select,
    since: Option<String>,
    utc: bool,
) -> Result<(), String> {
    let dev = open(device)?;
    let (view, filter) = view_since(&dev, select, since)?;
    quiet_pipe(print(&view, &filter, time_format(utc)))?;
    // Events are copied as they are printed: a file cut meanwhile made some read as empty.
    dev.check_intact().map_err(|e| e.to_string())
}

/// A view of `dev` and the filter of `--cpu`, `--filter` and `--since`.
fn view_since(
    dev: &Device,
    select: Select,
    since: Option<String>,
) -> Result<(View<'_>, Filter), String> {
    let mut filter = filter(dev, select)?;
    let mut newer_than = 0;
    if let Some(s) = since {
        let ns = decode::parse_seconds(&s)
            .ok_or_else(|| format!("--since {s:?}: expected seconds, like 1.25"))?;
        let clock = dev.version().clock;
        // The rings keep what is after `ns - 1` (an event shown at `ns` was rounded from at
        // least `ns - 0.5`); the exact cut is then made on the time as shown.
        if ns > 0 {
            newer_than = clock
                .anchor_ticks
                .saturating_add(clock.ns_to_ticks(ns as u64 - 1));
        }
        filter.since_ns = Some(ns);
    }
    let view = dev.view_newer_than(newer_than).map_err(|e| e.to_string())?;
    Ok((view, filter))
}

fn report(
    device: Option<PathBuf>,
    select: Select,
    since: Option<String>,
    opts: crate::report::Options,
    json: bool,
) -> Result<(), String> {
    let dev = open(device)?;
    let (view, filter) = view_since(&dev, select, since)?;
    let r = crate::report::build(&view, &filter, &opts);
    dev.check_intact().map_err(|e| e.to_string())?;
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

fn follow(
    mut follower: Follower<'_>,
    filter: &Filter,
    limit: Option<u64>,
    interval: Duration,
    time: TimeFormat,
) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    let mut printed = 0u64;
    let mut buf = Vec::new();
    let mut sleep = interval;
    quiet_pipe(
        writeln!(
            out,
            "# following {} (new events as they are written, in time order)",
            follower.device().dir().display()
        )
        .and_then(|_| out.flush()),
    )?;
    loop {
        let poll = follower.poll().map_err(|e| e.to_string())?;
        let mut decoder = Decoder::new(&poll.snapshot, time);
        buf.clear();
        for item in Merge::snapshot(&poll.snapshot, filter) {
            if limit.is_some_and(|l| printed >= l) {
                break;
            }
            decoder.line(&item, &mut buf);
            if item.timestamp() < poll.released_before {
                // Older than what was printed before: its writer stalled past the window.
                buf.pop();
                buf.extend_from_slice(b" (late)\n");
            }
            printed += 1;
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
        let done = limit.is_some_and(|l| printed >= l);
        // Idle: poll less and less often; at the first event, as often as asked again.
        sleep = match poll.active {
            true => interval,
            false => (sleep * 2).clamp(interval, Duration::from_millis(100).max(interval)),
        };
        match out.write_all(&buf).and_then(|_| out.flush()) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(e.to_string()),
            Ok(()) if done => return Ok(()),
            Ok(()) => std::thread::sleep(sleep),
        }
    }
}

/// What `stats` prints.
pub(crate) fn stats(dev: &Device) -> Result<String, String> {
    let snap = dev.view_newer_than(0).map_err(|e| e.to_string())?;
    let clock = snap.version.clock;
    let secs = |t: u64| {
        let ns = clock.since_anchor_ns(t);
        format!(
            "{}{}.{:09}",
            if ns < 0 { "-" } else { "" },
            ns.unsigned_abs() / 1_000_000_000,
            ns.unsigned_abs() % 1_000_000_000
        )
    };
    let mut s = decode::header_line(&snap) + "\n";
    let n = snap.version.num_cpus;
    for (ring, r) in snap.cpus.iter().enumerate() {
        if !decode::shown(ring, r, n, &Filter::default()) {
            continue;
        }
        s += &decode::ring_counts(&ttrace_layouts::ring::ring_name(ring, n), r, 0);
        match (r.events.first(), r.events.last()) {
            (Some(a), Some(b)) => {
                s += &format!(", time {} .. {} s\n", secs(a.stamp), secs(b.stamp))
            }
            _ => s += "\n",
        }
    }
    let st = &snap.status;
    s += &format!(
        "sizes: {} slots per ring ({} rings), aux {} bytes per ring, meta {} bytes\n",
        snap.version.ring_slots,
        snap.cpus.len(),
        snap.version.aux_size,
        snap.version.meta_size,
    );
    s += &match st.clears {
        0 => "cleared: never\n".to_string(),
        n => format!("cleared: {n} times, last at {} s\n", secs(st.cleared_at)),
    };
    s += &format!(
        "aux: {} of {} bytes in use ({} KiB per ring), {} records kept, {} incomplete; since creation {} bytes written, {} dropped\n",
        snap.aux.bytes_in_use(),
        snap.version.aux_size * snap.cpus.len() as u64,
        snap.version.aux_size >> 10,
        snap.aux.records().count(),
        snap.aux.incomplete(),
        st.aux_bytes,
        st.aux_dropped,
    );
    let (records, _, half) =
        ttrace_layouts::meta::split(snap.version.max_tracepoints, snap.version.meta_size);
    s += &format!(
        "tracepoint records: {} of {} bytes in use, {} dropped\n",
        st.meta_used, records, st.meta_dropped,
    );
    s += &format!(
        "names: {} threads, {} processes named; {} of {} bytes in use, {} compactions reclaimed {}, {} dropped\n",
        snap.meta.threads.len(),
        snap.meta.processes.len(),
        st.names_used,
        half,
        st.names_generation,
        st.names_reclaimed,
        st.names_dropped,
    );
    s += &format!("mask: {:#x}\n", st.mask);
    s += &format!("tracepoints: {} defined\n", snap.meta.tracepoints.len());
    for t in &snap.meta.tracepoints {
        let on = if snap.enabled.get(t.id as usize) == Some(&true) {
            "on "
        } else {
            "off"
        };
        s += &format!(
            "  {on} {:>4} {} [{}] classes {:#x}: {}\n",
            t.id,
            t.name,
            t.kind.name(),
            t.classes,
            t.format
        );
    }
    Ok(s)
}

fn ctl(mut words: Vec<String>) -> Result<(), String> {
    let device = match words.first() {
        Some(w) if !CTL_COMMANDS.contains(&w.as_str()) => Some(PathBuf::from(words.remove(0))),
        _ => None,
    };
    let access = if words.is_empty() {
        Access::ReadOnly
    } else {
        Access::ReadWrite
    };
    let dev = open_as(device, access)?;
    if !words.is_empty() {
        dev.ctl_write(&words.join(" ")).map_err(|e| e.to_string())?;
    }
    quiet_pipe(std::io::stdout().lock().write_all(dev.ctl().as_bytes()))
}

/// The device that raw entries belong to: `device`, else the directory of the first file;
/// a mounted device (`version` has a `source` line) stands for the device it serves.
fn entries_device(device: Option<PathBuf>, files: &[PathBuf]) -> Result<Device, String> {
    let dir = match device {
        Some(d) => d,
        None => match files.first() {
            Some(f) if f.as_os_str() != "-" => f
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."))
                .to_path_buf(),
            _ => return Err("reading standard input needs --device DEVICE".into()),
        },
    };
    match crate::mount::source_of(&dir) {
        Some(source) => open(Some(source)),
        None => open(Some(dir)),
    }
}

fn decode_files(device: Option<PathBuf>, files: Vec<PathBuf>, utc: bool) -> Result<(), String> {
    use std::io::Read;
    let dev = entries_device(device, &files)?;
    let limits = crate::raw::Limits::of(&dev.version());
    let mut all = Vec::with_capacity(files.len());
    for f in &files {
        let mut bytes = Vec::new();
        let name = f.display();
        let read = if f.as_os_str() == "-" {
            std::io::stdin().lock().read_to_end(&mut bytes)
        } else {
            std::fs::File::open(f).and_then(|mut file| file.read_to_end(&mut bytes))
        };
        read.map_err(|e| format!("{name}: {e}"))?;
        let mut events = crate::raw::parse(&bytes, &limits).map_err(|e| format!("{name}: {e}"))?;
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
) -> Result<(), String> {
    let tmp = tempfile::Builder::new()
        .prefix("ttrace-demo-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let dir = device.unwrap_or_else(|| tmp.path().join("dev"));
    let cfg = ttrace_core::Config {
        ring_slots: 4096,
        ..ttrace_core::Config::at(&dir)
    };
    let writer = ttrace_core::init(&cfg).map_err(|e| e.to_string())?;
    loop {
        crate::demo::run(writer, threads, requests);
        if !forever {
            break;
        }
    }
    let dev = open(Some(dir))?;
    let view = dev.view_newer_than(0).map_err(|e| e.to_string())?;
    quiet_pipe(print(&view, &Filter::default(), TimeFormat::Relative))
}

fn run(cli: Cli) -> Result<(), String> {
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
            since,
            utc,
        } => dump(device, select, since, utc),
        Command::Follow {
            device,
            select,
            limit,
            interval_ms,
            reorder_window_ms,
            utc,
        } => {
            let dev = open(device)?;
            let filter = filter(&dev, select)?;
            let follower = Follower::with_window(&dev, reorder_window_ms * 1_000_000);
            follow(
                follower,
                &filter,
                limit,
                Duration::from_millis(interval_ms),
                time_format(utc),
            )
        }
        Command::Stats { device } => {
            let text = stats(&open(device)?)?;
            quiet_pipe(std::io::stdout().lock().write_all(text.as_bytes()))
        }
        Command::Clear { device } => {
            let dev = open_as(device, Access::ReadWrite)?;
            let clears = dev
                .core()
                .clear()
                .map_err(|e| format!("{}: {e}", dev.dir().display()))?;
            eprintln!("{}: cleared (clear {clears})", dev.dir().display());
            Ok(())
        }
        Command::Ctl { words } => ctl(words),
        Command::Report {
            device,
            select,
            since,
            by,
            sort,
            top,
            histogram,
            json,
        } => {
            use crate::report::{By, Options, SortBy};
            let opts = Options {
                by: by.map(|b| match b {
                    ReportBy::Thread => By::Thread,
                    ReportBy::Process => By::Process,
                    ReportBy::Cpu => By::Cpu,
                }),
                sort: match sort {
                    ReportSort::Count => SortBy::Count,
                    ReportSort::Total => SortBy::Total,
                    ReportSort::P99 => SortBy::P99,
                    ReportSort::Max => SortBy::Max,
                },
                top,
                histogram,
            };
            report(device, select, since, opts, json)
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
        Command::Snapshot { device, output } => {
            let dev = open(device)?;
            let saved = dev.save(&output).map_err(|e| e.to_string())?;
            println!(
                "{}: {} entries, {} being written, {} overwritten while copied",
                output.display(),
                saved.entries,
                saved.claimed,
                saved.changed
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
            select,
        } => export(format, device, &output, select),
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
    output: &std::path::Path,
    select: Select,
) -> Result<(), String> {
    let dev = open(device)?;
    let filter = filter(&dev, select)?;
    let view = dev.view_newer_than(0).map_err(|e| e.to_string())?;
    let total = view.cpus.iter().map(|r| r.events.len() as u64).sum();
    let bar = progress_bar(total);
    let progress = |n: u64| bar.set_position(n);
    let written = |r: std::io::Result<_>| r.map_err(|e| format!("{}: {e}", output.display()));
    let done = match format {
        ExportFormat::Chrome => {
            let write = |out: &mut dyn Write| -> std::io::Result<()> {
                let mut out = std::io::BufWriter::with_capacity(1 << 20, out);
                let items = Merge::view(&view, &filter);
                crate::export::chrome::write(
                    (&view).into(),
                    &view.cpus,
                    items,
                    &mut out,
                    progress,
                )?;
                out.flush()
            };
            if output == std::path::Path::new("-") {
                quiet_pipe(write(&mut std::io::stdout().lock()))
            } else {
                std::fs::File::create(output)
                    .and_then(|mut file| write(&mut file))
                    .map_err(|e| format!("{}: {e}", output.display()))
            }
        }
        ExportFormat::Ctf | ExportFormat::Uftrace => {
            if output.exists() && output.read_dir().map_or(true, |mut d| d.next().is_some()) {
                Err(format!(
                    "{}: exists and is not an empty directory",
                    output.display()
                ))
            } else {
                let items = Merge::view(&view, &filter);
                let ctx = (&view).into();
                written(match format {
                    ExportFormat::Ctf => {
                        crate::export::ctf::write(ctx, &view.cpus, items, output, progress)
                    }
                    _ => crate::export::uftrace::write(ctx, &view.cpus, items, output, progress),
                })
                .map(|_| ())
            }
        }
    };
    bar.finish_and_clear();
    done?;
    dev.check_intact().map_err(|e| e.to_string())
}

/// Output to a closed pipe (`| head`) ends quietly.
fn quiet_pipe(r: std::io::Result<()>) -> Result<(), String> {
    match r {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.to_string()),
        _ => Ok(()),
    }
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
