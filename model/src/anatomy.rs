//! Where an interval's time went: its *anatomy*, told from the kernel's context switches and
//! the runtime's wakes (issue 40), for [`crate::model`] to compute once for every reader.
//!
//! **The parts.** A call or a start/stop pair runs on one thread from its begin to its end;
//! a span instance lives from its `new` to its close and runs only in its polls. Its time is
//! cut into [`Part`]s that add up to it exactly:
//! - inside a call, a pair or a poll, the thread was on its CPU ([`Part::OnCpu`]), or off it:
//!   switched out while still runnable ([`Part::Preempted`]: another thread had the CPU) or
//!   because it waited in the kernel ([`Part::Blocked`]: a blocking call, in async code a
//!   blocking call inside a poll; from the switch out to the switch back in, so the wait for
//!   a CPU once the kernel woke it counts here too: the kernel tells no wake-up time). The thread's `sched_out` and `sched_in` events
//!   (`ttrace_core::switches`) say which, to the nanosecond;
//! - between two polls of an instance (and from its `new` to its first poll), it waited:
//!   on its future ([`Part::Idle`]) until it was woken, then in the runtime's queue
//!   ([`Part::Scheduled`]) until it was polled. Tokio says when a task was woken (its
//!   `tracing` instrumentation, recorded as `task_wake` events naming the task's span):
//!   an instance polled inside a task's poll was woken when that task was;
//! - what the trace cannot tell is [`Part::Unknown`], never shared out by a guess: time in a
//!   poll of a thread whose switches are not known (not recorded, refused, beyond the bound,
//!   records lost, or before the first switch of the thread the trace holds: the `sched_in`
//!   written when the thread began to be observed, unless the ring lost it), time between
//!   polls with no wake known, and the time after the last poll.
//!
//! **Why a thread's switches are known from its first one on.** The process records every
//! switch of a thread it observes, from the thread's first event, where it also records a
//! `sched_in` for it (the thread is on its CPU then); the drain writes the switches into the
//! device stamped when they happened. So once the trace holds one switch of a thread, it
//! holds all of its later ones, unless the kernel's buffer overflowed (a `sched_lost`
//! event: unknown until the next switch) or the reader found events lost (a gap: the same).
//! An interval is measured only if its thread's switches were known when it began and stayed
//! known to its end (each mark keeps an epoch that each loss moves on).

use devttrace::meta::TracepointInfo;
use ttrace_layouts::device::{
    CLASS_MESSAGES, SWITCH_IN_NAME, SWITCH_LOST_NAME, SWITCH_OUT_NAME, WAKE_NAME,
};

/// A part of an interval's time (see the module's documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Part {
    /// On its CPU, inside a call, pair or poll.
    OnCpu,
    /// Off its CPU though runnable (another thread had it), inside a call, pair or poll.
    Preempted,
    /// Off its CPU waiting in the kernel, inside a call, pair or poll.
    Blocked,
    /// Woken, waiting in the runtime's queue to be polled.
    Scheduled,
    /// Waiting on its future, not yet woken.
    Idle,
    /// What the trace cannot tell.
    Unknown,
}

impl Part {
    /// Every part, in the order readers list them.
    pub const ALL: [Part; 6] = [
        Part::OnCpu,
        Part::Preempted,
        Part::Blocked,
        Part::Scheduled,
        Part::Idle,
        Part::Unknown,
    ];

