//! The model's rules, one test each, on events written by hand.

use super::*;
use devttrace::event::{Mark, RingSnapshot};
use devttrace::meta::{TaskInfo, TracepointInfo};
use ttrace_layouts::entry::TypeWord;

/// Tracepoint ids of [`meta`].
const ENTRY: u16 = 0;
const EXIT: u16 = 1;
const START: u16 = 2;
const STOP: u16 = 3;
const LONE_START: u16 = 4;
const NEW: u16 = 5;
const ENTER: u16 = 6;
const LEAVE: u16 = 7;
const CLOSE: u16 = 8;
const OTHER: u16 = 9;

fn meta() -> Metadata {
    let tp = |name: &str, kind, role| TracepointInfo {
        id: 0,
        name: name.into(),
        kind,
        classes: 1,
        format: String::new(),
        nargs: 0,
        types: Vec::new(),
        tables: Vec::new(),
        role,
    };
    Metadata {
        tracepoints: vec![
            tp("read", Kind::Entry, Role::Point),
            tp("read", Kind::Exit, Role::Point),
            tp("req_start", Kind::Start, Role::Point),
            tp("req_done", Kind::Stop, Role::Point),
            tp("tick_start", Kind::Start, Role::Point),
            tp("task", Kind::Start, Role::SpanNew),
            tp("task", Kind::Entry, Role::SpanEnter),
            tp("task", Kind::Exit, Role::SpanExit),
            tp("task", Kind::Stop, Role::SpanClose),
            tp("other", Kind::Start, Role::Point),
        ],
        ..Default::default()
    }
}

const T1: u64 = 1 << 32 | 1;
const T2: u64 = 1 << 32 | 2;

fn ev(stamp: u64, tp: u16, ctx: u64, args: &[u64]) -> Event {
    let kind = meta().tracepoints[tp as usize].kind;
    Event::new(
        stamp,
        TypeWord::new(kind, args.len() as u8, tp),
        ctx,
        args,
        0,
    )
}

/// A step as a short line: what, and the stamps it joins.
fn show(s: &Step<&Event>) -> String {
    match s {
        Step::Instant(e) => format!("instant {}", e.stamp),
        Step::CallBegin { event, depth } => format!("call+ {} d{depth}", event.stamp),
        Step::CallEnd {
            begin, end, depth, ..
        } => {
            format!("call {}..{} d{depth}", begin.stamp, end.stamp)
        }
        Step::StemBegin(e) => format!("stem+ {}", e.stamp),
        Step::StemEnd { begin, end, .. } => format!("stem {}..{}", begin.stamp, end.stamp),
        Step::SpanNew(e) => format!("new {}", e.stamp),
        Step::SpanRecord(e) => format!("record {}", e.stamp),
        Step::SpanFollows(e) => format!("follows {}", e.stamp),
        Step::PollBegin(e) => format!("poll+ {}", e.stamp),
        Step::PollEnd { begin, end } => format!("poll {}..{}", begin.stamp, end.stamp),
        Step::PollDrop { begin, end } => format!("drop {}..{}", begin.stamp, end.stamp),
        Step::SpanEnd(i) => format!(
            "end {} polls={} dropped={} whole={}",
            i.close.unwrap_or(0),
            i.polls.len(),
            i.dropped.is_some(),
            i.whole
        ),
        Step::SpanUnended { instance, why } => {
            format!("unended {} {}", instance.begin(), why.name())
        }
        Step::Unpaired { event, why } => format!("unpaired {} {}", event.stamp, why.name()),
        Step::Cpu { ctx, stretch } => format!(
            "cpu {ctx:#x} {} {}..{}",
            stretch.state.name(),
            stretch.from,
            stretch.to
        ),
    }
}

/// What `model` makes of `events` (`None`: a gap there).
fn run(mut model: Model, events: &[Option<Event>]) -> Vec<String> {
    let mut steps = Vec::new();
    let mut out = |s: Step<&Event>| steps.push(show(&s));
    for e in events {
        match e {
            Some(e) => model.feed(e, &mut out),
            None => model.gap(&mut out),
        }
    }
    model.finish(&mut out);
    steps
}

