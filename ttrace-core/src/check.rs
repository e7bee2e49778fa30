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
//! | a value table (`values!`)'s name | its names (`O_WRONLY\|O_CREAT`) | integers |
//!
//! `tracepoint!` rejects an unknown spec and `point!`
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

use devttrace::meta::Definition;
use devttrace::values::ValueTable;
use ttrace_layouts::format::{next_placeholder, part, same, table_fits, Letter};
use ttrace_layouts::meta::ArgType;

/// What a spec is, for a tracepoint that lists some value tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SpecKind {
    /// No spec: the argument's type decides.
    Default,
    /// One of the letters.
    Letter(Letter),
    /// A value table the tracepoint lists.
    Table,
    /// Not a spec.
    Unknown,
}

/// What `spec` means for a tracepoint that lists `tables`.
const fn spec_kind(spec: &[u8], tables: &[&ValueTable]) -> SpecKind {
    if spec.is_empty() {
        return SpecKind::Default;
    }
    if let Some(l) = Letter::of(spec) {
        return SpecKind::Letter(l);
    }
    let mut t = 0;
    while t < tables.len() {
        if same(spec, tables[t].name.as_bytes()) {
            return SpecKind::Table;
        }
        t += 1;
    }
    SpecKind::Unknown
}

/// Whether a spec can show an argument of type `ty`.
const fn fits(spec: SpecKind, ty: ArgType) -> bool {
    match spec {
        SpecKind::Default | SpecKind::Unknown => true,
        SpecKind::Table => table_fits(ty),
        SpecKind::Letter(l) => l.fits(ty),
    }
}

const fn type_name(ty: ArgType) -> &'static str {
    match ty {
        ArgType::Unknown => "an argument",
        ArgType::Unsigned => "an unsigned integer",
        ArgType::Signed => "a signed integer",
        ArgType::U8 => "a u8",
        ArgType::U16 => "a u16",
        ArgType::U32 => "a u32",
        ArgType::I8 => "an i8",
        ArgType::I16 => "an i16",
        ArgType::I32 => "an i32",
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
                .text(Letter::LIST)
                .text(", or the name of a value table listed after the format");
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
        if same(part(format, p.spec), table.as_bytes()) {
            return true;
        }
        from = p.whole.1;
    }
    false
}

/// Checks the types of a trace point's arguments against its tracepoint's format; panics
/// (a compile error, from `point!`) naming the first placeholder whose
/// spec cannot show its argument.
pub const fn check_args(def: &Definition, types: &[ArgType]) {
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
        assert!(fits(SpecKind::Letter(Letter::Hex), ArgType::Pointer));
        assert!(!fits(SpecKind::Letter(Letter::Hex), ArgType::Str));
        assert!(!fits(SpecKind::Letter(Letter::Str), ArgType::Signed));
        assert!(!fits(SpecKind::Table, ArgType::Float));
        assert!(fits(SpecKind::Default, ArgType::Str));
    }
}
