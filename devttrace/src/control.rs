//! Control: the class mask and wildcard rules that decide which tracepoints record.
//!
//! A tracepoint records when `type_mask & classes != 0` *and* the rules enable its name.
//! Rules are shell-style wildcards (`*`, `?`), kept in the device header one per line as
//! `+pattern` (enable) or `-pattern` (disable); the last rule that matches a name decides,
//! and a name no rule matches is enabled. Every change happens under the metadata lock and
//! ends by recomputing each tracepoint's word, so writers in every process see the result
//! with their next load of that word.
//!
//! `info()` messages are events of a built-in tracepoint named `info`, of class
//! [`CLASS_MESSAGES`](ttrace_layouts::device::CLASS_MESSAGES) (bit 63): they are controlled
//! as any tracepoint is.

use crate::error::{Error, Result};
use crate::registry::Registry;
use crate::sync::{AtomicWord, Ordering::*};
use ttrace_layouts::device::{DeviceHeader, INFO_NAME};
use ttrace_layouts::level::Level;

/// A parsed control command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `setmask <value> <mask>`: the bits of `mask` take the values of `value`.
    SetMask {
        /// New values.
        value: u64,
        /// Which bits change.
        mask: u64,
    },
    /// `setbits <bits>`: set these bits, keep the others (Akaros replaced the whole mask).
    SetBits(u64),
    /// `clrbits <bits>`: clear these bits, keep the others.
    ClearBits(u64),
    /// `enable <pattern>`: enable tracepoints whose names match.
    Enable(String),
    /// `disable <pattern>`: disable tracepoints whose names match.
    Disable(String),
    /// `on <rule>`: install a snapshot rule (`latency request > 5ms`), applied by the
    /// saver of each program that follows its device's rules
    /// (`ttrace_snapshots::apply_snapshot_rules`). The syntax is `ttrace_reader::rules`': `ctl` checks it
    /// before it is stored; this crate keeps it as text.
    On(String),
    /// `off <rule>`: remove that snapshot rule; `off all`: every one.
    Off(String),
    /// `reset`: mask all ones, no rules (snapshot rules included).
    Reset,
}

/// A number, or a `tracing` level's name in capitals (`DEBUG`: its class bit).
fn number(s: &str) -> Result<u64> {
    if let Some(level) = level_in_capitals(s) {
        return Ok(level.class());
    }
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(&hex.replace('_', ""), 16),
        None => s.replace('_', "").parse(),
    };
    parsed.map_err(|_| Error::BadCommand(format!("{s:?} is not a number (decimal or 0x hex)")))
}

/// The longest snapshot rule kept.
pub const MAX_SNAPSHOT_RULE: usize = 255;

fn snapshot_rule(words: &[&str]) -> Result<String> {
    let rule = words.join(" ");
    if rule.is_empty() || rule.len() > MAX_SNAPSHOT_RULE || rule.chars().any(char::is_control) {
        return Err(Error::BadCommand(format!(
            "{rule:?} is not a snapshot rule (1 to {MAX_SNAPSHOT_RULE} characters, no control characters)"
        )));
    }
    Ok(rule)
}

/// The level `s` names, written in capitals as `tracing` writes it (`INFO`; `info` is the
/// name of the messages' tracepoint, not a level).
fn level_in_capitals(s: &str) -> Option<Level> {
    Level::named(s).filter(|l| l.name() == s)
}

/// The level of `ctl level <name>`, in any case.
fn level(s: &str) -> Result<Level> {
    Level::named(s).ok_or_else(|| {
        Error::BadCommand(format!(
            "{s:?} is not a level (error, warn, info, debug, trace, or off)"
        ))
    })
}

fn pattern(s: &str) -> Result<String> {
    if s.is_empty() || s.len() > 255 || s.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(Error::BadCommand(format!(
            "{s:?} is not a pattern (1 to 255 characters, no spaces or control characters)"
        )));
    }
    Ok(s.to_string())
}

impl std::str::FromStr for Command {
    type Err = Error;

