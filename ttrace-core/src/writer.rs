//! The writer: this process's handle on a device, and the hot path of recording an event,
//! from [`point!`](crate::point!) to the commit, all in this file.
//!
//! Once a tracepoint is registered and its thread named, recording an event is:
//!
//! 1. `point!` loads the tracepoint's word ([`Tracepoint::word`]: two dependent loads) and
//!    returns at once if it is 0 (disabled); the arguments are not evaluated;
//! 2. [`Tracepoint::record`] loads the process's writer ([`device`]: one Acquire load) and
//!    the thread's context word ([`Writer::context`]: two thread-local loads);
//! 3. [`Writer::emit`] runs the restartable section of [`crate::rseq`] for the thread's
//!    CPU: the CPU id from the rseq area, the ring's head, a claim, the payload, `rdtsc`,
//!    the stamp, and the commit, one store of `head`; no locked instruction;
//! 4. where that cannot be used, [`Writer::emit_shared`] writes the CPU's shared ring with
//!    the atomic protocol: `rdtsc`, the CPU id, one `fetch_add`, one compare-and-exchange,
//!    eight stores.
//!
//! Everything else (registering a tracepoint, naming a thread, opening the device) is a
//! cold path taken once.

use crate::args::Strings;
use crate::cpu;
use crate::rseq::{AuxArgs, EventArgs, Restartable};
use crate::switches::{self, Note, Switch, What};
use crate::tracepoint::{Tracepoint, DISABLED_WORD, UNREGISTERED};
use core::cell::Cell;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering::*};
use devttrace::{Config, Device, Error, Result};
use std::path::Path;
use std::sync::Mutex;
use ttrace_layouts::aux::{aux_ref, AuxPath, AuxTag, AUX_MAX_PAYLOAD, AUX_NONE};
use ttrace_layouts::entry::{Stamp, TypeWord, ENTRY_ARGS, MAX_ARGS, SLOT_WORDS};
use ttrace_layouts::meta::ArgType;

/// A device opened to record into, with this process's way of writing it: the restartable
/// path (its rseq table) when the process has one, and where CPU ids come from.
///
/// A writer records; what its [`Device`] offers besides (registration, thread names,
/// control, clearing) is reached by name, through [`Writer::device`], and reading through
/// the device's [`Device::reader`]: a `Writer` is not a `Device`, nor a `Reader`.
///
/// ```
/// # let tmp = tempfile::tempdir().unwrap();
/// use ttrace_core::{Config, Kind, Writer};
/// let w = Writer::open(&Config { ring_slots: 64, cpus: Some(2), ..Config::at(tmp.path().join("dev")) })?;
/// let (_, word) = w
///     .device()
///     .register_tracepoint(&ttrace_core::Definition::untyped("tick", Kind::Start, 1, "n={n}"))?;
/// assert!(w.emit(word, w.context(), &[7]));
/// assert_eq!(w.device().reader().snapshot()?.events(), 1);
/// # Ok::<(), ttrace_core::Error>(())
/// ```
///
/// What only a reader does, a writer does not: there is no way from a `&Writer` to a
/// reader's method but the named one. These tests are a pair of doctests rather than a
/// `trybuild` test that compares the compiler's message (which changes between
/// toolchains): the two differ in the one call under test, so the second fails to compile
/// for no other reason. This compiles:
///
/// ```no_run
/// # fn f(w: &ttrace_core::Writer) -> ttrace_core::Result<()> {
/// let reader = w.device().reader();
/// let _ = (reader.version(), reader.snapshot()?);
/// # Ok(()) }
/// ```
///
/// and this, the same call on the writer itself, does not:
///
/// ```compile_fail
/// # fn f(w: &ttrace_core::Writer) -> ttrace_core::Result<()> {
/// let reader = w.device().reader();
/// let _ = (reader.version(), w.snapshot()?);
/// # Ok(()) }
/// ```
pub struct Writer {
    device: Device,
    /// The restartable path into `device`, if this process can take it.
    rseq: Option<Restartable>,
    /// Where CPU ids come from ([`cpu::mode`]).
    cpu: i64,
}

impl Writer {
    /// Opens (creating if needed) the device `config` describes, to record into it.
    pub fn open(config: &Config) -> Result<Writer> {
        Ok(Writer::of(Device::open(config)?))
    }

