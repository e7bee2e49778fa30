//! The process-wide device that trace points record into.

use crate::device::{Config, Device};
use crate::error::{Error, Result};
use core::sync::atomic::{AtomicPtr, Ordering::*};
use std::sync::Mutex;

static GLOBAL: AtomicPtr<Device> = AtomicPtr::new(core::ptr::null_mut());
static INIT: Mutex<()> = Mutex::new(());

/// Opens (creating if needed) the device of `config` and makes it the process's device.
/// Trace points that fire before any call to `init` open the default device themselves
/// ([`Config::from_env`]: `TTRACE_DIR`, `TTRACE_RING_SLOTS`, `TTRACE_AUX_SIZE`,
/// `TTRACE_MASK`, `TTRACE_DISABLED`).
///
/// Calling it again with the same directory returns the installed device; with another
/// directory it fails.
pub fn init(config: &Config) -> Result<&'static Device> {
    let _serial = INIT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(dev) = device() {
        let wanted = config.resolved_dir();
        return if wanted == dev.dir() {
            Ok(dev)
        } else {
            Err(Error::AlreadyInstalled(dev.dir().to_path_buf()))
        };
    }
    crate::cpu::detect();
    let dev: &'static Device = Box::leak(Box::new(Device::open(config)?));
    // Release: a thread that loads the pointer sees the initialized Device.
    GLOBAL.store(dev as *const Device as *mut Device, Release);
    Ok(dev)
}

/// The process's device, if one is installed.
#[inline(always)]
pub fn device() -> Option<&'static Device> {
    // Acquire: pairs with the Release store in `init`.
    let p = GLOBAL.load(Acquire);
    // SAFETY: a non-null pointer was leaked from a Box in `init` and is never freed.
    unsafe { p.as_ref() }
}

/// The process's device, opening the one the environment names ([`Config::from_env`]) if
/// none is installed yet.
pub fn device_or_init() -> Result<&'static Device> {
    match device() {
        Some(d) => Ok(d),
        None => init(&Config::from_env()?),
    }
}
