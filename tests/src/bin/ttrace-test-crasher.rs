//! A writer for the crash test: `ttrace-test-crasher <device-dir> <progress-file> <incarnation>
//! <entries> <kill-after-us>[/<alarms>] [<cpu> [held]]`.
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
//! runs on that CPU only, its restartable ring mapped in advance (see [`prefault`]). With
//! `held`, for a test that stops and kills it from outside: before its loop it writes two lines
//! to its standard output, the bounds of the restartable critical sections linked into it (as
//! `ttrace_tests::rseq::Section::line` writes them: where its trace points can be caught),
//! and `ring <slots> <last_stamp>`, the addresses in its address space of its CPU's
//! restartable ring's first slot and of that ring's `last_stamp` (where a watchpoint can
//! catch it), then waits for a byte on its standard input, so that its events begin once the
//! test watches them.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicI64, AtomicPtr, AtomicU64, Ordering::*};
use ttrace_core::{point, tracepoint};
use ttrace_tests::{mix, Progress};

tracepoint!(static WORDS: Start = "crash_words", "inc={inc} seq={seq} a={a} b={b} c={c}");
tracepoint!(static STRING: Start = "crash_string", "inc={inc} seq={seq} s={s:s}");

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (dir, progress, inc, entries, kill_after, cpu, held) = match args.as_slice() {
        [_, d, p, i, e, k] => (d, p, i, e, k, None, false),
        [_, d, p, i, e, k, c] => (d, p, i, e, k, Some(c), false),
        [_, d, p, i, e, k, c, h] if h == "held" => (d, p, i, e, k, Some(c), true),
        _ => {
            eprintln!(
                "usage: ttrace-test-crasher <device-dir> <progress-file> <incarnation> <entries> <kill-after-us>[/<alarms>] [<cpu> [held]]"
            );
            std::process::exit(2);
        }
    };
    let (inc, entries): (u64, u64) = (inc.parse().expect("inc"), entries.parse().expect("entries"));
    let (kill_after, alarms) = kill_after.split_once('/').unwrap_or((kill_after, "1"));
    let kill_after: i64 = kill_after.parse().expect("kill-after-us");
    ALARMS_LEFT.store(alarms.parse().expect("alarms"), Relaxed);
    AIM.store(mix(inc, 0, 99) | 1, Relaxed);
    let progress = Progress::open(progress.as_ref()).expect("progress file");
    let cpu: Option<usize> = cpu.map(|c| c.parse().expect("cpu"));
    if let Some(cpu) = cpu {
        ttrace_tests::rseq::set_affinity(0, &[cpu]).expect("sched_setaffinity");
    }
    let dev = match ttrace_core::init(&ttrace_core::Config::at(dir)) {
        Ok(dev) => dev,
        Err(e) => {
            eprintln!("ttrace-test-crasher: {e}");
            std::process::exit(1);
        }
    };
    if let Some(cpu) = cpu {
        prefault(dev, cpu);
    }
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
    if held {
        let mut line = ttrace_tests::rseq::Section::line(&ttrace_tests::rseq::sections());
        line.push('\n');
        // Where its CPU's restartable ring lies in its address space, for watchpoints.
        let cpu = cpu.expect("held needs a cpu");
        let map = dev.device().mapping();
        line.push_str(&format!(
            "ring {:x} {:x}\n",
            map.ring(cpu).slots().as_ptr() as usize,
            &map.ring_header(cpu).last_stamp as *const AtomicU64 as usize
        ));
        let mut out = std::io::stdout().lock();
        out.write_all(line.as_bytes())
            .and_then(|()| out.flush())
            .expect("stdout");
        std::io::stdin().read_exact(&mut [0u8; 1]).expect("stdin");
    }
    if kill_after > 0 {
        arm_kill(kill_after);
    }
    // Timed in the device's clock, and only in a writer meant to finish: a writer meant to
    // die spends its time in trace points, where the kill is to land.
    let timed = kill_after == 0 && !held;
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
    }
    let hz = dev.device().mapping().header().tsc_hz.max(1) as u128;
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

/// Maps the restartable ring of CPU `cpu` (its header page and its slots) into this process's
/// page tables, writable, now (`MADV_POPULATE_WRITE`, which stores nothing), instead of at the
/// first store to each page: so that the trace points of a writer stopped from outside do not
/// enter the kernel (a page fault at the first store to a new page, every 64 entries) where
/// the stop would be taken, always at the same instruction of a section, before its stores.
/// Best effort: a kernel before 5.14 refuses, and the writer then faults as usual.
fn prefault(dev: &ttrace_core::Writer, cpu: usize) {
    let map = dev.device().mapping();
    if cpu >= map.num_cpus() as usize {
        return;
    }
    let header = map.ring_header(cpu) as *const _ as usize;
    let slots = map.ring(cpu).slots();
    let ranges = [
        (header, core::mem::size_of_val(map.ring_header(cpu))),
        (slots.as_ptr() as usize, core::mem::size_of_val(slots)),
    ];
    for (at, len) in ranges {
        let page = 4096;
        let start = at & !(page - 1);
        let len = (at + len).next_multiple_of(page) - start;
        // SAFETY: the range covers only pages of the device's shared mapping, which lives
        // as long as `dev`; MADV_POPULATE_WRITE changes no memory, only maps its pages.
        let rc =
            unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE) };
        if rc != 0 {
            eprintln!(
                "ttrace-test-crasher: madvise(MADV_POPULATE_WRITE): {}",
                std::io::Error::last_os_error()
            );
        }
    }
}
