//! The device: read through `devttrace` (`reader_api`), written through `ttrace_core`
//! (`writer_api`), configured from the environment, controlled, damaged, owned by someone
//! else, and named through thread and process churn.
//!
//! One test here (`info_control::info_records_nothing_while_disabled`) installs the
//! process's writer (`ttrace_core::init`); no other test of this binary may use the
//! process's writer (`init`, `point!`, `info`), which a process has only one of.

mod churn;
mod config;
mod damaged;
mod entry_damage;
mod info_control;
mod names_full;
mod pre_release;
mod reader_api;
mod security;
mod small_stamps;
mod sparse;
mod writer_api;
