//! Several processes writing one device.

use std::process::Command;
use ttrace_core::Device;

#[test]
fn two_processes_share_rings_aux_and_tracepoint_ids() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let events = 2000u64;
    let children: Vec<_> = (1..=2u64)
        .map(|tag| {
            Command::new(env!("CARGO_BIN_EXE_ttrace-test-writer"))
                .arg(&dir)
                .arg(events.to_string())
                .arg(tag.to_string())
                .spawn()
                .unwrap()
        })
        .collect();
    let pids: Vec<u32> = children.iter().map(|c| c.id()).collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }

    let dev = Device::attach(&dir).unwrap();
    let meta = dev.metadata();
    // One definition per tracepoint, whichever process registered it first.
    let names: Vec<&str> = meta.tracepoints.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names.iter().filter(|n| **n == "shared_event").count(),
        1,
        "{names:?}"
    );
    assert_eq!(
        names.iter().filter(|n| **n == "writer_done").count(),
        1,
        "{names:?}"
    );
    let shared = meta
        .tracepoints
        .iter()
        .find(|t| t.name == "shared_event")
        .unwrap()
        .id;
    let aux = dev.aux_snapshot().unwrap();

    let mut seen = vec![Vec::new(); 3];
    for ring in 0..dev.num_rings() {
        let snap = dev.ring(ring).snapshot();
        assert_eq!(snap.lost, 0);
        for e in snap
            .events
            .iter()
            .filter(|e| e.type_word.tracepoint() == shared)
        {
            let (pid, tid) = ((e.ctx >> 32) as u32, e.ctx as u32);
            let tag = e.args()[0] as usize;
            assert_eq!(pid, pids[tag - 1], "event of writer {tag} carries its pid");
            assert_eq!(
                meta.thread_name(pid, tid),
                Some(format!("writer-{tag}").as_str())
            );
            // Strings resolve while they are still in the aux buffer.
            if let Some(r) = aux.get(e.args()[2]) {
                assert_eq!(r.bytes, format!("t{tag}-{}", e.args()[1]).as_bytes());
            }
            seen[tag].push(e.args()[1]);
        }
    }
    for (tag, pid) in [(1, pids[0]), (2, pids[1])] {
        let mut s = std::mem::take(&mut seen[tag]);
        s.sort();
        assert_eq!(
            s,
            (0..events).collect::<Vec<_>>(),
            "every event of writer {tag}"
        );
        assert_eq!(meta.process_name(pid), Some("ttrace-test-writer"));
    }
}
