//! The snapshot rules: what makes a watcher (`ttrace-reader watch --on RULE`) or a program's
//! own saver (a rule installed by `ttrace-reader ctl on RULE`) take a snapshot. One grammar,
//! parsed into a typed [`Rule`]; [`crate::matcher`] evaluates rules over the events a
//! follower releases.
//!
//! ```text
//! event NAME                     an event of tracepoint NAME (wildcards * and ?)
//! event NAME if ARG OP VALUE     ... whose argument ARG compares so with VALUE
//!                                (OP: == != < <= > >=; VALUE: an integer, decimal, 0x hex
//!                                or negative, or for == and != on a string argument a
//!                                string, bare or "quoted")
//! latency NAME > DURATION        a pair (entry/exit, or start/stop of one stem) named NAME
//!                                longer than DURATION (5ms, 250us, 1.5s)
//! latency NAME max               a pair whose duration is a new maximum (the first pair
//!                                sets the maximum and does not fire)
//! latency NAME.PART > DURATION   ... whose part PART is longer (on_cpu, preempted,
//!                                blocked, scheduled, idle, unknown: where its time went,
//!                                `ttrace_model::anatomy`); also with max
//! lost > N/s                     more than N entries lost by the follower over the last
//!                                second
//! ```
//!
//! ```
//! use ttrace_reader::rules::{Limit, Rule};
//! let rule: Rule = "latency request > 5ms".parse()?;
//! assert_eq!(rule, Rule::Latency { name: "request".into(), part: None, limit: Limit::Over(std::time::Duration::from_millis(5)) });
//! assert_eq!(rule.to_string(), "latency request > 5ms");
//! let blocked: Rule = "latency request.blocked > 5ms".parse()?;
//! assert!(matches!(blocked, Rule::Latency { part: Some(ttrace_model::anatomy::Part::Blocked), .. }));
//! assert!("latncy request > 5ms".parse::<Rule>().is_err());
//! # Ok::<(), ttrace_reader::rules::RuleError>(())
//! ```

use devttrace::{ArgType, Metadata, TracepointInfo};
use std::fmt;
use std::time::Duration;
use ttrace_layouts::format::{Letter, Token, Tokens};
use ttrace_model::anatomy::Part;

/// A snapshot rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rule {
    /// An event of a tracepoint whose name `name` matches (wildcards `*` and `?`), and
    /// whose argument satisfies `condition`, if any.
    Event {
        /// The name, or a wildcard pattern.
        name: String,
        /// What an argument must be.
        condition: Option<Condition>,
    },
    /// A pair named `name` (its entry's or start's name) whose duration, or its part
    /// `part`, passes `limit`.
    Latency {
        /// The pair's name.
        name: String,
        /// The part of its time measured, if not the whole.
        part: Option<Part>,
        /// What duration fires.
        limit: Limit,
    },
    /// More than `per_second` entries lost over the last second.
    Lost {
        /// The rate that fires, exceeded.
        per_second: u64,
    },
}

/// What duration fires a [`Rule::Latency`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// Longer than this.
    Over(Duration),
    /// Longer than every pair of the name before (the first sets the maximum).
    Max,
}

/// `ARG OP VALUE` of an event rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// The argument's name, as the tracepoint's format names it (`argN` for an unnamed one).
    pub arg: String,
    /// The comparison.
    pub op: Op,
    /// What it is compared with.
    pub value: Value,
}

/// A comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

/// A value compared with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// An integer (an argument's word read as its type says: signed or unsigned).
    Int(i128),
    /// A string (for a string argument).
    Str(String),
}

/// What is wrong with a rule, in the words of the rule.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("rule {rule:?}: {problem}")]
pub struct RuleError {
    /// The rule as given.
    pub rule: String,
    /// What is wrong.
    pub problem: Problem,
}

impl RuleError {
    /// Whether the rule is right but names a tracepoint or pair the device does not have
    /// (yet: a program registers its tracepoints as it starts).
    pub fn is_missing_tracepoint(&self) -> bool {
        matches!(
            self.problem,
            Problem::NoTracepoint { .. } | Problem::NoPair { .. }
        )
    }

