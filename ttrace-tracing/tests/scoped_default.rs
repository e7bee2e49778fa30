//! A subscriber with the layer that is a thread's scoped default, the process's only one:
//! a rebuild of `tracing`'s interest cache made on another thread (as the `ttrace-interest`
//! thread makes one after a `ctl` change) is made for that subscriber, not for the other
//! thread's default (none), which would turn every callsite off for every layer. A process
//! of its own: `tracing` treats a process with one subscriber apart.

use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

/// The messages of the events a layer gets.
#[derive(Clone, Default)]
struct Messages(Arc<Mutex<Vec<String>>>);

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl<S: Subscriber> Layer<S> for Messages {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut m = Message(String::new());
        event.record(&mut m);
        self.0.lock().unwrap().push(m.0);
    }
}

#[test]
fn a_rebuild_on_another_thread_is_for_the_scoped_subscriber() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    ttrace_core::init(&ttrace_core::Config {
        calibration: std::time::Duration::from_millis(2),
        ..ttrace_core::Config::at(&dir)
    })
    .unwrap();
    let messages = Messages::default();
    let _scoped = tracing_subscriber::registry()
        .with(ttrace_tracing::layer())
        .with(messages.clone())
        .set_default();
    let quiet = || tracing::info!(target: "scoped", "quiet please");
    tracing::info!(target: "scoped", "before");
    quiet();

    // `ctl`, then the rebuild the layer's thread makes, on a thread of its own.
    let control = devttrace::Device::attach(&dir).unwrap();
    control.apply_text("disable scoped::quiet*").unwrap();
    std::thread::spawn(ttrace_tracing::sync_interest)
        .join()
        .unwrap();
    tracing::info!(target: "scoped", "after");
    quiet();
    assert_eq!(
        *messages.0.lock().unwrap(),
        ["before", "quiet please", "after", "quiet please"]
    );
    assert_eq!(
        tracing::level_filters::LevelFilter::current(),
        tracing::level_filters::LevelFilter::TRACE
    );
    // And ttrace took the change: the second quiet event is not in the device.
    let dev = devttrace::Reader::open(&dir).unwrap();
    let out = ttrace_reader::decode::text(&dev).unwrap();
    let text = out;
    let count = |name: &str| text.lines().filter(|l| l.contains(name)).count();
    assert_eq!(count(" scoped::quiet_please("), 1, "{text}");
    assert_eq!(count(" scoped::before("), 1, "{text}");
    assert_eq!(count(" scoped::after("), 1, "{text}");
}