#[test]
fn calls_nest_per_thread_and_an_exit_with_nothing_open_is_unpaired() {
    let steps = run(
        Model::whole(&meta()),
        &[
            Some(ev(1, EXIT, T1, &[])),
            Some(ev(2, ENTRY, T1, &[])),
            Some(ev(3, ENTRY, T2, &[])),
            Some(ev(4, ENTRY, T1, &[])),
            Some(ev(5, EXIT, T1, &[])),
            Some(ev(6, EXIT, T2, &[])),
            Some(ev(7, OTHER, T2, &[])),
        ],
    );
    assert_eq!(
        steps,
        [
            "unpaired 1 partner_missing",
            "call+ 2 d0",
            "call+ 3 d0",
            "call+ 4 d1",
            "call 4..5 d1",
            "call 3..6 d0",
            "instant 7",
            "unpaired 2 open_at_end",
        ]
    );
}

#[test]
fn stems_pair_the_latest_start_of_their_thread_and_a_start_no_stop_ends_is_an_instant() {
    let steps = run(
        Model::whole(&meta()),
        &[
            Some(ev(1, START, T1, &[])),
            Some(ev(2, START, T1, &[])),
            Some(ev(3, START, T2, &[])),
            Some(ev(4, LONE_START, T1, &[])),
            Some(ev(5, STOP, T1, &[])),
            Some(ev(6, STOP, T2, &[])),
            Some(ev(7, STOP, T2, &[])),
        ],
    );
    assert_eq!(
        steps,
        [
            "stem+ 1",
            "stem+ 2",
            "stem+ 3",
            "instant 4",
            "stem 2..5",
            "stem 3..6",
            "unpaired 7 partner_missing",
            "unpaired 1 open_at_end",
        ]
    );
}

#[test]
fn nothing_before_the_horizon_is_paired() {
    let ring = |lost, first| RingSnapshot::<Mark> {
        counts: devttrace::event::Accounting {
            lost,
            ..Default::default()
        },
        events: vec![devttrace::event::Mark {
            stamp: first,
            ..Default::default()
        }],
        ..Default::default()
    };
    let model = Model::new(&meta(), &[ring(1, 10), ring(0, 1)]);
    assert_eq!(model.horizon(), 10);
    let steps = run(
        model,
        &[
            Some(ev(1, ENTRY, T1, &[])),
            Some(ev(2, START, T1, &[])),
            Some(ev(3, NEW, T1, &[9])),
            Some(ev(11, EXIT, T1, &[])),
            Some(ev(12, STOP, T1, &[])),
            Some(ev(13, CLOSE, T1, &[9])),
        ],
    );
    assert_eq!(
        steps,
        [
            "unpaired 1 before_horizon",
            "unpaired 2 before_horizon",
            "new 3",
            "unpaired 11 partner_missing",
            "unpaired 12 partner_missing",
            "end 13 polls=0 dropped=false whole=false",
        ]
    );
}

#[test]
fn a_gap_gives_up_what_is_open() {
    let steps = run(
        Model::whole(&meta()),
        &[
            Some(ev(1, ENTRY, T1, &[])),
            Some(ev(2, START, T2, &[])),
            Some(ev(3, NEW, T1, &[9])),
            None,
            Some(ev(4, EXIT, T1, &[])),
            Some(ev(5, ENTRY, T1, &[])),
            Some(ev(6, EXIT, T1, &[])),
            Some(ev(7, CLOSE, T1, &[9])),
        ],
    );
    assert_eq!(
        steps,
        [
            "call+ 1 d0",
            "stem+ 2",
            "new 3",
            "unpaired 1 across_gap",
            "unpaired 2 across_gap",
            "unpaired 4 partner_missing",
            "call+ 5 d0",
            "call 5..6 d0",
            "end 7 polls=0 dropped=false whole=false",
        ]
    );
}