    /// The tracepoint or pair name the device lacks (empty for another problem).
    pub fn name(&self) -> &str {
        match &self.problem {
            Problem::NoTracepoint { name, .. } | Problem::NoPair { name, .. } => name,
            _ => "",
        }
    }

    /// Of the names the device has, the one nearest the name it lacks, if one is near
    /// enough to be what was meant (a typo: a few letters apart).
    pub fn nearest(&self) -> Option<&str> {
        let (name, known) = match &self.problem {
            Problem::NoTracepoint { name, known } => (name, known),
            Problem::NoPair { name, pairs } => (name, pairs),
            _ => return None,
        };
        let near = (name.chars().count() / 4).max(2);
        known
            .iter()
            .map(|k| (edit_distance(name, k), k))
            .filter(|&(d, _)| d <= near)
            .min()
            .map(|(_, k)| k.as_str())
    }
}

/// The edit distance (insertions, deletions, substitutions) between two short words.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diagonal + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// What is wrong with a rule.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// It does not begin with a kind of rule.
    #[error("{found}: a rule begins with event, latency or lost")]
    Kind {
        /// What it begins with (empty: nothing).
        found: String,
    },
    /// A word was expected and something else (or nothing) came.
    #[error("expected {expected} {}", found.as_deref().map_or("at the end".to_string(), |f| format!("where {f:?} is")))]
    Expected {
        /// What the grammar wanted there.
        expected: &'static str,
        /// What came (`None`: the rule ended).
        found: Option<String>,
    },
    /// The rule ends where a comparison should come: typed unquoted, its `>` (or `<`) was
    /// the shell's redirection.
    #[error(
        "the rule ends where {expected} should come; if it was typed unquoted, the shell took \
         its > or < for a redirection (and may have made a file named after what followed): \
         quote the whole rule, as in 'latency request > 20ms'"
    )]
    Cut {
        /// What the grammar wanted there.
        expected: &'static str,
    },
    /// Not a duration.
    #[error("{0:?} is not a duration (a number and a unit: ns, us, ms, s, m)")]
    Duration(String),
    /// Not a number.
    #[error("{0:?} is not {1}")]
    Number(String, &'static str),
    /// No tracepoint of the device has the name (or matches the pattern).
    #[error("no tracepoint {name}; the device has {}", list(known))]
    NoTracepoint {
        /// The name given.
        name: String,
        /// The tracepoints the device has.
        known: Vec<String>,
    },
    /// No pair has the name.
    #[error(
        "no pair {name} (an entry's name, or a start's with a stop of its stem); pairs: {}",
        list(pairs)
    )]
    NoPair {
        /// The name given.
        name: String,
        /// The pairs the device has.
        pairs: Vec<String>,
    },
    /// No tracepoint the rule names has the argument.
    #[error("{tracepoint} has no argument {arg}; it has {}", list(known))]
    NoArgument {
        /// The tracepoint (or pattern).
        tracepoint: String,
        /// The argument given.
        arg: String,
        /// Its arguments.
        known: Vec<String>,
    },
    /// A string compared by order, or with a number, or a number with a string.
    #[error("{arg} is {what}: {why}")]
    Mismatch {
        /// The argument.
        arg: String,
        /// What kind of argument it is.
        what: &'static str,
        /// What it can be compared with.
        why: &'static str,
    },
}

/// `items` as a list: `a, b, c`, or `none`.
fn list(items: &[String]) -> String {
    match items.is_empty() {
        true => "none".to_string(),
        false => items.join(", "),
    }
}

impl std::str::FromStr for Rule {
    type Err = RuleError;

