//! Instrumented async functions, as a tokio service has them: each call is one span
//! instance, whatever the threads that poll it, whose lifetime `report` measures within the
//! time measured around the call, whose busy time is its polls, and which the Chrome export
//! draws as one async slice with its polls inside; the re-entry `tracing` makes when the
//! future is dropped is no poll. Run with the layer (`async_layer`) and with the subscriber
//! (`async_subscriber`): each test binary gives `install`.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
use std::time::Duration;
use tracing::instrument;
use ttrace_model::model::{Model, Step};
use ttrace_model::spans::Instance;

/// The device (in a directory of its own), with the binary's subscriber as the global one.
pub fn device() -> &'static (tempfile::TempDir, &'static ttrace_core::Writer) {
    static DEV: OnceLock<(tempfile::TempDir, &'static ttrace_core::Writer)> = OnceLock::new();
    DEV.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let w = ttrace_core::init(&ttrace_core::Config {
            ring_slots: 1 << 14,
            calibration: Duration::from_millis(2),
            ..ttrace_core::Config::at(tmp.path().join("dev"))
        })
        .unwrap();
        super::install();
        (tmp, w)
    })
}

/// The device's events of the spans and events named `name_pattern`, as a reader sees them.
fn view_of<T>(f: impl FnOnce(&devttrace::View<'_>) -> T) -> T {
    let reader = devttrace::Reader::open(device().0.path().join("dev")).unwrap();
    let view = devttrace::View::of(&reader, 0).unwrap();
    f(&view)
}

/// The instances of span `name` that ended, rebuilt as readers rebuild them, by the value of
/// their first field; none may be left open.
pub fn instances(name: &str) -> Vec<(u64, Instance)> {
    let (ended, open) = instances_and_open(name);
    assert_eq!(open, 0, "{name}: instances left open");
    ended
}

/// The instances of span `name` that ended (see [`instances`]), and how many are open.
pub fn instances_and_open(name: &str) -> (Vec<(u64, Instance)>, usize) {
    view_of(|view| {
        let mut model = Model::new(&view.meta, &view.cpus);
        let (mut done, mut left) = (Vec::new(), Vec::new());
        let filter = ttrace_reader::merge::Filter::default();
        let _ = ttrace_reader::merge::Merge::view(view, &filter).try_for_each_ref(|item| {
            if let ttrace_reader::merge::Item::Point { event, .. } = item {
                model.feed(event, &mut |step| match step {
                    Step::SpanEnd(i) | Step::SpanUnended { instance: i, .. } => done.push(*i),
                    _ => {}
                });
            }
            Ok::<(), ()>(())
        });
        model.finish(&mut |step| {
            if let Step::SpanUnended { instance, .. } = step {
                left.push(*instance);
            }
        });
        let named = |i: &Instance| view.meta.tracepoints[i.tracepoint as usize].name == name;
        let open = left.iter().filter(|i| named(i)).count();
        let ended = done
            .into_iter()
            .filter(named)
            .map(|i| (i.new.as_ref().expect("its new").args()[2], i))
            .collect();
        (ended, open)
    })
}

#[instrument(target = "calls", skip_all, fields(n = n))]
async fn call(n: u64) -> u64 {
    for step in 0..3u64 {
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(1)).await;
        tracing::debug!(target: "calls", n, step, "stepped");
    }
    n
}

const CALLS: u64 = 16;

