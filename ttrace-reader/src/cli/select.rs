//! The options that choose what a command shows: the rings and tracepoints (`--cpu`,
//! `--filter`), the part of the trace in time (`--since`, `--until`), the time column
//! (`--utc`); and the filter and view they make.

use crate::decode::TimeFormat;
use crate::merge::Filter;
use crate::when::{parse_time, resolve, When};
use crate::Error;
use clap::Args;
use devttrace::{Reader, View};

/// What to show.
#[derive(Args, Clone, Default)]
pub(super) struct Select {
    /// Only these rings (`--cpu 0 --cpu 2` or `--cpu 0,2`).
    #[arg(long, value_delimiter = ',', value_name = "N")]
    cpu: Vec<usize>,
    /// Only tracepoints whose name matches this wildcard (`*`, `?`); messages are `info`.
    /// One that matches no name the device knows is noted on stderr, with some it knows.
    #[arg(long, value_name = "WILDCARD")]
    filter: Option<String>,
}

/// Which part of the trace, in time.
#[derive(Args, Default)]
pub(super) struct Window {
    /// Only events at or after TIME: seconds since the device was created as the first
    /// column shows them (`12.5`, `300ms`), a UTC time as `--utc` shows it
    /// (`2026-11-22T15:47:37.581Z`), or a span before the newest event of the trace (`-10s`:
    /// the last ten seconds).
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    since: Option<String>,
    /// Only events at or before TIME (the same forms as `--since`).
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    until: Option<String>,
}

/// How many names a note lists before it says how many more there are.
const NAMES_SHOWN: usize = 8;

/// Notes on standard error a `--filter` wildcard that matches no tracepoint `dev` knows (nor
/// `info`, its messages), naming some it does: the empty result that follows is then no
/// surprise.
fn note_unmatched(dev: &Reader, pattern: &str) {
    let wildcard = wildmatch::WildMatch::new(pattern);
    let mut names: Vec<String> = dev
        .metadata()
        .tracepoints
        .into_iter()
        .filter(|t| !t.is_message())
        .map(|t| t.name)
        .collect();
    if wildcard.matches("info") || names.iter().any(|n| wildcard.matches(n)) {
        return;
    }
    names.sort();
    names.dedup();
    let known = match names.len() {
        0 => "none yet".to_string(),
        n if n <= NAMES_SHOWN => names.join(", "),
        n => format!(
            "{} and {} more (ttrace-reader stats lists them)",
            names[..NAMES_SHOWN].join(", "),
            n - NAMES_SHOWN
        ),
    };
    eprintln!(
        "ttrace-reader: note: --filter {pattern} matches no tracepoint of this device (nor \
         `info`, its messages); it has {known}"
    );
}

/// The filter of `--cpu` and `--filter`, for `dev`; a `--filter` that matches nothing is
/// noted (see [`note_unmatched`]).
pub(super) fn filter(dev: &Reader, select: Select) -> Result<Filter, Error> {
    let n = dev.version().num_cpus as usize;
    if let Some(&c) = select.cpu.iter().find(|&&c| c >= n) {
        return Err(Error::NoCpu { cpu: c, cpus: n });
    }
    if let Some(pattern) = &select.filter {
        note_unmatched(dev, pattern);
    }
    // Each CPU's rings: its restartable one and its shared one.
    let rings = select.cpu.iter().flat_map(|&c| [c, n + c]).collect();
    Ok(Filter {
        cpus: rings,
        name: select.filter,
        since_ns: None,
        until_ns: None,
    })
}

/// How `--utc` (or its absence) shows the time column.
pub(super) fn time_format(utc: bool) -> TimeFormat {
    if utc {
        TimeFormat::Utc
    } else {
        TimeFormat::Relative
    }
}

/// A view of `dev` and the filter of `--cpu`, `--filter`, `--since` and `--until`.
pub(super) fn view_window(
    dev: &Reader,
    select: Select,
    window: Window,
) -> Result<(View<'_>, Filter), Error> {
    let mut filter = filter(dev, select)?;
    let since = window
        .since
        .map(|s| parse_time("--since", &s))
        .transpose()?;
    let until = window
        .until
        .map(|s| parse_time("--until", &s))
        .transpose()?;
    let clock = dev.version().clock;
    let mut newer_than = 0;
    if let Some(When::Since(_) | When::Wall(_)) = since {
        let ns = since.map_or(0, |w| resolve(w, &clock, 0));
        // The rings keep what is after `ns - 1` (an event shown at `ns` was rounded from at
        // least `ns - 0.5`); the exact cut is then made on the time as shown.
        if ns > 0 {
            newer_than = clock
                .anchor_ticks
                .saturating_add(clock.ns_to_ticks(ns as u64 - 1));
        }
    }
    let view = View::of(dev, newer_than)?;
    // The newest event of every ring, for `-10s`.
    let end = (view.cpus.iter())
        .filter_map(|r| r.events.last().map(|e| e.stamp))
        .max()
        .map_or(0, |t| clock.since_anchor_ns(t));
    filter.since_ns = since.map(|w| resolve(w, &clock, end));
    filter.until_ns = until.map(|w| resolve(w, &clock, end));
    Ok((view, filter))
}
