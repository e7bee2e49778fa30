//! A `tracing` value set as argument words: integers, floats and bools as they are, strings
//! into the aux buffer, `Debug` values formatted into a bounded buffer first.

use std::fmt::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use tracing_core::field::{Field, Visit};
use ttrace_core::Writer;
use ttrace_layouts::aux::{AuxTag, AUX_NONE};

/// Longest `Debug` rendering kept, in bytes; a longer one is cut, ends with `…`, and is
/// counted.
pub const DEBUG_BYTES: usize = 256;

pub(crate) static DEBUG_TRUNCATED: AtomicU64 = AtomicU64::new(0);
pub(crate) static FIELDS_DROPPED: AtomicU64 = AtomicU64::new(0);
pub(crate) static STRINGS_DROPPED: AtomicU64 = AtomicU64::new(0);

/// Argument words an event can carry.
pub(crate) const MAX_ARGS: usize = 12;

/// Where a callsite's fields go in the argument words of one of its tracepoints.
pub(crate) struct Shape {
    /// Words before the fields (a span's id, and parent).
    pub(crate) base: usize,
    /// Fields with a word of their own.
    pub(crate) slots: usize,
    /// Whether the last word counts the fields beyond the others.
    pub(crate) overflow: bool,
    /// The argument names: the words before the fields, the fields kept, and
    /// `dropped_fields` if some are not.
    pub(crate) args: Vec<&'static str>,
}

impl Shape {
    pub(crate) fn new(before: &[&'static str], fields: &[&'static str]) -> Shape {
        let room = MAX_ARGS - before.len();
        let overflow = fields.len() > room;
        let slots = if overflow { room - 1 } else { fields.len() };
        let mut args = before.to_vec();
        args.extend_from_slice(&fields[..slots]);
        if overflow {
            args.push("dropped_fields");
        }
        Shape {
            base: before.len(),
            slots,
            overflow,
            args,
        }
    }

    /// The number of argument words.
    pub(crate) fn nargs(&self) -> usize {
        self.args.len()
    }
}

/// How a field's value is stored in its argument word, and shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Ty {
    /// Not recorded: a field declared `Empty` and not recorded yet, or one a span's `record`
    /// leaves as it was. It has no word ([`Words::compact`]): a tracepoint's format shows it
    /// as `name=<unset>` (an event's, a span's `new`), or leaves it out (`record`), so readers
    /// never take it for a string the aux buffer lost.
    Absent = 0,
    /// `u64`: decimal.
    U = 1,
    /// `i64`: signed decimal.
    I = 2,
    /// `f64`: its bits.
    F = 3,
    /// `bool`: 0 or 1.
    B = 4,
    /// A string in the aux buffer (`&str`, or a `Debug` value formatted).
    S = 5,
    /// A span's id: hexadecimal.
    Id = 6,
}

impl Ty {
    /// Its placeholder's spec in a format.
    pub(crate) fn spec(self) -> &'static str {
        match self {
            Ty::U => "",
            Ty::I => ":d",
            Ty::F => ":f",
            Ty::B => ":b",
            Ty::S | Ty::Absent => ":s",
            Ty::Id => ":x",
        }
    }
}

/// The signature of a list of types: 3 bits each.
fn signature(tys: &[Ty]) -> u64 {
    tys.iter()
        .enumerate()
        .fold(0, |s, (i, &t)| s | (t as u64) << (3 * i))
}

/// The argument words of one event (or span step), as its fields are visited.
#[derive(Clone, Copy)]
pub(crate) struct Words {
    pub(crate) words: [u64; MAX_ARGS],
    pub(crate) tys: [Ty; MAX_ARGS],
    /// Fields beyond the callsite's slots.
    pub(crate) dropped: u64,
}

impl Words {
    pub(crate) const fn new() -> Words {
        Words {
            words: [0; MAX_ARGS],
            tys: [Ty::Absent; MAX_ARGS],
            dropped: 0,
        }
    }

    /// Words before the fields (a span's id and parent).
    #[inline]
    pub(crate) fn with_ids(ids: &[u64]) -> Words {
        let mut w = Words::new();
        w.words[..ids.len()].copy_from_slice(ids);
        w.tys[..ids.len()].fill(Ty::Id);
        w
    }