#[test]
pub fn each_call_on_a_multi_thread_runtime_is_one_instance_measured_whole() {
    let (_, w) = device();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    // A follower from now, as `watch` and the rules `ctl on` installs follow the device.
    let reader = devttrace::Reader::open(device().0.path().join("dev")).unwrap();
    let mut follower = devttrace::Follower::new(&reader);
    // The time around each call, by the device's clock.
    let windows: Vec<(u64, u64, u64)> = rt.block_on(async {
        let tasks: Vec<_> = (0..CALLS)
            .map(|n| {
                tokio::spawn(async move {
                    let before = w.now();
                    assert_eq!(call(n).await, n);
                    (n, before, w.now())
                })
            })
            .collect();
        let mut windows = Vec::new();
        for t in tasks {
            windows.push(t.await.unwrap());
        }
        windows
    });
    drop(rt);

    let found = instances("calls::call");
    assert_eq!(found.len() as u64, CALLS, "one instance per call");
    let clock = view_of(|v| v.version.clock);
    let (mut lifetimes, mut busy, mut polls) = (0u64, 0u64, 0u64);
    for (n, i) in &found {
        let &(_, before, after) = windows.iter().find(|w| w.0 == *n).unwrap();
        let (new, close) = (i.new.as_ref().unwrap().stamp, i.close.unwrap());
        assert!(i.whole, "call {n}");
        assert!(
            before <= new && new <= close && close <= after,
            "call {n}: its life {new}..{close} within the call {before}..{after}"
        );
        // Each await that was pending is a poll: 1 + a yield and a sleep per step.
        assert!(i.polls.len() >= 4, "call {n}: {:?}", i.polls);
        assert!(i.dropped.is_some(), "call {n}: its drop re-entry, left out");
        assert!(i.busy() <= i.lifetime().unwrap());
        for p in &i.polls {
            assert!(new <= p.enter && p.enter <= p.exit && p.exit <= close);
        }
        lifetimes += clock.ticks_to_ns(i.lifetime().unwrap());
        busy += clock.ticks_to_ns(i.busy());
        polls += i.polls.len() as u64;
    }

    // A snapshot rule on the span's latency is on its instances' lifetimes: each call sleeps
    // three times 1 ms, so each lasts over 3 ms (by the monotonic clock, which the device's
    // rate was calibrated against: a rule at 2 ms leaves room for that calibration's error),
    // and is busy for much less. The last poll releases every event read, held for the
    // reorder window or not: positions other tests of this binary are still writing on the
    // same device cannot hold back the last closes, as they may a poll's.
    let rule = "latency calls::call > 2ms".parse().unwrap();
    let mut matcher = ttrace_reader::matcher::Matcher::new(vec![rule]);
    let fired = matcher.poll(&follower.finish().unwrap(), reader.now());
    assert_eq!(fired.len() as u64, CALLS, "{fired:?}");

    // `report`: the same instances, lifetimes, busy times and polls.
    let report = view_of(|view| {
        ttrace_reader::report::build(view, &Default::default(), &Default::default())
    });
    let row = report
        .spans
        .iter()
        .find(|r| r.name == "calls::call")
        .expect("a span row");
    assert_eq!(row.instances, CALLS);
    assert_eq!(row.drop_reentries, CALLS);
    assert_eq!(row.polls.count, polls);
    // Nanoseconds rounded per instance.
    assert!(row.lifetime.total.abs_diff(lifetimes) <= CALLS);
    assert!(row.busy.total.abs_diff(busy) <= CALLS);
    assert!(
        row.busy.max <= row.lifetime.max
            && row.idle.total + row.busy.total <= row.lifetime.total + CALLS
    );
    let text = ttrace_reader::report::text(&report);
    for what in ["lifetime", "busy", "idle", "poll"] {
        assert!(
            text.lines()
                .any(|l| l.ends_with(&format!("  calls::call {what}"))),
            "{text}"
        );
    }

    // Chrome: one async slice per call, its polls inside it.
    let json = view_of(|view| {
        let mut out = Vec::new();
        let filter = ttrace_reader::merge::Filter::default();
        ttrace_reader::export::chrome::write(
            view.into(),
            &view.cpus,
            ttrace_reader::merge::Merge::view(view, &filter),
            &mut out,
            |_| {},
        )
        .unwrap();
        serde_json::from_slice::<serde_json::Value>(&out).unwrap()
    });
    let events = json["traceEvents"].as_array().unwrap();
    let of = |ph: &str| -> Vec<&serde_json::Value> {
        events
            .iter()
            .filter(|e| e["name"] == "calls::call" && e["ph"] == ph)
            .collect()
    };
    let (begins, ends, slices) = (of("b"), of("e"), of("X"));
    assert_eq!((begins.len() as u64, ends.len() as u64), (CALLS, CALLS));
    assert_eq!(
        slices.len() as u64,
        polls,
        "every poll, and no drop re-entry"
    );
    let ts = |e: &serde_json::Value| e["ts"].as_f64().unwrap();
    for b in &begins {
        assert_eq!(b["cat"], "span");
        let n = b["args"]["n"].as_u64().unwrap();
        let e = ends.iter().find(|e| e["id"] == b["id"]).unwrap();
        let id = b["id"].as_str().unwrap().split_once(':').unwrap().1;
        let inside: Vec<_> = slices.iter().filter(|s| s["args"]["span"] == id).collect();
        let (_, i) = found.iter().find(|f| f.0 == n).unwrap();
        assert_eq!(inside.len(), i.polls.len(), "call {n}");
        for s in inside {
            let end = ts(s) + s["dur"].as_f64().unwrap();
            assert!(
                ts(b) <= ts(s) && end <= ts(e) + 0.001,
                "call {n}: {s} in {b}..{e}"
            );
        }
    }
}

/// A future that is pending once, then ready.
#[derive(Default)]
struct PendingOnce(bool);

impl Future for PendingOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Ready(())
        } else {
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

#[instrument(target = "hops", skip_all, fields(n = n))]
async fn hop(n: u64) -> u64 {
    PendingOnce::default().await;
    tracing::info!(target: "hops", n, "second half");
    n
}

/// A waker that does nothing: the test polls by hand.
fn noop_waker() -> Waker {
    const VTABLE: RawWakerVTable =
        RawWakerVTable::new(|p| RawWaker::new(p, &VTABLE), |_| {}, |_| {}, |_| {});
    // SAFETY: every function of the table ignores the data pointer, which is null.
    unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) }
}

#[test]
pub fn a_span_polled_on_two_threads_is_one_instance() {
    device();
    let mut fut = Box::pin(hop(7));
    // The first thread polls, hands the future on, and lives until the second is done: two
    // threads alive together have two thread ids (one that ended may be reused).
    std::thread::scope(|s| {
        let (hand_on, handed) = std::sync::mpsc::channel();
        let (finished, wait_finished) = std::sync::mpsc::channel::<()>();
        s.spawn(move || {
            let waker = noop_waker();
            let mut cx = Context::from_waker(&waker);
            assert!(fut.as_mut().poll(&mut cx).is_pending());
            hand_on.send(fut).unwrap();
            // An error once the test fails elsewhere (`finished` dropped): end too.
            let _ = wait_finished.recv();
        });
        let mut fut = handed.recv().unwrap();
        s.spawn(move || {
            let waker = noop_waker();
            let mut cx = Context::from_waker(&waker);
            assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(7));
            drop(fut);
        })
        .join()
        .unwrap();
        finished.send(()).unwrap();
    });
    let found = instances("hops::hop");
    assert_eq!(found.len(), 1);
    let i = &found[0].1;
    assert_eq!(i.polls.len(), 2, "{:?}", i.polls);
    assert_ne!(i.polls[0].ctx, i.polls[1].ctx, "polled on two threads");
    assert!(i.dropped.is_some_and(|d| d.ctx == i.polls[1].ctx));
    assert!(i.whole && i.close.is_some());
}
