//! Span instances rebuilt from their steps (`new`, `enter`, `exit`, `close`, `follows`:
//! [`ttrace_layouts::role`]), for readers that show a `tracing` span as one thing with a
//! life, not as its polls.
//!
//! An instance is keyed by its writer's pid and its id (the first argument of every step):
//! `tracing` gives an id to one live span at a time in a process, and may give it again
//! once the span closed. A `new` opens an instance, a `close` ends it; each `enter` and the
//! `exit` of the same thread that follows it are one poll. Its lifetime is new to close,
//! its busy time the sum of its polls, its idle time the rest.
//!
//! **The drop re-entry.** When an instrumented future is dropped, `tracing` enters its span
//! once more around the inner future's drop, then closes it: a last enter/exit with nothing
//! inside, followed at once on the same thread by the close. Such a pair, after at least
//! one poll, is kept apart ([`Instance::dropped`]) and never counted as a poll. (A scope
//! entered again with nothing recorded inside just before its close reads the same; a drop
//! that records something inside is counted as a poll.)
//!
//! **Exactness.** Every ring holds all it was given from the horizon on
//! ([`crate::pairs::Pairing::horizon`]): an instance whose `new` is at or after it has every
//! step in the trace ([`Instance::whole`]), so its figures are exact; one that began before
//! it, or whose `new` is not in the trace, may have lost polls, and is not measured.
//!
//! **Fields and parents** ([`Spans::keep_fields`], for readers that show them): each
//! instance then has a [`Node`], shared with its children's, that holds its `new` and its
//! `record` steps and links to its parent's node. The parent is the instance open under the
//! parent id at the child's `new` (an id is given again once its span closed, so it is
//! resolved then, not later); a parent that records a field after the child began shows it
//! too, since both see the one node.

use crate::anatomy::Parts;
use devttrace::event::Event;
use devttrace::meta::Metadata;
use foldhash::HashMap as FoldHashMap;
use std::sync::{Arc, Mutex};
use ttrace_layouts::role::Role;

/// One poll of an instance (or one scope of a synchronous span).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Poll {
    /// The enter's stamp.
    pub enter: u64,
    /// The exit's stamp.
    pub exit: u64,
    /// The writer (`pid << 32 | tid`).
    pub ctx: u64,
    /// The CPU of the enter.
    pub cpu: u32,
    /// The thread's event numbers of the enter and the exit (what tells an empty pair).
    pub(crate) seqs: (u64, u64),
}

/// A span instance.
#[derive(Clone, Debug)]
pub struct Instance {
    /// Its writer's process.
    pub pid: u32,
    /// Its id in that process.
    pub id: u64,
    /// The tracepoint of its first step in the trace (its `new`'s, when there): what names
    /// it.
    pub tracepoint: u16,
    /// Its `new`, if in the trace: the parent's id (0: a root) and the fields.
    pub new: Option<Event>,
    /// Its close's stamp, once closed.
    pub close: Option<u64>,
    /// Its polls, in the order they ended.
    pub polls: Vec<Poll>,
    /// The drop re-entry, left out of the polls.
    pub dropped: Option<Poll>,
    /// The instances it follows from (their ids).
    pub follows: Vec<u64>,
    /// Whether every step is in the trace (its `new` is at or after the horizon).
    pub whole: bool,
    /// Exits with no enter of their thread open.
    pub unmatched_exits: u32,
    /// Enters not yet exited, each with its number among its thread's events.
    pub(crate) open: Vec<(Event, u64)>,
    /// Its fields and its parent's, when kept ([`Spans::keep_fields`]).
    pub node: Option<Arc<Node>>,
    /// Where its time went ([`crate::anatomy`]): for a whole, closed instance, the parts
    /// add up to its lifetime.
    pub parts: Parts,
    /// When it last began to wait (its `new`, the end of its last poll), if in the trace.
    pub(crate) since: Option<u64>,
    /// When it was first woken since then, if it was.
    pub(crate) woken: Option<u64>,
}

