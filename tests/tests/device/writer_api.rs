//! The device through its public API, on real memory-mapped files in temporary directories.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use ttrace_core::Definition;
use ttrace_core::{Config, Kind, Writer};
use ttrace_layouts::aux::{aux_ref_parts, AuxTag, AUX_MAX_PAYLOAD};
use ttrace_layouts::entry::TypeWord;

fn small(dir: &std::path::Path) -> Config {
    Config {
        ring_slots: 16,
        aux_bytes: 1 << 14,
        meta_bytes: 64 << 10,
        max_tracepoints: 64,
        cpus: Some(2),
        calibration: Duration::from_millis(2),
        ..Config::at(dir.join("dev"))
    }
}

fn def(name: &'static str, classes: u64, nargs: u8) -> Definition {
    Definition {
        name,
        kind: Kind::Start,
        classes,
        format: "",
        nargs,
        types: &[],
        tables: &[],
        role: devttrace::Role::Point,
    }
}

const CTX: u64 = 1 << 32 | 2;

#[test]
fn device_directory_is_private_and_complete() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dev = Writer::open(&small(tmp.path())).unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(dev.device().reader().dir()), 0o700);
    let mut names: Vec<String> = std::fs::read_dir(dev.device().reader().dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "aux",
            "cpu0",
            "cpu0.shared",
            "cpu1",
            "cpu1.shared",
            "header",
            "meta"
        ]
    );
    for n in names {
        assert_eq!(mode(&dev.device().reader().dir().join(n)), 0o600);
    }
    // No temporary directory is left behind.
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
}

#[test]
fn attaching_shares_rings_and_refuses_another_layout_version() {
    let tmp = tempfile::tempdir().unwrap();
    let a = Writer::open(&small(tmp.path())).unwrap();
    let b = Writer::attach(a.device().reader().dir()).unwrap();
    assert!(a.emit(TypeWord::new(Kind::Start, 1, 0).0, CTX, &[77]));
    let s: usize = (0..b.device().mapping().num_rings())
        .map(|r| {
            b.device()
                .mapping()
                .ring(r)
                .reader()
                .snapshot()
                .events
                .len()
        })
        .sum();
    assert_eq!(s, 1, "the second mapping sees the first one's entry");

    // A device of another major version is refused with a clear error.
    let mut header = std::fs::read(a.device().reader().dir().join("header")).unwrap();
    header[10] ^= 0x7; // header_version's major part
    std::fs::write(a.device().reader().dir().join("header"), &header).unwrap();
    let err = Writer::attach(a.device().reader().dir())
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("header version") && err.contains("not supported"),
        "{err}"
    );
}

#[test]
fn hot_plugged_cpus_fold_onto_existing_rings() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = Writer::open(&small(tmp.path())).unwrap();
    let w = TypeWord::new(Kind::Start, 1, 0).0;
    dev.device()
        .mapping()
        .shared_ring(5)
        .write(10, 1, &[w, CTX, 5, 0, 0, 0, 0]);
    dev.device()
        .mapping()
        .shared_ring(u32::MAX)
        .write(20, 1, &[w, CTX, 6, 0, 0, 0, 0]);
    assert_eq!(
        dev.device()
            .mapping()
            .ring(3)
            .reader()
            .snapshot()
            .events
            .len(),
        2,
        "5 % 2 and u32::MAX % 2 are CPU 1, whose shared ring is ring 2 + 1"
    );
}

#[test]
fn aux_wraps_and_first_last_describe_exactly_the_records_kept() {
    let tmp = tempfile::tempdir().unwrap();
    // One CPU's buffer: this thread's, pinned to one CPU, which has its rings in the device
    // (its restartable ring's buffer, or its shared one's).
    let cpu = ttrace_tests::pin(0);
    let n = (cpu + 1).max(2);
    let dev = Writer::open(&Config {
        cpus: Some(n as u32),
        ..small(tmp.path())
    })
    .unwrap();
    let size = dev.device().mapping().header().aux_size;
    let mut written = BTreeMap::new();
    let mut total = 0u64;
    let buffer = if dev.restartable() { cpu } else { n + cpu };
    for i in 0..400u64 {
        let text = format!("record {i} {}", "x".repeat((i * 37 % 200) as usize));
        let word = dev
            .aux_write(AuxTag::String, CTX, text.as_bytes())
            .expect("not dropped");
        assert_eq!(
            aux_ref_parts(word),
            Some((buffer, total)),
            "records are contiguous"
        );
        total += ttrace_layouts::align8(24 + text.len() as u64);
        written.insert(total - ttrace_layouts::align8(24 + text.len() as u64), text);
    }
    assert!(total > 3 * size, "the buffer wrapped several times");
    let all = dev.device().reader().aux().unwrap();
    let snap = &all.buffers[buffer];
    assert_eq!(snap.last, total);
    assert!(snap.last - snap.first <= size);
    assert_eq!((snap.incomplete, snap.corrupt), (0, false));
    // Every record at or after `first` is present and intact; none before it is.
    let expected: Vec<(u64, String)> = written
        .range(snap.first..)
        .map(|(o, t)| (*o, t.clone()))
        .collect();
    let got: Vec<(u64, String)> = snap
        .records()
        .map(|r| (r.offset, String::from_utf8(r.bytes.to_vec()).unwrap()))
        .collect();
    assert_eq!(got, expected);
    assert!(snap
        .records()
        .all(|r| r.ctx == CTX && r.tag == AuxTag::String as u16));
    // The oldest kept record is the one right after the newest that no longer fits.
    assert!(total - written.range(..snap.first).next_back().unwrap().0 > size);
}