#[test]
fn a_thread_given_a_dead_threads_id_closes_nothing_it_left_open() {
    let task = |timestamp| TaskInfo {
        pid: 1,
        tid: 1,
        timestamp,
        name: "t".into(),
        ..Default::default()
    };
    let meta = Metadata {
        threads: vec![task(0), task(100)],
        ..meta()
    };
    let steps = run(
        Model::whole(&meta),
        &[
            Some(ev(10, ENTRY, T1, &[])),
            Some(ev(20, START, T1, &[])),
            Some(ev(110, EXIT, T1, &[])),
            Some(ev(120, STOP, T1, &[])),
            Some(ev(130, ENTRY, T1, &[])),
        ],
    );
    assert_eq!(
        steps,
        [
            "call+ 10 d0",
            "stem+ 20",
            "unpaired 110 partner_missing",
            "unpaired 120 partner_missing",
            "call+ 130 d0",
            "unpaired 10 thread_ended",
            "unpaired 130 open_at_end",
            "unpaired 20 thread_ended",
        ]
    );
}

#[test]
fn the_drop_reentry_is_told_once_and_is_no_poll() {
    let steps = run(
        Model::whole(&meta()),
        &[
            Some(ev(1, NEW, T1, &[9])),
            Some(ev(2, ENTER, T1, &[9])),
            Some(ev(3, LEAVE, T1, &[9])),
            // Polled again on another thread, with something inside.
            Some(ev(4, ENTER, T2, &[9])),
            Some(ev(5, OTHER, T2, &[])),
            Some(ev(6, LEAVE, T2, &[9])),
            // The drop: entered, left, closed at once.
            Some(ev(7, ENTER, T1, &[9])),
            Some(ev(8, LEAVE, T1, &[9])),
            Some(ev(9, CLOSE, T1, &[9])),
        ],
    );
    assert_eq!(
        steps,
        [
            "new 1",
            "poll+ 2",
            "poll 2..3",
            "poll+ 4",
            "instant 5",
            "poll 4..6",
            "drop 7..8",
            "end 9 polls=2 dropped=true whole=true",
        ]
    );
}

#[test]
fn an_empty_poll_not_followed_by_the_close_is_a_poll() {
    let steps = run(
        Model::whole(&meta()),
        &[
            Some(ev(1, NEW, T1, &[9])),
            Some(ev(2, ENTER, T1, &[9])),
            Some(ev(3, LEAVE, T1, &[9])),
            Some(ev(4, ENTER, T1, &[9])),
            Some(ev(5, LEAVE, T1, &[9])),
            Some(ev(6, OTHER, T1, &[])),
            Some(ev(7, CLOSE, T1, &[9])),
            // Held to the end.
            Some(ev(8, NEW, T2, &[3])),
            Some(ev(9, ENTER, T2, &[3])),
            Some(ev(10, LEAVE, T2, &[3])),
            Some(ev(11, ENTER, T2, &[3])),
        ],
    );
    assert_eq!(
        steps,
        [
            "new 1",
            "poll+ 2",
            "poll 2..3",
            "poll+ 4",
            "poll 4..5",
            "instant 6",
            "end 7 polls=2 dropped=false whole=true",
            "new 8",
            "poll+ 9",
            "poll 9..10",
            "poll+ 11",
            "unended 8 open_at_end",
        ]
    );
}

#[test]
fn a_new_under_an_open_id_supersedes_the_instance() {
    let steps = run(
        Model::whole(&meta()),
        &[
            Some(ev(1, NEW, T1, &[9])),
            Some(ev(2, NEW, T1, &[9])),
            Some(ev(3, CLOSE, T1, &[9])),
        ],
    );
    assert_eq!(
        steps,
        [
            "new 1",
            "unended 1 superseded",
            "new 2",
            "end 3 polls=0 dropped=false whole=true",
        ]
    );
}

