//! `layer().snapshot_on(Level::ERROR)` in a process of its own: an ERROR event asks for a
//! snapshot, its message the reason; a WARN event does not.

use tracing::Level;
use tracing_subscriber::prelude::*;

#[test]
fn an_error_event_takes_a_snapshot_with_its_message_and_a_warning_does_not() {
    let tmp = tempfile::tempdir().unwrap();
    let snaps = tmp.path().join("snapshots");
    // Set before the first trigger, which reads it (this file's only test).
    std::env::set_var("TTRACE_SNAPSHOT_DIR", &snaps);
    let w = ttrace_core::init(&ttrace_core::Config::at(tmp.path().join("dev"))).unwrap();
    let _guard = tracing_subscriber::registry()
        .with(ttrace_tracing::layer().snapshot_on(Level::ERROR))
        .set_default();
    tracing::info!(n = 1u64, "working");
    tracing::warn!("retrying");
    assert_eq!(w.device().reader().status().snapshots.triggers, 0);
    tracing::error!(code = 503u64, "payment service unreachable");
    ttrace_snapshots::settle_snapshots();
    let c = w.device().reader().status().snapshots;
    assert_eq!((c.triggers, c.saved, c.failed), (1, 1, 0));
    let files: Vec<_> = std::fs::read_dir(&snaps)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let snap = devttrace::Reader::open(&files[0]).unwrap();
    let cause = snap.cause().expect("a trigger's snapshot says why");
    assert_eq!(cause.reason(), "payment service unreachable");
    assert_eq!(cause.pid, std::process::id());
    // The error event itself is in it, before the trigger.
    let out = ttrace_reader::decode::text(&snap).unwrap();
    let dump = out;
    let error = dump.find("code=503").expect(&dump);
    let trigger = dump
        .find("trigger(\"payment service unreachable\")")
        .expect(&dump);
    assert!(error < trigger, "{dump}");
}