    /// Attaches to the existing device at `dir`, to record into it.
    pub fn attach(dir: &Path) -> Result<Writer> {
        Ok(Writer::of(Device::attach(dir)?))
    }

    fn of(device: Device) -> Writer {
        Writer {
            rseq: Restartable::of(device.mapping()),
            cpu: cpu::mode(),
            device,
        }
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Whether this process records with restartable sequences (else into the shared rings).
    pub fn restartable(&self) -> bool {
        self.rseq.is_some()
    }

    /// The CPU the calling thread runs on (possibly stale by the time it is used).
    #[inline(always)]
    pub fn cpu(&self) -> u32 {
        cpu::current_with(self.cpu)
    }

    /// The current time in the device's clock.
    #[inline(always)]
    pub fn now(&self) -> u64 {
        self.device.mapping().now()
    }

    /// Records one event with type word `word` (from a tracepoint: no CPU in it) for the
    /// writer `ctx` (`pid << 32 | tid`). Up to 5 arguments fill one slot; 6 to 12 add a
    /// continuation in the next slot. The event goes to the restartable ring of the CPU the
    /// thread runs on, or, where that cannot be used, to its shared ring. Returns false if
    /// the event was dropped (and counted).
    #[inline(always)]
    pub fn emit<const N: usize>(&self, word: u64, ctx: u64, args: &[u64; N]) -> bool {
        const { assert!(N <= MAX_ARGS) };
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        if let Some(rseq) = &self.rseq {
            let stamp = if N <= ENTRY_ARGS {
                let mut w = [0u64; SLOT_WORDS - 1];
                (w[0], w[1]) = (word, ctx);
                w[2..2 + N].copy_from_slice(args);
                rseq.write(&w)
            } else {
                let mut w = [0u64; 2 * (SLOT_WORDS - 1)];
                (w[0], w[1]) = (word, ctx);
                w[2..SLOT_WORDS - 1].copy_from_slice(&args[..ENTRY_ARGS]);
                w[SLOT_WORDS - 1..SLOT_WORDS - 1 + N - ENTRY_ARGS]
                    .copy_from_slice(&args[ENTRY_ARGS..]);
                rseq.write_pair(&w)
            };
            if stamp != 0 {
                return true;
            }
        }
        self.emit_shared(word, ctx, args)
    }

    /// [`Writer::emit`] for an event with strings (`strings`: each argument's index and
    /// bytes; their words in `args` are set here): the records and the entry in one
    /// restartable section ([`Restartable::write_event`]), or, where that cannot be used,
    /// each string with [`Writer::aux_write`] and the entry into the shared ring. A string
    /// longer than 4072 bytes is truncated and flagged. Returns false if the event was
    /// dropped (and counted); a string the buffer could not take shows as lost.
    #[inline(always)]
    pub fn emit_strings<const N: usize>(
        &self,
        word: u64,
        ctx: u64,
        args: &[u64; N],
        strings: &Strings<'_>,
    ) -> bool {
        const { assert!(N <= MAX_ARGS) };
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        if let Some(rseq) = &self.rseq {
            let mut e = EventArgs::new(rseq, word, ctx, args);
            for (index, bytes) in strings.iter() {
                let (path, bytes) = string_path(AuxTag::String, bytes);
                e.push(index, AuxArgs::new(path.0, 0, ctx, bytes));
            }
            // SAFETY: `push` keeps at most MAX_ARGS strings, each record's `src` is its
            // bytes (`full_words` words of them) and at most 4 KiB, less than a buffer (at
            // least 16 KiB); `word_at` is the word of an argument (index < N <= MAX_ARGS);
            // `new` set `slots` to 1 or 2.
            if unsafe { rseq.write_event(&mut e) } != 0 {
                return true;
            }
        }
        self.emit_strings_shared(word, ctx, args, strings)
    }

    /// [`Writer::emit_strings`] where the combined section cannot be used.
    #[inline(never)]
    fn emit_strings_shared<const N: usize>(
        &self,
        word: u64,
        ctx: u64,
        args: &[u64; N],
        strings: &Strings<'_>,
    ) -> bool {
        let mut args = *args;
        for (index, bytes) in strings.iter() {
            if let Some(w) = args.get_mut(index) {
                *w = self
                    .aux_write(AuxTag::String, ctx, bytes)
                    .unwrap_or(AUX_NONE);
            }
        }
        self.emit_shared(word, ctx, &args)
    }

    /// [`Writer::emit`] into the shared ring of the calling thread's CPU, with the atomic
    /// protocol ([`RingWriter::write`](devttrace::ring::RingWriter::write)).
    #[inline(never)]
    pub fn emit_shared<const N: usize>(&self, word: u64, ctx: u64, args: &[u64; N]) -> bool {
        self.emit_shared_at(self.now(), word, ctx, args)
    }

    /// [`Writer::emit_shared`] for an event that happened at `timestamp` (the device's
    /// clock), before now: a thread's context switch, read from the kernel a little later
    /// ([`crate::switches`]). The shared ring's readers expect entries out of time order;
    /// the stamp is `timestamp` unless the slot's previous entry was stamped later (the
    /// protocol then stamps just after it: [`RingWriter::write`](devttrace::ring::RingWriter::write)).
    pub fn emit_shared_at<const N: usize>(
        &self,
        timestamp: u64,
        word: u64,
        ctx: u64,
        args: &[u64; N],
    ) -> bool {
        let map = self.device.mapping();
        let cpu = self.cpu();
        let ring = map.shared_ring(cpu);
        let mut parent = [0u64; SLOT_WORDS - 1];
        parent[0] = TypeWord(word).with_cpu(cpu).0;
        parent[1] = ctx;
        let pid = (ctx >> 32) as u32;
        if N <= ENTRY_ARGS {
            parent[2..2 + N].copy_from_slice(args);
            ring.write(timestamp, pid, &parent).is_some()
        } else {
            let split = N.min(ENTRY_ARGS);
            parent[2..].copy_from_slice(&args[..split]);
            let mut cont = [0u64; SLOT_WORDS - 1];
            cont[..N - split].copy_from_slice(&args[split..]);
            ring.write_pair(timestamp, pid, &parent, &cont).is_some()
        }
    }

    /// Appends an aux record holding `bytes` (truncated to 4072 bytes and flagged if longer)
    /// for the writer `ctx` (`pid << 32 | tid`), to the aux buffer of the ring this thread
    /// writes to. Returns the argument word that refers to it ([`aux_ref`]), or `None` if the
    /// write was dropped (and counted in the shared ring's `aux_dropped`).
    pub fn aux_write(&self, tag: AuxTag, ctx: u64, bytes: &[u8]) -> Option<u64> {
        let (path, bytes) = string_path(tag, bytes);
        // A message carries its own time; a string is timed by the entry that refers to it,
        // which spares a second clock read on the hot path.
        let timestamp = if tag == AuxTag::String { 0 } else { self.now() };
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        if let Some(rseq) = &self.rseq {
            let args = AuxArgs::new(path.0, timestamp, ctx, bytes);
            // SAFETY: `src` holds `full_words` words; a record (at most 4 KiB) fits in a
            // buffer (at least 16 KiB).
            let (found, start) = unsafe { rseq.aux_write(&args) };
            if found != 0 {
                return Some(aux_ref(found as usize - 1, start));
            }
        }
        let map = self.device.mapping();
        let cpu = self.cpu();
        let index = map.shared_ring_index(cpu);
        let path = AuxPath::new(tag, cpu, bytes.len() as u64, path.is_truncated());
        let lock = &map.ring_header(index).aux_lock;
        let start = map.aux(index).write(lock, path, ctx, timestamp, bytes)?;
        Some(aux_ref(index, start))
    }

    /// The calling thread's context word for events written into this device (`pid << 32
    /// | tid`), naming the thread (and after a fork, the process) in the device the first
    /// time: what a trace point of another front end (the `tracing` layer) passes to
    /// [`Writer::emit`].
    #[inline(always)]
    pub fn context(&self) -> u64 {
        let ctx = NAMED.with(Cell::get);
        if ctx != 0 {
            return ctx;
        }
        self.name_thread()
    }

    /// Names the calling thread (and its process, if this process has not named it since it
    /// started or forked) before its first event; returns its context.
    #[cold]
    #[inline(never)]
    fn name_thread(&self) -> u64 {
        static FORGET_AFTER_FORK: std::sync::Once = std::sync::Once::new();
        FORGET_AFTER_FORK.call_once(|| {
            devttrace::thread::on_fork(|| NAMED.with(|n| n.set(0)));
        });
        let ctx = devttrace::thread::context();
        let (pid, tid) = ((ctx >> 32) as u32, ctx as u32);
        // Relaxed: a lost race only records the process name twice.
        if NOTED_PID.swap(pid, Relaxed) != pid {
            let _ = self
                .device
                .note_process(pid, &devttrace::thread::process_name());
        }
        // A full metadata area only loses the name; the thread still traces.
        let _ = self
            .device
            .note_thread(pid, tid, &devttrace::thread::name());
        NAMED.with(|n| n.set(ctx));
        crate::switches::observe_current_thread(ctx);
        ctx
    }

    /// Records a new name for the calling thread (after it renamed itself, say).
    pub fn rename_thread(&self, name: &str) -> Result<()> {
        let ctx = self.context();
        self.device
            .note_rename((ctx >> 32) as u32, ctx as u32, name)
    }
}

/// The path (no CPU) of a record of `tag` holding `bytes`, and the bytes it holds: at most
/// [`AUX_MAX_PAYLOAD`], the path flagged truncated when they were more.
#[inline(always)]
fn string_path(tag: AuxTag, bytes: &[u8]) -> (AuxPath, &[u8]) {
    let truncated = bytes.len() as u64 > AUX_MAX_PAYLOAD;
    let bytes = &bytes[..bytes.len().min(AUX_MAX_PAYLOAD as usize)];
    (AuxPath::new(tag, 0, bytes.len() as u64, truncated), bytes)
}

thread_local! {
    /// The calling thread's context word once it has been named in a device, else 0 (also
    /// in a forked child, whose thread devttrace's fork rule makes forget it: see
    /// `devttrace::thread::on_fork`).
    static NAMED: Cell<u64> = const { Cell::new(0) };
}

/// The calling thread's context word if it has been named in the process's device, else 0:
/// one thread-local load (a `const`-initialised `Cell` with no destructor: no lazy
/// initialisation, no allocation), so async-signal-safe, unlike [`Writer::context`], whose
/// first use names the thread.
pub(crate) fn named_context() -> u64 {
    NAMED.with(Cell::get)
}

/// The pid whose process record this process wrote (0: none yet).
static NOTED_PID: AtomicU32 = AtomicU32::new(0);

/// The process's writer: null until one is installed, then never changed or freed.
static GLOBAL: AtomicPtr<Writer> = AtomicPtr::new(core::ptr::null_mut());
static INIT: Mutex<()> = Mutex::new(());

/// Opens (creating if needed) the device of `config` and makes it the process's device.
/// Trace points that fire before any call to `init` open the default device themselves
/// ([`Config::from_env`]: `TTRACE_DIR`, `TTRACE_RING_SLOTS`, `TTRACE_AUX_SIZE`,
/// `TTRACE_MASK`, `TTRACE_DISABLED`).
///
/// Calling it again with the same directory returns the installed device; with another
/// directory it fails.
pub fn init(config: &Config) -> Result<&'static Writer> {
    let _serial = INIT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(w) = device() {
        let wanted = config.resolved_dir();
        return if wanted == w.device().reader().dir() {
            Ok(w)
        } else {
            Err(Error::AlreadyInstalled(
                w.device().reader().dir().to_path_buf(),
            ))
        };
    }
    cpu::detect();
    let w: &'static Writer = Box::leak(Box::new(Writer::open(config)?));
    say_other_sizes(config, w);
    // Release: a thread that loads the pointer sees the initialized Writer.
    GLOBAL.store(w as *const Writer as *mut Writer, Release);
    if config.switches {
        switches::start(w);
    }
    Ok(w)
}

