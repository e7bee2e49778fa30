//! What `dump` shows of a busy ring: a writer pinned to CPU 0 records 5-word events at a
//! given rate into its CPU's ring (16,384 slots, the default size) while `ttrace-reader dump`
//! runs again and again on CPU 1, each time as a fresh process; per dump, how many of the
//! ring's slots it shows as events of that ring. The ring is lapped all along: a reader that
//! copied it in no time would show all of it.
//!
//! `cargo run --release -p ttrace-benches --bin busy [-- --rate 5e6 --dumps 20 --reader
//! PATH ...]`: each `--reader` is another `ttrace-reader` binary to run against the same
//! writer (an older build, to compare); this build's is always measured.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::time::Instant;
use ttrace_core::{Config, Kind, Writer};

/// Slots of the ring (the default device's).
const SLOTS: u64 = 16_384;

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    // `busy --reader-here ARGS...`: this build's reader, in this fresh process.
    if args.get(1).is_some_and(|a| a == "--reader-here") {
        let mut cli = vec![OsString::from("ttrace-reader")];
        cli.extend(args[2..].iter().cloned());
        return ttrace_reader::cli::main_with(cli);
    }
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map(|v| v.to_string_lossy().into_owned())
    };
    let rate: f64 = value("--rate").map_or(5e6, |v| v.parse().expect("--rate: a number"));
    let dumps: usize = value("--dumps").map_or(20, |v| v.parse().expect("--dumps: a number"));
    let others: Vec<String> = args
        .windows(2)
        .filter(|w| w[0] == "--reader")
        .map(|w| w[1].to_string_lossy().into_owned())
        .collect();

    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = tmp.path().join("dev");
    let w = Writer::open(&Config {
        ring_slots: SLOTS,
        cpus: Some(2),
        ..Config::at(&dir)
    })
    .expect("the device");
    let word = w
        .device()
        .register_tracepoint(&ttrace_core::Definition::untyped(
            "busy",
            Kind::Start,
            1,
            "a={a} b={b} c={c} d={d} e={e}",
        ))
        .expect("a tracepoint")
        .1;
    let stop = AtomicBool::new(false);
    let exe = std::env::current_exe().expect("this program's path");
    let readers: Vec<(String, Vec<OsString>)> = std::iter::once((
        "this build".to_string(),
        vec![exe.into_os_string(), "--reader-here".into()],
    ))
    .chain(others.iter().map(|p| (p.clone(), vec![OsString::from(p)])))
    .collect();
    println!(
        "dump of a {SLOTS}-slot ring written at {:.1} M events/s (5-word events), {dumps} dumps per reader",
        rate / 1e6
    );
    println!(
        "{:<40} {:>12} {:>8} {:>8} {:>8}  achieved rate",
        "reader", "slots shown", "min", "median", "max"
    );
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            ttrace_benches::pin(0);
            let start = Instant::now();
            let mut n = 0u64;
            while !stop.load(Relaxed) {
                if (n as f64) < start.elapsed().as_secs_f64() * rate {
                    for i in 0..64 {
                        w.emit(word, 1 << 32 | 2, &[n + i, 1, 2, 3, 4]);
                    }
                    n += 64;
                } else {
                    std::hint::spin_loop();
                }
            }
            n as f64 / start.elapsed().as_secs_f64()
        });
        ttrace_benches::pin(1);
        // Lapped a few times before the first dump.
        while w.device().mapping().ring(0).reader().head() < 4 * SLOTS {
            std::hint::spin_loop();
        }
        for (name, cmd) in &readers {
            let mut footers: Vec<(u64, String)> =
                (0..dumps).map(|_| dump_cpu0(cmd, &dir)).collect();
            footers.sort_unstable();
            let shown: Vec<u64> = footers.iter().map(|f| f.0).collect();
            let pct = |n: u64| format!("{:.1}%", n as f64 * 100.0 / SLOTS as f64);
            println!(
                "{name:<40} {:>12} {:>8} {:>8} {:>8}",
                format!("of {SLOTS}"),
                pct(shown[0]),
                pct(shown[dumps / 2]),
                pct(shown[dumps - 1]),
            );
            println!("  the median dump's footer: {}", footers[dumps / 2].1);
        }
        stop.store(true, Relaxed);
        let achieved = writer.join().expect("the writer");
        println!("writer: {:.2} M events/s", achieved / 1e6);
    });
    ExitCode::SUCCESS
}

/// Runs `cmd dump DIR` and returns how many events of `cpu0` its footer says it shows, and
/// that footer line.
fn dump_cpu0(cmd: &[OsString], dir: &Path) -> (u64, String) {
    let out = Command::new(&cmd[0])
        .args(&cmd[1..])
        .arg("dump")
        .arg(dir)
        .output()
        .expect("the reader");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let footer = text
        .lines()
        .find(|l| l.starts_with("# cpu0: "))
        .unwrap_or_else(|| panic!("{cmd:?}: no cpu0 footer"));
    let shown = footer["# cpu0: ".len()..]
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{cmd:?}: {footer}"));
    (shown, footer.to_string())
}
