//! What the device holds after a run, read from `dump`: each request's polls, the task
//! (`runtime.spawn` instance) it ran in, the wakes of that task, and the kernel's switches
//! of its worker inside its polls; without the kernel's view (not asked for, or refused by
//! a seccomp filter), no switch, the refusal said, and the wakes as before.

use crate::program::{self, Event, Sched, EACH};
use std::collections::HashMap;

/// Tokio's task span, as readers name it.
const TASK: &str = "tokio::task::runtime.spawn";

/// One request: its span instance, its polls and the task it ran in.
#[derive(Debug)]
struct Request {
    id: u64,
    /// `(tid, enter, exit)` of each poll, in order (the re-entry `tracing` makes as the
    /// future is dropped included: it comes last, and is brief).
    polls: Vec<(u32, f64, f64)>,
    /// The `runtime.spawn` instance entered on its thread around its first poll.
    task: Option<u64>,
}

/// The requests of span `name` in `events` (sorted by time).
fn requests(events: &[Event], name: &str) -> Vec<Request> {
    let mut out: Vec<Request> = Vec::new();
    let mut open: HashMap<(u32, u64), f64> = HashMap::new();
    // The task instances each thread is inside, innermost last.
    let mut tasks: HashMap<u32, Vec<u64>> = HashMap::new();
    for e in events {
        let Some(id) = e.span() else { continue };
        if e.name == TASK {
            let stack = tasks.entry(e.tid).or_default();
            match e.step.as_str() {
                "enter" => stack.push(id),
                "exit" => stack.retain(|&t| t != id),
                _ => {}
            }
            continue;
        }
        if e.name != name {
            continue;
        }
        match e.step.as_str() {
            "new" => out.push(Request {
                id,
                polls: Vec::new(),
                task: None,
            }),
            "enter" => {
                open.insert((e.tid, id), e.at);
                let task = tasks.get(&e.tid).and_then(|s| s.last().copied());
                if let Some(r) = out.iter_mut().find(|r| r.id == id) {
                    r.task = r.task.or(task);
                }
            }
            "exit" => {
                let enter = open.remove(&(e.tid, id)).expect("an exit after its enter");
                if let Some(r) = out.iter_mut().find(|r| r.id == id) {
                    r.polls.push((e.tid, enter, e.at));
                }
            }
            _ => {}
        }
    }
    out
}

/// Seconds thread `tid` spent switched out inside `[from, to]`, by whether it was
/// preempted: `(preempted, blocked)`, and how many switches out of each kind.
fn off_cpu(events: &[Event], tid: u32, from: f64, to: f64) -> ((f64, usize), (f64, usize)) {
    let (mut preempted, mut blocked) = ((0.0, 0), (0.0, 0));
    let mut out: Option<(f64, bool)> = None;
    for e in events
        .iter()
        .filter(|e| e.tid == tid && e.at >= from && e.at <= to)
    {
        match e.name.as_str() {
            "sched_out" => out = Some((e.at, e.arg("preempted") == Some("1"))),
            "sched_in" => {
                if let Some((at, p)) = out.take() {
                    let part = if p { &mut preempted } else { &mut blocked };
                    part.0 += e.at - at;
                    part.1 += 1;
                }
            }
            _ => {}
        }
    }
    (preempted, blocked)
}

/// The wakes in `events`: `(time, waking thread's name, woken task)`.
fn wakes(events: &[Event]) -> Vec<(f64, String, u64)> {
    events
        .iter()
        .filter(|e| e.name == ttrace_layouts::device::WAKE_NAME)
        .map(|e| {
            let span = e.arg("span").expect("a wake names a span");
            let hex = span
                .strip_prefix("0x")
                .expect("a span id in hex, as span steps show it");
            let span = u64::from_str_radix(hex, 16).expect("a span id");
            (e.at, e.thread.clone(), span)
        })
        .collect()
}

/// The device's events, sorted by time (the switches are stamped when they happened, and
/// written later).
fn sorted(dev: &std::path::Path) -> (String, Vec<Event>) {
    let (header, mut events) = program::events(dev);
    events.sort_by(|a, b| a.at.total_cmp(&b.at));
    (header, events)
}

/// Each request of `kind` ran in a task, and the task of each of its polls after the first
/// was woken between that poll and the one before: the wake, and the poll it led to.
fn woken(events: &[Event], kind: &str) -> Vec<((f64, String, u64), f64)> {
    let all = wakes(events);
    let requests = requests(events, &program::span_of(kind));
    assert_eq!(requests.len(), EACH as usize, "{kind}: {requests:?}");
    let mut out = Vec::new();
    for r in &requests {
        let task = r
            .task
            .unwrap_or_else(|| panic!("{kind}: no task around {r:?}"));
        // Its first poll waits (a timer, a channel); the one after it ends it.
        assert!(r.polls.len() >= 2, "{kind}: {r:?}");
        let (_, _, waited) = r.polls[0];
        let (_, resumed, _) = r.polls[1];
        let wake = all
            .iter()
            .find(|w| w.2 == task && w.0 >= waited && w.0 <= resumed)
            .unwrap_or_else(|| panic!("{kind}: no wake of task {task:#x} for {r:?}"));
        out.push((wake.clone(), resumed));
    }
    out
}

