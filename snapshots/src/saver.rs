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
//! Two threads, started at the first grant, do the work. The *copier* copies the moment
//! when it happens: woken by a grant, it copies from the rings the window the snapshot
//! needs (`before` the trigger, or from a matched interval's begin if older), at once, into
//! a follower's copy of its own ([`devttrace::Follower::keep_copy_since`]), and follows the
//! device while the snapshot is pending, recording every event it reads, so that a
//! snapshot put off by the rate, or merged triggers after it, keep their moments however
//! fast the rings turn. When it is due (its `after` span past the trigger, or past the time
//! it was put off to) the copier takes it (a trigger from then on starts a new one, subject
//! to the rate) and cuts its window from the copy ([`devttrace::Follower::cut_window`]:
//! only the events and strings of the window, so a file's bytes follow its window, not the
//! device's size); it hands the cut to the *writer*, which makes its image
//! ([`devttrace::Reader::copy_shadow`]), names the file, writes it and applies the
//! retention limits. Neither a slow disk nor the making of an image delays a copy: the
//! rings keep moving while a file is made, and the copier goes on following. It follows on for an interval after a snapshot (the next trigger then
//! finds its window copied), then stops until the next grant. Memory: the copy holds a
//! ring's worth and at most half of [`Policy::max_bytes`] beyond (said once on standard
//! error when reached), its strings an aux buffer's worth and at most as much again, and
//! at most [`IN_FLIGHT`] cuts wait for the writer; past that the copier waits. A trigger
//! while a copy is made or written is not lost: it claims its own snapshot, or is merged
//! into one.

use crate::error::Result;
use devttrace::{Counter, Device, Follower, Grant};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;
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

