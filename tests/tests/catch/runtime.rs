//! The runtime's view (`ttrace_tracing::runtime`): a tokio runtime's workers are named as
//! they start and their parks and unparks recorded; with context switches recorded
//! (`TTRACE_SCHED=1`), a worker parked with nothing to run shows, inside its park, the kernel's
//! switch out that says it blocked.

use ttrace_tests::cli::Cli;
use ttrace_tests::reader;

/// The events of the worker threads in `dump`'s lines: `(tid, name, arguments)`.
fn worker_events(dump: &str) -> Vec<(u32, String, String)> {
    dump.lines()
        .filter(|l| l.contains("(ttrace-test-wor)"))
        .map(|l| {
            let mut words = l.split_whitespace();
            let thread = words.nth(2).unwrap();
            let tid = thread.split_once('/').unwrap().1.parse().unwrap();
            let event = words.nth(1).unwrap();
            let (name, args) = event.split_once('(').unwrap();
            let rest: Vec<&str> = words.collect();
            let args = [args, &rest.join(" ")].join(" ");
            (
                tid,
                name.to_string(),
                args.trim().trim_end_matches(')').to_string(),
            )
        })
        .collect()
}

#[test]
fn workers_are_named_and_their_parks_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = tmp.path().join("dev");
    Cli::new(env!("CARGO_BIN_EXE_ttrace-test-runtime"))
        .env("TTRACE_DIR", &dev)
        .env("TTRACE_BUFFER", "4m")
        .succeeds();
    let events = worker_events(&reader!("dump", &dev).ok());
    let parks = events.iter().filter(|e| e.1 == "tokio_worker_park").count();
    let unparks = events
        .iter()
        .filter(|e| e.1 == "tokio_worker_unpark")
        .count();
    // Each worker parks with nothing to run; a parked one is woken for the task, or by the
    // shutdown.
    assert!(parks >= 1 && unparks >= 1, "{events:?}");
    assert!(
        events.iter().all(|e| e.1.starts_with("tokio_worker_")),
        "nothing else: {events:?}"
    );
}

#[test]
#[ignore = "needs perf_event_open of its own threads: sysctl -w kernel.perf_event_paranoid=2"]
fn a_parked_worker_shows_the_kernels_blocked_switch_inside_its_park() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = tmp.path().join("dev");
    let ran = Cli::new(env!("CARGO_BIN_EXE_ttrace-test-runtime"))
        .arg("blocked")
        .env("TTRACE_DIR", &dev)
        .env("TTRACE_BUFFER", "4m")
        .env("TTRACE_SCHED", "1")
        .succeeds();
    let tids: Vec<u32> = ran.stdout.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(tids.len(), 2, "{}", ran.stdout);
    let dump = reader!("dump", &dev).ok();
    assert!(
        dump.lines()
            .next()
            .unwrap()
            .contains("switches: recorded for 2 threads"),
        "{dump}"
    );
    let events = worker_events(&dump);
    for tid in tids {
        let mine: Vec<&(u32, String, String)> = events.iter().filter(|e| e.0 == tid).collect();
        // Some park of this worker holds a blocked switch out before its unpark (or the end).
        let blocked_in_park = mine.iter().enumerate().any(|(k, e)| {
            e.1 == "tokio_worker_park"
                && mine[k + 1..]
                    .iter()
                    .take_while(|e| e.1 != "tokio_worker_unpark")
                    .any(|e| e.1 == "sched_out" && e.2.starts_with("preempted=0"))
        });
        assert!(blocked_in_park, "worker {tid}: {mine:?}");
    }
}
