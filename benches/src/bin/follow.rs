//! What following a live device costs: `cargo run --release -p ttrace-benches --bin follow
//! [-- --quick]`.
//!
//! 1. **Idle**: a follower polling every 20 ms (backing off to 100 ms, as `ttrace-reader
//!    follow` does) a device of 16 CPUs × 1,048,576 slots (32 rings, 2 GiB of ring files
//!    that nobody writes): CPU time it uses per second of wall time.
//! 2. **Sustained rate**: a writer thread records 5-word events at a given rate into its
//!    CPU's ring of 65,536 slots while a follower on the other CPU polls as `follow` does
//!    (20 ms) and formats every event to text into a sink (what `follow > /dev/null` does);
//!    the rate doubles until the follower loses entries. Next to it, a `dump` of a full ring
//!    of the same size (formatting only, as the decode bench measures).

use std::time::{Duration, Instant};
use ttrace_core::{Config, Kind, Writer};
use ttrace_reader::decode::{Decoder, TimeFormat};
use ttrace_reader::merge::{Filter, Merge};

fn idle(quick: bool) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("dev");
    let _w = Writer::open(&Config {
        ring_slots: 1 << 20,
        cpus: Some(16),
        ..Config::at(&dir)
    })
    .expect("device");
    let dev = devttrace::Reader::open(&dir).expect("reader");
    let mut f = devttrace::Follower::new(&dev);
    // The first poll maps in the pages it probes; from then on, what each poll costs.
    f.poll().expect("poll");
    let wall = Duration::from_secs(if quick { 1 } else { 10 });
    let (start, cpu0) = (Instant::now(), ttrace_benches::thread_cpu());
    let (mut polls, mut sleep) = (0u64, Duration::from_millis(20));
    while start.elapsed() < wall {
        let p = f.poll().expect("poll");
        polls += 1;
        sleep = match p.active {
            true => Duration::from_millis(20),
            false => (sleep * 2).min(Duration::from_millis(100)),
        };
        std::thread::sleep(sleep);
    }
    let cpu = ttrace_benches::thread_cpu() - cpu0;
    println!(
        "idle follow, 16 cpus x 1048576 slots: {polls} polls in {:.1} s, {:.3} ms CPU per second = {:.3} % of a CPU",
        start.elapsed().as_secs_f64(),
        cpu.as_secs_f64() * 1e3 / start.elapsed().as_secs_f64(),
        cpu.as_secs_f64() * 100.0 / start.elapsed().as_secs_f64()
    );
}

/// One run: a writer on CPU 0 at `rate` events per second (paced in batches of 256) for
/// `run`, a follower on CPU 1 formatting everything to a sink; events shown and lost.
fn follow_at(dir: &std::path::Path, rate: f64, run: Duration) -> (u64, u64) {
    let w = Writer::open(&Config {
        ring_slots: 1 << 16,
        cpus: Some(2),
        ..Config::at(dir)
    })
    .expect("device");
    let word = define(&w);
    let dev = devttrace::Reader::open(dir).expect("reader");
    let mut f = devttrace::Follower::new(&dev);
    let (mut shown, mut lost) = (0u64, 0u64);
    let mut sink = Vec::with_capacity(1 << 20);
    let batch = |n| {
        for i in 0..256 {
            w.emit(word, 1 << 32 | 2, &[n + i, 1, 2, 3, 4]);
        }
    };
    // Polls as `ttrace-reader follow` does with its default interval.
    ttrace_benches::paced_and_polled(run, rate, batch, Duration::from_millis(20), || {
        let p = f.poll().expect("poll");
        let mut d = Decoder::new(&p.snapshot, TimeFormat::Relative);
        for item in Merge::snapshot(&p.snapshot, &Filter::default()) {
            d.line(&item, &mut sink);
            shown += 1;
            if sink.len() > 1 << 19 {
                sink.clear();
            }
        }
        lost += p.lost.iter().sum::<u64>();
        p.active
    });
    (shown, lost)
}

fn sustained(quick: bool) {
    let run = Duration::from_secs(if quick { 1 } else { 2 });
    let mut best = 0.0;
    for rate in [0.25e6, 0.5e6, 1e6, 2e6, 3e6, 4e6, 6e6, 8e6] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let (shown, lost) = follow_at(&tmp.path().join("dev"), rate, run);
        println!(
            "follow (20 ms polls, 65536-slot ring) at {:.2} M events/s: {shown} shown, {lost} lost",
            rate / 1e6
        );
        if lost > 0 {
            break;
        }
        best = rate;
        if quick {
            break;
        }
    }
    println!(
        "follow keeps up with {:.2} M events/s into one ring",
        best / 1e6
    );
    // A full ring of the same size, dumped (formatting only).
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("dev");
    let w = Writer::open(&Config {
        ring_slots: 1 << 16,
        cpus: Some(2),
        ..Config::at(&dir)
    })
    .expect("device");
    let word = define(&w);
    for i in 0..1 << 16 {
        w.emit(word, 1 << 32 | 2, &[i, 1, 2, 3, 4]);
    }
    let dev = devttrace::Reader::open(&dir).expect("reader");
    let view = devttrace::View::of(&dev, 0).expect("view");
    let mut sink = Vec::with_capacity(1 << 20);
    let start = Instant::now();
    let mut n = 0u64;
    let mut d = Decoder::new(&view, TimeFormat::Relative);
    for item in Merge::view(&view, &Filter::default()) {
        d.line(&item, &mut sink);
        n += 1;
        if sink.len() > 1 << 19 {
            sink.clear();
        }
    }
    println!(
        "dump of a full 65536-slot ring: {n} events in {:.1} ms = {:.2} M events/s",
        start.elapsed().as_secs_f64() * 1e3,
        n as f64 / start.elapsed().as_secs_f64() / 1e6
    );
}

/// A 5-word tracepoint on `dev`.
fn define(dev: &Writer) -> u64 {
    dev.device()
        .register_tracepoint(&ttrace_core::Definition::untyped(
            "request",
            Kind::Start,
            1,
            "id={id} a={a} b={b:x} c={c} d={d}",
        ))
        .expect("tracepoint")
        .1
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    idle(quick);
    sustained(quick);
}
