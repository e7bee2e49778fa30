//! The command line as clap parses it (`Cli`, one `Command` per subcommand), and [`main`],
//! which runs the command it names.

use super::export::ExportFormat;
use super::follow::FollowOptions;
use super::report::ReportSort;
use super::select::{time_format, Select, Window};
use super::watch::WatchOptions;
use super::{
    clear, ctl, decode, demo, dump, export, follow, mount, open, report, snapshot, snapshots,
    stats, watch,
};
use crate::Error;
use clap::{Parser, Subcommand};
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
        /// Repeat the workload until killed, printing only where it records (to try
        /// `follow`, `ctl`, ...).
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
        /// Show before each event the `tracing` span instances its thread was in (entered
        /// and not exited), outermost first, as fmt does: `svc::request{uri="/a"}:svc::work{id=1}: `
        /// (an enter's or exit's line: those around its instance). Built from every event of
        /// the rings read, whatever --cpu and --filter show.
        #[arg(long)]
        spans: bool,
    },
    /// Print events as they are written, until interrupted; says how many were lost when the
    /// writers overwrite entries before they could be read. A snapshot file never changes:
    /// what it holds is printed, as by dump, and follow ends.
    Follow {
        /// The device directory.
        device: Option<PathBuf>,
        #[command(flatten)]
        select: Select,
        /// Stop after this many events.
        #[arg(long)]
        limit: Option<u64>,
        /// Milliseconds between polls while events come, at least 1 (idle, the interval
        /// doubles up to 100 ms, and drops back at the first event).
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
        /// its start; when it is removed and created again, follow the new one. Something
        /// else at the path (a file that is no snapshot, a directory that is no device) is
        /// an error at once.
        #[arg(long)]
        wait: bool,
    },
    /// Follow the device and save a snapshot of it when a rule matches, so that the moment
    /// is kept after the rings overwrite it. Each snapshot prints one line (time, rule, what
    /// matched, file, events); Ctrl-C ends with the counts.
    #[command(after_help = "RULES:
  event NAME                    an event of tracepoint NAME (wildcards * and ?)
  event NAME if ARG OP VALUE    ... whose argument ARG compares so (OP: == != < <= > >=;
                                VALUE: an integer, decimal, 0x hex or negative, or a string
                                for == and != on a string argument)
  latency NAME > DURATION       a pair (entry/exit of NAME, or start/stop of stem NAME,
                                paired as report pairs) longer than DURATION (5ms, 250us)
  latency NAME max              a pair longer than every one before it (the first pair sets
                                the maximum and does not fire)
  latency NAME.PART > DURATION  ... whose part PART is longer: on_cpu, preempted, blocked,
                                scheduled, idle, unknown (where its time went, as report
                                says); also with max
  lost > N/s                    more than N entries lost by the watcher over the last second

