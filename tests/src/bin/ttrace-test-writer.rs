//! A writer process for the cross-process tests:
//! `ttrace-test-writer <device-dir> <events> <tag>` records `events` events of the shared
//! tracepoint (arguments: tag, index, a string) from a thread named `writer-<tag>`.

use ttrace_core::{point, tracepoint};

tracepoint!(static SHARED: Start = "shared_event", "tag={tag} i={i} label={label:s}");
tracepoint!(static ONLY_HERE: Stop = "writer_done", "tag={tag}");

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, events, tag] = args.as_slice() else {
        eprintln!("usage: ttrace-test-writer <device-dir> <events> <tag>");
        std::process::exit(2);
    };
    let (events, tag): (u64, u64) = (events.parse().expect("events"), tag.parse().expect("tag"));
    if let Err(e) = ttrace_core::init(&ttrace_tests::config(dir.as_ref(), 16384, 2)) {
        eprintln!("ttrace-test-writer: {e}");
        std::process::exit(1);
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
