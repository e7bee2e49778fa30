//! Traces for other tools: uftrace data, CTF for babeltrace2 and Trace Compass, and Chrome
//! Trace Event JSON for Perfetto.
//!
//! Every exporter reads the merged items of a [`View`](devttrace::View) once, in time order,
//! and writes as it goes: memory holds only what a format needs across events (per thread,
//! the entries still open), never the trace.

pub mod chrome;
pub mod ctf;
pub mod uftrace;

use crate::decode::Context;
use crate::format::{self, Piece, Spec};
use devttrace::{Event, Metadata};
use std::collections::HashMap;
use ttrace_layouts::entry::Kind;

/// A tracepoint as exporters see it: its name, kind, and its arguments' names and specs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schema {
    /// Name.
    pub name: String,
    /// Kind.
    pub kind: Kind,
    /// Argument names (`argN` for an unnamed one, names made unique) and how each is shown.
    pub args: Vec<(String, Spec)>,
}

impl Schema {
    /// The schemas of every tracepoint in `meta`, by id.
    pub fn all(meta: &Metadata) -> Vec<Schema> {
        meta.tracepoints
            .iter()
            .map(|t| {
                let mut args: Vec<(String, Spec)> = Vec::new();
                for p in format::parse(&t.format) {
                    if let Piece::Arg(name, spec) = p {
                        let base = if name.is_empty() {
                            format!("arg{}", args.len())
                        } else {
                            name
                        };
                        let name = unique(&base, |n| args.iter().any(|(a, _)| a == n));
                        args.push((name, spec));
                    }
                }
                Schema {
                    name: t.name.clone(),
                    kind: t.kind,
                    args,
                }
            })
            .collect()
    }
}

/// `base`, or `base_1`, `base_2`, ...: the first that `taken` says is free.
pub fn unique(base: &str, taken: impl Fn(&str) -> bool) -> String {
    let mut name = base.to_string();
    let mut k = 1;
    while taken(&name) {
        name = format!("{base}_{k}");
        k += 1;
    }
    name
}

/// What an exporter wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Trace points and messages written.
    pub events: u64,
    /// Entry/exit pairs written as one slice.
    pub pairs: u64,
    /// Entries whose exit is not in the trace, and exits whose entry is not.
    pub unpaired: u64,
}

/// An entry not yet matched by its exit.
#[derive(Clone, Copy, Debug)]
pub struct Open {
    /// The entry.
    pub event: Event,
}

/// Matches exits to entries, per thread, innermost first: an exit closes the entry opened
/// last on its thread. An exit with no open entry (its entry was overwritten, or recorded
/// before the trace begins) is unpaired.
#[derive(Default)]
pub struct Pairing {
    stacks: HashMap<u64, Vec<Open>>,
}

impl Pairing {
    /// Opens `event` (an entry) on its thread; returns the depth it opens at (0 outermost).
    pub fn enter(&mut self, event: &Event) -> usize {
        let s = self.stacks.entry(event.ctx).or_default();
        s.push(Open { event: *event });
        s.len() - 1
    }

    /// Closes the innermost open entry of `event`'s thread: it and its depth, if any.
    pub fn exit(&mut self, event: &Event) -> Option<(Open, usize)> {
        let s = self.stacks.get_mut(&event.ctx)?;
        let open = s.pop()?;
        Some((open, s.len()))
    }

    /// The number of entries open on the thread `ctx`.
    pub fn depth(&self, ctx: u64) -> usize {
        self.stacks.get(&ctx).map_or(0, Vec::len)
    }

    /// Every entry still open, per thread outermost first, threads in `ctx` order.
    pub fn into_open(self) -> Vec<Open> {
        let mut threads: Vec<(u64, Vec<Open>)> = self.stacks.into_iter().collect();
        threads.sort_by_key(|(ctx, _)| *ctx);
        threads.into_iter().flat_map(|(_, s)| s).collect()
    }
}

/// The process and thread names of a trace, by `pid` and `pid << 32 | tid` (latest wins).
pub fn names(ctx: &Context<'_>) -> (HashMap<u32, String>, HashMap<u64, String>) {
    let processes = ctx
        .meta
        .processes
        .iter()
        .map(|p| (p.pid, p.name.clone()))
        .collect();
    let threads = ctx
        .meta
        .threads
        .iter()
        .map(|t| ((t.pid as u64) << 32 | t.tid as u64, t.name.clone()))
        .collect();
    (processes, threads)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_names_are_made_unique() {
        let meta = Metadata {
            tracepoints: vec![devttrace::TracepointInfo {
                id: 0,
                name: "t".into(),
                kind: Kind::Start,
                classes: 1,
                format: "{a} {a} {a_1} {} {}".into(),
                nargs: 5,
            }],
            ..Metadata::default()
        };
        let names: Vec<String> = Schema::all(&meta)[0]
            .args
            .iter()
            .map(|(n, _)| n.clone())
            .collect();
        assert_eq!(names, ["a", "a_1", "a_1_1", "arg3", "arg4"]);
    }
}
