//! The model: what a stream of events means, as [`Step`]s, decided once for every reader.
//!
//! A reader walks a device's events in time order (merged from its rings) and feeds each
//! one, and each place where events were lost (a *gap*), to a [`Model`]. The model answers
//! with steps: what the event did. `report`, every export and the snapshot rules render
//! these steps and nothing else, so they cannot disagree on what pairs with what, on which
//! events are left unpaired, or why.
//!
//! **Steps.** An event is one of:
//! - a *call*: a native entry opens a call on its thread ([`Step::CallBegin`]), the exit
//!   that follows closes the innermost call open on that thread ([`Step::CallEnd`]); calls
//!   nest per thread;
//! - a *stem* pair: a start opens a pair of its name's stem (`request_start` and
//!   `request_done` are both `request`: [`crate::pairs::stem`]) on its thread ([`Step::StemBegin`]), a
//!   stop of that stem closes the latest one open there ([`Step::StemEnd`]). A start whose
//!   stem no stop tracepoint has, and a stop whose stem no start tracepoint has, is an
//!   instant;
//! - a step of a `tracing` span instance ([`crate::spans`]): its creation
//!   ([`Step::SpanNew`]), fields recorded ([`Step::SpanRecord`]), a link
//!   ([`Step::SpanFollows`]), a poll (an enter and the exit of the same thread that follows:
//!   [`Step::PollBegin`], [`Step::PollEnd`]), its close ([`Step::SpanEnd`], with the
//!   instance and all its polls);
//! - an instant ([`Step::Instant`]): anything else, a `tracing` event, an id the metadata
//!   does not define.
//!
//! An event that would open or close something but whose partner the trace cannot give is
//! [`Step::Unpaired`], with the reason ([`Why`]); an instance that never closes in the trace
//! is [`Step::SpanUnended`].
//!
//! **The drop re-entry.** When an instrumented future is dropped, `tracing` enters its span
//! once more around the inner future's drop and closes it: an enter and an exit with
//! nothing of their thread between, followed at once on that thread by the close, after at
//! least one poll. That pair is no poll and no call: it is [`Step::PollDrop`], recognised
//! here only. To tell it, the model holds an enter of an instance already polled until the
//! next event of its thread (and, if that is the matching exit, until the one after): poll
//! steps may come up to two events of their thread late, never later, and always before
//! anything at the end or at a gap.
//!
//! **When a pair is exact.** Pairs are made in stack order on a thread, which matches an
//! exit with its own entry only if none of the thread's events between them is missing. A
//! ring that lost its oldest entries may have held any thread's events from before its
//! first remaining one, so the model has a *horizon*: the latest first kept stamp of the
//! rings that lost entries ([`horizon`]). From the horizon on every ring holds all it was
//! given; an entry, exit, start or stop before it is unpaired ([`Why::BeforeHorizon`]), and
//! an instance created before it is not whole (its figures are not measured). Where a live
//! reader finds entries lost between two reads, it feeds a gap: everything open then is
//! given up ([`Why::AcrossGap`]), and what follows pairs among itself. An exit whose thread
//! has nothing open is [`Why::PartnerMissing`].
//!
//! **Why nothing is ever paired with an event that is not its partner.** Under those two
//! rules, between an open event and the close the model pairs with it no event of their
//! thread is missing, so the stack holds exactly what the thread had open. A thread id the
//! kernel gave again is another thread ([`crate::incarnation`]): what a thread left open
//! when it ended stays open, never closed by its successor, and ends as
//! [`Why::ThreadEnded`]. A span `new` under an id whose instance is still open (its close
//! was lost) ends the old one as [`Why::Superseded`]. What is still open at the end is
//! [`Why::OpenAtEnd`].
//!
//! **Known limitation.** The horizon moves only with entries overwritten (including those
//! overtaken while the reader copied the ring). Events writers dropped (no free slot) and
//! entries left out as damaged do not move it: a pair around such a loss may still be
//! paired. Both are counted per ring, so the report says they happened.
//!
//! **Where the time went.** Each call and pair that ends ([`Step::CallEnd`],
//! [`Step::StemEnd`]) and each instance that closes ([`Instance::parts`]) carries its
//! anatomy ([`crate::anatomy`]): on or off its CPU from its thread's switch events, idle or
//! scheduled between polls from the runtime's wakes, unknown where the trace cannot tell.
//! Those events are the kernel's and the runtime's, not the thread's: they never release an
//! enter held back, and an enter held keeps where its thread stood when it came.
//!
//! **Cost.** Feeding an event allocates nothing unless it opens something on a thread or
//! instance not seen before; steps go to the caller's sink (`FnMut(Step)`), one at a time,
//! borrowing the events they name (a step moves no event).
//! A [`Model`] is [`Clone`]: a reader that formats a trace in parts can run the model over
//! the whole, clone it at each cut, and hand each part the state at its start.

use crate::anatomy::{self, Builtin, Cpu, Mark, Parts, Stretch};
use crate::incarnation::{Thread, Threads};
use crate::pairs::Stems;
use crate::spans::{Instance, Node, Poll};
use devttrace::event::{Event, Kept, RingSnapshot};
use devttrace::meta::Metadata;
use foldhash::HashMap as FoldHashMap;
use std::sync::{Arc, Mutex};
use ttrace_layouts::entry::Kind;
use ttrace_layouts::role::Role;

