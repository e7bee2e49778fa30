//! The [`TtraceLayer`]: each `tracing` callback as the ttrace record of its step, behind a
//! filter of the layer's own.
//!
//! | callback          | records                                   | cost beyond the write         |
//! |-------------------|-------------------------------------------|-------------------------------|
//! | `on_event`        | an event of its callsite, its fields      | the fields' visit             |
//! | `on_new_span`     | `new`: id, parent, fields                 | the parent's look-up, visit   |
//! | `on_record`       | `record`: id, the fields recorded         | the id's look-up, visit       |
//! | `on_enter`        | `enter`: id                               | the id's look-up              |
//! | `on_exit`         | `exit`: id                                | none (the thread's stack)     |
//! | `on_close`        | `close`: id                               | the id's look-up              |
//! | `on_follows_from` | `follows`: id, the span it follows from   | the id's look-up              |
//!
//! An event of tokio's wakers (target `tokio::task::waker`) records `task_wake` instead, if
//! it is a wake, and nothing if it is a clone or a drop ([`crate::wake`]).
//!
//! **The layer filters only itself.** A flight recorder must not change what the rest of
//! the program sees, so what ttrace does not record (a level or a name `ctl` turned off,
//! `TTRACE_DISABLED`, no device, a device it cannot use) is decided by a per-layer filter
//! ([`tracing_subscriber::layer::Filter`], the layer being a
//! [`Filtered`](tracing_subscriber::filter::Filtered) one): every other layer of the
//! registry gets every callback it would get without ttrace, in whichever order the layers
//! are stacked. The filter's answers reach `tracing`'s interest cache all the same: in a
//! registry with no other layer, a callsite ttrace disables is of no interest to anyone and
//! `tracing` skips it at the cost of one load; beside other layers it is of interest to
//! them, and the filter tells the registry, per event and per span, to leave ttrace out.
//!
//! **Steps after `new`** (enter, exit, record, follows, close) go to the recorder without
//! the filter's per-span check, which would cost a second look-up of the span in the
//! registry at each of them (20 ns more per poll): they are recorded as the span's
//! callsite's tracepoints say now, within the layer's maximum level, as they were before
//! the filter. So a span the filter left out when it was made (its callsite off then, beside
//! other layers that wanted it) has no `new`, and its later steps record only if `ctl` turns
//! its callsite on during its life: readers take it for an instance whose `new` the ring
//! overwrote.
//!
//! The id's look-up finds the span's callsite, and through it the tracepoints, in the
//! layer's own table of the spans whose `new` it recorded ([`crate::span_ids`]: three loads);
//! a span not there (its entry taken over by a later span, or its `new` left out) is looked
//! up in the registry (its metadata, about 20 ns more). Nothing is kept in the span's
//! extensions, nothing is formatted but `Debug` values. An exit needs none: each thread keeps the spans it entered through the layer and
//! has not exited (a span entered on a thread stays alive until it exits there, so the id on
//! top names the same span).

use crate::callsite::{self, Callsite};
use crate::record;
use crate::span_ids::SpanIds;
use std::any::TypeId;
use std::cell::RefCell;
use std::sync::Arc;
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::subscriber::Interest;
use tracing_core::{Dispatch, Event, LevelFilter, Metadata, Subscriber};
use tracing_subscriber::filter::Filtered;
use tracing_subscriber::layer::{Context, Filter};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;
use ttrace_core::{Role, Writer};

/// The layer: records into a ttrace device (see the crate's documentation), and filters
/// only what it records itself, never what the other layers of its subscriber see (see the
/// module's documentation). `S` is the subscriber it is a layer of, as for any layer:
/// inferred where it is added (`registry().with(ttrace_tracing::layer())`).
pub struct TtraceLayer<S = tracing_subscriber::Registry> {
    inner: Filtered<Recorder, Gate, S>,
}

/// What the layer records: the layer without its filter.
#[derive(Clone)]
pub(crate) struct Recorder {
    pub(crate) dev: Option<&'static Writer>,
    /// The callsites of the spans whose `new` it recorded, by id ([`crate::span_ids`]).
    ids: Arc<SpanIds>,
    /// The filter's maximum level, for the steps that skip the filter.
    pub(crate) max: LevelFilter,
    /// Events at this level or more severe trigger a snapshot (OFF: none).
    pub(crate) snapshot_on: LevelFilter,
}

/// The layer's filter: which callsites, events and spans it records.
#[derive(Clone, Copy)]
pub(crate) struct Gate {
    pub(crate) dev: Option<&'static Writer>,
    pub(crate) max: LevelFilter,
}