#[test]
fn a_model_cloned_at_a_cut_goes_on_as_the_whole_does() {
    let events: Vec<Event> = (0..40u64)
        .map(|k| {
            let tp = [ENTRY, START, NEW, ENTER, LEAVE, EXIT, STOP, CLOSE][(k % 8) as usize];
            ev(k, tp, [T1, T2][(k / 8 % 2) as usize], &[k / 16])
        })
        .collect();
    let whole = run(
        Model::whole(&meta()),
        &events.iter().copied().map(Some).collect::<Vec<_>>(),
    );
    for cut in 0..events.len() {
        let mut model = Model::whole(&meta());
        let mut steps = Vec::new();
        for e in &events[..cut] {
            model.feed(e, &mut |s| steps.push(show(&s)));
        }
        let rest: Vec<Option<Event>> = events[cut..].iter().copied().map(Some).collect();
        steps.extend(run(model.clone(), &rest));
        assert_eq!(steps, whole, "cut at {cut}");
    }
}

#[test]
fn an_undefined_tracepoint_is_an_instant() {
    let e = Event::new(1, TypeWord::new(Kind::Entry, 0, 99), T1, &[], 0);
    assert_eq!(run(Model::whole(&meta()), &[Some(e)]), ["instant 1"]);
}

#[test]
fn kept_fields_link_each_instance_to_the_parent_open_at_its_new() {
    let (new, close) = (NEW, CLOSE);
    // `record` steps of the span (tracepoint 10).
    let mut m = meta();
    m.tracepoints.push(TracepointInfo {
        role: Role::SpanRecord,
        ..m.tracepoints[NEW as usize].clone()
    });
    let record = 10;
    let event = |stamp, tp: u16, args: &[u64]| {
        let kind = m.tracepoints[tp as usize].kind;
        Event::new(
            stamp,
            TypeWord::new(kind, args.len() as u8, tp),
            T1,
            args,
            0,
        )
    };
    let mut model = Model::whole(&m).keep_fields();
    let mut ended = Vec::new();
    let mut feed = |model: &mut Model, e: Event| {
        model.feed(&e, &mut |s| {
            if let Step::SpanEnd(i) = s {
                ended.push(*i);
            }
        })
    };
    // Parent 5 (field 70), its child 6; the parent records 200 after the child began,
    // then closes; id 5 is given again to a root, whose child 7 is not 6's sibling.
    feed(&mut model, event(10, new, &[5, 0, 70]));
    feed(&mut model, event(20, new, &[6, 5, 1]));
    feed(&mut model, event(30, record, &[5, 200]));
    feed(&mut model, event(40, close, &[6]));
    feed(&mut model, event(50, close, &[5]));
    feed(&mut model, event(60, new, &[5, 0, 71]));
    feed(&mut model, event(70, new, &[7, 5, 2]));
    feed(&mut model, event(80, close, &[7]));
    // A child whose parent is not in the trace.
    feed(&mut model, event(90, new, &[8, 9, 3]));
    feed(&mut model, event(95, close, &[8]));
    let by_id = |id: u64, at: u64| {
        let i = ended
            .iter()
            .find(|i| i.id == id && i.begin() == at)
            .unwrap();
        i.node.clone().unwrap()
    };
    let six = by_id(6, 20);
    let parents = six.ancestors();
    assert_eq!(parents.len(), 1);
    assert_eq!(parents[0].new.map(|e| e.args()[2]), Some(70));
    let late: Vec<u64> = parents[0].records().iter().map(|e| e.args()[1]).collect();
    assert_eq!(
        late,
        [200],
        "the parent's record after the child began is seen"
    );
    assert!(six.rooted());
    let seven = by_id(7, 70);
    assert_eq!(seven.ancestors()[0].new.map(|e| e.args()[2]), Some(71));
    let eight = by_id(8, 90);
    assert!(eight.ancestors().is_empty());
    assert!(!eight.rooted());
    assert_eq!(eight.parent_id(), Some(9));
    // Without `keep_fields`, no node.
    let mut plain = Model::whole(&m);
    let mut nodes = Vec::new();
    for e in [event(10, new, &[5, 0, 70]), event(20, close, &[5])] {
        plain.feed(&e, &mut |s| {
            if let Step::SpanEnd(i) = s {
                nodes.push(i.node.is_none());
            }
        });
    }
    assert_eq!(nodes, [true]);
}

