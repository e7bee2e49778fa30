//! Context switches from the kernel: when each traced thread left its CPU (preempted, or
//! blocked) and when it came back, recorded into the device as events on that thread, so
//! that readers can tell a span's time on the CPU from its time off it. Unprivileged.
//!
//! **What the kernel gives.** `perf_event_open` of a software dummy event on one of the
//! process's own threads, with `context_switch` set, makes the kernel append a record to a
//! small buffer the process maps each time that thread is switched out or in; a switch out
//! carries `PERF_RECORD_MISC_SWITCH_OUT_PREEMPT` when the thread was still runnable
//! (preempted; Linux 4.17 and later) rather than blocked. `exclude_kernel` keeps the event
//! within what `perf_event_paranoid` 2 allows any process; `use_clockid` stamps the records
//! with `CLOCK_MONOTONIC`, which the drain converts to the device's clock against a pair of
//! readings of both taken as it drains (a drain period apart at most: the conversion's error
//! is the clocks' drift over that, nanoseconds).
//!
//! **Who opens, who drains.** A thread is observed from its first event, when the writer
//! names it ([`observe_current_thread`]): it opens its own event and maps its buffer (one
//! descriptor, one page of control and [`DATA_PAGES`] of records), and a `sched_in` is
//! recorded for it at that moment, so that a reader knows the thread's switches from then
//! on, not only from its first switch. A background thread of
//! the process, the drain, wakes every [`DRAIN_PERIOD`], reads each buffer from its own
//! `data_tail` to the kernel's `data_head` (Acquire: the records below it are written), gives
//! each switch to the [`Recorder`] (the writer: an event stamped with the switch's time, in
//! the shared ring of the drain's CPU, whose readers already expect entries out of time
//! order), then stores `data_tail` past them (Release: the kernel may reuse that space only
//! once the drain is done reading it). [`flush`] drains at once: a snapshot about to be
//! copied calls it, so that it holds the switches up to its trigger.
//!
//! **Bounded.** An observed thread costs a descriptor and a mapping, so a process observes at
//! most [`limit`] threads at once (`TTRACE_SCHED_THREADS`, default [`DEFAULT_MAX_THREADS`],
//! and never more than an eighth of its soft `RLIMIT_NOFILE`): a thread-per-connection
//! server does not run out of descriptors because of ttrace. A thread beyond the bound
//! records one `sched_unobserved` event and is counted (the header's `switch_unobserved`):
//! readers say its time off the CPU is unknown, never guess it. A thread that exits hands
//! its place back: its records are drained as it exits. At the process's normal exit the
//! buffers are drained once more; a process killed loses what the kernel held for it (at
//! most a drain period of switches).
//!
//! **Refused.** Where the kernel refuses (a container's seccomp profile, `perf_event_paranoid`
//! 3), the refusal's `errno` goes to the device header once (`switch_refused`), nothing is
//! tried again in this process, and everything else works as before.
//!
//! **Lost.** When a buffer was full before the drain came, the kernel counts what it could not
//! append in a `PERF_RECORD_LOST` record: the drain records a `sched_lost` event on the thread
//! (the time off the CPU around it is unknown) and adds the count to the header's
//! `switch_lost`.
//!
//! **Fork.** A child inherits the descriptors and the mappings but not the drain, and its one
//! thread is not the parent's: it closes what it inherited without reading it (the buffers
//! still fill with the parent's threads' switches, the parent's to drain) and observes its
//! own threads as they trace.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use devttrace::clock;
use std::time::Duration;
use ttrace_layouts::device::ClockSource;

/// Environment variable: the most threads a process observes at once.
pub const ENV_SCHED_THREADS: &str = "TTRACE_SCHED_THREADS";
/// The most threads a process observes at once, unless `TTRACE_SCHED_THREADS` says otherwise
/// (and never more than an eighth of the soft `RLIMIT_NOFILE`).
pub const DEFAULT_MAX_THREADS: usize = 256;
/// How often the drain reads the buffers.
pub const DRAIN_PERIOD: Duration = Duration::from_millis(10);
/// Pages of records per observed thread (a power of two, as the kernel requires): 32 KiB,
/// about 680 switches in and out, 68,000 a second at [`DRAIN_PERIOD`].
pub const DATA_PAGES: usize = 8;

/// One switch of an observed thread, on the device's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Switch {
    /// The thread's context word (`pid << 32 | tid`).
    pub ctx: u64,
    /// When, in the device's clock.
    pub at: u64,
    /// What happened.
    pub what: What,
}

