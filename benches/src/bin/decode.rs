//! Decode rate: a full device (2 rings × 2^20 entries of 5 arguments) captured and formatted
//! to text, into a sink; and exported to each format (Chrome JSON into a sink, CTF and uftrace
//! into files in the temporary directory), as are a device of entry/exit pairs. `cargo run --release -p ttrace-benches --bin decode [-- --quick]`

use std::time::Instant;
use ttrace_core::Definition;
use ttrace_core::{Config, Kind, Writer};
use ttrace_reader::decode::{Decoder, TimeFormat};
use ttrace_reader::merge::{Filter, Merge};

/// What the events of a benchmark device are.
#[derive(Clone, Copy, PartialEq)]
enum Trace {
    /// Instants (`request`, a START point).
    Instants,
    /// Calls: `call` (ENTRY) and `call_done` (EXIT) in turn, one thread per ring.
    Calls,
}

/// A device in `dir` whose 2 rings of `slots` are full of `trace` events of 5 arguments
/// (decimal, hex, signed).
fn device(dir: &std::path::Path, slots: u64, trace: Trace) -> Writer {
    let dev = Writer::open(&Config {
        ring_slots: slots,
        cpus: Some(2),
        ..Config::at(dir)
    })
    .expect("device");
    let define = |name, kind| {
        dev.device()
            .register_tracepoint(&Definition::untyped(
                name,
                kind,
                1,
                "id={id} size={size} flags={flags:x} delta={delta:d} user={user}",
            ))
            .expect("tracepoint")
            .1
    };
    let words = match trace {
        Trace::Instants => [define("request", Kind::Start); 2],
        Trace::Calls => [define("call", Kind::Entry), define("call_done", Kind::Exit)],
    };
    dev.device().note_thread(1, 2, "worker").expect("thread");
    // Times in the device's life, so that `ttrace-reader decode` takes its entries.
    let base = dev.now();
    for ring in 0..2 {
        let ctx = match trace {
            Trace::Instants => 1 << 32 | 2,
            Trace::Calls => 1 << 32 | (2 + ring as u64),
        };
        for i in 0..slots {
            // Written on the ring's CPU, as a restartable ring's entries are.
            let word = ttrace_layouts::entry::TypeWord(words[i as usize % 2]).with_cpu(ring as u32);
            let w = [word.0, ctx, i, i * 3, i ^ 0xff, (i as i64 - 500) as u64, 7];
            dev.device()
                .mapping()
                .ring(ring)
                .write(base + i * 100 + ring as u64, 1, &w);
        }
    }
    dev
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let slots = if quick { 1 << 12 } else { 1 << 20 };
    let tmp = tempfile::tempdir().expect("tempdir");
    // `--keep DIR`: the device of instants is made there and left, for `mount` and the CLI
    // (and that of calls at `DIR.calls`).
    let kept = args
        .iter()
        .position(|a| a == "--keep")
        .and_then(|i| args.get(i + 1))
        .map(std::path::PathBuf::from);
    let dev = device(
        &kept.clone().unwrap_or_else(|| tmp.path().join("dev")),
        slots,
        Trace::Instants,
    );
    let events = 2 * slots;
    let reader = devttrace::Reader::open(dev.device().reader().dir()).expect("open read-only");
    let mut best = f64::MAX;
    let mut parts = [0.0; 2];
    for _ in 0..if quick { 1 } else { 5 } {
        let t0 = Instant::now();
        let view = devttrace::View::of(&reader, 0).expect("view");
        let t1 = Instant::now();
        let mut sink = Counting(0);
        let lines = Decoder::new(&view, TimeFormat::Relative)
            .write_all(Merge::view(&view, &Filter::default()), &mut sink)
            .expect("sink");
        let t2 = Instant::now();
        assert_eq!(lines, events);
        assert!(sink.0 as u64 > events * 60, "{} bytes", sink.0);
        let total = (t2 - t0).as_secs_f64();
        if total < best {
            best = total;
            parts = [t1 - t0, t2 - t1].map(|d| d.as_secs_f64());
        }
    }
    let (mut snapshot, mut format) = (f64::MAX, f64::MAX);
    for _ in 0..if quick { 1 } else { 5 } {
        let t0 = Instant::now();
        let snap = reader.snapshot().expect("snapshot");
        let t1 = Instant::now();
        let lines = Decoder::new(&snap, TimeFormat::Relative)
            .write_all(Merge::snapshot(&snap, &Filter::default()), &mut Counting(0))
            .expect("sink");
        let t2 = Instant::now();
        assert_eq!(lines, events);
        snapshot = snapshot.min((t1 - t0).as_secs_f64());
        format = format.min((t2 - t1).as_secs_f64());
    }
    let mut one_ring = f64::MAX;
    for _ in 0..if quick { 1 } else { 5 } {
        let t0 = Instant::now();
        let ring = reader.cpu(0).expect("ring");
        one_ring = one_ring.min(t0.elapsed().as_secs_f64());
        assert_eq!(ring.events.len() as u64, slots);
    }
    // A mounted device's `cpu0` (CPU 0's two rings as raw entries), and decoding it back.
    let (mut raw, mut back) = (f64::MAX, f64::MAX);
    let limits = ttrace_reader::raw::Limits::of(&reader.version());
    for _ in 0..if quick { 1 } else { 5 } {
        let t0 = Instant::now();
        let bytes = ttrace_reader::raw::cpu_entries(&reader, 0).expect("entries");
        let t1 = Instant::now();
        let parsed = ttrace_reader::raw::parse(&bytes, &limits).expect("parse");
        let snap = ttrace_reader::raw::snapshot(&reader, vec![parsed]);
        let lines = Decoder::new(&snap, TimeFormat::Relative)
            .write_all(Merge::snapshot(&snap, &Filter::default()), &mut Counting(0))
            .expect("sink");
        let t2 = Instant::now();
        assert_eq!(lines, slots);
        assert_eq!(bytes.len() as u64, slots * 64);
        raw = raw.min((t1 - t0).as_secs_f64());
        back = back.min((t2 - t1).as_secs_f64());
    }
    println!(
        "cpu0 as raw entries ({} MiB, what a mounted cpu0 serves): {:.1} ms = {:.0} MB/s; decoded back to text: {:.2} M events/s",
        (slots * 64) >> 20,
        raw * 1e3,
        (slots * 64) as f64 / raw / 1e6,
        slots as f64 / back / 1e6
    );
    let rate = |s: f64| events as f64 / s / 1e6;
    println!(
        "decode {events} events to text: {:.2} M events/s (index {:.1} ms = {:.1} M/s, merge + copy + format {:.1} ms = {:.1} M/s)",
        rate(best),
        parts[0] * 1e3,
        rate(parts[0]),
        parts[1] * 1e3,
        rate(parts[1]),
    );
    // With `--keep DIR`, the device of calls is left too, at `DIR.calls`.
    let calls_dir =
        (kept.as_ref()).map_or_else(|| tmp.path().join("calls"), |k| k.with_extension("calls"));
    let calls = device(&calls_dir, slots, Trace::Calls);
    let calls = devttrace::Reader::open(calls.device().reader().dir()).expect("open read-only");
    // `report`, view included, over both devices, next to dump's rate above.
    for (reader, what) in [(&reader, "events"), (&calls, "entry/exit events")] {
        let mut report = f64::MAX;
        for _ in 0..if quick { 1 } else { 5 } {
            let t0 = Instant::now();
            let view = devttrace::View::of(reader, 0).expect("view");
            let r = ttrace_reader::report::build(&view, &Filter::default(), &Default::default());
            report = report.min(t0.elapsed().as_secs_f64());
            assert_eq!(r.events, events);
        }
        println!(
            "report over {events} {what}: {:.2} M events/s ({:.1} ms; dump: {:.2} M events/s)",
            rate(report),
            report * 1e3,
            rate(best)
        );
    }
    for (reader, what) in [(&reader, "events"), (&calls, "entry/exit events")] {
        for (format, secs, bytes) in exports(reader, tmp.path(), events, quick) {
            let size = bytes.map_or(String::new(), |b| {
                format!(
                    ", {:.1} MB, {:.1} bytes an event",
                    b as f64 / 1e6,
                    b as f64 / events as f64
                )
            });
            println!(
                "export {events} {what} to {format}: {:.2} M events/s ({:.1} ms){size}",
                rate(secs),
                secs * 1e3
            );
        }
    }
    println!(
        "consistent snapshot of one ring ({slots} slots): {:.1} ms = {:.1} ns a slot",
        one_ring * 1e3,
        one_ring * 1e9 / slots as f64
    );
    println!(
        "consistent snapshot (every event copied): {:.1} ms = {:.1} M events/s; its merge + format: {:.1} ms = {:.1} M events/s",
        snapshot * 1e3,
        rate(snapshot),
        format * 1e3,
        rate(format)
    );
}

