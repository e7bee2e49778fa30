//! `tracing` span instances in the Perfetto and Chrome exports: a child instance nested in
//! its parent, lanes bounded by what is open at once (not by the number of instances), no
//! drop re-entry drawn as a poll, wall-clock time through a clock snapshot, and each end on
//! the thread that ended it.
//!
//! The device is written here, through `ttrace_tracing`'s subscriber into a device of the
//! test's own (a `tracing` callsite knows one device, so this binary writes this one only,
//! once: [`nested_device`]). Two threads poll every request: the first polls each once (its
//! `work` child yields), the second, which gets it through a bounded channel, completes and
//! drops it. So every instance is polled on both threads, and no more than
//! [`IN_FLIGHT`] requests are ever on their way.

use super::export::{
    assert_same_events, dump, dump_as_perfetto, moved, official_perfetto_check, perfetto_events,
    read_perfetto,
};
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Mutex, OnceLock};
use std::task::{Context, Poll};
use tracing::Instrument;
use ttrace_tests::perfetto::{Slice, Trace, Value};
use ttrace_tests::reader;

/// The names of the spans (their callsites' targets and names).
const REQUEST: &str = "export::spans::request";
const WORK: &str = "export::spans::work";
/// Requests.
const REQUESTS: u64 = 300;
/// One request in this many runs two `work` children at once.
const SIBLINGS: u64 = 10;
/// One request in this many leaves its `work` child running after it ends (a task it
/// spawned): the child outlives its parent.
const SPAWNS: u64 = 25;
/// Requests the channel between the threads holds.
const IN_FLIGHT: usize = 4;

/// Pending once, then ready.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        match std::mem::replace(&mut self.0, true) {
            true => Poll::Ready(()),
            false => Poll::Pending,
        }
    }
}

#[tracing::instrument]
async fn work(id: u64) -> u64 {
    YieldOnce(false).await;
    tracing::debug!(id, "worked");
    id * 2
}

type Task = Pin<Box<dyn Future<Output = u64> + Send>>;

/// Children left running by the requests that ended before them.
static SPAWNED: Mutex<Vec<Task>> = Mutex::new(Vec::new());

/// Request `id`: its `work`, two at once (the second begins while the first is open), or
/// one polled once and left running.
async fn request(id: u64) -> u64 {
    if id % SPAWNS == 0 {
        let mut child: Task = Box::pin(work(id));
        std::future::poll_fn(|cx| {
            assert!(child.as_mut().poll(cx).is_pending());
            Poll::Ready(())
        })
        .await;
        SPAWNED.lock().unwrap().push(child);
        return id;
    }
    if id % SIBLINGS != 0 {
        return work(id).await;
    }
    let (mut a, mut b): (Task, Task) = (Box::pin(work(id)), Box::pin(work(id + REQUESTS)));
    let (mut x, mut y) = (None, None);
    std::future::poll_fn(|cx| {
        if x.is_none() {
            x = match a.as_mut().poll(cx) {
                Poll::Ready(v) => Some(v),
                Poll::Pending => None,
            };
        }
        if y.is_none() {
            y = match b.as_mut().poll(cx) {
                Poll::Ready(v) => Some(v),
                Poll::Pending => None,
            };
        }
        match (x, y) {
            (Some(x), Some(y)) => Poll::Ready(x + y),
            _ => Poll::Pending,
        }
    })
    .await
}

/// A waker that does nothing: each task is polled by hand, as its turn comes.
struct Noop;

impl std::task::Wake for Noop {
    fn wake(self: std::sync::Arc<Self>) {}
}

/// Polls `task` once, on this thread.
fn poll(task: &mut Task) -> Poll<u64> {
    let waker = std::task::Waker::from(std::sync::Arc::new(Noop));
    task.as_mut().poll(&mut Context::from_waker(&waker))
}

