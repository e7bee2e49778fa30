//! Protocol buffers' wire format, written by hand: what the Perfetto export needs (varints,
//! fixed 64-bit words, length-delimited strings and messages), with no schema compiler and
//! no allocation per message.
//!
//! A nested message is written in place: its field's tag, a one-byte length, its body; a
//! body of 128 bytes or more then moves right to make room for the longer length (rare:
//! trace packets are small).

/// Wire type of a varint field.
const VARINT: u8 = 0;
/// Wire type of a 64-bit field.
const I64: u8 = 1;
/// Wire type of a length-delimited field.
const LEN: u8 = 2;

/// Appends `v` as a base-128 varint.
///
/// ```
/// let mut out = Vec::new();
/// ttrace_reader::export::proto::varint(&mut out, 300);
/// assert_eq!(out, [0xac, 0x02]);
/// ```
#[inline]
pub fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, u64::from(field) << 3 | u64::from(wire));
}

/// A varint field (`uint64`, `uint32`, `bool`, an enum; an `int64` as its two's complement).
#[inline]
pub fn uint(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, VARINT);
    varint(out, v);
}

/// A `fixed64` field.
#[inline]
pub fn fixed64(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, I64);
    out.extend_from_slice(&v.to_le_bytes());
}

/// A `double` field.
#[inline]
pub fn double(out: &mut Vec<u8>, field: u32, v: f64) {
    fixed64(out, field, v.to_bits());
}

/// A `string` or `bytes` field.
#[inline]
pub fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    tag(out, field, LEN);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A message field whose body `body` appends.
///
/// ```
/// use ttrace_reader::export::proto::{message, uint};
/// let mut out = Vec::new();
/// message(&mut out, 3, |m| uint(m, 1, 150));
/// assert_eq!(out, [0x1a, 0x03, 0x08, 0x96, 0x01]);
/// ```
#[inline]
pub fn message(out: &mut Vec<u8>, field: u32, body: impl FnOnce(&mut Vec<u8>)) {
    let at = open(out, field);
    body(out);
    close(out, at);
}

/// Opens a message field whose body the caller appends next, then ends with [`close`]
/// given what this returns (a [`message`] whose body is written by more than one function).
#[inline]
pub fn open(out: &mut Vec<u8>, field: u32) -> usize {
    tag(out, field, LEN);
    out.push(0);
    out.len() - 1
}

/// Ends the message field [`open`] began at `at`: its length written before its body.
#[inline]
pub fn close(out: &mut Vec<u8>, at: usize) {
    let len = out.len() - at - 1;
    if len < 0x80 {
        out[at] = len as u8;
        return;
    }
    let mut length = Vec::with_capacity(10);
    varint(&mut length, len as u64);
    out.splice(at..at + 1, length);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_message_gets_a_longer_length() {
        let mut out = Vec::new();
        let text = [b'x'; 200];
        message(&mut out, 1, |m| bytes(m, 2, &text));
        // tag, length 203 as two bytes, the string's tag, its length 200 as two bytes.
        assert_eq!(&out[..6], &[0x0a, 0xcb, 0x01, 0x12, 0xc8, 0x01]);
        assert_eq!(out.len(), 6 + 200);
    }
}
