//! Rules evaluated over a live device: a [`Matcher`] takes each [`Poll`] of a
//! [`devttrace::Follower`] (the events committed since the last, in time order) and says which
//! rules fired, on which event. Its cost is proportional to the events released: each event
//! is looked up in a plan made per tracepoint id (rebuilt only when tracepoints are added).
//!
//! **Pairs, exactly as `report` pairs them**: the matcher feeds every event to the model
//! ([`ttrace_model::model`]) and fires on the pairs it closes (calls, start/stop pairs of a
//! stem, span instances new to close). What the first poll holds from before the latest
//! loss it found is not paired (the model's horizon, as `report` has it for a copy:
//! [`ttrace_model::model::Model::live`]). Later, a follower knows when it missed events: entries
//! overwritten before they were read are a *gap*, placed in time ([`Poll::gaps`]: every
//! entry lost is older than it), fed to the model there, which gives up everything open
//! then. A poll that released events older than some already released is a gap before all
//! it released. A duration is thus only ever real.

use crate::rules::{arguments, ArgKind, Limit, Op, Rule, Value};
use devttrace::{Event, Metadata, Poll, Role};
use std::collections::VecDeque;
use ttrace_model::anatomy::Parts;
use ttrace_model::model::{Model, Step};

/// A rule that fired.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fired {
    /// Which rule (its index in the matcher's rules).
    pub rule: usize,
    /// The time of the event that fired it (the device's clock): a pair's end, or the poll
    /// that counted the losses.
    pub stamp: u64,
    /// What matched: a duration (`20.3ms`), an argument's value (`status=3`), a loss rate.
    pub what: String,
    /// Where what matched is an interval (a latency rule's pair or span instance): when it
    /// began (the device's clock); it ended at `stamp`.
    pub begin: Option<u64>,
}

/// Evaluates rules over the polls of a follower (see the module documentation).
pub struct Matcher {
    rules: Vec<Rule>,
    /// Per tracepoint id, what its events do.
    plan: Vec<Plan>,
    /// The tracepoints and threads the plan and the model were made for.
    seen: (usize, usize),
    pairs: bool,
    /// What events mean.
    model: Model,
    /// Whether a poll released events: the first one's rings give the horizon.
    started: bool,
    /// Per rule, the longest pair so far (for `latency NAME max`).
    maxima: Vec<Option<u64>>,
    /// Entries lost, by the time (ns, the device's clock) of the poll that found them, over
    /// the last second.
    lost: VecDeque<(u64, u64)>,
}

/// The latency rules' judge of the model's steps: what of a [`Matcher`] its steps read and
/// write, apart from its model.
struct Judge<'m> {
    rules: &'m [Rule],
    plan: &'m [Plan],
    /// Per rule, the longest pair so far (for `latency NAME max`).
    maxima: &'m mut [Option<u64>],
}

impl Judge<'_> {
    /// Fires the latency rules on what `step` closed.
    fn render(&mut self, step: Step<&Event>, clock: devttrace::Clock, fired: &mut Vec<Fired>) {
        // Only what a latency rule names is measured.
        let open = match &step {
            Step::CallEnd { begin, .. } | Step::StemEnd { begin, .. } => begin,
            Step::SpanEnd(i) => match &i.new {
                Some(new) => new,
                None => return,
            },
            _ => return,
        };
        let open = usize::from(open.type_word.tracepoint());
        if (self.plan.get(open)).is_none_or(|p| p.latencies.is_empty()) {
            return;
        }
        let (begin, end, parts) = match step {
            Step::CallEnd {
                begin, end, parts, ..
            }
            | Step::StemEnd { begin, end, parts } => {
                let parts = match parts {
                    Some(p) => p.scaled(|t| clock.ticks_to_ns(t)),
                    None => Parts::unknown(clock.ticks_to_ns(end.stamp - begin.stamp)),
                };
                (begin.stamp, end.stamp, parts)
            }
            // A span's duration is its instance's lifetime, new to close, when whole.
            Step::SpanEnd(i) => match (i.new, i.close.filter(|_| i.whole)) {
                (Some(new), Some(close)) => {
                    (new.stamp, close, i.parts.scaled(|t| clock.ticks_to_ns(t)))
                }
                _ => return,
            },
            _ => return,
        };
        self.latency(open, &parts, (begin, end), fired);
    }

    /// A duration opened by tracepoint `open_id`, from `begin` to `stamp`, its time in
    /// `parts` (ns): the latency rules it fires, each saying what it measured and, where the
    /// trace tells, where most of the time went.
    fn latency(
        &mut self,
        open_id: usize,
        parts: &Parts,
        (begin, stamp): (u64, u64),
        fired: &mut Vec<Fired>,
    ) {
        let total = parts.total();
        let approx = crate::rules::approx;
        for &rule in self.plan.get(open_id).map_or(&[][..], |p| &p.latencies) {
            let Rule::Latency { part, limit, .. } = &self.rules[rule] else {
                continue;
            };
            let ns = part.map_or(total, |p| parts.get(p));
            let what = match limit {
                Limit::Over(d) => (u128::from(ns) > d.as_nanos()).then(|| approx(ns)),
                Limit::Max => {
                    let max = &mut self.maxima[rule];
                    let before = *max;
                    if before.is_none_or(|m| ns > m) {
                        *max = Some(ns);
                    }
                    before
                        .filter(|&m| ns > m)
                        .map(|m| format!("{} (max before {})", approx(ns), approx(m)))
                }
            };
            let what = what.map(|w| match (part, parts.known()) {
                (Some(p), _) => format!("{} {w} of {}", p.name(), approx(total)),
                (None, true) => match parts.dominant() {
                    Some(d) => format!("{w}, mostly {} ({})", d.name(), approx(parts.get(d))),
                    None => w,
                },
                (None, false) => w,
            });
            if let Some(what) = what {
                fired.push(Fired {
                    rule,
                    stamp,
                    what,
                    begin: Some(begin),
                });
            }
        }
    }
}