/// Why an event, or an instance, is left unpaired.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Why {
    /// Before the horizon: a ring that lost entries may have held its partner, or an event
    /// of its thread between.
    BeforeHorizon,
    /// Open when events were lost (a gap): its partner may be after a missing event.
    AcrossGap,
    /// A close with nothing open on its thread (or instance) to close.
    PartnerMissing,
    /// Open when its thread ended (the kernel gave the thread's id to a later thread).
    ThreadEnded,
    /// Still open at the end of the trace.
    OpenAtEnd,
    /// A span instance whose id was given to a new instance before its close came.
    Superseded,
}

impl Why {
    /// How readers name it: `before_horizon`, `across_gap`, `partner_missing`,
    /// `thread_ended`, `open_at_end`, `superseded`.
    ///
    /// ```
    /// use ttrace_model::model::Why;
    /// assert_eq!(Why::OpenAtEnd.name(), "open_at_end");
    /// assert_eq!(Why::from_name("across_gap"), Some(Why::AcrossGap));
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            Why::BeforeHorizon => "before_horizon",
            Why::AcrossGap => "across_gap",
            Why::PartnerMissing => "partner_missing",
            Why::ThreadEnded => "thread_ended",
            Why::OpenAtEnd => "open_at_end",
            Why::Superseded => "superseded",
        }
    }

    /// The reason named `name` ([`Why::name`]).
    pub fn from_name(name: &str) -> Option<Why> {
        Why::ALL.into_iter().find(|w| w.name() == name)
    }

    /// Every reason.
    pub const ALL: [Why; 6] = [
        Why::BeforeHorizon,
        Why::AcrossGap,
        Why::PartnerMissing,
        Why::ThreadEnded,
        Why::OpenAtEnd,
        Why::Superseded,
    ];
}

/// What an event did (see the module's documentation). `E` names the events a step is of:
/// the model lends them (`Step<&Event>`); a reader that sends steps elsewhere names them its
/// own way ([`Step::map`]).
#[derive(Clone, Debug)]
pub enum Step<E> {
    /// An event that opens and closes nothing.
    Instant(E),
    /// An entry opened a call, at this depth on its thread (0 outermost).
    CallBegin {
        /// The entry.
        event: E,
        /// Calls open on its thread before it.
        depth: usize,
    },
    /// An exit closed a call.
    CallEnd {
        /// The entry.
        begin: E,
        /// The exit.
        end: E,
        /// The call's depth.
        depth: usize,
        /// Where its time went ([`crate::anatomy`]), where the trace can tell any of it
        /// (it holds switches or wakes); `None`: all unknown. Boxed, so that every step
        /// stays small to move.
        parts: Option<Box<Parts>>,
    },
    /// A start opened a pair of its stem.
    StemBegin(E),
    /// A stop closed a pair of its stem.
    StemEnd {
        /// The start.
        begin: E,
        /// The stop.
        end: E,
        /// Where its time went, as [`Step::CallEnd`]'s.
        parts: Option<Box<Parts>>,
    },
    /// A span instance was created.
    SpanNew(E),
    /// Fields were recorded into an instance.
    SpanRecord(E),
    /// An instance follows from another.
    SpanFollows(E),
    /// A poll of an instance began (may come late: see the module's documentation).
    PollBegin(E),
    /// A poll ended.
    PollEnd {
        /// The enter.
        begin: E,
        /// The exit.
        end: E,
    },
    /// The drop re-entry: an enter and exit that are no poll.
    PollDrop {
        /// The enter.
        begin: E,
        /// The exit.
        end: E,
    },
    /// An instance closed: all it was, its polls included.
    SpanEnd(Box<Instance>),
    /// An instance that did not close in the trace.
    SpanUnended {
        /// The instance (`close: None`).
        instance: Box<Instance>,
        /// Why.
        why: Why,
    },
    /// A stretch of a thread's time on or off its CPU ended ([`crate::anatomy`]: told by
    /// its `sched_out` or `sched_in`, which is also an [`Step::Instant`]).
    Cpu {
        /// The thread (`pid << 32 | tid`).
        ctx: u64,
        /// The stretch.
        stretch: Stretch,
    },
    /// An event that opens or closes, left unpaired.
    Unpaired {
        /// The event.
        event: E,
        /// Why.
        why: Why,
    },
}

