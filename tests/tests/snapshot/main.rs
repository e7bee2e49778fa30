//! Snapshot files, and the replay of every input the fuzzers saved (their corpus and every
//! crash they found, a snapshot target's among them).

mod bit_flips;
mod fuzz_regressions;
mod shadow;
mod snapshot;
mod triggers;