/// What happened to a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum What {
    /// It left its CPU: preempted (still runnable), or blocked.
    Out {
        /// Whether it was preempted rather than blocked.
        preempted: bool,
    },
    /// It came back on a CPU.
    In,
    /// The kernel dropped this many of its records (its buffer was full).
    Lost(u64),
}

/// What the process's observation of its threads says once, for the device's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Note {
    /// A thread is observed from now on: the recorder records a switch in for it now (it
    /// is on its CPU, calling), so that readers know its switches from this moment.
    Observed,
    /// The calling thread is not observed: its process observes as many as its bound allows.
    Unobserved,
    /// The kernel refused `perf_event_open` with this `errno`; nothing is tried again.
    Refused(i32),
}

/// Where switches go: the writer, which records them into its device.
pub trait Recorder: Sync {
    /// The device's clock and its ticks per second.
    fn clock(&self) -> (ClockSource, u64);
    /// Records a switch.
    fn record(&self, switch: &Switch);
    /// Records what the observation says once: a count in the header, and for
    /// [`Note::Unobserved`] an event on the calling thread `ctx`.
    fn note(&self, ctx: u64, note: Note);
}

/// Where the process stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Switches are not recorded (not asked for).
    Off,
    /// Switches are recorded: `threads` observed now, at most `limit`.
    On {
        /// Threads observed now.
        threads: usize,
        /// The bound.
        limit: usize,
    },
    /// The kernel refused, with this `errno`.
    Refused(i32),
}

// ---- the kernel's interface (linux/perf_event.h) ----

/// `struct perf_event_attr`, as of `PERF_ATTR_SIZE_VER8` (136 bytes); its bit fields are
/// the one word `flags`.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved2: u16,
    aux_sample_size: u32,
    reserved3: u32,
    sig_data: u64,
    config3: u64,
}
const _: () = assert!(core::mem::size_of::<PerfEventAttr>() == 136);
const _: () = assert!(core::mem::offset_of!(PerfEventAttr, flags) == 40);
const _: () = assert!(core::mem::offset_of!(PerfEventAttr, clockid) == 92);

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_DUMMY: u64 = 9;
const PERF_SAMPLE_TID: u64 = 1 << 1;
const PERF_SAMPLE_TIME: u64 = 1 << 2;
/// `flags` bits: `exclude_kernel`, `exclude_hv`, `sample_id_all`, `use_clockid`,
/// `context_switch`.
const FLAGS: u64 = 1 << 5 | 1 << 6 | 1 << 18 | 1 << 25 | 1 << 26;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
const PERF_RECORD_LOST: u32 = 2;
const PERF_RECORD_SWITCH: u32 = 14;
const PERF_RECORD_MISC_SWITCH_OUT: u16 = 1 << 13;
const PERF_RECORD_MISC_SWITCH_OUT_PREEMPT: u16 = 1 << 14;
/// Offsets in the control page (`struct perf_event_mmap_page`) of `data_head` and
/// `data_tail`.
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;

/// The attributes of the event that records the calling thread's switches.
fn attributes() -> PerfEventAttr {
    PerfEventAttr {
        kind: PERF_TYPE_SOFTWARE,
        size: core::mem::size_of::<PerfEventAttr>() as u32,
        config: PERF_COUNT_SW_DUMMY,
        sample_type: PERF_SAMPLE_TID | PERF_SAMPLE_TIME,
        flags: FLAGS,
        clockid: libc::CLOCK_MONOTONIC,
        ..PerfEventAttr::default()
    }
}

/// An observed thread: its event's descriptor and buffer.
struct Observed {
    ctx: u64,
    fd: libc::c_int,
    /// The mapping: a control page, then `DATA_PAGES` pages of records.
    base: *mut u8,
    len: usize,
    page: usize,
    /// Where the next record to read begins (the kernel's `data_tail` once stored).
    tail: u64,
    /// The thread exited: drain what is left, then close.
    exited: bool,
}

