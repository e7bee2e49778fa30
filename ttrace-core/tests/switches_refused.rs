//! Context switches where the kernel refuses `perf_event_open` (a container's seccomp
//! profile): a seccomp filter makes it fail with `EPERM` in this process. The program traces
//! as before; the device says once why switches are missing; no thread is observed.

use std::time::Duration;
use ttrace_core::{point, switches, tracepoint, Config};

tracepoint!(static MARK: Start = "t_mark", "n={n}");

/// Makes `perf_event_open` fail with `EPERM` in every thread of this process.
fn refuse_perf_event_open() {
    const NR: u32 = libc::SYS_perf_event_open as u32;
    // Load the syscall number; if it is perf_event_open, fail with EPERM; else allow.
    let filter = [
        libc::sock_filter {
            code: 0x20,
            jt: 0,
            jf: 0,
            k: 0,
        }, // BPF_LD | BPF_W | BPF_ABS, nr
        libc::sock_filter {
            code: 0x15,
            jt: 0,
            jf: 1,
            k: NR,
        }, // BPF_JMP | BPF_JEQ | BPF_K
        libc::sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: 0x0005_0000 | libc::EPERM as u32,
        }, // RET ERRNO
        libc::sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: 0x7fff_0000,
        }, // RET ALLOW
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: `prog` points to a valid filter alive for the calls; no_new_privs is what an
    // unprivileged process needs to install one; TSYNC applies it to every thread.
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        assert_eq!(
            libc::syscall(
                libc::SYS_seccomp,
                1, // SECCOMP_SET_MODE_FILTER
                1, // SECCOMP_FILTER_FLAG_TSYNC
                &prog as *const libc::sock_fprog,
            ),
            0,
            "seccomp: {}",
            std::io::Error::last_os_error()
        );
    }
}

#[test]
fn a_refusal_is_said_once_and_changes_nothing_else() {
    refuse_perf_event_open();
    let tmp = tempfile::tempdir().unwrap();
    let cfg = Config {
        ring_slots: 1024,
        cpus: Some(2),
        calibration: Duration::from_millis(2),
        switches: true,
        ..Config::at(tmp.path().join("dev"))
    };
    let dev = ttrace_core::init(&cfg).unwrap();
    for t in 0..2 {
        std::thread::spawn(move || {
            point!(MARK, t);
            std::thread::sleep(Duration::from_millis(1));
            point!(MARK, t + 10);
        })
        .join()
        .unwrap();
    }
    assert_eq!(switches::status(), switches::Status::Refused(libc::EPERM));
    switches::flush();
    let events: Vec<_> = (0..dev.device().mapping().num_rings())
        .flat_map(|r| dev.device().mapping().ring(r).reader().snapshot().events)
        .collect();
    let meta = dev.device().reader().metadata();
    let names: Vec<&str> = events
        .iter()
        .map(|e| {
            meta.tracepoints[e.type_word.tracepoint() as usize]
                .name
                .as_str()
        })
        .collect();
    assert_eq!(names, ["t_mark"; 4], "the points, and nothing else");
    let st = dev.device().reader().status().switches;
    assert_eq!((st.threads, st.refused), (0, libc::EPERM as u64));
    assert_eq!(
        st.line().unwrap(),
        "switches: not recorded: perf_event_open refused (EPERM)"
    );
}
