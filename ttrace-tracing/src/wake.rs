//! The runtime's wakes: tokio's waker events as ttrace's built-in `task_wake`.
//!
//! A request's span that is neither polled nor running is either *idle* (its future waits
//! for something) or *scheduled* (it was woken and waits for a worker to poll it). Only the
//! wake tells the two apart, and tokio tells it only through its own `tracing`
//! instrumentation, on when the program is built with `RUSTFLAGS="--cfg tokio_unstable"`
//! and tokio's `tracing` feature:
//!
//! - each task has a span `runtime.spawn` (target `tokio::task`, level TRACE), entered
//!   around each poll of the task: the layer records it as any span, its id the
//!   [`Id::into_u64`](tracing_core::span::Id::into_u64) of the span;
//! - each operation on a task's waker is an event of target [`TARGET`] (level TRACE),
//!   fields `op` (`"waker.wake"`, `"waker.wake_by_ref"`, `"waker.clone"`, `"waker.drop"`)
//!   and `task.id`, the `into_u64` of that task's `runtime.spawn` span: the same number the
//!   layer records as that instance's id.
//!
//! The layer recognises the callsites of [`TARGET`] once, when it first meets each one
//! (`callsite`), and records their wakes (`waker.wake` and `waker.wake_by_ref`) as
//! the built-in event [`WAKE_NAME`] (format [`WAKE_FORMAT`], kind `Start`, class
//! [`CLASS_MESSAGES`]: like the context switches, not a level of the program's): its one
//! argument the woken task's span id, on the thread that woke it, stamped when it woke it.
//! A clone or a drop of a waker (several per poll) says nothing a reader uses and is not
//! recorded; the other layers of the subscriber get every one of these events all the same.
//! The events stay subject to the layer's maximum level (TRACE by default: a layer limited
//! to DEBUG records neither the tasks' spans nor their wakes).

use core::sync::atomic::AtomicU64;
use tracing_core::field::{Field, Visit};
use tracing_core::{Event, Metadata};
use ttrace_core::{ArgType, Definition, Kind, Writer, CLASS_MESSAGES};
pub use ttrace_layouts::device::{WAKE_FORMAT, WAKE_NAME};

/// The target of tokio's waker events.
pub const TARGET: &str = "tokio::task::waker";

/// Whether `meta` is one of tokio's waker events.
pub(crate) fn is_waker(meta: &Metadata<'_>) -> bool {
    meta.is_event() && meta.target() == TARGET
}

/// The definition of [`WAKE_NAME`], as registered in every device.
const DEFINITION: Definition = Definition {
    types: &[ArgType::Unsigned],
    ..Definition::untyped(WAKE_NAME, Kind::Start, CLASS_MESSAGES, WAKE_FORMAT)
};

/// Registers [`WAKE_NAME`] in `dev` (or finds it registered) and returns its shared word;
/// `None` if the device refuses it (said once on stderr).
pub(crate) fn register(dev: &'static Writer) -> Option<&'static AtomicU64> {
    match dev.device().register_tracepoint(&DEFINITION) {
        Ok((id, _)) => Some(dev.device().tracepoint_word(id)),
        Err(e) => {
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| eprintln!("ttrace-tracing: {WAKE_NAME} not recorded: {e}"));
            None
        }
    }
}

/// The fields of a waker event that matter: whether it wakes, and whom.
#[derive(Default)]
struct Wake {
    wakes: bool,
    task: Option<u64>,
}

impl Visit for Wake {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "op" {
            self.wakes = matches!(value, "waker.wake" | "waker.wake_by_ref");
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "task.id" {
            self.task = Some(value);
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if let Ok(v) = u64::try_from(value) {
            self.record_u64(field, v);
        }
    }

    fn record_debug(&mut self, _field: &Field, _value: &dyn core::fmt::Debug) {}
}

/// Records `event`, one of tokio's waker events, as a [`WAKE_NAME`] with the word `word` (0:
/// disabled) if it is a wake; nothing if it is a clone or a drop.
#[inline]
pub(crate) fn event(dev: &'static Writer, word: &AtomicU64, event: &Event<'_>) {
    // Relaxed: the word is self-contained.
    let word = word.load(core::sync::atomic::Ordering::Relaxed);
    if word == 0 {
        return;
    }
    let mut wake = Wake::default();
    event.record(&mut wake);
    if let (true, Some(task)) = (wake.wakes, wake.task) {
        dev.emit(word, ttrace_core::thread_context(dev), &[task]);
    }
}
