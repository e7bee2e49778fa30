//! An HTTP service of the kind ttrace's users run, for the tests of a real program:
//! `ttrace-test-service <device-dir> <trigger|rules|none> <requests> <log-file>`.
//!
//! An axum router behind tower-http's `TraceLayer` (a `request` span per request, with its
//! method and uri, and the events it logs when a request starts and ends), whose handler
//! calls an `#[instrument]`ed `work(id)`: a little computation, and for one request in
//! [`SLOW_EVERY`] (`id % SLOW_EVERY == SLOW_EVERY / 2`) a 30 ms wait on a timer. `tracing`
//! goes to ttrace (`ttrace_tracing::layer()`) and to a `fmt` layer writing to `<log-file>`,
//! as a service logs beside its flight recorder. The device is `<device-dir>`, sized by the
//! environment (by default: the default sizes).
//!
//! Clients on loopback (keep-alive connections, each sending its next request once the last
//! is answered) send `requests` requests with ids `0..requests`. Each request over 20 ms
//! prints `slow <id>`; then, by mode:
//!
//! - `trigger`: the handler calls `ttrace_snapshots::trigger("slow request <id>")`, as a service
//!   that notices a slow request would;
//! - `rules`: the program applies the snapshot rules installed in the device
//!   (`ttrace_snapshots::apply_snapshot_rules`);
//! - `none`: nothing (a watcher outside is to catch it).
//!
//! It prints `done` at the end, after its snapshots are settled. With `TTRACE_TEST_HOLD=1`,
//! once the service has answered one request (id `u64::MAX`, so that every callsite has
//! registered its tracepoints) it prints `ready` and waits for a byte on its standard input.

use axum::extract::Path;
use axum::routing::get;
use axum::Router;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tower_http::trace::{DefaultMakeSpan, DefaultOnRequest, DefaultOnResponse, TraceLayer};
use tracing::{info, instrument, Level};
use tracing_subscriber::prelude::*;

/// One request in this many is slow.
const SLOW_EVERY: u64 = 5000;

/// Client connections, each with one request in flight.
const CLIENTS: u64 = 8;

/// Whether request `id` is one of the slow ones.
fn slow(id: u64) -> bool {
    id != u64::MAX && id % SLOW_EVERY == SLOW_EVERY / 2
}

/// The request's work: about a microsecond of computation, and for a slow request a 30 ms
/// wait on a timer.
#[instrument]
async fn work(id: u64) -> u64 {
    let mut x = id | 1;
    for _ in 0..200 {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
    if slow(id) {
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    info!(result = x % 1000, "work done");
    x
}

async fn handler(Path(id): Path<u64>, mode: Arc<String>) -> String {
    let start = Instant::now();
    let x = work(id).await;
    if start.elapsed() > Duration::from_millis(20) {
        println!("slow {id}");
        if *mode == "trigger" {
            ttrace_snapshots::trigger(&format!("slow request {id}"));
        }
    }
    format!("{x}\n")
}

/// Sends `GET /work/<id>` for each id of `ids` on one keep-alive connection to `port`, each
/// once the last is answered.
async fn client(port: u16, ids: impl Iterator<Item = u64>) {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    let mut line = String::new();
    for id in ids {
        let request = format!("GET /work/{id} HTTP/1.1\r\nHost: service\r\n\r\n");
        write.write_all(request.as_bytes()).await.expect("send");
        let mut length = 0usize;
        loop {
            line.clear();
            read.read_line(&mut line).await.expect("a response");
            assert!(!line.is_empty(), "the service closed the connection");
            if line == "\r\n" {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().expect("a length");
            }
        }
        let mut body = vec![0u8; length];
        read.read_exact(&mut body).await.expect("a body");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, mode, requests, log] = args.as_slice() else {
        eprintln!(
            "usage: ttrace-test-service <device-dir> <trigger|rules|none> <requests> <log-file>"
        );
        std::process::exit(2);
    };
    if !["trigger", "rules", "none"].contains(&mode.as_str()) {
        eprintln!("ttrace-test-service: mode {mode:?} is not trigger, rules or none");
        std::process::exit(2);
    }
    let requests: u64 = requests.parse().expect("requests");
    let config = ttrace_core::Config {
        dir: Some(dir.into()),
        ..ttrace_core::Config::from_env().expect("the environment's settings")
    };
    ttrace_core::init(&config).expect("device");
    let log = std::fs::File::create(log).expect("the log file");
    tracing_subscriber::registry()
        .with(ttrace_tracing::layer())
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(log)),
        )
        .init();
    if mode == "rules" {
        ttrace_snapshots::apply_snapshot_rules().expect("snapshot rules applied");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let mode = Arc::new(mode.clone());
        let app = Router::new()
            .route("/work/{id}", get(move |id| handler(id, Arc::clone(&mode))))
            .layer(
                TraceLayer::new_for_http()
                    .make_span_with(DefaultMakeSpan::new().level(Level::INFO))
                    .on_request(DefaultOnRequest::new().level(Level::INFO))
                    .on_response(DefaultOnResponse::new().level(Level::INFO)),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let port = listener.local_addr().expect("its address").port();
        info!(port, "listening");
        tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
        if std::env::var_os("TTRACE_TEST_HOLD").is_some() {
            client(port, std::iter::once(u64::MAX)).await;
            println!("ready");
            std::io::stdout().flush().expect("stdout");
            tokio::task::spawn_blocking(|| std::io::stdin().read_exact(&mut [0u8; 1]))
                .await
                .expect("a thread")
                .expect("stdin");
        }
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| tokio::spawn(client(port, (c..requests).step_by(CLIENTS as usize))))
            .collect();
        for c in clients {
            c.await.expect("a client");
        }
    });
    ttrace_snapshots::settle_snapshots();
    println!("done");
}
