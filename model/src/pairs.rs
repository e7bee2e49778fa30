//! What pairs are named by: a start pairs with a stop of the same name *stem*
//! (`request_start` .. `request_done`), and a pair, like a call or a span instance, is
//! named by its opening tracepoint (what `report` and the snapshot rules, `latency NAME >
//! 5ms`, name durations by). Which event pairs with which is the model's alone
//! ([`crate::model`]).

use devttrace::meta::{Metadata, TracepointInfo};
use std::collections::HashMap;
use ttrace_layouts::entry::Kind;
use ttrace_layouts::role::Role;

/// The stem of a start or stop name: `request_start` and `request_done` are both `request`;
/// a name with no such suffix is its own stem.
///
/// ```
/// use ttrace_model::pairs::stem;
/// use devttrace::Kind;
/// assert_eq!(stem("request_start", Kind::Start), "request");
/// assert_eq!(stem("request_done", Kind::Stop), "request");
/// assert_eq!(stem("tick", Kind::Start), "tick");
/// assert_eq!(stem("io", Kind::Stop), "io");
/// ```
pub fn stem(name: &str, kind: Kind) -> &str {
    let suffixes: &[&str] = match kind {
        Kind::Start => &["_start", "_begin"],
        _ => &["_stop", "_end", "_done"],
    };
    suffixes
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(name)
}

/// How start and stop tracepoints pair: by name stem. A start opens a pair only if some
/// stop tracepoint has its stem; else it is an instant.
#[derive(Clone, Debug, Default)]
pub struct Stems {
    /// Per tracepoint id, the stem of a start or stop, as a small number.
    pub of: Vec<Option<usize>>,
    /// Per stem, whether a stop tracepoint has it.
    pub paired: Vec<bool>,
    /// Per stem, its text.
    pub names: Vec<String>,
}

impl Stems {
    /// The stems of the start and stop tracepoints of `tracepoints` (by id).
    pub fn new(tracepoints: &[TracepointInfo]) -> Stems {
        let mut numbers: HashMap<&str, usize> = HashMap::new();
        let mut names = Vec::new();
        let of: Vec<Option<usize>> = tracepoints
            .iter()
            // A `tracing` event is an instant; a span's new and close pair by id
            // (`crate::spans`), not by name.
            .map(|s| match s.kind {
                Kind::Start | Kind::Stop if s.role == Role::Point => {
                    let stem = stem(&s.name, s.kind);
                    let next = numbers.len();
                    Some(*numbers.entry(stem).or_insert_with(|| {
                        names.push(stem.to_string());
                        next
                    }))
                }
                _ => None,
            })
            .collect();
        let mut paired = vec![false; numbers.len()];
        for (s, k) in tracepoints.iter().zip(&of) {
            if let (Kind::Stop, Some(k)) = (s.kind, k) {
                paired[*k] = true;
            }
        }
        Stems { of, paired, names }
    }

    /// Whether `tracepoints[id]` opens a pair: a native entry, or a start whose stem a stop
    /// has (a span's enter opens a poll of its instance: [`crate::spans`]).
    pub fn opens_pair(&self, tracepoints: &[TracepointInfo], id: usize) -> bool {
        match tracepoints[id].kind {
            Kind::Entry => tracepoints[id].role == Role::Point,
            Kind::Start => self.of[id].is_some_and(|s| self.paired[s]),
            _ => false,
        }
    }
}

/// The names of the pairs of `meta`'s tracepoints, sorted: their entries' and starts'
/// (what durations are named by), and the spans' (whose instances' lifetimes are durations:
/// [`crate::spans`]).
pub fn pair_names(meta: &Metadata) -> Vec<String> {
    let stems = Stems::new(&meta.tracepoints);
    let mut names: Vec<String> = (0..meta.tracepoints.len())
        .filter(|&id| {
            stems.opens_pair(&meta.tracepoints, id) || meta.tracepoints[id].role == Role::SpanNew
        })
        .map(|id| meta.tracepoints[id].name.clone())
        .collect();
    names.sort();
    names.dedup();
    names
}
