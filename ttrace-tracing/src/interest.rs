//! `tracing`'s interest cache, kept in step with the device's control.
//!
//! The layer's filter tells `tracing` that a callsite the device's mask or rules disable is
//! of no interest to the layer ([`Interest::never`](tracing_core::subscriber::Interest::never)):
//! a subscriber of ttrace alone then skips it as it skips an event of a disabled level, at
//! the cost of one load (the other layers of a subscriber still get it: the filter is the
//! layer's own, [`crate::TtraceLayer`]). A `ttrace-reader ctl` change, from any process,
//! moves the device's control generation; a thread of the process (`ttrace-interest`,
//! started with the first layer that records) reads it every [`POLL`] and, when it moved,
//! has `tracing` ask every callsite again
//! ([`rebuild_interest_cache`](tracing_core::callsite::rebuild_interest_cache)). It does so
//! too when an event named at its first event (`name`) took a name the rules
//! disable (`stale`): its interest was its level's until then.
//!
//! Correct at every moment: a callsite `ctl` disables stops recording at once (the layer
//! tests the tracepoint's word before it records), and costs a little more until the
//! rebuild; one `ctl` enables records from the rebuild on, within [`POLL`] (or at once after
//! [`sync_interest`](crate::sync_interest)). The generation is read before the rules are
//! (Acquire, paired with the Release increment that ends a change), so a rebuild sees at
//! least the change that moved it; a change during the rebuild moves it again.
//!
//! **Whose interest.** `tracing` asks every dispatcher it knows, except when it knows only
//! one: then it asks the calling thread's default, taking it for that one. A process whose
//! only subscriber is a thread's scoped default (`set_default`, `with_default`: tests,
//! benchmarks) would have every other thread's rebuild asked of no subscriber
//! (`NoSubscriber`), which turns every callsite off for everyone. So a rebuild (`rebuild`)
//! is made with the subscriber the layer was last made part of as the thread's default
//! (kept weakly: `note_subscriber`) while it lives; without it, the thread rebuilds only
//! if a global default is set, and [`sync_interest`](crate::sync_interest) under its
//! caller's default.

use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::{Mutex, Once};
use std::time::Duration;
use tracing_core::dispatcher::{self, Dispatch, WeakDispatch};
use tracing_core::subscriber::NoSubscriber;
use ttrace_core::Writer;

/// How often the thread reads the control generation.
pub const POLL: Duration = Duration::from_millis(100);

/// Starts the thread that follows `dev`'s control (once per process), from its control
/// generation now: called before the layer answers for any callsite, so that a change
/// after those answers moves the generation past the one read here.
pub(crate) fn follow(dev: &'static Writer) {
    static STARTED: Once = Once::new();
    STARTED.call_once(|| {
        let seen = dev.device().reader().ctl_generation();
        let spawned = std::thread::Builder::new()
            .name("ttrace-interest".into())
            .spawn(move || run(dev, seen));
        if let Err(e) = spawned {
            eprintln!(
                "ttrace-tracing: no thread to follow ctl changes ({e}): callsites ctl enables \
                 record from the next sync_interest()"
            );
        }
    });
}

/// The subscriber the layer (or the subscriber) was last made part of.
static SUBSCRIBER: Mutex<Option<WeakDispatch>> = Mutex::new(None);

/// Notes `dispatch` as the subscriber to rebuild the interest cache under (called as it
/// is registered: only a weak reference is kept, and no `tracing` call is made, since
/// `tracing` holds its dispatchers' lock).
pub(crate) fn note_subscriber(dispatch: &Dispatch) {
    *SUBSCRIBER.lock().unwrap_or_else(|e| e.into_inner()) = Some(dispatch.downgrade());
}

/// Has `tracing` ask every callsite again (see the module's documentation for under which
/// default); `from_thread`: the `ttrace-interest` thread, which has no default of its own.
pub(crate) fn rebuild(from_thread: bool) {
    // Upgraded under the lock and used after it: a registration (which notes its
    // subscriber) holds `tracing`'s dispatchers' lock, which a rebuild takes.
    let noted = SUBSCRIBER
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(WeakDispatch::upgrade);
    match noted {
        Some(d) => dispatcher::with_default(&d, tracing_core::callsite::rebuild_interest_cache),
        None if from_thread && dispatcher::get_default(|d| d.is::<NoSubscriber>()) => {}
        None => tracing_core::callsite::rebuild_interest_cache(),
    }
}

/// Whether a callsite's interest changed without a control change.
static STALE: AtomicBool = AtomicBool::new(false);

/// Has the thread rebuild the interest cache at its next poll: a callsite's interest
/// changed (an event took a name the rules disable).
pub(crate) fn stale() {
    // Release: pairs with the thread's Acquire swap, so that its rebuild sees the change
    // made before this (the callsite's name).
    STALE.store(true, Release);
}

fn run(dev: &'static Writer, mut seen: u64) {
    let reader = dev.device().reader();
    loop {
        std::thread::sleep(POLL);
        let now = reader.ctl_generation();
        // Acquire: pairs with the Release store in `stale`.
        let stale = STALE.swap(false, Acquire);
        if now != seen || stale {
            seen = now;
            rebuild(true);
        }
    }
}