    fn from_str(text: &str) -> Result<Rule, RuleError> {
        let fail = |problem| RuleError {
            rule: text.trim().to_string(),
            problem,
        };
        let mut words = Words::new(text).map_err(&fail)?;
        let rule = match words.next().as_deref() {
            Some("event") => {
                let name = words.name("a tracepoint name after event").map_err(&fail)?;
                let condition = match words.next() {
                    None => None,
                    Some(w) if w == "if" => Some(condition(&mut words).map_err(&fail)?),
                    Some(w) => {
                        return Err(fail(Problem::Expected {
                            expected: "if ARG OP VALUE after the name",
                            found: Some(w),
                        }))
                    }
                };
                Rule::Event { name, condition }
            }
            Some("latency") => {
                let name = words.name("a pair's name after latency").map_err(&fail)?;
                let limit = match words.next().as_deref() {
                    Some("max") => Limit::Max,
                    Some(">") => {
                        let rest = words.rest();
                        let d = rule_duration(&rest).map_err(&fail)?;
                        Limit::Over(d)
                    }
                    None => {
                        return Err(fail(Problem::Cut {
                            expected: "> DURATION or max after the pair's name",
                        }))
                    }
                    other => {
                        return Err(fail(Problem::Expected {
                            expected: "> DURATION or max after the pair's name",
                            found: other.map(str::to_string),
                        }))
                    }
                };
                // `request.blocked`: a part of the pair's time. A name whose last dot is not
                // followed by a part's name is a name (`runtime.spawn`).
                let (name, part) = match name.rsplit_once('.') {
                    Some((n, p)) if !n.is_empty() => match Part::from_name(p) {
                        Some(part) => (n.to_string(), Some(part)),
                        None => (name, None),
                    },
                    _ => (name, None),
                };
                Rule::Latency { name, part, limit }
            }
            Some("lost") => {
                words.expect(">", "> N/s after lost").map_err(&fail)?;
                let rest = words.rest();
                let n = rest
                    .strip_suffix("/s")
                    .and_then(|n| n.trim().parse::<u64>().ok())
                    .ok_or_else(|| {
                        fail(Problem::Number(
                            rest.clone(),
                            "a rate (a number of entries, then /s)",
                        ))
                    })?;
                Rule::Lost { per_second: n }
            }
            other => {
                return Err(fail(Problem::Kind {
                    found: other.unwrap_or("nothing").to_string(),
                }))
            }
        };
        if let Some(w) = words.next() {
            return Err(fail(Problem::Expected {
                expected: "the end of the rule",
                found: Some(w),
            }));
        }
        Ok(rule)
    }
}

/// A duration of a rule: [`crate::policy::parse_duration`].
fn rule_duration(text: &str) -> Result<Duration, Problem> {
    crate::policy::parse_duration(text).ok_or_else(|| Problem::Duration(text.to_string()))
}

/// `ARG OP VALUE`, after `if`.
fn condition(words: &mut Words) -> Result<Condition, Problem> {
    let arg = words.name("an argument's name after if")?;
    let op = match words.next().as_deref() {
        Some("==") => Op::Eq,
        Some("!=") => Op::Ne,
        Some("<") => Op::Lt,
        Some("<=") => Op::Le,
        Some(">") => Op::Gt,
        Some(">=") => Op::Ge,
        None => {
            return Err(Problem::Cut {
                expected: "a comparison (== != < <= > >=) after the argument",
            })
        }
        other => {
            return Err(Problem::Expected {
                expected: "a comparison (== != < <= > >=) after the argument",
                found: other.map(str::to_string),
            })
        }
    };
    let value = match words.next_value() {
        Some((text, true)) => Value::Str(text),
        Some((text, false)) => match integer(&text) {
            Some(n) => Value::Int(n),
            None if matches!(op, Op::Eq | Op::Ne) => Value::Str(text),
            None => {
                return Err(Problem::Number(
                    text,
                    "an integer (decimal, 0x hex, or negative)",
                ))
            }
        },
        None => {
            return Err(Problem::Expected {
                expected: "a value after the comparison",
                found: None,
            })
        }
    };
    if matches!(value, Value::Str(_)) && !matches!(op, Op::Eq | Op::Ne) {
        return Err(Problem::Number(
            value_text(&value),
            "an integer (strings compare by == and != only)",
        ));
    }
    Ok(Condition { arg, op, value })
}

/// An integer: decimal, `0x` hex, with an optional `-`.
fn integer(text: &str) -> Option<i128> {
    let (neg, digits) = match text.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, text),
    };
    let n = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16).ok()?,
        None => digits.parse::<u64>().ok()?,
    } as i128;
    Some(if neg { -n } else { n })
}

fn value_text(v: &Value) -> String {
    match v {
        Value::Int(n) => n.to_string(),
        Value::Str(s) => s.clone(),
    }
}

