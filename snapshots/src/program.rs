//! Snapshots the program takes itself: at once ([`save_snapshot`]), around a moment it
//! noticed ([`trigger`]), and at a panic ([`install_panic_hook`]).
//!
//! Each records an event first (`trigger("reason")`, `panic("message", "file:line:col")`),
//! so the moment is in the trace for every reader and export, then asks the process's
//! saver ([`Saver`]) for the snapshot. The snapshot directory is
//! `$TTRACE_SNAPSHOT_DIR`, else, for a device in memory (the default's `/dev/shm`),
//! `/var/tmp/<name>.snapshots`, else `<device>.snapshots` beside the device
//! ([`ttrace_reader::policy::default_snapshot_dir`]); the window, rate
//! and retention come from [`Policy::from_env`].

use crate::installed::Applier;
use crate::saver::{Asked, Saver};
use std::sync::OnceLock;
use ttrace_core::{device, device_or_init, Writer};
use ttrace_layouts::aux::{AuxTag, AUX_NONE};
use ttrace_layouts::meta::ArgType;
use ttrace_layouts::snapshot::{Cause, CauseKind};
use ttrace_reader::policy::{default_snapshot_dir, Policy};
use ttrace_reader::store::{save_now, SaveInfo, Store};

ttrace_core::tracepoint!(
    /// The event a [`trigger`] records: its reason.
    static TRIGGER: Start = "trigger", "{reason:s}"
);

ttrace_core::tracepoint!(
    /// The event a panic records, with the panic hook installed: its message and where.
    static PANIC: Start = "panic", "{message:s} at {location:s}"
);

/// The process's saver, made at the first use from the process's device and the
/// environment; `None` (said once on standard error) if either is unusable.
fn saver() -> Option<&'static Saver> {
    static SAVER: OnceLock<Option<Saver>> = OnceLock::new();
    SAVER
        .get_or_init(|| {
            let w = device_or_init()
                .map_err(|e| eprintln!("ttrace: no snapshots: {e}"))
                .ok()?;
            let policy = Policy::from_env()
                .map_err(|e| eprintln!("ttrace: no snapshots: {e}"))
                .ok()?;
            let store = Store::new(default_snapshot_dir(w.device().reader().dir()));
            Some(Saver::new(w.device(), store, policy))
        })
        .as_ref()
}

/// Records `text` as a string argument (its aux word, or [`AUX_NONE`] if it did not fit).
fn text(w: &Writer, text: &str) -> u64 {
    w.aux_write(AuxTag::String, w.context(), text.as_bytes())
        .unwrap_or(AUX_NONE)
}

/// Records a `trigger` event with `reason`, and asks for a snapshot of a window around it:
/// what the rings hold before it, and what is written in the [`Policy::after`] span after
/// it (so its consequences are in it). A background thread saves it into the snapshot
/// directory, as a file whose name says when and why; this returns at once.
///
/// At most one snapshot is granted per [`Policy::interval`] across every process of the
/// device; a trigger while one is pending is merged into it, one sooner is refused: both
/// counted (`ttrace-reader stats`). A program about to exit calls [`settle_snapshots`].
///
/// ```
/// # let tmp = tempfile::tempdir().unwrap();
/// # std::env::set_var("TTRACE_SNAPSHOT_DIR", tmp.path().join("snapshots"));
/// # ttrace_core::init(&ttrace_core::Config::at(tmp.path().join("dev")))?;
/// let asked = ttrace_snapshots::trigger("request over 100 ms");
/// assert_eq!(asked, ttrace_snapshots::Asked::Granted);
/// ttrace_snapshots::settle_snapshots();
/// # assert_eq!(std::fs::read_dir(tmp.path().join("snapshots")).unwrap().count(), 1);
/// # Ok::<(), ttrace_core::Error>(())
/// ```
pub fn trigger(reason: &str) -> Asked {
    let Some(saver) = saver() else {
        return Asked::Unavailable;
    };
    let stamp = record(&TRIGGER, reason, None);
    saver.trigger(CauseKind::Trigger, reason, stamp)
}

/// Records the event of `tp` (a trigger or a panic) with its string arguments; returns
/// the time it was recorded at (0 if the process has no device: nothing was recorded).
fn record<const N: usize>(
    tp: &'static ttrace_core::Tracepoint<N>,
    first: &str,
    second: Option<&str>,
) -> u64 {
    let Some(w) = device() else { return 0 };
    let word = tp.word();
    let word = match word {
        0 => 0,
        _ => tp.enabled_word(word, &[ArgType::Str, ArgType::Str][..N]),
    };
    if word != 0 {
        let mut args = [AUX_NONE; N];
        args[0] = text(w, first);
        if let (Some(s), Some(a)) = (second, args.get_mut(1)) {
            *a = text(w, s);
        }
        w.emit(word, w.context(), &args);
    }
    w.now()
}

