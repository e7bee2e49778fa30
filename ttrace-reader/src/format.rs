//! A tracepoint's format string, parsed once and rendered for every event.

use crate::append;
use devttrace::aux::{AuxRecord, AuxSnapshots};
use devttrace::meta::ValuesInfo;
use devttrace::{ArgType, Metadata, TracepointInfo};
use std::sync::Arc;
use ttrace_layouts::format::{Letter, Token, Tokens};

/// How one argument is shown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Spec {
    /// `{name:u}`, or an unsigned or untyped argument: unsigned decimal.
    Unsigned,
    /// `{name:d}`, or a signed argument: signed decimal.
    Signed,
    /// `{name:x}`, or a pointer: hexadecimal with `0x`.
    Hex,
    /// `{name:f}`, or a float: the word's bits as an `f64`.
    Float,
    /// `{name:s}`, or a string: a string in the aux buffer.
    Str,
    /// `{name:b}`, or a `bool`: `false` for 0, else `true`.
    Bool,
    /// `{name:c}`, or a `char`: the character, quoted.
    Char,
    /// `{name:TABLE}`: the names a value table gives the word; an enum value it does not
    /// name shows as a number, signed if the argument is.
    Values {
        /// The table.
        table: Arc<ValuesInfo>,
        /// Whether the argument is signed.
        signed: bool,
    },
}

impl Spec {
    /// The spec a letter names (`u d x f s b c`, see [`Letter`]), if any.
    pub fn letter(spec: &str) -> Option<Spec> {
        Letter::of(spec.as_bytes()).map(Spec::of_letter)
    }

    /// How an argument of type `ty` shows without a spec.
    pub fn of_type(ty: ArgType) -> Spec {
        Spec::of_letter(Letter::of_type(ty))
    }

    fn of_letter(l: Letter) -> Spec {
        match l {
            Letter::Unsigned => Spec::Unsigned,
            Letter::Signed => Spec::Signed,
            Letter::Hex => Spec::Hex,
            Letter::Float => Spec::Float,
            Letter::Str => Spec::Str,
            Letter::Bool => Spec::Bool,
            Letter::Char => Spec::Char,
        }
    }
}

/// A piece of a parsed format string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// Literal text.
    Text(String),
    /// An argument: its name and how to show it.
    Arg(String, Spec),
}

/// A tracepoint's name as readers show it: a `tracing` callsite's with its level before it
/// (`INFO server::handle`), a span step's with the step after it (`server::handle enter`);
/// a native point's as it is.
///
/// ```
/// use devttrace::{Kind, Level, Role, TracepointInfo};
/// let t = TracepointInfo { name: "app::handle".into(), kind: Kind::Entry, classes: Level::Debug.class(), format: String::new(), nargs: 0, types: vec![], tables: vec![], id: 0, role: Role::SpanEnter };
/// assert_eq!(ttrace_reader::format::marked_name(&t), "DEBUG app::handle enter");
/// ```
pub fn marked_name(t: &TracepointInfo) -> String {
    let level = t.level();
    let label = match t.role {
        devttrace::Role::Point | devttrace::Role::Event => None,
        role => role.label(),
    };
    let mut s = String::with_capacity(t.name.len() + 16);
    if let Some(l) = level {
        s.push_str(l.name());
        s.push(' ');
    }
    s.push_str(&t.name);
    if let Some(l) = label {
        s.push(' ');
        s.push_str(l);
    }
    s
}

/// Parses a format string alone, as for a tracepoint recorded without types or tables.
/// `{{` and `}}` are literal braces; unknown specs show as unsigned; an unclosed `{` is
/// literal text.
///
/// ```
/// use ttrace_reader::format::{parse, Piece, Spec};
/// assert_eq!(parse("fd={fd:x}!"), vec![
///     Piece::Text("fd=".into()), Piece::Arg("fd".into(), Spec::Hex), Piece::Text("!".into())]);
/// ```
pub fn parse(format: &str) -> Vec<Piece> {
    parse_with(format, |_, spec| {
        Spec::letter(spec).unwrap_or(Spec::Unsigned)
    })
}

/// The names of `t`'s arguments (`argN` for an unnamed one, names made unique:
/// `ttrace_model::arguments::names`) with how each is shown.
pub fn named_specs(t: &TracepointInfo, meta: &Metadata) -> Vec<(String, Spec)> {
    let specs = pieces(t, meta).into_iter().filter_map(|p| match p {
        Piece::Arg(_, spec) => Some(spec),
        Piece::Text(_) => None,
    });
    ttrace_model::arguments::names(&t.format)
        .into_iter()
        .zip(specs)
        .collect()
}