/// What an instance was given (its `new` and `record` steps) and its parent's node: kept by
/// [`Spans::keep_fields`], shared between an instance and its children.
#[derive(Debug)]
pub struct Node {
    /// Its writer's process.
    pub pid: u32,
    /// Its id in that process.
    pub id: u64,
    /// The tracepoint of its first step in the trace: what names it.
    pub tracepoint: u16,
    /// Its `new`, if in the trace.
    pub new: Option<Event>,
    /// Its parent's node: the instance open under its parent id at its `new`; `None` for a
    /// root, and for a parent not in the trace ([`Node::parent_id`] tells them apart).
    pub parent: Option<Arc<Node>>,
    /// Its `record` steps so far, in time order.
    pub(crate) records: Mutex<Vec<Event>>,
}

impl Node {
    /// Its parent's id, from its `new` (0: a root; `None`: its `new` is not in the trace).
    pub fn parent_id(&self) -> Option<u64> {
        self.new
            .as_ref()
            .map(|e| e.args().get(1).copied().unwrap_or(0))
    }

    /// Its `record` steps so far, in time order.
    pub fn records(&self) -> Vec<Event> {
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Its steps that give fields: its `new` (if in the trace), then its `record`s.
    pub fn field_steps(&self) -> Vec<Event> {
        self.new.iter().copied().chain(self.records()).collect()
    }

    /// Its ancestors' nodes, its parent first, as far as the trace has them.
    pub fn ancestors(&self) -> Vec<Arc<Node>> {
        let mut v: Vec<Arc<Node>> = Vec::new();
        let mut next = self.parent.clone();
        while let Some(n) = next {
            next = n.parent.clone();
            v.push(n);
        }
        v
    }

    /// Whether its chain of ancestors is whole: it ends at a root (its furthest ancestor's
    /// `new` is in the trace and names no parent).
    pub fn rooted(&self) -> bool {
        let top = self.ancestors().pop();
        let top = top.as_deref().unwrap_or(self);
        top.parent_id() == Some(0)
    }
}

impl Instance {
    pub(crate) fn new(pid: u32, id: u64, tracepoint: u16) -> Instance {
        Instance {
            pid,
            id,
            tracepoint,
            new: None,
            close: None,
            polls: Vec::new(),
            dropped: None,
            follows: Vec::new(),
            whole: false,
            unmatched_exits: 0,
            open: Vec::new(),
            node: None,
            parts: Parts::default(),
            since: None,
            woken: None,
        }
    }

    /// The parent's id, from its `new` (0: a root).
    pub fn parent(&self) -> Option<u64> {
        self.new.as_ref().and_then(|e| e.args().get(1).copied())
    }

    /// New to close, in ticks: for a whole, closed instance.
    pub fn lifetime(&self) -> Option<u64> {
        let new = self.new.as_ref().filter(|_| self.whole)?;
        Some(self.close?.saturating_sub(new.stamp))
    }

    /// The sum of its polls, in ticks.
    pub fn busy(&self) -> u64 {
        self.polls
            .iter()
            .map(|p| p.exit.saturating_sub(p.enter))
            .sum()
    }

    /// When it began in the trace: its new, else its first poll, else its close.
    pub fn begin(&self) -> u64 {
        let first_poll = self.polls.first().map(|p| p.enter);
        self.new
            .as_ref()
            .map(|e| e.stamp)
            .or(first_poll)
            .or(self.close)
            .unwrap_or(0)
    }
}

/// What an event did.
#[derive(Debug)]
pub enum Added {
    /// It is not a span's step.
    NotAStep,
    /// It opened an instance (a `new`), or stepped one.
    Step,
    /// It closed this instance (or a `new` superseded it: an instance whose close is not in
    /// the trace, returned with `close: None`).
    Ended(Box<Instance>),
}

/// Rebuilds instances from events fed in time order (see the module's documentation).
pub struct Spans {
    /// Per tracepoint id, its role.
    roles: Vec<Role>,
    /// Whether any tracepoint is a span's step: a trace without one costs a branch an
    /// event.
    any: bool,
    horizon: u64,
    open: FoldHashMap<(u32, u64), Instance>,
    /// Per writer, the number of its events fed so far.
    seqs: FoldHashMap<u64, u64>,
    /// Whether instances keep their fields and parents ([`Spans::keep_fields`]).
    fields: bool,
}

impl Spans {
    /// Instances of the tracepoints `meta` defines, whole from `horizon` on.
    pub fn new(meta: &Metadata, horizon: u64) -> Spans {
        Spans {
            roles: meta.tracepoints.iter().map(|t| t.role).collect(),
            any: Spans::any(meta),
            horizon,
            open: FoldHashMap::default(),
            seqs: FoldHashMap::default(),
            fields: false,
        }
    }

