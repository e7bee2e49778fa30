//! A [`tracing_subscriber::Layer`] that records into ttrace: every program instrumented with
//! `tracing` gets the flight recorder, readable by `ttrace-reader` from another process and
//! after a crash.
//!
//! ```no_run
//! use tracing_subscriber::prelude::*;
//! tracing_subscriber::registry().with(ttrace_tracing::layer()).init();
//! tracing::info!(bytes = 512u64, path = "/srv/a", "request done");
//! ```
//!
//! - **Each callsite** becomes a ttrace tracepoint named `target::name` (an event without
//!   a name of its own: `target::file:line`), its fields the argument names, typed from the
//!   values seen (a field seen with another type gets a second tracepoint of the same name),
//!   and its level a class bit ([`CLASS_ERROR`] .. [`CLASS_TRACE`]). So
//!   `ttrace-reader ctl clrbits 0x1800` stops DEBUG and TRACE, and
//!   `ttrace-reader ctl disable 'hyper::*'` a crate, in every process at once: the layer
//!   tests the same shared word as a native trace point before it records.
//! - **Each event** costs `tracing`'s dispatch, one load, and ttrace's write: integers,
//!   floats and bools are argument words, `&str` goes to the aux buffer, a `Debug` value
//!   (the message too) is formatted into a [`DEBUG_BYTES`] buffer (longer: cut, ending `…`,
//!   counted). No allocation, no lock. Past 12 fields, the 12th argument
//!   (`dropped_fields`) counts those left out.
//! - **Spans**: entering is an Entry event of the span's tracepoint with the fields it was
//!   created (or recorded) with, leaving the Exit of the same name: `dump` shows them, the
//!   exports pair them into slices, `uftrace replay` shows the call tree. `#[instrument]`
//!   works.
//! - **Snapshots on errors**: [`TtraceLayer::snapshot_on`]`(Level::ERROR)` asks for a
//!   snapshot ([`ttrace_core::trigger`]) at every ERROR event, its message the reason.
//! - **`log` records**: install `tracing_log::LogTracer` and they arrive as events (fields
//!   `message`, `log.target`, `log.module_path`, `log.file`, `log.line`).
//!
//! Interest: the layer says [`Interest::always`] for every callsite up to its maximum level
//! ([`TtraceLayer::with_max_level`], TRACE by default), so `tracing` never caches a callsite
//! as disabled on its behalf, and a `ctl` change of the mask or the rules takes effect at
//! the next event, with nothing to rebuild. A callsite disabled through `ctl` still pays
//! `tracing`'s dispatch and the one load; one above the maximum level costs what a disabled
//! `tracing` event costs, but `ctl` cannot turn it on (see `docs/BENCHMARKS.md`).

mod callsite;
mod fields;
mod reason;