impl<E> Step<E> {
    /// The same step, each event it names as `f` names it: a step sent to another thread
    /// names its events by where it copied them, and is lent back as the model lends it.
    ///
    /// ```
    /// use ttrace_model::model::Step;
    /// let names = ["open", "close"];
    /// let step: Step<usize> = Step::PollEnd { begin: 0, end: 1 };
    /// let lent = step.map(|i| names[i]);
    /// assert!(matches!(lent, Step::PollEnd { begin: "open", end: "close" }));
    /// ```
    pub fn map<F>(self, mut f: impl FnMut(E) -> F) -> Step<F> {
        match self {
            Step::Instant(e) => Step::Instant(f(e)),
            Step::CallBegin { event, depth } => Step::CallBegin {
                event: f(event),
                depth,
            },
            Step::CallEnd {
                begin,
                end,
                depth,
                parts,
            } => Step::CallEnd {
                begin: f(begin),
                end: f(end),
                depth,
                parts,
            },
            Step::StemBegin(e) => Step::StemBegin(f(e)),
            Step::StemEnd { begin, end, parts } => Step::StemEnd {
                begin: f(begin),
                end: f(end),
                parts,
            },
            Step::SpanNew(e) => Step::SpanNew(f(e)),
            Step::SpanRecord(e) => Step::SpanRecord(f(e)),
            Step::SpanFollows(e) => Step::SpanFollows(f(e)),
            Step::PollBegin(e) => Step::PollBegin(f(e)),
            Step::PollEnd { begin, end } => Step::PollEnd {
                begin: f(begin),
                end: f(end),
            },
            Step::PollDrop { begin, end } => Step::PollDrop {
                begin: f(begin),
                end: f(end),
            },
            Step::SpanEnd(i) => Step::SpanEnd(i),
            Step::SpanUnended { instance, why } => Step::SpanUnended { instance, why },
            Step::Cpu { ctx, stretch } => Step::Cpu { ctx, stretch },
            Step::Unpaired { event, why } => Step::Unpaired {
                event: f(event),
                why,
            },
        }
    }
}

/// The horizon of a trace of the rings `rings`: the latest first kept stamp of the rings
/// that lost entries (0: no ring lost any; `u64::MAX`: a ring lost every entry it had). A
/// ring that left events out as older than asked (`--since`: `older`) lost entries only
/// before those: before every event the trace holds, so it does not move the horizon.
///
/// ```
/// use devttrace::event::{Accounting, Mark, RingSnapshot};
/// use ttrace_model::model::horizon;
/// let ring = |lost, first: u64| RingSnapshot::<Mark> {
///     counts: Accounting { lost, ..Default::default() },
///     events: vec![Mark { stamp: first, ..Default::default() }],
///     ..Default::default()
/// };
/// assert_eq!(horizon(&[ring(0, 5), ring(0, 9)]), 0);
/// assert_eq!(horizon(&[ring(3, 5), ring(1, 7), ring(0, 9)]), 7);
/// let mut cut = ring(1, 8);
/// cut.older = 4;
/// assert_eq!(horizon(&[ring(3, 5), cut]), 5);
/// ```
pub fn horizon<T: Kept>(rings: &[RingSnapshot<T>]) -> u64 {
    rings
        .iter()
        .filter(|r| r.lost > 0 && r.older == 0)
        // A ring that lost every entry gives no time after which it is complete.
        .map(|r| r.events.first().map_or(u64::MAX, Kept::stamp))
        .max()
        .unwrap_or(0)
}

/// An enter held back until its thread's next events tell whether it is the drop
/// re-entry.
#[derive(Clone, Copy, Debug)]
struct Held {
    /// The instance's key.
    key: (u32, u64),
    enter: Event,
    /// Where its thread stood at the enter (switches may come before it is applied).
    mark: Mark,
    /// The exit of the same instance that came next on the thread, if any, and where its
    /// thread stood then.
    exit: Option<(Event, Mark)>,
}

/// A thread's starts of one stem (by its number).
type Stack = (Thread, usize);

/// A poll open on a thread.
#[derive(Clone, Copy, Debug)]
struct Polling {
    /// The instance's key.
    key: (u32, u64),
    /// When it began.
    begin: u64,
    /// The wake that led to it, if known.
    woken: Option<u64>,
    /// Where its thread stood then.
    mark: Mark,
    /// Whether it is the instance's outermost (an enter with none of its own open): only
    /// those are measured.
    outermost: bool,
}

