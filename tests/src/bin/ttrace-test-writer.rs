//! A writer process for the cross-process tests:
//! `ttrace-test-writer <device-dir> <events> <tag>` records `events` events of the shared
//! tracepoint (arguments: tag, index, a string) from a thread named `writer-<tag>`. It first
//! prints the path its trace points take: `restartable` (`Device::restartable()`) or
//! `shared`; with a fourth argument `wait`, it then waits for its standard input to close
//! before it writes (so that a test can start several at once).

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
    match ttrace_core::init(&ttrace_tests::config(dir.as_ref(), 16384, 2)) {
        Ok(dev) if dev.restartable() => println!("restartable"),
        Ok(_) => println!("shared"),
        Err(e) => {
            eprintln!("ttrace-test-writer: {e}");
            std::process::exit(1);
        }
    }
    if wait {
        use std::io::Read;
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
    }
    std::thread::Builder::new()
        .name(format!("writer-{tag}"))
        .spawn(move || {
            for i in 0..events {
                point!(SHARED, tag, i, format!("t{tag}-{i}").as_str());
            }
            point!(ONLY_HERE, tag);
        })
        .expect("spawn")
        .join()
        .expect("join");
}
