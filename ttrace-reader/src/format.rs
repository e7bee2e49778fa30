//! Rendering a tracepoint's format string with an event's argument words.

use std::fmt::Write;
use ttrace_core::aux::AuxSnapshot;
use ttrace_layouts::aux::{AUX_NONE, AUX_REF};

/// How one argument is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spec {
    /// `{name}`: unsigned decimal.
    Unsigned,
    /// `{name:d}`: signed decimal.
    Signed,
    /// `{name:x}`: hexadecimal with `0x`.
    Hex,
    /// `{name:f}`: the word's bits as an `f64`.
    Float,
    /// `{name:s}`: a string in the aux buffer.
    Str,
}

/// A piece of a parsed format string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// Literal text.
    Text(String),
    /// An argument: its name and how to show it.
    Arg(String, Spec),
}

/// Parses a format string. Unknown specs show as unsigned; an unclosed `{` is literal text.
///
/// ```
/// use ttrace_reader::format::{parse, Piece, Spec};
/// assert_eq!(parse("fd={fd:x}!"), vec![
///     Piece::Text("fd=".into()), Piece::Arg("fd".into(), Spec::Hex), Piece::Text("!".into())]);
/// ```
pub fn parse(format: &str) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut rest = format;
    while let Some(i) = rest.find(['{', '}']) {
        text.push_str(&rest[..i]);
        let (c, after) = (rest.as_bytes()[i], &rest[i + 1..]);
        if after.as_bytes().first() == Some(&c) {
            text.push(c as char);
            rest = &after[1..];
            continue;
        }
        if c == b'}' {
            text.push('}');
            rest = after;
            continue;
        }
        let Some(end) = after.find('}') else {
            text.push('{');
            rest = after;
            continue;
        };
        let (name, spec) = after[..end].split_once(':').unwrap_or((&after[..end], ""));
        let spec = match spec {
            "d" => Spec::Signed,
            "x" => Spec::Hex,
            "f" => Spec::Float,
            "s" => Spec::Str,
            _ => Spec::Unsigned,
        };
        if !text.is_empty() {
            pieces.push(Piece::Text(std::mem::take(&mut text)));
        }
        pieces.push(Piece::Arg(name.to_string(), spec));
        rest = &after[end + 1..];
    }
    text.push_str(rest);
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    pieces
}

/// Writes `pieces` with the argument words `args` into `out`. Missing words (a lost
/// continuation) show as `?`; strings no longer in the aux snapshot as `<lost>`.
pub fn render(out: &mut String, pieces: &[Piece], args: &[u64], aux: &AuxSnapshot) {
    let mut next = args.iter();
    for p in pieces {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Arg(_, spec) => match next.next() {
                None => out.push('?'),
                Some(&w) => {
                    let _ = match spec {
                        Spec::Unsigned => write!(out, "{w}"),
                        Spec::Signed => write!(out, "{}", w as i64),
                        Spec::Hex => write!(out, "{w:#x}"),
                        Spec::Float => write!(out, "{}", f64::from_bits(w)),
                        Spec::Str => {
                            match (w != AUX_NONE && w & AUX_REF != 0)
                                .then(|| aux.get(w & !AUX_REF))
                                .flatten()
                            {
                                Some(r) => write!(out, "{:?}", String::from_utf8_lossy(&r.bytes))
                                    .and_then(|_| {
                                        if r.truncated {
                                            write!(out, "...")
                                        } else {
                                            Ok(())
                                        }
                                    }),
                                None => write!(out, "<lost>"),
                            }
                        }
                    };
                }
            },
        }
    }
}