/// What events mean, one event at a time (see the module's documentation).
///
/// ```
/// use devttrace::event::Event;
/// use devttrace::meta::{Metadata, TracepointInfo};
/// use devttrace::Kind;
/// use ttrace_layouts::entry::TypeWord;
/// use ttrace_model::model::{Model, Step};
/// let tp = |name: &str, kind| TracepointInfo {
///     id: 0, name: name.into(), kind, classes: 1, format: String::new(), nargs: 0,
///     types: Vec::new(), tables: Vec::new(), role: Default::default(),
/// };
/// let meta = Metadata {
///     tracepoints: vec![tp("read", Kind::Entry), tp("read", Kind::Exit)],
///     ..Default::default()
/// };
/// let event = |stamp, tp, kind| Event::new(stamp, TypeWord::new(kind, 0, tp), 1 << 32 | 1, &[], 0);
/// let mut model = Model::whole(&meta);
/// // Steps borrow the events: a sink keeps what it needs of them.
/// let mut calls = Vec::new();
/// let mut sink = |s: Step<&Event>| {
///     if let Step::CallEnd { begin, end, depth, .. } = s {
///         calls.push((begin.stamp, end.stamp, depth));
///     }
/// };
/// model.feed(&event(10, 0, Kind::Entry), &mut sink);
/// model.feed(&event(25, 1, Kind::Exit), &mut sink);
/// model.finish(&mut sink);
/// assert_eq!(calls, [(10, 25, 0)]);
/// ```
#[derive(Clone, Debug)]
pub struct Model {
    /// Per tracepoint id, its kind and role.
    kinds: Vec<(Kind, Role)>,
    /// Per tracepoint id, which built-in it is, if any ([`crate::anatomy`]).
    builtins: Vec<Option<Builtin>>,
    /// Whether the metadata has any of the kernel's or the runtime's tracepoints (a switch,
    /// a wake): else no anatomy is kept but the whole, unknown.
    switches: bool,
    /// Per thread (`ctx`), its time off the CPU so far.
    cpus: FoldHashMap<u64, Cpu>,
    /// Per thread (`ctx`), the polls open on it, innermost last.
    polling: FoldHashMap<u64, Vec<Polling>>,
    stems: Stems,
    /// Per stem, whether a start tracepoint has it.
    started: Vec<bool>,
    /// Whether any tracepoint is a span's step.
    any_spans: bool,
    threads: Threads,
    horizon: u64,
    /// Open calls, by thread: foldhash, fast on small keys and randomly seeded, so that a
    /// hostile trace cannot choose threads that collide.
    calls: FoldHashMap<Thread, Vec<Event>>,
    /// Open starts, by thread and stem.
    starts: FoldHashMap<Stack, Vec<Event>>,
    /// Where each open call's thread stood as it began, by thread, with the call's depth:
    /// kept only where the trace can tell where time went, so that a trace with no switch
    /// and no wake keeps its stacks as small as they were.
    call_marks: FoldHashMap<Thread, Vec<(usize, Mark)>>,
    /// The same for the open starts.
    start_marks: FoldHashMap<Stack, Vec<(usize, Mark)>>,
    /// Open instances, by process and id.
    instances: FoldHashMap<(u32, u64), Instance>,
    /// Enters held back, by writer.
    held: FoldHashMap<u64, Held>,
    /// Whether instances keep their fields and parents.
    fields: bool,
}

impl Model {
    /// The model of a trace of the rings `rings` (their horizon: [`horizon`]; an index or a
    /// copy), whose tracepoints and threads `meta` names. A live reader gives its first
    /// copy's rings (what it finds lost later it feeds as gaps), or none.
    pub fn new<T: Kept>(meta: &Metadata, rings: &[RingSnapshot<T>]) -> Model {
        let mut m = Model {
            kinds: Vec::new(),
            builtins: Vec::new(),
            switches: false,
            cpus: FoldHashMap::default(),
            polling: FoldHashMap::default(),
            stems: Stems::default(),
            started: Vec::new(),
            any_spans: false,
            threads: Threads::new(meta),
            horizon: horizon(rings),
            calls: FoldHashMap::default(),
            starts: FoldHashMap::default(),
            call_marks: FoldHashMap::default(),
            start_marks: FoldHashMap::default(),
            instances: FoldHashMap::default(),
            held: FoldHashMap::default(),
            fields: false,
        };
        m.learn(meta);
        m
    }

    /// The model of a trace whose rings lost nothing (or of a live reader, which feeds what
    /// it finds lost as gaps), whose tracepoints and threads `meta` names.
    pub fn whole(meta: &Metadata) -> Model {
        Model::new::<devttrace::event::Mark>(meta, &[])
    }

    /// The model of a live reader whose first copy found entries lost: `lost_before` says,
    /// per ring, a time before which every entry it lost was stamped (0: it lost none): the
    /// first event it read after them. The horizon is the latest, as [`horizon`] has it for
    /// a copy; what the reader finds lost later it feeds as gaps.
    ///
    /// ```
    /// use devttrace::meta::Metadata;
    /// use ttrace_model::model::Model;
    /// assert_eq!(Model::live(&Metadata::default(), &[0, 70, 40]).horizon(), 70);
    /// ```
    pub fn live(meta: &Metadata, lost_before: &[u64]) -> Model {
        let mut m = Model::whole(meta);
        m.horizon = lost_before.iter().copied().max().unwrap_or(0);
        m
    }

    /// Each instance keeps its fields and its parent's ([`Instance::node`]).
    pub fn keep_fields(mut self) -> Model {
        self.fields = true;
        self
    }

    /// The stamp from which every ring holds all it was given (0: the whole trace).
    pub fn horizon(&self) -> u64 {
        self.horizon
    }

    /// The tracepoints and threads are now those of `meta` (a live reader's copy grew);
    /// what is open stays open.
    pub fn renew(&mut self, meta: &Metadata) {
        self.threads = Threads::new(meta);
        self.learn(meta);
    }

    fn learn(&mut self, meta: &Metadata) {
        let tps = &meta.tracepoints;
        self.kinds = tps.iter().map(|t| (t.kind, t.role)).collect();
        self.builtins = tps.iter().map(Builtin::of).collect();
        self.switches = self.builtins.iter().any(|b| b.is_some());
        self.stems = Stems::new(tps);
        self.started = vec![false; self.stems.names.len()];
        for (t, s) in tps.iter().zip(&self.stems.of) {
            if let (Kind::Start, Some(s)) = (t.kind, s) {
                self.started[*s] = true;
            }
        }
        self.any_spans = tps.iter().any(|t| t.role.is_span());
    }