/// Says once, on standard error, that the device `w` attached to keeps sizes other than
/// the defaults, where `config` asked for none (a device an older version made, kept by
/// every program that does not ask: its rings may keep far less than the user expects).
/// `TTRACE_QUIET=1` says nothing.
fn say_other_sizes(config: &Config, w: &Writer) {
    let asked_none = config.ring_slots == 0 && config.aux_bytes == 0;
    let quiet = std::env::var_os(ENV_QUIET).is_some_and(|v| !v.is_empty() && v != "0");
    if !asked_none || quiet {
        return;
    }
    let v = w.device().reader().version();
    if let Some(note) = devttrace::config::other_sizes(v.num_cpus, v.ring_slots) {
        eprintln!(
            "ttrace: {} {note} ({ENV_QUIET}=1 says nothing)",
            w.device().reader().dir().display()
        );
    }
}

/// The variable that, set, keeps [`init`] from saying anything on standard error.
pub const ENV_QUIET: &str = "TTRACE_QUIET";

/// The process's writer, if one is installed.
#[inline(always)]
pub fn device() -> Option<&'static Writer> {
    // Acquire: pairs with the Release store in `init`.
    let p = GLOBAL.load(Acquire);
    // SAFETY: a non-null pointer was leaked from a Box in `init` and is never freed.
    unsafe { p.as_ref() }
}

