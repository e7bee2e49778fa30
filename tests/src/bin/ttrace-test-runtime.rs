//! A tokio runtime with ttrace's hooks, for the runtime tests: `ttrace-test-runtime [mode]`
//! records on the device `TTRACE_DIR`.
//! - no mode: the runtime built through `ttrace_tracing::runtime::instrument`: its two
//!   workers start (named at once), park with nothing to run, one is woken to run a task the
//!   main thread spawns, and the runtime shuts down, waking them all;
//! - `blocked`: the hooks composed with the program's own (`on_start`, `on_park`,
//!   `on_unpark`); the main thread waits until each worker has parked and the kernel shows it
//!   sleeping (a worker with nothing to run sleeps only in its park: it blocked there), then
//!   shuts the runtime down. Prints each worker's tid.

use std::collections::BTreeSet;
use std::sync::Mutex;

/// Worker tids, as they start.
static TIDS: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());
/// Workers that parked.
static PARKED: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

/// The calling thread's tid.
fn tid() -> u32 {
    // SAFETY: gettid has no memory effects.
    unsafe { libc::gettid() as u32 }
}

/// Whether the kernel shows the thread `tid` sleeping (state `S`: blocked).
fn sleeping(tid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.starts_with('S')))
        .unwrap_or(false)
}

fn main() {
    let blocked = match std::env::args().nth(1).as_deref() {
        None => false,
        Some("blocked") => true,
        Some(m) => {
            eprintln!("ttrace-test-runtime: no mode {m}");
            std::process::exit(2);
        }
    };
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(2).thread_name("ttrace-test-worker");
    if blocked {
        builder
            .on_thread_start(|| {
                ttrace_tracing::runtime::on_start();
                TIDS.lock().unwrap().insert(tid());
            })
            .on_thread_park(|| {
                ttrace_tracing::runtime::on_park();
                PARKED.lock().unwrap().insert(tid());
            })
            .on_thread_unpark(ttrace_tracing::runtime::on_unpark);
    } else {
        ttrace_tracing::runtime::instrument(&mut builder);
    }
    let runtime = match builder.build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ttrace-test-runtime: {e}");
            std::process::exit(1);
        }
    };
    if blocked {
        // Each worker parked, then sleeps: blocked in its park.
        loop {
            let tids = TIDS.lock().unwrap().clone();
            let parked = PARKED.lock().unwrap().clone();
            if tids.len() == 2 && tids == parked && tids.iter().all(|&t| sleeping(t)) {
                break;
            }
            std::thread::yield_now();
        }
        for t in TIDS.lock().unwrap().iter() {
            println!("{t}");
        }
    } else {
        let ran = runtime.block_on(async { tokio::spawn(async { 7 }).await });
        assert_eq!(ran.ok(), Some(7));
    }
    drop(runtime);
}
