//! Helpers shared by the integration tests.
//!
//! The tests are grouped by topic, a test binary each: `tests/tests/<topic>/main.rs`
//! declares one module per file of the topic (`cli`, `device`, `export`, `snapshot`,
//! `concurrency`, `shape`). Tests of one binary share a process: one process-wide writer
//! (`ttrace_core::init`, which at most one module of a binary may use), signal handlers,
//! statics. A need met here is met once: running the programs of this package ([`cli`]),
//! devices and tracepoints ([`config`], [`define`]), files ([`edit`], [`set_len`]), CPUs
//! ([`pin`], [`turn`]).

pub mod cli;
pub mod ctf;
pub mod otlp;
pub mod perfetto;
pub mod fuzz;
pub mod layers;
pub mod rseq;
pub mod typed;
pub mod uftrace;
pub mod viewer;

use std::path::Path;
use std::time::Duration;
use ttrace_core::Config;
use zerocopy::FromBytes;

/// A small device configuration for tests: short calibration, given ring size and CPUs.
pub fn config(dir: &Path, ring_slots: u64, cpus: u32) -> Config {
    Config {
        ring_slots,
        cpus: Some(cpus),
        calibration: Duration::from_millis(2),
        ..Config::at(dir)
    }
}

/// Makes at `dir` a device as a pre-release ttrace left one: written by this one, then its
/// header given the pre-release magic and layout versions (3.3, 3.3, 2.1).
pub fn make_pre_release_device(dir: &Path) {
    drop(ttrace_core::Writer::open(&config(dir, 64, 2)).expect("a device"));
    edit(&dir.join("header"), |h| {
        let magic = ttrace_layouts::device::PRE_RELEASE_MAGIC;
        h[..8].copy_from_slice(&magic.to_ne_bytes());
        for (at, version) in [(8, 0x0003_0003u32), (12, 0x0003_0003), (16, 0x0002_0001)] {
            h[at..at + 4].copy_from_slice(&version.to_ne_bytes());
        }
    });
}

/// Makes `file` a snapshot file as a pre-release ttrace saved one: a snapshot of a device
/// made at `dir`, its header page given the pre-release magic and format 4.
pub fn make_pre_release_snapshot(dir: &Path, file: &Path) {
    let w = ttrace_core::Writer::open(&config(dir, 64, 2)).expect("a device");
    devttrace::Reader::open(dir)
        .and_then(|d| d.save(file))
        .expect("a snapshot");
    drop(w);
    edit(file, |b| {
        let magic = ttrace_layouts::snapshot::SNAPSHOT_PRE_RELEASE_MAGIC;
        b[..8].copy_from_slice(&magic.to_ne_bytes());
        b[8..12].copy_from_slice(&(4u32 << 16).to_ne_bytes());
    });
}

/// Records the message `text` of writer `ctx` in `dev` as `ttrace_core::info` records one:
/// an event of the built-in tracepoint `info` (registered here), its text in the aux buffer.
/// Returns whether it was recorded whole.
pub fn message(dev: &ttrace_core::Writer, ctx: u64, text: &str) -> bool {
    use ttrace_layouts::device::{CLASS_MESSAGES, INFO_FORMAT, INFO_NAME};
    // The definition `ttrace_core::info` registers, types included (another would be
    // another tracepoint of the same name).
    let def = ttrace_core::Definition {
        types: &[ttrace_core::ArgType::Str],
        ..ttrace_core::Definition::untyped(
            INFO_NAME,
            ttrace_core::Kind::Start,
            CLASS_MESSAGES,
            INFO_FORMAT,
        )
    };
    let word = dev
        .device()
        .register_tracepoint(&def)
        .expect("the info tracepoint")
        .1;
    let text = dev.aux_write(ttrace_layouts::aux::AuxTag::String, ctx, text.as_bytes());
    dev.emit(word, ctx, &[text.unwrap_or(ttrace_layouts::aux::AUX_NONE)]) && text.is_some()
}

/// Registers a `Start` tracepoint of class 1 with `dev` and returns its type word.
pub fn define(dev: &ttrace_core::Writer, name: &'static str, format: &'static str) -> u64 {
    define_kind(dev, name, ttrace_core::Kind::Start, format)
}

