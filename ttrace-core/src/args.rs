//! What a trace point's arguments are: values of types that fit in a word ([`Arg`]), each
//! with a type recorded for readers, and tuples of them ([`Args`]), whose types
//! `point!` learns without evaluating the arguments (its strings' impls, which write to the
//! aux buffer, are the writer's).

/// How each argument's type is recorded (re-exported for `point!`'s expansion).
pub use ttrace_layouts::meta::ArgType;

/// A value a trace point can carry in an argument word.
pub trait Arg {
    /// How readers show it where the format gives no spec; recorded with the tracepoint.
    const TYPE: ArgType;
    /// The same type with every lifetime `'static`: what `point!` learns
    /// the type through without keeping borrows alive.
    type Static: Arg + 'static;
    /// The argument word.
    fn into_word(self) -> u64;

    /// The argument word as `point!` records it, the argument being the next of
    /// `strings`' event: a string leaves its bytes there, to be written with the event in
    /// one section (the word is its record's reference, set then); any other value is its
    /// word.
    #[inline(always)]
    fn lower<'a>(self, strings: &mut Strings<'a>) -> u64
    where
        Self: Sized + 'a,
    {
        strings.pass();
        self.into_word()
    }
}

/// The strings of one event, noted by [`Arg::lower`] as its arguments are turned into
/// words: each with its argument's index. A point without strings never reads it, and the
/// compiler removes it.
pub struct Strings<'a> {
    /// Arguments seen so far.
    next: usize,
    /// Strings noted.
    len: usize,
    /// `(argument index, bytes)`, `len` of them.
    items: [(usize, &'a [u8]); ttrace_layouts::entry::MAX_ARGS],
}

impl<'a> Strings<'a> {
    /// None yet.
    #[inline(always)]
    pub fn new() -> Strings<'a> {
        Strings {
            next: 0,
            len: 0,
            items: [(0, &[]); ttrace_layouts::entry::MAX_ARGS],
        }
    }

    /// The next argument is a word.
    #[inline(always)]
    pub fn pass(&mut self) {
        self.next += 1;
    }

    /// The next argument is the string `bytes`.
    #[inline(always)]
    pub fn push(&mut self, bytes: &'a [u8]) {
        if let Some(item) = self.items.get_mut(self.len) {
            *item = (self.next, bytes);
            self.len += 1;
        }
        self.next += 1;
    }

    /// Whether the event has no strings.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The strings: each argument's index and bytes.
    #[inline(always)]
    pub fn iter(&self) -> impl Iterator<Item = (usize, &'a [u8])> + '_ {
        self.items[..self.len].iter().copied()
    }
}

impl Default for Strings<'_> {
    fn default() -> Self {
        Strings::new()
    }
}

macro_rules! unsigned_arg {
    ($($t:ty: $ty:ident),*) => {$(
        impl Arg for $t {
            const TYPE: ArgType = ArgType::$ty;
            type Static = $t;
            #[inline(always)]
            fn into_word(self) -> u64 { self as u64 }
        }
    )*};
}
macro_rules! signed_arg {
    ($($t:ty: $ty:ident),*) => {$(
        impl Arg for $t {
            const TYPE: ArgType = ArgType::$ty;
            type Static = $t;
            /// Sign-extended.
            #[inline(always)]
            fn into_word(self) -> u64 { self as i64 as u64 }
        }
    )*};
}
// Each integer with its width, so that a reader can tell a word no such integer can be (a
// damaged device) from a value.
unsigned_arg!(u8: U8, u16: U16, u32: U32, u64: Unsigned, usize: Unsigned);
signed_arg!(i8: I8, i16: I16, i32: I32, i64: Signed, isize: Signed);

impl Arg for bool {
    const TYPE: ArgType = ArgType::Bool;
    type Static = bool;
    #[inline(always)]
    fn into_word(self) -> u64 {
        self as u64
    }
}

impl Arg for char {
    const TYPE: ArgType = ArgType::Char;
    type Static = char;
    #[inline(always)]
    fn into_word(self) -> u64 {
        self as u64
    }
}

impl Arg for f64 {
    const TYPE: ArgType = ArgType::Float;
    type Static = f64;
    /// The bits.
    #[inline(always)]
    fn into_word(self) -> u64 {
        self.to_bits()
    }
}

impl Arg for f32 {
    const TYPE: ArgType = ArgType::Float;
    type Static = f32;
    /// Widened to `f64`, then the bits.
    #[inline(always)]
    fn into_word(self) -> u64 {
        (self as f64).to_bits()
    }
}

impl<T> Arg for *const T {
    const TYPE: ArgType = ArgType::Pointer;
    type Static = *const u8;
    #[inline(always)]
    fn into_word(self) -> u64 {
        self as usize as u64
    }
}

impl<T> Arg for *mut T {
    const TYPE: ArgType = ArgType::Pointer;
    type Static = *mut u8;
    #[inline(always)]
    fn into_word(self) -> u64 {
        self as usize as u64
    }
}

/// The arguments of one trace point, as a tuple: their types, known when the program is
/// compiled.
pub trait Args {
    /// Each argument's type.
    const TYPES: &'static [ArgType];
    /// The same types with every lifetime `'static`.
    type Static: Args + 'static;
}

macro_rules! args_tuple {
    ($($t:ident)*) => {
        impl<$($t: Arg),*> Args for ($($t,)*) {
            const TYPES: &'static [ArgType] = &[$($t::TYPE),*];
            type Static = ($($t::Static,)*);
        }
    };
}
args_tuple!();
args_tuple!(A);
args_tuple!(A B);
args_tuple!(A B C);
args_tuple!(A B C D);
args_tuple!(A B C D E);
args_tuple!(A B C D E F);
args_tuple!(A B C D E F G);
args_tuple!(A B C D E F G H);
args_tuple!(A B C D E F G H I);
args_tuple!(A B C D E F G H I J);
args_tuple!(A B C D E F G H I J K);
args_tuple!(A B C D E F G H I J K L);

/// The type of a trace point's arguments, without their lifetimes: `point!`
/// names the arguments in a closure it never calls, which returns this.
#[doc(hidden)]
#[inline(always)]
pub fn erase<A: Args>(_: A) -> core::marker::PhantomData<A::Static> {
    core::marker::PhantomData
}
