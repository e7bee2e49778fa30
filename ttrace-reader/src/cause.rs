//! Why a snapshot file was taken, as readers say it: the footer line of `dump`, `report`
//! and `stats`, and the object `report --json`, `snapshots --json` and the Chrome export's
//! `otherData` hold. A device, and a snapshot a person asked for, say nothing.

use crate::decode;
use crate::rules::approx;
use devttrace::{Clock, Reader};
use ttrace_layouts::snapshot::{Cause, CauseKind};

/// Why a snapshot file was taken ([`Reader::cause`]), ready to show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taken {
    /// Who took it, on what.
    pub kind: CauseKind,
    /// The reason given: a trigger's text, a rule, a panic's message.
    pub reason: String,
    /// The process that took it (0: unknown).
    pub pid: u32,
    /// When its trigger fired, as event times are shown: `(seconds, UTC)` (none for a
    /// snapshot saved at once).
    pub at: Option<(String, String)>,
    /// The window asked for: nanoseconds before the trigger.
    pub before_ns: u64,
    /// Nanoseconds after the trigger (the saver waited that long before it copied).
    pub after_ns: u64,
    /// Triggers besides the first that the snapshot covers.
    pub merged: u64,
    /// Where a rule matched an interval: when it began (the device's clock), and its
    /// length in ns; it ended at the trigger.
    pub interval: Option<(u64, u64)>,
    /// The trigger's stamp (0: none).
    trigger: u64,
    /// What the snapshot holds of the time around its trigger, where the reader that made
    /// this knows ([`Taken::holding`]).
    pub held: Option<Held>,
    /// The device's clock, to show the times above.
    clock: Clock,
}

/// The time a snapshot holds whole: every event from `from` (its *horizon*: the latest
/// oldest event of the rings that had lost entries, before which some ring's events are
/// gone; 0 when no ring had lost any) to `to` (its newest event).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    /// The horizon (`u64::MAX`: a ring lost every entry).
    pub from: u64,
    /// The newest event's stamp.
    pub to: u64,
}

impl Held {
    /// What rings hold, given for each whether it lost entries and its oldest and newest
    /// events' stamps (none: no event).
    pub fn of(rings: impl IntoIterator<Item = (bool, Option<(u64, u64)>)>) -> Held {
        let mut held = Held { from: 0, to: 0 };
        for (lost, span) in rings {
            if lost {
                held.from = held.from.max(span.map_or(u64::MAX, |(oldest, _)| oldest));
            }
            if let Some((_, newest)) = span {
                held.to = held.to.max(newest);
            }
        }
        held
    }

    /// What the rings of `view` hold.
    pub fn of_view(view: &devttrace::View<'_>) -> Held {
        Held::of_rings(&view.cpus)
    }

    /// What `rings` hold (each ring's events, or marks, in order).
    pub fn of_rings<T: devttrace::event::Kept>(rings: &[devttrace::RingSnapshot<T>]) -> Held {
        Held::of(rings.iter().map(|r| {
            let span = r.events.first().zip(r.events.last());
            (r.lost > 0, span.map(|(a, b)| (a.stamp(), b.stamp())))
        }))
    }

    /// What the rings counted in `counts` hold.
    pub fn of_counts(counts: &devttrace::Counts) -> Held {
        Held::of(counts.rings.iter().map(|r| (r.counts.lost > 0, r.span)))
    }
}

impl Taken {
    /// `cause`, its trigger's time read with `clock` (the device's).
    pub fn new(cause: &Cause, clock: &Clock) -> Taken {
        let at = (cause.trigger_stamp != 0).then(|| {
            (
                decode::seconds(clock, cause.trigger_stamp),
                decode::utc(clock.realtime_ns(cause.trigger_stamp)),
            )
        });
        Taken {
            kind: CauseKind::from_raw(cause.kind),
            reason: cause.reason().to_string(),
            pid: cause.pid,
            at,
            before_ns: cause.before_ns,
            after_ns: cause.after_ns,
            merged: cause.merged,
            interval: (cause.interval_stamp != 0 && cause.trigger_stamp != 0).then(|| {
                let ticks = cause.trigger_stamp.saturating_sub(cause.interval_stamp);
                (cause.interval_stamp, clock.ticks_to_ns(ticks))
            }),
            trigger: cause.trigger_stamp,
            held: None,
            clock: *clock,
        }
    }