/// The process's device ([`ttrace_core::device_or_init`]: the one `ttrace_core::init`
/// installed, else the default one), its control followed ([`crate::interest`]); `None`,
/// said on stderr, if none can be opened or used.
pub(crate) fn process_device() -> Option<&'static Writer> {
    match ttrace_core::device_or_init() {
        Ok(dev) => {
            crate::interest::follow(dev);
            Some(dev)
        }
        Err(e) => {
            eprintln!("ttrace-tracing: recording nothing: {e}");
            None
        }
    }
}

/// The layer recording into the process's device ([`ttrace_core::device_or_init`]: the one
/// `ttrace_core::init` installed, else the default one). If no device can be opened (or the
/// one there cannot be used, as one of other sizes), the layer records nothing and says why
/// on stderr; the other layers see what they would see without it.
pub fn layer<S>() -> TtraceLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    TtraceLayer::of(process_device(), LevelFilter::TRACE)
}

/// The layer recording into `dev`.
pub fn layer_into<S>(dev: &'static Writer) -> TtraceLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    crate::interest::follow(dev);
    TtraceLayer::of(Some(dev), LevelFilter::TRACE)
}

impl<S> TtraceLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn of(dev: Option<&'static Writer>, max: LevelFilter) -> TtraceLayer<S> {
        TtraceLayer::from_parts(
            Recorder {
                dev,
                ids: Arc::new(SpanIds::new()),
                max,
                snapshot_on: LevelFilter::OFF,
            },
            Gate { dev, max },
        )
    }

    fn from_parts(recorder: Recorder, gate: Gate) -> TtraceLayer<S> {
        TtraceLayer {
            inner: recorder.with_filter(gate),
        }
    }

    /// Leaves out, for good, callsites more verbose than `max`: a subscriber of ttrace alone
    /// then skips them at the cost of a disabled event, and `ctl` cannot turn them on.
    /// Within `max`, `ctl` decides (by default everything up to TRACE records). Other layers
    /// still see them.
    ///
    /// ```
    /// use tracing_subscriber::prelude::*;
    /// let layer = ttrace_tracing::layer().with_max_level(tracing::level_filters::LevelFilter::DEBUG);
    /// # let _ = tracing_subscriber::registry().with(layer);
    /// ```
    pub fn with_max_level(mut self, max: LevelFilter) -> TtraceLayer<S> {
        self.inner.filter_mut().max = max;
        self.inner.inner_mut().max = max;
        self
    }

    /// Asks for a snapshot ([`ttrace_snapshots::trigger`], its reason the event's message, else
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
    /// ttrace_snapshots::settle_snapshots(); // before exiting: the snapshot is written
    /// # let files: Vec<_> = std::fs::read_dir(tmp.path().join("snapshots")).unwrap().collect();
    /// # assert_eq!(files.len(), 1);
    /// ```
    #[cfg(feature = "snapshots")]
    pub fn snapshot_on(mut self, level: tracing_core::Level) -> TtraceLayer<S> {
        self.inner.inner_mut().snapshot_on = LevelFilter::from_level(level);
        self
    }
}

impl<S> Clone for TtraceLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    /// The same layer, not yet added to a subscriber (its spans' ids will be another
    /// registry's: it has a table of its own).
    fn clone(&self) -> TtraceLayer<S> {
        let recorder = Recorder {
            ids: Arc::new(SpanIds::new()),
            ..self.inner.inner().clone()
        };
        TtraceLayer::from_parts(recorder, *self.inner.filter())
    }
}

impl<S> std::fmt::Debug for TtraceLayer<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gate = self.inner.filter();
        f.debug_struct("TtraceLayer")
            .field(
                "device",
                &gate.dev.map(|d| d.device().reader().dir().to_path_buf()),
            )
            .field("max", &gate.max)
            .field("snapshot_on", &self.inner.inner().snapshot_on)
            .finish()
    }
}

thread_local! {
    /// The spans this thread entered through the layer and has not exited, innermost last.
    static ENTERED: RefCell<Vec<(u64, &'static Callsite)>> = const { RefCell::new(Vec::new()) };
}

/// The callsite of span `id`, if this thread entered it through the layer and has not
/// exited it; taken off the thread's stack.
#[inline]
fn exited(id: u64) -> Option<&'static Callsite> {
    // The innermost entered, usually; `tracing` allows exits out of order.
    ENTERED.with(|e| {
        let mut e = e.borrow_mut();
        let at = e.iter().rposition(|&(x, _)| x == id)?;
        Some(e.remove(at).1)
    })
}