    /// The words ready to record in `shape` (the dropped count in the last one if it has
    /// more fields than words): their signature, and whether a field was not recorded (then
    /// [`Words::compact`] before recording).
    #[inline]
    pub(crate) fn finish(&mut self, shape: &Shape) -> (u64, bool) {
        let n = shape.nargs();
        if shape.overflow {
            self.words[n - 1] = self.dropped;
            self.tys[n - 1] = Ty::U;
        }
        let tys = &self.tys[..n];
        (signature(tys), tys.contains(&Ty::Absent))
    }

    /// Leaves out the words of the fields not recorded, keeping the others in order (as
    /// the tracepoint's format names them: [`Ty::Absent`]); returns how many are left of
    /// the first `n`.
    #[inline]
    pub(crate) fn compact(&mut self, n: usize) -> usize {
        let mut kept = 0;
        for i in 0..n {
            if self.tys[i] != Ty::Absent {
                self.words[kept] = self.words[i];
                kept += 1;
            }
        }
        kept
    }
}

/// Visits the fields of one event (or span step) into [`Words`], in the places `shape`
/// gives them.
pub(crate) struct Visitor<'a> {
    pub(crate) dev: &'static Writer,
    pub(crate) ctx: u64,
    pub(crate) shape: &'a Shape,
    pub(crate) out: &'a mut Words,
    /// Where to keep the `message` field's text up to its first value (what names an event
    /// without a name of its own: [`crate::name`]); `None` once the callsite is named.
    pub(crate) message: Option<&'a mut Option<String>>,
}

impl Visitor<'_> {
    /// The word of `field`, or `None` (and counted) past the shape's slots.
    #[inline]
    fn slot(&mut self, field: &Field) -> Option<usize> {
        let i = field.index();
        if i < self.shape.slots {
            Some(self.shape.base + i)
        } else {
            self.out.dropped += 1;
            FIELDS_DROPPED.fetch_add(1, Relaxed);
            None
        }
    }

    #[inline]
    fn put(&mut self, field: &Field, word: u64, ty: Ty) {
        if let Some(i) = self.slot(field) {
            self.out.words[i] = word;
            self.out.tys[i] = ty;
        }
    }

    /// Keeps `text` if `field` is the message and the callsite's name waits for it.
    #[cold]
    fn message(&mut self, field: &Field, text: &[u8]) {
        if let Some(m) = self.message.as_deref_mut() {
            if field.name() == "message" {
                *m = Some(String::from_utf8_lossy(text).into_owned());
            }
        }
    }

    /// Writes a string to the aux buffer; one it refuses is [`AUX_NONE`], which readers
    /// show as `<lost>` and count (and the damage check accepts, as it does in `info`
    /// messages).
    fn string(&mut self, i: usize, bytes: &[u8]) {
        let word = match self.dev.aux_write(AuxTag::String, self.ctx, bytes) {
            Some(r) => r,
            None => {
                STRINGS_DROPPED.fetch_add(1, Relaxed);
                AUX_NONE
            }
        };
        self.out.words[i] = word;
        self.out.tys[i] = Ty::S;
    }
}

