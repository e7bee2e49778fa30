//! The text of `ttrace-reader stats`: per-ring counts and time spans, the totals `dump`
//! shows, the sizes and use of the device's areas, the mask and the tracepoints with the
//! events of each. A mounted device serves the same text as its `stats` file. It is read
//! with no copy of the trace ([`Counts`]): its memory does not grow with the device.

use crate::decode::{self, Context, Tally, Writers};
use crate::merge::Filter;
use devttrace::{Counts, Reader};

impl<'s> From<&'s Counts> for Context<'s> {
    fn from(c: &'s Counts) -> Context<'s> {
        Context {
            dir: &c.dir,
            version: &c.version,
            status: &c.status,
            meta: &c.meta,
            aux: &c.no_records,
            aux_error: c.aux_error.as_deref(),
            cause: None,
        }
    }
}

impl Writers for Counts {
    fn writers(&self) -> (Vec<u32>, bool) {
        decode::writers_of(self.rings.iter().map(|r| &r.counts))
    }
}

/// The totals `dump` shows of `snap`: every event read, as it would print them, and the
/// losses.
pub(crate) fn tally(snap: &Counts) -> Tally {
    let message = |id: usize| {
        snap.meta
            .tracepoints
            .get(id)
            .is_some_and(|t| t.is_message())
    };
    let mut tally = Tally::default();
    for r in &snap.rings {
        let messages: u64 = (r.by_tracepoint.iter().enumerate())
            .filter(|&(id, _)| message(id))
            .map(|(_, n)| n)
            .sum();
        tally.messages += messages;
        tally.points += r.counts.events.len() as u64 - messages;
        tally.lost += r.counts.lost;
        tally.dropped += r.counts.dropped;
        tally.damaged += r.counts.damaged;
        tally.strings_lost += r.strings_lost;
    }
    tally
}

/// The time span of `snap`'s events, first to last (none if it has none).
pub(crate) fn span(snap: &Counts) -> Option<(u64, u64)> {
    let spans = snap.rings.iter().filter_map(|r| r.span);
    spans.reduce(|(a, b), (c, d)| (a.min(c), b.max(d)))
}

/// How much history the rings hold: a ring that has wrapped holds its time span; one that
/// has not would hold, at the rate of the events it has, its span times how many more
/// entries it has room for. The shortest is what the device keeps of every CPU.
fn history(snap: &Counts) -> String {
    use crate::rules::approx;
    let clock = snap.version.clock;
    let slots = snap.version.ring_slots;
    let n = snap.version.num_cpus;
    let mut held: Vec<(String, u64, bool)> = Vec::new();
    for (ring, r) in snap.rings.iter().enumerate() {
        let (Some((first, last)), entries) = (r.span, r.counts.committed) else {
            continue;
        };
        if entries < 2 || ring >= n as usize && r.counts.lost == 0 && entries < 64 {
            continue; // Too few to tell a rate (a shared ring written to now and then).
        }
        let span = clock.ticks_to_ns(last.saturating_sub(first));
        let full = r.counts.lost > 0 || entries >= slots;
        let ns = match full {
            true => span,
            false => (span as u128 * slots as u128 / entries as u128) as u64,
        };
        held.push((ttrace_layouts::ring::ring_name(ring, n), ns, full));
    }
    let Some((ring, ns, full)) = held.iter().min_by_key(|h| h.1) else {
        return "history: no events yet\n".into();
    };
    let longest = held.iter().map(|h| h.1).max().unwrap_or(*ns);
    format!(
        "history: the rings in use keep {} ({ring}, {}) to {}; TTRACE_BUFFER=<bytes> (e.g. 256m) sizes them\n",
        approx(*ns),
        if *full { "wrapped" } else { "at its rate until it wraps" },
        approx(longest),
    )
}

