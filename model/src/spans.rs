//! Span instances: what the model ([`crate::model`]) rebuilds from a `tracing` span's steps
//! (`new`, `enter`, `exit`, `close`, `follows`: [`ttrace_layouts::role`]), for readers that
//! show a span as one thing with a life, not as its polls.
//!
//! An instance is keyed by its writer's pid and its id (the first argument of every step):
//! `tracing` gives an id to one live span at a time in a process, and may give it again
//! once the span closed. A `new` opens an instance, a `close` ends it; each `enter` and the
//! `exit` of the same thread that follows it are one [`Poll`]. Its lifetime is new to
//! close, its busy time the sum of its polls, its idle time the rest. The drop re-entry
//! (see the model) is kept apart ([`Instance::dropped`]), never counted as a poll.
//!
//! **Exactness.** Every ring holds all it was given from the model's horizon on: an
//! instance whose `new` is at or after it has every step in the trace
//! ([`Instance::whole`]), so its figures are exact; one that began before it, or whose
//! `new` is not in the trace, may have lost polls, and is not measured.
//!
//! **Fields and parents** (the model's `keep_fields`, for readers that show them): each
//! instance then has a [`Node`], shared with its children's, that holds its `new` and its
//! `record` steps and links to its parent's node. The parent is the instance open under the
//! parent id at the child's `new` (an id is given again once its span closed, so it is
//! resolved then, not later); a parent that records a field after the child began shows it
//! too, since both see the one node.

use crate::anatomy::Parts;
use devttrace::event::Event;
use std::sync::{Arc, Mutex};

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
    /// Always `(0, 0)`: what told an empty pair before the model held enters back (the
    /// model still sets it; it goes when model.rs is next changed).
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
    /// Its fields and its parent's, when kept (the model's `keep_fields`).
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
/// the model's `keep_fields`, shared between an instance and its children.
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
