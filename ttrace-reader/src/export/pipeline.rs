//! An export's walk off the caller's thread: the merge and the event model on a thread of
//! their own, the formatting on the caller's ([`walk`]) or, cut into parts, on every core
//! ([`walk_in_parts`]), for exporters that render the model's steps.
//!
//! A step borrows the events it names for the length of a call ([`Step`]): the model lends
//! the event fed, or the begin it pops from its stack. To cross to another thread a step
//! becomes a small record naming copies of its events in a batch (the event fed is copied
//! once, for itself and its steps; a step's boxes are moved), gathered in batches of about
//! [`BATCH`] records with the items they came from (an item's span and the end of its steps
//! follow from the order, so they are not sent); the formatting lends each back as a
//! [`Step`]. (A first version moved whole events in every record, some 280 bytes each, and
//! was slower than one thread.) The renderer sees the same calls in the same order as on
//! one thread ([`walk`] with `threads: false`), so the output is the same byte for byte: a
//! test holds each pipelined exporter to that.
//!
//! In parts, each batch is a part, formatted by a [`Parts`] of the worker that takes it,
//! and the parts' output is taken in order (`crate::ordered`). When the workers are behind,
//! the model's thread formats the part itself and sends its output in its place, so the
//! threads at work never outnumber the cores. On the calling thread alone the parts are
//! cut where the batches would be, the steps handed as the model makes them.
//!
//! Memory: at most [`IN_FLIGHT`] batches wait, whatever the speed of the output (and, in
//! parts, [`crate::ordered::AHEAD`] outputs per worker).

use crate::merge::{Item, Merge, Message};
use devttrace::Event;
use std::sync::mpsc::{channel, sync_channel, TrySendError};
use ttrace_model::model::{Model, Step};

/// Steps and items handed over at once.
pub const BATCH: usize = 4096;

/// Batches that may wait for the formatting thread.
pub const IN_FLIGHT: usize = 4;

/// Fewer items than this are walked on one thread (a second one would not pay for itself).
pub const MIN_ITEMS: usize = 1 << 16;

/// Whether this process may run on more than one core: an export's walk then takes two.
pub fn threads() -> bool {
    std::thread::available_parallelism().is_ok_and(|n| n.get() > 1)
}

/// The formatting threads [`walk_in_parts`] takes on this machine: one a core, but for the
/// core the merge and the model keep busy; 0 on one core (all on the calling thread).
pub fn workers() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get() - 1)
}

/// What the renderer is handed, in the order of the walk.
pub enum Walked<'a, 's> {
    /// An event of ring `cpu` was read: its steps follow, then [`Walked::Fed`].
    Point {
        /// The event.
        event: &'a Event,
        /// The ring it was read from.
        cpu: usize,
    },
    /// The steps of the event last read are all handed.
    Fed(&'a Event),
    /// A message was read.
    Message(&'a Message<'s>),
    /// A step of the model: of the event last read (`fed`), or, at the end, of what was
    /// still open (`fed: None`); `span`, the first and latest stamps read so far (at the
    /// end, of the whole walk).
    Step {
        /// The step.
        step: Step<&'a Event>,
        /// The event that caused it, if one did.
        fed: Option<&'a Event>,
        /// The trace's first and latest stamps so far.
        span: (u64, u64),
    },
}

/// Walks `items` through `model`, handing each item and step to `render`, on this thread
/// or, with `threads` and at least [`MIN_ITEMS`] items, with the merge and the model on a
/// second one ([`threads()`] says whether the machine has a core for it).
/// Stops at `render`'s first error. Returns the strings the items could not find (as
/// [`Merge::strings_lost`]).
pub fn walk<'s, E: Send>(
    items: Merge<'s>,
    model: Model,
    threads: bool,
    render: &mut impl FnMut(Walked<'_, 's>) -> Result<(), E>,
) -> Result<u64, E> {
    match threads && items.len() >= MIN_ITEMS {
        true => pipelined(items, model, render),
        false => on_this_thread(items, model, render, &mut |_| Ok(())),
    }
}

/// [`walk`] on the calling thread; `after` is called with each item's ring once its steps
/// are handed.
fn on_this_thread<'s, E>(
    mut items: Merge<'s>,
    mut model: Model,
    render: &mut impl FnMut(Walked<'_, 's>) -> Result<(), E>,
    after: &mut impl FnMut(usize) -> Result<(), E>,
) -> Result<u64, E> {
    let (mut first, mut last) = (None, 0);
    // A step's error, kept until the model returns (its sink cannot fail).
    let mut failed = None;
    items.try_for_each_ref(|item| {
        first.get_or_insert(item.timestamp());
        last = last.max(item.timestamp());
        match item {
            &Item::Point { ref event, cpu } => {
                render(Walked::Point { event, cpu })?;
                let span = (first.unwrap_or(event.stamp), last);
                model.feed(event, &mut |step| {
                    if failed.is_none() {
                        let fed = Some(event);
                        failed = render(Walked::Step { step, fed, span }).err();
                    }
                });
                if let Some(e) = failed.take() {
                    return Err(e);
                }
                render(Walked::Fed(event))?;
                after(cpu)
            }
            Item::Message(m) => {
                render(Walked::Message(m))?;
                after(m.cpu as usize)
            }
        }
    })?;
    let span = (first.unwrap_or(0), last);
    model.finish(&mut |step| {
        if failed.is_none() {
            failed = render(Walked::Step {
                step,
                fed: None,
                span,
            })
            .err();
        }
    });
    failed.map_or(Ok(items.strings_lost()), Err)
}