/// What the events of one tracepoint do.
#[derive(Clone, Debug, Default)]
struct Plan {
    /// Event rules that apply, with the argument their condition reads.
    events: Vec<(usize, Option<(usize, ArgKind)>)>,
    /// Latency rules whose pairs this tracepoint opens.
    latencies: Vec<usize>,
}

impl Matcher {
    /// A matcher of `rules`, from the first poll given to it.
    pub fn new(rules: Vec<Rule>) -> Matcher {
        let pairs = rules.iter().any(|r| matches!(r, Rule::Latency { .. }));
        Matcher {
            maxima: vec![None; rules.len()],
            rules,
            plan: Vec::new(),
            seen: (0, 0),
            pairs,
            model: Model::whole(&Metadata::default()),
            started: false,
            lost: VecDeque::new(),
        }
    }

    /// The rules.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Evaluates the rules over what `poll` released; `now` is the device's clock at the
    /// poll (the time a loss rule fires at). Returns the rules fired, in time order.
    pub fn poll(&mut self, poll: &Poll, now: u64) -> Vec<Fired> {
        let snap = &poll.snapshot;
        let clock = snap.version.clock;
        let mut fired = Vec::new();
        let lost: u64 = poll.lost.iter().sum();
        if poll.late > 0 {
            self.gap();
        }
        self.count_lost(lost, clock.ticks_to_ns(now), now, &mut fired);
        let mut events: Vec<&Event> = snap.cpus.iter().flat_map(|r| &r.events).collect();
        events.sort_by_key(|e| e.stamp);
        if !events.is_empty() {
            if !self.started && self.pairs {
                // What the first copy holds before the latest first event of a ring that
                // lost entries is not paired, as `report` would not pair it.
                self.model = Model::live(&snap.meta, &poll.lost_before);
                self.started = true;
            }
            self.replan(&snap.meta);
        }
        let mut gaps = poll.gaps.iter().peekable();
        for e in events {
            if gaps.next_if(|&&g| g <= e.stamp).is_some() {
                while gaps.next_if(|&&g| g <= e.stamp).is_some() {}
                self.gap();
            }
            let id = usize::from(e.type_word.tracepoint());
            let Some(plan) = self.plan.get(id) else {
                continue;
            };
            for &(rule, arg) in &plan.events {
                let what = match arg {
                    None => Some(snap.meta.tracepoints[id].name.clone()),
                    Some((index, kind)) => self.condition(rule, e, index, kind, snap),
                };
                if let Some(what) = what {
                    fired.push(Fired {
                        rule,
                        stamp: e.stamp,
                        what,
                        begin: None,
                    });
                }
            }
            if !self.pairs {
                continue;
            }
            let mut judge = Judge {
                rules: &self.rules,
                plan: &self.plan,
                maxima: &mut self.maxima,
            };
            (self.model).feed(e, &mut |step| judge.render(step, clock, &mut fired));
        }
        // Losses after every event released: before what the next polls release.
        if gaps.next().is_some() {
            self.gap();
        }
        fired
    }

    /// Events may be missing: what is open is given up (see the module documentation).
    fn gap(&mut self) {
        // What it gives up fires nothing.
        self.model.gap(&mut |_| {});
    }

