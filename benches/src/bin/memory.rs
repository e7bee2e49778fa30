//! What reading a full device costs in memory: a device of `--cpus` restartable rings of
//! `--slots` slots (default 16 x 1,048,576), every ring full of a mix of 5-word events,
//! 12-word events (a continuation each), events with a string and messages, every aux buffer
//! (`--aux` bytes, default 16 MiB) full; then each reader command, run as a fresh process,
//! with its peak resident memory (`ru_maxrss`) and its time, next to the bytes the device
//! holds.
//!
//! `cargo run --release -p ttrace-benches --bin memory [-- --cpus N --slots N --aux BYTES
//! --also PATH]` (the device is made in `/dev/shm` where there is one; it takes the rings and
//! aux of every CPU, about 1.3 GB at the default size). `--also PATH` measures another
//! `ttrace-reader` binary on the same device too (an older build, to compare).

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::Instant;

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    // `memory --reader ARGS...`: one reader command, in this fresh process.
    if args.get(1).is_some_and(|a| a == "--reader") {
        let mut cli = vec![OsString::from("ttrace-reader")];
        cli.extend(args[2..].iter().cloned());
        return ttrace_reader::cli::main_with(cli);
    }
    let number = |name: &str, default: u64| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map(|v| {
                let v = v.to_string_lossy();
                let (digits, shift) = match v.strip_suffix(['m', 'M']) {
                    Some(d) => (d.to_string(), 20),
                    None => (v.to_string(), 0),
                };
                digits.parse::<u64>().expect("a number") << shift
            })
            .unwrap_or(default)
    };
    let cpus = number("--cpus", 16) as u32;
    let slots = number("--slots", 1 << 20);
    let aux = number("--aux", 16 << 20);
    // `memory --fill DIR ...`: makes the device, in this fresh process, and prints the bytes
    // in use. A process's peak memory is that of its parent's too when the parent spawned it
    // by `vfork` (the child starts in the parent's memory): the readers must be spawned by a
    // process that never held the device.
    if let Some(i) = args.iter().position(|a| a == "--fill") {
        let dir = Path::new(&args[i + 1]);
        let (rings, aux) = ttrace_benches::full::fill(dir, cpus, slots, aux);
        println!("{rings} {aux}");
        return ExitCode::SUCCESS;
    }
    // `--keep DIR`: the device is made there and left (for trying the reader on it).
    let keep = args
        .iter()
        .position(|a| a == "--keep")
        .and_then(|i| args.get(i + 1))
        .map(std::path::PathBuf::from);
    let base = Path::new("/dev/shm");
    let tmp = if base.is_dir() {
        tempfile::tempdir_in(base)
    } else {
        tempfile::tempdir()
    }
    .expect("a temporary directory");
    let dir = keep.clone().unwrap_or_else(|| tmp.path().join("dev"));
    let started = Instant::now();
    let exe = std::env::current_exe().expect("this program's path");
    let filled = Command::new(&exe)
        .arg("--fill")
        .arg(&dir)
        .args(["--cpus", &cpus.to_string(), "--slots", &slots.to_string()])
        .args(["--aux", &aux.to_string()])
        .output()
        .expect("the filling process");
    assert!(filled.status.success(), "filling: {filled:?}");
    let numbers: Vec<u64> = String::from_utf8_lossy(&filled.stdout)
        .split_whitespace()
        .map(|n| n.parse().expect("a number"))
        .collect();
    let in_use = (numbers[0], numbers[1]);
    println!(
        "device: {cpus} cpus x {slots} slots, aux {} MiB per ring; rings in use {:.1} MiB, aux in use {:.1} MiB, together {:.1} MiB (filled in {:.1} s)",
        aux >> 20,
        in_use.0 as f64 / (1 << 20) as f64,
        in_use.1 as f64 / (1 << 20) as f64,
        (in_use.0 + in_use.1) as f64 / (1 << 20) as f64,
        started.elapsed().as_secs_f64()
    );
    let out = tempfile::tempdir().expect("an output directory");
    let o = |name: &str| out.path().join(name).to_string_lossy().into_owned();
    let d = dir.to_string_lossy().into_owned();
    let commands: Vec<(&str, Vec<String>)> = vec![
        ("stats", vec!["stats".into(), d.clone()]),
        ("dump", vec!["dump".into(), d.clone()]),
        ("report", vec!["report".into(), d.clone()]),
        (
            "export chrome",
            vec![
                "export".into(),
                d.clone(),
                "--format".into(),
                "chrome".into(),
                "-o".into(),
                "/dev/null".into(),
            ],
        ),
        (
            "export ctf",
            vec![
                "export".into(),
                d.clone(),
                "--format".into(),
                "ctf".into(),
                "-o".into(),
                o("ctf"),
            ],
        ),
        (
            "export uftrace",
            vec![
                "export".into(),
                d.clone(),
                "--format".into(),
                "uftrace".into(),
                "-o".into(),
                o("uftrace"),
            ],
        ),
        (
            "snapshot",
            vec!["snapshot".into(), d.clone(), "-o".into(), o("s.ttrace")],
        ),
    ];
    let total = (in_use.0 + in_use.1) as f64;
    // `--also PATH`: another `ttrace-reader` binary (an older build), measured on the same
    // device after this build's.
    let also: Vec<String> = args
        .windows(2)
        .filter(|w| w[0] == "--also")
        .map(|w| w[1].to_string_lossy().into_owned())
        .collect();
    let readers = std::iter::once(("this build".to_string(), None)).chain(
        also.iter()
            .map(|p| (p.clone(), Some(std::path::PathBuf::from(p)))),
    );
    for (reader, binary) in readers {
        println!(
            "{:<16} {:>10} {:>10} {:>8}  ({reader})",
            "command", "peak RSS", "x in use", "seconds"
        );
        for (name, args) in &commands {
            let started = Instant::now();
            let mut cmd = match &binary {
                None => {
                    let mut c = Command::new(&exe);
                    c.arg("--reader");
                    c
                }
                Some(b) => Command::new(b),
            };
            let mut child = cmd
                .args(args)
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("the reader");
            let (status, rss) = wait_rss(child.id());
            let _ = child.try_wait();
            let secs = started.elapsed().as_secs_f64();
            if status != 0 {
                println!("{name:<16} failed (status {status:#x})");
                continue;
            }
            println!(
                "{name:<16} {:>7.1} MB {:>9.2}x {secs:>8.2}",
                rss as f64 / 1e6,
                rss as f64 / total,
            );
            let _ = std::fs::remove_dir_all(out.path().join("ctf"));
            let _ = std::fs::remove_dir_all(out.path().join("uftrace"));
            let _ = std::fs::remove_file(out.path().join("s.ttrace"));
        }
    }
    ExitCode::SUCCESS
}

/// Waits for the child `pid`: its wait status and its peak resident memory in bytes.
fn wait_rss(pid: u32) -> (i32, u64) {
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it and `status` for our child.
    let mut usage: libc::rusage = unsafe { core::mem::zeroed() };
    // SAFETY: `pid` is our child; both pointers are valid for writes.
    let rc = unsafe { libc::wait4(pid as i32, &mut status, 0, &mut usage) };
    assert_eq!(rc, pid as i32, "wait4: {}", std::io::Error::last_os_error());
    (status, usage.ru_maxrss as u64 * 1024)
}
