//! The snapshot rules installed in the device with `ttrace-reader ctl on RULE`, applied by
//! a program's own saver: no watcher needs to run.
//!
//! **Which side evaluates.** A rule given to `watch --on` is evaluated by the watcher's
//! process; a rule installed with `ctl on` is stored in the device header (as text, beside
//! the enable/disable rules) and evaluated by every program that called [`start`] (with
//! `ttrace_snapshots::apply_snapshot_rules()`), in a thread of its own: it follows the device as
//! `watch` does (a [`Follower`] that reads only what is new, given to a [`Matcher`]) and
//! turns each match into a [`Saver::trigger`] of kind [`CauseKind::Rule`], so the window,
//! rate, retention and counts are the saver's. Several programs sharing a device each follow
//! it; the device's rate policy grants one snapshot per interval among them (a match sooner
//! put off to an interval after the last, or covered by one granted for a later time).
//!
//! The thread costs nothing while no rule is installed: it reads the device's control
//! generation every [`IDLE`] and follows nothing. A change of the rules (a new generation
//! with other rules) starts a new follower from that moment. [`Applier::settle`] waits until
//! the rules have seen every event recorded before it was called (a program about to exit
//! calls it, through [`settle_snapshots`](crate::settle_snapshots), before it settles its saver).

use crate::error::{Error, Result};
use crate::saver::Saver;
use devttrace::{Follower, Reader};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;
use ttrace_layouts::snapshot::CauseKind;
use ttrace_reader::matcher::Matcher;
use ttrace_reader::rules::Rule;

/// Between two polls while events come.
pub const ACTIVE: Duration = Duration::from_millis(2);
/// The longest wait between two polls: while nothing comes, and while no rule is installed.
pub const IDLE: Duration = Duration::from_millis(100);

/// The thread that applies the installed rules, as its starter holds it.
#[derive(Clone)]
pub struct Applier {
    progress: Arc<Progress>,
    dev: &'static Reader,
}

#[derive(Default)]
struct Progress {
    state: Mutex<Through>,
    /// Signalled after every poll.
    moved: Condvar,
}

#[derive(Default)]
struct Through {
    /// Whether rules are followed.
    following: bool,
    /// Every event stamped at or before this has been given to the rules.
    through: u64,
    /// Callers of `settle` waiting: the thread polls without pausing meanwhile.
    hurry: usize,
}

impl Progress {
    fn lock(&self) -> MutexGuard<'_, Through> {
        // The fields are each set in one step: a panic elsewhere leaves them whole.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Says how far the rules have seen (`None`: no rule followed); whether someone waits.
    fn report(&self, through: Option<u64>) -> bool {
        let mut st = self.lock();
        st.following = through.is_some();
        st.through = through.unwrap_or(0);
        self.moved.notify_all();
        st.hurry > 0
    }
}

/// Starts the thread that applies the device's installed snapshot rules through `saver`
/// (see the module's documentation); it runs as long as the process.
pub fn start(saver: Saver) -> Result<Applier> {
    let applier = Applier {
        progress: Arc::default(),
        dev: saver.device().reader(),
    };
    let progress = applier.progress.clone();
    std::thread::Builder::new()
        .name("ttrace-rules".into())
        .spawn(move || run(&saver, &progress))
        .map_err(|source| Error::Thread {
            what: "snapshot rules",
            source,
        })?;
    Ok(applier)
}

impl Applier {
    /// Waits until the installed rules have seen every event recorded before this call (at
    /// once if no rule is installed); the snapshots they asked for are then the saver's
    /// ([`Saver::settle`]).
    pub fn settle(&self) {
        let now = self.dev.now();
        let p = &*self.progress;
        let mut st = p.lock();
        st.hurry += 1;
        while st.following && st.through < now {
            st = p.moved.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.hurry -= 1;
    }
}

/// Rules followed: their text, their matcher and the follower that feeds it.
struct Following {
    texts: Vec<String>,
    matcher: Matcher,
    follower: Follower<'static>,
}

fn run(saver: &Saver, progress: &Progress) {
    // This thread applies the device's rules from now on: `ctl on` can tell.
    saver.device().note_rules_applier();
    let dev: &'static Reader = saver.device().reader();
    let mut generation = None;
    let mut following: Option<Following> = None;
    let mut sleep = IDLE;
    loop {
        let g = dev.ctl_generation();
        if generation != Some(g) {
            generation = Some(g);
            let texts = dev.snapshot_rules();
            if following.as_ref().map(|f| &f.texts) != Some(&texts) {
                following = follow(dev, texts);
            }
        }
        let Some(f) = &mut following else {
            progress.report(None);
            std::thread::sleep(IDLE);
            continue;
        };
        let poll = match f.follower.poll() {
            Ok(poll) => poll,
            Err(e) => {
                // Said, and followed again from now at the next control change.
                eprintln!("ttrace: snapshot rules: following the device: {e}");
                following = None;
                continue;
            }
        };
        let now = dev.now();
        for fired in f.matcher.poll(&poll, now) {
            let reason = format!("{}: {}", f.matcher.rules()[fired.rule], fired.what);
            saver.trigger_interval(CauseKind::Rule, &reason, fired.begin, fired.stamp);
        }
        let (through, active) = (poll.released_through, poll.active);
        f.follower.recycle(poll);
        if progress.report(Some(through)) {
            continue;
        }
        // Idle: poll less and less often; at the first event, as often as ACTIVE again.
        sleep = match active {
            true => ACTIVE,
            false => (sleep * 2).clamp(ACTIVE, IDLE),
        };
        std::thread::sleep(sleep);
    }
}

/// A follower of `dev` from now for the rules `texts` (none if there is no rule; a rule
/// that does not parse is said and left out).
fn follow(dev: &'static Reader, texts: Vec<String>) -> Option<Following> {
    let rules: Vec<Rule> = texts
        .iter()
        .filter_map(|t| {
            t.parse()
                .map_err(|e| eprintln!("ttrace: snapshot rules: {e}"))
                .ok()
        })
        .collect();
    (!rules.is_empty()).then(|| Following {
        texts,
        matcher: Matcher::new(rules),
        follower: Follower::new(dev),
    })
}
