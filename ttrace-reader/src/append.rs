//! Appending text to a byte buffer quickly: numbers written in place, short pieces copied
//! with a fixed-size copy instead of a call to `memcpy`.
//!
//! Formatting a line takes a dozen small appends; through `Vec::extend_from_slice` each is a
//! call to `memcpy` with a variable length, which costs more than the bytes it moves. Here a
//! [`Text`] keeps [`PAD`] spare bytes after its end, so that any text up to `PAD` bytes long
//! can be appended with one constant-size copy (two vector moves), the buffer's length then
//! advanced by the text's true length.

use std::mem::MaybeUninit;

/// Bytes readable past the end of every [`Text`].
pub const PAD: usize = 32;

/// A piece of text padded for [`put_text`].
#[derive(Clone, Debug)]
pub struct Text {
    /// The text.
    text: Box<[u8]>,
    /// The text followed by `PAD` zero bytes, in the type of a buffer's spare capacity (so
    /// that copying from it is a plain slice copy).
    padded: Box<[MaybeUninit<u8>]>,
}

impl Text {
    /// Pads `bytes`.
    pub fn new(bytes: &[u8]) -> Text {
        let padded = bytes
            .iter()
            .copied()
            .chain([0; PAD])
            .map(MaybeUninit::new)
            .collect();
        Text {
            text: bytes.into(),
            padded,
        }
    }

    /// The text.
    pub fn as_bytes(&self) -> &[u8] {
        &self.text
    }
}

/// Room for at least `n` more bytes, as a slice of the spare capacity.
#[inline(always)]
fn spare(out: &mut Vec<u8>, n: usize) -> &mut [MaybeUninit<u8>] {
    out.reserve(n);
    out.spare_capacity_mut()
}

/// Marks `n` more bytes of `out` as its contents.
///
/// # Safety
/// The first `n` bytes of `out`'s spare capacity must have been written.
#[inline(always)]
unsafe fn commit(out: &mut Vec<u8>, n: usize) {
    // SAFETY: the caller wrote those bytes, and they lie within the capacity.
    unsafe { out.set_len(out.len() + n) }
}

/// Appends `t`.
#[inline(always)]
pub fn put_text(out: &mut Vec<u8>, t: &Text) {
    let len = t.text.len();
    if len > PAD {
        out.extend_from_slice(&t.text);
        return;
    }
    // One constant-size copy.
    spare(out, PAD)[..PAD].copy_from_slice(&t.padded[..PAD]);
    // SAFETY: the copy above wrote PAD >= len bytes of the spare capacity.
    unsafe { commit(out, len) }
}

/// Two-digit decimal strings, "00" to "99".
const PAIRS: &[u8; 200] = b"\
0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Number of decimal digits of `v`.
#[inline]
fn digits(v: u64) -> usize {
    v.checked_ilog10().unwrap_or(0) as usize + 1
}

/// Writes the `n` decimal digits of `v` (with leading zeros) into `dst[..n]`.
///
/// Four digits per step of the (dependent) division chain; the two pairs of a step are
/// independent of each other and done in 32-bit arithmetic.
#[inline(always)]
fn write_digits(dst: &mut [MaybeUninit<u8>], mut v: u64, n: usize) {
    let dst: &mut [MaybeUninit<u8>; 20] = (&mut dst[..20]).try_into().expect("20 bytes");
    let mut i = n.min(20);
    while i >= 4 {
        let c = (v % 10_000) as u32;
        v /= 10_000;
        let (hi, lo) = ((c / 100) as usize * 2, (c % 100) as usize * 2);
        dst[i - 1].write(PAIRS[lo + 1]);
        dst[i - 2].write(PAIRS[lo]);
        dst[i - 3].write(PAIRS[hi + 1]);
        dst[i - 4].write(PAIRS[hi]);
        i -= 4;
    }
    let v = v as u32;
    match i {
        3 => {
            let d = (v % 100) as usize * 2;
            dst[2].write(PAIRS[d + 1]);
            dst[1].write(PAIRS[d]);
            dst[0].write(b'0' + (v / 100 % 10) as u8);
        }
        2 => {
            let d = (v % 100) as usize * 2;
            dst[1].write(PAIRS[d + 1]);
            dst[0].write(PAIRS[d]);
        }
        1 => {
            dst[0].write(b'0' + (v % 10) as u8);
        }
        _ => {}
    }
}

/// Appends `v` in decimal.
#[inline]
pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    let n = digits(v);
    write_digits(spare(out, 20), v, n);
    // SAFETY: write_digits wrote n bytes.
    unsafe { commit(out, n) }
}

/// Appends `v` in decimal with a `-` when negative.
#[inline]
pub fn put_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    put_u64(out, v.unsigned_abs());
}

/// Appends `v` as exactly nine digits (leading zeros): the nanoseconds of a time.
#[inline]
pub fn put_nine_digits(out: &mut Vec<u8>, v: u32) {
    write_digits(spare(out, 20), v as u64 % 1_000_000_000, 9);
    // SAFETY: write_digits wrote 9 bytes.
    unsafe { commit(out, 9) }
}

/// Appends `0x` and the lowercase hex digits of `v`, without leading zeros.
#[inline]
pub fn put_hex(out: &mut Vec<u8>, v: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let n = (67 - (v | 1).leading_zeros() as usize) / 4;
    let dst = spare(out, 18);
    dst[0].write(b'0');
    dst[1].write(b'x');
    for i in 0..n {
        dst[2 + i].write(HEX[(v >> (4 * (n - 1 - i))) as usize & 15]);
    }
    // SAFETY: the lines above wrote 2 + n bytes.
    unsafe { commit(out, 2 + n) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut v = b"<".to_vec();
        f(&mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn numbers_match_std_formatting() {
        let mut values = vec![0u64, 1, 9, 10, 99, 100, 12345, u64::MAX, u64::MAX / 10];
        values.extend((0..64).map(|i| 1u64 << i));
        values.extend((1..20).map(|i| 10u64.pow(i)));
        values.extend((1..20).map(|i| 10u64.pow(i) - 1));
        for v in values {
            assert_eq!(text(|o| put_u64(o, v)), format!("<{v}"));
            assert_eq!(text(|o| put_hex(o, v)), format!("<{v:#x}"));
            assert_eq!(text(|o| put_i64(o, v as i64)), format!("<{}", v as i64));
        }
        assert_eq!(text(|o| put_i64(o, i64::MIN)), format!("<{}", i64::MIN));
        assert_eq!(text(|o| put_nine_digits(o, 1_234)), "<000001234");
        assert_eq!(text(|o| put_nine_digits(o, 999_999_999)), "<999999999");
    }

    #[test]
    fn texts_of_every_length_append_exactly() {
        for len in 0..80 {
            let s: String = (0..len).map(|i| (b'a' + (i % 26) as u8) as char).collect();
            let t = Text::new(s.as_bytes());
            assert_eq!(t.as_bytes(), s.as_bytes());
            let mut out = Vec::new();
            put_text(&mut out, &t);
            put_text(&mut out, &t);
            assert_eq!(out, format!("{s}{s}").as_bytes());
        }
    }
}
