//! A writer for the crash test: `ttrace-test-crasher <device-dir> <progress-file> <incarnation>
//! <entries> <kill-after-us>[/<alarms>] [<cpu> [<notify-at>]]`.
//!
//! Records `entries` self-checking events (every eighth with an aux string) in a tight loop,
//! publishing in the progress file, after each event is recorded, how many are: so the test
//! knows which events were complete. If `kill-after-us` is not 0, a timer started with the
//! loop interrupts it after that many microseconds, wherever it is — in the middle of an
//! entry, holding the aux lock, between events — and the process dies there by SIGKILL.
//! With `/alarms`, the timer aims: it goes off again every 1 to 8 µs until it interrupts a
//! restartable critical section (the process dies there, the section's stores made and its
//! commit not), or `alarms` times, and the process dies at the last. Otherwise it reports its
//! slowest trace point and waits for its stdin to close (or for the test to kill it).
//!
//! It also publishes which path its trace points take (`Device::restartable()`: restartable
//! sequences, or the shared rings, as `TTRACE_NO_RSEQ` or
//! `GLIBC_TUNABLES=glibc.pthread.rseq=0` in its environment make it), whether it is inside a
//! trace point (`Progress::state`), and, when the signal that kills it interrupted a
//! restartable critical section, that it did. `TTRACE_TEST_LAZY=1` in its environment leaves
//! the string tracepoint to be registered by its first event, in the loop. With `cpu`, it
//! runs on that CPU only; with `notify-at`, it writes a byte to its standard output once it
//! has recorded that many events (and goes on), for a test that kills it from outside.

use std::io::Read;
use std::sync::atomic::{AtomicI64, AtomicPtr, AtomicU64, Ordering::*};
use ttrace_core::{point, tracepoint};
use ttrace_tests::{mix, Progress};

tracepoint!(static WORDS: Start = "crash_words", "inc={inc} seq={seq} a={a} b={b} c={c}");
tracepoint!(static STRING: Start = "crash_string", "inc={inc} seq={seq} s={s:s}");

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (dir, progress, inc, entries, kill_after, cpu, notify_at) = match args.as_slice() {
        [_, d, p, i, e, k] => (d, p, i, e, k, None, None),
        [_, d, p, i, e, k, c] => (d, p, i, e, k, Some(c), None),
        [_, d, p, i, e, k, c, n] => (d, p, i, e, k, Some(c), Some(n)),
        _ => {
            eprintln!(
                "usage: ttrace-test-crasher <device-dir> <progress-file> <incarnation> <entries> <kill-after-us>[/<alarms>] [<cpu> [<notify-at>]]"
            );
            std::process::exit(2);
        }
    };
    let (inc, entries): (u64, u64) = (inc.parse().expect("inc"), entries.parse().expect("entries"));
    let (kill_after, alarms) = kill_after.split_once('/').unwrap_or((kill_after, "1"));
    let kill_after: i64 = kill_after.parse().expect("kill-after-us");
    let notify_at: u64 = notify_at.map_or(u64::MAX, |n| n.parse().expect("notify-at"));
    ALARMS_LEFT.store(alarms.parse().expect("alarms"), Relaxed);
    AIM.store(mix(inc, 0, 99) | 1, Relaxed);
    let progress = Progress::open(progress.as_ref()).expect("progress file");
    if let Some(cpu) = cpu {
        let cpu: usize = cpu.parse().expect("cpu");
        ttrace_tests::rseq::set_affinity(0, &[cpu]).expect("sched_setaffinity");
    }
    let dev = match ttrace_core::init(&ttrace_core::Config::at(dir)) {
        Ok(dev) => dev,
        Err(e) => {
            eprintln!("ttrace-test-crasher: {e}");
            std::process::exit(1);
        }
    };
    progress.path.store(
        if dev.restartable() {
            Progress::RESTARTABLE
        } else {
            Progress::SHARED
        },
        Release,
    );
    KILLED_IN_SECTION.store(
        progress.killed_in_section as *const AtomicU64 as *mut AtomicU64,
        Release,
    );
    // Registers the tracepoints and the thread before the timer starts (a registration
    // parses the metadata, which grows with every writer: done in the loop, it would be
    // where most writers die). STRING is registered without recording an event, unless
    // `TTRACE_TEST_LAZY=1`: then its first event does it, and the kill may land there,
    // holding the metadata lock.
    point!(WORDS, inc, u64::MAX, 0u64, 0u64, 0u64);
    if std::env::var_os("TTRACE_TEST_LAZY").is_none() {
        use ttrace_core::ArgType::*;
        STRING.enabled_word(STRING.word(), &[Unsigned, Unsigned, Str]);
    }
    // The strings, made before the timer starts: the loop is trace points.
    let strings: Vec<String> = (0..entries)
        .step_by(8)
        .map(|seq| ttrace_tests::crash_string(inc, seq))
        .collect();
    if kill_after > 0 {
        arm_kill(kill_after);
    }
    // Timed in the device's clock, and only in a writer meant to finish: a writer meant to
    // die spends its time in trace points, where the kill is to land.
    let timed = kill_after == 0 && notify_at == u64::MAX;
    let mut slowest = 0u64;
    for seq in 0..entries {
        let t = if timed { dev.now() } else { 0 };
        if seq % 8 == 0 {
            progress.state.store(Progress::IN_AUX, Release);
            point!(STRING, inc, seq, strings[seq as usize / 8].as_str());
        } else {
            let (a, b, c) = (mix(inc, seq, 0), mix(inc, seq, 1), mix(inc, seq, 2));
            progress.state.store(Progress::IN_POINT, Release);
            point!(WORDS, inc, seq, a, b, c);
        }
        progress.state.store(Progress::RUNNING, Release);
        if timed {
            slowest = slowest.max(dev.now().wrapping_sub(t));
        }
        // Release: the event is recorded before the count that says so.
        progress.done.store(seq + 1, Release);
        if seq + 1 == notify_at {
            // SAFETY: writes one byte from a valid buffer to standard output.
            unsafe { libc::write(1, b"!".as_ptr() as *const libc::c_void, 1) };
        }
    }
    let hz = dev.mapping().header().tsc_hz.max(1) as u128;
    progress
        .slowest_ns
        .store((slowest as u128 * 1_000_000_000 / hz) as u64, Release);
    progress.state.store(Progress::FINISHED, Release);
    // Wait, without spinning, until the test lets go.
    let _ = std::io::stdin().read(&mut [0u8; 1]);
}