/// Registers a tracepoint of `kind`, class 1, with `dev` and returns its type word.
pub fn define_kind(
    dev: &ttrace_core::Writer,
    name: &'static str,
    kind: ttrace_core::Kind,
    format: &'static str,
) -> u64 {
    dev.device()
        .register_tracepoint(&ttrace_core::Definition::untyped(name, kind, 1, format))
        .expect("tracepoint")
        .1
}

/// Where a snapshot file of the device `dev` reads puts each part
/// (`ttrace_layouts::snapshot::Layout`), from the sizes the reader read at open: a reader
/// hands out no reference into its (read-only) header.
pub fn snapshot_layout(dev: &devttrace::Reader) -> ttrace_layouts::snapshot::Layout {
    use zerocopy::FromZeros;
    let v = dev.version();
    let mut h = ttrace_layouts::device::DeviceHeader::new_zeroed();
    (h.num_cpus, h.ring_slots, h.aux_size, h.meta_size) =
        (v.num_cpus, v.ring_slots, v.aux_size, v.meta_size);
    ttrace_layouts::snapshot::Layout::of(&h).expect("the sizes of a device opened")
}

/// Rewrites the file at `path` with what `f` makes of its bytes.
pub fn edit(path: &Path, f: impl FnOnce(&mut Vec<u8>)) {
    let mut bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    f(&mut bytes);
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// The CPUs this process may run on, in increasing order: the affinity mask of its main
/// thread (which no test pins) when first asked, kept, so that a thread pinned since gets
/// them all too (where [`rseq::allowed_cpus`] reads the calling thread's). Not `0..n`: a
/// cpuset or `taskset` may leave out any CPU, CPU 0 included.
pub fn allowed_cpus() -> &'static [usize] {
    static CPUS: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();
    CPUS.get_or_init(|| {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity fills it; the
        // process id names its main thread.
        let cpus: Vec<usize> = unsafe {
            let mut set: libc::cpu_set_t = core::mem::zeroed();
            let rc = libc::sched_getaffinity(
                libc::getpid(),
                core::mem::size_of::<libc::cpu_set_t>(),
                &mut set,
            );
            assert_eq!(
                rc,
                0,
                "sched_getaffinity: {}",
                std::io::Error::last_os_error()
            );
            (0..libc::CPU_SETSIZE as usize)
                .filter(|&c| libc::CPU_ISSET(c, &set))
                .collect()
        };
        assert!(!cpus.is_empty(), "no CPU to run on");
        cpus
    })
}

/// The `k`-th CPU this process may run on ([`allowed_cpus`]), counting round: `cpu(0)` is
/// the first, and `cpu(k)` differs from `cpu(0)` for `0 < k < ` the number of them.
pub fn cpu(k: usize) -> usize {
    let cpus = allowed_cpus();
    cpus[k % cpus.len()]
}

/// Lets the calling thread run only on [`cpu(k)`](cpu), the `k`-th CPU this process may run
/// on, and returns that CPU's id: a device whose events must go to that CPU's own ring
/// needs more than that many CPUs.
pub fn pin(k: usize) -> usize {
    let cpu = cpu(k);
    pin_to(cpu);
    cpu
}

/// Lets the calling thread run only on CPU `cpu`, one this process may run on.
pub fn pin_to(cpu: usize) {
    rseq::set_affinity(0, &[cpu]).unwrap_or_else(|e| panic!("pinning to CPU {cpu}: {e}"));
}

/// A CPU this process may run on whose events a device of `num_cpus` CPUs keeps in the rings
/// of CPU `ring` (`cpu<ring>`, or `cpu<ring>.shared`: those of CPU `c` are CPU `c %
/// num_cpus`'s): `ring` itself where this process may run there, else the first such
/// other; where there is none (it may run on none of them), [`cpu(ring)`](cpu).
pub fn cpu_for(ring: usize, num_cpus: usize) -> usize {
    let cpus = allowed_cpus();
    match cpus.iter().find(|&&c| c % num_cpus == ring % num_cpus) {
        Some(_) if cpus.contains(&ring) => ring,
        Some(&c) => c,
        None => cpu(ring),
    }
}

