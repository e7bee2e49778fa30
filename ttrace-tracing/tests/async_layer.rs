//! The async span tests ([`common::async_spans`]) with `ttrace_tracing::layer()` on a
//! registry.

#[path = "common/async_spans.rs"]
mod async_spans;

fn install() {
    use tracing_subscriber::prelude::*;
    tracing_subscriber::registry()
        .with(ttrace_tracing::layer())
        .init();
}