    /// The thread that wrote as `ctx` at `stamp`.
    pub fn thread(&mut self, ctx: u64, stamp: u64) -> Thread {
        self.threads.of(ctx, stamp)
    }

    /// The stem of tracepoint `id`'s pairs, if it opens or closes one.
    pub fn stem_of(&self, id: u16) -> Option<&str> {
        let s = self.stems.of.get(id as usize).copied().flatten()?;
        Some(&self.stems.names[s])
    }

    /// The enter of a span that writer `ctx` made last, if the model still holds it back
    /// with no exit after it (its steps come at the writer's next event: see the drop
    /// re-entry): an instance the writer is in meanwhile.
    pub fn held_enter(&self, ctx: u64) -> Option<&Event> {
        self.held
            .get(&ctx)
            .filter(|h| h.exit.is_none())
            .map(|h| &h.enter)
    }

    /// Whether tracepoint `id` opens something that ends: a call, a stem pair, an instance.
    pub fn opens(&self, id: u16) -> bool {
        match self.kinds.get(id as usize) {
            Some((Kind::Entry, Role::Point)) => true,
            Some((Kind::Start, Role::Point)) => {
                self.stems.of[id as usize].is_some_and(|s| self.stems.paired[s] && self.started[s])
            }
            Some((_, Role::SpanNew)) => true,
            _ => false,
        }
    }

    /// Feeds `e`, the next event in time order: its steps go to `out`.
    #[inline]
    pub fn feed(&mut self, e: &Event, out: &mut impl FnMut(Step<&Event>)) {
        let tp = e.type_word.tracepoint() as usize;
        let Some(&(kind, role)) = self.kinds.get(tp) else {
            return out(Step::Instant(e));
        };
        // The runtime's and the kernel's own events are no event of the program's thread:
        // they never release an enter held (a switch may come between any two events).
        if self.switches {
            if let Some(b) = self.builtins[tp] {
                let stretch = self.builtin(b, e);
                out(Step::Instant(e));
                if let Some(stretch) = stretch {
                    out(Step::Cpu {
                        ctx: e.ctx,
                        stretch,
                    });
                }
                return;
            }
        }
        if self.any_spans {
            if !self.held.is_empty() && self.release_held(e, role, out) {
                return;
            }
            if role.is_span() {
                return self.span(e, role, out);
            }
        }
        if role != Role::Point {
            return out(Step::Instant(e));
        }
        let before = e.stamp < self.horizon;
        match kind {
            Kind::Entry if before => out(Step::Unpaired {
                event: e,
                why: Why::BeforeHorizon,
            }),
            Kind::Entry => {
                let thread = self.threads.of(e.ctx, e.stamp);
                let stack = self.calls.entry(thread).or_default();
                stack.push(*e);
                let depth = stack.len() - 1;
                if self.switches {
                    let mark = self.mark(e.ctx, e.stamp);
                    self.call_marks
                        .entry(thread)
                        .or_default()
                        .push((depth, mark));
                }
                out(Step::CallBegin { event: e, depth })
            }
            Kind::Exit if before => out(Step::Unpaired {
                event: e,
                why: Why::BeforeHorizon,
            }),
            Kind::Exit => {
                let thread = self.threads.of(e.ctx, e.stamp);
                match self
                    .calls
                    .get_mut(&thread)
                    .and_then(|s| s.pop().map(|b| (b, s.len())))
                {
                    Some((begin, depth)) => {
                        let mark = match self.switches {
                            true => marked(&mut self.call_marks, &thread, depth),
                            false => None,
                        };
                        out(Step::CallEnd {
                            begin: &begin,
                            end: e,
                            depth,
                            parts: mark.and_then(|m| self.parts(e.ctx, &m, e.stamp)),
                        })
                    }
                    None => out(Step::Unpaired {
                        event: e,
                        why: Why::PartnerMissing,
                    }),
                }
            }
            Kind::Start | Kind::Stop => {
                let id = e.type_word.tracepoint() as usize;
                let paired = self.stems.of[id].filter(|&s| self.stems.paired[s] && self.started[s]);
                let Some(s) = paired else {
                    return out(Step::Instant(e));
                };
                if before {
                    return out(Step::Unpaired {
                        event: e,
                        why: Why::BeforeHorizon,
                    });
                }
                let thread = self.threads.of(e.ctx, e.stamp);
                if kind == Kind::Start {
                    let stack = self.starts.entry((thread, s)).or_default();
                    stack.push(*e);
                    let depth = stack.len() - 1;
                    if self.switches {
                        let mark = self.mark(e.ctx, e.stamp);
                        self.start_marks
                            .entry((thread, s))
                            .or_default()
                            .push((depth, mark));
                    }
                    return out(Step::StemBegin(e));
                }
                let popped = (self.starts.get_mut(&(thread, s)))
                    .and_then(|st| st.pop().map(|b| (b, st.len())));
                match popped {
                    Some((begin, depth)) => {
                        let mark = match self.switches {
                            true => marked(&mut self.start_marks, &(thread, s), depth),
                            false => None,
                        };
                        out(Step::StemEnd {
                            begin: &begin,
                            end: e,
                            parts: mark.and_then(|m| self.parts(e.ctx, &m, e.stamp)),
                        })
                    }
                    None => out(Step::Unpaired {
                        event: e,
                        why: Why::PartnerMissing,
                    }),
                }
            }
        }
    }

