//! Context switches from the kernel (`ttrace_core::switches`), recorded as events on the
//! thread they happened to: a traced thread that sleeps shows a switch out (blocked) and
//! back in around each sleep; one that shares its CPU with a busy thread shows a switch out
//! (preempted). Both by construction: a sleep blocks, and the kernel's own count of the
//! thread's involuntary switches says when a preemption happened.

use std::time::Duration;
use ttrace_core::{point, switches, tracepoint, Config};

tracepoint!(static MARK: Start = "t_mark", "n={n}");

/// The kernel's count of the calling thread's involuntary switches (preemptions).
fn preemptions() -> u64 {
    std::fs::read_to_string("/proc/thread-self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("nonvoluntary_ctxt_switches:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Pins the calling thread to `cpu`.
fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET writes within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0
        );
    }
}

/// The CPU the calling thread runs on.
fn this_cpu() -> usize {
    // SAFETY: no memory effects.
    unsafe { libc::sched_getcpu() as usize }
}

#[test]
#[ignore = "needs perf_event_open of its own threads: sysctl -w kernel.perf_event_paranoid=2"]
fn a_sleep_is_blocked_and_a_busy_neighbour_preempts() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = Config {
        ring_slots: 4096,
        cpus: Some(2),
        calibration: Duration::from_millis(2),
        switches: true,
        ..Config::at(tmp.path().join("dev"))
    };
    let dev = ttrace_core::init(&cfg).unwrap();
    const SLEEPS: usize = 3;
    const SLEEP: Duration = Duration::from_millis(5);
    let ctx = std::thread::spawn(move || {
        point!(MARK, 0); // names the thread: from here on it is observed
        assert!(
            matches!(
                switches::status(),
                switches::Status::On { threads: 1.., .. }
            ),
            "{:?}",
            switches::status()
        );
        for n in 1..=SLEEPS {
            std::thread::sleep(SLEEP);
            point!(MARK, n);
        }
        // A busy thread on this thread's CPU: the kernel must preempt one for the other.
        let cpu = this_cpu();
        pin(cpu);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let busy = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                pin(cpu);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        };
        let before = preemptions();
        while preemptions() == before {
            std::hint::spin_loop();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        busy.join().unwrap();
        ttrace_core::thread_context(ttrace_core::device().unwrap())
    })
    .join()
    .unwrap();
    switches::flush(); // the thread exited: its last records are drained, its buffer closed

    let mut events: Vec<_> = (0..dev.device().mapping().num_rings())
        .flat_map(|r| dev.device().mapping().ring(r).reader().snapshot().events)
        .filter(|e| e.ctx == ctx)
        .collect();
    events.sort_by_key(|e| e.stamp);
    let meta = dev.device().reader().metadata();
    let name = |e: &devttrace::Event| {
        meta.tracepoints[e.type_word.tracepoint() as usize]
            .name
            .clone()
    };
    // (name, preempted, at) of each switch, in time order; every one stamped when it happened.
    let switches: Vec<(String, u64, u64)> = events
        .iter()
        .filter(|e| name(e).starts_with("sched_"))
        .map(|e| {
            let a = e.args();
            match name(e).as_str() {
                "sched_out" => {
                    assert_eq!(a[1], e.stamp, "a switch is stamped when it happened");
                    ("sched_out".to_string(), a[0], a[1])
                }
                "sched_in" => {
                    assert_eq!(a[0], e.stamp, "a switch is stamped when it happened");
                    ("sched_in".to_string(), 0, a[0])
                }
                other => panic!("{other}: no record was lost, no thread unobserved"),
            }
        })
        .collect();
    // The first an in, recorded as the thread was observed (it was running: from then on
    // its switches are known); then out and in alternate.
    for (k, s) in switches.iter().enumerate() {
        let want = if k % 2 == 0 { "sched_in" } else { "sched_out" };
        assert_eq!(s.0, want, "{switches:?}");
    }
    // Each sleep: a blocked switch out, and the thread back at least the sleep later.
    let hz = dev.device().mapping().header().tsc_hz;
    let sleep_ticks = (SLEEP.as_nanos() as u64 * hz / 1_000_000_000) * 99 / 100;
    let blocked_sleeps = switches[1..]
        .chunks(2)
        .filter(|p| p.len() == 2 && p[0].1 == 0 && p[1].2 - p[0].2 >= sleep_ticks)
        .count();
    assert!(blocked_sleeps >= SLEEPS, "{blocked_sleeps}: {switches:?}");
    // Each sleep lies between two marks: its switch out follows the mark before it.
    let marks: Vec<u64> = events
        .iter()
        .filter(|e| name(e) == "t_mark")
        .map(|e| e.stamp)
        .collect();
    assert_eq!(marks.len(), SLEEPS + 1);
    for w in marks.windows(2) {
        assert!(
            switches
                .iter()
                .any(|s| s.0 == "sched_out" && s.1 == 0 && w[0] < s.2 && s.2 < w[1]),
            "no blocked switch between the marks {w:?}: {switches:?}"
        );
    }
    // The busy neighbour preempted it.
    assert!(
        switches.iter().any(|s| s.0 == "sched_out" && s.1 == 1),
        "{switches:?}"
    );
    let st = dev.device().reader().status().switches;
    assert_eq!((st.threads, st.refused, st.unobserved), (1, 0, 0), "{st:?}");
}
