//! Several processes writing one device.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{ChildStdout, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;
use ttrace_core::Writer;
use ttrace_tests::rseq::{WritePath, RSEQ_REQUIRED};
use ttrace_tests::test_writer;

/// How long a writer may take to print its next line: what only a hung one exceeds (a
/// bound on a failure, not a way to order anything).
const PATIENCE: Duration = Duration::from_secs(120);

/// The lines of a child's standard output, as they come (read by a thread of their own).
fn lines_of(out: ChildStdout) -> Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Writer `tag`'s next line (`None` once it closed its output: it ended), awaited for
/// [`PATIENCE`] at most.
fn next_line(lines: &Receiver<String>, tag: usize, what: &str) -> Option<String> {
    match lines.recv_timeout(PATIENCE) {
        Ok(line) => Some(line),
        Err(RecvTimeoutError::Disconnected) => None,
        Err(RecvTimeoutError::Timeout) => panic!("writer {tag}: no {what} after {PATIENCE:?}"),
    }
}

#[test]
fn two_processes_share_rings_aux_and_tracepoint_ids() {
    let _turn = ttrace_tests::turn("processes");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let events = 2000u64;
    let children: Vec<_> = (1..=2u64)
        .map(|tag| {
            test_writer!(&dir, events, tag)
                .command()
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let pids: Vec<u32> = children.iter().map(|c| c.id()).collect();
    for c in children {
        assert!(c.wait_with_output().unwrap().status.success());
    }

    let dev = Writer::attach(&dir).unwrap();
    let meta = dev.device().reader().metadata();
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
    let aux = dev.device().reader().aux().unwrap();

    let mut seen = vec![Vec::new(); 3];
    for ring in 0..dev.device().mapping().num_rings() {
        let snap = dev.device().mapping().ring(ring).reader().snapshot();
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

/// Writers forced onto the shared rings by their environment (`TTRACE_NO_RSEQ=1`, and glibc
/// told not to register rseq) and writers on the restartable path, all writing one device at
/// the same time: each says which path it took and its events are in rings of that kind;
/// the device reads back exactly: every event of every writer once, its string with it,
/// nothing lost, nothing mixed.
#[test]
fn fallback_and_restartable_writer_processes_share_a_device_exactly() {
    let _turn = ttrace_tests::turn("processes");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let events = 20_000u64;
    // Rings and aux buffers that hold everything: nothing is overwritten.
    let dev = Writer::open(&ttrace_core::Config {
        aux_bytes: 1 << 22,
        ..ttrace_tests::config(&dir, 1 << 17, devttrace::config::configured_cpus())
    })
    .unwrap();
    let paths: Vec<WritePath> = (0..6).map(|i| WritePath::ALL[i % 3]).collect();
    let mut children: Vec<_> = paths
        .iter()
        .enumerate()
        .map(|(i, path)| {
            path.apply(&mut test_writer!(&dir, events, i + 1).arg("wait").command())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let pids: Vec<u32> = children.iter().map(|c| c.id()).collect();
    let lines: Vec<Receiver<String>> = children
        .iter_mut()
        .map(|c| lines_of(c.stdout.take().unwrap()))
        .collect();
    // Each says its path once its device is open, writes the first half of its events, says
    // `half` and waits for its input to close. Once all said it, every one has written and
    // none has written its second half: let them all go on. So each writes events after
    // every other wrote some, and before every other wrote its last: they all write at the
    // same time, by construction.
    let said: Vec<String> = (1..)
        .zip(&lines)
        .map(|(tag, l)| next_line(l, tag, "path").unwrap_or_default())
        .collect();
    for (tag, l) in (1..).zip(&lines) {
        let half = next_line(l, tag, "half");
        assert_eq!(
            half.as_deref(),
            Some("half"),
            "writer {tag} (said {said:?})"
        );
    }
    for c in &mut children {
        drop(c.stdin.take());
    }
    for (i, mut c) in children.into_iter().enumerate() {
        // Its output closes when it ends.
        let rest = next_line(&lines[i], i + 1, "end");
        assert_eq!(rest, None, "writer {}", i + 1);
        let status = c.wait().unwrap();
        assert!(status.success(), "writer {}: {status}", i + 1);
        let said = &said[i];
        let want = if paths[i].restartable() {
            "restartable"
        } else {
            "shared"
        };
        assert_eq!(
            said.trim(),
            want,
            "writer {} run with {:?}{}",
            i + 1,
            paths[i],
            if paths[i].restartable() {
                format!(": {RSEQ_REQUIRED}")
            } else {
                String::new()
            }
        );
    }

    let meta = dev.device().reader().metadata();
    let id = |name: &str| meta.tracepoints.iter().find(|t| t.name == name).unwrap().id;
    let (shared_event, done_event) = (id("shared_event"), id("writer_done"));
    let aux = dev.device().reader().aux().unwrap();
    let n = dev.device().mapping().num_cpus() as usize;
    // Per writer: the indices seen, its events in restartable rings and in shared ones.
    let mut seen: BTreeMap<usize, (Vec<u64>, u64, u64)> = BTreeMap::new();
    // Per writer: its first and last stamps.
    let mut span: BTreeMap<usize, (u64, u64)> = BTreeMap::new();
    let mut total = 0;
    for r in 0..dev.device().mapping().num_rings() {
        let snap = dev.device().mapping().ring(r).reader().snapshot();
        assert_eq!(
            (
                snap.lost,
                snap.claimed,
                snap.changed,
                snap.skipped,
                snap.dropped
            ),
            (0, 0, 0, 0, 0),
            "ring {r}: {snap:?}"
        );
        assert_eq!(snap.committed, snap.head, "ring {r}: {snap:?}");
        total += snap.events.len();
        for e in &snap.events {
            let tag = e.args()[0] as usize;
            assert!((1..=paths.len()).contains(&tag), "{e:?}");
            assert_eq!((e.ctx >> 32) as u32, pids[tag - 1], "{e:?}");
            let s = span.entry(tag).or_insert((u64::MAX, 0));
            *s = (s.0.min(e.stamp), s.1.max(e.stamp));
            let entry = seen.entry(tag).or_default();
            if r < n {
                entry.1 += 1;
            } else {
                entry.2 += 1;
            }
            let tp = e.type_word.tracepoint();
            if tp == done_event {
                continue;
            }
            assert_eq!(tp, shared_event, "{e:?}");
            let i = e.args()[1];
            let label = aux.get(e.args()[2]).map(|r| r.bytes.to_vec());
            assert_eq!(
                label.as_deref(),
                Some(format!("t{tag}-{i}").as_bytes()),
                "string of {tag}/{i}"
            );
            entry.0.push(i);
        }
    }
    assert_eq!(
        total,
        paths.len() * (events as usize + 1),
        "every event of every writer"
    );
    for (tag, path) in (1..).zip(&paths) {
        let (mut got, restartable, shared) = seen.remove(&tag).unwrap_or_default();
        got.sort();
        assert_eq!(
            got,
            (0..events).collect::<Vec<_>>(),
            "writer {tag}'s events"
        );
        if path.restartable() {
            // A restartable write falls back to the shared ring only after 16 aborted
            // attempts in a row: not in a run nobody signals.
            assert_eq!(
                (restartable, shared),
                (events + 1, 0),
                "writer {tag} ({path:?}): events in restartable and shared rings"
            );
        } else {
            assert_eq!(
                (restartable, shared),
                (0, events + 1),
                "writer {tag} ({path:?}): events in restartable and shared rings"
            );
        }
    }
    // They wrote at the same time (made so above), and the stamps say so: every restartable
    // writer's events interleave in time with every fallback writer's.
    let pairs: Vec<(usize, usize)> = (1..=paths.len())
        .flat_map(|a| (1..=paths.len()).map(move |b| (a, b)))
        .filter(|&(a, b)| paths[a - 1].restartable() && !paths[b - 1].restartable())
        .collect();
    let overlapping = pairs
        .iter()
        .filter(|(a, b)| span[a].0 < span[b].1 && span[b].0 < span[a].1)
        .count();
    println!(
        "fallback test: {} writers ({:?}), {total} events, each in a ring of its writer's path, \
         all present, none lost, none mixed; {overlapping} of {} (restartable, fallback) pairs \
         wrote at the same time",
        paths.len(),
        paths,
        pairs.len()
    );
    assert_eq!(
        overlapping,
        pairs.len(),
        "every restartable writer wrote while every fallback one did: {span:?}"
    );
}
