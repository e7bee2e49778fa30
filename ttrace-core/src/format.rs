//! Format strings, checked when the program is compiled.
//!
//! A format names each argument with a placeholder, `{name}` or `{name:spec}`; `{{` and `}}`
//! are literal braces. Without a spec an argument shows as its Rust type says (signed
//! integers signed, `bool` as `true`/`false`, floats as floats, strings quoted, `char` as
//! a character, pointers in hex). A spec says otherwise:
//!
//! | spec | shows                              | for arguments of type            |
//! |------|------------------------------------|----------------------------------|
//! | `u`  | unsigned decimal                   | integers, `bool`, `char`, pointers |
//! | `d`  | signed decimal                     | integers, `bool`, `char`         |
//! | `x`  | hex with `0x`                      | integers, `bool`, `char`, pointers, floats (their bits) |
//! | `f`  | a float                            | `f64`, `f32`                     |
//! | `s`  | a string                           | `&str`, `&[u8]`                  |
//! | `b`  | `true` / `false`                   | integers, `bool`                 |
//! | `c`  | a character                        | `char`, unsigned integers        |
//! | a [value table](crate::values)'s name | its names (`O_WRONLY\|O_CREAT`) | integers |
//!
//! [`tracepoint!`](crate::tracepoint!) rejects an unknown spec and [`point!`](crate::point!)
//! an argument whose type its spec cannot show, both with an error that names the
//! placeholder:
//!
//! ```compile_fail
//! ttrace_core::tracepoint!(static BAD: Start = "bad", "n={n:q}"); // q is no spec
//! ```
//!
//! ```compile_fail
//! ttrace_core::tracepoint!(static OPEN: Start = "open", "path={path:x}");
//! ttrace_core::point!(OPEN, "/etc/hosts"); // a string shown as hex
//! ```

use crate::values::ValueTable;
use ttrace_layouts::meta::ArgType;

/// One placeholder of a format: byte ranges of its name and spec, and where the text after
/// it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placeholder {
    /// `{` to `}` inclusive.
    pub whole: (usize, usize),
    /// The name (may be empty).
    pub name: (usize, usize),
    /// The spec after `:` (empty without one).
    pub spec: (usize, usize),
}

/// The first placeholder of `format` at or after byte `from`, skipping `{{`. `Err(at)` for
/// an unclosed `{` at `at`.
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

/// Bytes `range` of `s`.
pub const fn part(s: &str, range: (usize, usize)) -> &[u8] {
    s.as_bytes().split_at(range.1).0.split_at(range.0).1
}

/// Whether two strings are equal (usable in constants).
pub const fn same(a: &str, b: &str) -> bool {
    same_bytes(a.as_bytes(), b.as_bytes())
}

const fn same_bytes(a: &[u8], b: &[u8]) -> bool {
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

/// What a spec is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecKind {
    /// No spec: the argument's type decides.
    Default,
    /// One of the letters `u d x f s b c`.
    Letter(u8),
    /// The value table at this index of the tracepoint's tables.
    Table(usize),
    /// Not a spec.
    Unknown,
}

/// What `spec` means for a tracepoint that lists `tables`.
pub const fn spec_kind(spec: &[u8], tables: &[&ValueTable]) -> SpecKind {
    if spec.is_empty() {
        return SpecKind::Default;
    }
    if spec.len() == 1 && matches!(spec[0], b'u' | b'd' | b'x' | b'f' | b's' | b'b' | b'c') {
        return SpecKind::Letter(spec[0]);
    }
    let mut t = 0;
    while t < tables.len() {
        if same_bytes(spec, tables[t].name.as_bytes()) {
            return SpecKind::Table(t);
        }
        t += 1;
    }
    SpecKind::Unknown
}

/// Whether a spec can show an argument of type `ty`.
pub const fn fits(spec: SpecKind, ty: ArgType) -> bool {
    use ArgType::*;
    match spec {
        SpecKind::Default | SpecKind::Unknown => true,
        SpecKind::Table(_) => matches!(ty, Unsigned | Signed | Unknown),
        SpecKind::Letter(l) => match l {
            b'u' => matches!(ty, Unsigned | Signed | Bool | Char | Pointer | Unknown),
            b'd' => matches!(ty, Unsigned | Signed | Bool | Char | Unknown),
            b'x' => matches!(
                ty,
                Unsigned | Signed | Bool | Char | Pointer | Float | Unknown
            ),
            b'f' => matches!(ty, Float | Unknown),
            b's' => matches!(ty, Str | Unknown),
            b'b' => matches!(ty, Unsigned | Signed | Bool | Unknown),
            b'c' => matches!(ty, Char | Unsigned | Unknown),
            _ => false,
        },
    }
}

const fn type_name(ty: ArgType) -> &'static str {
    match ty {
        ArgType::Unknown => "an argument",
        ArgType::Unsigned => "an unsigned integer",
        ArgType::Signed => "a signed integer",
        ArgType::Bool => "a bool",
        ArgType::Float => "a float",
        ArgType::Str => "a string",
        ArgType::Char => "a char",
        ArgType::Pointer => "a pointer",
    }
}

/// A compile-time error message, built in a constant.
pub struct Message {
    buf: [u8; 512],
    len: usize,
}