/// The process's writer, opening the device the environment names ([`Config::from_env`])
/// if none is installed yet.
pub fn device_or_init() -> Result<&'static Writer> {
    match device() {
        Some(w) => Ok(w),
        None => init(&Config::from_env()?),
    }
}

/// The calling thread's context word for events written into `w` ([`Writer::context`]).
#[inline(always)]
pub fn thread_context(w: &Writer) -> u64 {
    w.context()
}

/// Records a new name for the calling thread in `w` ([`Writer::rename_thread`]).
pub fn rename_thread(w: &Writer, name: &str) -> Result<()> {
    w.rename_thread(name)
}

crate::tracepoint!(
    /// The tracepoint of [`info`]: readers show its events as messages.
    static INFO: Start[ttrace_layouts::device::CLASS_MESSAGES] =
        ttrace_layouts::device::INFO_NAME, ttrace_layouts::device::INFO_FORMAT
);

crate::tracepoint!(
    /// A thread left its CPU ([`crate::switches`]).
    static SWITCH_OUT: Stop[ttrace_layouts::device::CLASS_MESSAGES] =
        ttrace_layouts::device::SWITCH_OUT_NAME, ttrace_layouts::device::SWITCH_OUT_FORMAT
);
crate::tracepoint!(
    /// A thread came back on a CPU.
    static SWITCH_IN: Start[ttrace_layouts::device::CLASS_MESSAGES] =
        ttrace_layouts::device::SWITCH_IN_NAME, ttrace_layouts::device::SWITCH_IN_FORMAT
);
crate::tracepoint!(
    /// The kernel dropped a thread's switch records.
    static SWITCH_LOST: Start[ttrace_layouts::device::CLASS_MESSAGES] =
        ttrace_layouts::device::SWITCH_LOST_NAME, ttrace_layouts::device::SWITCH_LOST_FORMAT
);
crate::tracepoint!(
    /// A thread whose switches are not recorded.
    static SWITCH_UNOBSERVED: Start[ttrace_layouts::device::CLASS_MESSAGES] =
        ttrace_layouts::device::SWITCH_UNOBSERVED_NAME,
        ttrace_layouts::device::SWITCH_UNOBSERVED_FORMAT
);

