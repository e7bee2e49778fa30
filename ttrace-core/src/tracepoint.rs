//! Tracepoints and the hot path of recording one.
//!
//! ```
//! # let tmp = tempfile::tempdir().unwrap();
//! # ttrace_core::init(&ttrace_core::Config::at(tmp.path().join("dev"))).unwrap();
//! use ttrace_core::{point, tracepoint};
//!
//! tracepoint!(static READ_DONE: Exit = "read_done", "fd={fd} bytes={bytes} path={path:s}");
//!
//! point!(READ_DONE, 3, 4096, "/etc/hosts");
//! ```
//!
//! The whole hot path, once a tracepoint is registered and its thread known:
//! [`Tracepoint::word`] (two dependent loads, one branch when disabled), then
//! [`Tracepoint::record`] → [`Device::emit`] → [`Ring::write`](crate::ring::Ring::write):
//! a restartable sequence ([`crate::rseq`]) that reads the CPU id, `rdtsc`, and makes nine
//! plain stores into that CPU's ring and one to its head. Without rseq,
//! [`Device::emit_shared`]: `rdtsc`, the CPU id, one `fetch_add`, one compare-and-exchange,
//! eight stores.

use crate::device::Device;
use crate::meta::Definition;
use crate::values::ValueTable;
use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering::*};
use ttrace_layouts::aux::{AuxTag, AUX_NONE};
use ttrace_layouts::entry::{Kind, TypeWord, ENTRY_ARGS, MAX_ARGS, SLOT_WORDS};
use ttrace_layouts::meta::ArgType;

/// The word of a tracepoint not yet registered: not zero, so the first trace point takes
/// the (cold) registration path; never a valid type word.
pub const UNREGISTERED: u64 = u64::MAX;
static UNREGISTERED_WORD: AtomicU64 = AtomicU64::new(UNREGISTERED);
static DISABLED_WORD: AtomicU64 = AtomicU64::new(0);

/// The default class of tracepoints defined without classes.
pub const CLASS_DEFAULT: u64 = 1;

/// Counts the `{name}` / `{name:fmt}` placeholders of a format string (`{{` is a literal).
///
/// ```
/// assert_eq!(ttrace_core::count_args("a={a} b={b:x} {{literal}}"), 2);
/// ```
pub const fn count_args(format: &str) -> usize {
    let b = format.as_bytes();
    let (mut i, mut n) = (0, 0);
    while i < b.len() {
        if b[i] == b'{' {
            if i + 1 < b.len() && b[i + 1] == b'{' {
                i += 1;
            } else {
                n += 1;
            }
        }
        i += 1;
    }
    n
}

/// Where a tracepoint finds its word: the sentinel before registration, then its slot in
/// the device's word table.
///
/// It lives in a `static` of its own, outside the [`Tracepoint`], so that the tracepoint
/// holds no interior mutability and [`point!`](crate::point!) can read its definition in a
/// constant (to check the arguments' types when the program is compiled). The compiler
/// sees the reference as a constant: the hot path still makes two dependent loads.
pub struct WordRef(AtomicPtr<AtomicU64>);

impl WordRef {
    /// A reference to the unregistered sentinel.
    pub const fn new() -> WordRef {
        WordRef(AtomicPtr::new(
            &UNREGISTERED_WORD as *const AtomicU64 as *mut AtomicU64,
        ))
    }
}

impl Default for WordRef {
    fn default() -> Self {
        WordRef::new()
    }
}

/// A tracepoint with `N` argument words. Define one with [`tracepoint!`](crate::tracepoint!).
pub struct Tracepoint<const N: usize> {
    word: &'static WordRef,
    def: Definition,
}

