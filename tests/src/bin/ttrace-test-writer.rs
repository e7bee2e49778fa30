//! A writer process for the cross-process tests:
//! `ttrace-test-writer <device-dir> <events> <tag>` records `events` events of the shared
//! tracepoint (arguments: tag, index, a string) from a thread named `writer-<tag>`, then one
//! `writer_done`. It first prints the path its trace points take: `restartable`
//! (`Device::restartable()`) or `shared`. With a fourth argument `wait`, it writes the first
//! half of its events (`events / 2`), prints `half`, and waits for its standard input to
//! close before it writes the rest: so that a test can make several write at the same time,
//! by construction (each has written before the test lets any go on, and writes after).
//!
//! It opens the device with the default ring size and CPUs, so it accepts an existing
//! device's (and creates one of the default size for every CPU of this machine).

use ttrace_core::{point, tracepoint};

tracepoint!(static SHARED: Start = "shared_event", "tag={tag} i={i} label={label:s}");
tracepoint!(static ONLY_HERE: Stop = "writer_done", "tag={tag}");

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (dir, events, tag, wait) = match args.as_slice() {
        [_, dir, events, tag] => (dir, events, tag, false),
        [_, dir, events, tag, w] if w == "wait" => (dir, events, tag, true),
        _ => {
            eprintln!("usage: ttrace-test-writer <device-dir> <events> <tag> [wait]");
            std::process::exit(2);
        }
    };
    let (events, tag): (u64, u64) = (events.parse().expect("events"), tag.parse().expect("tag"));
    let config = ttrace_core::Config {
        calibration: std::time::Duration::from_millis(2),
        ..ttrace_core::Config::at(dir)
    };
    match ttrace_core::init(&config) {
        Ok(dev) if dev.restartable() => println!("restartable"),
        Ok(_) => println!("shared"),
        Err(e) => {
            eprintln!("ttrace-test-writer: {e}");
            std::process::exit(1);
        }
    }
    std::thread::Builder::new()
        .name(format!("writer-{tag}"))
        .spawn(move || {
            let half = if wait { events / 2 } else { 0 };
            for i in 0..half {
                point!(SHARED, tag, i, format!("t{tag}-{i}").as_str());
            }
            if wait {
                use std::io::{Read, Write};
                let mut out = std::io::stdout().lock();
                out.write_all(b"half\n")
                    .and_then(|()| out.flush())
                    .expect("stdout");
                let _ = std::io::stdin().read_to_end(&mut Vec::new());
            }
            for i in half..events {
                point!(SHARED, tag, i, format!("t{tag}-{i}").as_str());
            }
            point!(ONLY_HERE, tag);
        })
        .expect("spawn")
        .join()
        .expect("join");
}