Matches while a snapshot waits for its --after span are merged into it; a match within
--interval of the last snapshot is put off to an interval after it (its file is named by
the match's time). Both are counted (stats). The snapshot holds what the rings still hold
when --after has passed: at E events/s per ring of S slots, about S/E seconds back.

Example: ttrace-reader watch --on 'latency request > 5ms' --exec 'cp \"$TTRACE_SNAPSHOT\" /bugs/'")]
    Watch {
        /// The device directory.
        device: Option<PathBuf>,
        /// A rule (see RULES below); more than one: any of them.
        #[arg(long = "on", value_name = "RULE", required = true)]
        rules: Vec<String>,
        /// The snapshot directory (default: $TTRACE_SNAPSHOT_DIR, else, for a device in
        /// memory such as /dev/shm's, /var/tmp/NAME.snapshots, else DEVICE.snapshots).
        #[arg(short, long, value_name = "DIR")]
        output: Option<PathBuf>,
        /// The window before the match the snapshot holds: the watcher's copy of the rings
        /// grows to hold it where the rings hold less, in at most half of --max-bytes
        /// (default 1s).
        #[arg(long, value_name = "DUR")]
        before: Option<String>,
        /// How long after the matching event the device is saved, so that the consequences
        /// are in it (default 5ms).
        #[arg(long, value_name = "DUR")]
        after: Option<String>,
        /// At most one snapshot per interval (default 1s).
        #[arg(long, value_name = "DUR")]
        interval: Option<String>,
        /// Keep at most N snapshot files in the directory, the newest (default 16).
        #[arg(long, value_name = "N")]
        keep: Option<usize>,
        /// Keep at most SIZE bytes of snapshot files (k, m, g: binary units; default 1g).
        #[arg(long, value_name = "SIZE")]
        max_bytes: Option<String>,
        /// Run `sh -c CMD` after each snapshot, with TTRACE_SNAPSHOT (the file) and
        /// TTRACE_RULE in its environment (not waited for while watching; waited for at the
        /// end).
        #[arg(long, value_name = "CMD")]
        exec: Option<String>,
        /// End after N snapshots.
        #[arg(long, value_name = "N")]
        count: Option<u64>,
        /// Milliseconds between polls while events come, at least 1 (idle, the interval
        /// doubles up to 100 ms): short, so that the rings are read before they wrap.
        #[arg(long, default_value_t = 2)]
        interval_ms: u64,
        /// Wait for the device to be created and for the tracepoints the rules name to be
        /// registered (start the watcher before the program).
        #[arg(long)]
        wait: bool,
        /// Also send each snapshot's spans to this OpenTelemetry collector's OTLP/HTTP
        /// receiver (http://host:4318; path /v1/traces unless given), as `export
        /// --otlp-endpoint` does.
        #[arg(long, value_name = "URL")]
        otlp_endpoint: Option<String>,
    },
    /// Show or change what is recorded: `level <error|warn|info|debug|trace|off>` (`tracing`
    /// callsites of that level and more severe), `setmask <value> <mask>`, `setbits <bits>`,
    /// `clrbits <bits>` (bits: a number, or a level in capitals: `clrbits DEBUG`), `enable
    /// <wildcard>`, `disable <wildcard>` (or a level in capitals: `disable DEBUG`), `reset`;
    /// install a
    /// snapshot rule (as `watch --on` takes) that programs calling
    /// `ttrace_snapshots::apply_snapshot_rules()` apply themselves: `on <rule>`, `off <rule>`,
    /// `off all`.
    Ctl {
        /// `[DEVICE] [COMMAND ARGS...]`; with no command, prints the control state.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        words: Vec<String>,
    },
    /// Write the trace in another tool's format: `perfetto` (Perfetto's own protobuf, for
    /// ui.perfetto.dev and trace_processor; a file), `otlp` (OpenTelemetry spans as JSON
    /// lines, the collector's file format) or `otlp-proto` (a protobuf `TracesData`),
    /// `uftrace` (a uftrace data directory, for uftrace replay/report/dump), `ctf` (Common
    /// Trace Format 1.8, for babeltrace2 and Trace Compass; a directory) or `chrome` (Chrome
    /// Trace Event JSON, for chrome://tracing; a file). Or send the spans to an OpenTelemetry
    /// collector (`--otlp-endpoint`).
    Export {
        /// The output format.
        #[arg(long, value_enum, required_unless_present = "otlp_endpoint")]
        format: Option<ExportFormat>,
        /// The device directory, or a snapshot file.
        device: Option<PathBuf>,
        /// Where to write: a file for `perfetto`, `otlp` and `chrome` (`-` or `/dev/stdout`
        /// for standard output), a new or empty directory for `ctf` and `uftrace`.
        #[arg(
            short,
            long,
            value_name = "PATH",
            required_unless_present = "otlp_endpoint"
        )]
        output: Option<PathBuf>,
        /// Send the spans (as `otlp` has them) to this OpenTelemetry collector's OTLP/HTTP
        /// receiver instead (http://host:4318; path /v1/traces unless given).
        #[arg(long, value_name = "URL", conflicts_with_all = ["output", "format"])]
        otlp_endpoint: Option<String>,
        /// Replace PATH if it exists (for `ctf` and `uftrace`, only an earlier export of the
        /// same format).
        #[arg(long)]
        force: bool,
        /// For `perfetto`: a counter track of each value of this argument, per process
        /// (`NAME.ARG`, or `NAME` for each numeric argument of tracepoint `NAME`); repeatable.
        #[arg(long = "counter", value_name = "NAME.ARG")]
        counters: Vec<String>,
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
        /// The file to write (`-` or `/dev/stdout` for standard output, or another pipe or
        /// device: written there in place).
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
        /// Replace FILE if it exists.
        #[arg(long)]
        force: bool,
    },
    /// List the snapshot files a program saved (on a trigger, a rule, a panic), oldest
    /// first, one line each: when it was taken (UTC), why (kind and reason), its size, its
    /// events and their time span, the triggers merged into it, its file name. Any reader
    /// reads such a file in place of a device.
    Snapshots {
        /// The snapshot directory, or a device directory (then its snapshot directory).
        /// Default: that of --device, else of the default device: $TTRACE_SNAPSHOT_DIR,
        /// else, for a device in memory, /var/tmp/<name>.snapshots, else
        /// `<device>.snapshots` beside the device.
        #[arg(conflicts_with = "device")]
        dir: Option<PathBuf>,
        /// List the snapshot directory of this device.
        #[arg(long, value_name = "DEVICE")]
        device: Option<PathBuf>,
        /// A JSON array, one object per file.
        #[arg(long)]
        json: bool,
    },
    /// Where the time went: how often each point fired (per second of the time each ring
    /// covers), the durations of entry/exit and start/stop pairs and the lifetimes of
    /// `tracing` span instances (count, min, p50, p90, p99, p99.9, max, total), and the
    /// slowest of each, with their fields.
    Report {
        /// The device directory.
        device: Option<PathBuf>,
        #[command(flatten)]
        select: Select,
        #[command(flatten)]
        window: Window,
        /// Split the durations and the spans by thread, process, CPU (a span instance's:
        /// those of its `new`), or the value of the entry's argument named ARG (`--by flags`;
        /// `arg:NAME` for an argument named like a keyword), or of a span's field named ARG
        /// (its own, else its nearest ancestor's, as they were when it closed: `--by uri`
        /// splits the spans under the requests that hold a uri), shown as dump shows it; a
        /// name no pair's entry and no span has is an error that names those they have.
        #[arg(long, value_name = "thread|process|cpu|ARG")]
        by: Option<crate::report::By>,
        /// Sort the durations and the spans by count, total, p99 or max (largest first; a
        /// span's lifetime).
        #[arg(long, value_enum, default_value = "total")]
        sort: ReportSort,
        /// Only the first N rows of each table.
        #[arg(long, value_name = "N")]
        top: Option<usize>,
        /// Draw the log2 histogram of the durations of the pairs named NAME (an entry's or a
        /// start's name), or of the lifetimes of the instances of the span NAME; another is
        /// an error that names the pairs and spans.
        #[arg(long, value_name = "NAME")]
        histogram: Option<String>,
        /// List the N slowest instances of each span (by lifetime) and the N slowest pairs of
        /// each name (by duration), longest first: each with its fields (a pair: its entry's
        /// arguments), a span's ancestors with theirs (`svc::request{uri="/a"} >
        /// svc::work{id=1}`), when it began (as dump shows times), the threads that ran it,
        /// and a span's busy and idle time.
        #[arg(long, value_name = "N")]
        slowest: Option<String>,
        /// With --slowest: only those of the span or pair named NAME.
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        /// The same figures as JSON, the loss counts of each ring included.
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
        /// Where to mount it, an empty directory where nothing is mounted: default
        /// /dev/ttrace as root, else $XDG_RUNTIME_DIR/ttrace (created if missing, with its
        /// missing parents, and what was created removed after; a dead ttrace mount left
        /// there by a killed mount is unmounted first).
        mountpoint: Option<PathBuf>,
    },
    /// Unmount a device mounted by `ttrace-reader mount` (its mount then exits; a dead one,
    /// whose process was killed, is unmounted too); anything else mounted there is refused.
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

