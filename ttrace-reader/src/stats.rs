//! The text of `ttrace-reader stats`: per-ring counts and time spans, the totals `dump`
//! shows, the sizes and use of the device's areas, the mask and the tracepoints. A mounted
//! device serves the same text as its `stats` file.

use crate::decode;
use crate::merge::{Filter, Merge};
use devttrace::{Reader, View};

/// What `ttrace-reader stats` prints of `dev` (and a mounted device's `stats` file holds).
pub(crate) fn text(dev: &Reader) -> devttrace::Result<String> {
    let snap = View::of(dev, 0)?;
    let clock = snap.version.clock;
    let secs = |t: u64| {
        let ns = clock.since_anchor_ns(t);
        format!(
            "{}{}.{:09}",
            if ns < 0 { "-" } else { "" },
            ns.unsigned_abs() / 1_000_000_000,
            ns.unsigned_abs() % 1_000_000_000
        )
    };
    let mut s = decode::header_line(&snap) + "\n";
    let n = snap.version.num_cpus;
    for (ring, r) in snap.cpus.iter().enumerate() {
        if !decode::shown(ring, r, n, &Filter::default()) {
            continue;
        }
        s += &decode::ring_counts(&ttrace_layouts::ring::ring_name(ring, n), r);
        match (r.events.first(), r.events.last()) {
            (Some(a), Some(b)) => {
                s += &format!(", time {} .. {} s\n", secs(a.stamp), secs(b.stamp))
            }
            _ => s += "\n",
        }
    }
    // The totals `dump` shows: every event read, as it would print them.
    let mut tally = decode::Tally::default();
    let mut items = Merge::view(&snap, &Filter::default());
    let counted = items.try_for_each_ref(|item| {
        tally.count(item);
        Ok::<(), std::convert::Infallible>(())
    });
    let Ok(()) = counted;
    tally.strings_lost = items.strings_lost();
    tally.losses(&snap, &Filter::default());
    s += &format!("total: {}\n", tally.line());
    let st = &snap.status;
    s += &format!(
        "sizes: {} slots per ring ({} rings), aux {} bytes per ring, meta {} bytes\n",
        snap.version.ring_slots,
        snap.cpus.len(),
        snap.version.aux_size,
        snap.version.meta_size,
    );
    s += &match st.clears {
        0 => "cleared: never\n".to_string(),
        n => format!("cleared: {n} times, last at {} s\n", secs(st.cleared_at)),
    };
    s += &format!(
        "aux: {} of {} bytes in use ({} KiB per ring), {} records kept, {} incomplete; since creation {} bytes written, {} dropped\n",
        snap.aux.bytes_in_use(),
        snap.version.aux_size * snap.cpus.len() as u64,
        snap.version.aux_size >> 10,
        snap.aux.records().count(),
        snap.aux.incomplete(),
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
        s += &format!(
            "  {on} {:>4} {} [{}] classes {:#x}: {}\n",
            t.id,
            t.name,
            t.kind.name(),
            t.classes,
            t.format
        );
    }
    Ok(s)
}
