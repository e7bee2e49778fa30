//! A whole trace captured from a device, and its text form: one line per event.

use crate::format::{parse, render, Piece};
use std::fmt::Write;
use ttrace_core::aux::{AuxRecord, AuxSnapshot};
use ttrace_core::meta::Metadata;
use ttrace_core::ring::{Event, RingSnapshot};
use ttrace_core::Device;
use ttrace_layouts::aux::AuxTag;
use ttrace_layouts::device::ClockSource;

/// One line of the trace.
#[derive(Clone, Debug)]
pub enum Item {
    /// A trace point, from ring `ring`.
    Point {
        /// The ring (CPU) it was read from.
        ring: usize,
        /// The event.
        event: Event,
    },
    /// A free-form message from the aux buffer.
    Info(AuxRecord),
}

impl Item {
    /// Timestamp of the item.
    pub fn timestamp(&self) -> u64 {
        match self {
            Item::Point { event, .. } => event.stamp,
            Item::Info(r) => r.timestamp,
        }
    }
}

/// Everything read from a device at one moment.
pub struct Trace {
    /// The device directory.
    pub dir: std::path::PathBuf,
    /// Clock of the device.
    pub clock: ClockSource,
    /// Ticks per second.
    pub hz: u64,
    /// Anchor: ticks...
    pub anchor_ticks: u64,
    /// ...and wall-clock ns at the same moment.
    pub anchor_realtime_ns: u64,
    /// Slots per ring.
    pub ring_slots: u64,
    /// Aux buffer bytes.
    pub aux_bytes: u64,
    /// Metadata.
    pub meta: Metadata,
    /// Aux snapshot.
    pub aux: AuxSnapshot,
    /// Per-ring snapshots (their events moved into `items`).
    pub rings: Vec<RingSnapshot>,
    /// All items in time order.
    pub items: Vec<Item>,
}

impl Trace {
    /// Captures a trace: every ring, the aux buffer, the metadata.
    pub fn capture(dev: &Device) -> Trace {
        let mut rings: Vec<RingSnapshot> = (0..dev.num_rings())
            .map(|i| dev.ring(i).snapshot())
            .collect();
        let mut items: Vec<Item> = Vec::new();
        for (ring, snap) in rings.iter_mut().enumerate() {
            items.extend(
                std::mem::take(&mut snap.events)
                    .into_iter()
                    .map(|event| Item::Point { ring, event }),
            );
        }
        let mut trace = Trace::with_items(dev, items, 0);
        trace.rings = rings;
        trace
    }

    /// A trace of the given ring items, plus the info messages at aux offsets `>= info_from`,
    /// with the device's current metadata and aux buffer.
    pub fn with_items(dev: &Device, mut items: Vec<Item>, info_from: u64) -> Trace {
        let aux = dev.aux_snapshot().unwrap_or_default();
        items.extend(
            aux.records
                .iter()
                .filter(|r| r.tag == AuxTag::Info as u16 && r.offset >= info_from)
                .cloned()
                .map(Item::Info),
        );
        items.sort_by_key(Item::timestamp);
        let h = dev.header();
        Trace {
            dir: dev.dir().to_path_buf(),
            clock: dev.clock(),
            hz: h.tsc_hz,
            anchor_ticks: h.anchor_tsc,
            anchor_realtime_ns: h.anchor_realtime_ns,
            ring_slots: h.ring_slots,
            aux_bytes: h.aux_size,
            meta: dev.metadata(),
            aux,
            rings: Vec::new(),
            items,
        }
    }

    /// Seconds (with nanoseconds) between the device's creation and `ticks`.
    pub fn seconds(&self, ticks: u64) -> f64 {
        (ticks as i128 - self.anchor_ticks as i128) as f64 / self.hz as f64
    }

    /// The header line.
    pub fn header_line(&self) -> String {
        let clock = match self.clock {
            ClockSource::Tsc => format!("tsc {:.3} MHz", self.hz as f64 / 1e6),
            ClockSource::MonotonicNs => "monotonic ns".to_string(),
        };
        format!(
            "# ttrace {}: {} cpus x {} slots, aux {} KiB, {} tracepoints, clock {clock}, created at {}",
            self.dir.display(),
            self.rings.len(),
            self.ring_slots,
            self.aux_bytes >> 10,
            self.meta.tracepoints.len(),
            utc(self.anchor_realtime_ns),
        )
    }

    /// The footer lines: what was lost, per CPU.
    pub fn footer_lines(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .rings
            .iter()
            .enumerate()
            .map(|(i, r)| {
                format!(
                    "# cpu{i}: {} entries, {} lost, {} incomplete, {} dropped",
                    r.committed,
                    r.lost + r.changed,
                    r.claimed,
                    r.dropped
                )
            })
            .collect();
        v.push(format!(
            "# aux: {} records kept, {} incomplete{}",
            self.aux.records.len(),
            self.aux.incomplete,
            if self.aux.corrupt {
                ", walk stopped at a damaged record"
            } else {
                ""
            }
        ));
        v
    }

    /// Writes the text lines of all items to `out`, one per line.
    pub fn write_lines(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        let pieces = self.pieces();
        let mut line = String::with_capacity(160);
        for item in &self.items {
            line.clear();
            self.format_item(&pieces, item, &mut line);
            out.write_all(line.as_bytes())?;
        }
        Ok(())
    }

    /// The parsed format of every tracepoint, by id.
    pub fn pieces(&self) -> Vec<Vec<Piece>> {
        self.meta
            .tracepoints
            .iter()
            .map(|t| parse(&t.format))
            .collect()
    }

    /// Appends the text line of `item` (newline included) to `line`.
    pub fn format_item(&self, pieces: &[Vec<Piece>], item: &Item, line: &mut String) {
        let (ctx, cpu) = match item {
            Item::Point { event, .. } => (event.ctx, event.type_word.cpu()),
            Item::Info(r) => (r.ctx, r.cpu),
        };
        let (pid, tid) = ((ctx >> 32) as u32, ctx as u32);
        let thread = self.meta.thread_name(pid, tid).unwrap_or("?");
        let _ = write!(
            line,
            "{:14.9} cpu{cpu} {pid}/{tid} ({thread}) ",
            self.seconds(item.timestamp())
        );
        match item {
            Item::Point { event, .. } => {
                let id = event.type_word.tracepoint() as usize;
                match (self.meta.tracepoints.get(id), pieces.get(id)) {
                    (Some(tp), Some(p)) => {
                        line.push_str(&tp.name);
                        line.push('(');
                        render(line, p, &event.args, &self.aux);
                        line.push(')');
                    }
                    _ => {
                        let _ = write!(line, "tracepoint#{id}({:x?})", event.args);
                    }
                }
                if event.continuation_lost {
                    line.push_str(" [continuation lost]");
                }
            }
            Item::Info(r) => {
                let _ = write!(line, "info({:?})", String::from_utf8_lossy(&r.bytes));
            }
        }
        line.push('\n');
    }
}

/// `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ` for nanoseconds since the Unix epoch.
pub fn utc(ns: u64) -> String {
    let (secs, nanos) = (ns / 1_000_000_000, ns % 1_000_000_000);
    let (days, rem) = (secs / 86400, secs % 86400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{nanos:09}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_formats_known_instants() {
        assert_eq!(super::utc(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(
            super::utc(1_700_000_000_123_456_789),
            "2023-11-14T22:13:20.123456789Z"
        );
        assert_eq!(
            super::utc(951_782_400_000_000_000),
            "2000-02-29T00:00:00.000000000Z"
        );
    }
}
