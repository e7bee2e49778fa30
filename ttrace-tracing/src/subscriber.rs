//! [`TtraceSubscriber`]: a `tracing` subscriber of its own, for programs that compose
//! nothing else. It records what the layer records, but finds a span's callsite from its
//! id in one load (ids are slots of its own slab: [`crate::spans`]) instead of a look-up in
//! `tracing-subscriber`'s registry, and keeps no span data beyond that.
//!
//! The current span of each thread (what `Span::current()` and contextual parents read)
//! is a per-thread stack of the ids entered and not yet exited.

use crate::callsite::{self, Callsite};
use crate::record;
use crate::spans::SPANS;
use std::cell::RefCell;
use tracing_core::span::{Attributes, Current, Id, Record};
use tracing_core::subscriber::Interest;
use tracing_core::{Event, LevelFilter, Metadata, Subscriber};
use ttrace_core::{Role, Writer};

thread_local! {
    /// The spans this thread entered and has not exited, innermost last.
    static ENTERED: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// A subscriber that records into a ttrace device (see the module's documentation).
///
/// ```
/// # let tmp = tempfile::tempdir().unwrap();
/// # ttrace_core::init(&ttrace_core::Config::at(tmp.path().join("dev"))).unwrap();
/// tracing::subscriber::set_global_default(ttrace_tracing::subscriber()).unwrap();
/// let span = tracing::info_span!("request", id = 7u64);
/// span.in_scope(|| tracing::info!(bytes = 512u64, "done"));
/// ```
#[derive(Clone, Copy)]
pub struct TtraceSubscriber {
    dev: Option<&'static Writer>,
    max: LevelFilter,
    snapshot_on: LevelFilter,
}

/// The subscriber recording into the process's device ([`ttrace_core::device_or_init`]).
/// If no device can be opened, it records nothing and says why on stderr. Being the whole
/// subscriber, what it does not record no one sees.
pub fn subscriber() -> TtraceSubscriber {
    TtraceSubscriber {
        dev: crate::layer::process_device(),
        max: LevelFilter::TRACE,
        snapshot_on: LevelFilter::OFF,
    }
}

/// The subscriber recording into `dev`.
pub fn subscriber_into(dev: &'static Writer) -> TtraceSubscriber {
    crate::interest::follow(dev);
    TtraceSubscriber {
        dev: Some(dev),
        max: LevelFilter::TRACE,
        snapshot_on: LevelFilter::OFF,
    }
}

impl TtraceSubscriber {
    /// Leaves out, for good, callsites more verbose than `max` (as
    /// [`TtraceLayer::with_max_level`](crate::TtraceLayer::with_max_level)).
    pub fn with_max_level(self, max: LevelFilter) -> TtraceSubscriber {
        TtraceSubscriber { max, ..self }
    }

    /// Asks for a snapshot at every event of `level` or more severe (as
    /// [`TtraceLayer::snapshot_on`](crate::TtraceLayer::snapshot_on)).
    #[cfg(feature = "snapshots")]
    pub fn snapshot_on(self, level: tracing_core::Level) -> TtraceSubscriber {
        TtraceSubscriber {
            snapshot_on: LevelFilter::from_level(level),
            ..self
        }
    }

    /// The device and the callsite of span `id`.
    #[inline]
    fn span(&self, id: &Id) -> Option<(&'static Writer, &'static Callsite)> {
        Some((self.dev?, SPANS.get(id.into_u64())?.callsite()?))
    }
}

impl Subscriber for TtraceSubscriber {
    fn on_register_dispatch(&self, subscriber: &tracing_core::Dispatch) {
        crate::interest::note_subscriber(subscriber);
    }

    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        crate::layer::interest(self.dev, self.max, meta)
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        self.dev.is_some() && *meta.level() <= self.max
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(crate::layer::max_level(self.dev, self.max))
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let Some(dev) = self.dev else {
            // Never asked: every callsite is of no interest without a device.
            return Id::from_u64(u64::MAX);
        };
        let cs = callsite::of(dev, attrs.metadata());
        let id = SPANS.insert(cs);
        let parent = match attrs.parent() {
            Some(p) => p.into_u64(),
            None if attrs.is_contextual() => {
                ENTERED.with(|e| e.borrow().last().copied().unwrap_or(0))
            }
            None => 0,
        };
        record::new_span(dev, cs, id, parent, attrs);
        Id::from_u64(id)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        if let Some((dev, cs)) = self.span(span) {
            record::record(dev, cs, span.into_u64(), values);
        }
    }

    fn record_follows_from(&self, span: &Id, follows: &Id) {
        if let Some((dev, cs)) = self.span(span) {
            record::follows(dev, cs, span.into_u64(), follows.into_u64());
        }
    }

    fn event(&self, event: &Event<'_>) {
        if let Some(dev) = self.dev {
            record::event(dev, event, self.snapshot_on);
        }
    }

    fn enter(&self, span: &Id) {
        let id = span.into_u64();
        ENTERED.with(|e| e.borrow_mut().push(id));
        if let Some((dev, cs)) = self.span(span) {
            record::step(dev, cs, Role::SpanEnter, id);
        }
    }

    fn exit(&self, span: &Id) {
        let id = span.into_u64();
        ENTERED.with(|e| {
            let mut e = e.borrow_mut();
            // Usually the innermost; `tracing` allows exits out of order.
            if let Some(at) = e.iter().rposition(|&x| x == id) {
                e.remove(at);
            }
        });
        if let Some((dev, cs)) = self.span(span) {
            record::step(dev, cs, Role::SpanExit, id);
        }
    }

    fn clone_span(&self, id: &Id) -> Id {
        if let Some(slot) = SPANS.get(id.into_u64()) {
            slot.clone_handle();
        }
        id.clone()
    }

    fn try_close(&self, id: Id) -> bool {
        let n = id.into_u64();
        let Some(slot) = SPANS.get(n) else {
            return false;
        };
        if !slot.drop_handle() {
            return false;
        }
        if let (Some(dev), Some(cs)) = (self.dev, slot.callsite()) {
            record::step(dev, cs, Role::SpanClose, n);
        }
        SPANS.remove(n);
        true
    }

    fn current_span(&self) -> Current {
        let top = ENTERED.with(|e| e.borrow().last().copied());
        match top.and_then(|id| Some((id, SPANS.get(id)?.callsite()?))) {
            Some((id, cs)) => Current::new(Id::from_u64(id), cs.meta),
            None => Current::none(),
        }
    }
}
