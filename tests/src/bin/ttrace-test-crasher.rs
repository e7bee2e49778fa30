//! A writer for the crash test: `ttrace-test-crasher <device-dir> <progress-file> <incarnation>
//! <entries> <kill-after-us>`.
//!
//! Records `entries` self-checking events (every eighth with an aux string) in a tight loop,
//! publishing in the progress file, after each event is recorded, how many are: so the test
//! knows which events were complete. If `kill-after-us` is not 0, a timer started with the
//! loop interrupts it after that many microseconds, wherever it is — in the middle of an
//! entry, holding the aux lock, between events — and the process dies there by SIGKILL.
//! Otherwise it reports its slowest trace point and waits for its stdin to close.

use std::io::Read;
use std::sync::atomic::Ordering::*;
use ttrace_core::{point, tracepoint};
use ttrace_tests::{mix, Progress};

tracepoint!(static WORDS: Start = "crash_words", "inc={inc} seq={seq} a={a} b={b} c={c}");
tracepoint!(static STRING: Start = "crash_string", "inc={inc} seq={seq} s={s:s}");

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, progress, inc, entries, kill_after] = args.as_slice() else {
        eprintln!(
            "usage: ttrace-test-crasher <device-dir> <progress-file> <incarnation> <entries> <kill-after-us>"
        );
        std::process::exit(2);
    };
    let (inc, entries): (u64, u64) = (inc.parse().expect("inc"), entries.parse().expect("entries"));
    let kill_after: i64 = kill_after.parse().expect("kill-after-us");
    let progress = Progress::open(progress.as_ref()).expect("progress file");
    if let Err(e) = ttrace_core::init(&ttrace_core::Config::at(dir)) {
        eprintln!("ttrace-test-crasher: {e}");
        std::process::exit(1);
    }
    // Registers the tracepoints and the thread before the timer starts.
    point!(WORDS, inc, u64::MAX, 0u64, 0u64, 0u64);
    if kill_after > 0 {
        arm_kill(kill_after);
    }
    let mut slowest = 0u64;
    for seq in 0..entries {
        let t = std::time::Instant::now();
        if seq % 8 == 0 {
            progress.state.store(Progress::IN_AUX, Release);
            point!(
                STRING,
                inc,
                seq,
                ttrace_tests::crash_string(inc, seq).as_str()
            );
        } else {
            point!(
                WORDS,
                inc,
                seq,
                mix(inc, seq, 0),
                mix(inc, seq, 1),
                mix(inc, seq, 2)
            );
        }
        progress.state.store(Progress::RUNNING, Release);
        slowest = slowest.max(t.elapsed().as_nanos() as u64);
        // Release: the event is recorded before the count that says so.
        progress.done.store(seq + 1, Release);
    }
    progress.slowest_ns.store(slowest, Release);
    progress.state.store(Progress::FINISHED, Release);
    // Wait, without spinning, until the test lets go.
    let _ = std::io::stdin().read(&mut [0u8; 1]);
}

/// Dies by SIGKILL wherever the process is when the alarm comes.
extern "C" fn die(_: libc::c_int) {
    // SAFETY: raise is async-signal-safe.
    unsafe { libc::raise(libc::SIGKILL) };
}

/// Arms a one-shot timer that kills the process after `us` microseconds.
fn arm_kill(us: i64) {
    // SAFETY: a zeroed sigaction with a handler that only calls raise(2) is valid; setitimer
    // takes a fully initialized itimerval.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = die as *const () as usize;
        libc::sigaction(libc::SIGALRM, &sa, std::ptr::null_mut());
        let t = libc::itimerval {
            it_interval: libc::timeval {
                tv_sec: 0,
                tv_usec: 0,
            },
            it_value: libc::timeval {
                tv_sec: us / 1_000_000,
                tv_usec: us % 1_000_000,
            },
        };
        libc::setitimer(libc::ITIMER_REAL, &t, std::ptr::null_mut());
    }
}