    /// Events were lost here (a live reader found entries overwritten before it read
    /// them): everything open is given up ([`Why::AcrossGap`]), each thread's calls
    /// outermost first; instances open are no longer whole.
    pub fn gap(&mut self, out: &mut impl FnMut(Step<&Event>)) {
        self.release_all(out);
        // Switches may be among what was lost: no thread's are known until its next one.
        for c in self.cpus.values_mut() {
            c.lose();
        }
        self.call_marks.clear();
        self.start_marks.clear();
        for e in outermost_first(std::mem::take(&mut self.calls))
            .chain(outermost_first(std::mem::take(&mut self.starts)))
        {
            out(Step::Unpaired {
                event: &e,
                why: Why::AcrossGap,
            });
        }
        for i in self.instances.values_mut() {
            i.whole = false;
        }
    }

    /// The end of the trace: what is still open: the calls, per thread outermost first
    /// (threads in order), then the starts (per thread and stem, oldest first), then the
    /// instances in order of their beginning.
    pub fn finish(mut self, out: &mut impl FnMut(Step<&Event>)) {
        self.release_all(out);
        let mut threads = std::mem::take(&mut self.threads);
        let mut why = |t: &Thread| match threads.of(t.ctx, u64::MAX).incarnation > t.incarnation {
            true => Why::ThreadEnded,
            false => Why::OpenAtEnd,
        };
        let mut calls: Vec<(Thread, Vec<Event>)> = self.calls.into_iter().collect();
        calls.sort_unstable_by_key(|(t, _)| *t);
        let mut starts: Vec<(Stack, Vec<Event>)> = self.starts.into_iter().collect();
        starts.sort_unstable_by_key(|(k, v)| (k.0, v.first().map(|e| e.stamp), k.1));
        for (t, v) in calls
            .into_iter()
            .chain(starts.into_iter().map(|((t, _), v)| (t, v)))
        {
            let why = why(&t);
            for event in v {
                out(Step::Unpaired { event: &event, why });
            }
        }
        let mut open: Vec<Instance> = self.instances.into_values().collect();
        open.sort_by_key(|i| (i.begin(), i.pid, i.id));
        for i in open {
            out(Step::SpanUnended {
                instance: Box::new(i),
                why: Why::OpenAtEnd,
            });
        }
    }

    /// A span's step.
    fn span(&mut self, e: &Event, role: Role, out: &mut impl FnMut(Step<&Event>)) {
        let Some(&id) = e.args().first() else {
            return out(Step::Instant(e));
        };
        let key = ((e.ctx >> 32) as u32, id);
        let tp = e.type_word.tracepoint();
        match role {
            Role::SpanNew => {
                if let Some(old) = self.instances.remove(&key) {
                    self.release_instance(key, out);
                    if !old.open.is_empty() {
                        self.forget_polls(key);
                    }
                    out(Step::SpanUnended {
                        instance: Box::new(old),
                        why: Why::Superseded,
                    });
                }
                let mut i = Instance::new(key.0, id, tp);
                i.whole = e.stamp >= self.horizon;
                i.new = Some(*e);
                i.since = Some(e.stamp);
                if self.fields {
                    let parent = match e.args().get(1) {
                        Some(&p) if p != 0 => self.instances.get(&(key.0, p)),
                        _ => None,
                    };
                    i.node = Some(Arc::new(Node {
                        pid: key.0,
                        id,
                        tracepoint: tp,
                        new: Some(*e),
                        parent: parent.and_then(|p| p.node.clone()),
                        records: Mutex::new(Vec::new()),
                    }));
                }
                self.instances.insert(key, i);
                out(Step::SpanNew(e))
            }
            Role::SpanEnter => {
                let i = self.instance(key, tp);
                if i.polls.is_empty() {
                    let mark = self.mark(e.ctx, e.stamp);
                    return self.enter(key, *e, mark, out);
                }
                let mark = self.mark(e.ctx, e.stamp);
                // Perhaps the drop re-entry: wait for the thread's next events.
                self.held.insert(
                    e.ctx,
                    Held {
                        key,
                        enter: *e,
                        mark,
                        exit: None,
                    },
                );
            }
            Role::SpanExit => {
                let end = self.mark(e.ctx, e.stamp);
                self.exit(key, tp, *e, end, out)
            }
            Role::SpanFollows => {
                let follows = e.args().get(1).copied().unwrap_or(0);
                self.instance(key, tp).follows.push(follows);
                out(Step::SpanFollows(e))
            }
            Role::SpanClose => {
                self.release_instance(key, out);
                let mut i = self
                    .instances
                    .remove(&key)
                    .unwrap_or_else(|| Instance::new(key.0, id, tp));
                i.close = Some(e.stamp);
                if !i.open.is_empty() {
                    self.forget_polls(key);
                }
                // After its last poll: what it did until dropped the trace does not tell.
                // And whatever its polls left unmeasured (polls of two threads at once) is
                // unknown too, so that the parts add up to the lifetime.
                if let Some(life) = i.lifetime() {
                    let rest = life.saturating_sub(i.parts.total());
                    i.parts.add(anatomy::Part::Unknown, rest);
                }
                out(Step::SpanEnd(Box::new(i)))
            }
            Role::SpanRecord => {
                if let Some(n) = self.instances.get(&key).and_then(|i| i.node.as_ref()) {
                    n.records.lock().unwrap_or_else(|e| e.into_inner()).push(*e);
                }
                out(Step::SpanRecord(e))
            }
            Role::Point | Role::Event => out(Step::Instant(e)),
        }
    }