/// Two CPUs this process may run on, for two threads whose events a device of two CPUs is
/// to keep apart: on such a device the events of CPU `c` go to the rings of CPU `c % 2`
/// (`cpu0` or `cpu0.shared`, `cpu1` or `cpu1.shared`: what `--cpu 0` and `--cpu 1` name).
/// So an even CPU and an odd one where this process may run on both; else (a single CPU, or
/// all of one parity) the first twice, and both threads' events go to the same ring.
pub fn cpu_pair() -> [usize; 2] {
    let cpus = allowed_cpus();
    let even = cpus.iter().find(|&&c| c % 2 == 0);
    let odd = cpus.iter().find(|&&c| c % 2 == 1);
    match (even, odd) {
        (Some(&e), Some(&o)) => [e, o],
        _ => [cpus[0], cpus[0]],
    }
}

/// Sets the length of the file at `path` (cutting or growing it), as another process might.
pub fn set_len(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|f| f.set_len(len))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// A well-mixed 64-bit value of three inputs, so that every argument word names exactly one
/// (writer, sequence, index) and any mix of two writes is visible.
pub fn mix(writer: u64, seq: u64, index: u64) -> u64 {
    let mut x = writer.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ seq.rotate_left(17)
        ^ index.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 31;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 29)
}

/// The text of the aux string the crash writer records with event `seq` of incarnation `inc`.
pub fn crash_string(inc: u64, seq: u64) -> String {
    format!("incarnation {inc} event {seq} {:x}", mix(inc, seq, 7))
}

/// A crash writer's progress, in a small file shared with the test that kills it.
pub struct Progress {
    /// Events recorded.
    pub done: &'static std::sync::atomic::AtomicU64,
    /// [`Progress::RUNNING`], [`Progress::IN_AUX`], [`Progress::IN_POINT`] or
    /// [`Progress::FINISHED`].
    pub state: &'static std::sync::atomic::AtomicU64,
    /// The slowest trace point, in ns (set when finished).
    pub slowest_ns: &'static std::sync::atomic::AtomicU64,
    /// The path the writer's trace points take, set once its device is open:
    /// [`Progress::RESTARTABLE`] or [`Progress::SHARED`] (0 before).
    pub path: &'static std::sync::atomic::AtomicU64,
    /// 1 if the signal that killed the writer interrupted one of its restartable critical
    /// sections (the kernel had moved it to the section's abort handler): it died with that
    /// section's stores made and its commit not.
    pub killed_in_section: &'static std::sync::atomic::AtomicU64,
}

impl Progress {
    /// Recording events, between two trace points.
    pub const RUNNING: u64 = 0;
    /// About to record an event with an aux string (the aux lock comes next).
    pub const IN_AUX: u64 = 1;
    /// All events recorded.
    pub const FINISHED: u64 = 2;
    /// Recording an event without a string.
    pub const IN_POINT: u64 = 3;

    /// [`Progress::path`]: `Device::restartable()` was true, the writer uses restartable
    /// sequences.
    pub const RESTARTABLE: u64 = 1;
    /// [`Progress::path`]: it uses the shared rings (the atomic protocol).
    pub const SHARED: u64 = 2;

    /// Maps the progress file at `path` (created, zeroed, if missing).
    pub fn open(path: &Path) -> std::io::Result<Progress> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        file.set_len(64)?;
        // SAFETY: the file is only ever accessed through these atomics, by this test's
        // processes; the mapping is leaked, so the references live as long as the process.
        let map: &'static mut memmap2::MmapMut =
            Box::leak(Box::new(unsafe { memmap2::MmapMut::map_mut(&file)? }));
        let words = <[std::sync::atomic::AtomicU64]>::mut_from_bytes(&mut map[..40])
            .map_err(|_| std::io::Error::other("misaligned progress map"))?;
        let [done, state, slowest_ns, path, killed_in_section] = words else {
            unreachable!("40 bytes are five words")
        };
        Ok(Progress {
            done,
            state,
            slowest_ns,
            path,
            killed_in_section,
        })
    }
}