/// What crosses from the model's thread to the formatting ones, beside the events its steps
/// name (a batch's [`Batch::events`]). Small, as most of what crosses is these: an item's
/// span and the end of its steps are told by the order, not sent.
enum Sent<'s> {
    /// An event of ring `cpu` read (the batch's event `at`): the steps that follow, until
    /// the next item, are its.
    Point {
        at: u32,
        cpu: u32,
    },
    Message(Message<'s>),
    /// The walk's end: the steps that follow are of what was left open.
    End,
    Step(Owned),
}

/// Items and steps handed over at once: each step's events in `events`, which it names by
/// index (small records to move, each event copied once). An item's steps are never cut
/// from it: a batch ends after an item (or at the walk's end), so each is walked alone.
#[derive(Default)]
struct Batch<'s> {
    sent: Vec<Sent<'s>>,
    events: Vec<Event>,
    /// Per ring, whether an item of it came before the batch.
    rings_before: Vec<bool>,
    /// The walk's first stamp (`None` before its first item), and the latest before the
    /// batch's first item: each item's span follows from them.
    first: Option<u64>,
    last_before: u64,
}

impl Batch<'_> {
    fn with_capacity(n: usize) -> Self {
        Batch {
            sent: Vec::with_capacity(n),
            events: Vec::with_capacity(n),
            rings_before: Vec::new(),
            first: None,
            last_before: 0,
        }
    }

    /// Empties the batch, its memory kept for the next.
    fn clear(&mut self) {
        self.sent.clear();
        self.events.clear();
    }
}

/// A formatter of an export's walk in parts ([`walk_in_parts`]), a worker's own: it is
/// handed each part whole, from [`Parts::begin`] to [`Parts::end`], the parts in the walk's
/// order on one worker but not across workers.
///
/// The parts are the same whatever the threads (a part ends after the same items), so a
/// formatter whose output depends only on its part (its index, which rings came before,
/// and its items and steps) writes the same bytes on any number of threads; what spans
/// parts is the caller's to carry, in order.
pub trait Parts<'s> {
    /// What a part gives.
    type Out: Send;
    /// Starts part `index` (0 for the first); `rings_before`: per ring (by index), whether
    /// an item of it came in an earlier part (a ring past the end of the slice had none).
    fn begin(&mut self, index: usize, rings_before: &[bool]);
    /// An item or step of the part, in the order of the walk (as [`walk`] hands them).
    fn walked(&mut self, walked: Walked<'_, 's>);
    /// Ends the part begun: what it gave.
    fn end(&mut self) -> Self::Out;
}

/// A part of an export's walk, to be formatted on any core: the items and steps of one
/// batch, in the order of the walk, and its place among the parts.
struct Part<'s> {
    index: usize,
    batch: Batch<'s>,
}

impl<'s> Part<'s> {
    /// What `parts` makes of the part, which it empties.
    fn render<P: Parts<'s>>(&mut self, parts: &mut P) -> P::Out {
        parts.begin(self.index, &self.batch.rings_before);
        let walked = self.walk(&mut |w| {
            parts.walked(w);
            Ok::<(), std::convert::Infallible>(())
        });
        let Ok(()) = walked;
        parts.end()
    }

    /// Hands the part's items and steps to `render`, as [`walk`] would (each step with its
    /// events lent from the batch), and empties the part (a step's boxes are moved, not
    /// copied); stops at `render`'s first error.
    fn walk<E>(
        &mut self,
        render: &mut impl FnMut(Walked<'_, 's>) -> Result<(), E>,
    ) -> Result<(), E> {
        let Batch {
            sent,
            events,
            first,
            last_before,
            ..
        } = &mut self.batch;
        let (events, first) = (&*events, *first);
        // The event fed (its index in the batch), the latest stamp so far and the span.
        let (mut fed, mut last, mut span) = (None, *last_before, (0, 0));
        let mut records = sent.drain(..);
        let mut next = records.next();
        // The message handed last (lent to `render` for its call).
        let mut message;
        // One call of `render` (the renderer is inlined once).
        loop {
            let walked = match next {
                // An item or the end: the steps of the event fed before are all handed.
                Some(Sent::Point { .. } | Sent::Message(_) | Sent::End) | None if fed.is_some() => {
                    Walked::Fed(&events[fed.take().unwrap_or_default()])
                }
                None => return Ok(()),
                Some(sent) => {
                    next = records.next();
                    match sent {
                        Sent::Point { at, cpu } => {
                            let event = &events[at as usize];
                            last = last.max(event.stamp);
                            (fed, span) = (Some(at as usize), (first.unwrap_or(event.stamp), last));
                            Walked::Point {
                                event,
                                cpu: cpu as usize,
                            }
                        }
                        Sent::Message(m) => {
                            last = last.max(m.timestamp);
                            message = m;
                            Walked::Message(&message)
                        }
                        Sent::End => {
                            span = (first.unwrap_or(0), last);
                            continue;
                        }
                        Sent::Step(step) => Walked::Step {
                            // Lent as the model would have: its events borrowed from the batch.
                            step: step.map(|i| &events[i as usize]),
                            fed: fed.map(|at| &events[at]),
                            span,
                        },
                    }
                }
            };
            render(walked)?;
        }
    }
}

