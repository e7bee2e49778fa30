//! The restartable sections' assembly against the Rust model of the same protocol
//! (`devttrace::ring` and `devttrace::aux`), through the writer's public API.
#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use devttrace::aux::HeapAux;
use devttrace::ring::HeapRing;
use ttrace_core::{Config, Kind, Writer};
use ttrace_layouts::aux::{aux_ref_parts, AuxPath, AuxTag};
use ttrace_layouts::entry::TypeWord;

/// Lets the calling thread run only on the first CPU it may run on (not CPU 0 where a
/// cpuset or `taskset` leaves that out), and returns that CPU.
fn pin_first() -> usize {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity fills it, for the
    // calling thread; sched_setaffinity only reads the one made here.
    unsafe {
        let mut set: libc::cpu_set_t = core::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &mut set),
            0,
            "sched_getaffinity: {}",
            std::io::Error::last_os_error()
        );
        let cpu = (0..libc::CPU_SETSIZE as usize)
            .find(|&c| libc::CPU_ISSET(c, &set))
            .expect("a CPU to run on");
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &set),
            0,
            "sched_setaffinity: {}",
            std::io::Error::last_os_error()
        );
        cpu
    }
}

fn words(ring: &devttrace::ring::RingWriter<'_, impl devttrace::ring::SlotWords>) -> Vec<u64> {
    use devttrace::sync::AtomicWord;
    ring.slots()
        .iter()
        .flat_map(|s| s.words().iter().map(|w| w.load(Relaxed)))
        .collect()
}

/// A device of 16-slot rings and 16 KiB aux buffers in `tmp`, the calling thread pinned to
/// a CPU that has its rings in it: the device and that CPU.
fn small_device(tmp: &tempfile::TempDir) -> (Writer, usize) {
    let cpu = pin_first();
    let dev = Writer::open(&Config {
        ring_slots: 16,
        aux_bytes: 1 << 14,
        cpus: Some(devttrace::config::configured_cpus().max(cpu as u32 + 1)),
        calibration: std::time::Duration::from_millis(2),
        ..Config::at(tmp.path().join("dev"))
    })
    .unwrap();
    (dev, cpu)
}

/// The assembly stores what the Rust model of the same sequence stores: every word of
/// every slot, the head and the last stamp after entries and continued entries that wrap
/// a small ring, and every word of the aux buffer after records that wrap it. (Where
/// this process has no rseq registration, the writes must go to the shared rings.)
#[test]
fn the_assembly_stores_what_the_model_stores() {
    let tmp = tempfile::tempdir().unwrap();
    let (dev, cpu) = small_device(&tmp);
    let ring = if dev.restartable() {
        cpu
    } else {
        dev.device().mapping().shared_ring_index(cpu as u32)
    };
    let model = HeapRing::<AtomicU64>::new(16);
    let last = AtomicU64::new(0);
    let ctx = 5 << 32 | 6;
    // Pairs where `i` is a multiple of 3 or 7: among them one at the ring's last slot, its
    // continuation in slot 0.
    let mut wrapped = false;
    for i in 0..40u64 {
        let nargs = if i % 3 == 0 || i % 7 == 0 { 12 } else { 5 };
        wrapped |= nargs == 12 && model.head.load(Relaxed) % 16 == 15;
        let word = TypeWord::new(Kind::Start, nargs, 3).0;
        let args: [u64; 12] = core::array::from_fn(|k| i * 100 + k as u64);
        if nargs == 12 {
            assert!(dev.emit(word, ctx, &args));
        } else {
            assert!(dev.emit(word, ctx, &<[u64; 5]>::try_from(&args[..5]).unwrap()));
        }
        if !dev.restartable() {
            continue;
        }
        let stamp = dev.device().mapping().ring(ring).slots()
            [(model.head.load(Relaxed) & 15) as usize]
            .words[0]
            .load(Relaxed);
        let mut parent = [0u64; 7];
        parent[0] = TypeWord(word).with_cpu(cpu as u32).0;
        parent[1] = ctx;
        parent[2..].copy_from_slice(&args[..5]);
        let cont: [u64; 7] = args[5..].try_into().unwrap();
        let cont = (nargs == 12).then_some(&cont);
        let m = model.writer();
        assert_eq!(
            m.write_restartable(&last, stamp, &parent, cont, usize::MAX),
            Some(stamp)
        );
        assert_eq!(
            words(&dev.device().mapping().ring(ring)),
            words(&model.writer()),
            "entry {i}"
        );
        assert_eq!(
            dev.device().mapping().ring(ring).reader().head(),
            model.head.load(Relaxed)
        );
        assert_eq!(
            dev.device()
                .mapping()
                .ring_header(ring)
                .last_stamp
                .load(Relaxed),
            last.load(Relaxed)
        );
    }
    let events: usize = (0..dev.device().mapping().num_rings())
        .map(|r| {
            dev.device()
                .mapping()
                .ring(r)
                .reader()
                .snapshot()
                .events
                .len()
        })
        .sum();
    assert!(wrapped || !dev.restartable(), "a pair wrapped");
    assert_eq!(
        events,
        16 - 5,
        "the last 16 slots hold 11 events (5 continued)"
    );
    // Aux records of every length class, wrapping the 16 KiB buffer several times.
    let aux = HeapAux::<AtomicU64>::new(1 << 11);
    for i in 0..300u64 {
        let bytes: Vec<u8> = (0..(i * 37 % 300)).map(|k| (k + i) as u8).collect();
        let w = dev.aux_write(AuxTag::String, ctx, &bytes).unwrap();
        let (buffer, offset) = aux_ref_parts(w).unwrap();
        assert_eq!(buffer, ring);
        if !dev.restartable() {
            continue;
        }
        let path = AuxPath::new(AuxTag::String, cpu as u32, bytes.len() as u64, false);
        let start = aux
            .writer()
            .write_restartable(path, 0, ctx, &bytes, usize::MAX);
        assert_eq!(start, Some(offset));
        let a = dev.device().mapping().aux(ring);
        let got: Vec<u64> = a.words().iter().map(|w| w.load(Relaxed)).collect();
        let want: Vec<u64> = aux.words.iter().map(|w| w.load(Relaxed)).collect();
        assert_eq!(got, want, "record {i}");
        assert_eq!(
            (a.reader().first(), a.reader().last()),
            (aux.first.load(Relaxed), aux.last.load(Relaxed))
        );
    }
}

