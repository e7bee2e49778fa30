//! Defining a tracepoint: its definition, checked when the program is compiled, and where
//! its trace points find its word. Recording one is the hot path of the `writer` module.
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

use core::sync::atomic::{AtomicPtr, AtomicU64};
use devttrace::meta::Definition;
use devttrace::values::ValueTable;
use ttrace_layouts::entry::MAX_ARGS;
// What `tracepoint!` names, by this module's path rather than the crate root's: a module that
// defines a tracepoint then depends on this module only.
#[doc(hidden)]
pub use ttrace_layouts::{entry::Kind, format::count_args};

/// The word of a tracepoint not yet registered: not zero, so the first trace point takes
/// the (cold) registration path; never a valid type word.
pub const UNREGISTERED: u64 = u64::MAX;
static UNREGISTERED_WORD: AtomicU64 = AtomicU64::new(UNREGISTERED);
/// The word a tracepoint whose registration failed points to: always 0.
pub(crate) static DISABLED_WORD: AtomicU64 = AtomicU64::new(0);

/// The default class of tracepoints defined without classes.
pub const CLASS_DEFAULT: u64 = 1;

/// Where a tracepoint finds its word: the sentinel before registration, then its slot in
/// the device's word table.
///
/// It lives in a `static` of its own, outside the [`Tracepoint`], so that the tracepoint
/// holds no interior mutability and `point!` can read its definition in a
/// constant (to check the arguments' types when the program is compiled). The compiler
/// sees the reference as a constant: the hot path still makes two dependent loads.
pub struct WordRef(pub(crate) AtomicPtr<AtomicU64>);

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
    pub(crate) word: &'static WordRef,
    def: Definition,
}

impl<const N: usize> Tracepoint<N> {
    /// A tracepoint; fails to compile (in a `static`) unless `format` has `N` placeholders,
    /// `N` is at most 12, every spec is known (see [`crate::check`]) and `tables` are the
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
            ttrace_layouts::format::count_args(format) == N,
            "the format must have one placeholder per argument"
        );
        crate::check::check_format(name, format, tables);
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
                role: devttrace::Role::Point,
            },
        }
    }

    /// The definition (its `types` are those of the trace point that registers it).
    pub const fn definition(&self) -> &Definition {
        &self.def
    }
}

/// Defines a tracepoint:
/// `tracepoint!(pub static NAME: Kind[classes] = "name", "format", TABLES...);`.
///
/// `[classes]` (class bits for the mask) is optional and defaults to [`CLASS_DEFAULT`].
/// The format names each argument with a placeholder, at most 12: `{name}` shows it as its
/// Rust type says, `{name:spec}` as the spec says (`x` hex, `d` signed, ... see
/// [`crate::check`]; an unknown spec does not compile). A spec may instead name a value
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
        $vis static $id: $crate::tracepoint::Tracepoint<{ $crate::tracepoint::count_args($format) }> = $crate::tracepoint::Tracepoint::new(
            $name,
            $crate::tracepoint::Kind::$kind,
            $crate::tracepoint!(@classes $($classes)?),
            $format,
            &[$(&$table),*],
            {
                static WORD: $crate::tracepoint::WordRef = $crate::tracepoint::WordRef::new();
                &WORD
            },
        );
    };
    (@classes) => { $crate::tracepoint::CLASS_DEFAULT };
    (@classes $classes:expr) => { $classes };
}
