//! Writers at once, under fire: processes sharing one device (`processes`), writers killed
//! anywhere (`crash`), busy rings followed live (`follow`), and threads moved between CPUs and signalled mid-write on rings that
//! lap constantly (`stress`).
//!
//! Each of these loads every CPU, and `crash` times its kills: the tests of one module take
//! turns with those of the others ([`ttrace_tests::turn`]), so that each module runs as it
//! did when it was a test binary of its own.

mod crash;
mod follow;
mod processes;
mod stress;