/// Between two polls of the copier's follower while a snapshot is pending.
pub const ACTIVE: Duration = Duration::from_millis(2);

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
    /// The window's start (the device's clock): the copy holds what is stamped from then.
    since: u64,
    /// When the copy becomes a file (the device's clock): `after` past the trigger, or past
    /// the time the rate put it off to.
    due: u64,
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
        // Due `after` past the trigger's own time, or past the time it was put off to; its
        // window begins `before` the trigger, or at the matched interval's begin if that is
        // older, so that a latency rule's interval is whole.
        let clock = s.dev.reader().version().clock;
        let ticks =
            |d: std::time::Duration| clock.ns_to_ticks(d.as_nanos().min(u64::MAX as u128) as u64);
        let since = stamp
            .saturating_sub(ticks(s.policy.before))
            .min(begin.unwrap_or(u64::MAX));
        st.pending = Some(Pending {
            cause,
            since,
            due: from.saturating_add(ticks(s.policy.after)),
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

    /// The copier: at a granted trigger it copies the window before it from the rings at
    /// once (a [`Follower`] keeping a copy from the window's start), goes on following
    /// while the snapshot is pending, so that the moment is in its copy however fast the
    /// rings turn, and when it is due hands the window, cut from its copy, to the writer. It follows on for an interval after (the next trigger, likely then, finds
    /// its window already copied), then stops costing anything until the next grant.
    fn copy(self, writer: SyncSender<Cut>) {
        let s = &*self.shared;
        let dev: &'static devttrace::Reader = s.dev.reader();
        let clock = dev.version().clock;
        let ticks = |d: Duration| clock.ns_to_ticks(d.as_nanos().min(u64::MAX as u128) as u64);
        // The copy keeps what a window needs however late its file is due (put off by an
        // interval, its consequences, the events the follower holds back to order them),
        // in at most half the directory's limit beyond the rings' size, as `watch`'s.
        let keep = s.policy.before
            + s.policy.interval
            + s.policy.after
            + Duration::from_nanos(devttrace::DEFAULT_WINDOW_NS);
        let keep = keep.as_nanos().min(u64::MAX as u128) as u64;
        let margin = clock.ns_to_ticks(devttrace::DEFAULT_WINDOW_NS);
        let mut follower: Option<Follower<'static>> = None;
        let mut linger_until = 0;
        let mut said_full = false;
        let mut st = s.lock();
        loop {
            let Some(p) = st.pending.as_ref() else {
                if follower.is_some() && dev.now() < linger_until {
                    drop(st);
                    if let Some(f) = &mut follower {
                        match f.poll() {
                            Ok(poll) => f.recycle(poll),
                            Err(_) => follower = None,
                        }
                    }
                    std::thread::sleep(ACTIVE);
                    st = s.lock();
                    continue;
                }
                follower = None;
                if st.quiet() {
                    s.idle.notify_all();
                }
                st = s.wake.wait(st).unwrap_or_else(|p| p.into_inner());
                continue;
            };
            let (since, due, moment, hurry) = (p.since, p.due, p.cause.trigger_stamp, st.hurry);
            drop(st);
            // The window, copied now if no follower keeps it yet.
            let f = follower.get_or_insert_with(|| {
                let mut f = Follower::new(dev);
                f.keep_copy_since(keep, s.policy.max_bytes / 2, since.saturating_sub(margin));
                f
            });
            f.keep_moment(Some(moment));
            if hurry || dev.now() >= due {
                // The switches the kernel holds up to now, into the device first.
                ttrace_core::switches::flush();
            }
            let released = match f.poll() {
                Ok(poll) => {
                    let through = poll.released_through;
                    f.recycle(poll);
                    through
                }
                Err(e) => {
                    st = s.lock();
                    st.pending = None;
                    follower = None;
                    s.dev.count_snapshots(Counter::Failed, 1);
                    eprintln!("ttrace: snapshot not saved: following the device: {e}");
                    continue;
                }
            };
            if f.copy_is_full() && !said_full {
                said_full = true;
                eprintln!(
                    "ttrace: a snapshot's copy reached its memory bound ({} MiB, half of \
                     TTRACE_SNAPSHOT_BYTES): its window keeps what fits",
                    (s.policy.max_bytes / 2) >> 20
                );
            }
            let now = dev.now();
            if !(hurry || (now >= due && released >= due)) {
                let wait = clock.ticks_to_ns(due.saturating_sub(now));
                std::thread::sleep(
                    ACTIVE
                        .min(Duration::from_nanos(wait))
                        .max(Duration::from_micros(100)),
                );
                st = s.lock();
                continue;
            }
            st = s.lock();
            let Some(p) = st.pending.take() else { continue };
            st.copying = true;
            drop(st);
            let mut cause = p.cause;
            cause.pid = std::process::id();
            // The window cut from the copy (the writer makes its image while this thread
            // follows on: small rings turn faster than an image is made).
            let copied = f.cut_window(moment, p.since).map(|w| Box::new((cause, w)));
            f.keep_moment(None);
            linger_until = now.saturating_add(ticks(s.policy.interval));
            st = s.lock();
            st.copying = false;
            match copied {
                Some(copied) => {
                    st.writing += 1;
                    drop(st);
                    // The writer lives as long as this thread holds its sender.
                    let _ = writer.send(copied);
                    st = s.lock();
                }
                // The follower was made keeping a copy: it has one.
                None => {
                    s.dev.count_snapshots(Counter::Failed, 1);
                    eprintln!("ttrace: snapshot not saved: its follower kept no copy");
                }
            }
            if st.quiet() {
                s.idle.notify_all();
            }
        }
    }

    /// The writer: writes each copy into the store, then applies the retention limits.
    fn write(self, cuts: Receiver<Cut>) {
        let s = &*self.shared;
        for cut in cuts {
            let (cause, window) = *cut;
            let image = match s.dev.reader().copy_shadow(&cause, &window) {
                Ok(image) => image,
                Err(e) => {
                    s.dev.count_snapshots(Counter::Failed, 1);
                    eprintln!("ttrace: snapshot not saved: {e}");
                    self.written();
                    continue;
                }
            };
            drop(window);
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
            self.written();
        }
    }

    /// Says a copy handed to the writer is done with (written, or failed).
    fn written(&self) {
        let s = &*self.shared;
        let mut st = s.lock();
        st.writing -= 1;
        if st.quiet() {
            s.idle.notify_all();
        }
    }
}

/// What the copier hands the writer: a snapshot's cause and its window cut from the copy,
/// whose image the writer makes.
type Cut = Box<(Cause, devttrace::shadow::Shadow)>;

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held (in a save) leaves the state whole: the fields
        // are each set in one step.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}
