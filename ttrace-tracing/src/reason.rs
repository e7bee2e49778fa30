//! The reason a snapshot is asked for on an event ([`TtraceLayer::snapshot_on`]
//! (crate::TtraceLayer::snapshot_on)): its message, else its name. Made only for an event
//! that asks: a matched event is rare, and its trigger allocates anyway.

use std::fmt::Write;
use tracing_core::field::{Field, Visit};
use tracing_core::Event;

/// Keeps the `message` field, as `tracing` formats it.
#[derive(Default)]
struct Message(Option<String>);

impl Visit for Message {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0 = Some(value.to_string());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let mut s = String::new();
            let _ = write!(s, "{value:?}");
            self.0 = Some(s);
        }
    }
}

/// `event`'s message, or, if it has none, its name (`event src/main.rs:12`).
pub(crate) fn of(event: &Event<'_>) -> String {
    let mut m = Message::default();
    event.record(&mut m);
    m.0.unwrap_or_else(|| event.metadata().name().to_string())
}