/// Tracepoint ids of [`meta_anatomy`]: [`meta`]'s, then the kernel's and the runtime's.
const OUT: u16 = 10;
const IN: u16 = 11;
const WAKE: u16 = 12;
const LOST: u16 = 13;

fn meta_anatomy() -> Metadata {
    use ttrace_layouts::device::{
        CLASS_MESSAGES, SWITCH_IN_NAME, SWITCH_LOST_NAME, SWITCH_OUT_NAME, WAKE_NAME,
    };
    let mut m = meta();
    for (name, kind, classes) in [
        (SWITCH_OUT_NAME, Kind::Stop, CLASS_MESSAGES),
        (SWITCH_IN_NAME, Kind::Start, CLASS_MESSAGES),
        (WAKE_NAME, Kind::Entry, 1),
        (SWITCH_LOST_NAME, Kind::Entry, CLASS_MESSAGES),
    ] {
        m.tracepoints.push(TracepointInfo {
            id: m.tracepoints.len() as u16,
            name: name.into(),
            kind,
            classes,
            format: String::new(),
            nargs: 0,
            types: Vec::new(),
            tables: Vec::new(),
            role: Role::Point,
        });
    }
    m
}

fn ev2(stamp: u64, tp: u16, ctx: u64, args: &[u64]) -> Event {
    let kind = meta_anatomy().tracepoints[tp as usize].kind;
    Event::new(
        stamp,
        TypeWord::new(kind, args.len() as u8, tp),
        ctx,
        args,
        0,
    )
}

/// What `model` makes of `events`: the parts of each call, pair and closed instance, as
/// `name=ticks` of the parts that are not zero.
fn anatomies(mut model: Model, events: &[Option<Event>]) -> Vec<String> {
    use crate::anatomy::Parts;
    let show = |what: String, p: &Parts| {
        let parts: Vec<String> = (p.iter().filter(|(_, t)| *t > 0))
            .map(|(part, t)| format!("{}={t}", part.name()))
            .collect();
        format!("{what} {}", parts.join(" "))
    };
    let mut lines = Vec::new();
    let mut out = |s: Step<&Event>| match s {
        Step::CallEnd {
            begin, end, parts, ..
        } => {
            let parts = parts.map_or_else(|| Parts::unknown(end.stamp - begin.stamp), |p| *p);
            lines.push(show(format!("call {}", begin.stamp), &parts))
        }
        Step::StemEnd { begin, end, parts } => {
            let parts = parts.map_or_else(|| Parts::unknown(end.stamp - begin.stamp), |p| *p);
            lines.push(show(format!("stem {}", begin.stamp), &parts))
        }
        Step::SpanEnd(i) => lines.push(show(format!("span {}", i.id), &i.parts)),
        _ => {}
    };
    for e in events {
        match e {
            Some(e) => model.feed(e, &mut out),
            None => model.gap(&mut out),
        }
    }
    model.finish(&mut out);
    lines
}

#[test]
fn a_call_is_on_its_cpu_preempted_or_blocked_as_its_threads_switches_say() {
    let lines = anatomies(
        Model::whole(&meta_anatomy()),
        &[
            Some(ev2(5, IN, T1, &[5])),
            Some(ev2(10, ENTRY, T1, &[])),
            Some(ev2(10, ENTRY, T2, &[])),
            Some(ev2(20, OUT, T1, &[1, 20])),
            Some(ev2(30, IN, T1, &[30])),
            Some(ev2(35, OUT, T1, &[0, 35])),
            Some(ev2(45, IN, T1, &[45])),
            Some(ev2(50, EXIT, T1, &[])),
            // T2's switches are not known (none in the trace): its call is unknown.
            Some(ev2(50, EXIT, T2, &[])),
            // A pair begun before a loss of T1's switches is unknown.
            Some(ev2(60, START, T1, &[])),
            Some(ev2(62, LOST, T1, &[])),
            Some(ev2(70, STOP, T1, &[])),
            Some(ev2(75, OUT, T1, &[1, 75])),
            Some(ev2(76, IN, T1, &[76])),
            Some(ev2(80, START, T1, &[])),
            Some(ev2(90, STOP, T1, &[])),
            // A gap loses every thread's switches.
            Some(ev2(100, ENTRY, T1, &[])),
            None,
            Some(ev2(110, ENTRY, T1, &[])),
            Some(ev2(120, EXIT, T1, &[])),
        ],
    );
    assert_eq!(
        lines,
        [
            "call 10 on_cpu=20 preempted=10 blocked=10",
            "call 10 unknown=40",
            "stem 60 unknown=10",
            "stem 80 on_cpu=10",
            "call 110 unknown=10",
        ]
    );
}