/// Where the alarm's handler notes that it interrupted a restartable critical section.
static KILLED_IN_SECTION: AtomicPtr<AtomicU64> = AtomicPtr::new(std::ptr::null_mut());
/// Alarms to go before the process dies, whatever they interrupt.
static ALARMS_LEFT: AtomicI64 = AtomicI64::new(1);
/// The state of the generator of the delays between aimed alarms.
static AIM: AtomicU64 = AtomicU64::new(1);

/// Dies by SIGKILL wherever the process is when the alarm comes (or, aiming, when an alarm
/// comes inside a restartable critical section, or the last one does); first notes whether
/// the alarm landed inside a section (then the section was aborted, its stores made and its
/// commit not, and the process dies so).
extern "C" fn die(_: libc::c_int, _: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: the third argument of a SA_SIGINFO handler.
    let ip = unsafe { ttrace_tests::rseq::interrupted_ip(context) };
    if ttrace_tests::rseq::is_abort_address(ip) {
        // SAFETY: null, or the progress file's word, mapped for the life of the process.
        if let Some(w) = unsafe { KILLED_IN_SECTION.load(Acquire).as_ref() } {
            w.store(1, Release);
        }
    } else if ALARMS_LEFT.fetch_sub(1, Relaxed) > 1 {
        let mut x = AIM.load(Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        AIM.store(x, Relaxed);
        arm(1 + (x % 8) as i64);
        return;
    }
    // SAFETY: raise is async-signal-safe.
    unsafe { libc::raise(libc::SIGKILL) };
}

/// Arms a one-shot timer that kills the process after `us` microseconds.
fn arm_kill(us: i64) {
    ttrace_tests::rseq::install(libc::SIGALRM, die);
    arm(us);
}

/// Arms the one-shot timer (also from the signal handler: setitimer is one system call).
fn arm(us: i64) {
    // SAFETY: setitimer takes a fully initialized itimerval.
    unsafe {
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
