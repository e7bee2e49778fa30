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
    if let Some(By::Arg(name)) = &opts.by {
        let args = crate::report::pair_arguments(&view.meta);
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
