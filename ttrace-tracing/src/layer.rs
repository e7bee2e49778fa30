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
//! values.

use crate::callsite::{self, Callsite};
use crate::fields::{Visitor, Words};
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::subscriber::Interest;
use tracing_core::{Event, LevelFilter, Metadata, Subscriber};
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

/// Records `w`, of the tracepoint word `word` (0: nothing), with its first `n` words.
#[inline]
fn emit(dev: &'static Writer, word: u64, ctx: u64, w: &Words, n: usize) {
    if word == 0 {
        return;
    }
    if n <= 5 {
        let mut a = [0u64; 5];
        a.copy_from_slice(&w.words[..5]);
        dev.emit(word, ctx, &a);
    } else {
        dev.emit(word, ctx, &w.words);
    }
}

/// Records `w`, visited for `cs`'s tracepoints of `sigs` (an event, a span's `new` or
/// `record`).
#[inline]
fn emit_fields(
    dev: &'static Writer,
    cs: &Callsite,
    sigs: &callsite::Signatures,
    ctx: u64,
    w: &mut Words,
) {
    let sig = w.finish(&sigs.shape);
    let n = sigs.shape.nargs();
    let word = sigs.word(cs, dev, sig, &w.tys[..n]);
    emit(dev, word, ctx, w, n);
}

impl TtraceLayer {
    /// The callsite of span `id` and the word of its step `role`, if it records.
    #[inline]
    fn step<S>(&self, id: &Id, role: Role, ctx: &Context<'_, S>) -> Option<(&'static Writer, u64)>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let dev = self.dev?;
        let cs = callsite::of(dev, ctx.metadata(id)?);
        let word = cs.step(role);
        (word != 0).then_some((dev, word))
    }
}

impl<S> Layer<S> for TtraceLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        let Some(dev) = self.dev else {
            return Interest::never();
        };
        if *meta.level() > self.max {
            return Interest::never();
        }
        match callsite::of(dev, meta).device_enables(dev) {
            true => Interest::always(),
            // Asked again when `ctl` changes (crate::interest).
            false => Interest::never(),
        }
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
        let cs = callsite::of(dev, event.metadata());
        if cs.enabled(dev) {
            let ctx = ttrace_core::thread_context(dev);
            let mut w = Words::new();
            event.record(&mut Visitor {
                dev,
                ctx,
                shape: &cs.fields.shape,
                out: &mut w,
            });
            emit_fields(dev, cs, &cs.fields, ctx, &mut w);
        }
        // An event `ctl` disabled still asks: the snapshot is of what the device holds.
        if *event.metadata().level() <= self.snapshot_on {
            ttrace_core::trigger(&crate::reason::of(event));
        }
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(dev) = self.dev else { return };
        let cs = callsite::of(dev, attrs.metadata());
        if !cs.enabled(dev) {
            return;
        }
        let parent = match attrs.parent() {
            Some(p) => Some(p.into_u64()),
            None if attrs.is_contextual() => ctx.current_span().id().map(Id::into_u64),
            None => None,
        };
        let tctx = ttrace_core::thread_context(dev);
        let mut w = Words::with_ids(&[id.into_u64(), parent.unwrap_or(0)]);
        attrs.record(&mut Visitor {
            dev,
            ctx: tctx,
            shape: &cs.fields.shape,
            out: &mut w,
        });
        emit_fields(dev, cs, &cs.fields, tctx, &mut w);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(dev) = self.dev else { return };
        let Some(meta) = ctx.metadata(id) else { return };
        let cs = callsite::of(dev, meta);
        let Some(record) = &cs.record else { return };
        if !cs.enabled(dev) {
            return;
        }
        let tctx = ttrace_core::thread_context(dev);
        let mut w = Words::with_ids(&[id.into_u64()]);
        values.record(&mut Visitor {
            dev,
            ctx: tctx,
            shape: &record.shape,
            out: &mut w,
        });
        emit_fields(dev, cs, record, tctx, &mut w);
    }

    fn on_follows_from(&self, id: &Id, follows: &Id, ctx: Context<'_, S>) {
        if let Some((dev, word)) = self.step(id, Role::SpanFollows, &ctx) {
            let ctx = ttrace_core::thread_context(dev);
            dev.emit(word, ctx, &[id.into_u64(), follows.into_u64()]);
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if let Some((dev, word)) = self.step(id, Role::SpanEnter, &ctx) {
            dev.emit(word, ttrace_core::thread_context(dev), &[id.into_u64()]);
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if let Some((dev, word)) = self.step(id, Role::SpanExit, &ctx) {
            dev.emit(word, ttrace_core::thread_context(dev), &[id.into_u64()]);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some((dev, word)) = self.step(&id, Role::SpanClose, &ctx) {
            dev.emit(word, ttrace_core::thread_context(dev), &[id.into_u64()]);
        }
    }
}
