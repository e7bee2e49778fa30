//! An export's walk on two cores: the merge and the event model on a thread of their own, the
//! formatting on the caller's, for exporters that render the model's steps.
//!
//! A step borrows the events it names for the length of a call ([`Step`]): the model lends
//! the event fed, or the begin it pops from its stack. To cross to the formatting thread a
//! step becomes a small record naming copies of its events in a batch (the event fed is
//! copied once, for itself and its steps; a step's boxes are moved), gathered in batches of
//! [`BATCH`] items with the items they came from; the caller lends each back as a [`Step`]
//! to its renderer. (A first version moved whole events in every record, some 280 bytes
//! each, and was slower than one thread.) The renderer sees the same calls in the same order as on one
//! thread ([`walk`] with `threads: false`), so the output is the same byte for byte: a
//! test holds each pipelined exporter to that.
//!
//! Memory: at most [`IN_FLIGHT`] batches wait, whatever the speed of the output.

use crate::merge::{Item, Merge, Message};
use devttrace::Event;
use std::sync::mpsc::{channel, sync_channel};
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
        false => on_this_thread(items, model, render),
    }
}

/// [`walk`] on the calling thread.
fn on_this_thread<'s, E>(
    mut items: Merge<'s>,
    mut model: Model,
    render: &mut impl FnMut(Walked<'_, 's>) -> Result<(), E>,
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
                render(Walked::Fed(event))
            }
            Item::Message(m) => render(Walked::Message(m)),
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

/// What crosses from the model's thread to the formatting one, beside the events its steps
/// name (a batch's [`Batch::events`]).
enum Sent<'s> {
    /// An event of ring `cpu` read (the batch's event `at`): the steps that follow are its,
    /// with `span`, until [`Sent::Fed`].
    Point {
        at: u32,
        cpu: usize,
        span: (u64, u64),
    },
    Fed,
    Message(Message<'s>),
    /// The walk's end: the steps that follow are of what was left open.
    End {
        span: (u64, u64),
    },
    Step(Owned),
}

/// Items and steps handed over at once: each step's events in `events`, which it names by
/// index (small records to move, each event copied once).
#[derive(Default)]
struct Batch<'s> {
    sent: Vec<Sent<'s>>,
    events: Vec<Event>,
}

impl Batch<'_> {
    fn with_capacity(n: usize) -> Self {
        Batch {
            sent: Vec::with_capacity(n),
            events: Vec::with_capacity(n),
        }
    }
}

/// [`walk`] with the merge and the model on a second thread.
fn pipelined<'s, E: Send>(
    mut items: Merge<'s>,
    mut model: Model,
    render: &mut impl FnMut(Walked<'_, 's>) -> Result<(), E>,
) -> Result<u64, E> {
    let (full, batches) = sync_channel::<Batch<'s>>(IN_FLIGHT);
    let (empty, spares) = channel::<Batch<'s>>();
    std::thread::scope(|scope| {
        let producer = scope.spawn(move || {
            let mut batch = Batch::with_capacity(BATCH);
            let (mut first, mut last) = (None, 0);
            // Hands the batch over once full; Err once the formatting thread stopped.
            let send = |batch: &mut Batch<'s>, done: bool| {
                if batch.sent.len() < BATCH && !done {
                    return Ok(());
                }
                let next = spares
                    .try_recv()
                    .unwrap_or_else(|_| Batch::with_capacity(BATCH));
                full.send(std::mem::replace(batch, next)).map_err(|_| ())
            };
            let walked = items.try_for_each_ref(|item| {
                first.get_or_insert(item.timestamp());
                last = last.max(item.timestamp());
                match item {
                    &Item::Point { ref event, cpu } => {
                        let span = (first.unwrap_or(event.stamp), last);
                        batch.events.push(*event);
                        let at = (batch.events.len() - 1) as u32;
                        batch.sent.push(Sent::Point { at, cpu, span });
                        model.feed(event, &mut |step| {
                            let step = owned(step, &mut batch.events, Some((event, at)));
                            batch.sent.push(Sent::Step(step));
                        });
                        batch.sent.push(Sent::Fed);
                    }
                    Item::Message(m) => batch.sent.push(Sent::Message(*m)),
                }
                send(&mut batch, false)
            });
            if walked.is_ok() {
                let span = (first.unwrap_or(0), last);
                batch.sent.push(Sent::End { span });
                model.finish(&mut |step| {
                    let step = owned(step, &mut batch.events, None);
                    batch.sent.push(Sent::Step(step));
                });
                let _ = send(&mut batch, true);
            }
            items.strings_lost()
        });
        let mut result = Ok(());
        // The event fed (its index in the batch), and the span.
        let (mut fed, mut span) = (None, (0, 0));
        'batches: for mut batch in batches.iter() {
            let events = std::mem::take(&mut batch.events);
            for sent in batch.sent.drain(..) {
                result = match sent {
                    Sent::Point { at, cpu, span: s } => {
                        (fed, span) = (Some(at as usize), s);
                        render(Walked::Point {
                            event: &events[at as usize],
                            cpu,
                        })
                    }
                    Sent::Fed => match fed.take() {
                        Some(at) => render(Walked::Fed(&events[at])),
                        None => Ok(()),
                    },
                    Sent::Message(m) => render(Walked::Message(&m)),
                    Sent::End { span: s } => {
                        (fed, span) = (None, s);
                        Ok(())
                    }
                    Sent::Step(step) => render(Walked::Step {
                        // Lent as the model would have: its events borrowed from the batch.
                        step: step.map(|i| &events[i as usize]),
                        fed: fed.map(|at| &events[at]),
                        span,
                    }),
                };
                if result.is_err() {
                    break 'batches;
                }
            }
            batch.events = events;
            batch.events.clear();
            let _ = empty.send(batch);
        }
        // Stops the model's thread, if the renderer failed: its next hand-over fails.
        drop(batches);
        let lost = producer
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        result.map(|()| lost)
    })
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