#[test]
fn long_aux_strings_are_truncated_and_flagged() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = Writer::open(&small(tmp.path())).unwrap();
    let long = vec![b'a'; 10_000];
    let word = dev.aux_write(AuxTag::String, CTX, &long).unwrap();
    let snap = dev.device().reader().aux().unwrap();
    let r = snap.get(word).unwrap();
    assert!(r.truncated);
    assert_eq!(r.bytes.len() as u64, AUX_MAX_PAYLOAD);
    // A shared ring's buffer also counts it (a restartable one cannot keep that count).
    let (buffer, _) = aux_ref_parts(word).unwrap();
    assert_eq!(
        dev.device()
            .mapping()
            .ring_header(buffer)
            .aux_truncated
            .load(std::sync::atomic::Ordering::Relaxed),
        u64::from(buffer >= dev.device().mapping().num_cpus() as usize)
    );
}

#[test]
fn mask_commands_change_only_the_bits_they_name() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = Writer::open(&small(tmp.path())).unwrap();
    let (sched, _) = dev
        .device()
        .register_tracepoint(&def("sched_switch", 0b01, 0))
        .unwrap();
    let (io, _) = dev
        .device()
        .register_tracepoint(&def("io_read", 0b10, 0))
        .unwrap();
    let word = |id: u16| {
        let (again, w) = dev
            .device()
            .register_tracepoint(&def(
                if id == sched {
                    "sched_switch"
                } else {
                    "io_read"
                },
                if id == sched { 1 } else { 2 },
                0,
            ))
            .unwrap();
        assert_eq!(again, id, "registration is idempotent");
        w
    };
    assert_eq!(
        dev.device().reader().mask(),
        u64::MAX,
        "a new device records everything"
    );
    dev.device().apply_text("setmask 0x0 0x3").unwrap();
    assert_eq!(dev.device().reader().mask(), !3u64);
    assert_eq!((word(sched), word(io)), (0, 0));
    // setbits adds bits and keeps the rest (the Akaros sketch replaced the whole mask).
    dev.device().apply_text("setbits 0x1").unwrap();
    assert_eq!(dev.device().reader().mask(), !2u64);
    assert_ne!(word(sched), 0);
    assert_eq!(word(io), 0);
    dev.device().apply_text("setmask 2 3").unwrap();
    assert_eq!((word(sched) == 0, word(io) == 0), (true, false));
    dev.device().apply_text("clrbits 0x2").unwrap();
    assert_eq!(dev.device().reader().mask() & 3, 0);
    // A malformed command changes nothing.
    for bad in [
        "setbits",
        "setbits 0xzz",
        "setmask 1",
        "frob",
        "",
        "enable a b",
    ] {
        assert!(dev.device().apply_text(bad).is_err(), "{bad:?} accepted");
    }
    assert_eq!(dev.device().reader().mask() & 3, 0);
    assert!(dev.device().reader().ctl().starts_with("setmask 0x"));
}

