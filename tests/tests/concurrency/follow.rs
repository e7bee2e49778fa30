//! `follow` is exact on a busy device: more writer threads than CPUs write a mix of 5-word,
//! 12-word (continued) and string events into 1,024-slot rings and a 64 KiB aux while a
//! `ttrace-reader follow` process prints them; when it is stopped (SIGINT), per ring, the
//! entries it printed plus those it counted lost (and given up) are exactly the ring's
//! `head`. Twenty runs, each different: the writers race the follower differently each time.

use std::time::Duration;
use ttrace_core::Writer;
use ttrace_layouts::aux::AuxTag;
use ttrace_tests::reader;

/// Runs of the stress (`TTRACE_FOLLOW_RUNS` overrides it).
const RUNS: u64 = 20;

/// Events each writer records per run.
const EVENTS: u64 = 20_000;

/// How long a line may take before the test gives up: a bound on failure, not a way to
/// order anything (each step waits for the line that says it happened).
const PATIENCE: Duration = Duration::from_secs(120);

#[test]
fn follow_counts_every_position_of_busy_rings_with_continued_events_exactly() {
    let _turn = ttrace_tests::turn("follow");
    let runs = std::env::var("TTRACE_FOLLOW_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(RUNS);
    let (mut lost, mut continued) = (0, 0);
    for run in 0..runs {
        let found = one_run(run);
        lost += found.lost;
        continued += found.continued;
    }
    // What the runs must have gone through to show anything: rings lapped while followed,
    // and continued events printed.
    assert!(
        lost > 0,
        "no run lost anything: the rings were never lapped"
    );
    assert!(continued > 0, "no continued event was printed");
}

/// What one run saw, over all rings.
struct Found {
    lost: u64,
    continued: u64,
}

fn one_run(run: u64) -> Found {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let dev = Writer::open(&ttrace_core::Config {
        aux_bytes: 64 << 10,
        ..ttrace_tests::config(&dir, 1024, devttrace::config::configured_cpus())
    })
    .unwrap();
    let five = ttrace_tests::define(&dev, "five", "{a} {b} {c} {d} {e}");
    let twelve = ttrace_tests::define(
        &dev,
        "twelve",
        "{a} {b} {c} {d} {e} {f} {g} {h} {i} {j} {k} {l}",
    );
    let text = ttrace_tests::define(&dev, "text", "{s:s}");

    let mut follow = reader!("follow", &dir).args(["--interval-ms", "1"]).start();
    // Written after this line, everything is followed.
    let first = follow
        .next("first line", PATIENCE)
        .expect("follow printed nothing");
    assert!(first.starts_with("# following"), "run {run}: {first}");

    let writers = 4 * cores as u64;
    // Work between events, different in each run: from flat out (the follower reads little
    // more than the last ring's worth) to a pace it nearly keeps up with.
    let work = (run % 4) * 400;
    std::thread::scope(|s| {
        for w in 0..writers {
            let dev = &dev;
            s.spawn(move || {
                let ctx = dev.context();
                for i in 0..EVENTS {
                    for k in 0..work {
                        std::hint::black_box(k);
                    }
                    let a = |k: u64| w << 32 | i << 4 | k;
                    match (i + w) % 3 {
                        0 => dev.emit(five, ctx, &[a(0), a(1), a(2), a(3), a(4)]),
                        1 => dev.emit(
                            twelve,
                            ctx,
                            &core::array::from_fn::<u64, 12, _>(|k| a(k as u64)),
                        ),
                        _ => {
                            let s =
                                format!("writer {w} event {i} {}", "x".repeat((i % 40) as usize));
                            let word = dev.aux_write(AuxTag::String, ctx, s.as_bytes());
                            dev.emit(text, ctx, &[word.unwrap_or(ttrace_layouts::aux::AUX_NONE)])
                        }
                    };
                }
            });
        }
    });
    // The writers are done: follow prints what it still holds and its counts.
    let pid = follow.child.id() as i32;
    // SAFETY: signals a child process of ours, not yet waited for.
    let signalled = unsafe { libc::kill(pid, libc::SIGINT) };
    assert_eq!(signalled, 0);
    while follow.next("end of output", PATIENCE).is_some() {}
    let status = follow.child.wait().unwrap();
    assert!(status.success(), "run {run}: follow: {status}");
    let printed = &follow.seen[1..];

    // Per ring: entries printed (by the CPU column of each event line) and the footer.
    let map = dev.device().mapping();
    let cpus = map.num_cpus() as usize;
    let mut shown = vec![0u64; map.num_rings()];
    let mut continued = 0;
    for l in printed.iter().filter(|l| !l.starts_with('#')) {
        let cpu: usize = l
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.strip_prefix("cpu"))
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("run {run}: not an event line: {l}"));
        // A continued event whose continuation was overwritten shows what its parent held:
        // one entry printed, one lost.
        let slots = match l.contains(" twelve(") && !l.ends_with(" [continuation lost]") {
            true => 2,
            false => 1,
        };
        continued += (slots == 2) as u64;
        shown[cpu] += slots;
    }
    let mut lost = 0;
    for (ring, &shown) in shown.iter().enumerate() {
        let r = map.ring(ring);
        let head = r.reader().head();
        let name = dev.device().reader().version().ring_name(ring);
        let footer = printed
            .iter()
            .find(|l| l.starts_with(&format!("# {name}: positions ")));
        let Some(footer) = footer else {
            assert_eq!(head, 0, "run {run}: {name} was written and has no footer");
            continue;
        };
        let n = numbers(footer);
        // positions FROM..THROUGH followed: READ read, LOST lost, GAVE_UP given up, DAMAGED
        // damaged, WAITING still being written
        let [from, through, read, lost_here, gave_up, damaged, waiting] = n[..] else {
            panic!("run {run}: {footer}");
        };
        assert_eq!((from, through), (0, head), "run {run}: {footer}");
        assert_eq!((damaged, waiting), (0, 0), "run {run}: {footer}");
        assert_eq!(
            read + lost_here + gave_up,
            head,
            "run {run}: {name}: read, lost and given up are not the head: {footer}"
        );
        if ring < cpus {
            // What the CPU column says is this ring's (a restartable ring holds only its
            // CPU's entries; the shared rings none here).
            assert_eq!(
                shown, read,
                "run {run}: {name}: entries printed differ from those read: {footer}"
            );
        } else {
            assert_eq!(head, 0, "run {run}: a writer fell back to {name}");
        }
        lost += lost_here;
        println!("run {run}: {footer}");
    }
    let total = printed
        .iter()
        .rev()
        .find(|l| l.ends_with(" events printed"));
    let events = printed.iter().filter(|l| !l.starts_with('#')).count() as u64;
    assert_eq!(
        total.map(|l| numbers(l)[0]),
        Some(events),
        "run {run}: {total:?}"
    );
    Found { lost, continued }
}

/// The decimal numbers of `line`, in order (`cpu1` and `..` separate nothing from digits:
/// only the numbers that stand alone or between `..` are taken).
fn numbers(line: &str) -> Vec<u64> {
    line.split(|c: char| c.is_whitespace() || c == ',' || c == ':')
        .flat_map(|w| w.split(".."))
        .filter_map(|w| w.parse().ok())
        .collect()
}
