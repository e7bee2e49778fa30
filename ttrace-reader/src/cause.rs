//! Why a snapshot file was taken, as readers say it: the footer line of `dump`, `report`
//! and `stats`, and the object `report --json`, `snapshots --json` and the Chrome export's
//! `otherData` hold. A device, and a snapshot a person asked for, say nothing.

use crate::decode;
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
        }
    }

    /// Why the snapshot file `dev` reads was taken (none for a device, or a file that does
    /// not say).
    pub fn of(dev: &Reader) -> Option<Taken> {
        Some(Taken::new(dev.cause()?, &dev.version().clock))
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
        if self.before_ns != 0 || self.after_ns != 0 {
            s += &format!(
                ", window {} before, {} after",
                span(self.before_ns),
                span(self.after_ns)
            );
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
            "summary": self.line(),
        })
    }
}

/// Writes the footer line of the snapshot file `dev` reads, `# snapshot taken by ...`, if
/// it says why it was taken (what `dump` and `follow` of a snapshot end with).
pub fn footer(dev: &Reader, out: &mut impl std::io::Write) -> std::io::Result<()> {
    match Taken::of(dev) {
        Some(t) => writeln!(out, "# {}", t.line()),
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
        let t = Taken {
            kind: CauseKind::Trigger,
            reason: "slow request".into(),
            pid: 4242,
            at: Some((
                "12.345678901".into(),
                "2026-11-24T10:15:12.345678901Z".into(),
            )),
            before_ns: 1_000_000_000,
            after_ns: 5_000_000,
            merged: 2,
        };
        assert_eq!(
            t.line(),
            "snapshot taken by trigger \"slow request\" (pid 4242) at 12.345678901 \
             (2026-11-24T10:15:12.345678901Z), window 1s before, 5ms after; 2 more triggers merged"
        );
        let saved = Taken {
            kind: CauseKind::Saved,
            at: None,
            before_ns: 0,
            after_ns: 0,
            merged: 0,
            ..t
        };
        assert_eq!(
            saved.line(),
            "snapshot taken by the program's save \"slow request\" (pid 4242)"
        );
        assert_eq!(saved.json()["at"], serde_json::Value::Null);
        assert_eq!(span(250_000), "250us");
        assert_eq!(span(17), "17ns");
    }
}
