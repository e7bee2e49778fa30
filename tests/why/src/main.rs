//! `ttrace-test-why`: a service whose requests are slow for four reasons, one per kind, for
//! the anatomy test (`tests/tests/why`, issue 40).
//!
//! **Build it with `RUSTFLAGS="--cfg tokio_unstable"`**: tokio's task spans
//! (`runtime.spawn`) and waker events, from which ttrace records `task_wake`, exist only
//! then (and with tokio's `tracing` feature, which its Cargo.toml turns on). Without the
//! flag it does not compile.
//!
//! `ttrace-test-why [--kinds K,K..] [--each N] [--refuse-perf]` serves `N` requests (default 4) of each
//! kind named (default all four), one after another, each an `#[instrument]`ed async fn
//! named after its kind, recording on the device the environment names (`TTRACE_DIR`;
//! `TTRACE_SCHED=1` records the context switches):
//! - `blocking`: sleeps 20 ms inside its poll (`std::thread::sleep`): its worker blocked;
//! - `contended`: spins until its thread has used 5 ms of CPU time, its worker pinned (before
//!   the poll) to the CPU three busy threads are pinned to: preempted most of the time;
//! - `idle`: awaits a 15 ms `tokio::time::sleep`, then works a little: waiting on its
//!   future;
//! - `queued`: on a one-worker runtime, awaits a channel; a second task, polled next, has a
//!   plain thread send on that channel and spins 20 ms in the same poll once the thread
//!   says it sent: the request woken at once, and polled only after that spin.
//!
//! With `--refuse-perf` it first installs a seccomp filter that has the kernel refuse
//! `perf_event_open` to the process (`EACCES`), as a container's profile may: the switches
//! are then not recorded, whatever `TTRACE_SCHED` says, and the device says why.
//!
//! Each order between threads is made by messages, never by sleeps. An INFO line per request
//! goes to stderr through `fmt`, beside the ttrace layer, as in a real service. It exits
//! normally, so that the switches still in the kernel's buffers are drained into the device.

#[cfg(not(tokio_unstable))]
compile_error!("build ttrace-test-why with RUSTFLAGS=\"--cfg tokio_unstable\"");

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tracing::{info, instrument};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::prelude::*;

/// The kinds of slow request, as named on the command line and by their spans.
const KINDS: [&str; 4] = ["blocking", "contended", "idle", "queued"];

/// The command line.
struct Args {
    kinds: Vec<String>,
    each: u32,
    refuse_perf: bool,
}

fn args() -> Result<Args, String> {
    let mut args = Args {
        kinds: KINDS.iter().map(|k| k.to_string()).collect(),
        each: 4,
        refuse_perf: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--kinds" => {
                args.kinds = value()?.split(',').map(str::to_string).collect();
                if let Some(k) = args.kinds.iter().find(|k| !KINDS.contains(&k.as_str())) {
                    return Err(format!("no kind {k} (kinds: {})", KINDS.join(", ")));
                }
            }
            "--each" => {
                let v = value()?;
                args.each = v
                    .parse()
                    .map_err(|_| format!("--each {v}: not a count of requests"))?;
            }
            "--refuse-perf" => args.refuse_perf = true,
            _ => return Err(format!("unknown argument {a}")),
        }
    }
    Ok(args)
}

/// CPU time the calling thread has used.
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; the clock exists on every Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Spins until the calling thread has used `cpu` more CPU time.
fn spin_cpu(cpu: Duration) {
    let until = thread_cpu_time() + cpu;
    while thread_cpu_time() < until {
        std::hint::spin_loop();
    }
}

/// Spins for `wall` of wall-clock time.
fn spin_wall(wall: Duration) {
    let start = Instant::now();
    while start.elapsed() < wall {
        std::hint::spin_loop();
    }
}

/// The calling thread's CPU affinity.
fn affinity() -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is plain bits; all zeros is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a cpu_set_t of the size given, to write.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    assert_eq!(rc, 0, "sched_getaffinity");
    set
}

/// Sets the calling thread's CPU affinity.
fn set_affinity(set: &libc::cpu_set_t) {
    // SAFETY: `set` is a cpu_set_t of the size given, only read.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(set), set) };
    assert_eq!(rc, 0, "sched_setaffinity");
}

/// Pins the calling thread to `cpu`.
fn pin(cpu: usize) {
    // SAFETY: as in `affinity`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is below CPU_SETSIZE (it came from an affinity set); `set` is valid.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    set_affinity(&set);
}

