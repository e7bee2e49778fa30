//! Value tables: names for the values of an argument, defined once by the writer (the
//! `values!` macro of `ttrace-core`), carried in the trace's metadata and applied by readers
//! at output time. The hot path still stores one word.
//!
//! ```
//! use devttrace::values::{ValueTable, ValuesKind};
//! static OPEN_FLAGS: ValueTable = ValueTable::new(
//!     "OPEN_FLAGS",
//!     ValuesKind::Flags,
//!     &[("O_RDONLY", 0), ("O_WRONLY", 0o1), ("O_CREAT", 0o100), ("O_TRUNC", 0o1000)],
//! );
//! static STATE: ValueTable =
//!     ValueTable::new("STATE", ValuesKind::Enum, &[("Idle", 0), ("Busy", 1), ("Done", 2)]);
//! assert_eq!(OPEN_FLAGS.show(0o1111), "O_WRONLY|O_CREAT|O_TRUNC|0x8");
//! assert_eq!(STATE.show(7), "7");
//! ```
//!
//! A table that cannot be shown unambiguously does not compile:
//!
//! ```compile_fail
//! use devttrace::values::{ValueTable, ValuesKind};
//! static STATE: ValueTable = ValueTable::new("S", ValuesKind::Enum, &[("Busy", 1), ("Done", 1)]); // two names for 1
//! ```

use std::io::Write;

/// How a table's names apply to a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValuesKind {
    /// Each name is a bit (or a mask of bits): a value shows as the names of the bits it has,
    /// joined by `|`, then the bits no name covers in hex (`O_WRONLY|O_CREAT|0x8`). A name
    /// for 0 shows for the value 0.
    Flags,
    /// Each name is one value: a value shows as its name, or as a number if it has none.
    Enum,
}

/// A table of names for an argument's values. Define one with the `values!` macro of `ttrace-core`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ValueTable {
    /// Its name: the spec a format gives to use it (`{flags:OPEN_FLAGS}`).
    pub name: &'static str,
    /// Flags or enum.
    pub kind: ValuesKind,
    /// Names and values, in the order written.
    pub entries: &'static [(&'static str, u64)],
}

impl ValueTable {
    /// A table; fails to compile (in a `static`) if it is empty or repeats a name or a value
    /// (so a flags table has at most one name for zero).
    pub const fn new(
        name: &'static str,
        kind: ValuesKind,
        entries: &'static [(&'static str, u64)],
    ) -> ValueTable {
        assert!(!entries.is_empty(), "a value table needs at least one name");
        let mut i = 0;
        while i < entries.len() {
            let mut j = i + 1;
            while j < entries.len() {
                assert!(
                    !ttrace_layouts::format::same(entries[i].0.as_bytes(), entries[j].0.as_bytes()),
                    "a value table names each value once: a name is repeated"
                );
                assert!(
                    entries[i].1 != entries[j].1,
                    "a value table names each value once: a value has two names"
                );
                j += 1;
            }
            i += 1;
        }
        ValueTable {
            name,
            kind,
            entries,
        }
    }

    /// How a reader shows `value` (an enum value with no name as unsigned decimal).
    pub fn show(&self, value: u64) -> String {
        let mut out = Vec::new();
        if !show(&mut out, self.kind, self.entries.iter().copied(), value) {
            let _ = write!(out, "{value}");
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// Writes `value` as the table `entries` of `kind` names it. Returns false, having written
/// nothing, for an enum value with no name: the caller shows the number as its type says.
///
/// ```
/// use devttrace::values::{show, ValuesKind};
/// let flags = [("R", 1u64), ("W", 2), ("X", 4)];
/// let mut out = Vec::new();
/// assert!(show(&mut out, ValuesKind::Flags, flags.iter().copied(), 0b1011));
/// assert_eq!(out, b"R|W|0x8");
/// ```
pub fn show<'a>(
    out: &mut Vec<u8>,
    kind: ValuesKind,
    entries: impl Iterator<Item = (&'a str, u64)> + Clone,
    value: u64,
) -> bool {
    match kind {
        ValuesKind::Enum => match entries.into_iter().find(|&(_, v)| v == value) {
            Some((name, _)) => {
                out.extend_from_slice(name.as_bytes());
                true
            }
            None => false,
        },
        ValuesKind::Flags => {
            if value == 0 {
                match entries.into_iter().find(|&(_, v)| v == 0) {
                    Some((name, _)) => out.extend_from_slice(name.as_bytes()),
                    None => out.push(b'0'),
                }
                return true;
            }
            let mut rest = value;
            let mut first = true;
            for (name, bits) in entries {
                // A name applies when all its bits are set and it still covers one.
                if bits != 0 && value & bits == bits && rest & bits != 0 {
                    if !first {
                        out.push(b'|');
                    }
                    out.extend_from_slice(name.as_bytes());
                    rest &= !bits;
                    first = false;
                }
            }
            if rest != 0 {
                if !first {
                    out.push(b'|');
                }
                let _ = write!(out, "{rest:#x}");
            }
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static FLAGS: ValueTable = ValueTable::new(
        "FLAGS",
        ValuesKind::Flags,
        &[("NONE", 0), ("R", 1), ("W", 2), ("RW", 3), ("X", 4)],
    );
    static SIGNED: ValueTable = ValueTable::new(
        "SIGNED",
        ValuesKind::Enum,
        &[("Minus", -1i64 as u64), ("Zero", 0)],
    );

    #[test]
    fn flags_show_each_bit_once_then_what_no_name_covers() {
        assert_eq!(FLAGS.show(0), "NONE");
        assert_eq!(FLAGS.show(1), "R");
        // R and W cover RW's bits, so RW is not shown again.
        assert_eq!(FLAGS.show(3), "R|W");
        assert_eq!(FLAGS.show(0x15), "R|X|0x10");
        assert_eq!(FLAGS.show(0x30), "0x30");
    }

    #[test]
    fn enums_show_a_name_or_nothing() {
        assert_eq!(SIGNED.show(-1i64 as u64), "Minus");
        assert_eq!(SIGNED.show(0), "Zero");
        let mut out = Vec::new();
        assert!(!show(
            &mut out,
            ValuesKind::Enum,
            [("A", 1u64)].into_iter(),
            2
        ));
        assert!(out.is_empty());
    }
}