/// Parses the format of tracepoint `t`: an argument without a spec shows as its recorded
/// type says, one whose spec names a value table with the table `t` recorded for it.
pub fn pieces(t: &TracepointInfo, meta: &Metadata) -> Vec<Piece> {
    parse_with(&t.format, |i, spec| {
        let ty = t.types.get(i).copied().unwrap_or_default();
        if spec.is_empty() {
            return Spec::of_type(ty);
        }
        if let Some(s) = Spec::letter(spec) {
            return s;
        }
        match t
            .tables
            .get(i)
            .copied()
            .flatten()
            .and_then(|k| meta.values.get(k))
        {
            Some(table) if table.name == spec => Spec::Values {
                table: Arc::new(table.clone()),
                signed: ty.shown_as() == ArgType::Signed,
            },
            _ => Spec::Unsigned,
        }
    })
}

/// Parses `format` with the format grammar ([`Tokens`]), asking `spec_of(argument index,
/// spec text)` how each argument shows.
fn parse_with(format: &str, mut spec_of: impl FnMut(usize, &str) -> Spec) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    for token in Tokens::new(format) {
        match token {
            Token::Text(t) => text.push_str(t),
            Token::Arg { index, name, spec } => {
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Arg(name.to_string(), spec_of(index, spec)));
            }
        }
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    pieces
}

/// Writes `pieces` with the argument words `args` to `out`. Missing words (a lost
/// continuation) show as `?`; strings no longer in the aux buffer as `<lost>`, cut ones end
/// with `...`.
///
/// ```
/// use ttrace_reader::format::{parse, render};
/// let mut out = Vec::new();
/// render(&mut out, &parse("a={a} b={b:x} c={c:d} d={d}"), &[7, 255, -3i64 as u64], &Default::default());
/// assert_eq!(String::from_utf8(out).unwrap(), "a=7 b=0xff c=-3 d=?");
/// ```
pub fn render(out: &mut Vec<u8>, pieces: &[Piece], args: &[u64], aux: &AuxSnapshots) {
    let mut next = args.iter();
    for p in pieces {
        match p {
            Piece::Text(t) => out.extend_from_slice(t.as_bytes()),
            Piece::Arg(_, spec) => match next.next() {
                None => out.push(b'?'),
                Some(&w) => word(out, spec, w, aux),
            },
        }
    }
}

/// The aux record a string argument word refers to, if the snapshot still holds it.
#[inline]
pub fn string_arg(aux: &AuxSnapshots, w: u64) -> Option<AuxRecord<'_>> {
    aux.get(w)
}

/// Writes one argument word as `spec` says.
#[inline(always)]
pub fn word(out: &mut Vec<u8>, spec: &Spec, w: u64, aux: &AuxSnapshots) {
    match spec {
        Spec::Unsigned => append::put_u64(out, w),
        Spec::Signed => append::put_i64(out, w as i64),
        Spec::Hex => append::put_hex(out, w),
        Spec::Float => {
            use std::io::Write;
            let _ = write!(out, "{}", f64::from_bits(w));
        }
        Spec::Str => match string_arg(aux, w) {
            Some(r) => {
                quoted(out, r.bytes);
                if r.truncated {
                    out.extend_from_slice(b"...");
                }
            }
            None => out.extend_from_slice(b"<lost>"),
        },
        Spec::Bool => out.extend_from_slice(if w != 0 { b"true" } else { b"false" }),
        Spec::Char => match u32::try_from(w).ok().and_then(char::from_u32) {
            Some(c) => {
                use std::io::Write;
                let _ = write!(out, "{c:?}");
            }
            None => append::put_hex(out, w),
        },
        Spec::Values { table, signed } => {
            if !table.show(out, w) {
                match signed {
                    true => append::put_i64(out, w as i64),
                    false => append::put_u64(out, w),
                }
            }
        }
    }
}

/// The bytes as a double-quoted string with Rust's escapes (invalid UTF-8 shown as U+FFFD).
pub fn quoted(out: &mut Vec<u8>, bytes: &[u8]) {
    if bytes
        .iter()
        .all(|&b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\')
    {
        out.push(b'"');
        out.extend_from_slice(bytes);
        out.push(b'"');
    } else {
        use std::io::Write;
        let _ = write!(out, "{:?}", String::from_utf8_lossy(bytes));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes() {
        for s in ["plain /path 1", "tab\there", "quote\"", "back\\slash", "é"] {
            let mut out = Vec::new();
            quoted(&mut out, s.as_bytes());
            assert_eq!(String::from_utf8(out).unwrap(), format!("{s:?}"));
        }
    }

    #[test]
    fn braces_and_unknown_specs() {
        assert_eq!(
            parse("{{x}} {a:q} {"),
            vec![
                Piece::Text("{x} ".into()),
                Piece::Arg("a".into(), Spec::Unsigned),
                Piece::Text(" {".into())
            ]
        );
    }
}
