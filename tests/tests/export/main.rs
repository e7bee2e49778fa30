//! The exports (CTF, Chrome JSON, uftrace, Perfetto, OTLP) against what `dump` shows, and value tables and
//! typed arguments through `dump`, `report` and every export; `tracing` span instances in
//! the Perfetto and Chrome exports (`spans`).
//!
//! `values` writes its device through the process's writer (`ttrace_core::init` and
//! `point!`); no other test of this binary may use the process's writer, which a process
//! has only one of. The tests that need babeltrace2 or uftrace installed are
//! `#[ignore = "needs ..."]`, run with `-- --include-ignored`.

mod export;
mod meaning;
mod otlp;
mod parts;
mod spans;
mod threads;
mod values;
