//! Crash anywhere: writer processes sharing one device die by SIGKILL at random moments — a
//! timer interrupts each one's tight loop of trace points wherever it is: mid-entry (inside
//! a restartable critical section, or holding a claim or the aux lock on the shared path),
//! between events — while the others go on writing and a reader copies the rings. Checked:
//! no writer or reader hangs, every event completed before a kill is still decoded, nothing
//! mixed is ever accepted, and each writer took the path its environment gives it.
//!
//! Three runs: every writer on the restartable path (each reports `Device::restartable()`,
//! and whether the killing signal interrupted a critical section; half the timers aim, going
//! off every few microseconds until one lands inside a section); writers on both paths at
//! once (`TTRACE_NO_RSEQ=1` and `GLIBC_TUNABLES=glibc.pthread.rseq=0` force the shared rings
//! on some); and writers pinned to a CPU killed one at a time by a SIGKILL from outside, after
//! each of which the ring is searched for what a write cut short inside its critical section
//! left, and read position by position. The runs take turns (they time kills).
//!
//! `TTRACE_CRASH_KILLS` sets the number of kills of each run (default 100, run in CI; the
//! third run makes twice as many); `TTRACE_CRASH_SEED` replays a run (the seed is printed).

use devttrace::ring::{event_at, holds_position};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::time::{Duration, Instant};
use ttrace_layouts::aux::AUX_REF;
use ttrace_layouts::entry::{Stamp, TypeWord};
use ttrace_tests::rseq::{WritePath, RSEQ_REQUIRED};
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