impl<const N: usize> Tracepoint<N> {
    /// A tracepoint; fails to compile (in a `static`) unless `format` has `N` placeholders,
    /// `N` is at most 12, every spec is known (see [`crate::format`]) and `tables` are the
    /// value tables its specs name.
    pub const fn new(
        name: &'static str,
        kind: Kind,
        classes: u64,
        format: &'static str,
        tables: &'static [&'static ValueTable],
        word: &'static WordRef,
    ) -> Self {
        assert!(
            N <= MAX_ARGS,
            "a tracepoint carries at most 12 argument words"
        );
        assert!(
            count_args(format) == N,
            "the format must have one placeholder per argument"
        );
        crate::format::check_format(name, format, tables);
        Tracepoint {
            word,
            def: Definition {
                name,
                kind,
                classes,
                format,
                nargs: N as u8,
                types: &[],
                tables,
            },
        }
    }

    /// The definition (its `types` are those of the trace point that registers it).
    pub const fn definition(&self) -> &Definition {
        &self.def
    }

    /// The tracepoint's word: 0 when disabled, its type word when enabled,
    /// [`UNREGISTERED`] before the first use.
    #[inline(always)]
    pub fn word(&self) -> u64 {
        // Acquire: the pointer may lead into a mapping another thread set up.
        let word = self.word.0.load(Acquire);
        // SAFETY: `word` always points to a 'static AtomicU64: one of the two sentinels, or
        // the tracepoint's slot in the global device, whose mapping is never unmapped.
        // Relaxed: the word is self-contained.
        unsafe { &*word }.load(Relaxed)
    }

    /// The word to record with, given what [`word`](Self::word) returned (not 0):
    /// registers the tracepoint on its first use, with `types`, the types of the trace
    /// point's arguments. 0 means: do not record.
    #[inline(always)]
    pub fn enabled_word(&'static self, word: u64, types: &'static [ArgType]) -> u64 {
        if word == UNREGISTERED {
            return self.register(types);
        }
        word
    }

    /// Records an event. `word` is what [`enabled_word`](Self::enabled_word) returned, and
    /// must not be 0.
    ///
    /// Inlined into each trace point, behind its enabled test: measured, this is cheaper for
    /// both paths than a call (the arguments stay in registers, and the disabled loop keeps
    /// no spills around a call it never makes): 1.13x a bare `rdtsc` for 5 words against
    /// 1.30x, and 0.03x against 0.06x disabled. It costs about 600 bytes of code per trace
    /// point; the registration and a contended ring stay out of line.
    #[inline(always)]
    pub fn record(&'static self, word: u64, args: [u64; N]) {
        if let Some(dev) = crate::global::device() {
            let ctx = crate::thread::ctx(dev);
            dev.emit(word, ctx, &args);
        }
    }

    /// Registers the tracepoint, its arguments of `types`, with the process's device
    /// (opening the default device if none is installed) and returns its word. If that
    /// fails, the tracepoint is disabled in this process and the reason is printed once to
    /// stderr.
    #[cold]
    #[inline(never)]
    pub fn register(&'static self, types: &'static [ArgType]) -> u64 {
        let registered = crate::global::device_or_init().and_then(|dev| {
            let def = Definition { types, ..self.def };
            let (id, word) = dev.register_tracepoint(&def)?;
            Ok((dev.tp_word(id), word))
        });
        let (ptr, word) = match registered {
            Ok((shared, word)) => (shared, word),
            Err(e) => {
                static WARNED: std::sync::Once = std::sync::Once::new();
                WARNED.call_once(|| eprintln!("ttrace: tracing disabled: {e}"));
                (&DISABLED_WORD, 0)
            }
        };
        // Release: pairs with the Acquire load in `word`.
        self.word
            .0
            .store(ptr as *const AtomicU64 as *mut AtomicU64, Release);
        word
    }
}

impl Device {
    /// Records one event with type word `word` (from a tracepoint: no CPU in it) for the
    /// writer `ctx` (`pid << 32 | tid`). Up to 5 arguments fill one slot; 6 to 12 add a
    /// continuation in the next slot. The event goes to the restartable ring of the CPU the
    /// thread runs on ([`crate::rseq`]), or, where that cannot be used, to its shared ring.
    /// Returns false if the event was dropped (and counted).
    #[inline(always)]
    pub fn emit<const N: usize>(&self, word: u64, ctx: u64, args: &[u64; N]) -> bool {
        const { assert!(N <= MAX_ARGS) };
        #[cfg(all(target_arch = "x86_64", target_os = "linux", not(loom)))]
        if let Some((offset, table)) = self.rseq() {
            let stamp = if N <= ENTRY_ARGS {
                let mut w = [0u64; SLOT_WORDS - 1];
                (w[0], w[1]) = (word, ctx);
                w[2..2 + N].copy_from_slice(args);
                // SAFETY: `rseq()` gives this process's registered rseq offset and the table
                // of this device's restartable rings, which only restartable sections write.
                unsafe { crate::rseq::write(offset, table, &w) }
            } else {
                let mut w = [0u64; 2 * (SLOT_WORDS - 1)];
                (w[0], w[1]) = (word, ctx);
                w[2..SLOT_WORDS - 1].copy_from_slice(&args[..ENTRY_ARGS]);
                w[SLOT_WORDS - 1..SLOT_WORDS - 1 + N - ENTRY_ARGS]
                    .copy_from_slice(&args[ENTRY_ARGS..]);
                // SAFETY: as above.
                unsafe { crate::rseq::write_pair(offset, table, &w) }
            };
            if stamp != 0 {
                return true;
            }
        }
        self.emit_shared(word, ctx, args)
    }

