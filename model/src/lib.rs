//! ttrace-model: what ttrace events mean, decided in one place for every reader.
//!
//! A device holds events (`devttrace`); what they mean is decided here, once, for `report`,
//! every export and the snapshot rules: which thread wrote each event ([`incarnation`]: a
//! thread id the kernel gave again is another thread), how an entry pairs with its exit and
//! a start with a stop of its name's stem ([`pairs`]: never across events that may be
//! missing), how a `tracing` span's steps make one instance with its polls ([`spans`]), and
//! what a format's arguments are named ([`arguments`]), and where an interval's time went
//! ([`anatomy`]: on or off the CPU, waiting idle or in the runtime's queue). The [`model`] puts them together:
//! fed every event in time order, and the gaps, it says what each event did as steps, which
//! every reader renders.
//!
//! Modules are listed from the bottom up: each one uses only modules listed before it.

#![deny(missing_docs)]

pub mod arguments;
pub mod anatomy;
pub mod incarnation;
pub mod pairs;
pub mod spans;
pub mod model;
