//! The grammar of a tracepoint's format string, as its record in the metadata carries it:
//! how the format names each argument word and says how to show it.
//!
//! A format names each argument with a *placeholder*, `{name}` or `{name:spec}`, in the
//! order of the words; `{{` and `}}` are literal braces. A spec is one of the [`Letter`]s, or
//! the name of a value table the tracepoint lists; without one, an argument shows as its
//! recorded [`ArgType`] says.
//!
//! The writer checks a format against this grammar when the program is compiled (the
//! functions here are `const`); readers, which may meet any bytes in a damaged file, read
//! it with [`Tokens`], which never fails: an unclosed `{` is literal text.
//!
//! ```
//! use ttrace_layouts::format::{count_args, Token, Tokens};
//! assert_eq!(count_args("fd={fd} {{literal}} n={n:x}"), 2);
//! let tokens: Vec<Token> = Tokens::new("fd={fd:x}!").collect();
//! assert_eq!(tokens, [
//!     Token::Text("fd="),
//!     Token::Arg { index: 0, name: "fd", spec: "x" },
//!     Token::Text("!"),
//! ]);
//! ```

use crate::meta::ArgType;

/// One placeholder of a format: byte ranges of the whole placeholder, its name and its spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placeholder {
    /// `{` to `}` inclusive.
    pub whole: (usize, usize),
    /// The name (may be empty).
    pub name: (usize, usize),
    /// The spec after the first `:` (empty without one).
    pub spec: (usize, usize),
}

/// The first placeholder of `format` at or after byte `from`, skipping `{{`. `Err(at)` for a
/// `{` at `at` that no `}` closes.
pub const fn next_placeholder(format: &str, from: usize) -> Result<Option<Placeholder>, usize> {
    let b = format.as_bytes();
    let mut i = from;
    while i < b.len() {
        if b[i] == b'{' {
            if i + 1 < b.len() && b[i + 1] == b'{' {
                i += 2;
                continue;
            }
            let mut j = i + 1;
            let mut colon = 0;
            while j < b.len() && b[j] != b'}' {
                if b[j] == b':' && colon == 0 {
                    colon = j;
                }
                j += 1;
            }
            if j == b.len() {
                return Err(i);
            }
            let (name, spec) = if colon == 0 {
                ((i + 1, j), (j, j))
            } else {
                ((i + 1, colon), (colon + 1, j))
            };
            return Ok(Some(Placeholder {
                whole: (i, j + 1),
                name,
                spec,
            }));
        }
        i += 1;
    }
    Ok(None)
}

/// The number of placeholders of `format` (up to an unclosed `{`, which a writer's format
/// cannot have).
///
/// ```
/// assert_eq!(ttrace_layouts::format::count_args("a={a} b={b:x} {{literal}}"), 2);
/// ```
pub const fn count_args(format: &str) -> usize {
    let mut n = 0;
    let mut from = 0;
    while let Ok(Some(p)) = next_placeholder(format, from) {
        n += 1;
        from = p.whole.1;
    }
    n
}

/// Bytes `range` of `s`.
pub const fn part(s: &str, range: (usize, usize)) -> &[u8] {
    s.as_bytes().split_at(range.1).0.split_at(range.0).1
}

/// Whether two byte strings are equal (usable in constants).
pub const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// A one-letter spec: how an argument word is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Letter {
    /// `u`: unsigned decimal.
    Unsigned,
    /// `d`: signed decimal.
    Signed,
    /// `x`: hexadecimal with `0x`.
    Hex,
    /// `f`: the word's bits as an `f64`.
    Float,
    /// `s`: a string in the aux buffer.
    Str,
    /// `b`: `false` for 0, else `true`.
    Bool,
    /// `c`: a character.
    Char,
}

impl Letter {
    /// The letters and what they mean, for messages.
    pub const LIST: &'static str =
        "u (unsigned), d (signed), x (hex), f (float), s (string), b (bool), c (char)";

    /// The letter `spec` is, if it is one.
    pub const fn of(spec: &[u8]) -> Option<Letter> {
        if spec.len() != 1 {
            return None;
        }
        Some(match spec[0] {
            b'u' => Letter::Unsigned,
            b'd' => Letter::Signed,
            b'x' => Letter::Hex,
            b'f' => Letter::Float,
            b's' => Letter::Str,
            b'b' => Letter::Bool,
            b'c' => Letter::Char,
            _ => return None,
        })
    }

    /// How an argument of type `ty` shows without a spec.
    pub const fn of_type(ty: ArgType) -> Letter {
        match ty {
            ArgType::Unknown | ArgType::Unsigned => Letter::Unsigned,
            ArgType::U8 | ArgType::U16 | ArgType::U32 => Letter::Unsigned,
            ArgType::Signed | ArgType::I8 | ArgType::I16 | ArgType::I32 => Letter::Signed,
            ArgType::Bool => Letter::Bool,
            ArgType::Float => Letter::Float,
            ArgType::Str => Letter::Str,
            ArgType::Char => Letter::Char,
            ArgType::Pointer => Letter::Hex,
        }
    }