    /// [`Device::emit`] into the shared ring of the calling thread's CPU, with the atomic
    /// protocol ([`Ring::write`](crate::ring::Ring::write)).
    #[inline(never)]
    pub fn emit_shared<const N: usize>(&self, word: u64, ctx: u64, args: &[u64; N]) -> bool {
        let timestamp = self.now();
        let cpu = self.cpu();
        let ring = self.shared_ring(cpu);
        let mut parent = [0u64; SLOT_WORDS - 1];
        parent[0] = TypeWord(word).with_cpu(cpu).0;
        parent[1] = ctx;
        let pid = (ctx >> 32) as u32;
        if N <= ENTRY_ARGS {
            parent[2..2 + N].copy_from_slice(args);
            ring.write(timestamp, pid, &parent).is_some()
        } else {
            let split = N.min(ENTRY_ARGS);
            parent[2..].copy_from_slice(&args[..split]);
            let mut cont = [0u64; SLOT_WORDS - 1];
            cont[..N - split].copy_from_slice(&args[split..]);
            ring.write_pair(timestamp, pid, &parent, &cont).is_some()
        }
    }
}

/// A value a trace point can carry in an argument word.
pub trait Arg {
    /// How readers show it where the format gives no spec; recorded with the tracepoint.
    const TYPE: ArgType;
    /// The same type with every lifetime `'static`: what [`point!`](crate::point!) learns
    /// the type through without keeping borrows alive.
    type Static: Arg + 'static;
    /// The argument word.
    fn into_word(self) -> u64;
}

macro_rules! unsigned_arg {
    ($($t:ty),*) => {$(
        impl Arg for $t {
            const TYPE: ArgType = ArgType::Unsigned;
            type Static = $t;
            #[inline(always)]
            fn into_word(self) -> u64 { self as u64 }
        }
    )*};
}
macro_rules! signed_arg {
    ($($t:ty),*) => {$(
        impl Arg for $t {
            const TYPE: ArgType = ArgType::Signed;
            type Static = $t;
            /// Sign-extended.
            #[inline(always)]
            fn into_word(self) -> u64 { self as i64 as u64 }
        }
    )*};
}
unsigned_arg!(u8, u16, u32, u64, usize);
signed_arg!(i8, i16, i32, i64, isize);

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

impl Arg for &str {
    const TYPE: ArgType = ArgType::Str;
    type Static = &'static str;
    /// Copies the string to the aux buffer; the word refers to it.
    fn into_word(self) -> u64 {
        string_word(self.as_bytes())
    }
}

impl Arg for &[u8] {
    const TYPE: ArgType = ArgType::Str;
    type Static = &'static [u8];
    /// Copies the bytes to the aux buffer; the word refers to them.
    fn into_word(self) -> u64 {
        string_word(self)
    }
}

