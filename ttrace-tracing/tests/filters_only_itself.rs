//! The layer filters only itself: in a registry beside another layer, in either order, that
//! layer gets every callback it gets without ttrace, whatever ttrace records — everything,
//! one level (`ctl level error`), all but a name (a rule), nothing (`TTRACE_DISABLED`, `ctl
//! level off`), or nothing for want of a device (none can be opened, or the one there has
//! other sizes). Meanwhile ttrace records what its control says.
//!
//! One test in a process of its own: the states need the environment and the process's
//! device (installed once, in the middle), and `tracing`'s interest cache is the process's.

use std::path::Path;
use std::sync::{Arc, Mutex};
use tracing::field::{Empty, Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;
use tracing_subscriber::registry::LookupSpan;

/// A layer that writes down every callback it gets, spans by name.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<String>>>);

/// Fields as `name=value`.
#[derive(Default)]
struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0 += &format!(" {}={value:?}", field.name());
    }
}

impl Capture {
    fn push(&self, line: String) {
        self.0.lock().unwrap().push(line);
    }

    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

fn name<S>(id: &Id, ctx: &Context<'_, S>) -> String
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    ctx.span(id).map_or("?".into(), |s| s.name().to_string())
}

impl<S> Layer<S> for Capture
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut f = Fields::default();
        attrs.record(&mut f);
        let parent = ctx
            .span(id)
            .and_then(|s| s.parent().map(|p| p.name().to_string()));
        self.push(format!(
            "new {} {}{} parent={parent:?}",
            attrs.metadata().level(),
            attrs.metadata().name(),
            f.0
        ));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let mut f = Fields::default();
        values.record(&mut f);
        self.push(format!("record {}{}", name(id, &ctx), f.0));
    }

    fn on_follows_from(&self, id: &Id, follows: &Id, ctx: Context<'_, S>) {
        self.push(format!(
            "follows {} {}",
            name(id, &ctx),
            name(follows, &ctx)
        ));
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut f = Fields::default();
        event.record(&mut f);
        let span = ctx.event_span(event).map(|s| s.name().to_string());
        let meta = event.metadata();
        self.push(format!(
            "event {} {}{} in={span:?}",
            meta.level(),
            meta.target(),
            f.0
        ));
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        self.push(format!("enter {}", name(id, &ctx)));
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        self.push(format!("exit {}", name(id, &ctx)));
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        self.push(format!("close {}", name(&id, &ctx)));
    }
}

/// Events of every level, one ruled out by name, and spans: recorded later, entered twice,
/// following another, at DEBUG and at ERROR.
fn workload() {
    tracing::error!(target: "w", code = 1u64, "error event");
    tracing::warn!(target: "w", "warn event");
    tracing::info!(target: "w", n = 2u64, s = "text", "info event");
    tracing::debug!(target: "w", "debug event");
    tracing::trace!(target: "w", "trace event");
    tracing::info!(target: "w::off", "ruled out");
    let outer = tracing::info_span!(target: "w", "outer", id = 7u64, later = Empty);
    outer.in_scope(|| {
        tracing::info!(target: "w", "inside");
        let inner = tracing::debug_span!(target: "w", "inner", k = 1u64);
        inner.follows_from(&outer);
        inner.in_scope(|| tracing::trace!(target: "w", "deep"));
    });
    outer.in_scope(|| {});
    outer.record("later", 5u64);
    drop(outer);
    tracing::error_span!(target: "w", "failing")
        .in_scope(|| tracing::error!(target: "w", "inside error span"));
}

/// What each stack's capture got, in each order of the layers: the same as alone, which is
/// returned.
fn captured_alike(state: &str) -> Vec<String> {
    captured_alike_up_to(state, LevelFilter::TRACE)
}

/// [`captured_alike`] with the layer's maximum level `max`.
fn captured_alike_up_to(state: &str, max: LevelFilter) -> Vec<String> {
    let capture = Capture::default();
    tracing::subscriber::with_default(
        tracing_subscriber::registry().with(capture.clone()),
        workload,
    );
    let alone = capture.take();
    assert!(alone.len() > 20, "{alone:#?}");

    let first = tracing_subscriber::registry()
        .with(ttrace_tracing::layer().with_max_level(max))
        .with(capture.clone());
    tracing::subscriber::with_default(first, workload);
    assert_eq!(capture.take(), alone, "{state}: the ttrace layer first");

    let last = tracing_subscriber::registry()
        .with(capture.clone())
        .with(ttrace_tracing::layer().with_max_level(max));
    tracing::subscriber::with_default(last, workload);
    assert_eq!(capture.take(), alone, "{state}: the ttrace layer last");
    alone
}

/// What the device holds of the workload (`name step` for a span's steps), sorted; then it
/// is cleared.
fn recorded(dir: &Path) -> Vec<String> {
    let dev = devttrace::Reader::open(dir).unwrap();
    let out = ttrace_reader::decode::text(&dev).unwrap();
    let mut steps: Vec<String> = out
        .lines()
        .filter_map(|l| {
            let step = &l[l.find(" w::")? + 1..];
            Some(step[..step.find('(')?].to_string())
        })
        .collect();
    steps.sort();
    devttrace::Device::attach(dir).unwrap().clear().unwrap();
    steps
}

