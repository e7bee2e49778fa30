//! `ttrace-reader demo`: the built-in workload ([`crate::demo`]) run into a device, and its
//! trace printed.

use super::dump::print;
use super::open::open;
use crate::decode::TimeFormat;
use crate::merge::Filter;
use crate::output::quiet_pipe;
use crate::Error;
use devttrace::View;
use std::path::PathBuf;

/// Runs the workload (`threads` per CPU, `requests` each; again and again with
/// `forever`) into `device`, else a temporary device, and prints its trace.
pub(super) fn run(
    threads: usize,
    requests: u64,
    device: Option<PathBuf>,
    forever: bool,
) -> Result<(), Error> {
    let tmp = tempfile::Builder::new().prefix("ttrace-demo-").tempdir()?;
    let dir = device.unwrap_or_else(|| tmp.path().join("dev"));
    let cfg = devttrace::Config {
        ring_slots: 4096,
        ..devttrace::Config::at(&dir)
    };
    let writer = ttrace_core::init(&cfg)?;
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