impl Observed {
    /// Opens the calling thread's event and maps its buffer; `Err(errno)` if the kernel
    /// refuses either.
    fn open(ctx: u64) -> Result<Observed, i32> {
        let attr = attributes();
        // SAFETY: `attr` is a valid `perf_event_attr` of the size it states, alive for the
        // call; pid 0 and cpu -1 name the calling thread on any CPU; no group.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                0,
                -1,
                -1,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(errno());
        }
        let fd = fd as libc::c_int;
        // SAFETY: `sysconf` has no memory effects.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let len = page * (1 + DATA_PAGES);
        // SAFETY: a new shared mapping of the event's buffer, which the kernel sizes as asked
        // (one control page and a power of two of data pages); nothing else is mapped there.
        let base = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            let e = errno();
            // SAFETY: `fd` is the descriptor just opened, not used elsewhere.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        Ok(Observed {
            ctx,
            fd,
            base: base.cast(),
            len,
            page,
            tail: 0,
            exited: false,
        })
    }

    /// The control page's word at `offset`.
    fn control(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: `offset` is `DATA_HEAD` or `DATA_TAIL`, 8-aligned within the control page,
        // which stays mapped while `self` lives; the kernel and this process access these
        // words only as whole aligned words.
        unsafe { &*self.base.add(offset).cast::<AtomicU64>() }
    }

    /// Reads the records the kernel appended since the last drain, giving each switch to
    /// `out` with its time converted by `at`, then hands their space back to the kernel.
    fn drain(&mut self, at: &impl Fn(u64) -> u64, out: &mut impl FnMut(Switch)) {
        let size = (self.len - self.page) as u64;
        // Acquire: the kernel writes a record before it publishes `data_head` past it.
        let head = self.control(DATA_HEAD).load(Acquire);
        // A head the kernel never gives (behind the tail, or more than the buffer ahead):
        // start again from it rather than read garbage.
        if head < self.tail || head - self.tail > size {
            self.tail = head;
        }
        while self.tail + 8 <= head {
            let mut record = [0u8; 64];
            let start = self.tail;
            self.copy(start, &mut record[..8], size);
            let kind = u32::from_ne_bytes(record[0..4].try_into().unwrap_or_default());
            let misc = u16::from_ne_bytes(record[4..6].try_into().unwrap_or_default());
            let len = u16::from_ne_bytes(record[6..8].try_into().unwrap_or_default()) as u64;
            if len < 8 || start + len > head {
                // Not a record the kernel writes: skip what is there.
                self.tail = head;
                break;
            }
            let body = (len as usize).min(record.len());
            self.copy(start, &mut record[..body], size);
            let word = |i: usize| {
                record
                    .get(8 + 8 * i..16 + 8 * i)
                    .and_then(|b| b.try_into().ok())
                    .map_or(0, u64::from_ne_bytes)
            };
            match kind {
                // The body: `pid`, `tid` (one word), then the time.
                PERF_RECORD_SWITCH if len >= 24 => out(Switch {
                    ctx: self.ctx,
                    at: at(word(1)),
                    what: if misc & PERF_RECORD_MISC_SWITCH_OUT != 0 {
                        What::Out {
                            preempted: misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT != 0,
                        }
                    } else {
                        What::In
                    },
                }),
                // The body: `id`, `lost`, then `pid`, `tid` and the time.
                PERF_RECORD_LOST if len >= 40 => out(Switch {
                    ctx: self.ctx,
                    at: at(word(3)),
                    what: What::Lost(word(1)),
                }),
                _ => {}
            }
            self.tail = start + len;
        }
        // Release: the reads above are done before the kernel may overwrite their space.
        self.control(DATA_TAIL).store(self.tail, Release);
    }

    /// Copies `out.len()` bytes of the records' area from position `pos`, across its end.
    fn copy(&self, pos: u64, out: &mut [u8], size: u64) {
        for (i, b) in out.iter_mut().enumerate() {
            let offset = ((pos + i as u64) % size) as usize;
            // SAFETY: `page + offset` is within the data pages of the mapping, alive while
            // `self` lives; the kernel does not write below `data_head` until `data_tail`
            // moves past, so these bytes are stable (a volatile read: shared with the kernel).
            *b = unsafe { self.base.add(self.page + offset).read_volatile() };
        }
    }

    /// Unmaps the buffer and closes the descriptor.
    fn close(self) {
        // SAFETY: the mapping and the descriptor are this entry's own, used by nothing else
        // once it is dropped from the table.
        unsafe {
            libc::munmap(self.base.cast(), self.len);
            libc::close(self.fd);
        }
    }
}

/// The last `errno`.
fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

// ---- the process's table ----

/// The process's observation.
struct Table {
    recorder: Option<&'static dyn Recorder>,
    threads: Vec<Observed>,
    limit: usize,
    refused: Option<i32>,
    /// Whether this process runs the drain thread.
    draining: bool,
}