#[test]
fn wildcards_enable_and_disable_by_name_now_and_for_later_registrations() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = Writer::open(&small(tmp.path())).unwrap();
    let reg = |n: &'static str| dev.device().register_tracepoint(&def(n, 1, 0)).unwrap();
    let (switch, _) = reg("sched_switch");
    reg("io_read");
    assert_eq!(
        dev.device().apply_text("disable sched*").unwrap(),
        1,
        "only io_read stays enabled"
    );
    assert_eq!(
        reg("sched_wakeup").1,
        0,
        "a later registration follows the rules"
    );
    assert_ne!(reg("io_write").1, 0);
    dev.device().apply_text("enable sched_sw?tch").unwrap();
    assert_ne!(reg("sched_switch").1, 0);
    assert_eq!(reg("sched_wakeup").1, 0);
    assert_eq!(reg("sched_switch").0, switch);
    assert_eq!(
        dev.device()
            .reader()
            .ctl()
            .lines()
            .skip(1)
            .collect::<Vec<_>>(),
        ["disable sched*", "enable sched_sw?tch"]
    );
    dev.device().apply_text("reset").unwrap();
    assert_ne!(reg("sched_wakeup").1, 0);
}

#[test]
fn metadata_survives_rings_and_aux_wrapping_many_times() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = Writer::open(&small(tmp.path())).unwrap();
    let names = ["alpha", "beta", "gamma"];
    let words: Vec<u64> = names
        .iter()
        .map(|n| {
            dev.device()
                .register_tracepoint(&Definition::untyped(n, Kind::Exit, 1, "v={v}"))
                .unwrap()
                .1
        })
        .collect();
    dev.device().note_thread(1, 2, "worker-1").unwrap();
    dev.device().note_process(1, "server").unwrap();
    for i in 0..10_000u64 {
        dev.emit(words[(i % 3) as usize], CTX, &[i]);
        if i % 10 == 0 {
            dev.aux_write(AuxTag::String, CTX, format!("message {i}").as_bytes());
        }
    }
    let m = dev.device().reader().metadata();
    assert_eq!(
        m.tracepoints
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        names
    );
    assert!(m
        .tracepoints
        .iter()
        .all(|t| t.format == "v={v}" && t.kind == Kind::Exit && t.nargs == 1));
    assert_eq!(m.thread_name(1, 2), Some("worker-1"));
    assert_eq!(m.process_name(1), Some("server"));
    assert_eq!(m.error, None);
}

#[test]
fn names_of_dead_threads_with_no_event_left_are_reclaimed_not_dropped() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cfg = small(tmp.path());
    cfg.meta_bytes = ttrace_layouts::meta::records_offset(64) + 4096;
    let dev = Writer::open(&cfg).unwrap();
    // Ids no thread has: dead as soon as named. A half holds only a few dozen names.
    for tid in 0..10_000 {
        dev.device()
            .note_thread(4_000_000, tid, "a thread with a long-ish name")
            .unwrap();
    }
    let h = dev.device().mapping().header();
    assert_eq!(h.names_dropped.load(Relaxed), 0);
    assert!(h.names_generation.load(Relaxed) > 100);
    assert!(h.names_reclaimed.load(Relaxed) > 9_000);
    // The last one is still there (no compaction since it was written can have run).
    let m = dev.device().reader().metadata();
    assert_eq!(
        m.thread_name(4_000_000, 9_999),
        Some("a thread with a long-ish name")
    );
}

#[test]
fn a_live_threads_name_survives_compactions_and_a_dead_ones_does_not() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cfg = small(tmp.path());
    cfg.meta_bytes = ttrace_layouts::meta::records_offset(64) + 4096;
    let dev = Writer::open(&cfg).unwrap();
    let me = devttrace::thread::context();
    let (pid, tid) = ((me >> 32) as u32, me as u32);
    dev.device().note_process(pid, "me").unwrap();
    dev.device().note_thread(pid, tid, "alive").unwrap();
    // An id whose task is gone for certain: a child's, reaped by `wait` (a joined thread's
    // task can linger in /proc for a moment after the join returns).
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    dev.device().note_thread(pid, dead, "gone").unwrap();
    for t in 0..1000 {
        dev.device().note_thread(4_000_000, t, "filler").unwrap();
    }
    assert!(
        dev.device()
            .mapping()
            .header()
            .names_generation
            .load(Relaxed)
            > 10
    );
    let m = dev.device().reader().metadata();
    assert_eq!(m.thread_name(pid, tid), Some("alive"));
    assert_eq!(m.process_name(pid), Some("me"));
    assert_eq!(m.thread_name(pid, dead), None);
}