/// A rule's words: names and values, operators (`==`, `>`...), quoted strings.
struct Words {
    words: std::vec::IntoIter<(String, bool)>,
}

impl Words {
    fn new(text: &str) -> Result<Words, Problem> {
        let mut words = Vec::new();
        let mut chars = text.chars().peekable();
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() {
                chars.next();
            } else if c == '"' {
                chars.next();
                let mut s = String::new();
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some(c) => s.push(c),
                        None => {
                            return Err(Problem::Expected {
                                expected: "a closing \"",
                                found: None,
                            })
                        }
                    }
                }
                words.push((s, true));
            } else if "=!<>".contains(c) {
                let mut s = String::new();
                while let Some(&c) = chars.peek().filter(|c| "=!<>".contains(**c)) {
                    s.push(c);
                    chars.next();
                }
                words.push((s, false));
            } else {
                let mut s = String::new();
                while let Some(&c) = chars
                    .peek()
                    .filter(|c| !c.is_whitespace() && !"=!<>\"".contains(**c))
                {
                    s.push(c);
                    chars.next();
                }
                words.push((s, false));
            }
        }
        Ok(Words {
            words: words.into_iter(),
        })
    }

    /// The next word (a quoted string's text too).
    fn next(&mut self) -> Option<String> {
        self.words.next().map(|w| w.0)
    }

    /// The next word, and whether it was quoted.
    fn next_value(&mut self) -> Option<(String, bool)> {
        self.words.next()
    }

    /// The next word, which must be a name (not an operator, not quoted).
    fn name(&mut self, expected: &'static str) -> Result<String, Problem> {
        match self.words.next() {
            Some((w, false)) if !w.starts_with(|c: char| "=!<>".contains(c)) => Ok(w),
            other => Err(Problem::Expected {
                expected,
                found: other.map(|w| w.0),
            }),
        }
    }

    /// The next word, which must be `word`.
    fn expect(&mut self, word: &str, expected: &'static str) -> Result<(), Problem> {
        match self.next() {
            Some(w) if w == word => Ok(()),
            other => Err(Problem::Expected {
                expected,
                found: other,
            }),
        }
    }

    /// The words left, joined by nothing (`5 ms` is `5ms`).
    fn rest(&mut self) -> String {
        self.words.by_ref().map(|w| w.0).collect()
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        })
    }
}

impl fmt::Display for Rule {
    /// The rule in its canonical words (what a snapshot's reason and `TTRACE_RULE` say).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::Event { name, condition } => {
                write!(f, "event {name}")?;
                if let Some(c) = condition {
                    write!(f, " if {} {} ", c.arg, c.op)?;
                    match &c.value {
                        Value::Int(n) => write!(f, "{n}")?,
                        Value::Str(s) => write!(f, "{s:?}")?,
                    }
                }
                Ok(())
            }
            Rule::Latency { name, part, limit } => {
                let part = part.map_or(String::new(), |p| format!(".{}", p.name()));
                match limit {
                    Limit::Over(d) => write!(f, "latency {name}{part} > {}", duration(*d)),
                    Limit::Max => write!(f, "latency {name}{part} max"),
                }
            }
            Rule::Lost { per_second } => write!(f, "lost > {per_second}/s"),
        }
    }
}

/// A duration in the largest unit that shows it whole (`5ms`, `250us`, `1500ms`).
pub fn duration(d: Duration) -> String {
    let ns = d.as_nanos();
    for (unit, per) in [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)] {
        if ns >= per && ns % per == 0 {
            return format!("{}{unit}", ns / per);
        }
    }
    format!("{ns}ns")
}

/// A measured duration, three figures: `950ns`, `12.3us`, `20.3ms`, `1.20s`.
pub fn approx(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns}ns"),
        1_000..=999_999 => format!("{:.1}us", ns as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.1}ms", ns as f64 / 1e6),
        _ => format!("{:.2}s", ns as f64 / 1e9),
    }
}

/// What an argument's word holds, as its format and recorded type say: how it compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// An unsigned integer (also hex, bool, char, a value table's unsigned value).
    Unsigned,
    /// A signed integer.
    Signed,
    /// A float (the word's bits as an `f64`).
    Float,
    /// A string in the aux buffer.
    Str,
}

