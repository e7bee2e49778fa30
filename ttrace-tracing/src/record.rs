//! What each `tracing` callback records, for the [`Layer`](crate::TtraceLayer) and the
//! [`Subscriber`](crate::TtraceSubscriber) alike: they differ in how they find a span's
//! callsite from its id, not in what they write.

use crate::callsite::{Callsite, Signatures};
use crate::fields::{Visitor, Words};
use tracing_core::span::{Attributes, Record};
use tracing_core::{Event, LevelFilter};
use ttrace_core::{Role, Writer};

/// Records `w`'s first `n` words with the tracepoint word `word` (0: nothing).
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

/// Records the words `ids`, then the fields `visit` gives, with `cs`'s tracepoint of
/// `sigs` for their types (an event: no ids; a span's `new` or `record`); the fields not
/// recorded have no word (their tracepoint's format says so). An event not named yet is
/// named by its message first ([`crate::name`]).
#[inline]
fn with_fields(
    dev: &'static Writer,
    cs: &Callsite,
    sigs: &Signatures,
    ids: &[u64],
    visit: impl FnOnce(&mut Visitor<'_>),
) {
    let ctx = ttrace_core::thread_context(dev);
    let mut w = Words::with_ids(ids);
    let unnamed = cs.unnamed();
    let mut message = None;
    visit(&mut Visitor {
        dev,
        ctx,
        shape: &sigs.shape,
        out: &mut w,
        message: unnamed.then_some(&mut message),
    });
    if unnamed {
        cs.name_by(dev, message.as_deref());
    }
    let (sig, absent) = w.finish(&sigs.shape);
    let n = sigs.shape.nargs();
    let word = sigs.word(cs, dev, sig, &w.tys[..n]);
    let n = if absent { w.compact(n) } else { n };
    emit(dev, word, ctx, &w, n);
}

/// An event (one of tokio's waker events: its wake, if it is one, [`crate::wake`]); a
/// snapshot asked for if its level is `snapshot_on` or more severe.
#[inline]
pub(crate) fn event(dev: &'static Writer, event: &Event<'_>, snapshot_on: LevelFilter) {
    let cs = crate::callsite::of(dev, event.metadata());
    if let Some(word) = cs.wake {
        crate::wake::event(dev, word, event);
    } else if cs.enabled() {
        with_fields(dev, cs, &cs.fields, &[], |v| event.record(v));
    }
    // An event `ctl` disabled still asks: the snapshot is of what the device holds.
    #[cfg(feature = "snapshots")]
    if *event.metadata().level() <= snapshot_on {
        ttrace_snapshots::trigger(&crate::reason::of(event));
    }
    #[cfg(not(feature = "snapshots"))]
    let _ = snapshot_on;
}

/// A span instance's `new`: its id, its parent's (0: a root), its fields.
#[inline]
pub(crate) fn new_span(
    dev: &'static Writer,
    cs: &Callsite,
    id: u64,
    parent: u64,
    attrs: &Attributes<'_>,
) {
    if cs.enabled() {
        with_fields(dev, cs, &cs.fields, &[id, parent], |v| attrs.record(v));
    }
}

/// Fields recorded into span `id` after its creation.
#[inline]
pub(crate) fn record(dev: &'static Writer, cs: &Callsite, id: u64, values: &Record<'_>) {
    if let (Some(sigs), true) = (&cs.record, cs.enabled()) {
        with_fields(dev, cs, sigs, &[id], |v| values.record(v));
    }
}

/// A step of span `id` whose only argument is its id (`enter`, `exit`, `close`).
#[inline]
pub(crate) fn step(dev: &'static Writer, cs: &Callsite, role: Role, id: u64) {
    let word = cs.step(role);
    if word != 0 {
        dev.emit(word, ttrace_core::thread_context(dev), &[id]);
    }
}

/// Span `id` follows from span `follows`.
#[inline]
pub(crate) fn follows(dev: &'static Writer, cs: &Callsite, id: u64, follows: u64) {
    let word = cs.step(Role::SpanFollows);
    if word != 0 {
        dev.emit(word, ttrace_core::thread_context(dev), &[id, follows]);
    }
}