#[test]
fn an_instance_waits_idle_until_its_task_is_woken_then_scheduled() {
    // W: a task's span (id 1); X: a request's span (id 2) polled inside W's polls.
    let (w, x) = (1, 2);
    let lines = anatomies(
        Model::whole(&meta_anatomy()),
        &[
            Some(ev2(5, IN, T1, &[5])),
            Some(ev2(100, NEW, T1, &[w, 0])),
            Some(ev2(110, ENTER, T1, &[w])),
            Some(ev2(112, NEW, T1, &[x, w])),
            Some(ev2(113, ENTER, T1, &[x])),
            Some(ev2(120, LEAVE, T1, &[x])),
            Some(ev2(121, LEAVE, T1, &[w])),
            // Another thread wakes W; T1 polls it 20 ticks later.
            Some(ev2(150, WAKE, T2, &[w])),
            Some(ev2(170, ENTER, T1, &[w])),
            Some(ev2(171, ENTER, T1, &[x])),
            Some(ev2(174, OUT, T1, &[0, 174])),
            Some(ev2(178, IN, T1, &[178])),
            Some(ev2(180, LEAVE, T1, &[x])),
            Some(ev2(181, LEAVE, T1, &[w])),
            Some(ev2(182, CLOSE, T1, &[x])),
            Some(ev2(190, CLOSE, T1, &[w])),
        ],
    );
    // X: unknown 1 (new to its first poll, inside the same poll of W), polls 7 + 9 (4 of
    // them blocked), idle 30 (120 to the wake), scheduled 21, unknown 2 after its last poll.
    // W: unknown 10 before its first poll (no wake), idle 29, scheduled 20, unknown 9 after.
    assert_eq!(
        lines,
        [
            "span 2 on_cpu=12 blocked=4 scheduled=21 idle=30 unknown=3",
            "span 1 on_cpu=18 blocked=4 scheduled=20 idle=29 unknown=19",
        ]
    );
}

#[test]
fn a_threads_switches_end_stretches_on_and_off_its_cpu_once_known() {
    let steps = run(
        Model::whole(&meta_anatomy()),
        &[
            Some(ev2(5, IN, T1, &[5])),
            Some(ev2(20, OUT, T1, &[1, 20])),
            Some(ev2(30, IN, T1, &[30])),
            Some(ev2(35, OUT, T1, &[0, 35])),
            Some(ev2(45, IN, T1, &[45])),
            // After a loss, the next switch only makes the thread known again.
            Some(ev2(50, LOST, T1, &[])),
            Some(ev2(60, IN, T1, &[60])),
            Some(ev2(70, OUT, T1, &[0, 70])),
        ],
    );
    assert_eq!(
        steps,
        [
            "instant 5",
            "instant 20",
            "cpu 0x100000001 on_cpu 5..20",
            "instant 30",
            "cpu 0x100000001 preempted 20..30",
            "instant 35",
            "cpu 0x100000001 on_cpu 30..35",
            "instant 45",
            "cpu 0x100000001 blocked 35..45",
            "instant 50",
            "instant 60",
            "instant 70",
            "cpu 0x100000001 on_cpu 60..70",
        ]
    );
}