/// What `ttrace-reader stats` prints of `dev` (and a mounted device's `stats` file holds):
/// counts only, read with no copy of the trace ([`Counts`]).
pub(crate) fn text(dev: &Reader) -> devttrace::Result<String> {
    let snap = Counts::of(dev)?;
    let clock = snap.version.clock;
    let secs = |t: u64| decode::seconds(&clock, t);
    let mut s = decode::header_line(&snap) + "\n";
    if let Some(t) = crate::cause::Taken::of(dev) {
        let t = t.holding(crate::cause::Held::of_counts(&snap));
        s += &format!("# {}\n", t.line());
    }
    let n = snap.version.num_cpus;
    for (ring, r) in snap.rings.iter().enumerate() {
        if !decode::shown(ring, &r.counts, n, &Filter::default()) {
            continue;
        }
        s += &decode::ring_counts(&ttrace_layouts::ring::ring_name(ring, n), &r.counts);
        match r.span {
            Some((a, b)) => s += &format!(", time {} .. {} s\n", secs(a), secs(b)),
            None => s += "\n",
        }
    }
    let tally = tally(&snap);
    s += &format!("total: {}\n", tally.line());
    s += &history(&snap);
    let st = &snap.status;
    s += &format!(
        "sizes: {} slots per ring ({} rings), aux {} bytes per ring, meta {} bytes\n",
        snap.version.ring_slots,
        snap.rings.len(),
        snap.version.aux_size,
        snap.version.meta_size,
    );
    // A device that is not of the default sizes keeps its own, for every program that
    // asks for none: said, with what the defaults would make.
    if let (false, Some(note)) = (
        dev.is_snapshot(),
        devttrace::config::other_sizes(snap.version.num_cpus, snap.version.ring_slots),
    ) {
        s += &format!("note: the device {note}\n");
    }
    s += &match st.clears {
        0 => "cleared: never\n".to_string(),
        n => format!("cleared: {n} times, last at {} s\n", secs(st.cleared_at)),
    };
    let c = &st.snapshots;
    s += &format!(
        "snapshots: {} triggers ({} merged, {} put off), {} saved, {} failed, {} files removed\n",
        c.triggers, c.merged, c.put_off, c.saved, c.failed, c.removed
    );
    if let Some(line) = st.switches.line() {
        s += &line;
        s += "\n";
    }
    s += &format!(
        "aux: {} of {} bytes in use ({} KiB per ring), {} records kept, {} incomplete; since creation {} bytes written, {} dropped\n",
        snap.aux.iter().map(|a| a.bytes).sum::<u64>(),
        snap.version.aux_size * snap.rings.len() as u64,
        snap.version.aux_size >> 10,
        snap.aux.iter().map(|a| a.records).sum::<u64>(),
        snap.aux.iter().map(|a| a.incomplete.len() as u64).sum::<u64>(),
        st.aux_bytes,
        st.aux_dropped,
    );
    let (records, _, half) =
        ttrace_layouts::meta::split(snap.version.max_tracepoints, snap.version.meta_size);
    s += &format!(
        "tracepoint records: {} of {} bytes in use, {} dropped\n",
        st.meta_used, records, st.meta_dropped,
    );
    s += &format!(
        "names: {} threads, {} processes named; {} of {} bytes in use, {} compactions reclaimed {}, {} dropped\n",
        snap.meta.threads.len(),
        snap.meta.processes.len(),
        st.names_used,
        half,
        st.names_generation,
        st.names_reclaimed,
        st.names_dropped,
    );
    s += &format!("mask: {:#x}\n", st.mask);
    s += &format!("tracepoints: {} defined\n", snap.meta.tracepoints.len());
    for t in &snap.meta.tracepoints {
        let on = if snap.enabled.get(t.id as usize) == Some(&true) {
            "on "
        } else {
            "off"
        };
        let events: u64 = (snap.rings.iter())
            .filter_map(|r| r.by_tracepoint.get(t.id as usize))
            .sum();
        let level = t.level();
        s += &format!(
            "  {on} {:>4} {} [{}{}] classes {:#x}: {} ({events} events)\n",
            t.id,
            t.name,
            t.role.label().unwrap_or(t.kind.name()),
            level.map_or(String::new(), |l| format!(" {}", l.name())),
            t.classes,
            t.format
        );
    }
    Ok(s)
}
