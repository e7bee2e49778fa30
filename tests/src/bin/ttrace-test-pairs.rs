//! A program whose requests the test paces, for the tests of `ttrace-reader watch`:
//! `ttrace-test-pairs` records on the device `TTRACE_DIR` what each line of its standard
//! input asks, then prints `done <line>` (so the test knows it was recorded):
//!
//! - `enter ID`: the entry `request(id=ID)`; `exit ID`: the exit `request_done(id=ID)`
//!   (the test decides how long a pair lasts: the exit is recorded only when it asks);
//! - `long ID MS`: a pair `slow_request(id=ID)` .. `slow_request_done(id=ID)` at least MS
//!   milliseconds long by the device's own clock (a pair of its own, so that a rule on it
//!   matches this pair and no quick one a preemption made slow);
//! - `pairs N`: N quick pairs (ids 1000 and up, each once in the run);
//! - `failed STATUS PATH`: the event `request_failed(status=STATUS path=PATH)`.
//!
//! It ends at the end of its input. A line it does not know is one line on stderr and
//! exit status 1.

use std::io::BufRead;
use ttrace_core::{point, tracepoint};

tracepoint!(static REQUEST: Entry = "request", "id={id}");
tracepoint!(static REQUEST_DONE: Exit = "request_done", "id={id}");
tracepoint!(static SLOW_REQUEST: Entry = "slow_request", "id={id}");
tracepoint!(static SLOW_REQUEST_DONE: Exit = "slow_request_done", "id={id}");
tracepoint!(static REQUEST_FAILED: Start = "request_failed", "status={status:d} path={path:s}");

fn main() {
    let dev = match ttrace_core::device_or_init() {
        Ok(dev) => dev,
        Err(e) => {
            eprintln!("ttrace-test-pairs: {e}");
            std::process::exit(1);
        }
    };
    let clock = dev.device().reader().version().clock;
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
                point!(SLOW_REQUEST, id);
                // The pair's length, not a synchronisation: `ms` by the device's own clock and
                // conversion, counted from a read made after the entry point took its stamp,
                // so that the traced pair lasts at least `ms` whatever preempts this thread
                // (a wait counted from a time read before the entry point can end less than
                // `ms` after the entry's stamp).
                let from = dev.now();
                while clock.ticks_to_ns(dev.now().saturating_sub(from)) < ms * 1_000_000 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                point!(SLOW_REQUEST_DONE, id);
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
