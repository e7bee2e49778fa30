//! The 64-byte trace entry, its continuation, the stamp word and the type word.

use core::sync::atomic::AtomicU64;
use static_assertions::{assert_eq_align, assert_eq_size, const_assert_eq};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Number of 64-bit words in a slot.
pub const SLOT_WORDS: usize = 8;
/// Bytes in a slot: one cache line.
pub const SLOT_BYTES: usize = 64;
/// Argument words carried by a parent entry.
pub const ENTRY_ARGS: usize = 5;
/// Argument words carried by a continuation entry.
pub const CONT_ARGS: usize = 7;
/// Most argument words one event can carry (a parent plus one continuation).
pub const MAX_ARGS: usize = ENTRY_ARGS + CONT_ARGS;

/// A parent entry as a value (a reader's copy of a committed slot).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C, align(64))]
pub struct Entry {
    /// Committed timestamp; bit 0 is clear.
    pub stamp: u64,
    /// See [`TypeWord`].
    pub type_word: u64,
    /// `pid << 32 | tid` of the writer.
    pub ctx: u64,
    /// Argument words 0..5.
    pub data: [u64; ENTRY_ARGS],
}

/// A continuation entry as a value: always in the slot after its parent, in the same ring.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C, align(64))]
pub struct Continuation {
    /// The parent's stamp with bit 0 set.
    pub stamp: u64,
    /// Argument words 5..12.
    pub data: [u64; CONT_ARGS],
}

/// A slot in shared memory: eight words accessed only atomically, because other threads
/// and processes write it concurrently. Word 0 is the [`Stamp`].
#[derive(FromBytes, IntoBytes, KnownLayout)]
#[repr(C, align(64))]
pub struct Slot {
    /// The stamp word followed by seven payload words.
    pub words: [AtomicU64; SLOT_WORDS],
}

assert_eq_size!(Entry, [u8; SLOT_BYTES]);
assert_eq_size!(Continuation, [u8; SLOT_BYTES]);
assert_eq_size!(Slot, [u8; SLOT_BYTES]);
assert_eq_align!(Entry, Continuation, Slot);
const_assert_eq!(core::mem::align_of::<Slot>(), SLOT_BYTES);
const_assert_eq!(core::mem::offset_of!(Entry, stamp), 0);
const_assert_eq!(core::mem::offset_of!(Entry, type_word), 8);
const_assert_eq!(core::mem::offset_of!(Entry, ctx), 16);
const_assert_eq!(core::mem::offset_of!(Entry, data), 24);
const_assert_eq!(core::mem::offset_of!(Continuation, data), 8);

/// The stamp word: the slot's state and, once committed, its timestamp.
///
/// | value                   | meaning                                                     |
/// |-------------------------|-------------------------------------------------------------|
/// | `0`                     | empty: never written                                        |
/// | top bit set             | claimed: a writer owns the slot and is filling it           |
/// | otherwise, bit 0 clear  | committed parent entry; the value is its timestamp          |
/// | otherwise, bit 0 set    | committed continuation; the value is its parent's stamp + 1 |
///
/// A claim carries the writer's pid (bits 40..63) and the low 40 bits of the ring position it
/// reserved, so a reader can tell a slot being written from one abandoned by a dead process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Stamp(pub u64);

impl Stamp {
    /// The empty stamp of a never-written slot.
    pub const EMPTY: Stamp = Stamp(0);
    /// Bit set in every claim.
    pub const CLAIMED: u64 = 1 << 63;
    /// Bit set in a continuation's stamp.
    pub const CONTINUATION: u64 = 1;
    /// What a reader's copy of a ring (or a snapshot file) holds for a slot that changed
    /// while it was being copied: a claim that no writer can make (its pid field is beyond
    /// Linux's largest pid, 2^22), so that the copy is read as the ring was: overwritten
    /// there.
    pub const CHANGED: Stamp = Stamp(u64::MAX);

    /// The claim a writer of process `pid` stores while it fills position `pos`.
    ///
    /// ```
    /// use ttrace_layouts::entry::Stamp;
    /// let c = Stamp::claim(4242, 7);
    /// assert!(c.is_claimed());
    /// assert_eq!((c.claim_pid(), c.claim_pos()), (4242, 7));
    /// ```
    #[inline(always)]
    pub const fn claim(pid: u32, pos: u64) -> Stamp {
        Stamp(Self::CLAIMED | ((pid as u64 & 0x7f_ffff) << 40) | (pos & 0xff_ffff_ffff))
    }

    /// Whether a writer owns the slot.
    #[inline(always)]
    pub const fn is_claimed(self) -> bool {
        self.0 & Self::CLAIMED != 0
    }

    /// Whether the slot holds a committed entry (parent or continuation).
    #[inline(always)]
    pub const fn is_committed(self) -> bool {
        self.0 != 0 && !self.is_claimed()
    }

