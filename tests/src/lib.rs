//! Helpers shared by the integration tests.

use std::path::Path;
use std::time::Duration;
use ttrace_core::Config;

/// A small device configuration for tests: short calibration, given ring size and CPUs.
pub fn config(dir: &Path, ring_slots: u64, cpus: u32) -> Config {
    Config {
        ring_slots,
        cpus: Some(cpus),
        calibration: Duration::from_millis(2),
        ..Config::at(dir)
    }
}

/// A well-mixed 64-bit value of three inputs, so that every argument word names exactly one
/// (writer, sequence, index) and any mix of two writes is visible.
pub fn mix(writer: u64, seq: u64, index: u64) -> u64 {
    let mut x = writer.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ seq.rotate_left(17)
        ^ index.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 31;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 29)
}