impl Visit for Visitor<'_> {
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, value, Ty::U);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, value as u64, Ty::I);
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, value.to_bits(), Ty::F);
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, value as u64, Ty::B);
    }

    fn record_u128(&mut self, field: &Field, value: u128) {
        match u64::try_from(value) {
            Ok(v) => self.put(field, v, Ty::U),
            Err(_) => self.record_debug(field, &value),
        }
    }

    fn record_i128(&mut self, field: &Field, value: i128) {
        match i64::try_from(value) {
            Ok(v) => self.put(field, v as u64, Ty::I),
            Err(_) => self.record_debug(field, &value),
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if let Some(i) = self.slot(field) {
            if self.message.is_some() {
                self.message(field, value.as_bytes());
            }
            self.string(i, value.as_bytes());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if let Some(i) = self.slot(field) {
            let mut buf = Bounded::new();
            let _ = write!(buf, "{value:?}");
            if self.message.is_some() {
                // A message is `format_args!`: its first write is the format's text up to
                // its first value (or that value, if the format starts with one).
                let first = buf.first;
                self.message(field, &buf.buf[..first]);
            }
            self.string(i, buf.finish());
        }
    }
}

/// A `fmt::Write` into a fixed buffer that keeps what fits (whole characters).
struct Bounded {
    buf: [u8; DEBUG_BYTES],
    len: usize,
    cut: bool,
    /// The length after the first write.
    first: usize,
}

impl Bounded {
    fn new() -> Bounded {
        Bounded {
            buf: [0; DEBUG_BYTES],
            len: 0,
            cut: false,
            first: 0,
        }
    }

    /// The text kept; a cut one ends with `…` (and is counted).
    fn finish(&mut self) -> &[u8] {
        if self.cut {
            DEBUG_TRUNCATED.fetch_add(1, Relaxed);
            let mark = "…".as_bytes();
            let mut end = self.len.min(DEBUG_BYTES - mark.len());
            // Back to a character boundary.
            while end > 0 && (self.buf[end] & 0xc0) == 0x80 {
                end -= 1;
            }
            self.buf[end..end + mark.len()].copy_from_slice(mark);
            self.len = end + mark.len();
        }
        &self.buf[..self.len]
    }
}

impl Write for Bounded {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = DEBUG_BYTES - self.len;
        if s.len() <= room {
            self.buf[self.len..self.len + s.len()].copy_from_slice(s.as_bytes());
            self.len += s.len();
            if self.first == 0 {
                self.first = self.len;
            }
            Ok(())
        } else {
            let mut n = room;
            while !s.is_char_boundary(n) {
                n -= 1;
            }
            self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
            self.len += n;
            if self.first == 0 {
                self.first = self.len;
            }
            self.cut = true;
            // Stop formatting: nothing more is kept.
            Err(fmt::Error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_debug_value_is_cut_at_a_character_with_a_mark() {
        let mut b = Bounded::new();
        let long = "é".repeat(300);
        let _ = write!(b, "{long}");
        let kept = std::str::from_utf8(b.finish()).unwrap();
        assert!(kept.ends_with('…'));
        assert!(kept.len() <= DEBUG_BYTES);
        assert!(kept.trim_end_matches('…').chars().all(|c| c == 'é'));
        let mut short = Bounded::new();
        let _ = write!(short, "{:?}", (1, "a"));
        assert_eq!(short.finish(), b"(1, \"a\")");
    }

    #[test]
    fn a_message_s_first_write_is_its_text_up_to_its_first_value() {
        let first = |args: fmt::Arguments<'_>| {
            let mut b = Bounded::new();
            let _ = write!(b, "{args:?}");
            String::from_utf8(b.buf[..b.first].to_vec()).unwrap()
        };
        let addr = "127.0.0.1:80";
        assert_eq!(first(format_args!("listening on {addr}")), "listening on ");
        // (Values of variables: the compiler writes literal ones into the format.)
        let (who, n) = (String::from("ann"), 7);
        assert_eq!(first(format_args!("user {who} logged in")), "user ");
        assert_eq!(first(format_args!("request done")), "request done");
        assert_eq!(first(format_args!("{n} connected")), "7");
    }

    #[test]
    fn unrecorded_fields_are_left_out_in_order() {
        let mut w = Words::with_ids(&[9]);
        let shape = Shape::new(&["span"], &["a", "b", "c", "d"]);
        (w.words[2], w.tys[2]) = (20, Ty::U);
        (w.words[4], w.tys[4]) = (40, Ty::I);
        let (sig, absent) = w.finish(&shape);
        assert!(absent);
        assert_eq!(
            sig,
            signature(&[Ty::Id, Ty::Absent, Ty::U, Ty::Absent, Ty::I])
        );
        assert_eq!(w.compact(shape.nargs()), 3);
        assert_eq!(w.words[..3], [9, 20, 40]);
        let mut all = Words::with_ids(&[]);
        (all.words[0], all.tys[0]) = (1, Ty::B);
        assert!(!all.finish(&Shape::new(&[], &["x"])).1);
    }
}
