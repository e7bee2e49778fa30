//! `ttrace-reader`: decode, follow and control ttrace devices.

use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use ttrace_core::{Config, Device};
use ttrace_reader::text::Trace;

#[derive(Parser)]
#[command(
    name = "ttrace-reader",
    version,
    about = "Decode and control ttrace traces"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
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
    /// Print the whole trace of a device as text, one line per event.
    Dump {
        /// The device directory (default: $TTRACE_DIR, else /dev/shm/ttrace-<uid>).
        device: Option<PathBuf>,
    },
    /// Print events as they are written, until interrupted.
    Follow {
        /// The device directory (default: $TTRACE_DIR, else /dev/shm/ttrace-<uid>).
        device: Option<PathBuf>,
        /// Stop after this many events.
        #[arg(long)]
        limit: Option<u64>,
        /// Milliseconds between polls.
        #[arg(long, default_value_t = 20)]
        interval_ms: u64,
    },
    /// Show or change what is recorded: `setmask <value> <mask>`, `setbits <bits>`,
    /// `clrbits <bits>`, `enable <wildcard>`, `disable <wildcard>`, `reset`.
    Ctl {
        /// `[DEVICE] [COMMAND ARGS...]`; with no command, prints the current control state.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        words: Vec<String>,
    },
    /// Per-CPU entries, lost and incomplete counts, time span, aux use, tracepoints.
    Stats {
        /// The device directory (default: $TTRACE_DIR, else /dev/shm/ttrace-<uid>).
        device: Option<PathBuf>,
    },
}

const CTL_COMMANDS: [&str; 6] = [
    "setmask", "setbits", "clrbits", "enable", "disable", "reset",
];

fn device_dir(device: Option<PathBuf>) -> Result<PathBuf, String> {
    let dir = device.unwrap_or_else(ttrace_core::default_dir);
    if dir.is_dir() {
        Ok(dir)
    } else {
        Err(format!("no ttrace device at {}", dir.display()))
    }
}

fn follow(dev: &Device, limit: Option<u64>, interval: std::time::Duration) -> std::io::Result<()> {
    let mut follower = ttrace_reader::follow::Follower::new(dev);
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "# following {} (lost entries are reported as they are found)",
        dev.dir().display()
    )?;
    out.flush()?;
    let (mut printed, mut lost_reported) = (0u64, vec![0u64; dev.num_rings()]);
    let mut line = String::new();
    loop {
        let trace = follower.poll();
        let pieces = trace.pieces();
        for item in &trace.items {
            if limit.is_some_and(|l| printed >= l) {
                break;
            }
            line.clear();
            trace.format_item(&pieces, item, &mut line);
            out.write_all(line.as_bytes())?;
            printed += 1;
        }
        for (cpu, (&lost, reported)) in follower.lost.iter().zip(&mut lost_reported).enumerate() {
            if lost > *reported {
                writeln!(
                    out,
                    "# cpu{cpu}: {} entries lost (overwritten before they were read)",
                    lost - *reported
                )?;
                *reported = lost;
            }
        }
        out.flush()?;
        if limit.is_some_and(|l| printed >= l) {
            return Ok(());
        }
        std::thread::sleep(interval);
    }
}

fn stats(trace: &Trace, dev: &Device) -> String {
    let mut s = trace.header_line() + "\n";
    for (cpu, r) in trace.rings.iter().enumerate() {
        s += &format!(
            "cpu{cpu}: {} entries, {} lost, {} incomplete, {} dropped, {} positions\n",
            r.committed,
            r.lost + r.changed,
            r.claimed,
            r.dropped,
            r.head
        );
    }
    if let (Some(first), Some(last)) = (trace.items.first(), trace.items.last()) {
        s += &format!(
            "time: {:.9} .. {:.9} s\n",
            trace.seconds(first.timestamp()),
            trace.seconds(last.timestamp())
        );
    }
    let h = dev.header();
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    s += &format!(
        "aux: {} of {} bytes in use, {} records kept, {} incomplete, {} written, {} truncated, {} dropped\n",
        trace.aux.last - trace.aux.first,
        trace.aux_bytes,
        trace.aux.records.len(),
        trace.aux.incomplete,
        load(&h.aux_records),
        load(&h.aux_truncated),
        load(&h.aux_dropped),
    );
    s += &format!("tracepoints: {} defined\n", trace.meta.tracepoints.len());
    for t in &trace.meta.tracepoints {
        let on = if dev.tracepoint_enabled(t.id) {
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
    s
}

fn print(trace: &Trace) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    writeln!(out, "{}", trace.header_line())?;
    trace.write_lines(&mut out)?;
    for l in trace.footer_lines() {
        writeln!(out, "{l}")?;
    }
    out.flush()
}

fn run(cli: Cli) -> Result<(), String> {
    let trace = match cli.command {
        Command::Demo {
            threads,
            requests,
            device,
            forever,
        } => {
            let tmp = tempfile::Builder::new()
                .prefix("ttrace-demo-")
                .tempdir()
                .map_err(|e| e.to_string())?;
            let dir = device.unwrap_or_else(|| tmp.path().join("dev"));
            let cfg = Config {
                ring_slots: 4096,
                ..Config::at(dir)
            };
            let dev = ttrace_core::init(&cfg).map_err(|e| e.to_string())?;
            loop {
                ttrace_reader::demo::run(dev, threads, requests);
                if !forever {
                    break;
                }
            }
            Trace::capture(dev)
        }
        Command::Dump { device } => {
            let dev = Device::attach_read_only(&device_dir(device)?).map_err(|e| e.to_string())?;
            Trace::capture(&dev)
        }
        Command::Follow {
            device,
            limit,
            interval_ms,
        } => {
            let dev = Device::attach_read_only(&device_dir(device)?).map_err(|e| e.to_string())?;
            return quiet_pipe(follow(
                &dev,
                limit,
                std::time::Duration::from_millis(interval_ms),
            ));
        }
        Command::Stats { device } => {
            let dev = Device::attach_read_only(&device_dir(device)?).map_err(|e| e.to_string())?;
            let text = stats(&Trace::capture(&dev), &dev);
            return quiet_pipe(std::io::stdout().lock().write_all(text.as_bytes()));
        }
        Command::Ctl { mut words } => {
            let device = match words.first() {
                Some(w) if !CTL_COMMANDS.contains(&w.as_str()) => {
                    Some(PathBuf::from(words.remove(0)))
                }
                _ => None,
            };
            let dir = device_dir(device)?;
            let dev = if words.is_empty() {
                Device::attach_read_only(&dir)
            } else {
                Device::attach(&dir)
            }
            .map_err(|e| e.to_string())?;
            if !words.is_empty() {
                dev.apply_text(&words.join(" "))
                    .map_err(|e| e.to_string())?;
            }
            return quiet_pipe(
                std::io::stdout()
                    .lock()
                    .write_all(dev.control_text().as_bytes()),
            );
        }
    };
    quiet_pipe(print(&trace))
}

/// Output to a closed pipe (`| head`) ends quietly.
fn quiet_pipe(r: std::io::Result<()>) -> Result<(), String> {
    match r {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.to_string()),
        _ => Ok(()),
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ttrace-reader: {e}");
            ExitCode::FAILURE
        }
    }
}