    /// The instance open under `key`, opened (not whole) if the trace has not its `new`.
    fn instance(&mut self, key: (u32, u64), tp: u16) -> &mut Instance {
        let fields = self.fields;
        self.instances.entry(key).or_insert_with(|| {
            let mut i = Instance::new(key.0, key.1, tp);
            if fields {
                i.node = Some(Arc::new(Node {
                    pid: key.0,
                    id: key.1,
                    tracepoint: tp,
                    new: None,
                    parent: None,
                    records: Mutex::new(Vec::new()),
                }));
            }
            i
        })
    }

    /// A poll begins: `e`, its thread standing at `mark`.
    fn enter(&mut self, key: (u32, u64), e: Event, mark: Mark, out: &mut impl FnMut(Step<&Event>)) {
        if !self.switches {
            // No switch and no wake can be in the trace: its whole lifetime is unknown
            // (added at its close), and nothing needs to be kept per poll.
            self.instance(key, e.type_word.tracepoint())
                .open
                .push((e, 0));
            return out(Step::PollBegin(&e));
        }
        // The poll open on the thread around this one: a task's, whose wake brought it here.
        let around = (self.polling.get(&e.ctx))
            .and_then(|s| s.last())
            .map(|p| (p.begin, p.woken));
        let i = self.instance(key, e.type_word.tracepoint());
        let outermost = i.open.is_empty();
        let mut woken = None;
        if outermost {
            let own = i.woken.take();
            if let Some(since) = i.since {
                // Its own wake, else that of the poll around it if that poll began after it
                // began to wait (the poll that brought it here); else none is known.
                woken = own.or(match around {
                    Some((begin, w)) if begin >= since => w,
                    _ => None,
                });
                i.parts.add_all(&anatomy::wait(since, woken, e.stamp));
            }
        }
        i.open.push((e, 0));
        self.polling.entry(e.ctx).or_default().push(Polling {
            key,
            begin: e.stamp,
            woken,
            mark,
            outermost,
        });
        out(Step::PollBegin(&e))
    }

    /// A poll ends: `e`, its thread standing at `end`.
    fn exit(
        &mut self,
        key: (u32, u64),
        tp: u16,
        e: Event,
        end: Mark,
        out: &mut impl FnMut(Step<&Event>),
    ) {
        let open =
            (self.instances.get(&key)).is_some_and(|i| i.open.iter().any(|o| o.0.ctx == e.ctx));
        let mut parts = None;
        if open && self.switches {
            let stack = self.polling.get_mut(&e.ctx);
            if let Some(p) = stack.and_then(|s| {
                let at = s.iter().rposition(|p| p.key == key)?;
                Some(s.remove(at))
            }) {
                parts = p.outermost.then(|| anatomy::between(&p.mark, &end));
            }
        }
        let i = self.instance(key, tp);
        match i.open.iter().rposition(|o| o.0.ctx == e.ctx) {
            Some(at) => {
                let (begin, _) = i.open.remove(at);
                if let Some(p) = parts {
                    i.parts.add_all(&p);
                }
                if i.open.is_empty() {
                    i.since = Some(e.stamp);
                }
                i.polls.push(Poll {
                    enter: begin.stamp,
                    exit: e.stamp,
                    ctx: begin.ctx,
                    cpu: begin.type_word.cpu(),
                    seqs: (0, 0),
                });
                out(Step::PollEnd {
                    begin: &begin,
                    end: &e,
                })
            }
            None => {
                i.unmatched_exits += 1;
                let why = match e.stamp < self.horizon {
                    true => Why::BeforeHorizon,
                    false => Why::PartnerMissing,
                };
                out(Step::Unpaired { event: &e, why })
            }
        }
    }

