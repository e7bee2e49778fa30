//! A program whose requests the test paces, for the tests of `ttrace-reader watch`:
//! `ttrace-test-pairs` records on the device `TTRACE_DIR` what each line of its standard
//! input asks, then prints `done <line>` (so the test knows it was recorded):
//!
//! - `enter ID`: the entry `request(id=ID)`; `exit ID`: the exit `request_done(id=ID)`
//!   (the test decides how long a pair lasts: the exit is recorded only when it asks);
//! - `long ID MS`: a pair `request(id=ID)` .. `request_done(id=ID)` at least MS
//!   milliseconds long;
//! - `pairs N`: N quick pairs (ids 1000 and up, each once in the run);
//! - `failed STATUS PATH`: the event `request_failed(status=STATUS path=PATH)`.
//!
//! It ends at the end of its input. A line it does not know is one line on stderr and
//! exit status 1.

use std::io::BufRead;
use ttrace_core::{point, tracepoint};

tracepoint!(static REQUEST: Entry = "request", "id={id}");
tracepoint!(static REQUEST_DONE: Exit = "request_done", "id={id}");
tracepoint!(static REQUEST_FAILED: Start = "request_failed", "status={status:d} path={path:s}");

fn main() {
    if let Err(e) = ttrace_core::device_or_init() {
        eprintln!("ttrace-test-pairs: {e}");
        std::process::exit(1);
    }
    let fail = |line: &str| -> ! {
        eprintln!("ttrace-test-pairs: {line:?}: expected enter ID, exit ID, long ID MS, pairs N or failed STATUS PATH");
        std::process::exit(1)
    };
    let mut next_id = 1000;
    for line in std::io::stdin().lock().lines().map_while(Result::ok) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| -> u64 {
            words
                .get(i)
                .and_then(|w| w.parse().ok())
                .unwrap_or_else(|| fail(&line))
        };
        match words.first().copied() {
            Some("enter") => point!(REQUEST, num(1)),
            Some("exit") => point!(REQUEST_DONE, num(1)),
            Some("long") => {
                let (id, ms) = (num(1), num(2));
                let start = std::time::Instant::now();
                point!(REQUEST, id);
                // The pair's length, not a synchronisation: at least `ms`, whatever the load.
                while start.elapsed() < std::time::Duration::from_millis(ms) {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                point!(REQUEST_DONE, id);
            }
            Some("pairs") => {
                for id in next_id..next_id + num(1) {
                    point!(REQUEST, id);
                    point!(REQUEST_DONE, id);
                }
                next_id += num(1);
            }
            Some("failed") => {
                let status: i64 = words
                    .get(1)
                    .and_then(|w| w.parse().ok())
                    .unwrap_or_else(|| fail(&line));
                let path = words.get(2).copied().unwrap_or_else(|| fail(&line));
                point!(REQUEST_FAILED, status, path);
            }
            _ => fail(&line),
        }
        println!("done {line}");
    }
}