    /// Why the snapshot file `dev` reads was taken (none for a device, or a file that does
    /// not say).
    pub fn of(dev: &Reader) -> Option<Taken> {
        Some(Taken::new(dev.cause()?, &dev.version().clock))
    }

    /// This, knowing what the snapshot holds (so that its line says the window it really
    /// holds, and whether the interval that matched is whole in it).
    pub fn holding(self, held: Held) -> Taken {
        Taken {
            held: Some(held),
            ..self
        }
    }

    /// Whether the matched interval is whole in the snapshot: none matched, or it is
    /// unknown what the snapshot holds, give `None`.
    pub fn interval_whole(&self) -> Option<bool> {
        let (begin, _) = self.interval?;
        let held = self.held?;
        Some(held.from <= begin && held.to >= self.trigger)
    }

    /// What the snapshot holds around the trigger, in ns: whole from its horizon (or the
    /// device's creation) to the trigger; and its newest event's distance from the trigger,
    /// after it (positive) or before it.
    fn around(&self) -> Option<(u64, i64)> {
        let held = self.held.filter(|_| self.trigger != 0)?;
        let from = held.from.max(self.clock.anchor_ticks);
        let before = self.clock.ticks_to_ns(self.trigger.saturating_sub(from));
        let last = self.clock.since_anchor_ns(held.to) - self.clock.since_anchor_ns(self.trigger);
        Some((before, last))
    }

    /// One line: `snapshot taken by trigger "slow request" (pid 4242) at 12.345678901
    /// (2026-11-24T10:15:12.345678901Z), window 1s before, 5ms after; 2 more triggers
    /// merged`.
    pub fn line(&self) -> String {
        let by = match self.kind {
            CauseKind::Saved => "the program's save",
            kind => kind.name(),
        };
        let mut s = format!("snapshot taken by {by} {:?}", self.reason);
        if self.pid != 0 {
            s += &format!(" (pid {})", self.pid);
        }
        if let Some((secs, utc)) = &self.at {
            s += &format!(" at {secs} ({utc})");
        }
        match (self.around(), self.held) {
            (Some((before, after)), Some(held)) if held.from != u64::MAX => {
                let whole_from = match held.from {
                    0 => "from the device's start".to_string(),
                    from => format!("whole from {}", decode::seconds(&self.clock, from)),
                };
                let last = match after {
                    a if a >= 0 => format!("{} after", approx(a as u64)),
                    b => format!("{} before", approx(b.unsigned_abs())),
                };
                s += &format!(
                    "; holds {} before it ({whole_from}), its last event {last}",
                    approx(before)
                );
                if before < self.before_ns {
                    s += &format!(" (asked {} before)", span(self.before_ns));
                }
            }
            (Some(_), Some(_)) => s += "; holds no whole time before it (a ring lost all)",
            _ if self.before_ns != 0 || self.after_ns != 0 => {
                s += &format!(
                    ", window asked {} before, {} after",
                    span(self.before_ns),
                    span(self.after_ns)
                );
            }
            _ => {}
        }
        if let Some((begin, ns)) = self.interval {
            let at = decode::seconds(&self.clock, begin);
            let what = format!("the matched interval ({} from {at})", approx(ns));
            match self.interval_whole() {
                Some(true) => s += &format!("; {what} is whole in it"),
                Some(false) => s += &format!("; {what} is NOT whole in it"),
                None => s += &format!("; {what}"),
            }
        }
        match self.merged {
            0 => {}
            1 => s += "; 1 more trigger merged",
            n => s += &format!("; {n} more triggers merged"),
        }
        s
    }

    /// As a JSON object: `kind`, `reason`, `pid`, `at` (seconds as event times show them)
    /// and `at_utc` (null for a snapshot saved at once), `before_ns`, `after_ns`, `merged`,
    /// and the [`line`](Taken::line) as `summary`.
    pub fn json(&self) -> serde_json::Value {
        let (at, at_utc) = match &self.at {
            Some((secs, utc)) => (Some(secs), Some(utc)),
            None => (None, None),
        };
        serde_json::json!({
            "kind": self.kind.name(),
            "reason": self.reason,
            "pid": self.pid,
            "at": at,
            "at_utc": at_utc,
            "before_ns": self.before_ns,
            "after_ns": self.after_ns,
            "merged": self.merged,
            "interval_begin": self.interval.map(|(b, _)| decode::seconds(&self.clock, b)),
            "interval_ns": self.interval.map(|(_, ns)| ns),
            "interval_whole": self.interval_whole(),
            "held_before_ns": self.around().map(|(b, _)| b),
            "last_event_after_ns": self.around().map(|(_, a)| a),
            "summary": self.line(),
        })
    }
}

