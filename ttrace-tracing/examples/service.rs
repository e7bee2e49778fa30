//! A small tokio key-value service instrumented with `tracing` only (`#[instrument]` async
//! handlers, `debug!` events), and the load that drives it, in one process:
//!
//! ```text
//! cargo run --release -p ttrace-tracing --example service -- [--mode MODE] [--requests N]
//!     [--clients C] [--dir DEVICE]
//! cargo run --release -p ttrace-tracing --example service -- --compare [--rounds R]
//! ```
//!
//! The server runs on one thread (a current-thread runtime: the "one worker" of a service
//! measured alone); `C` clients (default 50) on a runtime of their own send `N` commands
//! (default 200,000; `GET key` or `SET key value`) over loopback TCP, each waiting for its
//! reply. It prints the server thread's CPU time per command and the commands per second.
//!
//! `MODE` is the subscriber: `none`, `registry` (a bare `tracing_subscriber::registry()`),
//! `fmt` (the registry with `fmt`'s layer writing to `io::sink`, at DEBUG), `ttrace` (the
//! registry with `ttrace_tracing::layer()`, at DEBUG), `ttrace-subscriber`
//! (`ttrace_tracing::subscriber()`, ttrace's own, at DEBUG), `ttrace-off` (the layer, every
//! level turned off with `ctl level off` before the load), `ttrace-sched` (the layer, and the
//! server thread's context switches recorded: `TTRACE_SCHED=1`). With `ttrace`, the device is `DEVICE`
//! (default: a temporary one), so that `ttrace-reader report DEVICE` shows each command
//! end to end: `request` spans inside `connection` spans, their lifetimes, busy and idle
//! times. `--compare` runs every mode `R` times (default 5), alternately, each in a process
//! of its own, and prints the medians.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tracing::{debug, instrument, warn};
use tracing_subscriber::prelude::*;

type Db = Arc<Mutex<HashMap<String, String>>>;

/// A parsed command.
#[derive(Debug)]
enum Command<'a> {
    Get(&'a str),
    Set(&'a str, &'a str),
}

/// Serves one connection: a command per line, a reply per command.
#[instrument(skip_all, fields(conn = id))]
async fn connection(socket: TcpStream, id: u64, db: Db) {
    let (read, mut write) = socket.into_split();
    let mut lines = BufReader::new(read).lines();
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                warn!(error = %e, "read failed");
                break;
            }
        };
        let reply = request(&db, &line).await;
        if let Err(e) = write.write_all(reply.as_bytes()).await {
            warn!(error = %e, "write failed");
            break;
        }
    }
    debug!("closed");
}

/// One command: parsed, applied, answered.
#[instrument(skip_all, fields(len = line.len()))]
async fn request(db: &Db, line: &str) -> String {
    let Some(cmd) = parse(line) else {
        warn!(line, "bad command");
        return "ERR\n".into();
    };
    debug!(?cmd, "parsed");
    match cmd {
        Command::Get(key) => get(db, key).await,
        Command::Set(key, value) => set(db, key, value).await,
    }
}

fn parse(line: &str) -> Option<Command<'_>> {
    let mut words = line.split(' ');
    match (words.next()?, words.next(), words.next()) {
        ("GET", Some(k), None) => Some(Command::Get(k)),
        ("SET", Some(k), Some(v)) => Some(Command::Set(k, v)),
        _ => None,
    }
}

#[instrument(skip(db))]
async fn get(db: &Db, key: &str) -> String {
    let found = db.lock().unwrap().get(key).cloned();
    debug!(hit = found.is_some(), "looked up");
    match found {
        Some(v) => format!("{v}\n"),
        None => "NIL\n".into(),
    }
}

#[instrument(skip(db, value), fields(bytes = value.len()))]
async fn set(db: &Db, key: &str, value: &str) -> String {
    db.lock().unwrap().insert(key.into(), value.into());
    "OK\n".into()
}

/// The server thread's CPU time.
fn thread_cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// One client: `n` commands on one connection, each waiting for its reply.
async fn client(addr: std::net::SocketAddr, c: u64, n: u64) {
    let socket = TcpStream::connect(addr).await.expect("connect");
    socket.set_nodelay(true).expect("nodelay");
    let (read, mut write) = socket.into_split();
    let mut replies = BufReader::new(read).lines();
    for i in 0..n {
        let key = (c * 7 + i) % 100;
        let line = if i % 2 == 0 {
            format!("SET k{key} value-{c}-{i}\n")
        } else {
            format!("GET k{key}\n")
        };
        write.write_all(line.as_bytes()).await.expect("send");
        replies.next_line().await.expect("reply").expect("a reply");
    }
}

/// Runs the service and the load: the server thread's CPU time and the wall time.
fn run(requests: u64, clients: u64) -> (Duration, Duration) {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = std::thread::Builder::new()
        .name("server".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("server runtime");
            rt.block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
                let db: Db = Arc::default();
                ready_tx
                    .send((listener.local_addr().expect("addr"), thread_cpu()))
                    .expect("ready");
                let accept = async {
                    for id in 0.. {
                        let (socket, _) = listener.accept().await.expect("accept");
                        socket.set_nodelay(true).expect("nodelay");
                        tokio::spawn(connection(socket, id, db.clone()));
                    }
                };
                tokio::select! {
                    _ = accept => {}
                    _ = stop_rx => {}
                }
                thread_cpu()
            })
        })
        .expect("server thread");
    let (addr, cpu0) = ready_rx.recv().expect("server ready");
    let start = Instant::now();
    let load = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("client runtime");
    load.block_on(async {
        let each = requests / clients;
        let tasks: Vec<_> = (0..clients)
            .map(|c| tokio::spawn(client(addr, c, each)))
            .collect();
        for t in tasks {
            t.await.expect("client");
        }
    });
    let wall = start.elapsed();
    stop_tx.send(()).expect("stop");
    let cpu1 = server.join().expect("server");
    (cpu1 - cpu0, wall)
}