    /// Each instance keeps its fields (its `new` and its `record` steps) and its parent's,
    /// in a [`Node`] ([`Instance::node`]); without it none are kept.
    pub fn keep_fields(mut self) -> Spans {
        self.fields = true;
        self
    }

    /// The tracepoints are now those of `meta` (a live reader's copy grew); the instances
    /// open stay open.
    pub fn renew(&mut self, meta: &Metadata) {
        self.roles = meta.tracepoints.iter().map(|t| t.role).collect();
        self.any = Spans::any(meta);
    }

    /// Events were missed (a live reader found entries overwritten before it read them):
    /// every instance open now may have lost steps, and is no longer whole.
    pub fn gap(&mut self) {
        for i in self.open.values_mut() {
            i.whole = false;
        }
    }

    /// Whether the trace has span steps at all.
    pub fn any(meta: &Metadata) -> bool {
        meta.tracepoints.iter().any(|t| t.role.is_span())
    }

    /// The role of tracepoint `id`.
    pub fn role(&self, id: u16) -> Role {
        self.roles.get(id as usize).copied().unwrap_or_default()
    }

    /// Feeds `e`, the next event in time order (every event: an empty pair is told by what
    /// its thread recorded between).
    pub fn add(&mut self, e: &Event) -> Added {
        if !self.any {
            return Added::NotAStep;
        }
        let seq = {
            let s = self.seqs.entry(e.ctx).or_default();
            *s += 1;
            *s
        };
        let tp = e.type_word.tracepoint();
        let role = self.role(tp);
        let (Some(&id), true) = (e.args().first(), role.is_span()) else {
            return Added::NotAStep;
        };
        let key = ((e.ctx >> 32) as u32, id);
        let fields = self.fields;
        fn instance(
            open: &mut FoldHashMap<(u32, u64), Instance>,
            key: (u32, u64),
            tp: u16,
            fields: bool,
        ) -> &mut Instance {
            open.entry(key).or_insert_with(|| {
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
        match role {
            Role::SpanNew => {
                let superseded = self.open.remove(&key);
                let mut i = Instance::new(key.0, id, tp);
                i.whole = e.stamp >= self.horizon;
                i.new = Some(*e);
                if fields {
                    let parent = match e.args().get(1) {
                        Some(&p) if p != 0 => self.open.get(&(key.0, p)),
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
                self.open.insert(key, i);
                if let Some(old) = superseded {
                    return Added::Ended(Box::new(old));
                }
            }
            Role::SpanEnter => {
                instance(&mut self.open, key, tp, fields)
                    .open
                    .push((*e, seq));
            }
            Role::SpanExit => {
                let i = instance(&mut self.open, key, tp, fields);
                match i.open.iter().rposition(|o| o.0.ctx == e.ctx) {
                    Some(at) => {
                        let (enter, enter_seq) = i.open.remove(at);
                        i.polls.push(Poll {
                            enter: enter.stamp,
                            exit: e.stamp,
                            ctx: enter.ctx,
                            cpu: enter.type_word.cpu(),
                            seqs: (enter_seq, seq),
                        });
                    }
                    None => i.unmatched_exits += 1,
                }
            }
            Role::SpanFollows => {
                let follows = e.args().get(1).copied().unwrap_or(0);
                instance(&mut self.open, key, tp, fields)
                    .follows
                    .push(follows);
            }
            Role::SpanClose => {
                let mut i = self
                    .open
                    .remove(&key)
                    .unwrap_or_else(|| Instance::new(key.0, id, tp));
                i.close = Some(e.stamp);
                let drop_reentry = i.polls.len() >= 2
                    && i.polls.last().is_some_and(|p| {
                        p.ctx == e.ctx && p.seqs.1 + 1 == seq && p.seqs.0 + 1 == p.seqs.1
                    });
                if drop_reentry {
                    i.dropped = i.polls.pop();
                }
                return Added::Ended(Box::new(i));
            }
            // Fields recorded into an instance open in the trace.
            Role::SpanRecord => {
                if let Some(n) = self.open.get(&key).and_then(|i| i.node.as_ref()) {
                    n.records.lock().unwrap_or_else(|e| e.into_inner()).push(*e);
                }
            }
            _ => {}
        }
        Added::Step
    }

    /// The instances still open at the end, in order of their beginning.
    pub fn into_open(self) -> Vec<Instance> {
        let mut open: Vec<Instance> = self.open.into_values().collect();
        open.sort_by_key(|i| (i.begin(), i.pid, i.id));
        open
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use devttrace::meta::TracepointInfo;
    use ttrace_layouts::entry::{Kind, TypeWord};

    /// Tracepoints 0..6: `new`, `enter`, `exit`, `close`, `record` of one span.
    fn meta() -> Metadata {
        let tp = |role: Role| TracepointInfo {
            id: 0,
            name: "span".into(),
            kind: role.kind().unwrap_or(Kind::Start),
            classes: 1,
            format: String::new(),
            nargs: 0,
            types: Vec::new(),
            tables: Vec::new(),
            role,
        };
        Metadata {
            tracepoints: [
                Role::SpanNew,
                Role::SpanEnter,
                Role::SpanExit,
                Role::SpanClose,
                Role::SpanRecord,
            ]
            .map(tp)
            .to_vec(),
            ..Default::default()
        }
    }

    /// An event of tracepoint `tp` by thread 2 of process 1 at `stamp`, with `args`.
    fn event(stamp: u64, tp: u16, args: &[u64]) -> Event {
        let tw = TypeWord::new(Kind::Start, args.len() as u8, tp);
        Event::new(stamp, tw, 1 << 32 | 2, args, 0)
    }

    #[test]
    fn kept_fields_link_each_instance_to_the_parent_open_at_its_new() {
        let (new, close, record) = (0, 3, 4);
        let mut spans = Spans::new(&meta(), 0).keep_fields();
        let mut ended = Vec::new();
        let mut feed = |spans: &mut Spans, e: Event| {
            if let Added::Ended(i) = spans.add(&e) {
                ended.push(*i);
            }
        };
        // Parent 5 (field 70), its child 6; the parent records 200 after the child began,
        // then closes; id 5 is given again to a root, whose child 7 is not 6's sibling.
        feed(&mut spans, event(10, new, &[5, 0, 70]));
        feed(&mut spans, event(20, new, &[6, 5, 1]));
        feed(&mut spans, event(30, record, &[5, 200]));
        feed(&mut spans, event(40, close, &[6]));
        feed(&mut spans, event(50, close, &[5]));
        feed(&mut spans, event(60, new, &[5, 0, 71]));
        feed(&mut spans, event(70, new, &[7, 5, 2]));
        feed(&mut spans, event(80, close, &[7]));
        // A child whose parent is not in the trace.
        feed(&mut spans, event(90, new, &[8, 9, 3]));
        feed(&mut spans, event(95, close, &[8]));
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
        let mut plain = Spans::new(&meta(), 0);
        plain.add(&event(10, new, &[5, 0, 70]));
        match plain.add(&event(20, close, &[5])) {
            Added::Ended(i) => assert!(i.node.is_none()),
            other => panic!("{other:?}"),
        }
    }
}