/// The table, behind a spin lock a forked child can take back (its holder does not exist
/// there): [`LOCK`].
struct Shared(UnsafeCell<Table>);

// SAFETY: the table (with the raw pointers of its mappings) is accessed only while `LOCK`
// is held, by one thread at a time.
unsafe impl Sync for Shared {}

static TABLE: Shared = Shared(UnsafeCell::new(Table {
    recorder: None,
    threads: Vec::new(),
    limit: 0,
    refused: None,
    draining: false,
}));
/// 1 while a thread holds the table.
static LOCK: AtomicU32 = AtomicU32::new(0);
/// Whether switches are asked for: one load on a thread's first event when they are not.
static ON: AtomicBool = AtomicBool::new(false);
/// Set in a forked child: the table's threads are the parent's.
static FORKED: AtomicBool = AtomicBool::new(false);
/// Threads observed now (for [`status`] without the lock).
static OBSERVED: AtomicU64 = AtomicU64::new(0);

/// Runs `f` with the table held.
fn with_table<R>(f: impl FnOnce(&mut Table) -> R) -> R {
    // Acquire: what the last holder wrote to the table is seen.
    while LOCK.compare_exchange_weak(0, 1, Acquire, Relaxed).is_err() {
        std::thread::yield_now();
    }
    held(f)
}

/// [`with_table`] if no thread holds the table now, else `None`: for a panic's snapshot,
/// whose thread may be the one holding it.
fn try_with_table<R>(f: impl FnOnce(&mut Table) -> R) -> Option<R> {
    // Acquire: as in `with_table`.
    LOCK.compare_exchange(0, 1, Acquire, Relaxed).ok()?;
    Some(held(f))
}

/// Runs `f` on the table, which the caller has just taken (`LOCK` is 1), and lets it go.
fn held<R>(f: impl FnOnce(&mut Table) -> R) -> R {
    struct Unlock;
    impl Drop for Unlock {
        fn drop(&mut self) {
            // Release: this holder's writes to the table are seen by the next.
            LOCK.store(0, Release);
        }
    }
    let _unlock = Unlock;
    // SAFETY: `LOCK` is held: no other reference to the table exists.
    let table = unsafe { &mut *TABLE.0.get() };
    if FORKED.swap(false, Relaxed) {
        // The parent's threads: close their copies unread, and drain anew.
        for t in table.threads.drain(..) {
            t.close();
        }
        OBSERVED.store(0, Relaxed);
        table.draining = false;
    }
    f(table)
}

/// In a forked child: only atomics are touched (what `devttrace::thread::on_fork` allows).
fn after_fork() {
    FORKED.store(true, Relaxed);
    // The holder, if any, was a thread of the parent: the child's table is free.
    LOCK.store(0, Release);
}

/// The bound: `TTRACE_SCHED_THREADS` or [`DEFAULT_MAX_THREADS`], and at most an eighth of
/// the soft `RLIMIT_NOFILE`.
pub fn limit() -> usize {
    let wanted = std::env::var(ENV_SCHED_THREADS)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(DEFAULT_MAX_THREADS);
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid, writable rlimit.
    let files = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0 {
        usize::try_from(r.rlim_cur).unwrap_or(usize::MAX)
    } else {
        1024
    };
    wanted.min(files / 8)
}

/// Starts recording the switches of the process's threads into `recorder`, each from its
/// first event on ([`observe_current_thread`]). Calling it again changes nothing.
pub fn start(recorder: &'static dyn Recorder) {
    static AT_EXIT: std::sync::Once = std::sync::Once::new();
    AT_EXIT.call_once(|| {
        // SAFETY: `at_exit` is an `extern "C" fn()` that lives as long as the process.
        unsafe { libc::atexit(at_exit) };
    });
    devttrace::thread::on_fork(after_fork);
    with_table(|t| {
        if t.recorder.is_none() {
            t.recorder = Some(recorder);
            t.limit = limit();
        }
    });
    ON.store(true, Release);
}

/// Where the process stands.
pub fn status() -> Status {
    if !ON.load(Acquire) {
        return Status::Off;
    }
    with_table(|t| match t.refused {
        Some(e) => Status::Refused(e),
        None => Status::On {
            threads: t.threads.iter().filter(|o| !o.exited).count(),
            limit: t.limit,
        },
    })
}

thread_local! {
    /// Dropped when an observed thread exits: hands its place back.
    static EXIT: Exit = const { Exit(Cell::new(0)) };
}

use core::cell::Cell;