/// The word of a built-in tracepoint with unsigned arguments, registering it on first use;
/// 0 while it is disabled.
fn builtin_word<const N: usize>(tp: &'static Tracepoint<N>) -> u64 {
    const TYPES: [ArgType; 2] = [ArgType::Unsigned; 2];
    match tp.word() {
        0 => 0,
        word => tp.enabled_word(word, &TYPES[..N]),
    }
}

/// The process's writer records the switches of its threads ([`crate::switches`]).
impl switches::Recorder for Writer {
    fn clock(&self) -> (ttrace_layouts::device::ClockSource, u64) {
        (
            self.device.mapping().clock(),
            self.device.mapping().header().tsc_hz,
        )
    }

    fn record(&self, s: &Switch) {
        let _ = match s.what {
            What::Out { preempted } => match builtin_word(&SWITCH_OUT) {
                0 => false,
                word => self.emit_shared_at(s.at, word, s.ctx, &[preempted as u64, s.at]),
            },
            What::In => match builtin_word(&SWITCH_IN) {
                0 => false,
                word => self.emit_shared_at(s.at, word, s.ctx, &[s.at]),
            },
            What::Lost(n) => {
                let header = self.device.mapping().header();
                // Relaxed: a counter, read on its own.
                header.switch_lost.fetch_add(n, Relaxed);
                match builtin_word(&SWITCH_LOST) {
                    0 => false,
                    word => self.emit_shared_at(s.at, word, s.ctx, &[n]),
                }
            }
        };
    }