/// Writes the workload (see the module's documentation) into a device in `dir`.
fn write_nested(dir: &Path) {
    let config = ttrace_tests::config(dir, 1 << 15, 2);
    let writer: &'static ttrace_core::Writer =
        Box::leak(Box::new(ttrace_core::Writer::open(&config).unwrap()));
    let dispatch = tracing::Dispatch::new(ttrace_tracing::subscriber_into(writer));
    let (send, receive) = std::sync::mpsc::sync_channel::<Task>(IN_FLIGHT);
    std::thread::scope(|s| {
        let second = std::thread::Builder::new()
            .name("second".into())
            .spawn_scoped(s, || {
                tracing::dispatcher::with_default(&dispatch, || {
                    for mut task in receive {
                        assert!(poll(&mut task).is_ready());
                    }
                })
            })
            .unwrap();
        std::thread::Builder::new()
            .name("first".into())
            .spawn_scoped(s, || {
                tracing::dispatcher::with_default(&dispatch, || {
                    for id in 0..REQUESTS {
                        let span = tracing::info_span!("request", id);
                        let mut task: Task = Box::pin(request(id).instrument(span));
                        // A request that left its child running ends (and closes) first.
                        match poll(&mut task) {
                            Poll::Pending => send.send(task).unwrap(),
                            Poll::Ready(_) => drop(task),
                        }
                        let spawned = std::mem::take(&mut *SPAWNED.lock().unwrap());
                        for child in spawned {
                            send.send(child).unwrap();
                        }
                    }
                    drop(send);
                })
            })
            .unwrap()
            .join()
            .unwrap();
        second.join().unwrap();
    });
}

/// The device of [`write_nested`], written once for the tests of this binary (and removed
/// when the process exits: a static is never dropped).
pub(crate) fn nested_device() -> &'static str {
    static DEVICE: OnceLock<(tempfile::TempDir, String)> = OnceLock::new();
    extern "C" fn remove() {
        if let Some((tmp, _)) = DEVICE.get() {
            let _ = std::fs::remove_dir_all(tmp.path());
        }
    }
    let (_, dev) = DEVICE.get_or_init(|| {
        let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        // SAFETY: `remove` is a function with no arguments, callable at any time.
        assert_eq!(unsafe { libc::atexit(remove) }, 0);
        let dev = tmp.path().join("nested");
        write_nested(&dev);
        let path = dev.to_str().unwrap().to_string();
        (tmp, path)
    });
    dev
}

/// An instance as the device holds it (`ttrace_model::spans`): its id, its parent's, when it
/// began and closed (ns since the device's creation), and its drop re-entry's enter (ns
/// and thread).
#[derive(Debug)]
struct Instance {
    id: u64,
    parent: u64,
    name: String,
    new: u64,
    close: u64,
    dropped: Option<(u64, u32)>,
}

/// The instances of `dev`, closed, as the model (`ttrace_model::model`) rebuilds them.
fn instances(dev: &str) -> Vec<Instance> {
    use ttrace_model::model::{Model, Step};
    let reader = devttrace::Reader::open(dev).unwrap();
    let view = devttrace::View::of(&reader, 0).unwrap();
    let clock = view.version.clock;
    let ns = |stamp: u64| clock.since_anchor_ns(stamp) as u64;
    let mut model = Model::whole(&view.meta);
    let mut out = Vec::new();
    let mut items = ttrace_reader::merge::Merge::view(&view, &Default::default());
    items
        .try_for_each_ref(|item| {
            if let ttrace_reader::merge::Item::Point { event, .. } = item {
                model.feed(event, &mut |step| {
                    let i = match step {
                        Step::SpanEnd(i) => i,
                        Step::SpanUnended { instance, why } => panic!("{why:?}: {instance:?}"),
                        _ => return,
                    };
                    let new = i.new.expect("every new in the trace");
                    out.push(Instance {
                        id: i.id,
                        parent: i.parent().unwrap(),
                        name: view.meta.tracepoints[i.tracepoint as usize].name.clone(),
                        new: ns(new.stamp),
                        close: ns(i.close.expect("closed")),
                        dropped: i.dropped.map(|p| (ns(p.enter), p.ctx as u32)),
                    });
                });
            }
            Ok::<_, ()>(())
        })
        .unwrap();
    model.finish(&mut |step| {
        if let Step::SpanUnended { instance, why } = step {
            panic!("{why:?}: {instance:?}")
        }
    });
    out
}

/// The slice of the instance whose new is at `ns` with id `id`: on a lane.
fn slice_of<'t>(trace: &Trace, slices: &'t [Slice], id: u64, ns: u64) -> &'t Slice {
    slices
        .iter()
        .find(|s| {
            let e = &trace.events[s.begin];
            e.kind == 1 && !e.on_thread && e.ns == ns && e.args[0].1 == Value::Pointer(id)
        })
        .unwrap_or_else(|| panic!("no slice of span {id:#x} at {ns}"))
}