const MODES: [&str; 7] = [
    "none",
    "registry",
    "fmt",
    "ttrace",
    "ttrace-subscriber",
    "ttrace-off",
    "ttrace-sched",
];

/// Installs the subscriber of `mode` (see the module's documentation).
fn install(mode: &str, dir: Option<&str>) -> Option<tempfile::TempDir> {
    use tracing_subscriber::filter::LevelFilter;
    let mut tmp = None;
    let mut ttrace = |switches: bool| {
        let dir = match dir {
            Some(d) => d.into(),
            None => tmp
                .insert(tempfile::tempdir().expect("tempdir"))
                .path()
                .join("dev"),
        };
        // Sized as the environment says (`TTRACE_BUFFER=256m` keeps more history).
        let config = ttrace_core::Config::from_env().expect("TTRACE_ settings");
        ttrace_core::init(&ttrace_core::Config {
            dir: Some(dir),
            switches: switches || config.switches,
            ..config
        })
        .expect("device");
        ttrace_tracing::layer().with_max_level(LevelFilter::DEBUG)
    };
    match mode {
        "none" => {}
        "registry" => tracing_subscriber::registry().init(),
        "fmt" => tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::sink)
                    .with_filter(LevelFilter::DEBUG),
            )
            .init(),
        "ttrace" => tracing_subscriber::registry().with(ttrace(false)).init(),
        "ttrace-sched" => tracing_subscriber::registry().with(ttrace(true)).init(),
        "ttrace-subscriber" => {
            let _ = ttrace(false);
            tracing::subscriber::set_global_default(
                ttrace_tracing::subscriber().with_max_level(LevelFilter::DEBUG),
            )
            .expect("global subscriber");
        }
        "ttrace-off" => {
            let layer = ttrace(false);
            let w = ttrace_core::device().expect("device");
            w.device().apply_text("level off").expect("ctl");
            tracing_subscriber::registry().with(layer).init();
            ttrace_tracing::sync_interest();
        }
        other => {
            eprintln!("service: no mode {other:?} (one of {})", MODES.join(", "));
            std::process::exit(2);
        }
    }
    tmp
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map(String::as_str)
    };
    let number = |name: &str, default: u64| {
        value(name).map_or(default, |v| {
            v.parse().unwrap_or_else(|_| {
                eprintln!("service: {name} takes a number, not {v:?}");
                std::process::exit(2)
            })
        })
    };
    let (requests, clients) = (number("--requests", 200_000), number("--clients", 50));
    if args.iter().any(|a| a == "--compare") {
        return compare(requests, clients, number("--rounds", 5));
    }
    let mode = value("--mode").unwrap_or("ttrace");
    let _tmp = install(mode, value("--dir"));
    let (cpu, wall) = run(requests, clients);
    println!(
        "{mode}: {requests} commands from {clients} clients: server CPU {:.2} us/command, {:.0} commands/s",
        cpu.as_secs_f64() * 1e6 / requests as f64,
        requests as f64 / wall.as_secs_f64()
    );
}

/// Runs every mode `rounds` times, alternately, each in a process of its own; prints the
/// medians.
fn compare(requests: u64, clients: u64, rounds: u64) {
    let exe = std::env::current_exe().expect("own path");
    let mut results: HashMap<&str, Vec<(f64, f64)>> = HashMap::new();
    for _ in 0..rounds {
        for mode in MODES {
            let out = std::process::Command::new(&exe)
                .args(["--mode", mode, "--requests", &requests.to_string()])
                .args(["--clients", &clients.to_string()])
                .output()
                .expect("run a mode");
            let text = String::from_utf8_lossy(&out.stdout);
            let figure = |after: &str, before: &str| -> f64 {
                text.split(after)
                    .nth(1)
                    .and_then(|t| t.split(before).next())
                    .and_then(|t| t.trim().parse().ok())
                    .unwrap_or_else(|| {
                        panic!("{mode}: {text}{}", String::from_utf8_lossy(&out.stderr))
                    })
            };
            results.entry(mode).or_default().push((
                figure("server CPU ", "us/"),
                figure("us/command, ", "commands/s"),
            ));
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let none = median(results["none"].iter().map(|r| r.0).collect());
    println!("{requests} commands from {clients} clients, median of {rounds} runs each:");
    println!(
        "{:>17} {:>14} {:>10} {:>12}",
        "mode", "server us/cmd", "vs none", "commands/s"
    );
    for mode in MODES {
        let cpu = median(results[mode].iter().map(|r| r.0).collect());
        let rate = median(results[mode].iter().map(|r| r.1).collect());
        println!("{mode:>17} {cpu:>14.2} {:>+10.2} {rate:>12.0}", cpu - none);
    }
}