    /// Whether the committed slot is a continuation.
    #[inline(always)]
    pub const fn is_continuation(self) -> bool {
        self.is_committed() && self.0 & Self::CONTINUATION != 0
    }

    /// The pid recorded in a claim (23 bits).
    pub const fn claim_pid(self) -> u32 {
        crate::bits(self.0, 40, 23) as u32
    }

    /// The low 40 bits of the position recorded in a claim.
    pub const fn claim_pos(self) -> u64 {
        crate::bits(self.0, 0, 40)
    }

    /// The stamp a writer commits over a slot whose previous state was `old`, given the
    /// timestamp it read: the timestamp with bit 0 clear, raised if needed so that it is
    /// strictly greater than every stamp the slot has held. Per-slot stamps therefore never
    /// repeat, which is what lets a reader's before/after comparison detect any overwrite.
    ///
    /// ```
    /// use ttrace_layouts::entry::Stamp;
    /// assert_eq!(Stamp::next_after(1001, Stamp::EMPTY), Stamp(1000));
    /// assert_eq!(Stamp::next_after(10, Stamp(20)), Stamp(22));
    /// assert_eq!(Stamp::next_after(10, Stamp(21)), Stamp(22));
    /// ```
    ///
    /// An `old` of `u64::MAX` (no stamp: a damaged ring's `last_stamp`) sets no floor, as in
    /// the writer's assembly (`or 1; add 1` wraps to 0), instead of overflowing. Nor does a
    /// floor more than [`Stamp::FLOOR_AHEAD`] ticks past the clock: `last_stamp` is shared
    /// memory, which a damaged device holds anything in, and a floor near 2^63 would make
    /// every stamp of the ring claimed (its events never read again).
    ///
    /// ```
    /// use ttrace_layouts::entry::Stamp;
    /// assert_eq!(Stamp::next_after(1000, Stamp((1 << 63) + 5)), Stamp(1000));
    /// assert_eq!(Stamp::next_after(1000, Stamp(1000 + Stamp::FLOOR_AHEAD)), Stamp(1000));
    /// ```
    #[inline(always)]
    pub const fn next_after(timestamp: u64, old: Stamp) -> Stamp {
        let t = timestamp & !Self::CONTINUATION & !Self::CLAIMED;
        let floor = (old.0 | Self::CONTINUATION).wrapping_add(1);
        // The floor where it is at most FLOOR_AHEAD past the clock, else the clock: one
        // comparison of their difference, wrapping (a floor below the clock wraps far
        // above), as the assembly makes it.
        Stamp(if floor.wrapping_sub(t) <= Self::FLOOR_AHEAD {
            floor
        } else {
            t
        })
    }

    /// The most a ring's floor (`last_stamp`, made odd, plus one) may be ahead of the clock
    /// and still be one (2^31 - 1 ticks: under a second of a TSC, two of nanoseconds; a
    /// CPU's clock runs at most a few ticks ahead of another's). An immediate of the
    /// writer's assembly.
    pub const FLOOR_AHEAD: u64 = 0x7fff_ffff;
}

/// What a trace point marks, in the type word's bits 0..2 (the Akaros kinds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// Something starts (or a thread unblocks).
    Start = 0,
    /// Something stops (or a thread blocks).
    Stop = 1,
    /// A function or scope is entered.
    Entry = 2,
    /// A function or scope is left.
    Exit = 3,
}

impl Kind {
    /// The kind encoded in two bits.
    pub const fn from_bits(bits: u64) -> Kind {
        match bits & 3 {
            0 => Kind::Start,
            1 => Kind::Stop,
            2 => Kind::Entry,
            _ => Kind::Exit,
        }
    }

    /// Lower-case name, as printed by readers.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Start => "start",
            Kind::Stop => "stop",
            Kind::Entry => "entry",
            Kind::Exit => "exit",
        }
    }
}

/// The type word of a parent entry.
///
/// | bits   | field                                                  |
/// |--------|--------------------------------------------------------|
/// | 0..2   | [`Kind`]                                               |
/// | 2      | a continuation follows in the next slot                |
/// | 3      | present (always 1: a type word is never zero)           |
/// | 4..8   | number of argument words (0..=12)                      |
/// | 8..20  | CPU the writer ran on (modulo 4096)                    |
/// | 20..36 | tracepoint id (index into the device's metadata)       |
/// | 36..64 | position tag: the low 28 bits of the entry's ring position       |
///
/// ```
/// use ttrace_layouts::entry::{Kind, TypeWord};
/// let w = TypeWord::new(Kind::Exit, 9, 1234).with_cpu(3);
/// assert_eq!((w.kind(), w.nargs(), w.tracepoint(), w.cpu()), (Kind::Exit, 9, 1234, 3));
/// assert!(w.has_continuation());
/// assert!(w.is_valid());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TypeWord(pub u64);