#[test]
#[ignore = "needs perf_event_open (kernel.perf_event_paranoid <= 2) and a second build with --cfg tokio_unstable: cargo test -- --ignored"]
fn the_device_holds_each_kinds_wakes_and_switches() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = program::run(tmp.path(), Sched::On);
    let (header, events) = sorted(&dev);
    assert!(
        header.contains("switches: recorded for") && !header.contains("recorded for 0 threads"),
        "{header}"
    );

    // Every wake names an instance of tokio's task span.
    let tasks: Vec<u64> = events
        .iter()
        .filter(|e| e.name == TASK && e.step == "new")
        .filter_map(Event::span)
        .collect();
    let all = wakes(&events);
    assert!(!all.is_empty());
    for w in &all {
        assert!(tasks.contains(&w.2), "a wake of no task: {w:?}");
    }

    // Blocked: the sleep is a switch out that blocked, 20 ms off the CPU, in the poll.
    for r in requests(&events, &program::span_of("blocking")) {
        let (tid, enter, exit) = r.polls[0];
        let (_, (blocked, outs)) = off_cpu(&events, tid, enter, exit);
        assert!(
            outs >= 1 && blocked >= 0.015,
            "blocking {r:?}: {blocked}s blocked"
        );
    }
    // Preempted: switched out while runnable, for longer than it ran (5 ms of CPU beside
    // three busy threads on its CPU).
    for r in requests(&events, &program::span_of("contended")) {
        let (tid, enter, exit) = r.polls[0];
        let ((preempted, outs), _) = off_cpu(&events, tid, enter, exit);
        assert!(
            outs >= 1 && preempted > 0.005,
            "contended {r:?}: {preempted}s preempted"
        );
    }
    // Idle: woken by the timer, on a worker.
    for (wake, _) in woken(&events, "idle") {
        assert!(wake.1.starts_with("why-worker"), "{wake:?}");
    }
    // Scheduled: woken by the plain thread, polled 20 ms later (after the other task's poll).
    for (wake, resumed) in woken(&events, "queued") {
        assert_eq!(wake.1, "why-helper", "{wake:?}");
        assert!(resumed - wake.0 >= 0.018, "{wake:?} polled at {resumed}");
    }
    // What each kind's polls hold, for the record (`--nocapture`).
    for kind in ["blocking", "contended", "idle", "queued"] {
        let (mut p, mut b) = ((0.0, 0), (0.0, 0));
        for r in requests(&events, &program::span_of(kind)) {
            for &(tid, enter, exit) in &r.polls {
                let (rp, rb) = off_cpu(&events, tid, enter, exit);
                (p.0, p.1, b.0, b.1) = (p.0 + rp.0, p.1 + rp.1, b.0 + rb.0, b.1 + rb.1);
            }
        }
        let w = all.iter().filter(|w| {
            requests(&events, &program::span_of(kind))
                .iter()
                .any(|r| r.task == Some(w.2))
        });
        eprintln!(
            "{kind}: {} wakes; in its polls {} switches out preempted ({:.1} ms), {} blocked ({:.1} ms)",
            w.count(),
            p.1,
            p.0 * 1e3,
            b.1,
            b.0 * 1e3
        );
    }
    eprintln!(
        "{} wakes; {} sched_out preempted, {} blocked",
        all.len(),
        events
            .iter()
            .filter(|e| e.name == "sched_out" && e.arg("preempted") == Some("1"))
            .count(),
        events
            .iter()
            .filter(|e| e.name == "sched_out" && e.arg("preempted") == Some("0"))
            .count(),
    );
}

#[test]
#[ignore = "needs perf_event_open (kernel.perf_event_paranoid <= 2) and a second build with --cfg tokio_unstable: cargo test -- --ignored"]
fn without_the_kernels_view_the_wakes_are_still_recorded() {
    for (sched, says) in [
        (Sched::Off, None),
        (Sched::Refused, Some("perf_event_open refused (EACCES)")),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dev = program::run(tmp.path(), sched);
        let (header, events) = sorted(&dev);
        assert!(
            !header.contains("switches: recorded for"),
            "{sched:?}: {header}"
        );
        if let Some(says) = says {
            assert!(header.contains(says), "{sched:?}: {header}");
        }
        assert!(
            !events.iter().any(|e| e.name.starts_with("sched_")),
            "{sched:?}: no switch recorded"
        );
        for (wake, _) in woken(&events, "idle") {
            assert!(wake.1.starts_with("why-worker"), "{sched:?}: {wake:?}");
        }
        for (wake, resumed) in woken(&events, "queued") {
            assert_eq!(wake.1, "why-helper", "{sched:?}: {wake:?}");
            assert!(
                resumed - wake.0 >= 0.018,
                "{sched:?}: {wake:?} polled at {resumed}"
            );
        }
    }
}