    /// Parses one command; anything malformed is an error that names the problem.
    ///
    /// ```
    /// use devttrace::control::Command;
    /// assert_eq!("setbits 0x30".parse::<Command>().unwrap(), Command::SetBits(0x30));
    /// assert!("setbits".parse::<Command>().is_err());
    /// // `tracing` levels: their class bits.
    /// let info = Command::SetMask { value: 0x700, mask: 0x1f00 };
    /// assert_eq!("level info".parse::<Command>().unwrap(), info);
    /// assert_eq!("disable DEBUG".parse::<Command>().unwrap(), Command::ClearBits(0x800));
    /// assert_eq!("clrbits TRACE".parse::<Command>().unwrap(), Command::ClearBits(0x1000));
    /// // `info`, in lower case, is the messages' tracepoint: a name.
    /// assert_eq!("disable info".parse::<Command>().unwrap(), Command::Disable("info".into()));
    /// assert!("level verbose".parse::<Command>().is_err());
    /// assert!("frobnicate 1".parse::<Command>().is_err());
    /// ```
    fn from_str(line: &str) -> Result<Command> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let usage = |u: &str| Error::BadCommand(format!("usage: {u}"));
        match words.as_slice() {
            ["setmask", v, m] => Ok(Command::SetMask {
                value: number(v)?,
                mask: number(m)?,
            }),
            ["setmask", ..] => Err(usage("setmask <value> <mask>")),
            ["setbits", b] => Ok(Command::SetBits(number(b)?)),
            ["setbits", ..] => Err(usage("setbits <bits>")),
            ["clrbits", b] => Ok(Command::ClearBits(number(b)?)),
            ["clrbits", ..] => Err(usage("clrbits <bits>")),
            ["level", l] if l.eq_ignore_ascii_case("off") => Ok(Command::SetMask {
                value: 0,
                mask: Level::MASK,
            }),
            ["level", l] => Ok(Command::SetMask {
                value: level(l)?.and_above(),
                mask: Level::MASK,
            }),
            ["level", ..] => Err(usage("level <error|warn|info|debug|trace|off>")),
            ["enable", p] => Ok(match level_in_capitals(p) {
                Some(l) => Command::SetBits(l.class()),
                None => Command::Enable(pattern(p)?),
            }),
            ["enable", ..] => Err(usage("enable <pattern>")),
            ["disable", p] => Ok(match level_in_capitals(p) {
                Some(l) => Command::ClearBits(l.class()),
                None => Command::Disable(pattern(p)?),
            }),
            ["disable", ..] => Err(usage("disable <pattern>")),
            ["on"] => Err(usage("on <snapshot rule>   (e.g. on latency request > 5ms)")),
            ["on", rule @ ..] => Ok(Command::On(snapshot_rule(rule)?)),
            ["off"] => Err(usage("off <snapshot rule> | off all")),
            ["off", rule @ ..] => Ok(Command::Off(snapshot_rule(rule)?)),
            ["reset"] => Ok(Command::Reset),
            ["reset", rest @ ..] => Err(Error::BadCommand(format!(
                "`reset` takes no arguments (given: {})",
                rest.join(" ")
            ))),
            [] => Err(Error::BadCommand("empty command".into())),
            [other, ..] => Err(Error::BadCommand(format!(
                "unknown command {other:?} (level, setmask, setbits, clrbits, enable, disable, on, off, reset)"
            ))),
        }
    }
}

/// The class mask of the device `h`.
pub fn mask(h: &DeviceHeader) -> u64 {
    h.type_mask.load_acquire()
}

/// The control state of the device `h` as text, as `ctl` prints it: `setmask 0x<mask>
/// 0xffffffffffffffff` then one `enable` / `disable` line per rule; writing these lines back
/// restores it.
pub fn text(h: &DeviceHeader) -> String {
    let mut s = format!("setmask {:#x} {:#x}\n", mask(h), u64::MAX);
    // The rules live in a shared file: a line may be empty or start with any character.
    for l in crate::rules::text(h).lines() {
        if let Some(p) = l.strip_prefix('+') {
            s += &format!("enable {p}\n");
        } else if let Some(p) = l.strip_prefix('-') {
            s += &format!("disable {p}\n");
        } else if let Some(r) = l.strip_prefix(crate::rules::SNAPSHOT) {
            s += &format!("on {r}\n");
        }
    }
    s
}

