//! Tokio's waker events as ttrace's `task_wake`: the events a tokio built with
//! `--cfg tokio_unstable` emits, made here by hand (same target, same fields), through the
//! layer beside another layer that counts what it gets.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use tracing::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::prelude::*;
use tracing_subscriber::Layer;

/// Counts the waker events it gets.
struct Counter(&'static AtomicUsize);

impl<S: Subscriber> Layer<S> for Counter {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        if event.metadata().target() == ttrace_tracing::wake::TARGET {
            self.0.fetch_add(1, SeqCst);
        }
    }
}

/// The `dump` lines of the device at `dev` that contain `needle`.
fn dumped(dev: &std::path::Path, needle: &str) -> Vec<String> {
    let dev = devttrace::Reader::open(dev).unwrap();
    ttrace_reader::decode::text(&dev)
        .unwrap()
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_string)
        .collect()
}

#[test]
fn wakes_are_recorded_as_task_wake_and_clones_and_drops_are_not() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = tmp.path().join("dev");
    ttrace_core::init(&ttrace_core::Config {
        ring_slots: 1 << 12,
        cpus: Some(2),
        calibration: std::time::Duration::from_millis(2),
        ..ttrace_core::Config::at(&dev)
    })
    .unwrap();
    static SEEN: AtomicUsize = AtomicUsize::new(0);
    let subscriber = tracing_subscriber::registry()
        .with(ttrace_tracing::layer())
        .with(Counter(&SEEN));
    tracing::subscriber::with_default(subscriber, || {
        // As tokio's `trace!` in runtime/task/waker.rs: each op a callsite of its own.
        for _ in 0..2 {
            tracing::trace!(target: "tokio::task::waker", op = "waker.clone", task.id = 9u64);
            tracing::trace!(target: "tokio::task::waker", op = "waker.wake", task.id = 7u64);
            tracing::trace!(target: "tokio::task::waker", op = "waker.wake_by_ref", task.id = 8u64);
            tracing::trace!(target: "tokio::task::waker", op = "waker.drop", task.id = 9u64);
        }
        // Another event of the same fields but another target is an ordinary event.
        tracing::trace!(target: "not_tokio", op = "waker.wake", task.id = 5u64);
    });
    // The other layer got every one of them: ttrace filters only itself.
    assert_eq!(SEEN.load(SeqCst), 8);

    let wakes = dumped(&dev, ttrace_tracing::wake::WAKE_NAME);
    let spans: Vec<&str> = wakes
        .iter()
        .map(|l| {
            let at = l.find("span=").unwrap_or_else(|| panic!("no span= in {l}"));
            l[at..].split([' ', ')']).next().unwrap()
        })
        .collect();
    assert_eq!(
        spans,
        ["span=0x7", "span=0x8", "span=0x7", "span=0x8"],
        "the wakes in order, no clone or drop: {wakes:#?}"
    );
    // Nothing of the waker target is recorded under a name of its own.
    assert!(dumped(&dev, "tokio::task::waker").is_empty());
    // The same fields under another target are an event as any other.
    let other = dumped(&dev, "not_tokio");
    assert_eq!(other.len(), 1, "{other:#?}");
    assert!(other[0].contains("task.id=5"), "{}", other[0]);
}