impl Arg for &String {
    const TYPE: ArgType = ArgType::Str;
    type Static = &'static String;
    /// Copies the string to the aux buffer; the word refers to it.
    fn into_word(self) -> u64 {
        string_word(self.as_bytes())
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

/// The type of a trace point's arguments, without their lifetimes: [`point!`](crate::point!)
/// names the arguments in a closure it never calls, which returns this.
#[doc(hidden)]
#[inline(always)]
pub fn erase<A: Args>(_: A) -> core::marker::PhantomData<A::Static> {
    core::marker::PhantomData
}

fn string_word(bytes: &[u8]) -> u64 {
    let Some(dev) = crate::global::device() else {
        return AUX_NONE;
    };
    let ctx = crate::thread::ctx(dev);
    dev.aux_write(AuxTag::String, ctx, bytes)
        .unwrap_or(AUX_NONE)
}

/// Records a free-form message in the aux buffer of the process's device; readers show it
/// as an event of its own, named `info`. Messages are controlled as a tracepoint named
/// `info` of class [`CLASS_MESSAGES`](crate::CLASS_MESSAGES) is (`ttrace-reader ctl disable info`,
/// `ctl clrbits 0x8000000000000000`): while off, this records nothing and counts nothing,
/// at the cost of one load. Returns false if nothing was recorded (messages off, no device,
/// or the aux buffer could not take it).
pub fn info(message: &str) -> bool {
    let Ok(dev) = crate::global::device_or_init() else {
        return false;
    };
    // Relaxed: the word is self-contained, as a tracepoint's word is; a control change is
    // seen at some later message, as it is at some later trace point.
    if dev.header().info_off.load(Relaxed) != 0 {
        return false;
    }
    let ctx = crate::thread::ctx(dev);
    dev.aux_write(AuxTag::Info, ctx, message.as_bytes())
        .is_some()
}

/// Defines a tracepoint:
/// `tracepoint!(pub static NAME: Kind[classes] = "name", "format", TABLES...);`.
///
/// `[classes]` (class bits for the mask) is optional and defaults to [`CLASS_DEFAULT`].
/// The format names each argument with a placeholder, at most 12: `{name}` shows it as its
/// Rust type says, `{name:spec}` as the spec says (`x` hex, `d` signed, ... see
/// [`crate::format`]; an unknown spec does not compile). A spec may instead name a value
/// table ([`values!`](crate::values!)), listed after the format.
///
/// `Kind` says what the event marks, and readers pair events by it:
/// - `Entry` / `Exit`: a thread enters and leaves a function or region (`read` then
///   `read_done`). `dump` shows them as they are; the exports make each pair of a thread
///   one slice (a uftrace function, a Chrome `X` event, nested by time), and `report`
///   measures the time between them. Pairs nest like calls, last entered first left.
/// - `Start` / `Stop`: something begins and ends that is not a call: a request, a state.
///   Where a `Stop` tracepoint shares a `Start`'s name stem (`req_start` / `req_stop`,
///   `_begin` / `_end`, `_done`), `report` measures it and the Chrome export shows it as an
///   async slice (pairs may overlap); uftrace and CTF keep two events. A `Start` with no
///   such `Stop` is an instant event (`tick`, `sched_switch`).
///
/// ```
/// ttrace_core::tracepoint!(pub static SWITCH: Start[1 << 4] = "sched_switch", "prev={prev} next={next}");
/// assert_eq!(SWITCH.definition().nargs, 2);
/// ```
#[macro_export]
macro_rules! tracepoint {
    ($(#[$m:meta])* $vis:vis static $id:ident : $kind:ident $([$classes:expr])? = $name:expr, $format:expr $(, $table:path)* $(,)?) => {
        $(#[$m])*
        $vis static $id: $crate::Tracepoint<{ $crate::count_args($format) }> = $crate::Tracepoint::new(
            $name,
            $crate::Kind::$kind,
            $crate::tracepoint!(@classes $($classes)?),
            $format,
            &[$(&$table),*],
            {
                static WORD: $crate::WordRef = $crate::WordRef::new();
                &WORD
            },
        );
    };
    (@classes) => { $crate::CLASS_DEFAULT };
    (@classes $classes:expr) => { $classes };
}

/// Records a trace point: `point!(TRACEPOINT, arg, ...)`. When the tracepoint is disabled
/// this is one load of its word and a branch; the arguments are not evaluated.
///
/// Each argument's type is checked against its placeholder's spec when the program is
/// compiled (a string given to `{n:x}` does not compile), and recorded with the tracepoint
/// by the trace point that registers it, so that `{n}` shows an `i32` signed. Arguments
/// are written inside a closure that is never called, to learn their types without
/// evaluating them: `?` and `.await` cannot appear in them.
///
/// ```
/// # let tmp = tempfile::tempdir().unwrap();
/// # ttrace_core::init(&ttrace_core::Config::at(tmp.path().join("dev"))).unwrap();
/// ttrace_core::tracepoint!(static TICK: Start = "tick", "n={n}");
/// for n in 0..3u32 {
///     ttrace_core::point!(TICK, n);
/// }
/// ```
#[macro_export]
macro_rules! point {
    ($tp:path $(, $arg:expr)* $(,)?) => {{
        let tp = &$tp;
        let word = tp.word();
        if word != 0 {
            // The arguments' types, checked against the format; the closure is not called.
            #[inline(always)]
            fn types<A: $crate::Args>(
                _: &impl FnOnce() -> ::core::marker::PhantomData<A>,
            ) -> &'static [$crate::ArgType] {
                const { $crate::format::check_args($tp.definition(), A::TYPES) };
                A::TYPES
            }
            let word = tp.enabled_word(word, types(&|| $crate::tracepoint::erase(($($arg,)*))));
            if word != 0 {
                tp.record(word, [$($crate::Arg::into_word($arg)),*]);
            }
        }
    }};
}
