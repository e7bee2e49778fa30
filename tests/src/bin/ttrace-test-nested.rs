//! A program instrumented with `tracing` only, through `ttrace_tracing`'s subscriber, whose
//! spans nest and carry fields, for the tests of `report --slowest`, `--by` a field, and
//! `dump --spans`. It records on the device `TTRACE_DIR`:
//!
//! - `ttrace-test-nested requests <n> <slow>`: on a two-worker tokio runtime, `n` requests,
//!   each a `request` span (`method="GET"`, `uri="/work/<id>"`, and `status` recorded when it
//!   is answered) around an `#[instrument]`ed `work(id)` (a `working` event at DEBUG inside,
//!   polled more than once); request `<slow>`'s work waits 30 ms on a timer.
//! - `ttrace-test-nested threads`: threads `left` and `right`, each in its own `request`
//!   (uri `/left`, `/right`) and, inside it, `work` (id 1, 2), both inside at once (a
//!   barrier): each records `before`, its request records `status=200`, each records
//!   `after`, and, out of every span, `outside`.
//!
//! It prints `done` at the end.

use std::sync::{Arc, Barrier};
use tracing::{debug, info, info_span, instrument, Instrument};

#[instrument(skip(slow))]
async fn work(id: u64, slow: u64) -> u64 {
    tokio::task::yield_now().await;
    debug!(id, "working");
    if id == slow {
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    }
    tokio::task::yield_now().await;
    id * 2
}

fn requests(n: u64, slow: u64) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("worker")
        .enable_time()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let tasks: Vec<_> = (0..n)
            .map(|id| {
                let uri = format!("/work/{id}");
                let span = info_span!(
                    "request",
                    method = "GET",
                    uri = %uri,
                    status = tracing::field::Empty
                );
                tokio::spawn(
                    async move {
                        let x = work(id, slow).await;
                        tracing::Span::current().record("status", 200u64);
                        x
                    }
                    .instrument(span),
                )
            })
            .collect();
        for t in tasks {
            t.await.expect("a request");
        }
    });
}

fn threads() {
    let both = Arc::new(Barrier::new(2));
    let run = |name: &'static str, id: u64| {
        let both = Arc::clone(&both);
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let request = info_span!(
                    "request",
                    method = "GET",
                    uri = %format!("/{name}"),
                    status = tracing::field::Empty
                );
                request.in_scope(|| {
                    info_span!("work", id).in_scope(|| {
                        // Both threads are in their spans from here to the second wait.
                        both.wait();
                        info!(name: "before", id, "before");
                        request.record("status", 200u64);
                        info!(name: "after", id, "after");
                        both.wait();
                    })
                });
                info!(name: "outside", id, "outside");
            })
            .expect("a thread")
    };
    let (left, right) = (run("left", 1), run("right", 2));
    left.join().expect("left");
    right.join().expect("right");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = || -> ! {
        eprintln!("usage: ttrace-test-nested requests <n> <slow> | threads");
        std::process::exit(2)
    };
    if let Err(e) = tracing::subscriber::set_global_default(ttrace_tracing::subscriber()) {
        eprintln!("ttrace-test-nested: {e}");
        std::process::exit(1);
    }
    match args.get(1).map(String::as_str) {
        Some("requests") => {
            let (Some(Ok(n)), Some(Ok(slow))) = (
                args.get(2).map(|a| a.parse()),
                args.get(3).map(|a| a.parse()),
            ) else {
                usage()
            };
            requests(n, slow);
        }
        Some("threads") => threads(),
        _ => usage(),
    }
    println!("done");
}