/// Writes the footer line of the snapshot file `dev` reads, `# snapshot taken by ...`, if
/// it says why it was taken (what `dump` and `follow` of a snapshot end with), saying what
/// it holds where `held` is known.
pub fn footer(
    dev: &Reader,
    held: Option<Held>,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    match Taken::of(dev) {
        Some(t) => {
            let t = match held {
                Some(h) => t.holding(h),
                None => t,
            };
            writeln!(out, "# {}", t.line())
        }
        None => Ok(()),
    }
}

/// `ns` in the largest unit that shows it exactly: `5ms`, `1s`, `250us`, `17ns`.
fn span(ns: u64) -> String {
    match ns {
        0 => "0s".to_string(),
        n if n % 1_000_000_000 == 0 => format!("{}s", n / 1_000_000_000),
        n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{}us", n / 1_000),
        n => format!("{n}ns"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_reads_as_one_line() {
        // A 1 GHz clock anchored at 2026-11-24T10:15:00Z (1,795,515,300 s after the epoch): a tick is a nanosecond.
        let clock = Clock::new(
            ttrace_layouts::device::ClockSource::Tsc,
            1_000_000_000,
            0,
            1_795_515_300_000_000_000,
        );
        let mut cause = Cause::new(CauseKind::Trigger, "slow request");
        cause.pid = 4242;
        cause.trigger_stamp = 12_345_678_901;
        cause.before_ns = 1_000_000_000;
        cause.after_ns = 5_000_000;
        cause.merged = 2;
        let t = Taken::new(&cause, &clock);
        assert_eq!(
            t.line(),
            "snapshot taken by trigger \"slow request\" (pid 4242) at 12.345678901 \
             (2026-11-24T10:15:12.345678901Z), window asked 1s before, 5ms after; 2 more \
             triggers merged"
        );
        // Knowing what it holds: the real window, and the one asked where it is shorter.
        let held = Held {
            from: 12_345_678_901 - 84_700_000,
            to: 12_345_678_901 + 5_000_000,
        };
        assert_eq!(
            t.clone().holding(held).line(),
            "snapshot taken by trigger \"slow request\" (pid 4242) at 12.345678901 \
             (2026-11-24T10:15:12.345678901Z); holds 84.7ms before it (whole from \
             12.260978901), its last event 5.0ms after (asked 1s before); 2 more triggers \
             merged"
        );
        // A rule's interval: whole in it, or not.
        let mut rule = Cause::new(CauseKind::Rule, "latency work > 20ms: 31.3ms");
        rule.trigger_stamp = 2_000_000_000;
        rule.interval_stamp = 2_000_000_000 - 31_300_000;
        rule.before_ns = 1_000_000_000;
        let r = Taken::new(&rule, &clock);
        let whole = r.clone().holding(Held {
            from: 0,
            to: 2_005_000_000,
        });
        assert_eq!(whole.interval_whole(), Some(true));
        assert!(
            whole.line().ends_with(
                "holds 2.00s before it (from the device's start), its last event 5.0ms after; \
                 the matched interval (31.3ms from 1.968700000) is whole in it"
            ),
            "{}",
            whole.line()
        );
        let cut = r.holding(Held {
            from: 1_990_000_000,
            to: 2_005_000_000,
        });
        assert_eq!(cut.interval_whole(), Some(false));
        assert!(cut.line().contains("is NOT whole in it"), "{}", cut.line());
        assert_eq!(cut.json()["interval_whole"], false);
        let saved = Taken::new(&Cause::new(CauseKind::Saved, "slow request"), &clock);
        assert_eq!(
            saved.line(),
            "snapshot taken by the program's save \"slow request\""
        );
        assert_eq!(saved.json()["at"], serde_json::Value::Null);
        assert_eq!(span(250_000), "250us");
        assert_eq!(span(17), "17ns");
    }
}
