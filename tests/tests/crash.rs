//! Crash anywhere: writer processes sharing one device die by SIGKILL at random moments — a
//! timer interrupts each one's tight loop of trace points wherever it is: mid-entry, holding
//! the aux lock, between events — while the others go on writing and a reader copies the
//! rings. Checked: no writer or reader hangs, every event completed before a kill is still
//! decoded, nothing mixed is ever accepted.
//!
//! `TTRACE_CRASH_KILLS` sets the number of kills (default 100, run in CI);
//! `TTRACE_CRASH_SEED` replays a run (the seed is printed).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::time::{Duration, Instant};
use ttrace_layouts::aux::AUX_REF;
use ttrace_tests::{crash_string, mix, Progress};

const CRASHER: &str = env!("CARGO_BIN_EXE_ttrace-test-crasher");
/// Events each writer records unless killed first.
const EVENTS: u64 = 400;
/// Writers running at once.
const WRITERS: usize = 4;

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A running writer.
struct Writer {
    inc: u64,
    child: Child,
    progress: Progress,
}

/// What a writer got done: events recorded (a killed one may have recorded one more, not yet
/// counted), and whether it was killed.
struct Outcome {
    done: u64,
    killed: bool,
}

fn spawn(dir: &Path, tmp: &Path, inc: u64, rng: &mut Rng) -> Writer {
    let file = tmp.join(format!("progress-{inc}"));
    let progress = Progress::open(&file).unwrap();
    // Most die within their loop (about 40 µs to 150 µs long here); a few finish.
    let kill_after_us = if rng.below(8) == 0 {
        0
    } else {
        1 + rng.below(150)
    };
    let child = Command::new(CRASHER)
        .arg(dir)
        .arg(&file)
        .arg(inc.to_string())
        .arg(EVENTS.to_string())
        .arg(kill_after_us.to_string())
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    Writer {
        inc,
        child,
        progress,
    }
}

