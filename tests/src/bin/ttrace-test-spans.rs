//! A small tokio program instrumented with `tracing` only, through `ttrace_tracing`'s
//! subscriber, for the export tests: `ttrace-test-spans <requests>` records on the device
//! `TTRACE_DIR` what a service's tracing shows: on a two-worker runtime, each request an
//! instrumented async call (a span with a field recorded late, polled more than once, an
//! event at DEBUG inside), and a `batch` span that follows from every fourth request while it
//! is alive.

use tracing::{debug, info_span, instrument, Instrument};

#[instrument(fields(status))]
async fn request(id: u64) -> u64 {
    tokio::task::yield_now().await;
    debug!(id, "handled");
    tokio::task::yield_now().await;
    tracing::Span::current().record("status", 200 + id % 3);
    id * 2
}

fn main() {
    let requests: u64 = match std::env::args().nth(1).map(|n| n.parse()) {
        Some(Ok(n)) => n,
        _ => {
            eprintln!("usage: ttrace-test-spans <requests>");
            std::process::exit(2);
        }
    };
    if let Err(e) = tracing::subscriber::set_global_default(ttrace_tracing::subscriber()) {
        eprintln!("ttrace-test-spans: {e}");
        std::process::exit(1);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("worker")
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let batch = info_span!("batch", requests);
        let mut tasks = Vec::new();
        for id in 0..requests {
            let span = info_span!("call", id);
            if id % 4 == 0 {
                batch.follows_from(&span);
            }
            tasks.push(tokio::spawn(request(id).instrument(span)));
        }
        let mut sum = 0;
        for t in tasks {
            sum += t.await.expect("a request");
        }
        async { debug!(sum, "done") }.instrument(batch).await;
    });
}
