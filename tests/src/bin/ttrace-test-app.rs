//! A small traced application for the reader tests: `ttrace-test-app <device-dir> [rounds]`.
//!
//! It records, from named threads, events of every kind the reader must decode, and prints
//! on stdout what it recorded, one line per event, as `<thread name> <text>` where `<text>` is
//! what `ttrace-reader dump` must show after the thread name: `tracepoint(arguments)`. The
//! `pingpong` events alternate between two threads pinned to different CPUs (when there are
//! two), each sent only after the other's was recorded: their `seq` gives their true order.
//!
//! Every thread is pinned, to the CPUs of `ttrace_tests::cpu_pair`: `pinger` and `files` to
//! the first, `ponger` to the second. So on its device of two CPUs the events of `pinger` and
//! `files` are in one ring of CPU 0's or of CPU 1's, those of `ponger` in one of the other
//! CPU's (in the same ring where this process may run on CPUs of one parity only).

use std::sync::mpsc;
use ttrace_core::{point, tracepoint};
use ttrace_tests::pin_to as pin;

tracepoint!(static PING: Start = "pingpong", "seq={seq} by={by:s}");
tracepoint!(static OPEN: Entry = "file_open", "path={path:s} flags={flags:x} delta={delta:d}");
tracepoint!(static CLOSE: Exit = "file_close", "fd={fd}");
tracepoint!(
    static WIDE: Start = "wide",
    "a0={a0} a1={a1} a2={a2} a3={a3} a4={a4} a5={a5:x} a6={a6} a7={a7} a8={a8} a9={a9} a10={a10:d} a11={a11}"
);

fn spawn<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .expect("spawn")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (dir, rounds) = match args.as_slice() {
        [_, dir] => (dir.clone(), 50u64),
        [_, dir, rounds] => (dir.clone(), rounds.parse().expect("rounds")),
        _ => {
            eprintln!("usage: ttrace-test-app <device-dir> [rounds]");
            std::process::exit(2);
        }
    };
    if let Err(e) = ttrace_core::init(&ttrace_tests::config(dir.as_ref(), 4096, 2)) {
        eprintln!("ttrace-test-app: {e}");
        std::process::exit(1);
    }
    let [first, second] = ttrace_tests::cpu_pair();

    // Two threads passing a token: each event is recorded before the token moves on.
    let (to_pong, from_ping) = mpsc::channel::<u64>();
    let (to_ping, from_pong) = mpsc::channel::<u64>();
    let pinger = spawn("pinger", move || {
        pin(first);
        let mut lines = Vec::new();
        for round in 0..rounds {
            let seq = 2 * round;
            point!(PING, seq, "ping");
            lines.push(format!("pinger pingpong(seq={seq} by=\"ping\")"));
            to_pong.send(seq + 1).expect("send");
            from_pong.recv().expect("recv");
        }
        lines
    });
    let ponger = spawn("ponger", move || {
        pin(second);
        let mut lines = Vec::new();
        while let Ok(seq) = from_ping.recv() {
            point!(PING, seq, "pong");
            lines.push(format!("ponger pingpong(seq={seq} by=\"pong\")"));
            if to_ping.send(seq + 1).is_err() {
                break;
            }
        }
        lines
    });
    // A thread with strings, hex and negative numbers, and 12-word events (continuations);
    // its second `file_open` call lasts 1.5 ms.
    let files = spawn("files", move || {
        pin(first);
        let mut lines = Vec::new();
        for i in 0..rounds {
            let path = format!("/data/{i}/log \"{}\"", i % 3);
            let (flags, delta) = (0x8000 | i, i as i64 - 25);
            point!(OPEN, path.as_str(), flags, delta);
            lines.push(format!(
                "files file_open(path={path:?} flags={flags:#x} delta={delta})"
            ));
            if i == 1 {
                // One call of 1.5 ms by the device's clock (busy: a viewer shows it in
                // milliseconds, to the microsecond).
                let dev = ttrace_core::device().expect("the device");
                let (clock, from) = (dev.device().reader().version().clock, dev.now());
                while clock.ticks_to_ns(dev.now().saturating_sub(from)) < 1_500_000 {
                    std::hint::spin_loop();
                }
            }
            point!(CLOSE, 3 + i);
            lines.push(format!("files file_close(fd={})", 3 + i));
            let a: [u64; 12] = std::array::from_fn(|k| i * 100 + k as u64);
            let a10 = -(i as i64) - 1;
            point!(WIDE, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a10, a[11]);
            lines.push(format!(
                "files wide(a0={} a1={} a2={} a3={} a4={} a5={:#x} a6={} a7={} a8={} a9={} a10={a10} a11={})",
                a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[11]
            ));
        }
        lines
    });
    let mut out = String::new();
    for h in [pinger, ponger, files] {
        for l in h.join().expect("join") {
            out.push_str(&l);
            out.push('\n');
        }
    }
    print!("{out}");
}