#[test]
fn the_perfetto_export_nests_each_child_span_in_its_parent_on_a_bounded_set_of_lanes() {
    let dev = nested_device();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("trace.pftrace");
    reader!("export", "--format", "perfetto", dev, "-o", &file).ok();
    let trace = read_perfetto(&file);
    assert_same_events(perfetto_events(&trace, dev), dump_as_perfetto(dev));
    nested_on_few_lanes(dev, &trace);
}

/// Checks that the Perfetto export `trace` of the device [`nested_device`] shows each child
/// instance nested in its parent (or linked to it), on a few lanes, and each drop re-entry
/// as instants, no poll.
fn nested_on_few_lanes(dev: &str, trace: &Trace) {
    let instances = instances(dev);
    let two = |id| id % SPAWNS != 0 && id % SIBLINGS == 0;
    let children = REQUESTS + (0..REQUESTS).filter(|&id| two(id)).count() as u64;
    assert_eq!(instances.len() as u64, REQUESTS + children);
    // Every instance polled on both threads: its polls on each thread's track.
    let polled = |name: &str| -> std::collections::HashSet<u64> {
        let polls = trace.events.iter().filter(|e| e.on_thread && e.kind == 1);
        polls.filter(|e| e.name == name).map(|e| e.tid).collect()
    };
    assert_eq!(polled(REQUEST).len(), 2);
    assert_eq!(polled(WORK).len(), 2);
    // Each child on its parent's lane, in its time; else linked to it by a flow (a sibling
    // begun while another was open there), or moved (it outlived its parent).
    let slices = trace.slices();
    let end = |s: &Slice| trace.events[s.end.expect("ended")].clone();
    let (mut nested, mut linked, mut outlived) = (0, 0, 0);
    let by_id_at = |id: u64, ns: u64| {
        instances
            .iter()
            .filter(|i| i.id == id && i.new <= ns && ns <= i.close)
            .max_by_key(|i| i.new)
            .unwrap()
    };
    for child in instances.iter().filter(|i| i.name == WORK) {
        let parent = by_id_at(child.parent, child.new);
        assert_eq!(parent.name, REQUEST);
        let (c, p) = (
            slice_of(trace, &slices, child.id, child.new),
            slice_of(trace, &slices, parent.id, parent.new),
        );
        let at = slices.iter().position(|s| std::ptr::eq(s, p)).unwrap();
        if c.track == p.track && c.under.last() == Some(&at) {
            assert!(trace.events[c.begin].ns >= trace.events[p.begin].ns);
            assert!(end(c).ns <= end(p).ns, "{child:?} in {parent:?}");
            if moved(&end(c)) {
                // Its slice goes on from its parent's close, joined by a flow.
                assert_eq!(end(c).ns, parent.close);
                let rest = slices
                    .iter()
                    .find(|s| trace.events[s.begin].flows == end(c).flows && s.begin != c.begin)
                    .unwrap();
                assert!(moved(&trace.events[rest.begin]));
                assert_ne!(rest.track, c.track);
                assert_eq!(end(rest).ns, child.close);
                outlived += 1;
            } else {
                assert_eq!(end(c).ns, child.close);
                nested += 1;
            }
        } else {
            let flow = &trace.events[c.begin].flows;
            assert_eq!(flow.len(), 1, "{child:?} neither nested nor linked");
            assert_eq!(&end(p).flows, flow);
            linked += 1;
        }
    }
    let spawned = REQUESTS.div_ceil(SPAWNS);
    let siblings = (0..REQUESTS).filter(|&id| two(id)).count() as u64;
    assert_eq!(outlived, spawned);
    assert_eq!(linked, siblings);
    assert_eq!(nested, REQUESTS - spawned);
    // Hundreds of instances, a few lanes: as many as trees were open at once, at most two
    // per request on its way.
    let lanes: Vec<_> = trace.tracks.values().collect();
    assert!(lanes.len() >= 2, "{lanes:?}");
    assert!(lanes.len() <= 2 * (IN_FLIGHT + 2), "{} lanes", lanes.len());
    assert!(lanes
        .iter()
        .all(|(_, name)| name.as_deref() == Some(REQUEST)));
    // The drop re-entries: instants, no poll; on the instance's lane, but for a request
    // whose child, still running, is open above it there (on the thread then).
    let dropped: Vec<_> = instances
        .iter()
        .filter_map(|i| Some((i.dropped?, &i.name)))
        .collect();
    assert_eq!(dropped.len() as u64, REQUESTS + children);
    let mut on_thread = 0;
    for ((ns, tid), name) in dropped {
        let at: Vec<_> = trace
            .events
            .iter()
            .filter(|e| e.ns == ns && e.tid == u64::from(tid) && &e.name == name)
            .collect();
        assert_eq!(at.len(), 1, "{at:?}");
        assert_eq!((at[0].kind, at[0].category.as_str()), (3, "drop"));
        on_thread += u64::from(at[0].on_thread);
    }
    assert_eq!(on_thread, spawned);
}

