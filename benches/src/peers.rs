//! The tracers users would pick instead, set up for the cheapest recording each offers.
//!
//! - `tracing` with a minimal custom subscriber that records each event (timestamp and up to
//!   seven integer fields) into a preallocated per-thread ring: the cheapest enabled
//!   `tracing` there is, since any real subscriber does at least this;
//! - `tracing` with the `fmt` subscriber writing to a sink (what most programs run);
//! - `fastrace` with a reporter that drops what it is given.

use std::cell::RefCell;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Slots of each thread's ring.
const RING: usize = 1 << 14;

thread_local! {
    /// This thread's ring and next position.
    static TRACING_RING: RefCell<(Vec<[u64; 8]>, usize)> =
        RefCell::new((vec![[0; 8]; RING], 0));
}

/// A `tracing` subscriber that records every event into a per-thread ring of 64-byte entries:
/// a timestamp, the callsite, and the first six integer fields.
pub struct RingSubscriber;

struct Fields<'a>(&'a mut [u64; 8], usize);

impl Visit for Fields<'_> {
    fn record_u64(&mut self, _: &Field, value: u64) {
        if self.1 < 8 {
            self.0[self.1] = value;
            self.1 += 1;
        }
    }
    fn record_i64(&mut self, f: &Field, value: i64) {
        self.record_u64(f, value as u64);
    }
    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

impl Subscriber for RingSubscriber {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        TRACING_RING.with(|r| {
            let (ring, pos) = &mut *r.borrow_mut();
            let slot = &mut ring[*pos & (RING - 1)];
            *pos += 1;
            slot[0] = ttrace_core::clock::rdtsc();
            slot[1] = event.metadata() as *const Metadata<'_> as u64;
            event.record(&mut Fields(slot, 2));
        });
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// A layer that records nothing but visits each event's fields (as any recording layer
/// must): with a registry, the floor of every `tracing` layer.
pub struct EmptyLayer;

impl<S: Subscriber> tracing_subscriber::Layer<S> for EmptyLayer {
    fn on_event(&self, event: &Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let mut words = [0u64; 8];
        event.record(&mut Fields(&mut words, 0));
        std::hint::black_box(&words);
    }
}

/// A `tracing` subscriber that is interested in nothing: what a disabled event costs.
pub struct OffSubscriber;

impl Subscriber for OffSubscriber {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> tracing::subscriber::Interest {
        tracing::subscriber::Interest::never()
    }
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        false
    }
    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::OFF)
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// The `fmt` subscriber, formatting every event to a sink.
pub fn fmt_subscriber() -> impl Subscriber + Send + Sync {
    tracing_subscriber::fmt()
        .with_writer(std::io::sink)
        .with_max_level(tracing::Level::TRACE)
        .finish()
}

/// A `fastrace` reporter that drops the spans it is given.
pub struct DropReporter;

impl fastrace::collector::Reporter for DropReporter {
    fn report(&mut self, spans: Vec<fastrace::prelude::SpanRecord>) {
        drop(spans);
    }
}

/// Installs the dropping reporter (once per process).
pub fn fastrace_init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        fastrace::set_reporter(DropReporter, fastrace::collector::Config::default());
    });
}

/// One repetition for the harness: `iters` calls of `f` under a root span and its
/// local-parent guard (replaced every 4096 calls, so that what fastrace collects stays
/// bounded), timed; then, untimed, the last root is dropped and everything is flushed to
/// the [`DropReporter`], so that fastrace's collector thread is idle when the next row runs.
pub fn fastrace_rep(iters: u64, mut f: impl FnMut(u64) + 'static) -> impl FnMut() -> f64 {
    use fastrace::prelude::{Span, SpanContext};
    move || {
        let mut root: Option<(fastrace::local::LocalParentGuard, Span)> = None;
        let t = std::time::Instant::now();
        for i in 0..iters {
            if i % 4096 == 0 {
                // The guard goes before its span.
                if let Some((guard, span)) = root.take() {
                    drop(guard);
                    drop(span);
                }
                let span = Span::root("bench_root", SpanContext::random());
                root = Some((span.set_local_parent(), span));
            }
            f(i)
        }
        let ns = t.elapsed().as_nanos() as f64 / iters as f64;
        if let Some((guard, span)) = root.take() {
            drop(guard);
            drop(span);
        }
        fastrace::flush();
        ns
    }
}

/// Times `iters` calls of `f` under `tracing-chrome`'s layer (in a registry, its file in a
/// temporary directory, written by its own thread); the flush at the end is not timed.
pub fn chrome_rep(iters: u64, mut f: impl FnMut(u64) + 'static) -> impl FnMut() -> f64 {
    move || {
        use tracing_subscriber::prelude::*;
        let tmp = tempfile::tempdir().expect("tempdir");
        let (layer, flush) = tracing_chrome::ChromeLayerBuilder::new()
            .file(tmp.path().join("trace.json"))
            .build();
        let ns =
            tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
                let t = std::time::Instant::now();
                for i in 0..iters {
                    f(i);
                }
                t.elapsed().as_nanos() as f64 / iters as f64
            });
        drop(flush);
        ns
    }
}
