//! `info()` messages as readers show them (issue 26): a message is an event of the built-in
//! `info` tracepoint in the ring of the CPU it was written on, its text in the aux buffer.
//! So a lost message is counted as any lost entry, a text the aux buffer no longer holds
//! shows as `<lost>` and is counted in every footer, `stats` and the exports, and `--cpu`
//! keeps the messages of the CPUs it names.

use std::path::Path;
use ttrace_tests::{env_writer, reader};

/// The event lines of a dump, sorted (its `#` lines left out).
fn sorted_events(dump: &str) -> Vec<String> {
    let mut v: Vec<String> = dump
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

/// The number in `line` just before `what` (`"2000 messages"`).
fn count_before(line: &str, what: &str) -> u64 {
    let at = line
        .find(what)
        .unwrap_or_else(|| panic!("no {what:?} in {line}"));
    line[..at]
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number before {what:?} in {line}"))
}

#[test]
fn messages_whose_text_was_overwritten_are_shown_and_counted_everywhere() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    // 2,000 messages of 40 bytes (64 with the record's header) into a 16 KiB aux buffer
    // per ring: a few hundred texts stay; the rings keep every message's entry. All from
    // one CPU, so into one ring and its one buffer: the writer is started from a thread
    // pinned to it, and inherits that.
    let texts: Vec<String> = (0..2000)
        .map(|i| format!("message {i:04} {}", "m".repeat(27)))
        .collect();
    let cpu = std::thread::scope(|s| {
        s.spawn(|| {
            let cpu = ttrace_tests::pin(0);
            env_writer!(&dir)
                .env("TTRACE_AUX_SIZE", "16k")
                .env("TTRACE_RING_SLOTS", "4096")
                .args(texts.iter().map(|t| format!("info={t}")))
                .succeeds();
            cpu
        })
        .join()
        .unwrap()
    });

    let dump = reader!("dump", &dir).ok();
    let shown: Vec<&str> = dump.lines().filter(|l| l.contains(" info(")).collect();
    assert_eq!(shown.len(), 2000, "every message has its line");
    assert!(
        shown.iter().all(|l| l.contains(&format!(" cpu{cpu} "))),
        "every message written on CPU {cpu}: {shown:#?}"
    );
    let lost = shown
        .iter()
        .filter(|l| l.ends_with(" info(<lost>)"))
        .count() as u64;
    assert!(lost > 0 && lost < 2000, "{lost} texts lost of 2000");
    // The texts kept are the newest, each the one written for its place in time.
    for (line, text) in shown.iter().zip(&texts).skip(lost as usize) {
        assert!(
            line.ends_with(&format!(" info(\"{text}\")")),
            "{line} is not {text}"
        );
    }
    let footer = dump.lines().last().unwrap();
    assert_eq!(count_before(footer, " messages)"), 2000, "{footer}");
    assert_eq!(count_before(footer, " strings lost"), lost, "{footer}");
    assert_eq!(count_before(footer, " entries lost"), 0, "{footer}");

    // `stats`: the same totals, as `dump`'s last line.
    let stats = reader!("stats", &dir).ok();
    let total = stats.lines().find(|l| l.starts_with("total: ")).unwrap();
    assert_eq!(total, format!("total: {}", &footer[2..]), "{stats}");

    // The Chrome export says so in `otherData`.
    let json = tmp.path().join("trace.json");
    reader!("export", &dir, "--format", "chrome", "-o", &json).ok();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["otherData"]["messages"], 2000);
    assert_eq!(v["otherData"]["strings_lost"], lost);
    let messages = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "info");
    assert_eq!(messages.clone().count(), 2000);
    let lost_in_json = messages
        .filter(|e| e["args"]["message"] == "<lost>")
        .count() as u64;
    assert_eq!(lost_in_json, lost);
}

#[test]
fn naming_cpus_keeps_their_messages() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let args: Vec<String> = (0..50).map(|i| format!("info=note {i}")).collect();
    env_writer!(&dir).args(&args).succeeds();
    let cpus = devttrace::Reader::open(&dir).unwrap().version().num_cpus as usize;
    let all = sorted_events(&reader!("dump", &dir).ok());
    assert_eq!(
        all.iter().filter(|l| l.contains(" info(")).count(),
        50,
        "{all:#?}"
    );
    // Every CPU named: everything.
    let every: Vec<String> = (0..cpus).map(|c| c.to_string()).collect();
    let named = sorted_events(&reader!("dump", &dir, "--cpu", every.join(",")).ok());
    assert_eq!(named, all);
    // One CPU at a time: each message once.
    let mut union = Vec::new();
    for c in 0..cpus {
        union.extend(sorted_events(
            &reader!("dump", &dir, "--cpu", c.to_string()).ok(),
        ));
    }
    union.sort();
    assert_eq!(union, all);
    check_counts_agree(&dir);
}

/// `stats` counts the messages `dump` shows.
fn check_counts_agree(dir: &Path) {
    let dump = reader!("dump", dir).ok();
    let footer = dump.lines().last().unwrap().to_string();
    let stats = reader!("stats", dir).ok();
    assert!(
        stats
            .lines()
            .any(|l| l == format!("total: {}", &footer[2..])),
        "{stats}\n{footer}"
    );
}