/// Walks `items` through `model` into batches of about [`BATCH`] records, each ending after
/// an item (the last at the walk's end), handing each to `send`; a batch is filled from
/// `spare`. Stops at `send`'s first error. Returns the strings the items could not find.
fn batches<'s, E>(
    mut items: Merge<'s>,
    mut model: Model,
    mut spare: impl FnMut() -> Batch<'s>,
    mut send: impl FnMut(Batch<'s>) -> Result<(), E>,
) -> Result<u64, E> {
    let mut batch = spare();
    // Per ring, whether an item of it was read.
    let mut read: Vec<bool> = Vec::new();
    batch.rings_before.clear();
    batch.last_before = 0;
    let (mut first, mut last) = (None, 0);
    items.try_for_each_ref(|item| {
        first.get_or_insert(item.timestamp());
        last = last.max(item.timestamp());
        let ring = match item {
            Item::Point { cpu, .. } => *cpu,
            Item::Message(m) => m.cpu as usize,
        };
        mark_read(&mut read, ring);
        match item {
            &Item::Point { ref event, cpu } => {
                batch.events.push(*event);
                let at = (batch.events.len() - 1) as u32;
                let cpu = cpu as u32;
                batch.sent.push(Sent::Point { at, cpu });
                model.feed(event, &mut |step| {
                    let step = owned(step, &mut batch.events, Some((event, at)));
                    batch.sent.push(Sent::Step(step));
                });
            }
            Item::Message(m) => batch.sent.push(Sent::Message(*m)),
        }
        if batch.sent.len() < BATCH {
            return Ok(());
        }
        let mut next = spare();
        next.rings_before.clone_from(&read);
        next.last_before = last;
        batch.first = first;
        send(std::mem::replace(&mut batch, next))
    })?;
    batch.first = first;
    batch.sent.push(Sent::End);
    model.finish(&mut |step| {
        let step = owned(step, &mut batch.events, None);
        batch.sent.push(Sent::Step(step));
    });
    send(batch)?;
    Ok(items.strings_lost())
}

/// [`walk`] with the merge and the model on a second thread.
fn pipelined<'s, E: Send>(
    items: Merge<'s>,
    model: Model,
    render: &mut impl FnMut(Walked<'_, 's>) -> Result<(), E>,
) -> Result<u64, E> {
    let (full, batches_sent) = sync_channel::<Batch<'s>>(IN_FLIGHT);
    let (empty, spares) = channel::<Batch<'s>>();
    std::thread::scope(|scope| {
        let producer = scope.spawn(move || {
            let spare = || {
                spares
                    .try_recv()
                    .unwrap_or_else(|_| Batch::with_capacity(BATCH))
            };
            // Err once the formatting thread stopped.
            batches(items, model, spare, |b| full.send(b).map_err(|_| ()))
        });
        let mut result = Ok(());
        for batch in batches_sent.iter() {
            let mut part = Part { index: 0, batch };
            result = part.walk(render);
            if result.is_err() {
                break;
            }
            part.batch.clear();
            let _ = empty.send(part.batch);
        }
        // Stops the model's thread, if the renderer failed: its next hand-over fails.
        drop(batches_sent);
        let walked = producer
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        // The producer fails only once the renderer stopped, with its error.
        result.map(|()| walked.unwrap_or_default())
    })
}

