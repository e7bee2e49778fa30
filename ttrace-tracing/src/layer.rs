//! The [`Layer`]: each `tracing` callback as the ttrace record of its step.
//!
//! | callback          | records                                   | cost beyond the write         |
//! |-------------------|-------------------------------------------|-------------------------------|
//! | `on_event`        | an event of its callsite, its fields      | the fields' visit             |
//! | `on_new_span`     | `new`: id, parent, fields                 | the parent's look-up, visit   |
//! | `on_record`       | `record`: id, the fields recorded         | one span look-up, visit       |
//! | `on_enter`        | `enter`: id                               | one span look-up              |
//! | `on_exit`         | `exit`: id                                | one span look-up              |
//! | `on_close`        | `close`: id                               | one span look-up              |
//! | `on_follows_from` | `follows`: id, the span it follows from   | one span look-up              |
//!
//! The look-up finds the span's callsite in the registry (its metadata), and through it the
//! tracepoint: nothing is kept in the span's extensions, nothing is formatted but `Debug`
//! values. An exit finds its callsite without one: each thread keeps the spans it entered
//! and has not exited (a span entered on a thread stays alive until it exits there, so the
//! id on top names the same span).

use crate::callsite::{self, Callsite};
use crate::record;
use std::cell::RefCell;
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::subscriber::Interest;
use tracing_core::{Event, Level, LevelFilter, Metadata, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;
use ttrace_core::{Role, Writer};

/// The layer: records into a ttrace device (see the crate's documentation).
#[derive(Clone, Copy)]
pub struct TtraceLayer {
    pub(crate) dev: Option<&'static Writer>,
    pub(crate) max: LevelFilter,
    /// Events at this level or more severe trigger a snapshot (OFF: none).
    pub(crate) snapshot_on: LevelFilter,
}

/// The layer recording into the process's device ([`ttrace_core::device_or_init`]: the one
/// `ttrace_core::init` installed, else the default one). If no device can be opened, the
/// layer records nothing and says why once on stderr.
pub fn layer() -> TtraceLayer {
    match ttrace_core::device_or_init() {
        Ok(dev) => layer_into(dev),
        Err(e) => {
            eprintln!("ttrace-tracing: recording nothing: {e}");
            TtraceLayer {
                dev: None,
                max: LevelFilter::OFF,
                snapshot_on: LevelFilter::OFF,
            }
        }
    }
}

/// The layer recording into `dev`.
pub fn layer_into(dev: &'static Writer) -> TtraceLayer {
    crate::interest::follow(dev);
    TtraceLayer {
        dev: Some(dev),
        max: LevelFilter::TRACE,
        snapshot_on: LevelFilter::OFF,
    }
}

impl TtraceLayer {
    /// Leaves out, for good, callsites more verbose than `max`: `tracing` then skips them
    /// at the cost of a disabled event, and `ctl` cannot turn them on. Within `max`, `ctl`
    /// decides (by default everything up to TRACE records).
    ///
    /// ```
    /// let layer = ttrace_tracing::layer().with_max_level(tracing::level_filters::LevelFilter::DEBUG);
    /// # drop(layer);
    /// ```
    pub fn with_max_level(self, max: LevelFilter) -> TtraceLayer {
        TtraceLayer { max, ..self }
    }

    /// Asks for a snapshot ([`ttrace_core::trigger`], its reason the event's message, else
    /// its name) at every event of `level` or more severe, once the event is recorded: the
    /// snapshot then holds what led to the error, and what follows it for the trigger's
    /// `after` window. It is saved by a background thread into the snapshot directory
    /// (`$TTRACE_SNAPSHOT_DIR`, else beside the device), at most one per interval (the
    /// others merged or refused, and counted: `ttrace-reader stats`); `ttrace-reader
    /// snapshots` lists them. Any other event pays one comparison more.
    ///
    /// ```
    /// # let tmp = tempfile::tempdir().unwrap();
    /// # std::env::set_var("TTRACE_SNAPSHOT_DIR", tmp.path().join("snapshots"));
    /// # ttrace_core::init(&ttrace_core::Config::at(tmp.path().join("dev"))).unwrap();
    /// use tracing::Level;
    /// use tracing_subscriber::prelude::*;
    ///
    /// let layer = ttrace_tracing::layer().snapshot_on(Level::ERROR);
    /// let _guard = tracing_subscriber::registry().with(layer).set_default();
    /// tracing::warn!("retrying"); // recorded, no snapshot
    /// tracing::error!("payment service unreachable"); // recorded, and a snapshot asked for
    /// ttrace_core::settle_snapshots(); // before exiting: the snapshot is written
    /// # let files: Vec<_> = std::fs::read_dir(tmp.path().join("snapshots")).unwrap().collect();
    /// # assert_eq!(files.len(), 1);
    /// ```
    pub fn snapshot_on(self, level: Level) -> TtraceLayer {
        TtraceLayer {
            snapshot_on: LevelFilter::from_level(level),
            ..self
        }
    }
}

thread_local! {
    /// The spans this thread entered through the layer and has not exited, innermost last.
    static ENTERED: RefCell<Vec<(u64, &'static Callsite)>> = const { RefCell::new(Vec::new()) };
}

impl TtraceLayer {
    /// The device and the callsite of span `id`.
    #[inline]
    fn span<S>(&self, id: &Id, ctx: &Context<'_, S>) -> Option<(&'static Writer, &'static Callsite)>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let dev = self.dev?;
        Some((dev, callsite::of(dev, ctx.metadata(id)?)))
    }
}

/// The most verbose level recorded: `max`, or none without a device.
pub(crate) fn max_level(dev: Option<&'static Writer>, max: LevelFilter) -> LevelFilter {
    match dev {
        Some(_) => max,
        None => LevelFilter::OFF,
    }
}

/// What `tracing` is told of a callsite, by the layer and the subscriber alike: no
/// interest above the maximum level, nor while the device's control disables it (asked
/// again when the control changes: [`crate::interest`]).
pub(crate) fn interest(
    dev: Option<&'static Writer>,
    max: LevelFilter,
    meta: &'static Metadata<'static>,
) -> Interest {
    let Some(dev) = dev else {
        return Interest::never();
    };
    if *meta.level() > max {
        return Interest::never();
    }
    match callsite::of(dev, meta).device_enables(dev) {
        true => Interest::always(),
        false => Interest::never(),
    }
}

impl<S> Layer<S> for TtraceLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        interest(self.dev, self.max, meta)
    }

    fn enabled(&self, meta: &Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        self.dev.is_some() && *meta.level() <= self.max
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(max_level(self.dev, self.max))
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if let Some(dev) = self.dev {
            record::event(dev, event, self.snapshot_on);
        }
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(dev) = self.dev else { return };
        let cs = callsite::of(dev, attrs.metadata());
        let parent = match attrs.parent() {
            Some(p) => Some(p.into_u64()),
            None if attrs.is_contextual() => ctx.current_span().id().map(Id::into_u64),
            None => None,
        };
        record::new_span(dev, cs, id.into_u64(), parent.unwrap_or(0), attrs);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some((dev, cs)) = self.span(id, &ctx) {
            record::record(dev, cs, id.into_u64(), values);
        }
    }

    fn on_follows_from(&self, id: &Id, follows: &Id, ctx: Context<'_, S>) {
        if let Some((dev, cs)) = self.span(id, &ctx) {
            record::follows(dev, cs, id.into_u64(), follows.into_u64());
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if let Some((dev, cs)) = self.span(id, &ctx) {
            ENTERED.with(|e| e.borrow_mut().push((id.into_u64(), cs)));
            record::step(dev, cs, Role::SpanEnter, id.into_u64());
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        let n = id.into_u64();
        // The innermost entered, usually; `tracing` allows exits out of order.
        let entered = ENTERED.with(|e| {
            let mut e = e.borrow_mut();
            let at = e.iter().rposition(|&(x, _)| x == n)?;
            Some(e.remove(at).1)
        });
        let found = match entered {
            Some(cs) => self.dev.map(|dev| (dev, cs)),
            None => self.span(id, &ctx),
        };
        if let Some((dev, cs)) = found {
            record::step(dev, cs, Role::SpanExit, n);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some((dev, cs)) = self.span(&id, &ctx) {
            record::step(dev, cs, Role::SpanClose, id.into_u64());
        }
    }
}
