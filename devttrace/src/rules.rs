//! The wildcard rules that enable and disable tracepoints by name, kept in the device
//! header one per line as `+pattern` (enable) or `-pattern` (disable): the last rule that
//! matches a name decides, and a name no rule matches is enabled. The same text holds the
//! snapshot rules installed with `ctl on RULE`, as `!RULE` lines ([`snapshot_rules`]),
//! which enable nothing.

use crate::error::{Error, Result};
use crate::sync::{AtomicWord, Ordering::*};
use ttrace_layouts::device::{DeviceHeader, RULES_BYTES};

/// Whether `rules` (one `+pattern` / `-pattern` per line) enable `name`.
///
/// ```
/// use devttrace::rules::rules_enable;
/// let rules = "-sched*\n+sched_switch\n";
/// assert!(rules_enable(rules, "sched_switch"));
/// assert!(!rules_enable(rules, "sched_wakeup"));
/// assert!(rules_enable(rules, "io_read"));
/// ```
pub fn rules_enable(rules: &str, name: &str) -> bool {
    rules
        .lines()
        .rev()
        .filter_map(|l| Some((l.as_bytes().first()?, l.get(1..)?)))
        .filter(|(sign, _)| matches!(sign, b'+' | b'-'))
        .find(|(_, pat)| wildmatch::WildMatch::new(pat).matches(name))
        .map(|(sign, _)| *sign == b'+')
        .unwrap_or(true)
}

/// The first character of a snapshot rule's line.
pub const SNAPSHOT: char = '!';

/// The snapshot rules in `rules` (the rules text), in the order they were installed.
///
/// ```
/// use devttrace::rules::{rules_enable, snapshot_rules};
/// let rules = "-sched*\n!latency request > 5ms\n";
/// assert_eq!(snapshot_rules(rules), ["latency request > 5ms"]);
/// assert!(rules_enable(rules, "request"));
/// ```
pub fn snapshot_rules(rules: &str) -> Vec<String> {
    rules
        .lines()
        .filter_map(|l| l.strip_prefix(SNAPSHOT))
        .map(str::to_string)
        .collect()
}

/// The rules text of the device `h`, one `+pattern` / `-pattern` per line.
pub fn text(h: &DeviceHeader) -> String {
    let len = (h.rules_len.load_acquire() as usize).min(RULES_BYTES);
    // Relaxed: rules change only under the metadata lock, and are read either under it or
    // after the Acquire load of their length.
    let bytes: Vec<u8> = h.rules[..len].iter().map(|b| b.load(Relaxed)).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Stores `text` as the rules of the device `h`; the caller holds the metadata lock.
pub(crate) fn store(h: &DeviceHeader, text: &str) -> Result<()> {
    if text.len() > RULES_BYTES {
        return Err(Error::BadCommand(format!(
            "too many rules (the rule area holds {RULES_BYTES} bytes)"
        )));
    }
    for (dst, &b) in h.rules.iter().zip(text.as_bytes()) {
        dst.store(b, Relaxed);
    }
    // Release: a reader that loads this length sees the bytes above.
    h.rules_len.store(text.len() as u64, Release);
    Ok(())
}