/// Walks `items` through `model` as [`walk`] does, cut into parts of about [`BATCH`]
/// records (an item and each of its steps are one), each ending after an item, the last at
/// the walk's end; each part is formatted by a [`Parts`] from `state`, and what it gives is
/// handed to `take` in the order of the walk, on the calling thread. With `workers` and at
/// least [`MIN_ITEMS`] items, the merge and the model run on a thread of their own, and the
/// parts are formatted on `workers` threads (on the calling one, for 1), the model's thread
/// formatting a part itself while they are behind; else all on the calling thread
/// ([`workers()`] says how many this machine has cores for). Stops at `take`'s first error.
/// Returns the strings the items could not find (as [`Merge::strings_lost`]).
pub fn walk_in_parts<'s, P: Parts<'s>, E>(
    items: Merge<'s>,
    model: Model,
    workers: usize,
    state: impl Fn() -> P + Sync,
    mut take: impl FnMut(P::Out) -> Result<(), E>,
) -> Result<u64, E> {
    if workers == 0 || items.len() < MIN_ITEMS {
        return in_parts_here(items, model, state(), take);
    }
    let (full, jobs) = sync_channel::<Job<'s, P::Out>>(IN_FLIGHT);
    let (empty, spares) = channel::<Batch<'s>>();
    let state = &state;
    std::thread::scope(|scope| {
        let recycle = empty.clone();
        let producer = scope.spawn(move || {
            let spare = || {
                spares
                    .try_recv()
                    .unwrap_or_else(|_| Batch::with_capacity(BATCH))
            };
            let mut index = 0;
            // Its own state, once it formats a part.
            let mut own = None;
            // Err once the formatting stopped (`in_order` dropped the jobs).
            batches(items, model, spare, |batch| {
                let part = Part { index, batch };
                index += 1;
                // The formatting is behind: this thread formats the part itself, rather than
                // wait (no thread more than cores, whichever side is the slower).
                match full.try_send(Job::Part(part)) {
                    Ok(()) => Ok(()),
                    Err(TrySendError::Full(Job::Part(mut part))) => {
                        let r = part.render(own.get_or_insert_with(state));
                        part.batch.clear();
                        let _ = recycle.send(part.batch);
                        full.send(Job::Done(r)).map_err(|_| ())
                    }
                    // Disconnected (only parts are tried, so a full channel hands one back).
                    Err(_) => Err(()),
                }
            })
        });
        let rendered = crate::ordered::in_order_on(
            workers,
            jobs,
            state,
            |s, job| match job {
                Job::Part(mut part) => {
                    let r = part.render(s);
                    part.batch.clear();
                    let _ = empty.send(part.batch);
                    r
                }
                Job::Done(r) => r,
            },
            &mut take,
        );
        let walked = producer
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        rendered.map(|()| walked.unwrap_or_default())
    })
}

/// [`walk_in_parts`] on the calling thread: the steps handed to `parts` as the model makes
/// them (nothing copied), cut where the batches of [`batches`] would be (a test compares
/// the two).
fn in_parts_here<'s, P: Parts<'s>, E>(
    items: Merge<'s>,
    model: Model,
    parts: P,
    mut take: impl FnMut(P::Out) -> Result<(), E>,
) -> Result<u64, E> {
    // Records in the part (as a batch counts them: an item, and each of its steps), and
    // per ring whether an item of it was read.
    let (records, mut index, mut read) = (std::cell::Cell::new(0), 0, Vec::<bool>::new());
    let parts = std::cell::RefCell::new(parts);
    parts.borrow_mut().begin(0, &[]);
    let walked = on_this_thread(
        items,
        model,
        &mut |w| {
            records.set(records.get() + usize::from(!matches!(w, Walked::Fed(_))));
            parts.borrow_mut().walked(w);
            Ok(())
        },
        &mut |ring| {
            mark_read(&mut read, ring);
            if records.get() >= BATCH {
                let mut p = parts.borrow_mut();
                take(p.end())?;
                index += 1;
                records.set(0);
                p.begin(index, &read);
            }
            Ok(())
        },
    )?;
    let out = parts.borrow_mut().end();
    take(out)?;
    Ok(walked)
}

/// Notes in `read` (per ring) that an item of ring `ring` was read.
fn mark_read(read: &mut Vec<bool>, ring: usize) {
    if ring >= read.len() {
        read.resize(ring + 1, false);
    }
    read[ring] = true;
}

/// What the model's thread hands the formatting: a part to format, or one it formatted
/// itself (in the same order: the jobs' order is the parts').
enum Job<'s, R> {
    Part(Part<'s>),
    Done(R),
}

/// A [`Step`] whose events are copies in a batch, named by index, to cross threads.
type Owned = Step<u32>;

/// `step`, its events copied into `events`; the event fed, kept already at its index, not
/// again.
fn owned(step: Step<&Event>, events: &mut Vec<Event>, fed: Option<(&Event, u32)>) -> Owned {
    step.map(|e| match fed {
        Some((f, at)) if std::ptr::eq(f, e) => at,
        _ => {
            events.push(*e);
            (events.len() - 1) as u32
        }
    })
}
