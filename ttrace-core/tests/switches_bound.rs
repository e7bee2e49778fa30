//! The bound on observed threads (`TTRACE_SCHED_THREADS`): beyond it a thread's switches are
//! not recorded, and it says so (a `sched_unobserved` event on it, the header's count); a
//! thread that exits hands its place back.

use std::time::Duration;
use ttrace_core::{point, switches, tracepoint, Config};

tracepoint!(static MARK: Start = "t_mark", "n={n}");

#[test]
#[ignore = "needs perf_event_open of its own threads: sysctl -w kernel.perf_event_paranoid=2"]
fn threads_beyond_the_bound_are_said_unobserved_and_an_exit_frees_a_place() {
    // Before the writer starts, in this test's own process: the bound is read once.
    std::env::set_var(switches::ENV_SCHED_THREADS, "2");
    let tmp = tempfile::tempdir().unwrap();
    let cfg = Config {
        ring_slots: 1024,
        cpus: Some(2),
        calibration: Duration::from_millis(2),
        switches: true,
        ..Config::at(tmp.path().join("dev"))
    };
    let dev = ttrace_core::init(&cfg).unwrap();
    assert_eq!(switches::limit(), 2);
    // Two threads observed and kept alive; two more beyond the bound.
    let (hold, release) = std::sync::mpsc::channel::<()>();
    let release = std::sync::Arc::new(std::sync::Mutex::new(release));
    let (named, observed) = std::sync::mpsc::channel();
    let kept: Vec<_> = (0..2)
        .map(|n| {
            let (release, named) = (release.clone(), named.clone());
            std::thread::spawn(move || {
                point!(MARK, n);
                named
                    .send(ttrace_core::thread_context(ttrace_core::device().unwrap()))
                    .unwrap();
                let _ = release.lock().unwrap().recv();
            })
        })
        .collect();
    let kept_ctx: Vec<u64> = (0..2).map(|_| observed.recv().unwrap()).collect();
    assert_eq!(
        switches::status(),
        switches::Status::On {
            threads: 2,
            limit: 2
        }
    );
    let beyond: Vec<u64> = (2..4)
        .map(|n| {
            std::thread::spawn(move || {
                point!(MARK, n);
                ttrace_core::thread_context(ttrace_core::device().unwrap())
            })
            .join()
            .unwrap()
        })
        .collect();
    // The kept threads exit: their places are free again.
    drop(hold);
    for k in kept {
        k.join().unwrap();
    }
    assert_eq!(
        switches::status(),
        switches::Status::On {
            threads: 0,
            limit: 2
        }
    );
    let later = std::thread::spawn(|| {
        point!(MARK, 9);
        ttrace_core::thread_context(ttrace_core::device().unwrap())
    })
    .join()
    .unwrap();
    switches::flush();

    let events: Vec<_> = (0..dev.device().mapping().num_rings())
        .flat_map(|r| dev.device().mapping().ring(r).reader().snapshot().events)
        .collect();
    let meta = dev.device().reader().metadata();
    let unobserved: Vec<u64> = events
        .iter()
        .filter(|e| meta.tracepoints[e.type_word.tracepoint() as usize].name == "sched_unobserved")
        .map(|e| e.ctx)
        .collect();
    assert_eq!(unobserved.len(), 2, "one each beyond the bound");
    assert!(beyond.iter().all(|c| unobserved.contains(c)));
    assert!(!unobserved
        .iter()
        .any(|c| kept_ctx.contains(c) || *c == later));
    let st = dev.device().reader().status().switches;
    assert_eq!((st.threads, st.unobserved), (3, 2), "{st:?}");
}