    fn note(&self, ctx: u64, note: Note) {
        let header = self.device.mapping().header();
        // Relaxed: counters and a word read on their own.
        match note {
            Note::Observed => {
                header.switch_threads.fetch_add(1, Relaxed);
                // The thread (the caller) is on its CPU now, and every switch of it from
                // here on is recorded: a `sched_in` says so, so that readers know its
                // switches from this moment rather than from its first switch.
                if let word @ 1.. = builtin_word(&SWITCH_IN) {
                    // Even, as the drain's times are: the entry's stamp and the time
                    // the event carries are then the same number.
                    let now = self.now() & !Stamp::CONTINUATION;
                    self.emit_shared_at(now, word, ctx, &[now]);
                }
            }
            Note::Unobserved => {
                header.switch_unobserved.fetch_add(1, Relaxed);
                let word = builtin_word(&SWITCH_UNOBSERVED);
                if word != 0 {
                    self.emit(word, ctx, &[0]);
                }
            }
            Note::Refused(errno) => header.switch_refused.store(errno as u64, Relaxed),
        }
    }
}

/// Records a free-form message in the process's device: an event of the built-in tracepoint
/// `info` (class [`CLASS_MESSAGES`](ttrace_layouts::device::CLASS_MESSAGES)), its text in the aux buffer.
/// Readers show it as a message, `info("text")`, in time order with the events, on the
/// ring it was written to (a lost message is counted as any lost entry; a text overwritten
/// in the aux buffer before it was read shows as `<lost>`, and is counted). It is controlled
/// as that tracepoint is (`ttrace-reader ctl disable info`, `ctl clrbits
/// 0x8000000000000000`): while off, this records nothing and counts nothing, at the cost of
/// one load. Returns false if nothing was recorded (messages off, no device, or no room for
/// the text, whose loss the event then shows).
pub fn info(message: &str) -> bool {
    let word = INFO.word();
    if word == 0 {
        return false;
    }
    let word = INFO.enabled_word(word, &[ArgType::Str]);
    if word == 0 {
        return false;
    }
    let Some(w) = device() else {
        return false;
    };
    let text = w.aux_write(AuxTag::String, w.context(), message.as_bytes());
    w.emit(word, w.context(), &[text.unwrap_or(AUX_NONE)]) && text.is_some()
}

/// The argument word of a string: its bytes copied to the aux buffer of the process's
/// device (or [`AUX_NONE`] where there is none, or the buffer could not take it).
pub(crate) fn string_word(bytes: &[u8]) -> u64 {
    let Some(w) = device() else {
        return AUX_NONE;
    };
    w.aux_write(AuxTag::String, w.context(), bytes)
        .unwrap_or(AUX_NONE)
}