    /// How readers and rules name it: `on_cpu`, `preempted`, `blocked`, `scheduled`, `idle`,
    /// `unknown`.
    ///
    /// ```
    /// use ttrace_model::anatomy::Part;
    /// assert_eq!(Part::Blocked.name(), "blocked");
    /// assert_eq!(Part::from_name("scheduled"), Some(Part::Scheduled));
    /// assert_eq!(Part::from_name("asleep"), None);
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            Part::OnCpu => "on_cpu",
            Part::Preempted => "preempted",
            Part::Blocked => "blocked",
            Part::Scheduled => "scheduled",
            Part::Idle => "idle",
            Part::Unknown => "unknown",
        }
    }

    /// The part named `name` ([`Part::name`]).
    pub fn from_name(name: &str) -> Option<Part> {
        Part::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// An interval's time, cut into its parts, in the device's ticks.
///
/// ```
/// use ttrace_model::anatomy::{Part, Parts};
/// let mut p = Parts::default();
/// p.add(Part::OnCpu, 3);
/// p.add(Part::Blocked, 17);
/// assert_eq!((p.get(Part::Blocked), p.total()), (17, 20));
/// assert_eq!(p.dominant(), Some(Part::Blocked));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Parts([u64; 6]);

impl Parts {
    /// An interval of `ticks` the trace can tell nothing of: all [`Part::Unknown`].
    pub fn unknown(ticks: u64) -> Parts {
        let mut p = Parts::default();
        p.add(Part::Unknown, ticks);
        p
    }

    /// The ticks of part `p`.
    pub fn get(&self, p: Part) -> u64 {
        self.0[p as usize]
    }

    /// Adds `ticks` to part `p`.
    pub fn add(&mut self, p: Part, ticks: u64) {
        self.0[p as usize] = self.0[p as usize].saturating_add(ticks);
    }

    /// Adds every part of `other`.
    pub fn add_all(&mut self, other: &Parts) {
        for p in Part::ALL {
            self.add(p, other.get(p));
        }
    }

    /// The sum of the parts: the interval's length.
    pub fn total(&self) -> u64 {
        self.0.iter().fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// The largest part (the first of [`Part::ALL`] among equals); `None` for an empty
    /// interval.
    pub fn dominant(&self) -> Option<Part> {
        let top = Part::ALL
            .into_iter()
            .max_by_key(|&p| (self.get(p), 6 - p as usize))?;
        (self.get(top) > 0).then_some(top)
    }

    /// Each part and its ticks, in [`Part::ALL`]'s order.
    pub fn iter(&self) -> impl Iterator<Item = (Part, u64)> + '_ {
        Part::ALL.into_iter().map(|p| (p, self.get(p)))
    }

    /// The parts in another unit: `to` converts a length of ticks (the device's clock to
    /// nanoseconds). Each part is the difference of its running sum's conversion and the
    /// previous one's, so that the parts still add up to the whole's conversion.
    ///
    /// ```
    /// use ttrace_model::anatomy::{Part, Parts};
    /// let mut p = Parts::default();
    /// p.add(Part::OnCpu, 1);
    /// p.add(Part::Idle, 1);
    /// let ns = p.scaled(|t| t * 10 / 4);
    /// assert_eq!((ns.get(Part::OnCpu), ns.get(Part::Idle), ns.total()), (2, 3, 5));
    /// ```
    pub fn scaled(&self, to: impl Fn(u64) -> u64) -> Parts {
        let (mut out, mut sum, mut done) = (Parts::default(), 0u64, 0u64);
        for (p, t) in self.iter() {
            sum = sum.saturating_add(t);
            let now = to(sum);
            out.add(p, now.saturating_sub(done));
            done = now;
        }
        out
    }

    /// Whether any part but [`Part::Unknown`] was measured.
    pub fn known(&self) -> bool {
        self.total() > self.get(Part::Unknown)
    }
}

/// What the model must know of a built-in tracepoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Builtin {
    /// A thread left its CPU (args: preempted, at).
    Out,
    /// A thread came back (args: at).
    In,
    /// A thread's switch records were lost.
    Lost,
    /// A task was woken (args: its span's id).
    Wake,
}

impl Builtin {
    /// Which built-in tracepoint `t` is, if any: by name, among ttrace's own class.
    pub(crate) fn of(t: &TracepointInfo) -> Option<Builtin> {
        if t.classes & CLASS_MESSAGES == 0 && t.name != WAKE_NAME {
            return None;
        }
        match t.name.as_str() {
            SWITCH_OUT_NAME => Some(Builtin::Out),
            SWITCH_IN_NAME => Some(Builtin::In),
            SWITCH_LOST_NAME => Some(Builtin::Lost),
            WAKE_NAME => Some(Builtin::Wake),
            _ => None,
        }
    }
}

/// Where a thread stood when an interval of it began: what its end is measured against.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Mark {
    /// The thread's epoch then, if its switches were known.
    epoch: Option<u32>,
    /// Its time off the CPU up to then: preempted, blocked.
    off: [u64; 2],
    /// When.
    at: u64,
}

/// A thread's time off its CPU, as its switch events tell it (see the module's
/// documentation).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Cpu {
    /// Whether its switches are known now.
    known: bool,
    /// One more at each loss of its switches.
    epoch: u32,
    /// Off its CPU since then, preempted (`true`) or blocked.
    out: Option<(u64, bool)>,
    /// Its time off the CPU in the intervals that ended: preempted, blocked.
    off: [u64; 2],
    /// On its CPU since then (its last `in`), if known.
    on: Option<u64>,
}

/// A stretch of a thread's time in one state, as its switches tell it: on its CPU
/// ([`Part::OnCpu`]), or off it ([`Part::Preempted`], [`Part::Blocked`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stretch {
    /// The state.
    pub state: Part,
    /// When it began (the device's clock).
    pub from: u64,
    /// When it ended.
    pub to: u64,
}

impl Mark {
    /// An interval beginning at `at` on a thread whose switches are not known.
    pub(crate) fn unknown(at: u64) -> Mark {
        Mark {
            epoch: None,
            off: [0; 2],
            at,
        }
    }
}

