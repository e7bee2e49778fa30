//! `ttrace-reader demo`: the built-in workload ([`crate::demo`]) run into a device, and its
//! trace printed.

use super::dump::print;
use super::open::open;
use crate::decode::TimeFormat;
use crate::merge::Filter;
use crate::output::quiet_pipe;
use crate::Error;
use devttrace::View;
use std::path::{Path, PathBuf};

/// Makes SIGINT, SIGTERM and SIGHUP remove the temporary directory `tmp` before they end
/// the process, as they would have: they are blocked in the calling thread (and so in the
/// threads it starts after), and taken by a thread of their own. Call it before starting
/// any other thread.
fn remove_on_signals(tmp: &Path) {
    let tmp = tmp.to_path_buf();
    // SAFETY: the set is initialized by sigemptyset before it is used; pthread_sigmask only
    // reads it.
    let signals = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    };
    std::thread::spawn(move || {
        let mut sig = 0;
        // SAFETY: `signals` is an initialized set; sigwait writes the signal number.
        if unsafe { libc::sigwait(&signals, &mut sig) } != 0 {
            return;
        }
        let _ = std::fs::remove_dir_all(&tmp);
        // SAFETY: the default action restored, the signal unblocked in this thread and sent
        // to it: it ends the process as it would have without this thread.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            let mut one: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut one);
            libc::sigaddset(&mut one, sig);
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
            libc::raise(sig);
        }
        std::process::exit(128 + sig);
    });
}

/// Runs the workload (`threads` per CPU, `requests` each; again and again with
/// `forever`) into `device`, else a temporary device (removed however the demo ends, Ctrl-C
/// included), and prints its trace.
pub(super) fn run(
    threads: usize,
    requests: u64,
    device: Option<PathBuf>,
    forever: bool,
) -> Result<(), Error> {
    // Held to the end: the temporary directory is removed when it is dropped.
    let (_tmp, dir) = match device {
        Some(dir) => (None, dir),
        None => {
            let tmp = tempfile::Builder::new().prefix("ttrace-demo-").tempdir()?;
            remove_on_signals(tmp.path());
            let dir = tmp.path().join("dev");
            (Some(tmp), dir)
        }
    };
    let cfg = devttrace::Config {
        ring_slots: 4096,
        ..devttrace::Config::at(&dir)
    };
    let writer = ttrace_core::init(&cfg)?;
    if forever {
        eprintln!(
            "ttrace-reader: demo: recording into {} until interrupted (Ctrl-C)",
            dir.display()
        );
    }
    loop {
        crate::demo::run(writer, threads, requests);
        if !forever {
            break;
        }
    }
    let dev = open(Some(dir))?;
    let view = View::of(&dev, 0)?;
    quiet_pipe(print(&view, &Filter::default(), TimeFormat::Relative))
}
