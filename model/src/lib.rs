//! ttrace-model: what ttrace events mean, decided in one place for every reader.
//!
//! A device holds events (`devttrace`); what they mean is decided here, once, for `report`,
//! every export and the snapshot rules: which thread wrote each event ([`incarnation`]: a
//! thread id the kernel gave again is another thread), what pairs are named by ([`pairs`]: a
//! start and a stop by their name's stem), what a `tracing` span's instance is with its
//! polls ([`spans`]), what a format's arguments are named ([`arguments`]), and where an
//! interval's time went ([`anatomy`]: on or off the CPU, waiting idle or in the runtime's
//! queue). The [`model`] puts them together, and alone pairs: fed every event in time
//! order, and the gaps, it says what each event did as steps (never pairing across events
//! that may be missing), which every reader renders.
//!
//! Modules are listed from the bottom up: each one uses only modules listed before it.

#![deny(missing_docs)]

pub mod arguments;
pub mod anatomy;
pub mod incarnation;
pub mod pairs;
pub mod spans;
pub mod model;