    /// Counts `lost` entries found at `now_ns` and fires the loss rules it takes over their
    /// rate.
    fn count_lost(&mut self, lost: u64, now_ns: u64, stamp: u64, fired: &mut Vec<Fired>) {
        if lost > 0 {
            self.lost.push_back((now_ns, lost));
        }
        while self
            .lost
            .front()
            .is_some_and(|&(t, _)| now_ns.saturating_sub(t) >= 1_000_000_000)
        {
            self.lost.pop_front();
        }
        if lost == 0 {
            return;
        }
        let in_second: u64 = self.lost.iter().map(|l| l.1).sum();
        for (rule, r) in self.rules.iter().enumerate() {
            if let Rule::Lost { per_second } = r {
                if in_second > *per_second {
                    fired.push(Fired {
                        rule,
                        stamp,
                        what: format!("{in_second} entries lost in the last second"),
                        begin: None,
                    });
                }
            }
        }
    }

    /// Whether event `e` satisfies the condition of event rule `rule` on its argument
    /// `index` of kind `kind`: the value it has, if so.
    fn condition(
        &self,
        rule: usize,
        e: &Event,
        index: usize,
        kind: ArgKind,
        snap: &devttrace::Snapshot,
    ) -> Option<String> {
        let Rule::Event {
            condition: Some(c), ..
        } = &self.rules[rule]
        else {
            return None;
        };
        let &w = e.args().get(index)?;
        let (ord, shown) = match (&c.value, kind) {
            (Value::Str(want), ArgKind::Str) => {
                let got = snap.aux.get(w)?;
                let ord = got.bytes.cmp(want.as_bytes());
                (ord, format!("{:?}", String::from_utf8_lossy(got.bytes)))
            }
            (Value::Int(want), ArgKind::Signed) => {
                ((w as i64 as i128).cmp(want), (w as i64).to_string())
            }
            (Value::Int(want), ArgKind::Float) => {
                let f = f64::from_bits(w);
                (f.partial_cmp(&(*want as f64))?, f.to_string())
            }
            (Value::Int(want), ArgKind::Unsigned) => ((w as i128).cmp(want), w.to_string()),
            _ => return None,
        };
        let holds = match c.op {
            Op::Eq => ord.is_eq(),
            Op::Ne => ord.is_ne(),
            Op::Lt => ord.is_lt(),
            Op::Le => ord.is_le(),
            Op::Gt => ord.is_gt(),
            Op::Ge => ord.is_ge(),
        };
        holds.then(|| format!("{}={shown}", c.arg))
    }

    /// Makes the plan again if tracepoints were added since, and names the threads again
    /// if threads were.
    fn replan(&mut self, meta: &Metadata) {
        let seen = (meta.tracepoints.len(), meta.threads.len());
        if seen != self.seen {
            self.model.renew(meta);
        }
        if seen.0 == self.seen.0 {
            self.seen = seen;
            return;
        }
        self.seen = seen;
        let patterns: Vec<Option<wildmatch::WildMatch>> = self
            .rules
            .iter()
            .map(|r| match r {
                Rule::Event { name, .. } => Some(wildmatch::WildMatch::new(name)),
                _ => None,
            })
            .collect();
        self.plan = (0..meta.tracepoints.len())
            .map(|id| {
                let t = &meta.tracepoints[id];
                let mut plan = Plan::default();
                let mut args = None;
                for (rule, r) in self.rules.iter().enumerate() {
                    match r {
                        Rule::Event { condition, .. } => {
                            if !patterns[rule].as_ref().is_some_and(|p| p.matches(&t.name)) {
                                continue;
                            }
                            let Some(c) = condition else {
                                plan.events.push((rule, None));
                                continue;
                            };
                            let args = args.get_or_insert_with(|| arguments(t));
                            // A tracepoint the pattern names without the argument, or with
                            // one of another kind, is not this rule's.
                            let found = args.iter().enumerate().find(|(_, a)| a.0 == c.arg);
                            if let Some((index, (_, kind))) = found {
                                if kind.compares_with(&c.value).is_ok() {
                                    plan.events.push((rule, Some((index, *kind))));
                                }
                            }
                        }
                        Rule::Latency { name, .. } => {
                            let span = t.role == Role::SpanNew && t.name == *name;
                            let pair = t.role == Role::Point
                                && self.model.opens(id as u16)
                                && (t.name == *name
                                    || self.model.stem_of(id as u16) == Some(name.as_str()));
                            if span || pair {
                                plan.latencies.push(rule);
                            }
                        }
                        Rule::Lost { .. } => {}
                    }
                }
                plan
            })
            .collect();
    }
}