#[test]
fn the_perfetto_export_tells_the_wall_clock_time_through_a_clock_snapshot() {
    let dev = nested_device();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("trace.pftrace");
    reader!("export", "--format", "perfetto", dev, "-o", &file).ok();
    let trace = read_perfetto(&file);
    let anchor = devttrace::Reader::open(dev)
        .unwrap()
        .version()
        .clock
        .anchor_realtime_ns;
    // One snapshot per sequence (each writer's clock its own), the first naming the
    // trace's clock; each ties the sequence's clock at 0 to the device's anchor.
    let threads: std::collections::HashSet<u64> = trace.events.iter().map(|e| e.tid).collect();
    assert_eq!(trace.snapshots.len(), threads.len());
    for s in &trace.snapshots {
        assert_eq!(s.clocks.len(), 2, "{s:?}");
        assert!(s
            .clocks
            .contains(&(ttrace_tests::perfetto::REALTIME, anchor)));
        assert!(s.clocks.contains(&(64, 0)));
    }
    assert!(trace.snapshots[1..].iter().all(|s| s.primary.is_none()));
    assert!(trace.events.iter().all(|e| e.realtime == anchor + e.ns));
}

#[test]
fn each_async_end_of_the_chrome_export_is_on_the_thread_that_ended_it() {
    let dev = nested_device();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("trace.json");
    reader!("export", "--format", "chrome", dev, "-o", &file).ok();
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    // Each new and close: its span id and time, and its thread.
    let steps = |step: &str| -> std::collections::HashMap<(String, i64), u64> {
        dump(dev, false)
            .into_iter()
            .filter_map(|e| {
                let rest = e.text.split_once(&format!("{step}(span="))?.1;
                let id = rest.split([' ', ')']).next()?;
                Some((
                    (id.to_string(), super::export::dump_ns(&e.time)),
                    e.tid.into(),
                ))
            })
            .collect()
    };
    let (news, closes) = (steps("new"), steps("close"));
    let instances = instances(dev);
    assert_eq!(closes.len(), instances.len());
    let edges = |ph: &str| -> std::collections::HashMap<(String, i64), u64> {
        let events = doc["traceEvents"].as_array().unwrap().iter();
        events
            .filter(|e| e["ph"] == ph && e["cat"] == "span")
            .map(|e| {
                let id = e["id"].as_str().unwrap().split_once(':').unwrap().1;
                let at = super::export::json_ns(&e["ts"]);
                ((id.to_string(), at), e["tid"].as_u64().unwrap())
            })
            .collect()
    };
    // Each begin on the thread of its new, each end on the thread of its close: for most,
    // another (the second thread ends what the first began).
    let (begins, ends) = (edges("b"), edges("e"));
    assert_eq!((&begins, &ends), (&news, &closes));
    let elsewhere = instances.iter().filter(|i| {
        let id = format!("{:#x}", i.id);
        news[&(id.clone(), i.new as i64)] != closes[&(id, i.close as i64)]
    });
    assert!(elsewhere.count() as u64 >= REQUESTS - REQUESTS.div_ceil(SPAWNS));
}

#[test]
#[ignore = "needs python3 with perfetto and protobuf: pip install perfetto protobuf"]
fn perfettos_own_schema_reads_the_nested_spans_export_as_our_reader_does() {
    let dev = nested_device();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("trace.pftrace");
    reader!("export", "--format", "perfetto", dev, "-o", &file).ok();
    // The official reading is ours, event by event, track by track: what nests in ours
    // nests in it.
    official_perfetto_check(dev, &file);
    nested_on_few_lanes(dev, &read_perfetto(&file));
}