impl Message {
    const fn new() -> Message {
        Message {
            buf: [0; 512],
            len: 0,
        }
    }

    const fn bytes(&mut self, b: &[u8]) -> &mut Message {
        let mut i = 0;
        while i < b.len() && self.len < self.buf.len() {
            self.buf[self.len] = b[i];
            self.len += 1;
            i += 1;
        }
        self
    }

    const fn text(&mut self, s: &str) -> &mut Message {
        self.bytes(s.as_bytes())
    }

    const fn number(&mut self, n: usize) -> &mut Message {
        let mut digits = [0u8; 20];
        let (mut k, mut n) = (digits.len(), n);
        loop {
            k -= 1;
            digits[k] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.bytes(digits.split_at(k).1)
    }

    /// The message so far (a cut multi-byte character is dropped).
    pub const fn as_str(&self) -> &str {
        let mut len = self.len;
        loop {
            match core::str::from_utf8(self.buf.split_at(len).0) {
                Ok(s) => return s,
                Err(_) => len -= 1,
            }
        }
    }
}

/// The letters a spec may be, for error messages.
const VALID: &str = "u (unsigned), d (signed), x (hex), f (float), s (string), b (bool), \
                     c (char), or the name of a value table listed after the format";

/// Checks a tracepoint's format against the value tables it lists; panics (a compile
/// error in a `static`) with a message naming the placeholder at fault.
pub const fn check_format(name: &str, format: &str, tables: &[&ValueTable]) {
    let mut from = 0;
    loop {
        let p = match next_placeholder(format, from) {
            Ok(Some(p)) => p,
            Ok(None) => break,
            Err(at) => {
                let mut m = Message::new();
                m.text("tracepoint `")
                    .text(name)
                    .text("`: the `{` at byte ")
                    .number(at)
                    .text(" of its format is never closed (write `{{` for a literal brace)");
                panic!("{}", m.as_str());
            }
        };
        let spec = part(format, p.spec);
        if let SpecKind::Unknown = spec_kind(spec, tables) {
            let mut m = Message::new();
            m.text("tracepoint `")
                .text(name)
                .text("`: placeholder `")
                .bytes(part(format, p.whole))
                .text("` has an unknown spec `")
                .bytes(spec)
                .text("`; a spec is one of ")
                .text(VALID);
            panic!("{}", m.as_str());
        }
        from = p.whole.1;
    }
    let mut t = 0;
    while t < tables.len() {
        if !uses(format, tables[t].name) {
            let mut m = Message::new();
            m.text("tracepoint `")
                .text(name)
                .text("` lists value table `")
                .text(tables[t].name)
                .text("` but no placeholder of its format names it");
            panic!("{}", m.as_str());
        }
        t += 1;
    }
}

/// Whether a placeholder of `format` has `table` as its spec.
const fn uses(format: &str, table: &str) -> bool {
    let mut from = 0;
    while let Ok(Some(p)) = next_placeholder(format, from) {
        if same_bytes(part(format, p.spec), table.as_bytes()) {
            return true;
        }
        from = p.whole.1;
    }
    false
}

/// Checks the types of a trace point's arguments against its tracepoint's format; panics
/// (a compile error, from [`point!`](crate::point!)) naming the first placeholder whose
/// spec cannot show its argument.
pub const fn check_args(def: &crate::meta::Definition, types: &[ArgType]) {
    if types.len() != def.nargs as usize {
        let mut m = Message::new();
        m.text("point!: tracepoint `")
            .text(def.name)
            .text("` takes ")
            .number(def.nargs as usize)
            .text(" argument(s), one per placeholder of its format, but is given ")
            .number(types.len());
        panic!("{}", m.as_str());
    }
    let (mut from, mut i) = (0, 0);
    while let Ok(Some(p)) = next_placeholder(def.format, from) {
        let spec = spec_kind(part(def.format, p.spec), def.tables);
        if i < types.len() && !fits(spec, types[i]) {
            let mut m = Message::new();
            m.text("point!: tracepoint `")
                .text(def.name)
                .text("`: placeholder `")
                .bytes(part(def.format, p.whole))
                .text("` cannot show ")
                .text(type_name(types[i]))
                .text(" (argument ")
                .number(i + 1)
                .text("); give it a spec that fits, or none to show it as its type says");
            panic!("{}", m.as_str());
        }
        from = p.whole.1;
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn messages_name_what_is_wrong() {
        let mut m = Message::new();
        m.text("n=").number(0).text(" ").number(4096);
        assert_eq!(m.as_str(), "n=0 4096");
        let r = std::panic::catch_unwind(|| check_format("tp", "a={a:q}", &[]));
        let e = r.unwrap_err();
        let msg = e.downcast_ref::<String>().unwrap();
        assert!(
            msg.contains("placeholder `{a:q}` has an unknown spec `q`"),
            "{msg}"
        );
    }

    #[test]
    fn specs_fit_the_types_they_can_show() {
        assert!(fits(SpecKind::Letter(b'x'), ArgType::Pointer));
        assert!(!fits(SpecKind::Letter(b'x'), ArgType::Str));
        assert!(!fits(SpecKind::Letter(b's'), ArgType::Signed));
        assert!(!fits(SpecKind::Table(0), ArgType::Float));
        assert!(fits(SpecKind::Default, ArgType::Str));
    }
}
