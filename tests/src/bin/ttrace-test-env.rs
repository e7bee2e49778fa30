//! A program configured only by the environment, for the tests of `TTRACE_*`:
//! `ttrace-test-env`. It opens the device as a trace point would ([`device_or_init`], so
//! `TTRACE_DIR`, `TTRACE_RING_SLOTS`, `TTRACE_AUX_SIZE`, `TTRACE_MASK` and `TTRACE_DISABLED`
//! apply), records one `env_point(n=7)`, and prints `slots <n> aux <bytes> mask <hex>`. An
//! error is one line on stderr and exit status 1.
//!
//! Arguments record more, in order: `x=N` records `x_point(n=N)`, `info=TEXT` the message
//! `TEXT` (`ttrace_core::info`). `fork` forks: the child names its thread `forked-child`,
//! records the arguments that follow and exits; the parent waits for it, prints the child's
//! pid as `child <pid>`, and records nothing more.
//!
//! [`device_or_init`]: ttrace_core::device_or_init

use ttrace_core::{point, tracepoint};

tracepoint!(static ENV_POINT: Start = "env_point", "n={n}");
tracepoint!(static X_POINT: Start = "x_point", "n={n}");

fn main() {
    let dev = match ttrace_core::device_or_init() {
        Ok(dev) => dev,
        Err(e) => {
            eprintln!("ttrace-test-env: {e}");
            std::process::exit(1);
        }
    };
    point!(ENV_POINT, 7);
    for arg in std::env::args().skip(1) {
        if arg == "fork" {
            // SAFETY: this program has one thread, so the child may do anything the parent
            // could; it leaves by `exit`.
            match unsafe { libc::fork() } {
                -1 => {
                    eprintln!("ttrace-test-env: fork: {}", std::io::Error::last_os_error());
                    std::process::exit(1);
                }
                0 => {
                    // SAFETY: PR_SET_NAME reads a NUL-terminated name of at most 16 bytes.
                    unsafe { libc::prctl(libc::PR_SET_NAME, c"forked-child".as_ptr()) };
                    continue;
                }
                child => {
                    let mut status = 0;
                    // SAFETY: `child` is our child; `status` is a valid out-pointer.
                    unsafe { libc::waitpid(child, &mut status, 0) };
                    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
                        eprintln!("ttrace-test-env: the forked child failed ({status:#x})");
                        std::process::exit(1);
                    }
                    println!("child {child}");
                    break;
                }
            }
        }
        match arg.split_once('=') {
            Some(("x", n)) => match n.parse::<u64>() {
                Ok(n) => point!(X_POINT, n),
                Err(_) => {
                    eprintln!("ttrace-test-env: {arg:?}: not a number");
                    std::process::exit(1);
                }
            },
            Some(("info", text)) => {
                ttrace_core::info(text);
            }
            _ => {
                eprintln!("ttrace-test-env: {arg:?}: expected x=N, info=TEXT or fork");
                std::process::exit(1);
            }
        }
    }
    let h = dev.device().mapping().header();
    println!(
        "slots {} aux {} mask {:#x}",
        h.ring_slots,
        h.aux_size,
        h.type_mask.load(std::sync::atomic::Ordering::SeqCst)
    );
}