#[test]
fn writers_killed_anywhere_leave_an_exact_trace_and_never_block_the_others() {
    let kills: u64 = std::env::var("TTRACE_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let seed: u64 = std::env::var("TTRACE_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| (std::process::id() as u64 * 0x9e37_79b9) | 1);
    println!("crash test: {kills} kills, seed {seed}");
    let mut rng = Rng(seed);
    // Large enough that nothing is overwritten: every completed event must be there.
    let most = (kills + WRITERS as u64 + 8) * EVENTS;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let _creator = ttrace_core::Device::open(&ttrace_core::Config {
        ring_slots: (most / 2 * 3).next_power_of_two().min(1 << 24),
        cpus: Some(2),
        aux_bytes: (most / 8 * 128).next_power_of_two().max(1 << 20),
        calibration: Duration::from_millis(2),
        ..ttrace_core::Config::at(&dir)
    })
    .unwrap();

    let stop = AtomicBool::new(false);
    // Generous: what a hung writer would exceed, not a timing target.
    let deadline =
        Instant::now() + Duration::from_secs(120) + Duration::from_millis(50) * kills as u32;
    let (outcomes, reader) = std::thread::scope(|s| {
        // A reader copying every ring over and over while writers die.
        let reader = s.spawn(|| {
            let dev = devttrace::Device::open(&dir).unwrap();
            let (mut copies, mut accepted, mut mixed, mut slowest) =
                (0u64, 0u64, 0u64, Duration::ZERO);
            while !stop.load(Acquire) {
                for cpu in 0..dev.cpus() {
                    let t = Instant::now();
                    let snap = dev.cpu(cpu).unwrap();
                    slowest = slowest.max(t.elapsed());
                    copies += 1;
                    for e in &snap.events {
                        accepted += 1;
                        mixed += !whole(e) as u64;
                    }
                }
            }
            (copies, accepted, mixed, slowest)
        });

        let mut outcomes: BTreeMap<u64, Outcome> = BTreeMap::new();
        let mut next = 0;
        let mut running: Vec<Writer> = (0..WRITERS)
            .map(|_| {
                next += 1;
                spawn(&dir, tmp.path(), next - 1, &mut rng)
            })
            .collect();
        let mut killed = 0;
        while !running.is_empty() {
            assert!(Instant::now() < deadline, "writers made no progress: hung");
            let mut i = 0;
            while i < running.len() {
                let w = &mut running[i];
                let finished = w.progress.state.load(Acquire) == Progress::FINISHED;
                if finished {
                    drop(w.child.stdin.take()); // lets it exit
                }
                let status = match w.child.try_wait().unwrap() {
                    Some(status) => status,
                    None => {
                        i += 1;
                        continue;
                    }
                };
                use std::os::unix::process::ExitStatusExt;
                let was_killed = status.signal() == Some(libc::SIGKILL);
                assert!(
                    was_killed || status.success(),
                    "incarnation {}: {status}",
                    w.inc
                );
                if was_killed {
                    killed += 1;
                } else {
                    let slowest = w.progress.slowest_ns.load(Acquire);
                    assert!(
                        slowest < 2_000_000_000,
                        "incarnation {}: a trace point took {slowest} ns",
                        w.inc
                    );
                }
                let w = running.swap_remove(i);
                outcomes.insert(
                    w.inc,
                    Outcome {
                        done: w.progress.done.load(Acquire),
                        killed: was_killed,
                    },
                );
                if killed < kills {
                    next += 1;
                    running.push(spawn(&dir, tmp.path(), next - 1, &mut rng));
                }
            }
            std::thread::yield_now();
        }
        stop.store(true, Release);
        (outcomes, reader.join().unwrap())
    });

    // Every event recorded before a kill is there, exactly; nothing else is.
    let dev = devttrace::Device::open(&dir).unwrap();
    let snap = dev.snapshot().unwrap();
    let mut seen: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    let (mut events, mut claimed, mut abandoned) = (0u64, 0u64, 0u64);
    for ring in &snap.cpus {
        // Nothing was overwritten (the rings are large enough), so the positions counted
        // lost are those a writer reserved and died before claiming their slot.
        abandoned += ring.lost;
        claimed += ring.claimed;
        for e in &ring.events {
            assert!(whole(e), "a mixed event was accepted: {e:?}");
            let (inc, seq) = (e.args()[0], e.args()[1]);
            if seq == u64::MAX {
                continue; // the registration point before the loop
            }
            if seq % 8 == 0 {
                let s = snap.aux.get(e.args()[2]).map(|r| r.bytes.clone());
                assert_eq!(
                    s.as_deref(),
                    Some(crash_string(inc, seq).as_bytes()),
                    "string of {inc}/{seq}"
                );
            }
            assert!(
                seen.entry(inc).or_default().insert(seq),
                "{inc}/{seq} twice"
            );
            events += 1;
        }
    }
    let mut checked = 0;
    for (inc, o) in &outcomes {
        let got = seen.remove(inc).unwrap_or_default();
        let complete: BTreeSet<u64> = (0..o.done).collect();
        // A killed writer may have recorded one more event than it had counted.
        let extra: Vec<&u64> = got.difference(&complete).collect();
        assert!(
            complete.is_subset(&got),
            "incarnation {inc}: completed events missing"
        );
        assert!(
            extra.is_empty() || (o.killed && extra == [&o.done]),
            "incarnation {inc}: events never recorded: {extra:?}"
        );
        checked += o.done;
    }
    assert!(seen.is_empty(), "events of unknown writers");
    let killed = outcomes.values().filter(|o| o.killed).count() as u64;
    assert!(killed >= kills);
    assert!(
        claimed <= killed,
        "{claimed} slots left claimed by {killed} kills"
    );
    let (copies, accepted, mixed, slowest) = reader;
    assert_eq!(mixed, 0, "the concurrent reader accepted a mixed event");
    assert!(
        slowest < Duration::from_secs(10),
        "a ring copy took {slowest:?}"
    );
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "crash test: {killed} kills of {} writers; {events} events decoded, {checked} completed before the kills all present; {claimed} slots left claimed and {abandoned} positions abandoned mid-entry; reader: {copies} copies, {accepted} events accepted, 0 mixed, slowest copy {slowest:?}",
        outcomes.len()
    )
    .unwrap();
}

/// Whether an event is exactly what some writer recorded: its words agree on (inc, seq).
fn whole(e: &devttrace::Event) -> bool {
    let a = e.args();
    match a.len() {
        5 if a[1] == u64::MAX => a[2..] == [0, 0, 0], // the registration point
        5 => a[2] == mix(a[0], a[1], 0) && a[3] == mix(a[0], a[1], 1) && a[4] == mix(a[0], a[1], 2),
        3 => a[1] % 8 == 0 && a[2] & AUX_REF != 0,
        _ => false,
    }
}
