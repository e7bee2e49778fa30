//! Decode rate: a full device (2 rings × 2^20 entries of 5 arguments) captured and formatted
//! to text, into a sink. `cargo run --release -p ttrace-benches --bin decode [-- --quick]`

use std::time::Instant;
use ttrace_core::meta::Definition;
use ttrace_core::{Config, Device, Kind};
use ttrace_reader::text::Trace;

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let slots = if quick { 1 << 12 } else { 1 << 20 };
    let tmp = tempfile::tempdir().expect("tempdir");
    let dev = Device::open(&Config {
        ring_slots: slots,
        cpus: Some(2),
        ..Config::at(tmp.path().join("dev"))
    })
    .expect("device");
    let (_, word) = dev
        .register_tracepoint(&Definition {
            name: "request",
            kind: Kind::Start,
            classes: 1,
            format: "id={id} size={size} flags={flags:x} delta={delta:d} user={user}",
            nargs: 5,
        })
        .expect("tracepoint");
    dev.note_thread(1, 2, "worker").expect("thread");
    for ring in 0..2 {
        for i in 0..slots {
            let w = [
                word,
                1 << 32 | 2,
                i,
                i * 3,
                i ^ 0xff,
                (i as i64 - 500) as u64,
                7,
            ];
            dev.ring(ring)
                .write(1_000_000 + i * 100 + ring as u64, 1, &w);
        }
    }
    let events = 2 * slots;
    let mut best = f64::MAX;
    let (mut capture_s, mut format_s) = (0.0, 0.0);
    for _ in 0..if quick { 1 } else { 5 } {
        let t0 = Instant::now();
        let trace = Trace::capture(&dev);
        let t1 = Instant::now();
        trace
            .write_lines(&mut std::io::BufWriter::new(std::io::sink()))
            .expect("sink");
        let t2 = Instant::now();
        assert_eq!(trace.items.len() as u64, events);
        let total = (t2 - t0).as_secs_f64();
        if total < best {
            best = total;
            capture_s = (t1 - t0).as_secs_f64();
            format_s = (t2 - t1).as_secs_f64();
        }
    }
    println!(
        "decode {events} events: {:.2} M events/s to text (capture {:.1} ms = {:.1} M/s, format {:.1} ms = {:.1} M/s)",
        events as f64 / best / 1e6,
        capture_s * 1e3,
        events as f64 / capture_s / 1e6,
        format_s * 1e3,
        events as f64 / format_s / 1e6
    );
}