// Strings as arguments: their bytes go to the aux buffer of the process's device, so they
// are the writer's to turn into words.
macro_rules! string_arg {
    ($($t:ty: $static:ty),*) => {$(
        impl crate::args::Arg for $t {
            const TYPE: crate::args::ArgType = ArgType::Str;
            type Static = $static;
            /// Copies the bytes to the aux buffer; the word refers to them.
            fn into_word(self) -> u64 {
                string_word(self.as_ref())
            }
            /// Leaves the bytes in `strings`, to be written with the event.
            #[inline(always)]
            fn lower<'a>(self, strings: &mut Strings<'a>) -> u64
            where
                Self: 'a,
            {
                strings.push(self.as_ref());
                AUX_NONE
            }
        }
    )*};
}
string_arg!(&str: &'static str, &[u8]: &'static [u8], &String: &'static String);

impl<const N: usize> Tracepoint<N> {
    /// The tracepoint's word: 0 when disabled, its type word when enabled,
    /// [`UNREGISTERED`] before the first use.
    #[inline(always)]
    pub fn word(&self) -> u64 {
        // Acquire: the pointer may lead into a mapping another thread set up.
        let word = self.word.0.load(Acquire);
        // SAFETY: `word` always points to a 'static AtomicU64: one of the two sentinels, or
        // the tracepoint's slot in the process's device, whose mapping is never unmapped.
        // Relaxed: the word is self-contained.
        unsafe { &*word }.load(Relaxed)
    }

    /// The word to record with, given what [`word`](Self::word) returned (not 0):
    /// registers the tracepoint on its first use, with `types`, the types of the trace
    /// point's arguments. 0 means: do not record.
    #[inline(always)]
    pub fn enabled_word(&'static self, word: u64, types: &'static [ArgType]) -> u64 {
        if word == UNREGISTERED {
            return self.register(types);
        }
        word
    }

    /// Records an event. `word` is what [`enabled_word`](Self::enabled_word) returned, and
    /// must not be 0.
    ///
    /// Inlined into each trace point, behind its enabled test: measured, this is cheaper for
    /// both paths than a call (the arguments stay in registers, and the disabled loop keeps
    /// no spills around a call it never makes): 1.13x a bare `rdtsc` for 5 words against
    /// 1.30x, and 0.03x against 0.06x disabled. It costs about 600 bytes of code per trace
    /// point; the registration and a contended ring stay out of line.
    #[inline(always)]
    pub fn record(&'static self, word: u64, args: [u64; N]) {
        if let Some(w) = device() {
            w.emit(word, w.context(), &args);
        }
    }

    /// [`record`](Self::record) for a trace point whose string arguments are in
    /// `strings` ([`Arg::lower`](crate::args::Arg::lower)): they are written with the
    /// event, in one section. Without strings, this is `record`.
    #[inline(always)]
    pub fn record_strings(&'static self, word: u64, args: [u64; N], strings: &Strings<'_>) {
        if strings.is_empty() {
            return self.record(word, args);
        }
        if let Some(w) = device() {
            w.emit_strings(word, w.context(), &args, strings);
        }
    }

    /// Registers the tracepoint, its arguments of `types`, with the process's device
    /// (opening the default device if none is installed) and returns its word. If that
    /// fails, the tracepoint is disabled in this process and the reason is printed once to
    /// stderr.
    #[cold]
    #[inline(never)]
    pub fn register(&'static self, types: &'static [ArgType]) -> u64 {
        let registered = device_or_init().and_then(|w| {
            let def = devttrace::Definition {
                types,
                ..*self.definition()
            };
            let (id, word) = w.device().register_tracepoint(&def)?;
            Ok((w.device().tracepoint_word(id), word))
        });
        let (ptr, word) = match registered {
            Ok((shared, word)) => (shared, word),
            Err(e) => {
                static WARNED: std::sync::Once = std::sync::Once::new();
                WARNED.call_once(|| eprintln!("ttrace: tracing disabled: {e}"));
                (&DISABLED_WORD, 0)
            }
        };
        // Release: pairs with the Acquire load in `word`.
        self.word
            .0
            .store(ptr as *const AtomicU64 as *mut AtomicU64, Release);
        word
    }
}

/// Records a trace point: `point!(TRACEPOINT, arg, ...)`. When the tracepoint is disabled
/// this is one load of its word and a branch; the arguments are not evaluated.
///
/// Each argument's type is checked against its placeholder's spec when the program is
/// compiled (a string given to `{n:x}` does not compile), and recorded with the tracepoint
/// by the trace point that registers it, so that `{n}` shows an `i32` signed. Arguments
/// are written inside a closure that is never called, to learn their types without
/// evaluating them: `?` and `.await` cannot appear in them.
///
/// ```
/// # let tmp = tempfile::tempdir().unwrap();
/// # ttrace_core::init(&ttrace_core::Config::at(tmp.path().join("dev"))).unwrap();
/// ttrace_core::tracepoint!(static TICK: Start = "tick", "n={n}");
/// for n in 0..3u32 {
///     ttrace_core::point!(TICK, n);
/// }
/// ```
#[macro_export]
macro_rules! point {
    ($tp:path $(, $arg:expr)* $(,)?) => {{
        let tp = &$tp;
        let word = tp.word();
        if word != 0 {
            // The arguments' types, checked against the format; the closure is not called.
            #[inline(always)]
            fn types<A: $crate::args::Args>(
                _: &impl FnOnce() -> ::core::marker::PhantomData<A>,
            ) -> &'static [$crate::args::ArgType] {
                const { $crate::check::check_args($tp.definition(), A::TYPES) };
                A::TYPES
            }
            let word = tp.enabled_word(word, types(&|| $crate::args::erase(($($arg,)*))));
            if word != 0 {
                let mut strings = $crate::args::Strings::new();
                // One statement: the arguments' temporaries live until the event is written.
                tp.record_strings(
                    word,
                    [$($crate::args::Arg::lower($arg, &mut strings)),*],
                    &strings,
                );
            }
        }
    }};
}