/// Whether the device `h` records a tracepoint named `name` of `classes` now: its mask has
/// one of the classes and its rules enable the name (what a registration would compute,
/// without registering). Read without the lock: a caller that must not act on a rules
/// text being changed reads [`Reader::ctl_generation`](crate::Reader::ctl_generation)
/// before and after.
pub fn enables(h: &DeviceHeader, name: &str, classes: u64) -> bool {
    mask(h) & classes != 0 && crate::rules::rules_enable(&crate::rules::text(h), name)
}

/// Whether `info()` messages record now in the device `h` (the mask has
/// [`CLASS_MESSAGES`](ttrace_layouts::device::CLASS_MESSAGES) and the rules enable `info`).
pub fn info_enabled(h: &DeviceHeader) -> bool {
    enables(h, INFO_NAME, ttrace_layouts::device::CLASS_MESSAGES)
}

/// Whether the wildcard `pattern` matches a name the registry knows: a registered
/// tracepoint's, or `info` (messages). A rule that matches nothing is still kept (the
/// tracepoints it is meant for may register later); `ctl` says so.
pub fn matches_known(registry: &Registry<'_>, pattern: &str) -> bool {
    let m = wildmatch::WildMatch::new(pattern);
    m.matches(INFO_NAME)
        || registry
            .tracepoints()
            .tracepoints
            .iter()
            .any(|t| m.matches(&t.name))
}

/// Applies `command` to the device `h` atomically with respect to every other control
/// change and tracepoint registration (under the metadata lock), then recomputes every
/// tracepoint word. Returns the number of tracepoints enabled afterwards.
pub(crate) fn apply(h: &DeviceHeader, registry: &Registry<'_>, command: &Command) -> Result<usize> {
    let guard = registry.lock()?;
    // Relaxed: the mask changes only under the lock we hold.
    let old = h.type_mask.load(Relaxed);
    let rule = |sign: char, pat: &str| -> Result<()> {
        // Later rules win, so an existing rule for the same pattern is dropped (an enable
        // or disable by the other, a snapshot rule by the same).
        let mut text: String = crate::rules::text(h)
            .lines()
            .filter(|l| {
                let snapshot = l.starts_with(crate::rules::SNAPSHOT);
                !(snapshot == (sign == crate::rules::SNAPSHOT) && l.get(1..) == Some(pat))
            })
            .map(|l| format!("{l}\n"))
            .collect();
        text.push(sign);
        text.push_str(pat);
        text.push('\n');
        crate::rules::store(h, &text)
    };
    // Release (the mask stores): a writer that loads a recomputed word needs nothing else,
    // but a reader of the mask sees the rules stored before it.
    match command {
        Command::SetMask { value, mask } => {
            h.type_mask.store((old & !mask) | (value & mask), Release)
        }
        Command::SetBits(bits) => h.type_mask.store(old | bits, Release),
        Command::ClearBits(bits) => h.type_mask.store(old & !bits, Release),
        Command::Enable(p) => rule('+', p)?,
        Command::Disable(p) => rule('-', p)?,
        Command::On(r) => rule(crate::rules::SNAPSHOT, r)?,
        Command::Off(r) => {
            let kept = crate::rules::text(h)
                .lines()
                .filter(|l| match l.strip_prefix(crate::rules::SNAPSHOT) {
                    Some(old) => r != "all" && old != r,
                    None => true,
                })
                .map(|l| format!("{l}\n"))
                .collect::<String>();
            crate::rules::store(h, &kept)?
        }
        Command::Reset => {
            h.type_mask.store(u64::MAX, Release);
            crate::rules::store(h, "")?;
        }
    }
    // Release: a reader that sees the new generation sees the change.
    h.ctl_generation.fetch_add(1, Release);
    Ok(registry.recompute(&guard))
}