/// The best time of each export of `reader`'s `events`, end to end (view included), and
/// the bytes of the formats written as one stream (into a counting sink); CTF and uftrace
/// write into `tmp`.
fn exports(
    reader: &devttrace::Reader,
    tmp: &std::path::Path,
    events: u64,
    quick: bool,
) -> Vec<(&'static str, f64, Option<usize>)> {
    let mut exports = Vec::new();
    for format in ["chrome", "perfetto", "ctf", "uftrace"] {
        let mut best = f64::MAX;
        let mut bytes = None;
        for round in 0..if quick { 1 } else { 5 } {
            let out = tmp.join(format!("{format}-{round}"));
            let t0 = Instant::now();
            let view = devttrace::View::of(reader, 0).expect("view");
            let items = Merge::view(&view, &Filter::default());
            let mut sink = Counting(0);
            let written = match format {
                "chrome" => ttrace_reader::export::chrome::write(
                    (&view).into(),
                    &view.cpus,
                    items,
                    &mut sink,
                    |_| {},
                ),
                "perfetto" => ttrace_reader::export::perfetto::write(
                    (&view).into(),
                    &view.cpus,
                    items,
                    &[],
                    &mut sink,
                    |_| {},
                ),
                "uftrace" => ttrace_reader::export::uftrace::write(
                    (&view).into(),
                    &view.cpus,
                    items,
                    &out,
                    |_| {},
                ),
                _ => ttrace_reader::export::ctf::write(
                    (&view).into(),
                    &view.cpus,
                    items,
                    &out,
                    |_| {},
                ),
            }
            .expect("export");
            best = best.min(t0.elapsed().as_secs_f64());
            assert_eq!(written.events, events);
            let _ = std::fs::remove_dir_all(&out);
            bytes = (sink.0 > 0).then_some(sink.0);
        }
        exports.push((format, best, bytes));
    }
    exports
}

/// A sink that counts the bytes written to it.
struct Counting(usize);

impl std::io::Write for Counting {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