impl ArgKind {
    /// Whether an argument of this kind compares with `value`; else what it is, and why not.
    pub fn compares_with(self, value: &Value) -> Result<(), (&'static str, &'static str)> {
        match (self, value) {
            (ArgKind::Str, Value::Int(_)) => Err((
                "a string",
                "compare it with a string, by == or != (\"text\")",
            )),
            (ArgKind::Str, Value::Str(_)) | (_, Value::Int(_)) => Ok(()),
            (_, Value::Str(_)) => Err(("a number", "compare it with an integer")),
        }
    }
}

/// The arguments of tracepoint `t`: their names (as exports and `report --by` name them:
/// [`ttrace_model::arguments::names`]) and kinds.
pub fn arguments(t: &TracepointInfo) -> Vec<(String, ArgKind)> {
    let kinds = Tokens::new(&t.format).filter_map(|token| {
        let Token::Arg { index, spec, .. } = token else {
            return None;
        };
        let ty = t.types.get(index).copied().unwrap_or_default();
        let signed = ty.shown_as() == ArgType::Signed;
        let letter = match spec.is_empty() {
            true => Letter::of_type(ty),
            // A value table's name: its word is an integer of the argument's type.
            false => Letter::of(spec.as_bytes()).unwrap_or(match signed {
                true => Letter::Signed,
                false => Letter::Unsigned,
            }),
        };
        Some(match letter {
            Letter::Signed => ArgKind::Signed,
            Letter::Float => ArgKind::Float,
            Letter::Str => ArgKind::Str,
            _ => ArgKind::Unsigned,
        })
    });
    ttrace_model::arguments::names(&t.format)
        .into_iter()
        .zip(kinds)
        .collect()
}

impl Rule {
    /// The ids of the tracepoints of `meta` whose events the rule reads: an event rule's
    /// that its name matches, a latency rule's named as its pair (none for `lost`).
    pub fn tracepoints(&self, meta: &Metadata) -> Vec<u16> {
        let named = |matches: &dyn Fn(&str) -> bool| {
            (0..meta.tracepoints.len())
                .filter(|&i| matches(&meta.tracepoints[i].name))
                .map(|i| i as u16)
                .collect()
        };
        match self {
            Rule::Event { name, .. } => {
                let pattern = wildmatch::WildMatch::new(name);
                named(&|n| pattern.matches(n))
            }
            Rule::Latency { name, .. } => named(&|n| n == name),
            Rule::Lost { .. } => Vec::new(),
        }
    }

