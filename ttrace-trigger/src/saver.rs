//! A program's own saver: triggers ask, a background thread saves.
//!
//! **Protocol.** [`Saver::trigger`] runs on the caller's thread and never waits for a save:
//! it counts the trigger in the device header, then, under the saver's lock, either merges
//! it into the snapshot already coming (one is *pending* until its `after` span has passed),
//! or claims a snapshot from the device's rate policy ([`devttrace::triggers`]: at most one
//! per interval across every process of the device) and makes it pending, or counts it
//! refused. Every trigger is thus counted once as merged, refused or granted, and every
//! granted one ends as a snapshot saved or failed (`ttrace-reader stats` shows the counts).
//! The thread, started at the first grant, waits until the pending snapshot is due, takes
//! it (a trigger from then on starts a new one, subject to the rate), copies the device and
//! applies the retention limits. A trigger while a copy is being made is not lost: it
//! claims its own snapshot, or is counted refused.

use crate::error::Result;
use crate::policy::Policy;
use crate::store::Store;
use devttrace::{Counter, Device};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;
use ttrace_layouts::snapshot::{Cause, CauseKind};

/// A snapshot saved.
#[derive(Clone, Debug)]
pub struct SaveInfo {
    /// Its file.
    pub path: PathBuf,
    /// What it holds.
    pub saved: devttrace::image::Saved,
    /// Why it was taken, as its header says.
    pub cause: Cause,
    /// Snapshot files the retention limits removed after it was saved.
    pub removed: u64,
}

/// What became of a trigger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Asked {
    /// A snapshot will be saved for it.
    Granted,
    /// A snapshot already coming covers it.
    Merged,
    /// The rate policy refused it: a snapshot was granted less than an interval ago.
    Refused,
    /// No snapshot can be taken (no device, or the settings are wrong: said once on
    /// standard error).
    Unavailable,
}

/// Saves the device `dev` into `store` now, on the calling thread, as `kind` for `reason`
/// (with the trigger's time `stamp`, 0 if none); counts it saved or failed, then applies
/// `policy`'s retention.
pub fn save_as(dev: &Device, store: &Store, policy: &Policy, mut cause: Cause) -> Result<SaveInfo> {
    let pid = std::process::id();
    cause.pid = pid;
    let kind = CauseKind::from_raw(cause.kind);
    let saved = store
        .path_for(devttrace::clock::realtime_ns(), kind, cause.reason(), pid)
        .and_then(|path| Ok((dev.save_because(&path, &cause)?, path)));
    let (saved, path) = match saved {
        Ok(s) => s,
        Err(e) => {
            dev.count_snapshots(Counter::Failed, 1);
            return Err(e);
        }
    };
    dev.count_snapshots(Counter::Saved, 1);
    // Saved whatever the retention finds: a directory it cannot list is said, not fatal.
    let removed = store
        .retain(policy.max_files, policy.max_bytes)
        .unwrap_or_else(|e| {
            eprintln!("ttrace: snapshot retention: {e}");
            0
        });
    dev.count_snapshots(Counter::Removed, removed);
    Ok(SaveInfo {
        path,
        saved,
        cause,
        removed,
    })
}

/// Saves the device `dev` into `store` now, on the calling thread (a snapshot of kind
/// [`CauseKind::Saved`], for `reason`), then applies `policy`'s retention. No rate policy
/// applies: the caller asked for this one.
pub fn save_now(dev: &Device, store: &Store, policy: &Policy, reason: &str) -> Result<SaveInfo> {
    save_as(dev, store, policy, Cause::new(CauseKind::Saved, reason))
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

#[derive(Default)]
struct State {
    pending: Option<Pending>,
    saving: bool,
    started: bool,
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

    /// The snapshot directory.
    pub fn store(&self) -> &Store {
        &self.shared.store
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.shared.policy
    }

    /// Asks for a snapshot of `kind` for `reason`, of a trigger at `stamp` (the device's
    /// clock: the time of the event that records it), saved once [`Policy::after`] has
    /// passed; never waits for the save (see the module's protocol).
    pub fn trigger(&self, kind: CauseKind, reason: &str, stamp: u64) -> Asked {
        let s = &*self.shared;
        s.dev.count_snapshots(Counter::Triggers, 1);
        let mut st = s.lock();
        if let Some(p) = &mut st.pending {
            p.cause.merged += 1;
            drop(st);
            s.dev.count_snapshots(Counter::Merged, 1);
            return Asked::Merged;
        }
        if !s
            .dev
            .claim_snapshot(stamp, s.policy.interval.as_nanos() as u64)
        {
            drop(st);
            s.dev.count_snapshots(Counter::Refused, 1);
            return Asked::Refused;
        }
        let mut cause = Cause::new(kind, reason);
        cause.trigger_stamp = stamp;
        cause.before_ns = s.policy.before.as_nanos() as u64;
        cause.after_ns = s.policy.after.as_nanos() as u64;
        st.pending = Some(Pending {
            cause,
            due: Instant::now() + s.policy.after,
        });
        if !st.started {
            st.started = true;
            let saver = self.clone();
            let spawned = std::thread::Builder::new()
                .name("ttrace-saver".into())
                .spawn(move || saver.run());
            if let Err(e) = spawned {
                st.started = false;
                st.pending = None;
                drop(st);
                s.dev.count_snapshots(Counter::Failed, 1);
                eprintln!("ttrace: no snapshot saver thread: {e}");
                return Asked::Unavailable;
            }
        }
        drop(st);
        s.wake.notify_one();
        Asked::Granted
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
        save_as(s.dev, &s.store, &s.policy, cause)
    }

    /// Waits until no snapshot is pending or being saved (a program about to exit calls it
    /// so that its last trigger's snapshot is written).
    pub fn settle(&self) {
        let s = &*self.shared;
        let mut st = s.lock();
        while st.pending.is_some() || st.saving {
            // Wakes the thread, in case it waits for a due time: it saves, then says so.
            s.wake.notify_one();
            st = s.idle.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The saver thread: saves each pending snapshot when due.
    fn run(self) {
        let s = &*self.shared;
        let mut st = s.lock();
        loop {
            let Some(due) = st.pending.as_ref().map(|p| p.due) else {
                st = s.wake.wait(st).unwrap_or_else(|p| p.into_inner());
                continue;
            };
            let now = Instant::now();
            if now < due {
                st = s
                    .wake
                    .wait_timeout(st, due - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
                continue;
            }
            let Some(p) = st.pending.take() else { continue };
            st.saving = true;
            drop(st);
            if let Err(e) = save_as(s.dev, &s.store, &s.policy, p.cause) {
                eprintln!("ttrace: snapshot not saved: {e}");
            }
            st = s.lock();
            st.saving = false;
            if st.pending.is_none() {
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
