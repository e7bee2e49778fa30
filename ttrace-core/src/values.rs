//! Value tables: names for an argument's values, defined once with [`values!`](crate::values!)
//! and carried in the trace's metadata ([`ValueTable`]); readers apply them.
//!
//! ```
//! # let tmp = tempfile::tempdir().unwrap();
//! # ttrace_core::init(&ttrace_core::Config::at(tmp.path().join("dev"))).unwrap();
//! use ttrace_core::{point, tracepoint, values};
//!
//! values!(static OPEN_FLAGS: flags = { O_RDONLY = 0, O_WRONLY = 0o1, O_RDWR = 0o2, O_CREAT = 0o100, O_TRUNC = 0o1000 });
//! values!(static STATE: enum = { Idle = 0, Busy = 1, Done = 2 });
//! tracepoint!(static OPEN: Entry = "open", "path={path:s} flags={flags:OPEN_FLAGS} state={state:STATE}", OPEN_FLAGS, STATE);
//!
//! point!(OPEN, "/tmp/x", 0o1101u32, 1u8); // dump: open(path="/tmp/x" flags=O_WRONLY|O_CREAT|O_TRUNC state=Busy)
//! assert_eq!(OPEN_FLAGS.show(0o1111), "O_WRONLY|O_CREAT|O_TRUNC|0x8");
//! assert_eq!(STATE.show(7), "7");
//! ```
//!
//! A table that cannot be shown unambiguously does not compile:
//!
//! ```compile_fail
//! ttrace_core::values!(static STATE: enum = { Idle = 0, Busy = 1, Done = 1 }); // two names for 1
//! ```
//!
//! ```compile_fail
//! ttrace_core::values!(static F: flags = { A = 1, NONE = 0, EMPTY = 0 }); // two names for no bits
//! ```

// What `values!` names, by this module's path rather than the crate root's.
#[doc(hidden)]
pub use devttrace::values::{ValueTable, ValuesKind};

/// Defines a value table: `values!(pub static NAME: flags = { A = 1, B = 2 });` or
/// `values!(static NAME: enum = { Idle = 0, Busy = 1 });`.
///
/// A tracepoint uses it by naming it as an argument's spec and listing it after its format:
/// `tracepoint!(static OPEN: Entry = "open", "flags={flags:OPEN_FLAGS}", OPEN_FLAGS);`. Values
/// are constant expressions converted with `as u64`, so a negative enum value matches a
/// signed argument. See [`ValueTable`] for what readers print.
#[macro_export]
macro_rules! values {
    ($(#[$m:meta])* $vis:vis static $id:ident : flags = { $($name:ident = $value:expr),+ $(,)? } $(;)?) => {
        $crate::values!(@table $(#[$m])* $vis $id Flags $($name $value)+);
    };
    ($(#[$m:meta])* $vis:vis static $id:ident : enum = { $($name:ident = $value:expr),+ $(,)? } $(;)?) => {
        $crate::values!(@table $(#[$m])* $vis $id Enum $($name $value)+);
    };
    (@table $(#[$m:meta])* $vis:vis $id:ident $kind:ident $($name:ident $value:expr)+) => {
        $(#[$m])*
        $vis static $id: $crate::values::ValueTable = $crate::values::ValueTable::new(
            stringify!($id),
            $crate::values::ValuesKind::$kind,
            &[$((stringify!($name), ($value) as i128 as u64)),+],
        );
    };
}
