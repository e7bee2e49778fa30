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
//! on some); and writers pinned to a CPU, killed one at a time by a SIGKILL from outside
//! inside a ring entry's restartable critical section, by construction: each is traced, and
//! a hardware watchpoint on a word its chosen write stores traps it just after that store,
//! inside the section; it is killed there; then what it left is compared with what it had
//! stored when trapped, and the ring read position by position. Where the first two runs'
//! kills land is chance (aimed, for the sections); the third's is chosen, and checked before
//! each kill.
//! The runs take turns (they time kills).
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
use ttrace_tests::rseq::{Section, Traced, WritePath, RSEQ_REQUIRED};
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

/// The command of a crash writer (see `ttrace-test-crasher`); `pinned`: on that CPU, and held
/// (it names its restartable sections on its standard output, then waits for a byte on its
/// standard input before its events).
fn crasher(
    dir: &Path,
    progress: &Path,
    inc: u64,
    events: u64,
    kill: &str,
    pinned: Option<usize>,
    path: WritePath,
) -> Command {
    let mut cmd = Command::new(CRASHER);
    cmd.arg(dir)
        .arg(progress)
        .arg(inc.to_string())
        .arg(events.to_string())
        .arg(kill);
    if let Some(cpu) = pinned {
        cmd.arg(cpu.to_string()).arg("held").stdout(Stdio::piped());
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

/// Spawns incarnation `inc`, run on CPU `cpu` only (its affinity set in the child before it
/// runs: the crasher's own `<cpu>` argument would also map its whole ring in advance).
fn spawn(dir: &Path, tmp: &Path, inc: u64, path: WritePath, cpu: usize, rng: &mut Rng) -> Writer {
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
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it.
    let set = unsafe {
        let mut set: libc::cpu_set_t = core::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        set
    };
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe calls may be made: it makes one system call, sched_setaffinity, on
    // a set made before the fork, and builds an error (no allocation) if it fails.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(
            &mut cmd,
            move || match libc::sched_setaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &set)
            {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            },
        );
    }
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

