//! Context switches across a fork: the child closes its copies of the parent's buffers
//! unread and observes its own thread; the parent's threads stay observed.

use std::time::Duration;
use ttrace_core::{point, switches, tracepoint, Config};

tracepoint!(static MARK: Start = "t_mark", "n={n}");

#[test]
#[ignore = "needs perf_event_open of its own threads: sysctl -w kernel.perf_event_paranoid=2"]
fn a_forked_child_observes_its_own_thread_and_the_parent_keeps_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = Config {
        ring_slots: 1024,
        cpus: Some(2),
        calibration: Duration::from_millis(2),
        switches: true,
        ..Config::at(tmp.path().join("dev"))
    };
    let dev = ttrace_core::init(&cfg).unwrap();
    point!(MARK, 0);
    assert_eq!(
        switches::status(),
        switches::Status::On {
            threads: 1,
            limit: switches::limit()
        }
    );
    // SAFETY: the child only records an event, reads the status and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        point!(MARK, 1);
        let code = match switches::status() {
            switches::Status::On { threads: 1, .. } => 0,
            _ => 1,
        };
        switches::flush();
        // SAFETY: ends the child without running the parent's atexit handlers or tests.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child observed its own thread"
    );
    // The parent's thread is still observed, and its switches still arrive.
    assert_eq!(
        switches::status(),
        switches::Status::On {
            threads: 1,
            limit: switches::limit()
        }
    );
    std::thread::sleep(Duration::from_millis(2));
    switches::flush();
    let me = ttrace_core::thread_context(dev);
    let meta = dev.device().reader().metadata();
    let mine = (0..dev.device().mapping().num_rings())
        .flat_map(|r| dev.device().mapping().ring(r).reader().snapshot().events)
        .filter(|e| {
            e.ctx == me && meta.tracepoints[e.type_word.tracepoint() as usize].name == "sched_out"
        })
        .count();
    assert!(mine >= 1, "the parent's sleep after the fork was recorded");
    let st = dev.device().reader().status().switches;
    assert_eq!(st.threads, 2, "the parent's thread and the child's: {st:?}");
}