/// Saves a snapshot of the device now, on the calling thread (the format `ttrace-reader
/// snapshot` writes; a consistent copy), into the snapshot directory; no rate applies.
///
/// ```
/// # let tmp = tempfile::tempdir().unwrap();
/// # std::env::set_var("TTRACE_SNAPSHOT_DIR", tmp.path().join("snapshots"));
/// # ttrace_core::init(&ttrace_core::Config::at(tmp.path().join("dev")))?;
/// let info = ttrace_snapshots::save_snapshot("health check failed").unwrap();
/// assert!(info.path.exists());
/// # Ok::<(), ttrace_core::Error>(())
/// ```
pub fn save_snapshot(reason: &str) -> crate::error::Result<SaveInfo> {
    let w = device_or_init()?;
    let policy = saver().map_or_else(Policy::default, |s| s.policy().clone());
    let store = match saver() {
        Some(s) => s.store().clone(),
        None => Store::new(default_snapshot_dir(w.device().reader().dir())),
    };
    Ok(save_now(w.device(), &store, &policy, reason)?)
}

/// Saves a snapshot of the device to `path`, on the calling thread: Go's
/// `FlightRecorder.WriteTo`. No retention or rate applies.
pub fn save_snapshot_to(
    path: impl AsRef<std::path::Path>,
    reason: &str,
) -> crate::error::Result<devttrace::image::Saved> {
    let w = device_or_init()?;
    let mut cause = Cause::new(CauseKind::Saved, reason);
    cause.pid = std::process::id();
    Ok(w.device().reader().save_because(path, &cause)?)
}

/// Applies the snapshot rules installed in the device with `ttrace-reader ctl on RULE`
/// (`ctl on 'latency request > 5ms'`): a thread of this process follows the device while
/// rules are installed and triggers a snapshot when one matches, as [`trigger`] does
/// (window, rate and retention from the environment). No watcher needs to run. Calling it
/// again does nothing; an error says why no rule can be applied (no device, wrong settings,
/// no thread).
///
/// ```
/// # let tmp = tempfile::tempdir().unwrap();
/// # std::env::set_var("TTRACE_SNAPSHOT_DIR", tmp.path().join("snapshots"));
/// # ttrace_core::init(&ttrace_core::Config::at(tmp.path().join("dev")))?;
/// ttrace_snapshots::apply_snapshot_rules().expect("rules applied");
/// # Ok::<(), ttrace_core::Error>(())
/// ```
pub fn apply_snapshot_rules() -> crate::error::Result<()> {
    let mut started = APPLIER.lock().unwrap_or_else(|p| p.into_inner());
    if started.is_some() {
        return Ok(());
    }
    let saver = match saver() {
        Some(s) => s.clone(),
        // Why there is none: the device's error, or the settings'.
        None => {
            device_or_init()?;
            Policy::from_env()?;
            return Err(crate::error::Error::Thread {
                what: "snapshot saver",
                source: std::io::ErrorKind::Other.into(),
            });
        }
    };
    *started = Some(crate::installed::start(saver)?);
    Ok(())
}

/// The thread applying the installed snapshot rules, once started.
static APPLIER: std::sync::Mutex<Option<Applier>> = std::sync::Mutex::new(None);

/// Waits until every snapshot asked for is saved (none pending, none being written); with
/// [`apply_snapshot_rules`], first until the rules have seen every event recorded before.
pub fn settle_snapshots() {
    let applier = APPLIER.lock().unwrap_or_else(|p| p.into_inner()).clone();
    if let Some(a) = applier {
        a.settle();
    }
    if let Some(s) = saver() {
        s.settle();
    }
}

/// Installs a panic hook that records the panic's message and location as a `panic` event
/// (readable by every reader and export), saves a snapshot at once on the panicking thread
/// (the process may end right after), then calls the hook installed before it; and the
/// fatal-signal handlers ([`install_fatal_handlers`](ttrace_core::install_fatal_handlers): a
/// `fatal_signal` event, then the default action).
///
/// Installing it again does nothing: one panic makes one snapshot.
pub fn install_panic_hook() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(hook_panics);
}

fn hook_panics() {
    ttrace_core::install_fatal_handlers();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = match info.payload().downcast_ref::<&str>() {
            Some(s) => (*s).to_string(),
            None => match info.payload().downcast_ref::<String>() {
                Some(s) => s.clone(),
                None => "Box<dyn Any>".to_string(),
            },
        };
        let location = info
            .location()
            .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
            .unwrap_or_default();
        // A panic inside the saver (it should never) must not recurse here.
        thread_local!(static IN_HOOK: core::cell::Cell<bool> = const { core::cell::Cell::new(false) });
        if !IN_HOOK.with(|h| h.replace(true)) {
            // The saver first: it opens the device if nothing was recorded yet, so the
            // event has a device to go to and the snapshot its time.
            let saver = saver();
            let stamp = record(&PANIC, &message, Some(&location));
            if let Some(saver) = saver {
                let reason = format!("{message} at {location}");
                match saver.save_at_once(CauseKind::Panic, &reason, stamp) {
                    Ok(info) => {
                        eprintln!("ttrace: panic snapshot saved to {}", info.path.display())
                    }
                    Err(e) => eprintln!("ttrace: panic snapshot not saved: {e}"),
                }
            }
            IN_HOOK.with(|h| h.set(false));
        }
        previous(info);
    }));
}
