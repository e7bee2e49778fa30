//! A program that dies, for the fatal-signal and panic tests: `ttrace-test-fatal <device-dir>
//! <segv|abort|panic>`. It opens the device, installs the panic hook (and with it the
//! fatal-signal handlers), records `before(n=1)`, then loads from address 0 (`segv`), calls
//! `abort()` (`abort`) or panics with `request 42 failed` (`panic`; the snapshot goes to
//! `$TTRACE_SNAPSHOT_DIR`). It leaves no core file: its core size limit is set to 0 first.

use ttrace_core::{point, tracepoint};

tracepoint!(static BEFORE: Start = "before", "n={n}");

/// Loads a word from address 0: a real access of the null page, which faults with SIGSEGV
/// at address 0 (a Rust null dereference would be undefined behaviour, and checked).
#[inline(never)]
fn load_null() -> u64 {
    let p = std::hint::black_box(0usize);
    #[cfg(target_arch = "x86_64")]
    {
        let v: u64;
        // SAFETY: faults, on purpose: the process dies here by SIGSEGV.
        unsafe { core::arch::asm!("mov {v}, qword ptr [{p}]", p = in(reg) p, v = out(reg) v) };
        v
    }
    #[cfg(target_arch = "aarch64")]
    {
        let v: u64;
        // SAFETY: faults, on purpose: the process dies here by SIGSEGV.
        unsafe { core::arch::asm!("ldr {v}, [{p}]", p = in(reg) p, v = out(reg) v) };
        v
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        // SAFETY: none: faults, on purpose (no architecture without null-page faults is
        // supported by the tests that run this).
        unsafe { core::ptr::read_volatile(p as *const u64) }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, mode] = args.as_slice() else {
        eprintln!("usage: ttrace-test-fatal <device-dir> <segv|abort|panic>");
        std::process::exit(2);
    };
    let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid rlimit for this process.
    unsafe { libc::setrlimit(libc::RLIMIT_CORE, &no_core) };
    ttrace_core::init(&ttrace_core::Config::at(dir)).expect("device");
    ttrace_snapshots::install_panic_hook();
    point!(BEFORE, 1u64);
    match mode.as_str() {
        "segv" => println!("{}", load_null()),
        "abort" => std::process::abort(),
        "panic" => panic!("request 42 failed"),
        other => {
            eprintln!("ttrace-test-fatal: unknown mode {other}");
            std::process::exit(2);
        }
    }
}
