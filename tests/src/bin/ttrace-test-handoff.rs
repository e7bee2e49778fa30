//! A `tracing` program whose instrumented futures are polled on two threads, for the test
//! that every reader means the same by the events (`tests/tests/export/meaning.rs`). It
//! records on the device `TTRACE_DIR`, through `ttrace_tracing`'s subscriber:
//!
//! `ttrace-test-handoff <n>`: thread `first` runs a current-thread tokio runtime that polls
//! each of `n` `job` futures (`#[instrument]`ed, a `job` span with an `id` field) once, to
//! their first yield, and hands them, still pending, through a channel to thread `second`,
//! whose own current-thread runtime polls them to the end and drops them: each job's span
//! is polled once on each thread, then entered once more on `second` when it is dropped
//! (the drop re-entry), then closed. The hand-over is the channel and the join: no timing.
//!
//! It prints `done` at the end.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use tracing::instrument;

#[instrument]
async fn job(id: u64) -> u64 {
    tokio::task::yield_now().await;
    tracing::info!(id, "resumed");
    id * 2
}

type Job = Pin<Box<dyn Future<Output = u64> + Send>>;

fn main() {
    let n: u64 = match std::env::args().nth(1).map(|a| a.parse()) {
        Some(Ok(n)) => n,
        _ => {
            eprintln!("usage: ttrace-test-handoff <n>");
            std::process::exit(2)
        }
    };
    if let Err(e) = tracing::subscriber::set_global_default(ttrace_tracing::subscriber()) {
        eprintln!("ttrace-test-handoff: {e}");
        std::process::exit(1);
    }
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
    };
    let (tx, rx) = std::sync::mpsc::channel::<Job>();
    let first = std::thread::Builder::new()
        .name("first".into())
        .spawn(move || {
            let rt = runtime();
            for id in 0..n {
                let mut f: Job = Box::pin(job(id));
                // One poll: the job yields, and is pending.
                let pending = rt.block_on(std::future::poll_fn(|cx| {
                    Poll::Ready(f.as_mut().poll(cx).is_pending())
                }));
                assert!(pending, "job {id} finished in one poll");
                tx.send(f).expect("second is receiving");
            }
        })
        .expect("thread first");
    first.join().expect("first ran");
    let second = std::thread::Builder::new()
        .name("second".into())
        .spawn(move || {
            let rt = runtime();
            for (id, f) in rx.into_iter().enumerate() {
                assert_eq!(rt.block_on(f), id as u64 * 2);
            }
        })
        .expect("thread second");
    second.join().expect("second ran");
    println!("done");
}
