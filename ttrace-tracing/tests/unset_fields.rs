//! A field declared and not recorded (`Empty`, `#[instrument(fields(n))]` before
//! `Span::record`) is shown as unset and counted as nothing lost; a string the aux buffer
//! no longer holds is still `<lost>`, and counted. A process of its own: its own device, its
//! aux buffers as small as they can be.

use tracing::field::Empty;
use tracing_subscriber::prelude::*;

/// `dump` of the device in `dir`: its event lines, and its footer.
fn dump(dir: &std::path::Path) -> (Vec<String>, String) {
    let dev = devttrace::Reader::open(dir).unwrap();
    let out = ttrace_reader::decode::text(&dev).unwrap();
    let text = out;
    let footer = text
        .lines()
        .rfind(|l| l.contains(" strings lost"))
        .expect("a footer")
        .to_string();
    (text.lines().map(str::to_string).collect(), footer)
}

/// The number before `what` in `footer` (`..., 0 strings lost`).
fn count_before(footer: &str, what: &str) -> u64 {
    let head = &footer[..footer.find(what).expect(footer)];
    head.rsplit([' ', '(']).next().unwrap().parse().unwrap()
}

#[tracing::instrument(target = "unset", skip_all, fields(n, found))]
fn lookup(key: u64) -> u64 {
    if key % 2 == 0 {
        tracing::Span::current().record("found", key * 10);
    }
    key
}

#[test]
fn unset_fields_show_as_unset_and_lost_strings_as_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    ttrace_core::init(&ttrace_core::Config {
        ring_slots: 1 << 14,
        aux_bytes: 16 << 10,
        cpus: Some(1),
        calibration: std::time::Duration::from_millis(2),
        ..ttrace_core::Config::at(&dir)
    })
    .unwrap();
    let _guard = tracing_subscriber::registry()
        .with(ttrace_tracing::layer())
        .set_default();

    // A span with a field never recorded and one recorded later, as tower-http's
    // `response_headers` and `#[instrument(fields(n))]` have them.
    let span =
        tracing::info_span!(target: "unset", "request", id = 7u64, headers = Empty, status = Empty);
    span.in_scope(|| tracing::info!(target: "unset", inside = true, "handling"));
    span.record("status", 200u64);
    drop(span);
    lookup(1);
    lookup(2);
    // An event with an `Empty` field.
    tracing::info!(target: "unset", n = 1u64, e = Empty, "an event");

    let (lines, footer) = dump(&dir);
    let find =
        |needle: &str| -> Vec<&String> { lines.iter().filter(|l| l.contains(needle)).collect() };
    let ends = |needle: &str, end: &str| {
        let found = find(needle);
        assert_eq!(found.len(), 1, "{needle}: {lines:#?}");
        assert!(found[0].ends_with(end), "{}", found[0]);
    };
    ends(
        "unset::request new(",
        " id=7 headers=<unset> status=<unset>)",
    );
    // A `record` names what it recorded, nothing else.
    ends("unset::request record(", " status=200)");
    assert!(find("unset::request record(")[0].contains("(span=0x"));
    let news = find("unset::lookup new(");
    assert_eq!(news.len(), 2, "{lines:#?}");
    for new in &news {
        assert!(new.ends_with(" n=<unset> found=<unset>)"), "{new}");
    }
    ends("unset::lookup record(", " found=20)");
    ends("unset::an_event(", "(message=\"an event\" n=1 e=<unset>)");
    assert!(!lines.iter().any(|l| l.contains("<lost>")), "{lines:#?}");
    assert_eq!(count_before(&footer, " strings lost"), 0, "{footer}");

    // Strings the aux buffer no longer holds: `<lost>`, each counted, the unset fields still
    // not. Each event's string is larger than a 16th of an aux buffer: a thousand of them
    // overwrite the first many times over, whichever of the CPU's two rings they went to.
    // (A string the aux buffer refuses is recorded as `AUX_NONE`, which no record has:
    // readers take it for one overwritten.)
    let long = "x".repeat(1000);
    for i in 0..1000u64 {
        tracing::info!(target: "wrap", i, s = long.as_str());
    }
    let (lines, footer) = dump(&dir);
    let shown: usize = lines.iter().map(|l| l.matches("<lost>").count()).sum();
    let counted = count_before(&footer, " strings lost");
    assert!(counted > 0, "{footer}");
    // (Some of the first events' messages may be among them.)
    assert_eq!(counted, shown as u64, "{footer}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("unset::request new(") && l.contains("headers=<unset>")),
        "{lines:#?}"
    );
}