/// The calling thread's context word once it is observed.
struct Exit(Cell<u64>);

impl Drop for Exit {
    /// The thread exits: its records up to now go to the device, and its place is handed
    /// back.
    fn drop(&mut self) {
        let ctx = self.0.get();
        if ctx != 0 {
            with_table(|t| {
                for o in t.threads.iter_mut().filter(|o| o.ctx == ctx) {
                    o.exited = true;
                }
                drain_all(t);
            });
        }
    }
}

/// At the process's normal exit: what the kernel holds goes to the device.
extern "C" fn at_exit() {
    try_flush();
}

/// Observes the calling thread (context word `ctx`) if switches are recorded: the writer
/// calls it when it names a thread, before its first event. One load when they are not.
pub fn observe_current_thread(ctx: u64) {
    // Acquire: pairs with `start`'s Release, which follows the table's setup.
    if !ON.load(Acquire) {
        return;
    }
    let spawn = with_table(|t| {
        let Some(recorder) = t.recorder else {
            return false;
        };
        if t.refused.is_some() {
            return false;
        }
        if t.threads.iter().filter(|o| !o.exited).count() >= t.limit {
            recorder.note(ctx, Note::Unobserved);
            return false;
        }
        match Observed::open(ctx) {
            Ok(o) => {
                t.threads.push(o);
                OBSERVED.fetch_add(1, Relaxed);
                recorder.note(ctx, Note::Observed);
                EXIT.with(|e| e.0.set(ctx));
                !core::mem::replace(&mut t.draining, true)
            }
            Err(e) => {
                t.refused = Some(e);
                recorder.note(ctx, Note::Refused(e));
                false
            }
        }
    });
    if spawn {
        let started = std::thread::Builder::new()
            .name("ttrace-switches".into())
            .spawn(|| loop {
                std::thread::sleep(DRAIN_PERIOD);
                flush();
            });
        if started.is_err() {
            with_table(|t| t.draining = false);
        }
    }
}

/// Drains every observed thread's buffer now: the switches up to this moment go to the
/// device (a snapshot about to be copied calls it). Closes the buffers of threads that
/// exited.
pub fn flush() {
    if ON.load(Acquire) {
        with_table(drain_all);
    }
}

/// [`flush`] unless another thread is draining or observing now (then what it drains goes
/// to the device a moment later): for a panic's snapshot, taken on a thread that may hold
/// the table itself.
pub fn try_flush() {
    if ON.load(Acquire) {
        let _ = try_with_table(drain_all);
    }
}

/// Drains every buffer of `t`, and closes those of threads that exited.
fn drain_all(t: &mut Table) {
    let Some(recorder) = t.recorder else {
        return;
    };
    let at = converter(recorder.clock());
    for o in &mut t.threads {
        o.drain(&at, &mut |s| recorder.record(&s));
    }
    let mut i = 0;
    while i < t.threads.len() {
        if t.threads[i].exited {
            t.threads.swap_remove(i).close();
            OBSERVED.fetch_sub(1, Relaxed);
        } else {
            i += 1;
        }
    }
}

/// The conversion of a `CLOCK_MONOTONIC` time to the device's clock: exact for a device on
/// `CLOCK_MONOTONIC`; for one on the TSC, from a pair of readings taken now (the one most
/// tightly bracketed of a few) and the device's rate.
fn converter((source, hz): (ClockSource, u64)) -> impl Fn(u64) -> u64 {
    let (ticks, mono) = if source == ClockSource::MonotonicNs {
        (0, 0)
    } else {
        let mut best = (u64::MAX, 0, 0);
        for _ in 0..8 {
            let a = clock::now(source);
            let m = clock::monotonic_ns();
            let b = clock::now(source);
            if b >= a && b - a < best.0 {
                best = (b - a, a + (b - a) / 2, m);
            }
        }
        (best.1, best.2)
    };
    let per_ns =
        move |ns: u64| (ns as u128 * hz as u128 / 1_000_000_000).min(u64::MAX as u128) as u64;
    // Even: a committed entry's stamp has bit 0 clear (`ttrace_layouts::entry::Stamp`), so
    // that the time an event carries and its entry's stamp are the same number.
    move |t: u64| {
        let ticks = if source == ClockSource::MonotonicNs {
            t
        } else if t <= mono {
            ticks.saturating_sub(per_ns(mono - t))
        } else {
            ticks.saturating_add(per_ns(t - mono))
        };
        ticks & !1
    }
}