impl Recorder {
    /// The device and the callsite of span `id`, if its level is within the layer's.
    #[inline]
    fn span<S>(&self, id: &Id, ctx: &Context<'_, S>) -> Option<(&'static Writer, &'static Callsite)>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let dev = self.dev?;
        // Every span in the table was recorded within the layer's maximum level.
        if let Some(cs) = self.ids.get(id.into_u64()) {
            return Some((dev, cs));
        }
        let meta = ctx.metadata(id)?;
        (*meta.level() <= self.max).then(|| (dev, callsite::of(dev, meta)))
    }
}

/// The most verbose level recorded: `max`, or none without a device.
pub(crate) fn max_level(dev: Option<&'static Writer>, max: LevelFilter) -> LevelFilter {
    match dev {
        Some(_) => max,
        None => LevelFilter::OFF,
    }
}

/// Whether ttrace records a callsite, for the layer's filter and the subscriber alike: not
/// above the maximum level, nor while the device's control disables it (asked again when
/// the control changes: [`crate::interest`]).
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

/// Asked by `tracing-subscriber` for this layer only: what it answers never reaches the
/// other layers.
impl<S> Filter<S> for Gate
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        interest(self.dev, self.max, meta)
    }

    /// Asked for a callsite whose interest is not settled (another layer wants what this
    /// one does not, or several subscribers differ): as the interest, from the words
    /// (a callsite not made yet: as its level).
    fn enabled(&self, meta: &Metadata<'_>, _ctx: &Context<'_, S>) -> bool {
        self.dev.is_some()
            && *meta.level() <= self.max
            && callsite::find(meta).is_none_or(|cs| cs.enabled())
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(max_level(self.dev, self.max))
    }
}

/// Called by the filter for what it enabled only (events, `new`), and by [`TtraceLayer`]
/// for a span's later steps.
impl<S> Layer<S> for Recorder
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
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
        self.ids.insert(id.into_u64(), cs);
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

    /// An exit [`TtraceLayer::on_exit`] did not find on the thread's stack (exited on
    /// another thread than it was entered on, or not entered through the layer).
    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if let Some((dev, cs)) = self.span(id, &ctx) {
            record::step(dev, cs, Role::SpanExit, id.into_u64());
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some((dev, cs)) = self.span(&id, &ctx) {
            record::step(dev, cs, Role::SpanClose, id.into_u64());
        }
    }
}

/// The filtered layer's methods (so `tracing-subscriber` sees a per-layer filter,
/// `downcast_raw` included), but for a span's steps after `new`, which go to the recorder
/// (see the module's documentation), an exit of a span the thread entered through the
/// layer without a look-up.
impl<S> Layer<S> for TtraceLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a> + 'static,
{
    fn on_register_dispatch(&self, subscriber: &Dispatch) {
        crate::interest::note_subscriber(subscriber);
        self.inner.on_register_dispatch(subscriber);
    }

    fn on_layer(&mut self, subscriber: &mut S) {
        self.inner.on_layer(subscriber);
    }

    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        self.inner.register_callsite(meta)
    }

    fn enabled(&self, meta: &Metadata<'_>, ctx: Context<'_, S>) -> bool {
        self.inner.enabled(meta, ctx)
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        // Whether or not the filter lets the recorder see it: an entry of an earlier span
        // of the same id must not name this one.
        self.inner.inner().ids.forget(id.into_u64());
        self.inner.on_new_span(attrs, id, ctx);
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        self.inner.max_level_hint()
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        self.inner.inner().on_record(id, values, ctx);
    }

    fn on_follows_from(&self, id: &Id, follows: &Id, ctx: Context<'_, S>) {
        self.inner.inner().on_follows_from(id, follows, ctx);
    }

    fn event_enabled(&self, event: &Event<'_>, ctx: Context<'_, S>) -> bool {
        self.inner.event_enabled(event, ctx)
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        self.inner.on_event(event, ctx);
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        self.inner.inner().on_enter(id, ctx);
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        let recorder = self.inner.inner();
        let n = id.into_u64();
        match (exited(n), recorder.dev) {
            (Some(cs), Some(dev)) => record::step(dev, cs, Role::SpanExit, n),
            _ => recorder.on_exit(id, ctx),
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        self.inner.inner().on_close(id, ctx);
    }

    fn on_id_change(&self, old: &Id, new: &Id, ctx: Context<'_, S>) {
        self.inner.on_id_change(old, new, ctx);
    }

    unsafe fn downcast_raw(&self, id: TypeId) -> Option<*const ()> {
        if id == TypeId::of::<Self>() {
            return Some(self as *const Self as *const ());
        }
        // SAFETY: the caller's contract (a pointer returned for `id` is to a value of the
        // type `id` names) is the inner layer's, which answers for itself, its filter, its
        // layer and the marker of a per-layer filter.
        unsafe { self.inner.downcast_raw(id) }
    }
}