/// Runs the command `cli` names.
fn run(cli: Cli) -> Result<(), Error> {
    open::set_trust(cli.any_owner);
    match cli.command {
        Command::Demo {
            threads,
            requests,
            device,
            forever,
        } => demo::run(threads, requests, device, forever),
        Command::Dump {
            device,
            select,
            window,
            utc,
            spans,
        } => dump::run(device, select, window, utc, spans),
        Command::Follow {
            device,
            select,
            limit,
            interval_ms,
            reorder_window_ms,
            utc,
            wait,
        } => follow::run(
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
        Command::Watch {
            device,
            rules,
            output,
            before,
            after,
            interval,
            keep,
            max_bytes,
            exec,
            count,
            interval_ms,
            wait,
            otlp_endpoint,
        } => watch::run(
            device,
            WatchOptions {
                rules,
                output,
                before,
                after,
                interval,
                keep,
                max_bytes,
                exec,
                count,
                interval_ms,
                wait,
                otlp_endpoint,
            },
        ),
        Command::Stats { device } => stats::run(device),
        Command::Clear { device } => clear::run(device),
        Command::Ctl { words } => ctl::run(words),
        Command::Report {
            device,
            select,
            window,
            by,
            sort,
            top,
            histogram,
            slowest,
            name,
            json,
        } => {
            let opts = crate::report::Options {
                by,
                sort: sort.into(),
                top,
                histogram,
                slowest: slowest.as_deref().map(report::slowest_count).transpose()?,
                slowest_name: name,
            };
            report::run(device, select, window, opts, json)
        }
        Command::Decode { files, device, utc } => decode::run(device, files, utc),
        Command::Mount { device, mountpoint } => mount::mount(device, mountpoint),
        Command::Umount { mountpoint } => mount::umount(mountpoint),
        Command::Snapshot {
            device,
            output,
            force,
        } => snapshot::run(device, output, force),
        Command::Snapshots { dir, device, json } => snapshots::run(dir, device, json),
        Command::Export {
            format,
            device,
            output,
            force,
            counters,
            otlp_endpoint,
            select,
            window,
        } => match (format, output, otlp_endpoint) {
            (_, _, Some(url)) => export::post(device, &url, select, window),
            (Some(format), Some(output), None) => {
                export::run(format, device, &output, force, &counters, select, window)
            }
            _ => unreachable!("clap requires --format and -o without --otlp-endpoint"),
        },
    }
}

/// Runs the command line of the process; errors are one line on stderr and exit status 1.
pub fn main() -> ExitCode {
    main_with(std::env::args_os())
}

/// Runs `args` (the program's name first) as the command line; errors are one line on
/// stderr and exit status 1. What another program that embeds the reader calls (the
/// `memory` benchmark runs each command in a fresh process of its own).
pub fn main_with<I: IntoIterator<Item = std::ffi::OsString>>(args: I) -> ExitCode {
    match run(Cli::parse_from(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ttrace-reader: {e}");
            ExitCode::FAILURE
        }
    }
}
