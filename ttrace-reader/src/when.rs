//! The times a user gives `--since` and `--until`: seconds since the device was created
//! (as a dump's first column shows them), a UTC time (as `--utc` shows it), or a span before
//! the end of the trace.

use crate::decode;
use crate::Error;

/// A time given to `--since` or `--until`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum When {
    /// Nanoseconds since the device was created, as the first column of a dump shows them.
    Since(i64),
    /// UTC wall-clock time in nanoseconds since the Unix epoch, as `--utc` shows it.
    Wall(i128),
    /// Nanoseconds before the newest event of the trace.
    BeforeEnd(i64),
}

/// Parses `12.5`, `300ms`, `2026-11-22T15:47:37.581Z` or `-10s`.
pub(crate) fn parse_when(s: &str) -> Option<When> {
    if s.contains([':', 'T', 't']) {
        return decode::parse_utc(s).map(When::Wall);
    }
    match s.strip_prefix('-') {
        Some(span) => parse_span(span).map(When::BeforeEnd),
        None => parse_span(s).map(When::Since),
    }
}

/// A non-negative number of seconds (`12.5`), or of the unit it ends with (`s`, `ms`, `us`,
/// `ns`), in nanoseconds (a fraction of a nanosecond is dropped).
pub(crate) fn parse_span(s: &str) -> Option<i64> {
    let (number, unit_ns) = [
        ("ns", 1),
        ("us", 1_000),
        ("ms", 1_000_000),
        ("s", 1_000_000_000),
    ]
    .into_iter()
    .find_map(|(unit, ns)| s.strip_suffix(unit).map(|n| (n, ns)))
    .unwrap_or((s, 1_000_000_000));
    if number.starts_with('-') {
        return None;
    }
    // `parse_seconds` reads the number exactly, to the billionth: scale that to the unit.
    let billionths = decode::parse_seconds(number)? as i128;
    i64::try_from(billionths * unit_ns / 1_000_000_000).ok()
}

/// The time given to `flag` (`--since`, `--until`).
pub(crate) fn parse_time(flag: &'static str, s: &str) -> Result<When, Error> {
    parse_when(s).ok_or_else(|| Error::NotATime {
        flag,
        text: s.to_string(),
    })
}

/// `when` in nanoseconds since the device was created; `end` is the newest event's.
pub(crate) fn resolve(when: When, clock: &devttrace::Clock, end: i64) -> i64 {
    match when {
        When::Since(ns) => ns,
        // `--utc` shows the creation's wall time plus the time since creation: undo that.
        When::Wall(ns) => {
            (ns - clock.anchor_realtime_ns as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
        }
        When::BeforeEnd(span) => end.saturating_sub(span),
    }
}