/// What a run of the workload records with every callsite on, sorted.
fn everything() -> Vec<&'static str> {
    let mut all = vec![
        "w::error_event",
        "w::warn_event",
        "w::info_event",
        "w::debug_event",
        "w::trace_event",
        "w::off::ruled_out",
        "w::inside",
        "w::deep",
        "w::inside_error_span",
        "w::outer new",
        "w::outer enter",
        "w::outer exit",
        "w::outer enter",
        "w::outer exit",
        "w::outer record",
        "w::outer close",
        "w::inner new",
        "w::inner follows",
        "w::inner enter",
        "w::inner exit",
        "w::inner close",
        "w::failing new",
        "w::failing enter",
        "w::failing exit",
        "w::failing close",
    ];
    all.sort();
    all
}

/// The two stacks with ttrace each record `expected` (each run the workload once).
fn records_twice(dir: &Path, expected: &[&str]) {
    let twice: Vec<&str> = {
        let mut v = [expected, expected].concat();
        v.sort();
        v
    };
    assert_eq!(recorded(dir), twice);
}

#[test]
fn other_layers_see_what_they_see_without_ttrace_in_every_state() {
    let tmp = tempfile::tempdir().unwrap();
    let not_a_dir = tmp.path().join("file");
    std::fs::write(&not_a_dir, "").unwrap();

    // No device can be opened.
    std::env::set_var("TTRACE_DIR", not_a_dir.join("dev"));
    assert!(ttrace_core::device_or_init().is_err());
    assert!(format!(
        "{:?}",
        ttrace_tracing::layer::<tracing_subscriber::Registry>()
    )
    .contains("device: None"));
    let alone = captured_alike("no device");

    // A device it cannot use: one of other sizes than the environment asks.
    let other = tmp.path().join("other");
    devttrace::Device::open(&devttrace::Config {
        ring_slots: 1 << 8,
        cpus: Some(1),
        calibration: std::time::Duration::from_millis(2),
        ..devttrace::Config::at(&other)
    })
    .unwrap();
    std::env::set_var("TTRACE_DIR", &other);
    std::env::set_var("TTRACE_RING_SLOTS", "1024");
    let refused = ttrace_core::device_or_init().map(|_| ()).unwrap_err();
    assert!(
        format!("{refused:?}").contains("SizeMismatch"),
        "{refused:?}"
    );
    assert_eq!(captured_alike("a device of other sizes"), alone);

    // `TTRACE_DISABLED`: the process's device, every class off.
    let dir = tmp.path().join("dev");
    std::env::set_var("TTRACE_DIR", &dir);
    std::env::remove_var("TTRACE_RING_SLOTS");
    std::env::set_var("TTRACE_DISABLED", "1");
    let w = ttrace_core::device_or_init().unwrap();
    assert_eq!(w.device().reader().mask(), 0);
    assert_eq!(captured_alike("TTRACE_DISABLED"), alone);
    assert_eq!(recorded(&dir), Vec::<String>::new());

    // `ttrace-reader ctl`, as it changes the device from another process.
    let control = devttrace::Device::attach(&dir).unwrap();
    let ctl = |command: &str| {
        control.apply_text(command).unwrap();
        ttrace_tracing::sync_interest();
    };
    ctl("level trace");
    assert_eq!(captured_alike("every level on"), alone);
    records_twice(&dir, &everything());

    ctl("level error");
    assert_eq!(captured_alike("ctl level error"), alone);
    let errors: Vec<&str> = everything()
        .into_iter()
        .filter(|s| s.contains("error") || s.contains("failing"))
        .collect();
    assert_eq!(errors.len(), 6);
    records_twice(&dir, &errors);

    ctl("level trace");
    ctl("disable w::off::*");
    assert_eq!(captured_alike("a name ruled out"), alone);
    let ruled: Vec<&str> = everything()
        .into_iter()
        .filter(|s| !s.contains("ruled_out"))
        .collect();
    records_twice(&dir, &ruled);

    // A level off, then on again.
    ctl("disable INFO");
    assert_eq!(captured_alike("INFO off"), alone);
    // The INFO events and span out (the DEBUG span inside still says it follows from it).
    let no_info: Vec<&str> = ruled
        .iter()
        .copied()
        .filter(|s| !(s.starts_with("w::outer ") || ["w::info_event", "w::inside"].contains(s)))
        .collect();
    assert_eq!(no_info.len(), ruled.len() - 9);
    records_twice(&dir, &no_info);
    ctl("enable INFO");
    assert_eq!(captured_alike("INFO on again"), alone);
    records_twice(&dir, &ruled);

    // The layer's own maximum level: no step of the DEBUG span either (its steps after
    // `new` do not go through the filter).
    assert_eq!(captured_alike_up_to("max INFO", LevelFilter::INFO), alone);
    let up_to_info: Vec<&str> = ruled
        .iter()
        .copied()
        .filter(|s| {
            !(s.starts_with("w::inner ")
                || ["w::debug_event", "w::trace_event", "w::deep"].contains(s))
        })
        .collect();
    assert_eq!(up_to_info.len(), ruled.len() - 8);
    records_twice(&dir, &up_to_info);

    ctl("level off");
    assert_eq!(captured_alike("ctl level off"), alone);
    assert_eq!(recorded(&dir), Vec::<String>::new());
}
