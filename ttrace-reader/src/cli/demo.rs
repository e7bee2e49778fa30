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
/// the process, as they would have. Call it before starting any other thread.
fn remove_on_signals(tmp: &Path) {
    let tmp = tmp.to_path_buf();
    crate::signals::take().on_signal(move |sig| {
        let _ = std::fs::remove_dir_all(&tmp);
        crate::signals::end_by(sig)
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