impl Cpu {
    /// The thread left its CPU at `at`: the stretch on it that ended, if known.
    pub(crate) fn switch_out(&mut self, at: u64, preempted: bool) -> Option<Stretch> {
        if let Some((from, p)) = self.out {
            // An `in` went missing: what came between is not known.
            self.off[!p as usize] += at.saturating_sub(from);
        }
        self.out = Some((at, preempted));
        self.known = true;
        let from = self.on.take()?;
        Some(Stretch {
            state: Part::OnCpu,
            from,
            to: at.max(from),
        })
    }

    /// The thread came back at `at`: the stretch off its CPU that ended, if known.
    pub(crate) fn switch_in(&mut self, at: u64) -> Option<Stretch> {
        self.known = true;
        self.on = Some(at);
        let (from, p) = self.out.take()?;
        self.off[!p as usize] += at.saturating_sub(from);
        Some(Stretch {
            state: if p { Part::Preempted } else { Part::Blocked },
            from,
            to: at.max(from),
        })
    }

    /// Its switches are not known from here until its next one.
    pub(crate) fn lose(&mut self) {
        self.known = false;
        self.out = None;
        self.on = None;
        self.epoch = self.epoch.wrapping_add(1);
    }

    /// Its time off the CPU up to `at`.
    fn off_at(&self, at: u64) -> [u64; 2] {
        let mut off = self.off;
        if let Some((from, p)) = self.out {
            off[!p as usize] += at.saturating_sub(from);
        }
        off
    }

    /// Where the thread stands at `at`, an interval of it beginning.
    pub(crate) fn mark(&self, at: u64) -> Mark {
        Mark {
            epoch: self.known.then_some(self.epoch),
            off: self.off_at(at),
            at,
        }
    }

    /// The parts of the interval from `begin` to `at` (the thread's time on and off its CPU,
    /// or unknown).
    #[cfg(test)]
    fn parts(&self, begin: &Mark, at: u64) -> Parts {
        between(begin, &self.mark(at))
    }
}

/// The parts of a thread's interval from `begin` to `end` (its time on and off its CPU, or
/// unknown where its switches were not known throughout).
pub(crate) fn between(begin: &Mark, end: &Mark) -> Parts {
    let mut parts = Parts::default();
    let len = end.at.saturating_sub(begin.at);
    if begin.epoch.is_none() || begin.epoch != end.epoch {
        parts.add(Part::Unknown, len);
        return parts;
    }
    let preempted = end.off[0].saturating_sub(begin.off[0]).min(len);
    let blocked = end.off[1].saturating_sub(begin.off[1]).min(len - preempted);
    parts.add(Part::Preempted, preempted);
    parts.add(Part::Blocked, blocked);
    parts.add(Part::OnCpu, len - preempted - blocked);
    parts
}

/// The parts of a wait from `since` to `polled`: idle until the wake `woken`, scheduled from
/// then (from `since` if woken before it); unknown without a wake.
pub(crate) fn wait(since: u64, woken: Option<u64>, polled: u64) -> Parts {
    let mut parts = Parts::default();
    match woken {
        Some(w) if w <= polled => {
            let w = w.max(since);
            parts.add(Part::Idle, w.saturating_sub(since));
            parts.add(Part::Scheduled, polled - w);
        }
        _ => parts.add(Part::Unknown, polled.saturating_sub(since)),
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_off_its_cpu_is_preempted_or_blocked_to_the_tick() {
        let mut c = Cpu::default();
        // Unknown until its first switch.
        assert_eq!(c.parts(&c.mark(0), 10).get(Part::Unknown), 10);
        c.switch_in(5);
        let m = c.mark(10);
        c.switch_out(12, true);
        c.switch_in(20);
        c.switch_out(25, false);
        let p = c.parts(&m, 40);
        assert_eq!(
            (
                p.get(Part::OnCpu),
                p.get(Part::Preempted),
                p.get(Part::Blocked)
            ),
            (7, 8, 15)
        );
        assert_eq!(p.total(), 30);
        // A loss makes an interval begun before it unknown, and the thread unknown until
        // its next switch.
        let m = c.mark(40);
        c.lose();
        assert_eq!(c.parts(&m, 50).get(Part::Unknown), 10);
        assert_eq!(c.parts(&c.mark(50), 60).get(Part::Unknown), 10);
        c.switch_in(60);
        assert_eq!(c.parts(&c.mark(61), 70).get(Part::OnCpu), 9);
    }

    #[test]
    fn a_wait_is_idle_until_woken_then_scheduled() {
        let p = wait(10, Some(14), 30);
        assert_eq!((p.get(Part::Idle), p.get(Part::Scheduled)), (4, 16));
        // Woken before the wait began (during its last poll): scheduled throughout.
        assert_eq!(wait(10, Some(3), 30).get(Part::Scheduled), 20);
        assert_eq!(wait(10, None, 30).get(Part::Unknown), 20);
        assert_eq!(Parts::default().dominant(), None);
    }
}