fn kills() -> u64 {
    std::env::var("TTRACE_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}

fn seed() -> u64 {
    std::env::var("TTRACE_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| (std::process::id() as u64 * 0x9e37_79b9) | 1)
}

/// Runs the tests of this file one at a time, and none of the other modules' meanwhile: they
/// time kills, and each keeps the CPUs busy.
fn serial() -> (ttrace_tests::Turn, std::sync::MutexGuard<'static, ()>) {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let turn = ttrace_tests::turn("crash");
    (turn, SERIAL.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The command of a crash writer (see `ttrace-test-crasher`); `pinned`: on a CPU, saying on
/// its standard output when it has recorded a number of events.
fn crasher(
    dir: &Path,
    progress: &Path,
    inc: u64,
    events: u64,
    kill: &str,
    pinned: Option<(usize, u64)>,
    path: WritePath,
) -> Command {
    let mut cmd = Command::new(CRASHER);
    cmd.arg(dir)
        .arg(progress)
        .arg(inc.to_string())
        .arg(events.to_string())
        .arg(kill);
    if let Some((cpu, notify_at)) = pinned {
        cmd.arg(cpu.to_string())
            .arg(notify_at.to_string())
            .stdout(Stdio::piped());
    }
    path.apply(&mut cmd);
    cmd.stdin(Stdio::piped());
    cmd
}

/// A running writer.
struct Writer {
    inc: u64,
    path: WritePath,
    /// Whether its alarms aim at a critical section.
    aimed: bool,
    child: Child,
    progress: Progress,
}

/// What a writer got done: events recorded (a killed one may have recorded one more, not yet
/// counted), whether it was killed, and where.
struct Outcome {
    done: u64,
    killed: bool,
    path: WritePath,
    /// What it reported in [`Progress::path`].
    reported: u64,
    /// [`Progress::state`] when it died.
    state: u64,
    /// Whether the killing signal interrupted a restartable critical section.
    in_section: bool,
    aimed: bool,
}

fn spawn(dir: &Path, tmp: &Path, inc: u64, path: WritePath, rng: &mut Rng) -> Writer {
    let file = tmp.join(format!("progress-{inc}"));
    let progress = Progress::open(&file).unwrap();
    // Most die within their loop (about 40 µs to 150 µs long here); a few finish. Half of
    // those that die are aimed: after the first alarm, more come every few microseconds
    // until one interrupts a restartable critical section (or 64 have not). One in eight
    // registers its string tracepoint in the loop, where the kill may find it holding the
    // metadata lock.
    let (kill, aimed) = match rng.below(16) {
        0 | 1 => ("0".to_string(), false),
        k => {
            let after = 1 + rng.below(150);
            if k % 2 == 0 {
                (format!("{after}/64"), true)
            } else {
                (after.to_string(), false)
            }
        }
    };
    let mut cmd = crasher(dir, &file, inc, EVENTS, &kill, None, path);
    if rng.below(8) == 0 {
        cmd.env("TTRACE_TEST_LAZY", "1");
    } else {
        cmd.env_remove("TTRACE_TEST_LAZY");
    }
    let child = cmd.spawn().unwrap();
    Writer {
        inc,
        path,
        aimed,
        child,
        progress,
    }
}

/// What [`crash_run`] found.
struct CrashRun {
    kills: u64,
    /// Kills whose signal interrupted a restartable critical section: all, and those whose
    /// alarms were not aimed.
    in_section: u64,
    in_section_unaimed: u64,
    /// Kills of a writer inside a trace point (between the state stores around it).
    in_point: u64,
    /// Events of the writers on each path, by kind of ring they were found in:
    /// `(restartable rings, shared rings)`.
    rings: BTreeMap<WritePath, (u64, u64)>,
}

/// Kills `kills` writers, incarnation `i` on path `paths[i % paths.len()]`, while others
/// write and a reader copies; checks the trace.
fn crash_run(name: &str, paths: &[WritePath]) -> CrashRun {
    let _serial = serial();
    let kills = kills();
    let seed = seed();
    println!("crash test ({name}): {kills} kills, seed {seed}");
    let mut rng = Rng(seed);
    // Large enough that nothing is overwritten: every completed event must be there.
    let most = (kills + WRITERS as u64 + 8) * EVENTS;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let creator = ttrace_core::Writer::open(&ttrace_core::Config {
        ring_slots: (most / 2 * 3).next_power_of_two().min(1 << 24),
        cpus: Some(2),
        aux_bytes: (most / 8 * 128).next_power_of_two().max(1 << 20),
        calibration: Duration::from_millis(2),
        ..ttrace_core::Config::at(&dir)
    })
    .unwrap();
    let num_cpus = creator.mapping().num_cpus() as usize;
    drop(creator);

    let stop = AtomicBool::new(false);
    // Generous: what a hung writer would exceed, not a timing target.
    let deadline =
        Instant::now() + Duration::from_secs(120) + Duration::from_millis(50) * kills as u32;
    let (outcomes, reader) = std::thread::scope(|s| {
        // A reader copying every ring over and over while writers die.
        let reader = s.spawn(|| {
            let dev = devttrace::Reader::open(&dir).unwrap();
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
                let path = paths[(next - 1) as usize % paths.len()];
                spawn(&dir, tmp.path(), next - 1, path, &mut rng)
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
                        path: w.path,
                        reported: w.progress.path.load(Acquire),
                        state: w.progress.state.load(Acquire),
                        in_section: w.progress.killed_in_section.load(Acquire) != 0,
                        aimed: w.aimed,
                    },
                );
                if killed < kills {
                    next += 1;
                    let path = paths[(next - 1) as usize % paths.len()];
                    running.push(spawn(&dir, tmp.path(), next - 1, path, &mut rng));
                }
            }
            std::thread::yield_now();
        }
        stop.store(true, Release);
        (outcomes, reader.join().unwrap())
    });

    // Each writer took the path its environment gives it.
    for (inc, o) in &outcomes {
        assert_eq!(
            o.reported,
            if o.path.restartable() {
                Progress::RESTARTABLE
            } else {
                Progress::SHARED
            },
            "incarnation {inc}, run with {:?}, reported path {} (1 restartable, 2 shared){}",
            o.path,
            o.reported,
            if o.path == WritePath::Restartable {
                format!(": {RSEQ_REQUIRED}")
            } else {
                String::new()
            }
        );
        assert!(
            o.path == WritePath::Restartable || !o.in_section,
            "incarnation {inc} on the shared path was killed inside a restartable section"
        );
    }

    // Every event recorded before a kill is there, exactly; nothing else is.
    let dev = devttrace::Reader::open(&dir).unwrap();
    let snap = dev.snapshot().unwrap();
    let mut seen: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    let mut rings: BTreeMap<WritePath, (u64, u64)> = BTreeMap::new();
    let (mut events, mut claimed, mut abandoned) = (0u64, 0u64, 0u64);
    for (r, ring) in snap.cpus.iter().enumerate() {
        let restartable_ring = r < num_cpus;
        // Nothing was overwritten (the rings are large enough), so the positions counted
        // lost are those a writer reserved on a shared ring and died before claiming their
        // slot; a restartable ring's head moves only when an entry is complete.
        abandoned += ring.lost;
        claimed += ring.claimed;
        if restartable_ring {
            assert_eq!(
                (ring.committed, ring.lost, ring.claimed),
                (ring.head, 0, 0),
                "ring {r}: every position below a restartable ring's head holds its entry"
            );
        }
        for e in &ring.events {
            assert!(whole(e), "a mixed event was accepted: {e:?}");
            let (inc, seq) = (e.args()[0], e.args()[1]);
            let path = outcomes
                .get(&inc)
                .unwrap_or_else(|| panic!("event of unknown writer {inc}"))
                .path;
            let kinds = rings.entry(path).or_default();
            if restartable_ring {
                kinds.0 += 1;
            } else {
                kinds.1 += 1;
            }
            assert!(
                path == WritePath::Restartable || !restartable_ring,
                "incarnation {inc} ({path:?}) wrote into restartable ring {r}"
            );
            if seq == u64::MAX {
                continue; // the registration point before the loop
            }
            if seq % 8 == 0 {
                let s = snap.aux.get(e.args()[2]).map(|r| r.bytes.to_vec());
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
    let killed_where = |f: &dyn Fn(&Outcome) -> bool| {
        outcomes.values().filter(|o| o.killed && f(o)).count() as u64
    };
    let found = CrashRun {
        kills: killed,
        in_section: killed_where(&|o| o.in_section),
        in_section_unaimed: killed_where(&|o| o.in_section && !o.aimed),
        in_point: killed_where(&|o| o.state == Progress::IN_POINT || o.state == Progress::IN_AUX),
        rings,
    };
    let by_path: Vec<String> = found
        .rings
        .iter()
        .map(|(p, (r, s))| {
            let writers = outcomes.values().filter(|o| o.path == *p).count();
            format!(
                "{p:?}: {writers} writers, events in restartable rings {r}, in shared rings {s}"
            )
        })
        .collect();
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "crash test ({name}): {killed} kills of {} writers ({} inside a trace point, {} inside a restartable critical section, {} of them by an alarm not aimed at one); \
         {events} events decoded, {checked} completed before the kills all present; {}; \
         {claimed} slots left claimed and {abandoned} positions abandoned mid-entry (shared rings); \
         reader: {copies} copies, {accepted} events accepted, 0 mixed, slowest copy {slowest:?}",
        outcomes.len(),
        found.in_point,
        found.in_section,
        found.in_section_unaimed,
        by_path.join("; "),
    )
    .unwrap();
    found
}

/// Every writer on the restartable path: each reports it, and some of the kills land inside
/// a trace point, some inside a restartable critical section.
#[test]
fn writers_killed_anywhere_leave_an_exact_trace_and_never_block_the_others() {
    let found = crash_run("restartable", &[WritePath::Restartable]);
    assert!(
        found.in_point > 0,
        "of {} kills none landed inside a trace point",
        found.kills
    );
    assert!(
        found.in_section > 0,
        "of {} kills none landed inside a restartable critical section",
        found.kills
    );
    let (restartable, _) = found.rings[&WritePath::Restartable];
    assert!(restartable > 0, "no event in a restartable ring");
}

/// Writers forced onto the shared rings (by `TTRACE_NO_RSEQ=1`, and by glibc without rseq)
/// and writers on the restartable path, all killed at random, share one device: each wrote
/// where its path says, and the trace is exact.
#[test]
fn fallback_and_restartable_writers_killed_anywhere_share_a_device_exactly() {
    let found = crash_run(
        "both paths",
        &[
            WritePath::Restartable,
            WritePath::NoRseqVar,
            WritePath::GlibcNoRseq,
        ],
    );
    for p in [WritePath::NoRseqVar, WritePath::GlibcNoRseq] {
        let (restartable, shared) = found.rings[&p];
        assert_eq!(restartable, 0, "{p:?}: events in restartable rings");
        assert!(shared > 0, "{p:?}: no event in the shared rings");
    }
    assert!(found.rings[&WritePath::Restartable].0 > 0);
}

/// Writers pinned to one CPU and killed, one at a time, by a SIGKILL sent from another CPU
/// while they write: no signal handler runs, the kernel restarts nothing, the process just
/// stops wherever it is. After each kill, the slot at the head of that CPU's restartable ring
/// is searched for the stores of an entry cut short there (a claim, or an entry tagged with
/// the head's position, which the next writer on that CPU overwrites); and the ring is read:
/// every event the writer completed is there, and nothing else of it, nothing mixed.
#[test]
fn sigkill_inside_a_critical_section_leaves_nothing_a_reader_accepts() {
    let _serial = serial();
    // Twice the other runs' kills: about one in ten lands inside a ring entry's section
    // here, and this run is about those.
    let kills = 2 * kills();
    let seed = seed();
    println!("crash test (sigkill from outside): {kills} kills, seed {seed}");
    let mut rng = Rng(seed);
    let cpus = ttrace_tests::rseq::allowed_cpus();
    // A writer that is not killed in time stops (and is killed then) after this many events:
    // fewer than a ring holds, so each one's events are all there when it is checked.
    let cap = 8_000;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = ttrace_core::Writer::open(&ttrace_core::Config {
        ring_slots: 1 << 14,
        cpus: Some(devttrace::config::configured_cpus()),
        aux_bytes: 1 << 22,
        calibration: Duration::from_millis(2),
        ..ttrace_core::Config::at(&dir)
    })
    .unwrap();
    let n = dev.mapping().num_cpus() as usize;
    let slots = dev.mapping().ring_slots();

    let (mut in_entry, mut finished_first, mut checked, mut overshoot) = (0u64, 0u64, 0u64, 0u64);
    let deadline =
        Instant::now() + Duration::from_secs(120) + Duration::from_millis(50) * kills as u32;
    for inc in 0..kills {
        let cpu = cpus[inc as usize % cpus.len()];
        // The killer runs on another CPU, so the kill lands while the writer runs.
        if let Some(&other) = cpus.iter().find(|&&c| c != cpu) {
            ttrace_tests::rseq::set_affinity(0, &[other]).unwrap();
        }
        let file = tmp.path().join(format!("progress-{inc}"));
        let progress = Progress::open(&file).unwrap();
        let start = dev.mapping().ring(cpu).head.load(Acquire);
        let threshold = 1 + rng.below(400);
        let mut child = crasher(
            &dir,
            &file,
            inc,
            cap,
            "0",
            Some((cpu, threshold)),
            WritePath::Restartable,
        )
        .env_remove("TTRACE_TEST_LAZY")
        .spawn()
        .unwrap();
        // It says when it has recorded `threshold` events, and goes on: the kill lands
        // wherever it is by the time this thread is woken and the signal delivered.
        use std::io::Read;
        use std::os::fd::AsRawFd;
        let mut out = child.stdout.take().unwrap();
        let mut pfd = libc::pollfd {
            fd: out.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let wait_ms = deadline
            .saturating_duration_since(Instant::now())
            .as_millis();
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut pfd, 1, wait_ms.min(i32::MAX as u128) as i32) };
        assert!(ready > 0, "writer {inc} made no progress: hung");
        let mut byte = [0u8; 1];
        let notified = out.read(&mut byte).unwrap();
        assert_eq!(
            notified,
            1,
            "writer {inc} exited before its notice: {:?}",
            child.try_wait()
        );
        child.kill().unwrap();
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            status.signal(),
            Some(libc::SIGKILL),
            "writer {inc}: {status}"
        );
        assert_eq!(
            progress.path.load(Acquire),
            Progress::RESTARTABLE,
            "writer {inc}: {RSEQ_REQUIRED}"
        );
        finished_first += (progress.state.load(Acquire) == Progress::FINISHED) as u64;
        let done = progress.done.load(Acquire);
        overshoot += done.saturating_sub(threshold);

        // What it left at the ring's head: the next writer on this CPU starts there, so
        // anything but the entry of the position one lap back (or nothing, on the first lap)
        // is the stores of a write that died inside its critical section.
        let ring = dev.mapping().ring(cpu);
        let head = ring.head.load(Acquire);
        let slot = &ring.slots[(head & (slots - 1)) as usize].words;
        let (stamp, word) = (
            Stamp(slot[0].load(Acquire)),
            TypeWord(slot[1].load(Acquire)),
        );
        let residue = if stamp.is_claimed() {
            assert_eq!(
                stamp.0,
                Stamp::CLAIMED | head,
                "writer {inc}: a claim of another position"
            );
            true
        } else if stamp == Stamp::EMPTY {
            assert!(
                head < slots,
                "writer {inc}: an empty slot after the first lap"
            );
            false
        } else {
            word.position_tag() == TypeWord::tag_of(head)
        };
        in_entry += residue as u64;

        // The ring, read now: from where its head was when this writer started, the
        // registration point, then each event it completed, in order, then the one it was
        // recording when killed if that one committed; nothing else, nothing mixed.
        let written = head - start;
        assert!(
            written == done + 1 || written == done + 2,
            "writer {inc}: head moved by {written} for {done} events completed"
        );
        for (k, p) in (start..head).enumerate() {
            let read = ring.read((p & (slots - 1)) as usize);
            assert!(
                holds_position(&read, p),
                "writer {inc}: position {p} does not hold its entry: {read:?}"
            );
            let (e, _) = event_at(core::slice::from_ref(&read), 0).expect("a well-formed entry");
            assert!(whole(&e), "writer {inc}: a mixed event: {e:?}");
            let seq = if k == 0 { u64::MAX } else { k as u64 - 1 };
            assert_eq!(
                (e.args()[0], e.args()[1]),
                (inc, seq),
                "writer {inc}: position {p}"
            );
        }
        checked += done;
    }

    // Everything, read by another reader: nothing mixed, each restartable ring's slots
    // holding their positions' entries but for what the last kill on its CPU left, the
    // strings there, nothing in the shared rings.
    let reader = devttrace::Reader::open(&dir).unwrap();
    let snap = reader.snapshot().unwrap();
    let mut strings = 0;
    for (r, ring) in snap.cpus.iter().enumerate() {
        if r >= n {
            assert_eq!(ring.head, 0, "ring {r}: nothing went to the shared rings");
            continue;
        }
        assert_eq!(
            ring.committed + ring.claimed + ring.changed,
            ring.head.min(slots),
            "ring {r}: {ring:?}"
        );
        assert!(ring.claimed + ring.changed <= 1, "ring {r}: {ring:?}");
        // Nothing was evicted from the aux buffer unless its `first` moved.
        let evicted = dev.mapping().aux(r).first.load(Acquire) > 0;
        for e in &ring.events {
            assert!(whole(e), "a mixed event was accepted: {e:?}");
            let (inc, seq) = (e.args()[0], e.args()[1]);
            if seq != u64::MAX && seq % 8 == 0 {
                match snap.aux.get(e.args()[2]) {
                    Some(s) => {
                        assert_eq!(s.bytes, crash_string(inc, seq).as_bytes());
                        strings += 1;
                    }
                    None => assert!(evicted, "string of {inc}/{seq} missing"),
                }
            }
        }
    }
    assert!(strings > 0, "no string found");
    println!(
        "crash test (sigkill from outside): {kills} writers pinned to CPUs {cpus:?} killed after \
         1 to 400 events (and {} more on average while the kill was on its way); {in_entry} \
         left an entry's stores uncommitted at the ring's head; {finished_first} had \
         finished first; {checked} completed events all present, in order, at the positions \
         their writer took, no other, 0 mixed; {strings} strings checked",
        overshoot / kills.max(1)
    );
    assert!(
        in_entry > 0,
        "of {kills} kills none landed inside a ring entry's critical section"
    );
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
