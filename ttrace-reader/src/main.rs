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
    },
    /// Print the whole trace of a device as text, one line per event.
    Dump {
        /// The device directory (default: $TTRACE_DIR, else /dev/shm/ttrace-<uid>).
        device: Option<PathBuf>,
    },
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
        Command::Demo { threads, requests } => {
            let tmp = tempfile::Builder::new()
                .prefix("ttrace-demo-")
                .tempdir()
                .map_err(|e| e.to_string())?;
            let cfg = Config {
                ring_slots: 4096,
                ..Config::at(tmp.path().join("dev"))
            };
            let dev = ttrace_core::init(&cfg).map_err(|e| e.to_string())?;
            ttrace_reader::demo::run(dev, threads, requests);
            Trace::capture(dev)
        }
        Command::Dump { device } => {
            let dir = device.unwrap_or_else(ttrace_core::default_dir);
            if !dir.is_dir() {
                return Err(format!("no ttrace device at {}", dir.display()));
            }
            let dev = Device::attach_read_only(&dir).map_err(|e| e.to_string())?;
            Trace::capture(&dev)
        }
    };
    match print(&trace) {
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
