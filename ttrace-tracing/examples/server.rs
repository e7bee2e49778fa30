//! A small program instrumented with `tracing` only, recording into ttrace through the layer:
//! `cargo run --release -p ttrace-tracing --example server [-- DEVICE-DIR [REQUESTS]]`, then
//! `ttrace-reader dump DEVICE-DIR` (default: `$TTRACE_DIR`, else `/dev/shm/ttrace-<uid>`).

use tracing::{debug, info, info_span, instrument, warn};
use tracing_subscriber::prelude::*;

#[derive(Debug)]
struct Request {
    id: u64,
    path: &'static str,
}

#[instrument(skip(req), fields(id = req.id))]
fn handle(req: &Request) -> u64 {
    let bytes = read(req.path, req.id * 512);
    if bytes > 2048 {
        warn!(bytes, limit = 2048u64, "large response");
    }
    bytes
}

#[instrument]
fn read(path: &str, size: u64) -> u64 {
    debug!(
        path,
        size,
        ratio = size as f64 / 4096.0,
        cached = size < 1024,
        "read"
    );
    size
}

fn main() {
    let mut args = std::env::args().skip(1);
    if let Some(dir) = args.next() {
        ttrace_core::init(&ttrace_core::Config::at(dir)).expect("device");
    }
    let requests: u64 = args.next().and_then(|n| n.parse().ok()).unwrap_or(8);
    tracing_subscriber::registry()
        .with(ttrace_tracing::layer())
        .init();
    let workers: Vec<_> = (0..2u64)
        .map(|w| {
            std::thread::Builder::new()
                .name(format!("worker-{w}"))
                .spawn(move || {
                    let _worker = info_span!("worker", w).entered();
                    for i in 0..requests {
                        let req = Request {
                            id: w * 1000 + i,
                            path: "/srv/data.bin",
                        };
                        let bytes = handle(&req);
                        info!(id = req.id, bytes, delta = -(i as i64), req = ?req, "request done");
                    }
                })
                .expect("spawn")
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
}