#[test]
fn names_still_needed_by_events_are_kept_until_the_oldest_are_evicted() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cfg = small(tmp.path());
    cfg.meta_bytes = ttrace_layouts::meta::records_offset(64) + 4096;
    cfg.ring_slots = 256;
    let dev = Writer::open(&cfg).unwrap();
    let word = dev
        .device()
        .register_tracepoint(&def("ev", 1, 1))
        .unwrap()
        .1;
    // Each dead thread writes one event that stays in the rings: its name is needed. A
    // half holds about 20 of them: a full one evicts the oldest, never drops the new.
    for tid in 0..100u32 {
        dev.device()
            .note_thread(4_000_000, tid, "needed-name")
            .unwrap();
        assert!(dev.emit(word, 4_000_000u64 << 32 | tid as u64, &[tid as u64]));
    }
    let h = dev.device().mapping().header();
    assert_eq!(h.names_dropped.load(Relaxed), 0);
    // None was reclaimed while its event was there: each is kept, or evicted and counted.
    assert_eq!(h.names_reclaimed.load(Relaxed), 0);
    let m = dev.device().reader().metadata();
    assert!(m.names_evicted > 0 && m.threads.len() > 10);
    assert_eq!(m.threads.len() as u64 + m.names_evicted, 100);
    // The newest are kept; an evicted one's event shows no name (not another's).
    assert_eq!(m.thread_name(4_000_000, 99), Some("needed-name"));
    let events = dev.device().reader().snapshot().unwrap();
    let index = devttrace::TaskIndex::threads(&m);
    let (mut named, mut unnamed) = (0, 0);
    for e in events.cpus.iter().flat_map(|r| &r.events) {
        match index.at(e.ctx, e.stamp) {
            Some(c) => {
                assert_eq!(m.threads[c.index].tid as u64, e.args()[0]);
                named += 1;
            }
            None => unnamed += 1,
        }
    }
    assert_eq!((named, named + unnamed), (m.threads.len(), 100));
}

#[test]
fn racing_creators_make_exactly_one_device() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = small(tmp.path());
    let devs: Vec<Writer> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8)
            .map(|_| s.spawn(|| Writer::open(&cfg).unwrap()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // All of them share one set of files: an entry written through one is seen by all.
    devs[3].device().mapping().ring(0).write(
        5,
        1,
        &[TypeWord::new(Kind::Start, 0, 0).0, CTX, 0, 0, 0, 0, 0],
    );
    assert!(devs.iter().all(|d| d
        .device()
        .mapping()
        .ring(0)
        .reader()
        .snapshot()
        .events
        .len()
        == 1));
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        1,
        "no stray temporary directory"
    );
}

#[test]
fn a_writer_repairs_inconsistent_aux_offsets_instead_of_trusting_them() {
    use std::sync::atomic::Ordering::Relaxed;
    let tmp = tempfile::tempdir().unwrap();
    let dev = Writer::open(&small(tmp.path())).unwrap();
    ttrace_tests::pin(0);
    let word = dev.aux_write(AuxTag::String, CTX, b"before").unwrap();
    let (buffer, _) = aux_ref_parts(word).unwrap();
    // Damage: `first` beyond `last`.
    dev.device()
        .mapping()
        .ring_header(buffer)
        .aux_first
        .store(1 << 40, Relaxed);
    assert!(
        dev.device().reader().aux().is_err(),
        "a reader reports the damage"
    );
    let word = dev.aux_write(AuxTag::String, CTX, b"after").unwrap();
    assert_eq!(aux_ref_parts(word).unwrap().0, buffer);
    let snap = dev.device().reader().aux().unwrap();
    assert_eq!(snap.records().count(), 1);
    assert_eq!(snap.get(word).unwrap().bytes, b"after");
}

#[test]
fn a_read_only_attach_sees_live_updates_and_cannot_change_the_device() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dev = Writer::open(&small(tmp.path())).unwrap();
    let w = TypeWord::new(Kind::Start, 1, 0).0;
    dev.device()
        .mapping()
        .ring(0)
        .write(10, 1, &[w, CTX, 1, 0, 0, 0, 0]);
    // Even with every file read-only for its owner.
    for e in std::fs::read_dir(dev.device().reader().dir()).unwrap() {
        std::fs::set_permissions(e.unwrap().path(), std::fs::Permissions::from_mode(0o400))
            .unwrap();
    }
    let reader = devttrace::Reader::open(dev.device().reader().dir()).unwrap();
    assert_eq!(reader.ring(0).unwrap().snapshot().events.len(), 1);
    // A write after the reader mapped the files is visible to it.
    dev.device()
        .mapping()
        .ring(0)
        .write(20, 1, &[w, CTX, 2, 0, 0, 0, 0]);
    let args: Vec<u64> = reader
        .ring(0)
        .unwrap()
        .snapshot()
        .events
        .iter()
        .map(|e| e.args()[0])
        .collect();
    assert_eq!(args, [1, 2]);
    // It cannot change the device: a `Reader` has no control methods (a `compile_fail`
    // example on `devttrace::Reader` checks that such a call does not build).
}