    /// Checks the rule against the tracepoints of `meta`: the names it gives must be the
    /// device's (a typo is an error naming what there is), its argument one of the
    /// tracepoint's, its value of the argument's kind.
    pub fn check(&self, meta: &Metadata) -> Result<(), RuleError> {
        let fail = |problem| RuleError {
            rule: self.to_string(),
            problem,
        };
        match self {
            Rule::Event { name, condition } => {
                let pattern = wildmatch::WildMatch::new(name);
                let ids: Vec<usize> = (0..meta.tracepoints.len())
                    .filter(|&i| pattern.matches(&meta.tracepoints[i].name))
                    .collect();
                if ids.is_empty() {
                    let mut known: Vec<String> =
                        meta.tracepoints.iter().map(|t| t.name.clone()).collect();
                    known.sort();
                    known.dedup();
                    return Err(fail(Problem::NoTracepoint {
                        name: name.clone(),
                        known,
                    }));
                }
                let Some(c) = condition else { return Ok(()) };
                let mut known = Vec::new();
                let mut found = None;
                for &id in &ids {
                    let args = arguments(&meta.tracepoints[id]);
                    match args.iter().find(|a| a.0 == c.arg) {
                        Some(a) => {
                            found = Some(a.1);
                            break;
                        }
                        None => known.extend(args.into_iter().map(|a| a.0)),
                    }
                }
                let Some(kind) = found else {
                    known.sort();
                    known.dedup();
                    return Err(fail(Problem::NoArgument {
                        tracepoint: name.clone(),
                        arg: c.arg.clone(),
                        known,
                    }));
                };
                kind.compares_with(&c.value).map_err(|(what, why)| {
                    fail(Problem::Mismatch {
                        arg: c.arg.clone(),
                        what,
                        why,
                    })
                })
            }
            Rule::Latency { name, .. } => {
                // An entry's or a start's name, or the stem a start and a stop share.
                let mut pairs = ttrace_model::pairs::pair_names(meta);
                let stems = ttrace_model::pairs::Stems::new(&meta.tracepoints);
                let paired = stems.names.iter().zip(&stems.paired).filter(|s| *s.1);
                pairs.extend(paired.map(|s| s.0.clone()));
                pairs.sort();
                pairs.dedup();
                match pairs.contains(name) {
                    true => Ok(()),
                    false => Err(fail(Problem::NoPair {
                        name: name.clone(),
                        pairs,
                    })),
                }
            }
            Rule::Lost { .. } => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Rule, String> {
        s.parse::<Rule>().map_err(|e| e.to_string())
    }

    #[test]
    fn every_form_parses_and_prints_back() {
        for (text, canonical) in [
            ("event request_failed", "event request_failed"),
            ("event  req*  ", "event req*"),
            (
                "event request_done if status != 0",
                "event request_done if status != 0",
            ),
            (
                "event request_done if status!=-3",
                "event request_done if status != -3",
            ),
            ("event x if n >= 0x10", "event x if n >= 16"),
            (
                "event open if path == \"/etc/passwd\"",
                "event open if path == \"/etc/passwd\"",
            ),
            (
                "event open if path == passwd",
                "event open if path == \"passwd\"",
            ),
            ("latency request > 5ms", "latency request > 5ms"),
            ("latency request>250 us", "latency request > 250us"),
            ("latency request max", "latency request max"),
            (
                "latency request.blocked > 5ms",
                "latency request.blocked > 5ms",
            ),
            (
                "latency request.scheduled max",
                "latency request.scheduled max",
            ),
            ("latency runtime.spawn > 1ms", "latency runtime.spawn > 1ms"),
            ("lost > 1000/s", "lost > 1000/s"),
        ] {
            let rule = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(rule.to_string(), canonical);
            assert_eq!(parse(canonical), Ok(rule));
        }
        assert_eq!(
            parse("event x if n < -5"),
            Ok(Rule::Event {
                name: "x".into(),
                condition: Some(Condition {
                    arg: "n".into(),
                    op: Op::Lt,
                    value: Value::Int(-5)
                })
            })
        );
    }

    #[test]
    fn a_missing_name_is_matched_with_the_nearest_one_the_device_has() {
        let e = |name: &str| RuleError {
            rule: format!("latency {name} > 20ms"),
            problem: Problem::NoPair {
                name: name.into(),
                pairs: vec!["svc::work".into(), "tower_http::request".into()],
            },
        };
        assert_eq!(e("svc::wrok").nearest(), Some("svc::work"));
        assert_eq!(e("svc::wrok").name(), "svc::wrok");
        assert_eq!(e("db::query").nearest(), None);
        assert_eq!(edit_distance("level", "levl"), 1);
    }

    #[test]
    fn mistakes_say_what_is_wrong_in_one_line() {
        for (text, says) in [
            ("", "nothing: a rule begins with event, latency or lost"),
            ("latncy request > 5ms", "latncy: a rule begins with"),
            (
                "latency request > 5 parsecs",
                "\"5parsecs\" is not a duration",
            ),
            (
                "latency request",
                "the rule ends where > DURATION or max after the pair's name should come; if it \
                 was typed unquoted, the shell took its > or < for a redirection",
            ),
            (
                "event x if status",
                "quote the whole rule, as in 'latency request > 20ms'",
            ),
            ("latency request < 5ms", "where \"<\" is"),
            ("event", "expected a tracepoint name after event at the end"),
            (
                "event x status == 0",
                "expected if ARG OP VALUE after the name where \"status\" is",
            ),
            ("event x if status = 0", "a comparison"),
            ("event x if status < abc", "\"abc\" is not an integer"),
            ("event x if status == 1 2", "expected the end of the rule"),
            ("event x if s == \"open", "a closing \""),
            ("lost > many/s", "\"many/s\" is not a rate"),
            ("lost 5/s", "expected > N/s after lost"),
        ] {
            let e = parse(text).expect_err(text);
            assert!(e.contains(says), "{text}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }
}
