//! A request loop with one slow request, for the snapshot tests:
//! `ttrace-test-requests <device-dir> <trigger|panic|rules|none> [requests]`.
//!
//! Two threads serve `requests` requests between them (default 1,000,000), each an
//! entry/exit pair `request(id)` around about a microsecond of work, so that each thread
//! writes about a million events a second and laps a default ring every ~16 ms. The request
//! in the middle (`id = requests / 2`, on the first thread) takes 20 ms instead, busy, by the
//! device's clock (so that the trace measures at least 20 ms). Then:
//!
//! - `trigger`: the thread that served a request sees it took over 15 ms and calls
//!   `ttrace_snapshots::trigger("slow request <id>")`, as a service would (a request a
//!   preemption made slow triggers too); the program settles its snapshots before it
//!   exits;
//! - `panic`: with the panic hook installed, the thread that served the slow request
//!   panics right after it;
//! - `rules`: it applies the snapshot rules installed in the device with `ttrace-reader ctl
//!   on RULE` (`ttrace_snapshots::apply_snapshot_rules`; the test installs `latency request >
//!   15ms`); `settle_snapshots` at the end waits until the rules have seen every event;
//! - `none`: nothing (a watcher outside is to catch it).
//!
//! It prints `slow <id>` for each request over 15 ms, and `done` at the end. With
//! `TTRACE_TEST_HOLD=1`, once its device is open and its tracepoints registered it prints
//! `ready` and waits for a byte on its standard input before its first request.
//!
//! With `TTRACE_TEST_NICE=N` the two request threads run at nice `N`: on a machine with two
//! CPUs they would otherwise leave none to a follower of the device (a watcher, or the
//! program's rules thread), which needs about 150 ns of CPU per event to keep up
//! (`docs/BENCHMARKS.md`, *Catching the slow request*).

use std::time::{Duration, Instant};
use ttrace_core::{point, tracepoint};

tracepoint!(static REQUEST_IN: Entry = "request", "id={id}");
tracepoint!(static REQUEST_OUT: Exit = "request_done", "id={id}");

/// About a microsecond of work, by the clock (so that a debug build runs at the rate of a
/// release one).
fn work(id: u64, start: Instant) -> u64 {
    let mut x = id;
    while start.elapsed() < Duration::from_micros(1) {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
    x
}

/// The CPUs this process may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set, which sched_getaffinity fills.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
        set
    };
    // SAFETY: CPU_ISSET reads inside the set.
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (dir, mode, requests) = match args.as_slice() {
        [_, dir, mode] => (dir.clone(), mode.clone(), 1_000_000u64),
        [_, dir, mode, n] => (dir.clone(), mode.clone(), n.parse().expect("requests")),
        _ => {
            eprintln!(
                "usage: ttrace-test-requests <device-dir> <trigger|panic|rules|none> [requests]"
            );
            std::process::exit(2);
        }
    };
    if !["trigger", "panic", "rules", "none"].contains(&mode.as_str()) {
        eprintln!("ttrace-test-requests: mode {mode:?} is not trigger, panic, rules or none");
        std::process::exit(2);
    }
    // The device at `dir`, sized as the environment says (`TTRACE_RING_SLOTS`...).
    let config = ttrace_core::Config {
        dir: Some(dir.into()),
        ..ttrace_core::Config::from_env().expect("the environment's settings")
    };
    let dev = ttrace_core::init(&config).expect("device");
    let clock = dev.device().reader().version().clock;
    if mode == "panic" {
        // Twice, as a library and the program it is linked into may both do: one panic
        // still makes one snapshot (the test counts them).
        ttrace_snapshots::install_panic_hook();
        ttrace_snapshots::install_panic_hook();
    }
    if mode == "rules" {
        ttrace_snapshots::apply_snapshot_rules().expect("snapshot rules applied");
    }
    if std::env::var_os("TTRACE_TEST_HOLD").is_some() {
        // Registered without an event, so that a watcher waiting for them can start; then
        // held until the test has seen it start.
        use ttrace_core::ArgType::Unsigned;
        REQUEST_IN.register(&[Unsigned]);
        REQUEST_OUT.register(&[Unsigned]);
        println!("ready");
        use std::io::{Read, Write};
        std::io::stdout().flush().expect("stdout");
        std::io::stdin().read_exact(&mut [0u8; 1]).expect("stdin");
    }
    let slow = requests / 2;
    // Each thread on a CPU of its own, as a service's workers often are: a CPU's ring then
    // holds that thread's events alone, and the slow request's entry stays in it for as
    // long as its thread writes fewer than a ring of events after it (the other thread
    // laps its own ring meanwhile).
    let cpus = allowed_cpus();
    assert!(
        cpus.len() >= 2,
        "ttrace-test-requests needs two CPUs, has {cpus:?}"
    );
    let nice: Option<i32> = std::env::var("TTRACE_TEST_NICE")
        .ok()
        .map(|n| n.parse().expect("TTRACE_TEST_NICE: a number"));
    let serve = |first: u64| {
        ttrace_reader::demo::pin(cpus[first as usize % 2]);
        if let Some(n) = nice {
            // SAFETY: setpriority on the calling thread (its tid), with no pointers.
            let tid = unsafe { libc::gettid() };
            // SAFETY: as above.
            let set = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, n) };
            assert_eq!(set, 0, "setpriority: {}", std::io::Error::last_os_error());
        }
        let mut sink = 0;
        let mut id = first;
        while id < requests {
            let start = Instant::now();
            point!(REQUEST_IN, id);
            if id == slow {
                // 20 ms by the device's own clock and conversion, counted from a read made
                // after the entry point took its stamp, on this thread's one CPU: the traced
                // request lasts at least 20 ms whatever preempts this thread (a wait counted
                // from `start`, read before the entry point, can end less than 20 ms after
                // the entry's stamp).
                let from = dev.now();
                while clock.ticks_to_ns(dev.now().saturating_sub(from)) < 20_000_000 {
                    sink ^= work(id, Instant::now());
                }
            } else {
                sink ^= work(id, start);
            }
            point!(REQUEST_OUT, id);
            if start.elapsed() > Duration::from_millis(15) {
                println!("slow {id}");
                match mode.as_str() {
                    "trigger" => {
                        ttrace_snapshots::trigger(&format!("slow request {id}"));
                    }
                    "panic" if id == slow => panic!("request {id} took over 15 ms"),
                    _ => {}
                }
            }
            id += 2;
        }
        std::hint::black_box(sink);
    };
    std::thread::scope(|s| {
        let first = s.spawn(|| serve(slow % 2));
        let second = s.spawn(|| serve(1 - slow % 2));
        let (first, second) = (first.join(), second.join());
        if let Err(e) = first.and(second) {
            std::panic::resume_unwind(e);
        }
    });
    ttrace_snapshots::settle_snapshots();
    println!("done");
}