use callsite::Callsite;
use fields::{Visitor, Words};
use std::sync::atomic::Ordering::Relaxed;
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::subscriber::Interest;
use tracing_core::{Event, Level, LevelFilter, Metadata, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;
use ttrace_core::Writer;

pub use callsite::level_class;
pub use fields::DEBUG_BYTES;

/// Class bit of `ERROR` callsites.
pub const CLASS_ERROR: u64 = 1 << 8;
/// Class bit of `WARN` callsites.
pub const CLASS_WARN: u64 = 1 << 9;
/// Class bit of `INFO` callsites.
pub const CLASS_INFO: u64 = 1 << 10;
/// Class bit of `DEBUG` callsites.
pub const CLASS_DEBUG: u64 = 1 << 11;
/// Class bit of `TRACE` callsites.
pub const CLASS_TRACE: u64 = 1 << 12;

/// The layer: records into a ttrace device.
#[derive(Clone, Copy)]
pub struct TtraceLayer {
    dev: Option<&'static Writer>,
    max: LevelFilter,
    /// Events at this level or more severe trigger a snapshot (OFF: none).
    snapshot_on: LevelFilter,
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

/// What the layer could not record as it was, since the process started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// `Debug` values cut to [`DEBUG_BYTES`].
    pub debug_truncated: u64,
    /// Fields past the 12th (or the 11th, with `dropped_fields`) left out.
    pub fields_dropped: u64,
    /// Strings the aux buffer refused (shown as lost).
    pub strings_dropped: u64,
}

/// The layer's counters in this process.
pub fn stats() -> Stats {
    Stats {
        debug_truncated: fields::DEBUG_TRUNCATED.load(Relaxed),
        fields_dropped: fields::FIELDS_DROPPED.load(Relaxed),
        strings_dropped: fields::STRINGS_DROPPED.load(Relaxed),
    }
}

/// A span's argument words, kept from its creation (and `record`) to each enter.
struct SpanWords(Words);

impl TtraceLayer {
    /// Records the words of `cs` (an event, or a span's entry).
    #[inline]
    fn emit(dev: &'static Writer, cs: &Callsite, ctx: u64, w: &mut Words) {
        let sig = w.finish(cs);
        let word = cs.word(dev, sig, &w.tys[..cs.nargs()]);
        if word == 0 {
            return;
        }
        if cs.nargs() <= 5 {
            let mut a = [0u64; 5];
            a.copy_from_slice(&w.words[..5]);
            dev.emit(word, ctx, &a);
        } else {
            dev.emit(word, ctx, &w.words);
        }
    }
}

impl<S> Layer<S> for TtraceLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if self.dev.is_none() || *meta.level() > self.max {
            return Interest::never();
        }
        callsite::of(meta);
        Interest::always()
    }

    fn enabled(&self, meta: &Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        self.dev.is_some() && *meta.level() <= self.max
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(if self.dev.is_some() {
            self.max
        } else {
            LevelFilter::OFF
        })
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let Some(dev) = self.dev else { return };
        let cs = callsite::of(event.metadata());
        if cs.enabled() {
            let ctx = ttrace_core::thread_context(dev);
            let mut w = Words::new();
            event.record(&mut Visitor {
                dev,
                ctx,
                cs,
                out: &mut w,
            });
            TtraceLayer::emit(dev, cs, ctx, &mut w);
        }
        // An event `ctl` disabled still asks: the snapshot is of what the device holds.
        if *event.metadata().level() <= self.snapshot_on {
            ttrace_core::trigger(&reason::of(event));
        }
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(dev) = self.dev else { return };
        let cs = callsite::of(attrs.metadata());
        let mut w = Words::new();
        if cs.enabled() {
            let tctx = ttrace_core::thread_context(dev);
            attrs.record(&mut Visitor {
                dev,
                ctx: tctx,
                cs,
                out: &mut w,
            });
        }
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SpanWords(w));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(dev) = self.dev else { return };
        let Some(span) = ctx.span(id) else { return };
        let cs = callsite::of(span.metadata());
        let mut ext = span.extensions_mut();
        if let Some(SpanWords(w)) = ext.get_mut::<SpanWords>() {
            let tctx = ttrace_core::thread_context(dev);
            values.record(&mut Visitor {
                dev,
                ctx: tctx,
                cs,
                out: w,
            });
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        let Some(dev) = self.dev else { return };
        let Some(span) = ctx.span(id) else { return };
        let cs = callsite::of(span.metadata());
        if !cs.enabled() {
            return;
        }
        let mut w = match span.extensions().get::<SpanWords>() {
            Some(SpanWords(w)) => *w,
            None => Words::new(),
        };
        TtraceLayer::emit(dev, cs, ttrace_core::thread_context(dev), &mut w);
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        let Some(dev) = self.dev else { return };
        let Some(span) = ctx.span(id) else { return };
        let cs = callsite::of(span.metadata());
        let word = cs.exit_word(dev);
        if word != 0 {
            dev.emit(word, ttrace_core::thread_context(dev), &[]);
        }
    }
}