    /// Whether this letter can show an argument of type `ty` (any, where the type is
    /// unknown).
    pub const fn fits(self, ty: ArgType) -> bool {
        use ArgType::*;
        let ty = ty.shown_as();
        match self {
            Letter::Unsigned => matches!(ty, Unsigned | Signed | Bool | Char | Pointer | Unknown),
            Letter::Signed => matches!(ty, Unsigned | Signed | Bool | Char | Unknown),
            Letter::Hex => matches!(
                ty,
                Unsigned | Signed | Bool | Char | Pointer | Float | Unknown
            ),
            Letter::Float => matches!(ty, Float | Unknown),
            Letter::Str => matches!(ty, Str | Unknown),
            Letter::Bool => matches!(ty, Unsigned | Signed | Bool | Unknown),
            Letter::Char => matches!(ty, Char | Unsigned | Unknown),
        }
    }
}

/// Whether a value table can name the values of an argument of type `ty`: integers only.
pub const fn table_fits(ty: ArgType) -> bool {
    matches!(
        ty.shown_as(),
        ArgType::Unsigned | ArgType::Signed | ArgType::Unknown
    )
}

/// A piece of a format, as [`Tokens`] reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Token<'a> {
    /// Literal text (a doubled brace comes as one brace of its own).
    Text(&'a str),
    /// The placeholder of argument `index`: its name and its spec (empty without one).
    Arg {
        /// Which argument word (0 for the first placeholder).
        index: usize,
        /// Its name.
        name: &'a str,
        /// Its spec.
        spec: &'a str,
    },
}

/// The pieces of a format in order. It reads any string: a `{` that nothing closes, and a
/// lone `}`, are literal text.
#[derive(Clone, Debug)]
pub struct Tokens<'a> {
    format: &'a str,
    at: usize,
    index: usize,
}

impl<'a> Tokens<'a> {
    /// The tokens of `format`.
    pub fn new(format: &'a str) -> Tokens<'a> {
        Tokens {
            format,
            at: 0,
            index: 0,
        }
    }
}

impl<'a> Iterator for Tokens<'a> {
    type Item = Token<'a>;

    fn next(&mut self) -> Option<Token<'a>> {
        let (f, at) = (self.format, self.at);
        if at >= f.len() {
            return None;
        }
        let Some(i) = f[at..].find(['{', '}']).map(|i| at + i) else {
            self.at = f.len();
            return Some(Token::Text(&f[at..]));
        };
        if i > at {
            self.at = i;
            return Some(Token::Text(&f[at..i]));
        }
        let b = f.as_bytes();
        // A doubled brace is one literal brace; a lone `}` is literal too.
        if b.get(i + 1) == Some(&b[i]) || b[i] == b'}' {
            self.at = i + 1 + (b.get(i + 1) == Some(&b[i])) as usize;
            return Some(Token::Text(&f[i..i + 1]));
        }
        match next_placeholder(f, i) {
            Ok(Some(p)) => {
                self.at = p.whole.1;
                self.index += 1;
                // Byte ranges between ASCII braces and colons of a `str`: on char boundaries.
                Some(Token::Arg {
                    index: self.index - 1,
                    name: &f[p.name.0..p.name.1],
                    spec: &f[p.spec.0..p.spec.1],
                })
            }
            // Unclosed: the `{` is text, and so is everything after it but doubled braces.
            _ => {
                self.at = i + 1;
                Some(Token::Text(&f[i..i + 1]))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn placeholders_are_found_with_their_specs() {
        let f = "a={a} {{lit}} b={b:x}";
        let p = next_placeholder(f, 0).unwrap().unwrap();
        assert_eq!((part(f, p.name), part(f, p.spec)), (&b"a"[..], &b""[..]));
        let q = next_placeholder(f, p.whole.1).unwrap().unwrap();
        assert_eq!((part(f, q.name), part(f, q.spec)), (&b"b"[..], &b"x"[..]));
        assert_eq!(next_placeholder(f, q.whole.1), Ok(None));
        assert_eq!(next_placeholder("x {open", 0), Err(2));
    }

    #[test]
    fn the_count_is_the_placeholders_a_reader_finds() {
        for f in ["", "a={a}", "{a{b}", "{{{a}", "{{x}} {a:q} {", "}} {a} }"] {
            let args = Tokens::new(f)
                .filter(|t| matches!(t, Token::Arg { .. }))
                .count();
            assert_eq!(count_args(f), args, "{f:?}");
        }
    }

    #[test]
    fn braces_unclosed_and_lone_are_text() {
        let text: Vec<Token> = Tokens::new("{{x}} {a:q} {").collect();
        assert_eq!(
            text,
            [
                Token::Text("{"),
                Token::Text("x"),
                Token::Text("}"),
                Token::Text(" "),
                Token::Arg {
                    index: 0,
                    name: "a",
                    spec: "q"
                },
                Token::Text(" "),
                Token::Text("{"),
            ]
        );
    }

    #[test]
    fn specs_fit_the_types_they_can_show() {
        assert!(Letter::Hex.fits(ArgType::Pointer));
        assert!(!Letter::Hex.fits(ArgType::Str));
        assert!(!Letter::Str.fits(ArgType::Signed));
        assert!(!table_fits(ArgType::Float));
        assert_eq!(Letter::of(b"x"), Some(Letter::Hex));
        assert_eq!(Letter::of(b"xx"), None);
    }
}
