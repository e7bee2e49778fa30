//! The built-in demo workload: several threads on every CPU, several tracepoints, 12-word
//! events with continuations, strings, thread names and a message.

use ttrace_core::{point, tracepoint, values, Writer};

/// Class bit of the request tracepoints.
pub const CLASS_REQUEST: u64 = 1 << 1;
/// Class bit of the I/O tracepoints.
pub const CLASS_IO: u64 = 1 << 2;

tracepoint!(static REQUEST_START: Start[CLASS_REQUEST] = "request_start", "id={id} size={size}");
values!(static STATUS: enum = { Ok = 0, EIO = -5 });
tracepoint!(static REQUEST_DONE: Stop[CLASS_REQUEST] = "request_done", "id={id} status={status:STATUS} took_ns={took}", STATUS);
tracepoint!(static FILE_READ: Entry[CLASS_IO] = "file_read", "fd={fd} path={path:s} offset={offset:x}");
tracepoint!(static FILE_READ_DONE: Exit[CLASS_IO] = "file_read_done", "fd={fd} bytes={bytes}");
tracepoint!(
    static HISTOGRAM: Start = "latency_histogram",
    "b0={b0} b1={b1} b2={b2} b3={b3} b4={b4} b5={b5} b6={b6} b7={b7} b8={b8} b9={b9} b10={b10} b11={b11}"
);

/// Pins the calling thread to `cpu` (best effort: the caller still runs where that fails).
pub fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Runs the workload into the process's device (which must be installed): `per_cpu` named
/// threads pinned to each of the device's CPUs, each serving `requests` requests.
pub fn run(dev: &Writer, per_cpu: usize, requests: u64) {
    ttrace_core::info("demo workload starting");
    let cpus = dev.device().mapping().num_cpus() as usize;
    std::thread::scope(|s| {
        for t in 0..cpus * per_cpu {
            std::thread::Builder::new()
                .name(format!("worker-{t}"))
                .spawn_scoped(s, move || {
                    pin(t % cpus);
                    for r in 0..requests {
                        let id = t as u64 * 1000 + r;
                        let start = std::time::Instant::now();
                        point!(REQUEST_START, id, 512 * (r + 1));
                        let path = format!("/srv/data/{t}/{r}.bin");
                        point!(FILE_READ, 3 + t as u64, path.as_str(), r * 4096);
                        point!(FILE_READ_DONE, 3 + t as u64, 4096u32);
                        if r % 2 == 1 {
                            let b: [u64; 12] = std::array::from_fn(|i| (id + i as u64) % 7);
                            point!(
                                HISTOGRAM, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8],
                                b[9], b[10], b[11]
                            );
                        }
                        point!(
                            REQUEST_DONE,
                            id,
                            if r == 2 { -5i32 } else { 0 },
                            start.elapsed().as_nanos() as u64
                        );
                    }
                })
                .expect("spawn demo thread");
        }
    });
    ttrace_core::info("demo workload done");
}