/// Kills `kills` writers, incarnation `i` on path `paths[i % paths.len()]` and pinned to
/// the `i % 2`-th CPU this process may run on, while others write and a reader copies;
/// checks the trace. The device has a ring of each kind for those CPUs, so every event of a
/// writer on the restartable path is in a restartable ring.
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
    let cpus = [ttrace_tests::cpu(0), ttrace_tests::cpu(1)];
    let cpu_of = |inc: u64| cpus[inc as usize % 2];
    let creator = ttrace_core::Writer::open(&ttrace_core::Config {
        ring_slots: (most / 2 * 3).next_power_of_two().min(1 << 24),
        cpus: Some(cpus[0].max(cpus[1]) as u32 + 1),
        aux_bytes: (most / 8 * 128).next_power_of_two().max(1 << 20),
        calibration: Duration::from_millis(2),
        ..ttrace_core::Config::at(&dir)
    })
    .unwrap();
    let num_cpus = creator.device().mapping().num_cpus() as usize;
    drop(creator);

    let stop = AtomicBool::new(false);
    // Generous: how long a hung writer would go without any writer ending, not a timing
    // target. Renewed at every writer reaped, so it bounds a hang whatever the kills.
    let patience = Duration::from_secs(120);
    let mut deadline = Instant::now() + patience;
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
                spawn(&dir, tmp.path(), next - 1, path, cpu_of(next - 1), &mut rng)
            })
            .collect();
        let mut killed = 0;
        while !running.is_empty() {
            assert!(
                Instant::now() < deadline,
                "no writer ended in {patience:?}: hung"
            );
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
                deadline = Instant::now() + patience;
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
                    let cpu = cpu_of(next - 1);
                    running.push(spawn(&dir, tmp.path(), next - 1, path, cpu, &mut rng));
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

/// Every writer on the restartable path, killed at random: each reports its path, and the
/// trace is exact. Where these kills land is left to chance (the counts are printed);
/// `sigkill_inside_a_critical_section_leaves_nothing_a_reader_accepts` lands its kills
/// inside a critical section by construction.
#[test]
fn writers_killed_anywhere_leave_an_exact_trace_and_never_block_the_others() {
    let found = crash_run("restartable", &[WritePath::Restartable]);
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

/// Writers pinned to one CPU, each killed by SIGKILL inside a restartable critical section of
/// a ring entry, at an instruction chosen by construction: the test traces the writer
/// (`ptrace`) and sets a hardware watchpoint on one word the chosen event's write stores —
/// its slot's stamp word (the claim, the write's first store in the ring), one of its payload
/// words, or the ring's `last_stamp` (stored after the whole entry is, just before the
/// commit) — so the write traps right after that store, inside its section, whatever the
/// load of the machine. The trap's instruction pointer is checked to lie in one of the
/// sections the writer's `__rseq_cs` descriptors bound (it prints them), and the slot at the
/// head of its CPU's restartable ring to hold its claim (with the payload words stored
/// before the watched one), or its entry without the commit.
///
/// A stopped process that is killed never runs again in user space: the kernel neither moves
/// it to the section's abort handler nor lets it retry, so the stores it had made stay and the
/// commit never comes — checked: the ring's head, last stamp and head slot are, after the
/// kill, word for word what they were while it was stopped. Then: a reader accepts nothing of
/// the cut write (nothing mixed, not the event being recorded); every event the writer
/// completed is in the ring, in order, at the positions it took, and nothing else of it; the
/// next writer on that CPU writes its first entry at the position the dead one left
/// uncommitted.
#[test]
fn sigkill_inside_a_critical_section_leaves_nothing_a_reader_accepts() {
    let _serial = serial();
    // Twice the other runs' kills: each of these lands inside a ring entry's critical section.
    let kills = 2 * kills();
    let seed = seed();
    println!("crash test (sigkill from outside): {kills} kills, seed {seed}");
    let mut rng = Rng(seed);
    // At most 4 CPUs: every writer maps its CPU's ring whole (8 MiB) in advance.
    let cpus: Vec<usize> = ttrace_tests::rseq::allowed_cpus()
        .into_iter()
        .take(4)
        .collect();
    let slots = 1 << 17;
    // The event each writer is caught in is one of its first `most` (it records them all
    // before it, so all are in the ring when it is checked: fewer than a ring holds).
    let most = 400;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let dev = ttrace_core::Writer::open(&ttrace_core::Config {
        ring_slots: slots,
        cpus: Some(devttrace::config::configured_cpus()),
        aux_bytes: 1 << 22,
        calibration: Duration::from_millis(2),
        ..ttrace_core::Config::at(&dir)
    })
    .unwrap();
    let reader = devttrace::Reader::open(&dir).unwrap();
    let n = dev.device().mapping().num_cpus() as usize;

    let mut stops = Stops::default();
    let mut checked = 0u64;
    // The position each CPU's last writer left uncommitted, or its head.
    let mut next_at: BTreeMap<usize, u64> = BTreeMap::new();
    // Generous: what a hung writer would exceed, not a timing target.
    let deadline =
        Instant::now() + Duration::from_secs(120) + Duration::from_millis(50) * kills as u32;
    for inc in 0..kills {
        let cpu = cpus[inc as usize % cpus.len()];
        let file = tmp.path().join(format!("progress-{inc}"));
        let progress = Progress::open(&file).unwrap();
        let ring = dev.device().mapping().ring(cpu);
        let header = dev.device().mapping().ring_header(cpu);
        let start = ring.reader().head();
        if let Some(&h) = next_at.get(&cpu) {
            assert_eq!(
                start, h,
                "writer {inc}: the ring's head moved between writers"
            );
        }
        let mut child = crasher(
            &dir,
            &file,
            inc,
            most,
            "0",
            Some(cpu),
            WritePath::Restartable,
        )
        .env_remove("TTRACE_TEST_LAZY")
        .spawn()
        .map(Reaped)
        .unwrap();
        let pid = child.id() as libc::pid_t;
        let (sections, watchable) = notice(&mut child, inc, deadline);
        // The restartable path, or there is no section to stop it in.
        assert_eq!(
            progress.path.load(Acquire),
            Progress::RESTARTABLE,
            "writer {inc}: {RSEQ_REQUIRED}"
        );

        // The event to catch (its registration point took position `start`), and the store
        // to catch it after.
        let seq = rng.below(most);
        let pos = start + 1 + seq;
        let slot = watchable.slots + (pos & (slots - 1)) as usize * 64;
        // Each store in turn: the claim, the payload's first four words, the last stamp.
        let after = match inc % 6 {
            5 => Store::LastStamp,
            w => Store::Word(w as usize),
        };
        let traced = Traced::seize(pid).unwrap_or_else(|e| panic!("writer {inc}: ptrace: {e}"));
        let trap = || {
            traced
                .resume()
                .and_then(|()| traced.wait_trap(deadline))
                .unwrap_or_else(|e| panic!("writer {inc}: {e}"))
        };
        // The slot is written by this event alone in the writer's life (the ring does not
        // wrap within it): the first store to one of its words is this write's.
        let word = match after {
            Store::Word(w) => w,
            Store::LastStamp => 0,
        };
        traced.watch_writes(0, slot + 8 * word).unwrap();
        child.stdin.as_mut().unwrap().write_all(b"!").unwrap();
        let mut ip = trap();
        if after == Store::LastStamp {
            // Caught at its claim; let it go (the section is aborted and retried, or goes
            // on) until it stores the ring's last stamp, its last store before the commit.
            traced.watch_writes(0, watchable.last_stamp).unwrap();
            ip = trap();
        }
        let at = Frozen::of(&ring, header, slots);
        let section = sections
            .iter()
            .position(|s| s.contains(ip))
            .unwrap_or_else(|| panic!("writer {inc}: trapped at {ip:#x}, outside {sections:x?}"));
        assert_eq!(at.head, pos, "writer {inc}: caught in another write");
        assert_eq!(
            progress.done.load(Acquire),
            seq,
            "writer {inc}: events recorded"
        );
        let left = at.left();
        match after {
            Store::Word(w) => {
                assert_eq!(
                    left,
                    Left::Claim,
                    "writer {inc}: after its store of word {w}"
                );
                // The payload's words stored before the trap, in order.
                let tw = TypeWord(at.slot[1]);
                assert!(
                    w < 1 || tw.position_tag() == TypeWord::tag_of(pos),
                    "{at:x?}"
                );
                assert!(w < 3 || at.slot[3] == inc, "{at:x?}");
                assert!(w < 4 || at.slot[4] == seq, "{at:x?}");
            }
            Store::LastStamp => assert_eq!(left, Left::Entry, "writer {inc}"),
        }

        // Killed inside the section, where it trapped.
        child.kill().unwrap();
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            status.signal(),
            Some(libc::SIGKILL),
            "writer {inc}: {status}"
        );
        assert_eq!(
            Frozen::of(&ring, header, slots),
            at,
            "writer {inc}: the kill changed what the stopped write had stored"
        );
        stops
            .sections
            .insert((section, ip - sections[section].start));
        let done = progress.done.load(Acquire);
        match left {
            Left::Claim => stops.claims += 1,
            Left::Entry => {
                // The whole entry of the event it was recording, stamped; only the commit
                // (the head's store) is missing.
                stops.entries += 1;
                let read = devttrace::ring::SlotRead::Committed(at.slot);
                let (e, _) = event_at(core::slice::from_ref(&read), 0).expect("an entry");
                assert!(whole(&e), "writer {inc}: a mixed entry left: {e:?}");
                assert_eq!((e.args()[0], e.args()[1]), (inc, done), "writer {inc}");
            }
            Left::Nothing => unreachable!("checked above"),
        }
        // A reader of that ring now: nothing mixed, nothing of the cut write.
        let snap = reader.cpu(cpu).unwrap();
        for e in &snap.events {
            assert!(whole(e), "writer {inc}: a mixed event was accepted: {e:?}");
            assert!(
                (e.args()[0], e.args()[1]) != (inc, done),
                "writer {inc}: the event it was recording when killed was accepted"
            );
        }
        let head = at.head;
        // The ring, read position by position: from where its head was when this writer
        // started (the position the previous one on this CPU left uncommitted), its
        // registration point, then each event it completed, in order; nothing else.
        assert_eq!(
            head - start,
            done + 1,
            "writer {inc}: head moved by {} for {done} events completed",
            head - start
        );
        for (k, p) in (start..head).enumerate() {
            let read = ring.reader().read((p & (slots - 1)) as usize);
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
        next_at.insert(cpu, head);
        checked += done;
    }

    // Everything, read by another reader: nothing mixed, each restartable ring's slots
    // holding their positions' entries but for what the last kill on its CPU left, the
    // strings there, nothing in the shared rings.
    let snap = devttrace::Reader::open(&dir).unwrap().snapshot().unwrap();
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
        let evicted = dev.device().mapping().aux(r).reader().first() > 0;
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
        "crash test (sigkill from outside): {kills} writers pinned to CPUs {cpus:?}, each \
         trapped by a watchpoint inside a ring entry's critical section ({} distinct \
         instructions of {} sections) and killed there; {} left a claim, {} a whole entry \
         without its commit, at the ring's head, unchanged by the kill, none accepted by a \
         reader; {checked} completed events all present, in order, at the positions their \
         writer took, no other, 0 mixed; {strings} strings checked",
        stops.sections.len(),
        stops
            .sections
            .iter()
            .map(|&(s, _)| s)
            .collect::<BTreeSet<_>>()
            .len(),
        stops.claims,
        stops.entries,
    );
    assert_eq!(stops.claims + stops.entries, kills);
    assert!(
        stops.claims > 0 && stops.entries > 0,
        "both kinds of cut write"
    );
}

/// A writer process, killed and reaped when dropped if it has not ended: one the test leaves
/// stopped when it fails does not stay so.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

impl std::ops::Deref for Reaped {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

/// What [`sigkill_inside_a_critical_section_leaves_nothing_a_reader_accepts`] counted.
#[derive(Default)]
struct Stops {
    /// Kills that left a claim, or a whole entry without its commit, at the ring's head.
    claims: u64,
    entries: u64,
    /// Where the kills landed: (index of the section, offset of the instruction in it).
    sections: BTreeSet<(usize, usize)>,
}

/// The store of a write after which a watchpoint traps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Store {
    /// Of word `n` of its slot: 0 is the claim, 1 to 7 the payload.
    Word(usize),
    /// Of the ring's `last_stamp`, after the whole entry and before the commit.
    LastStamp,
}

/// Where, in a writer's address space, a watchpoint can catch its writes (its `ring` line).
struct Watchable {
    /// Its restartable ring's first slot.
    slots: usize,
    /// That ring's `last_stamp`.
    last_stamp: usize,
}

/// What a restartable ring's head slot holds of the write at the head's position, which has
/// not committed (the ring's head has not moved past it).
#[derive(Debug, PartialEq, Eq)]
enum Left {
    /// Nothing: the slot holds the entry of one lap before, or nothing (first lap).
    Nothing,
    /// The write's claim (`CLAIMED | head`): its payload partly stored.
    Claim,
    /// The write's entry, stamped and tagged with the head's position: all but its commit.
    Entry,
}

/// A restartable ring's head, last stamp and head slot, as read while its only writer was
/// stopped (or dead).
#[derive(Debug, PartialEq, Eq)]
struct Frozen {
    head: u64,
    last_stamp: u64,
    slot: [u64; 8],
}

impl Frozen {
    fn of(
        ring: &devttrace::ring::RingWriter<'_, ttrace_layouts::entry::Slot>,
        header: &ttrace_layouts::ring::RingHeader,
        slots: u64,
    ) -> Frozen {
        let head = ring.reader().head();
        let words = &ring.slots()[(head & (slots - 1)) as usize].words;
        Frozen {
            head,
            last_stamp: header.last_stamp.load(Acquire),
            slot: core::array::from_fn(|i| words[i].load(Acquire)),
        }
    }

    fn left(&self) -> Left {
        let (stamp, word) = (Stamp(self.slot[0]), TypeWord(self.slot[1]));
        if stamp.is_claimed() {
            assert_eq!(
                stamp.0,
                Stamp::CLAIMED | self.head,
                "a claim of another position at the head"
            );
            Left::Claim
        } else if stamp == Stamp::EMPTY || word.position_tag() != TypeWord::tag_of(self.head) {
            Left::Nothing
        } else {
            Left::Entry
        }
    }
}

/// The restartable sections of writer `inc`, and where its ring lies, from the two lines it
/// writes once it has recorded its registration point (see `ttrace-test-crasher`); waits for
/// them no later than `deadline`.
fn notice(child: &mut Child, inc: u64, deadline: Instant) -> (Vec<Section>, Watchable) {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let mut out = child.stdout.take().unwrap();
    let mut text = Vec::new();
    while text.iter().filter(|&&b| b == b'\n').count() < 2 {
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
        let mut buf = [0u8; 4096];
        let got = out.read(&mut buf).unwrap();
        assert!(
            got > 0,
            "writer {inc} exited before its notice: {:?}",
            child.try_wait()
        );
        text.extend_from_slice(&buf[..got]);
    }
    let text = String::from_utf8_lossy(&text);
    let (line, ring) = text.split_once('\n').unwrap();
    let sections = Section::parse_line(line)
        .unwrap_or_else(|| panic!("writer {inc}: not a list of sections: {line:?}"));
    assert!(
        !sections.is_empty(),
        "writer {inc} has no restartable section"
    );
    let hex = |s: &str| usize::from_str_radix(s, 16).ok();
    let watchable = match ring.split_whitespace().collect::<Vec<_>>()[..] {
        ["ring", slots, last] => hex(slots).zip(hex(last)),
        _ => None,
    }
    .map(|(slots, last_stamp)| Watchable { slots, last_stamp })
    .unwrap_or_else(|| panic!("writer {inc}: not a ring line: {ring:?}"));
    (sections, watchable)
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