/// Writes, from a thread pinned to [`cpu_for(cpu, ..)`](cpu_for) (CPU `cpu` where this
/// process may run there; else one whose events `dev` keeps in the rings of CPU `cpu`
/// where there is one) and named `writer-<cpu>` in `dev`, for each `i` of `range`: `one(i)`,
/// `five(i, 255, 3, 4, "s<cpu>-<i>")` and, if `twelve`, `twelve(i; 12)`. Returns nothing
/// until it is done.
pub fn write_pinned(
    dev: &ttrace_core::Writer,
    cpu: usize,
    range: std::ops::Range<u64>,
    twelve: bool,
) {
    let one = define(dev, "one", "i={i}");
    let five = define(dev, "five", "a={a} b={b:x} c={c} d={d} s={s:s}");
    let twelve_word = define(
        dev,
        "twelve",
        "{a} {b} {c} {d} {e} {f} {g} {h} {i} {j} {k} {l:x}",
    );
    std::thread::scope(|s| {
        s.spawn(|| {
            pin_to(cpu_for(cpu, dev.device().mapping().num_cpus() as usize));
            let ctx = devttrace::thread::context();
            dev.device()
                .note_thread((ctx >> 32) as u32, ctx as u32, &format!("writer-{cpu}"))
                .expect("thread name");
            for i in range {
                dev.emit(one, ctx, &[i]);
                let s = dev
                    .aux_write(
                        ttrace_layouts::aux::AuxTag::String,
                        ctx,
                        format!("s{cpu}-{i}").as_bytes(),
                    )
                    .expect("string");
                dev.emit(five, ctx, &[i, 255, 3, 4, s]);
                if twelve {
                    dev.emit(twelve_word, ctx, &[i; 12]);
                }
            }
        });
    });
}

/// A test's turn with the machine, taken by [`turn`]: held until dropped.
pub struct Turn {
    _private: (),
}

/// Which group has the machine, and how many of its tests run.
static TURNS: std::sync::Mutex<(Option<&'static str>, usize)> = std::sync::Mutex::new((None, 0));
static TURN_ENDED: std::sync::Condvar = std::sync::Condvar::new();

/// Waits until no test of another `group` runs in this process, then lets this one run
/// (with the others of its group) until the returned [`Turn`] is dropped. For tests that load
/// every CPU or time what they do: put in one test binary, groups of them take turns, each
/// group running as it did in a binary of its own.
pub fn turn(group: &'static str) -> Turn {
    let mut t = TURNS.lock().unwrap_or_else(|e| e.into_inner());
    while t.0.is_some_and(|g| g != group) {
        t = TURN_ENDED.wait(t).unwrap_or_else(|e| e.into_inner());
    }
    *t = (Some(group), t.1 + 1);
    Turn { _private: () }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut t = TURNS.lock().unwrap_or_else(|e| e.into_inner());
        t.1 -= 1;
        if t.1 == 0 {
            t.0 = None;
            TURN_ENDED.notify_all();
        }
    }
}

/// The event lines `dump` (run by `reader`, [`reader!`]) prints of the device `dir` (of
/// `--cpu N` if given), messages left out.
pub fn dumped_lines(reader: cli::Cli, dir: &Path, cpu: Option<usize>) -> Vec<String> {
    let mut reader = reader.arg("dump").arg(dir);
    if let Some(c) = cpu {
        reader = reader.args(["--cpu", &c.to_string()]);
    }
    reader
        .ok()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.contains(" info("))
        .map(str::to_string)
        .collect()
}

/// The type words of the built-in `sched_out` and `sched_in` tracepoints, registered in `dev`
/// as the writer's drain registers them (class messages), for tests that write switches
/// directly.
pub fn switch_words(dev: &ttrace_core::Writer) -> (u64, u64) {
    use ttrace_layouts::device::*;
    let builtin = |name: &'static str, kind, format: &'static str| {
        let d = ttrace_core::Definition::untyped(name, kind, CLASS_MESSAGES, format);
        dev.device().register_tracepoint(&d).expect("tracepoint").1
    };
    (
        builtin(SWITCH_OUT_NAME, ttrace_core::Kind::Stop, SWITCH_OUT_FORMAT),
        builtin(SWITCH_IN_NAME, ttrace_core::Kind::Start, SWITCH_IN_FORMAT),
    )
}

/// Writes one event of `word` for the writer `ctx` with `args` (at most 5) into ring 0 of
/// `dev` at `t`.
pub fn put_event(dev: &ttrace_core::Writer, t: u64, word: u64, ctx: u64, args: &[u64]) {
    let mut slot = [word, ctx, 0, 0, 0, 0, 0];
    slot[2..2 + args.len()].copy_from_slice(args);
    dev.device()
        .mapping()
        .ring(0)
        .write(t, 1, &slot)
        .expect("a slot");
}
