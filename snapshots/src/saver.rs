//! A program's own saver: triggers ask, a background thread saves.
//!
//! **Protocol.** [`Saver::trigger`] runs on the caller's thread and never waits for a save:
//! it counts the trigger in the device header, then, under the saver's lock, either merges
//! it into the snapshot already coming (one is *pending* until it is due), or claims a
//! snapshot from the device's rate policy ([`devttrace::triggers`]: at most one per
//! interval across every process of the device) and makes it pending: due its `after` span
//! past the trigger, or, put off to an interval after the last snapshot, its `after` span
//! past then (it holds the trigger's moment if the rings keep an interval). A trigger that
//! a snapshot granted for a later time covers is counted merged. Every trigger is thus
//! counted once as merged or granted (some of those put off), and every granted one ends as
//! a snapshot saved or failed (`ttrace-reader stats` shows the counts).
//!
//! Two threads, started at the first grant, do the work. The *copier* waits until the
//! pending snapshot is due, takes it (a trigger from then on starts a new one, subject to
//! the rate) and copies the device into memory at once ([`devttrace::image::Image`]); it
//! hands the copy to the *writer*, which names the file, writes it and applies the
//! retention limits. A slow disk thus never delays a copy past its moment: the rings keep
//! moving while a file is written, and the next due snapshot is copied on time. At most
//! [`IN_FLIGHT`] copies wait for the writer (memory: that many devices' used bytes); past
//! that the copier waits. A trigger while a copy is made or written is not lost: it claims
//! its own snapshot, or is merged into one.

use crate::error::Result;
use devttrace::{Counter, Device, Grant};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;
use ttrace_layouts::snapshot::{Cause, CauseKind};
use ttrace_reader::policy::Policy;
use ttrace_reader::store::{kept, moment, name, save_as, SaveInfo, Store};

/// What became of a trigger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Asked {
    /// A snapshot will be saved for it.
    Granted,
    /// A snapshot already coming covers it.
    Merged,
    /// A snapshot will be saved for it, put off by the rate policy to an interval after the
    /// last one (granted less than an interval before it).
    PutOff,
    /// No snapshot can be taken (no device, or the settings are wrong: said once on
    /// standard error).
    Unavailable,
}

/// A program's saver for one device (cheap to clone: clones share it).
#[derive(Clone)]
pub struct Saver {
    shared: Arc<Shared>,
}

struct Shared {
    dev: &'static Device,
    store: Store,
    policy: Policy,
    state: Mutex<State>,
    /// Signalled when a snapshot becomes pending.
    wake: Condvar,
    /// Signalled when the saver has nothing pending or in progress.
    idle: Condvar,
}

/// Copies made and not yet written that the copier may hand to the writer before it
/// waits.
pub const IN_FLIGHT: usize = 2;

#[derive(Default)]
struct State {
    pending: Option<Pending>,
    /// A copy is being made.
    copying: bool,
    /// Copies handed to the writer and not yet written.
    writing: usize,
    started: bool,
    /// Someone waits for the pending snapshot ([`Saver::settle`]): it is copied now, not
    /// when due (a snapshot put off may be due an interval later).
    hurry: bool,
}

impl State {
    fn quiet(&self) -> bool {
        self.pending.is_none() && !self.copying && self.writing == 0
    }
}

struct Pending {
    cause: Cause,
    due: Instant,
}

impl Saver {
    /// A saver of `dev` into `store` by `policy`; its thread starts at the first granted
    /// trigger.
    pub fn new(dev: &'static Device, store: Store, policy: Policy) -> Saver {
        Saver {
            shared: Arc::new(Shared {
                dev,
                store,
                policy,
                state: Mutex::new(State::default()),
                wake: Condvar::new(),
                idle: Condvar::new(),
            }),
        }
    }