/// The combined section (an event and its strings in one section) stores what the model of
/// the same section stores: every word of the ring and of the aux buffer, the head, the last
/// stamp and the buffer's offsets, after events of one slot and of two with zero to three
/// strings (short ones copied word by word, long ones with `rep movsb`, records that wrap
/// the buffer and records that overwrite several older ones).
#[test]
fn the_combined_section_stores_what_the_model_stores() {
    use devttrace::restartable::{write_event, StringArg};
    use ttrace_core::args::Strings;
    let tmp = tempfile::tempdir().unwrap();
    let (dev, cpu) = small_device(&tmp);
    assert!(
        dev.restartable(),
        "this test needs rseq (glibc 2.35 or later, registered)"
    );
    let model = HeapRing::<AtomicU64>::new(16);
    let aux = HeapAux::<AtomicU64>::new(1 << 11);
    let last = AtomicU64::new(0);
    let ctx = 5 << 32 | 6;
    let texts: Vec<Vec<u8>> = (0..200u64)
        .map(|i| {
            let len = [0, 5, 8, 64, 300, 1023, 4000][(i % 7) as usize] + (i % 3) as usize;
            (0..len).map(|k| (k as u64 * 7 + i) as u8).collect()
        })
        .collect();
    for i in 0..200u64 {
        let nargs = if i % 2 == 0 { 12 } else { 5 };
        let word = TypeWord::new(Kind::Start, nargs, 3).0;
        let mut args: [u64; 12] = core::array::from_fn(|k| i * 100 + k as u64);
        // Strings at these argument indices (within the event's arguments).
        let at: Vec<usize> = [1usize, 4, 9]
            .into_iter()
            .take((i % 4) as usize)
            .filter(|&k| k < nargs as usize)
            .collect();
        let mut strings = Strings::new();
        let mut model_strings = Vec::new();
        for k in 0..nargs as usize {
            if let Some(n) = at.iter().position(|&a| a == k) {
                let bytes = &texts[(i as usize + n) % texts.len()];
                strings.push(bytes);
                model_strings.push(StringArg {
                    word: k + 2,
                    path: AuxPath::new(AuxTag::String, cpu as u32, bytes.len() as u64, false),
                    bytes,
                });
            } else {
                strings.pass();
            }
        }
        let ok = if nargs == 12 {
            dev.emit_strings(word, ctx, &args, &strings)
        } else {
            dev.emit_strings(
                word,
                ctx,
                &<[u64; 5]>::try_from(&args[..5]).unwrap(),
                &strings,
            )
        };
        assert!(ok, "event {i}");
        let head = model.head.load(Relaxed);
        let stamp =
            dev.device().mapping().ring(cpu).slots()[(head & 15) as usize].words[0].load(Relaxed);
        let mut event = [0u64; 14];
        event[0] = TypeWord(word).with_cpu(cpu as u32).0;
        event[1] = ctx;
        for k in &at {
            args[*k] = 0;
        }
        event[2..2 + nargs as usize].copy_from_slice(&args[..nargs as usize]);
        let got = write_event(
            &model.writer(),
            &last,
            &aux.writer(),
            cpu,
            stamp,
            &mut event,
            nargs == 12,
            &model_strings,
            usize::MAX,
        );
        assert_eq!(got, Some(stamp), "event {i}");
        assert_eq!(
            words(&dev.device().mapping().ring(cpu)),
            words(&model.writer()),
            "event {i}: the ring"
        );
        assert_eq!(
            dev.device().mapping().ring(cpu).reader().head(),
            model.head.load(Relaxed)
        );
        assert_eq!(
            dev.device()
                .mapping()
                .ring_header(cpu)
                .last_stamp
                .load(Relaxed),
            last.load(Relaxed)
        );
        let a = dev.device().mapping().aux(cpu);
        let got: Vec<u64> = a.words().iter().map(|w| w.load(Relaxed)).collect();
        let want: Vec<u64> = aux.words.iter().map(|w| w.load(Relaxed)).collect();
        assert_eq!(got, want, "event {i}: the aux buffer");
        assert_eq!(
            (a.reader().first(), a.reader().last()),
            (aux.first.load(Relaxed), aux.last.load(Relaxed)),
            "event {i}"
        );
    }
}