    /// The next event `e` of a thread with an enter held: whether it was taken (the exit
    /// that makes the held enter an empty poll).
    fn release_held(&mut self, e: &Event, role: Role, out: &mut impl FnMut(Step<&Event>)) -> bool {
        if !self.held.contains_key(&e.ctx) {
            return false;
        }
        let mark = self.mark(e.ctx, e.stamp);
        let Some(h) = self.held.get_mut(&e.ctx) else {
            return false;
        };
        let same = e.args().first() == Some(&h.key.1) && (e.ctx >> 32) as u32 == h.key.0;
        match (h.exit, role) {
            (None, Role::SpanExit) if same => {
                h.exit = Some((*e, mark));
                return true;
            }
            (Some((exit, _)), Role::SpanClose) if same => {
                let h = self.held.remove(&e.ctx).expect("held above");
                if let Some(i) = self.instances.get_mut(&h.key) {
                    i.dropped = Some(Poll {
                        enter: h.enter.stamp,
                        exit: exit.stamp,
                        ctx: h.enter.ctx,
                        cpu: h.enter.type_word.cpu(),
                        seqs: (0, 0),
                    });
                }
                out(Step::PollDrop {
                    begin: &h.enter,
                    end: &exit,
                });
                return false;
            }
            _ => {}
        }
        let h = self.held.remove(&e.ctx).expect("held above");
        self.apply(h, out);
        false
    }

    /// A held enter (and exit) as the poll steps they are.
    fn apply(&mut self, h: Held, out: &mut impl FnMut(Step<&Event>)) {
        self.enter(h.key, h.enter, h.mark, out);
        if let Some((exit, end)) = h.exit {
            self.exit(h.key, h.enter.type_word.tracepoint(), exit, end, out);
        }
    }

    /// Releases the enters held on instance `key` (another thread closes or supersedes it).
    fn release_instance(&mut self, key: (u32, u64), out: &mut impl FnMut(Step<&Event>)) {
        if self.held.is_empty() {
            return;
        }
        let mut ctxs: Vec<u64> = (self.held.iter())
            .filter(|(_, h)| h.key == key)
            .map(|(&c, _)| c)
            .collect();
        ctxs.sort_unstable();
        for c in ctxs {
            let h = self.held.remove(&c).expect("listed above");
            self.apply(h, out);
        }
    }

    /// A built-in event of the kernel's or the runtime's ([`crate::anatomy`]): the stretch
    /// of its thread's time it ended, if known.
    fn builtin(&mut self, b: Builtin, e: &Event) -> Option<Stretch> {
        let args = e.args();
        match b {
            Builtin::Out => {
                let at = args.get(1).copied().unwrap_or(e.stamp);
                let preempted = args.first().is_some_and(|&p| p != 0);
                self.cpus
                    .entry(e.ctx)
                    .or_default()
                    .switch_out(at, preempted)
            }
            Builtin::In => {
                let at = args.first().copied().unwrap_or(e.stamp);
                self.cpus.entry(e.ctx).or_default().switch_in(at)
            }
            Builtin::Lost => {
                self.cpus.entry(e.ctx).or_default().lose();
                None
            }
            Builtin::Wake => {
                let key = ((e.ctx >> 32) as u32, args.first().copied().unwrap_or(0));
                if let Some(i) = self.instances.get_mut(&key) {
                    i.woken.get_or_insert(e.stamp);
                }
                None
            }
        }
    }

    /// Where thread `ctx` stands at `at`, an interval of it beginning.
    fn mark(&self, ctx: u64, at: u64) -> Mark {
        match self.switches {
            true => self.cpus.get(&ctx).copied().unwrap_or_default().mark(at),
            false => Mark::unknown(at),
        }
    }

    /// The parts of thread `ctx`'s interval from `mark` to `at`, where the trace can tell
    /// any of it.
    fn parts(&self, ctx: u64, mark: &Mark, at: u64) -> Option<Box<Parts>> {
        let parts = anatomy::between(mark, &self.mark(ctx, at));
        (self.switches && parts.known()).then(|| Box::new(parts))
    }

    /// Forgets the polls of instance `key` still open on any thread (it closed).
    fn forget_polls(&mut self, key: (u32, u64)) {
        for s in self.polling.values_mut() {
            s.retain(|p| p.key != key);
        }
    }

    /// Releases every enter held, in order of their stamps.
    fn release_all(&mut self, out: &mut impl FnMut(Step<&Event>)) {
        let mut held: Vec<Held> = self.held.drain().map(|(_, h)| h).collect();
        held.sort_unstable_by_key(|h| (h.enter.stamp, h.enter.ctx));
        for h in held {
            self.apply(h, out);
        }
    }
}

/// The events open in `stacks`, per key outermost first, keys in order.
fn outermost_first<K: Ord + Copy>(
    stacks: FoldHashMap<K, Vec<Event>>,
) -> impl Iterator<Item = Event> {
    let mut v: Vec<(K, Vec<Event>)> = stacks.into_iter().collect();
    v.sort_unstable_by_key(|(k, _)| *k);
    v.into_iter().flat_map(|(_, s)| s)
}

/// The mark of the call (or start) at `depth` of `key`'s stack, just closed, if one was
/// kept for it (marks are kept only while the trace can tell where time went).
fn marked<K: std::hash::Hash + Eq>(
    marks: &mut FoldHashMap<K, Vec<(usize, Mark)>>,
    key: &K,
    depth: usize,
) -> Option<Mark> {
    let stack = marks.get_mut(key)?;
    // Marks of calls deeper than this one were left by calls closed without them.
    while stack.last().is_some_and(|m| m.0 > depth) {
        stack.pop();
    }
    match stack.last() {
        Some(&(d, mark)) if d == depth => {
            stack.pop();
            Some(mark)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