impl TypeWord {
    /// The has-continuation flag.
    pub const CONTINUED: u64 = 1 << 2;
    /// Set in every type word, so an enabled tracepoint's word is never zero.
    pub const PRESENT: u64 = 1 << 3;
    const NARGS_SHIFT: u32 = 4;
    /// The lowest bit of the CPU field.
    pub const CPU_SHIFT: u32 = 8;
    const CPU_BITS: u32 = 12;
    const TP_SHIFT: u32 = 20;
    /// Number of tracepoint ids a device can hold.
    pub const MAX_TRACEPOINTS: u32 = 1 << 16;
    /// The lowest bit of the position tag.
    pub const POSITION_SHIFT: u32 = 36;
    /// Bits of a ring position a type word keeps ([`TypeWord::with_position`]).
    pub const POSITION_BITS: u32 = 28;

    /// A type word without the CPU field. `nargs` above 5 sets the continuation flag.
    pub const fn new(kind: Kind, nargs: u8, tracepoint: u16) -> TypeWord {
        let cont = if nargs as usize > ENTRY_ARGS {
            Self::CONTINUED
        } else {
            0
        };
        TypeWord(
            kind as u64
                | Self::PRESENT
                | cont
                | ((nargs as u64 & 0xf) << Self::NARGS_SHIFT)
                | ((tracepoint as u64) << Self::TP_SHIFT),
        )
    }

    /// The same word with the CPU field set (modulo 4096).
    #[inline(always)]
    pub const fn with_cpu(self, cpu: u32) -> TypeWord {
        TypeWord(self.0 | ((cpu as u64 & ((1 << Self::CPU_BITS) - 1)) << Self::CPU_SHIFT))
    }

    /// The same word with the position tag of ring position `pos` (its low 28 bits): what a
    /// restartable ring's reader checks a slot's entry against (`devttrace::ring`).
    ///
    /// ```
    /// use ttrace_layouts::entry::{Kind, TypeWord};
    /// let w = TypeWord::new(Kind::Start, 1, 7).with_position((1 << 40) + 12345);
    /// assert_eq!(w.position_tag(), 12345);
    /// assert_eq!(TypeWord::tag_of((1 << 40) + 12345), 12345);
    /// ```
    #[inline(always)]
    pub const fn with_position(self, pos: u64) -> TypeWord {
        TypeWord(self.0 | (pos << Self::POSITION_SHIFT))
    }

    /// The position tag.
    pub const fn position_tag(self) -> u32 {
        (self.0 >> Self::POSITION_SHIFT) as u32
    }

    /// The position tag of ring position `pos`.
    pub const fn tag_of(pos: u64) -> u32 {
        (pos & ((1 << Self::POSITION_BITS) - 1)) as u32
    }

    /// The word without its position tag.
    pub const fn without_position(self) -> TypeWord {
        TypeWord(self.0 & ((1 << Self::POSITION_SHIFT) - 1))
    }

    /// The entry kind.
    pub const fn kind(self) -> Kind {
        Kind::from_bits(self.0)
    }

    /// Whether a continuation follows in the next slot.
    pub const fn has_continuation(self) -> bool {
        self.0 & Self::CONTINUED != 0
    }

    /// Number of argument words.
    pub const fn nargs(self) -> u8 {
        crate::bits(self.0, Self::NARGS_SHIFT, 4) as u8
    }

    /// CPU the writer ran on.
    pub const fn cpu(self) -> u32 {
        crate::bits(self.0, Self::CPU_SHIFT, Self::CPU_BITS) as u32
    }

    /// Tracepoint id.
    pub const fn tracepoint(self) -> u16 {
        crate::bits(self.0, Self::TP_SHIFT, 16) as u16
    }

    /// Whether the word is marked present, the argument count is in range and the
    /// continuation flag agrees with it: what a reader checks before trusting the word.
    pub const fn is_valid(self) -> bool {
        let n = self.nargs() as usize;
        self.0 & Self::PRESENT != 0 && n <= MAX_ARGS && (n > ENTRY_ARGS) == self.has_continuation()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_near_either_end_of_the_range_are_raised_without_overflow() {
        // A clock just started (a machine just booted): the smallest stamps.
        assert_eq!(Stamp::next_after(0, Stamp::EMPTY), Stamp(2));
        assert_eq!(Stamp::next_after(1, Stamp::EMPTY), Stamp(2));
        assert_eq!(Stamp::next_after(2, Stamp(3)), Stamp(4));
        assert_eq!(Stamp::next_after(5, Stamp(2)), Stamp(4));
        // The top: the largest stamp (below a claim), and a damaged floor beyond every stamp,
        // which sets none (as the writer's assembly does).
        let top = Stamp::CLAIMED - 2;
        assert_eq!(Stamp::next_after(u64::MAX, Stamp::EMPTY), Stamp(top));
        assert_eq!(Stamp::next_after(u64::MAX, Stamp(top - 1)), Stamp(top));
        assert_eq!(Stamp::next_after(1000, Stamp(u64::MAX)), Stamp(1000));
    }
}