/// The first CPU the process may run on.
fn first_cpu() -> usize {
    let set = affinity();
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `c` is below CPU_SETSIZE; `set` is a valid set.
        .find(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .expect("a CPU to run on")
}

/// The `AUDIT_ARCH_*` of the system calls of this build.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;

/// Has the kernel refuse `perf_event_open` to this thread and those it starts from now on,
/// with `EACCES`: a seccomp filter (a classic BPF program over `struct seccomp_data`: `nr`
/// at offset 0, `arch` at 4), allowed without privileges once `no_new_privs` is set.
fn refuse_perf_event_open() -> std::io::Result<()> {
    let op = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jeq = |k: u32, jt: u8, jf: u8| libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    };
    let load = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let ret = libc::BPF_RET | libc::BPF_K;
    let filter = [
        op(load, 4),
        // Another architecture's calls: allowed.
        jeq(AUDIT_ARCH, 1, 0),
        op(ret, libc::SECCOMP_RET_ALLOW),
        op(load, 0),
        jeq(libc::SYS_perf_event_open as u32, 0, 1),
        op(ret, libc::SECCOMP_RET_ERRNO | libc::EACCES as u32),
        op(ret, libc::SECCOMP_RET_ALLOW),
    ];
    let program = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `program` points to `filter`, alive for the call (the kernel copies it).
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &program as *const libc::sock_fprog,
        )
    };
    match rc {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Blocked: sleeps inside its one poll.
#[instrument]
async fn blocking(i: u32) {
    std::thread::sleep(Duration::from_millis(20));
    info!("blocking request done");
}

/// Preempted: spins until it has used 5 ms of CPU time, in its one poll, on a worker pinned
/// to a CPU where three busy threads spin ([`pinned`]).
#[instrument]
async fn contended(i: u32) {
    spin_cpu(Duration::from_millis(5));
    info!("contended request done");
}

/// Polls `request` (a request of one poll) on its worker pinned to `cpu`, then gives the
/// worker its affinity back: the move to `cpu` happens before the request's span is
/// entered, so that its poll holds only the competition for that CPU.
async fn pinned(cpu: usize, request: impl std::future::Future<Output = ()>) {
    let was = affinity();
    pin(cpu);
    request.await;
    set_affinity(&was);
}

/// Idle: waits on its future (a timer), then works a little.
#[instrument]
async fn idle(i: u32) {
    tokio::time::sleep(Duration::from_millis(15)).await;
    spin_cpu(Duration::from_micros(200));
    info!("idle request done");
}

/// What the plain thread of `queued` is given: the sender to fire, and where to say it did.
type Fire = (tokio::sync::oneshot::Sender<()>, mpsc::Sender<()>);

/// Scheduled: awaits a channel that a plain thread fires while another task holds the only
/// worker, so that it is woken at once but polled only when that task's poll ends.
#[instrument(skip(helper))]
async fn queued(i: u32, helper: mpsc::Sender<Fire>) {
    let (tx, rx) = tokio::sync::oneshot::channel();
    // Polled after this poll returns pending: this task waits on `rx` by then.
    tokio::spawn(hog(tx, helper));
    rx.await.expect("the helper fires the channel");
    info!("queued request done");
}

/// The task that holds the worker: has the helper fire `tx`, and once it says it did, spins
/// 20 ms in the same poll.
async fn hog(tx: tokio::sync::oneshot::Sender<()>, helper: mpsc::Sender<Fire>) {
    let (fired_tx, fired) = mpsc::channel();
    helper.send((tx, fired_tx)).expect("the helper thread runs");
    fired.recv().expect("the helper says it fired");
    spin_wall(Duration::from_millis(20));
}

/// The multi-thread runtime's requests: `each` of each kind of `kinds` but `queued`.
fn serve_on_workers(kinds: &[String], each: u32) -> std::io::Result<()> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder
        .worker_threads(2)
        .thread_name("why-worker")
        .enable_all();
    let runtime = ttrace_tracing::runtime::instrument(&mut builder).build()?;
    for kind in kinds {
        match kind.as_str() {
            "blocking" => runtime.block_on(async {
                for i in 0..each {
                    tokio::spawn(blocking(i)).await.expect("served");
                }
            }),
            "contended" => {
                let cpu = first_cpu();
                let stop = AtomicBool::new(false);
                std::thread::scope(|s| {
                    let (pinned_tx, busy) = mpsc::channel();
                    for _ in 0..3 {
                        let pinned_tx = pinned_tx.clone();
                        let stop = &stop;
                        s.spawn(move || {
                            pin(cpu);
                            pinned_tx.send(()).expect("the main thread waits");
                            while !stop.load(SeqCst) {
                                std::hint::spin_loop();
                            }
                        });
                    }
                    for _ in 0..3 {
                        busy.recv().expect("each busy thread pins itself");
                    }
                    runtime.block_on(async {
                        for i in 0..each {
                            tokio::spawn(pinned(cpu, contended(i)))
                                .await
                                .expect("served");
                        }
                    });
                    stop.store(true, SeqCst);
                });
            }
            "idle" => runtime.block_on(async {
                for i in 0..each {
                    tokio::spawn(idle(i)).await.expect("served");
                }
            }),
            _ => {}
        }
    }
    Ok(())
}

/// The one-worker runtime's requests: `each` of `queued`.
fn serve_queued(each: u32) -> std::io::Result<()> {
    let (helper, jobs) = mpsc::channel::<Fire>();
    let thread = std::thread::Builder::new()
        .name("why-helper".into())
        .spawn(move || {
            for (tx, fired) in jobs {
                // The request may be gone only if the program is ending.
                let _ = tx.send(());
                let _ = fired.send(());
            }
        })?;
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_all();
    let runtime = ttrace_tracing::runtime::instrument(&mut builder).build()?;
    runtime.block_on(async {
        for i in 0..each {
            tokio::spawn(queued(i, helper.clone()))
                .await
                .expect("served");
        }
    });
    drop(runtime);
    drop(helper);
    thread.join().expect("the helper thread ends");
    Ok(())
}

fn main() {
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ttrace-test-why: {e}");
            std::process::exit(2);
        }
    };
    if args.refuse_perf {
        if let Err(e) = refuse_perf_event_open() {
            eprintln!("ttrace-test-why: no seccomp filter: {e}");
            std::process::exit(1);
        }
    }
    tracing_subscriber::registry()
        .with(ttrace_tracing::layer())
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(LevelFilter::INFO),
        )
        .init();
    let served = serve_on_workers(&args.kinds, args.each).and_then(|()| {
        match args.kinds.iter().any(|k| k == "queued") {
            true => serve_queued(args.each),
            false => Ok(()),
        }
    });
    if let Err(e) = served {
        eprintln!("ttrace-test-why: no runtime: {e}");
        std::process::exit(1);
    }
}
