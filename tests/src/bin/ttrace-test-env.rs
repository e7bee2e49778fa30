//! A program configured only by the environment, for the tests of `TTRACE_*`:
//! `ttrace-test-env`. It opens the device as a trace point would ([`device_or_init`], so
//! `TTRACE_DIR`, `TTRACE_RING_SLOTS`, `TTRACE_AUX_SIZE`, `TTRACE_MASK` and `TTRACE_DISABLED`
//! apply), records one `env_point(n=7)`, and prints `slots <n> aux <bytes> mask <hex>`. An
//! error is one line on stderr and exit status 1.
//!
//! Arguments record more, in order: `x=N` records `x_point(n=N)`, `info=TEXT` the message
//! `TEXT` (`ttrace_core::info`).
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
                eprintln!("ttrace-test-env: {arg:?}: expected x=N or info=TEXT");
                std::process::exit(1);
            }
        }
    }
    let h = dev.mapping().header();
    println!(
        "slots {} aux {} mask {:#x}",
        h.ring_slots,
        h.aux_size,
        h.type_mask.load(std::sync::atomic::Ordering::SeqCst)
    );
}
