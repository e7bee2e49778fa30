//! A device filled to the brim, for the measurements of what reading or saving one costs.

use devttrace::{ArgType, Config, Definition, Device, Kind};
use std::path::Path;
use ttrace_layouts::aux::{aux_ref, AuxPath, AuxTag};
use ttrace_layouts::device::{CLASS_MESSAGES, INFO_FORMAT, INFO_NAME};
use ttrace_layouts::entry::TypeWord;

/// Makes the device at `dir` and fills every restartable ring and its aux buffer; returns
/// the bytes of the rings and of the aux records in use.
pub fn fill(dir: &Path, cpus: u32, slots: u64, aux: u64) -> (u64, u64) {
    let dev = Device::open(&Config {
        cpus: Some(cpus),
        ring_slots: slots,
        aux_bytes: aux,
        ..Config::at(dir)
    })
    .expect("the device");
    let define = |name, format| {
        dev.register_tracepoint(&Definition::untyped(name, Kind::Start, 1, format))
            .expect("a tracepoint")
            .1
    };
    let request = define(
        "request",
        "id={id} size={size} flags={flags:x} delta={delta:d} user={user}",
    );
    let wide = define(
        "wide",
        "a={a} b={b} c={c} d={d} e={e} f={f} g={g} h={h} i={i} j={j} k={k:x} l={l}",
    );
    let open = define("open", "path={path:s} fd={fd}");
    // The built-in tracepoint of `info()` messages.
    let info = dev
        .register_tracepoint(&Definition {
            types: &[ArgType::Str],
            ..Definition::untyped(INFO_NAME, Kind::Start, CLASS_MESSAGES, INFO_FORMAT)
        })
        .expect("the info tracepoint")
        .1;
    let map = dev.mapping();
    let (pid, tid) = (std::process::id(), 1);
    dev.note_process(pid, "memory").expect("a process name");
    let mut in_use = (0, 0);
    for r in 0..cpus as usize {
        dev.note_thread(pid, tid + r as u32, &format!("worker-{r}"))
            .expect("a thread name");
        let ctx = (pid as u64) << 32 | (tid as u64 + r as u64);
        let ring = map.ring(r);
        let last = &map.ring_header(r).last_stamp;
        let buffer = map.aux(r);
        let start = map.now();
        let mut i = 0u64;
        while ring.reader().head() + 2 <= slots {
            let t = start + i * 20;
            let tw = |w: u64| TypeWord(w).with_cpu(r as u32).0;
            match i % 8 {
                0 => {
                    let a: [u64; 12] = core::array::from_fn(|k| i + k as u64);
                    let mut parent = [0u64; 7];
                    parent[0] = tw(wide);
                    parent[1] = ctx;
                    parent[2..].copy_from_slice(&a[..5]);
                    let cont: [u64; 7] = a[5..].try_into().expect("seven words");
                    ring.write_restartable(last, t, &parent, Some(&cont), usize::MAX);
                }
                1 | 2 => {
                    let text = format!("/srv/data/{r}/{i:016x}/part-{:08}.bin", i * 7);
                    let path = AuxPath::new(AuxTag::String, r as u32, text.len() as u64, false);
                    let at = buffer
                        .write_restartable(path, 0, ctx, text.as_bytes(), usize::MAX)
                        .expect("an aux record");
                    let words = [tw(open), ctx, aux_ref(r, at), i, 0, 0, 0];
                    ring.write_restartable(last, t, &words, None, usize::MAX);
                }
                5 if i % 64 == 5 => {
                    let text = format!("checkpoint {i} of ring {r}");
                    let path = AuxPath::new(AuxTag::String, r as u32, text.len() as u64, false);
                    let at = buffer
                        .write_restartable(path, 0, ctx, text.as_bytes(), usize::MAX)
                        .expect("an aux record");
                    let words = [tw(info), ctx, aux_ref(r, at), 0, 0, 0, 0];
                    ring.write_restartable(last, t, &words, None, usize::MAX);
                    let words = [tw(request), ctx, i, i * 3, i ^ 0xff, 7, 8];
                    ring.write_restartable(last, t, &words, None, usize::MAX);
                }
                _ => {
                    let words = [
                        tw(request),
                        ctx,
                        i,
                        i * 3,
                        i ^ 0xff,
                        (i as i64 - 500) as u64,
                        7,
                    ];
                    ring.write_restartable(last, t, &words, None, usize::MAX);
                }
            }
            i += 1;
        }
        in_use.0 += ring.reader().head().min(slots) * 64;
        in_use.1 += buffer.reader().last() - buffer.reader().first();
    }
    in_use
}