    /// The device it saves.
    pub fn device(&self) -> &'static Device {
        self.shared.dev
    }

    /// The snapshot directory.
    pub fn store(&self) -> &Store {
        &self.shared.store
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.shared.policy
    }

    /// Asks for a snapshot of `kind` for `reason`, of a trigger at `stamp` (the device's
    /// clock: the time of the event that records it), copied once [`Policy::after`] has
    /// passed since `stamp`; never waits for the save (see the module's protocol).
    pub fn trigger(&self, kind: CauseKind, reason: &str, stamp: u64) -> Asked {
        self.trigger_interval(kind, reason, None, stamp)
    }

    /// [`Saver::trigger`] for a match of an interval that began at `begin` and ended at
    /// `stamp` (a latency rule's): the snapshot's cause names the interval, so that its
    /// readers say whether it holds it whole.
    pub fn trigger_interval(
        &self,
        kind: CauseKind,
        reason: &str,
        begin: Option<u64>,
        stamp: u64,
    ) -> Asked {
        let s = &*self.shared;
        s.dev.count_snapshots(Counter::Triggers, 1);
        let mut st = s.lock();
        if let Some(p) = &mut st.pending {
            p.cause.merged += 1;
            drop(st);
            s.dev.count_snapshots(Counter::Merged, 1);
            return Asked::Merged;
        }
        let grant = s
            .dev
            .claim_snapshot(stamp, s.policy.interval.as_nanos() as u64);
        let (asked, from) = match grant {
            Grant::Covered => {
                drop(st);
                s.dev.count_snapshots(Counter::Merged, 1);
                return Asked::Merged;
            }
            Grant::Now => (Asked::Granted, stamp),
            Grant::At(at) => (Asked::PutOff, at),
        };
        let mut cause = Cause::new(kind, reason);
        cause.trigger_stamp = stamp;
        cause.interval_stamp = begin.unwrap_or(0);
        cause.before_ns = s.policy.before.as_nanos() as u64;
        cause.after_ns = s.policy.after.as_nanos() as u64;
        // Due `after` past the trigger's own time (a trigger made late, a rule that matched
        // an event some time after it was written, is copied that much sooner), or past
        // the time it was put off to.
        let clock = s.dev.reader().version().clock;
        let now = s.dev.mapping().now();
        let after = match from.checked_sub(now) {
            Some(ahead) => {
                s.policy.after + std::time::Duration::from_nanos(clock.ticks_to_ns(ahead))
            }
            None => s
                .policy
                .after
                .saturating_sub(std::time::Duration::from_nanos(
                    clock.ticks_to_ns(now - from),
                )),
        };
        st.pending = Some(Pending {
            cause,
            due: Instant::now() + after,
        });
        if !st.started {
            st.started = true;
            if let Err(e) = self.start() {
                st.started = false;
                st.pending = None;
                drop(st);
                s.dev.count_snapshots(Counter::Failed, 1);
                eprintln!("ttrace: no snapshot saver thread: {e}");
                return Asked::Unavailable;
            }
        }
        drop(st);
        if asked == Asked::PutOff {
            s.dev.count_snapshots(Counter::PutOff, 1);
        }
        // The one system call of a granted trigger (a futex wake: about 13 µs on the caller
        // on a 2-vCPU VM, `docs/BENCHMARKS.md`): a copier that looked for grants by itself
        // instead, every `after`, cost an idle process 0.6 % of a CPU there, for ever.
        s.wake.notify_one();
        asked
    }

    /// Saves at once on the calling thread, as `kind` for `reason` (a panic's snapshot: the
    /// process may end as soon as this returns). Counts a trigger; a snapshot pending is
    /// merged into this one. No rate policy applies.
    pub fn save_at_once(&self, kind: CauseKind, reason: &str, stamp: u64) -> Result<SaveInfo> {
        let s = &*self.shared;
        s.dev.count_snapshots(Counter::Triggers, 1);
        let mut cause = Cause::new(kind, reason);
        cause.trigger_stamp = stamp;
        cause.before_ns = s.policy.before.as_nanos() as u64;
        // A pending snapshot's triggers are covered by this one (its thread may never run).
        if let Ok(mut st) = s.state.try_lock() {
            if let Some(p) = st.pending.take() {
                cause.merged = p.cause.merged + 1;
                s.dev.count_snapshots(Counter::Merged, 1);
                s.idle.notify_all();
            }
        }
        // The switches the kernel holds up to now, into the device first.
        ttrace_core::switches::try_flush();
        Ok(save_as(s.dev, &s.store, &s.policy, cause)?)
    }

    /// Waits until no snapshot is pending, being copied or being written (a program about
    /// to exit calls it so that its last trigger's snapshot is written): a pending one is
    /// copied at once, due or not.
    pub fn settle(&self) {
        let s = &*self.shared;
        let mut st = s.lock();
        while !st.quiet() {
            // Wakes the copier, in case it waits for a due time: it copies now, then says so.
            st.hurry = true;
            s.wake.notify_one();
            st = s.idle.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.hurry = false;
    }

    /// Starts the copier and the writer.
    fn start(&self) -> std::io::Result<()> {
        let (send, receive) = sync_channel(IN_FLIGHT);
        let writer = self.clone();
        std::thread::Builder::new()
            .name("ttrace-saver-write".into())
            .spawn(move || writer.write(receive))?;
        let copier = self.clone();
        std::thread::Builder::new()
            .name("ttrace-saver".into())
            .spawn(move || copier.copy(send))?;
        Ok(())
    }

    /// The copier: copies each pending snapshot when due, and hands it to the writer.
    fn copy(self, writer: SyncSender<devttrace::image::Image>) {
        let s = &*self.shared;
        let mut st = s.lock();
        loop {
            let Some(due) = st.pending.as_ref().map(|p| p.due) else {
                st = s.wake.wait(st).unwrap_or_else(|p| p.into_inner());
                continue;
            };
            let now = Instant::now();
            if now < due && !st.hurry {
                st = s
                    .wake
                    .wait_timeout(st, due - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
                continue;
            }
            let Some(p) = st.pending.take() else { continue };
            st.copying = true;
            drop(st);
            let mut cause = p.cause;
            cause.pid = std::process::id();
            // The switches the kernel holds up to now, into the device first.
            ttrace_core::switches::flush();
            let image = s.dev.reader().copy_because(&cause);
            st = s.lock();
            st.copying = false;
            match image {
                Ok(image) => {
                    st.writing += 1;
                    drop(st);
                    // The writer lives as long as this thread holds its sender.
                    let _ = writer.send(image);
                    st = s.lock();
                }
                Err(e) => {
                    s.dev.count_snapshots(Counter::Failed, 1);
                    eprintln!("ttrace: snapshot not saved: {e}");
                }
            }
            if st.quiet() {
                s.idle.notify_all();
            }
        }
    }

    /// The writer: writes each copy into the store, then applies the retention limits.
    fn write(self, copies: Receiver<devttrace::image::Image>) {
        let s = &*self.shared;
        for image in copies {
            let cause = *image.cause();
            let at = moment(
                &s.dev.reader().version().clock,
                &cause,
                image.taken_realtime_ns(),
            );
            let saved = name(&s.store, at, &cause).and_then(|path| Ok((image.write(&path)?, path)));
            drop(image);
            if let Err(e) = kept(s.dev, &s.store, &s.policy, saved, cause) {
                eprintln!("ttrace: snapshot not saved: {e}");
            }
            let mut st = s.lock();
            st.writing -= 1;
            if st.quiet() {
                s.idle.notify_all();
            }
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held (in a save) leaves the state whole: the fields
        // are each set in one step.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}
