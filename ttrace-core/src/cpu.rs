//! The CPU a thread runs on, as cheaply as the platform allows.
//!
//! Measured on the project's machines (`cargo run --release -p ttrace-benches --bin hotpath`):
//!
//! | source                                     | cost    |
//! |--------------------------------------------|---------|
//! | glibc's registered rseq area (`cpu_id`)    | 0.35 ns |
//! | `rdpid` (TSC_AUX, set by Linux to the CPU) | 0.7 ns  |
//! | `sched_getcpu()` (vDSO)                    | 3.2 ns  |
//! | `rdtscp` (timestamp and TSC_AUX together)  | 24 ns, twice a plain `rdtsc` |
//!
//! So the timestamp comes from `rdtsc` and the CPU from the rseq area when glibc registered
//! one (glibc ≥ 2.35 exports `__rseq_offset` and `__rseq_size`), else `rdpid`, else
//! `sched_getcpu`. The answer may be stale by the time it is used (the thread can migrate);
//! that only means two CPUs briefly share a ring, which the entry protocol allows.

use core::sync::atomic::{AtomicI64, AtomicU8, Ordering::Relaxed};
use std::sync::Once;

/// Where CPU ids come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum CpuSource {
    /// `sched_getcpu()`.
    SchedGetcpu = 0,
    /// The `rdpid` instruction.
    Rdpid = 1,
    /// glibc's rseq area.
    Rseq = 2,
}

// Relaxed throughout: every source gives a correct CPU id, so a thread that sees a stale
// source (the default, `sched_getcpu`) is only slower, never wrong.
static SOURCE: AtomicU8 = AtomicU8::new(CpuSource::SchedGetcpu as u8);
static RSEQ_OFFSET: AtomicI64 = AtomicI64::new(0);
static DETECT: Once = Once::new();

/// The source in use.
pub fn source() -> CpuSource {
    match SOURCE.load(Relaxed) {
        2 => CpuSource::Rseq,
        1 => CpuSource::Rdpid,
        _ => CpuSource::SchedGetcpu,
    }
}

/// Picks the cheapest source that works in this process (once; later calls return at once).
pub fn detect() -> CpuSource {
    DETECT.call_once(|| {
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        {
            if let Some(area) = crate::rseq::area() {
                RSEQ_OFFSET.store(area.offset, Relaxed);
                SOURCE.store(CpuSource::Rseq as u8, Relaxed);
                return;
            }
            if has_rdpid() && agrees_with_kernel(rdpid_cpu) {
                SOURCE.store(CpuSource::Rdpid as u8, Relaxed);
            }
        }
    });
    source()
}

/// The CPU this thread is running on (possibly stale by the time it is used). Writers use
/// `Writer::cpu`, which keeps the [`mode`] and avoids these statics.
#[inline]
pub fn current() -> u32 {
    current_with(mode())
}

/// The detected source as one word, for holders that want to read it without touching
/// these statics on the hot path: the rseq offset, or [`MODE_RDPID`] / [`MODE_SCHED`].
pub fn mode() -> i64 {
    match detect() {
        CpuSource::Rseq => RSEQ_OFFSET.load(Relaxed),
        CpuSource::Rdpid => MODE_RDPID,
        CpuSource::SchedGetcpu => MODE_SCHED,
    }
}

/// [`mode`] value meaning `rdpid`.
pub const MODE_RDPID: i64 = i64::MIN;
/// [`mode`] value meaning `sched_getcpu`.
pub const MODE_SCHED: i64 = i64::MIN + 1;

/// The CPU this thread runs on, read the way `mode` (from [`mode`]) says.
#[inline(always)]
pub fn current_with(mode: i64) -> u32 {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        if mode > MODE_SCHED {
            return crate::rseq::cpu_id(mode);
        }
        if mode == MODE_RDPID {
            return rdpid_cpu();
        }
    }
    let _ = mode;
    sched_getcpu()
}

/// `sched_getcpu()`, or 0 where it fails.
pub fn sched_getcpu() -> u32 {
    // SAFETY: no arguments, no memory effects.
    let cpu = unsafe { libc::sched_getcpu() };
    if cpu < 0 {
        0
    } else {
        cpu as u32
    }
}

/// Whether `f` names the same CPU as the kernel does (allowing for a migration in between).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn agrees_with_kernel(f: impl Fn() -> u32) -> bool {
    (0..64).any(|_| {
        let a = sched_getcpu();
        let b = f();
        a == b && a == sched_getcpu()
    })
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn has_rdpid() -> bool {
    use core::arch::x86_64::{__cpuid, __cpuid_count};
    // SAFETY: `cpuid` exists on every x86_64 CPU and only reads; leaf 7 is asked only where
    // leaf 0 says the CPU has it. (Safe functions since Rust 1.87; the block keeps the crate
    // building with its `rust-version`.)
    #[allow(unused_unsafe)]
    unsafe {
        __cpuid(0).eax >= 7 && __cpuid_count(7, 0).ecx & (1 << 22) != 0
    }
}

/// `rdpid`: Linux keeps `node << 12 | cpu` in TSC_AUX.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[inline(always)]
fn rdpid_cpu() -> u32 {
    let aux: u64;
    // SAFETY: only called after `has_rdpid` confirmed the instruction exists; no memory effects.
    unsafe { core::arch::asm!("rdpid {}", out(reg) aux, options(nomem, nostack, preserves_flags)) };
    (aux & 0xfff) as u32
}

/// The sources that work on this machine, cheapest last.
pub fn available() -> Vec<CpuSource> {
    detect();
    let mut v = vec![CpuSource::SchedGetcpu];
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        if has_rdpid() {
            v.push(CpuSource::Rdpid);
        }
        if crate::rseq::area().is_some() {
            v.push(CpuSource::Rseq);
        }
    }
    v
}

/// Reads the CPU id from `source`, which must be one of [`available`] (for measurement:
/// with a constant `source` this inlines to the bare read).
#[inline(always)]
pub fn read(source: CpuSource) -> u32 {
    match source {
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        CpuSource::Rseq => crate::rseq::cpu_id(RSEQ_OFFSET.load(Relaxed)),
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        CpuSource::Rdpid => rdpid_cpu(),
        _ => sched_getcpu(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn detected_source_names_the_cpu_the_kernel_reports() {
        super::detect();
        let agreed = (0..100).any(|_| {
            let k = super::sched_getcpu();
            super::current() == k && super::sched_getcpu() == k
        });
        assert!(
            agreed,
            "source {:?} never agreed with sched_getcpu",
            super::source()
        );
    }
}
