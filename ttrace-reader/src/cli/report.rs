//! `ttrace-reader report`: where the time went, as text or JSON (the figures are
//! [`crate::report`]'s).

use super::open::open;
use super::select::{view_window, Select, Window};
use crate::decode;
use crate::output::quiet_pipe;
use crate::report::{By, Options, SortBy};
use crate::Error;
use std::io::Write;
use std::path::PathBuf;

/// `report --sort`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(super) enum ReportSort {
    /// Pairs.
    Count,
    /// Total time.
    Total,
    /// 99th percentile.
    P99,
    /// Longest.
    Max,
}

impl From<ReportSort> for SortBy {
    fn from(sort: ReportSort) -> SortBy {
        match sort {
            ReportSort::Count => SortBy::Count,
            ReportSort::Total => SortBy::Total,
            ReportSort::P99 => SortBy::P99,
            ReportSort::Max => SortBy::Max,
        }
    }
}

/// The count `--slowest` was given: a whole number, at least 1.
pub(super) fn slowest_count(text: &str) -> Result<usize, Error> {
    match text.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        // error.rs has no variant for these yet: the message is the whole line.
        _ => Err(usage(format!(
            "report --slowest {text:?}: not a count; give how many of each span and pair to list (1 or more)"
        ))),
    }
}

/// A mistake on the command line, said in one line.
fn usage(line: String) -> Error {
    Error::Io(std::io::Error::other(line))
}

/// Prints the report of `device`, as `opts` says, in JSON with `json`.
pub(super) fn run(
    device: Option<PathBuf>,
    select: Select,
    window: Window,
    opts: Options,
    json: bool,
) -> Result<(), Error> {
    let dev = open(device)?;
    let (view, filter) = view_window(&dev, select, window)?;
    // A name that is no pair's, or no argument of a pair's entry, is a mistake to name, not
    // an empty result.
    if let Some(name) = &opts.histogram {
        let pairs = crate::report::pair_names(&view.meta);
        if !pairs.contains(name) {
            return Err(Error::NoSuchPair {
                name: name.clone(),
                pairs,
            });
        }
    }
    if let Some(name) = &opts.slowest_name {
        let names = crate::report::pair_names(&view.meta);
        if opts.slowest.is_none() {
            return Err(usage(format!(
                "report --name {name}: --name chooses what --slowest lists; give --slowest N too"
            )));
        }
        if !names.contains(name) {
            return Err(usage(format!(
                "report --name {name}: no span or pair of this name; {}",
                match names.is_empty() {
                    true => "this trace has none".to_string(),
                    false => format!("they are {}", names.join(", ")),
                }
            )));
        }
    }
    if let Some(By::Arg(name)) = &opts.by {
        let mut args = crate::report::pair_arguments(&view.meta);
        args.extend(crate::report::span_fields(&view.meta));
        args.sort();
        args.dedup();
        if !args.contains(name) {
            return Err(Error::NoSuchArgument {
                name: name.clone(),
                args,
            });
        }
    }
    let r = crate::report::build(&view, &filter, &opts);
    dev.check_intact()?;
    let out = if json {
        crate::report::json(&r) + "\n"
    } else {
        let mut s = decode::header_line(&view) + "\n" + &crate::report::text(&r);
        let n = view.version.num_cpus;
        for (ring, idx) in view.cpus.iter().enumerate() {
            if decode::shown(ring, idx, n, &filter) {
                let name = ttrace_layouts::ring::ring_name(ring, n);
                s += &format!("# {}\n", decode::ring_counts(&name, idx));
            }
        }
        s
    };
    quiet_pipe(std::io::stdout().lock().write_all(out.as_bytes()))
}
