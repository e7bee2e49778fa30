//! Why was it slow (issue 40): `ttrace-test-why`, a program whose requests are slow for four
//! reasons (blocked in their poll, preempted in it, idle on their future, scheduled behind
//! another task), run with and without the kernel's view (`TTRACE_SCHED`), and what ttrace
//! makes of each.
//!
//! The program is built outside the workspace (`tests/why`), with
//! `RUSTFLAGS="--cfg tokio_unstable"`, by the first test that needs it ([`program`]): its
//! tests are `#[ignore]`d, and run with `cargo test -p ttrace-tests --test why -- --ignored`
//! on a machine whose `kernel.perf_event_paranoid` is 2 or less.
//! - [`device`]: what the device holds (read from `dump`): the tasks' wakes naming their
//!   `runtime.spawn` instances, the switches inside each kind's polls;
//! - [`anatomy`]: what `report --json` says of each kind: each slow instance's lifetime in
//!   parts, and the largest of them.

mod anatomy;
mod device;
mod program;
