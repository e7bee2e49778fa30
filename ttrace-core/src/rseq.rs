//! Restartable per-CPU writes (Linux rseq): glibc's registration, the table of this
//! process's restartable rings, and the three critical sections, in x86-64 assembly.
//!
//! A section runs with this thread's rseq area pointing at its descriptor; the kernel
//! restarts it at its abort handler if the thread is preempted, migrated or signalled before
//! its one commit store, so all threads of all processes on one CPU run the sections for
//! that CPU's ring one at a time, each to its commit or not at all. What each section
//! stores, in which order, and why a reader never accepts what an aborted one left, is the
//! *restartable protocol* of `docs/DESIGN.md`; its Rust model, over any atomic word, is
//! [`RingWriter::write_restartable`](devttrace::ring::RingWriter::write_restartable) and
//! [`AuxWriter::write_restartable`](devttrace::aux::AuxWriter::write_restartable), which the loom
//! models check, and a test here compares every word the assembly stores with the model's.
//!
//! x86-64 orders stores with stores and loads with loads, so a section's stores reach other
//! CPUs in program order, as the model's Release fences require; each section is one
//! `asm!` block, which the compiler treats as reading and writing all memory. Every offset
//! the sections read (the rseq area's fields, the table's, a ring header's, [`AuxArgs`]') is
//! an `offset_of!` given to the assembly as a constant, and the layouts are asserted below.
//!
//! A section is tried [`TRIES`] times; then (a debugger single-stepping it aborts it every
//! time), or on a CPU without a restartable ring, the caller falls back to the shared ring.

use core::mem::{offset_of, size_of};
use core::sync::atomic::AtomicU64;
use devttrace::Mapping;
use std::sync::OnceLock;
use ttrace_layouts::device::ClockSource;
use ttrace_layouts::entry::{Slot, MAX_ARGS};
use ttrace_layouts::ring::RingHeader;

/// Environment variable that, set to anything but the empty string, makes this process's
/// writers use the shared rings (the atomic protocol) instead of restartable sequences.
pub const ENV_NO_RSEQ: &str = "TTRACE_NO_RSEQ";

/// Times a section is tried before the caller falls back to the shared ring.
pub const TRIES: u64 = 16;

/// The start of the kernel's `struct rseq`, the thread's registered area (a layout the
/// kernel writes: only its offsets are used).
#[allow(dead_code)]
#[repr(C)]
struct RseqArea {
    cpu_id_start: u32,
    /// The CPU the thread runs on, kept current by the kernel.
    cpu_id: u32,
    /// The descriptor of the section the thread is in (0: none).
    rseq_cs: u64,
}

/// The kernel's `struct rseq_cs`, a section's descriptor, as `section_end!` emits it
/// (`.long version, flags; .quad start, post_commit_offset, abort` behind `.balign 32`): a
/// layout the assembler emits, described here to be asserted.
#[allow(dead_code)]
#[repr(C, align(32))]
struct RseqCs {
    version: u32,
    flags: u32,
    start_ip: u64,
    post_commit_offset: u64,
    abort_ip: u64,
}

/// Row 0 of the table: what every section needs of the device.
#[repr(C)]
#[derive(Clone, Copy)]
struct TableHead {
    /// The number of restartable rings: a CPU id at or above it has none.
    rings: usize,
    /// `ring_slots - 1`.
    ring_mask: usize,
    /// `aux_size - 1` (bytes).
    aux_mask: usize,
    /// `aux_size` (bytes).
    aux_size: usize,
}

/// Row `1 + c` of the table: where restartable ring `c`'s words are.
#[repr(C)]
#[derive(Clone, Copy)]
struct TableRing {
    /// `&head` (its `last_stamp` is [`LAST_STAMP`] bytes further).
    head: *const AtomicU64,
    /// `&slots[0]`.
    slots: *const Slot,
    /// `&aux_first` (its `aux_last` is [`AUX_LAST`] bytes further).
    aux_first: *const AtomicU64,
    /// The aux buffer's first word.
    aux_words: *const AtomicU64,
}

/// One row of the table the sections read: ring `c`'s is at `table + ROW * (c + 1)`.
#[repr(C)]
#[derive(Clone, Copy)]
union Row {
    head: TableHead,
    ring: TableRing,
}

/// Bytes of a row, and its log2 (the sections shift a CPU id by it).
const ROW: usize = size_of::<Row>();
const ROW_SHIFT: u32 = ROW.trailing_zeros();
const _: () = assert!(1 << ROW_SHIFT == ROW, "a row's size is a power of two");
const _: () = assert!(
    size_of::<TableHead>() == ROW && size_of::<TableRing>() == ROW,
    "both kinds of rows have the row's size"
);

/// `last_stamp` from `head`, and `aux_last` from `aux_first`, in a ring header.
const LAST_STAMP: usize = offset_of!(RingHeader, last_stamp) - offset_of!(RingHeader, head);
const AUX_LAST: usize = offset_of!(RingHeader, aux_last) - offset_of!(RingHeader, aux_first);

/// An aux record to write: what the sections read of one string through one pointer
/// ([`Restartable::aux_write`], and each of an event's in [`Restartable::write_event`]).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct AuxArgs {
    /// The record's path word, without its CPU (valid). Its length's low three bits say
    /// whether the payload ends with a partial word ([`AuxArgs::tail`]).
    pub path: u64,
    /// The header's timestamp word.
    pub timestamp: u64,
    /// The header's context word.
    pub ctx: u64,
    /// Bytes of the whole record (header, payload, padding).
    pub record_bytes: u64,
    /// Whole payload words to copy from `src`.
    pub full_words: u64,
    /// The last payload word, zero-padded (stored if the length is not a multiple of 8).
    pub tail: u64,
    /// The payload.
    pub src: *const u8,
    /// In [`EventArgs`]: the byte offset in [`EventArgs::words`] of the argument word that
    /// refers to the record. Unused by [`Restartable::aux_write`].
    pub word_at: u64,
}

impl AuxArgs {
    /// The record of `bytes` (at most [`AUX_MAX_PAYLOAD`](ttrace_layouts::aux::AUX_MAX_PAYLOAD)),
    /// whose path is `path` (its length and truncation said; no CPU).
    #[inline(always)]
    pub fn new(path: u64, timestamp: u64, ctx: u64, bytes: &[u8]) -> AuxArgs {
        let full = bytes.len() / 8;
        let tail = &bytes[full * 8..];
        let mut last = [0u8; 8];
        last[..tail.len()].copy_from_slice(tail);
        AuxArgs {
            path,
            timestamp,
            ctx,
            record_bytes: ttrace_layouts::aux::AuxPath(path).record_bytes(),
            full_words: full as u64,
            tail: u64::from_ne_bytes(last),
            src: bytes.as_ptr(),
            word_at: 0,
        }
    }
}

/// An event and its strings, written in one section by [`Restartable::write_event`]: what
/// it reads (and the words it completes) through one pointer.
#[repr(C)]
pub struct EventArgs {
    /// The parent's seven words (type word without CPU, context, five arguments), then the
    /// continuation's; each string's argument word is set to its record's reference.
    pub words: [u64; 14],
    /// Slots of the entry: 1, or 2 with a continuation.
    pub slots: u64,
    /// Strings in `strings`.
    pub count: u64,
    /// Tries left before the caller falls back (the section counts them down here).
    pub tries: u64,
    /// The rseq area's offset from the thread pointer.
    pub offset: i64,
    /// The strings, in argument order: the first `count` are set.
    pub strings: [core::mem::MaybeUninit<AuxArgs>; MAX_ARGS],
}

impl EventArgs {
    /// The event of type word `word` (no CPU) for the writer `ctx`, with `args` (at most
    /// [`MAX_ARGS`]), to be written by `r`'s sections; no strings yet.
    #[inline(always)]
    pub fn new(r: &Restartable, word: u64, ctx: u64, args: &[u64]) -> EventArgs {
        let mut words = [0u64; 14];
        (words[0], words[1]) = (word, ctx);
        words[2..2 + args.len()].copy_from_slice(args);
        EventArgs {
            words,
            slots: if args.len() > ttrace_layouts::entry::ENTRY_ARGS {
                2
            } else {
                1
            },
            count: 0,
            tries: TRIES,
            offset: r.offset,
            strings: [const { core::mem::MaybeUninit::uninit() }; MAX_ARGS],
        }
    }

    /// Adds argument `index`'s string, `record` (its `word_at` is set here); a string past
    /// [`MAX_ARGS`] is ignored.
    #[inline(always)]
    pub fn push(&mut self, index: usize, mut record: AuxArgs) {
        record.word_at = (8 * (2 + index)) as u64;
        if let Some(slot) = self.strings.get_mut(self.count as usize) {
            slot.write(record);
            self.count += 1;
        }
    }
}

/// glibc's rseq area for this process's threads: its offset from the thread pointer and
/// its registered size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Area {
    /// `__rseq_offset`.
    pub offset: i64,
    /// `__rseq_size` (20 before glibc 2.40, 32 after; 0 when rseq is not registered).
    pub size: u32,
}

/// glibc's rseq area, when this process's threads have one whose `cpu_id` agrees with the
/// kernel's (glibc 2.35 and later register one unless `GLIBC_TUNABLES=glibc.pthread.rseq=0`).
/// Looked up once.
pub fn area() -> Option<Area> {
    static AREA: OnceLock<Option<Area>> = OnceLock::new();
    *AREA.get_or_init(|| {
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        {
            let area = glibc_area().filter(|a| a.size >= 8)?;
            let agrees = (0..64).any(|_| {
                let a = sched_getcpu();
                let b = cpu_id(area.offset);
                a == b && a == sched_getcpu()
            });
            agrees.then_some(area)
        }
        #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
        None
    })
}

fn sched_getcpu() -> u32 {
    // SAFETY: no arguments, no memory effects.
    let cpu = unsafe { libc::sched_getcpu() };
    cpu.max(0) as u32
}

/// glibc's `__rseq_offset` and `__rseq_size`, if it exports them.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn glibc_area() -> Option<Area> {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only looks a symbol up.
    let offset =
        unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_offset".as_ptr()) } as *const isize;
    // SAFETY: as above.
    let size = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_size".as_ptr()) } as *const u32;
    if offset.is_null() || size.is_null() {
        return None;
    }
    // SAFETY: glibc defines `__rseq_offset` as a `ptrdiff_t` and `__rseq_size` as an
    // `unsigned int`, both initialized before `main` and constant afterwards.
    let (offset, size) = unsafe { (*offset, *size) };
    Some(Area {
        offset: offset as i64,
        size,
    })
}

/// Reads `cpu_id` from the calling thread's rseq area at `offset` ([`area`]).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[inline(always)]
pub fn cpu_id(offset: i64) -> u32 {
    let cpu: u32;
    // SAFETY: glibc registered an rseq area for every thread at `fs:offset` (`area` checked
    // it), and `cpu_id` is the 32-bit field at `CPU_ID` bytes into it, kept current by the
    // kernel. The read has no side effects. An unregistered thread reads -1, which the ring
    // selection folds onto a valid ring.
    unsafe {
        core::arch::asm!(
            "mov {cpu:e}, dword ptr fs:[{off} + {cpu_id}]",
            off = in(reg) offset,
            cpu = out(reg) cpu,
            cpu_id = const offset_of!(RseqArea, cpu_id),
            options(nostack, readonly, preserves_flags),
        );
    }
    cpu
}

/// This process's restartable path into one device: the rseq area's offset and the table
/// of the device's restartable rings that the sections read.
pub struct Restartable {
    offset: i64,
    /// Row 0 a [`TableHead`], row `1 + c` ring `c`'s [`TableRing`].
    table: Box<[Row]>,
}

// SAFETY: the table holds addresses into the device's mappings, which the Writer that owns
// this keeps alive; the sections only reach the memory behind them through atomic stores
// and loads of words that every process changes the same way.
unsafe impl Send for Restartable {}
// SAFETY: as above; nothing here is written after construction.
unsafe impl Sync for Restartable {}

impl Restartable {
    /// The restartable path into the device `map`, if this thread's process has a
    /// registered rseq area that holds `rseq_cs` (`__rseq_size` at least 20), the device's
    /// clock is the TSC (read inside the sections) and `TTRACE_NO_RSEQ` is unset. The table
    /// points into `map`, which must outlive it.
    pub fn of(map: &Mapping) -> Option<Restartable> {
        let wanted = std::env::var_os(ENV_NO_RSEQ).is_none_or(|v| v.is_empty());
        let area = area().filter(|a| a.size >= 20 && wanted && map.clock() == ClockSource::Tsc)?;
        let n = map.num_cpus() as usize;
        let mut table = Vec::with_capacity(n + 1);
        table.push(Row {
            head: TableHead {
                rings: n,
                ring_mask: map.ring_slots() as usize - 1,
                aux_mask: map.aux(0).words().len() * 8 - 1,
                aux_size: map.aux(0).words().len() * 8,
            },
        });
        for c in 0..n {
            let (ring, header, aux) = (map.ring(c), map.ring_header(c), map.aux(c));
            table.push(Row {
                ring: TableRing {
                    head: &header.head,
                    slots: ring.slots().as_ptr(),
                    aux_first: &header.aux_first,
                    aux_words: aux.words().as_ptr(),
                },
            });
        }
        Some(Restartable {
            offset: area.offset,
            table: table.into_boxed_slice(),
        })
    }
}

// The sections are built from pieces of `asm!` template text, each a macro named after what
// it does, so that every section that does a thing does it with the same instructions.
// They name their operands alike: `{table}`, `{ring}` (this CPU's row, less one row),
// `{cpu}`, `{h}` (the head, or a record's start), `{a}` and `{b}` (the entry's slots, or
// the aux buffer's `first`), `{w}` (the words), `{s}` (a string's `AuxArgs`); `rax`, `rdx`
// are scratch, and a string's copy uses `rcx`, `rsi` and `rdi`.

/// The start of a restartable section: the retry point (26), publishing the descriptor
/// (23) in the thread's rseq area, then the section proper (21): `{cpu}` = this CPU,
/// leaving for 25 (fall back) if it has no restartable ring, and `{ring}` = `table + ROW *
/// cpu` (its row is at `{ring} + ROW`). The rseq area's offset is `{off}`, or, given, the
/// register that the given text loads it into at the retry point.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
macro_rules! section_start {
    () => {
        section_start!("", "{off}")
    };
    ($load:literal, $off:literal) => {
        concat!(
            "26:\n",
            $load,
            "lea {ring}, [rip + 23f]\n",
            "mov qword ptr fs:[",
            $off,
            " + {rseq_cs}], {ring}\n",
            "21:\n",
            "mov {cpu:e}, dword ptr fs:[",
            $off,
            " + {cpu_id}]\n",
            "cmp {cpu}, qword ptr [{table} + {rings}]\n",
            "jae 25f\n",
            "mov {ring}, {cpu}\n",
            "shl {ring}, {row_shift}\n",
            "add {ring}, {table}\n",
        )
    };
}

/// The end of a restartable section, after its commit (22) and whatever follows it, which
/// must jump to 27: the abort handler (24, behind the signature glibc registered: retry at
/// 26 until the count of tries given runs out), the descriptor (an `RseqCs`: version,
/// flags, start 21, length to the commit's end 22, abort 24), and the fall-back exit (25:
/// `eax` = 0).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
macro_rules! section_end {
    ($tries:literal) => {
        concat!(
            ".pushsection __rseq_failure, \"ax\"\n",
            ".byte 0x0f, 0xb9, 0x3d\n",
            ".long 0x53053053\n",
            "24:\n",
            "sub ",
            $tries,
            ", 1\n",
            "jnz 26b\n",
            "jmp 25f\n",
            ".popsection\n",
            ".pushsection __rseq_cs, \"aw\"\n",
            ".balign 32\n",
            "23:\n",
            ".long 0, 0\n",
            ".quad 21b, 22b - 21b, 24b\n",
            ".popsection\n",
            "25:\n",
            "xor eax, eax\n",
            "27:\n",
        )
    };
}

/// `{h}` = the ring's head; `{a}` = its slot, claimed (`CLAIMED | h`): the slot's line is
/// only written. From here on `{ring}` holds `&head` (the row is not read again): the stamp
/// and the commit reach the head's line without loading its address again.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
macro_rules! claim_first {
    () => {
        concat!(
            "mov {a}, qword ptr [{ring} + {r_slots}]\n",
            "mov {ring}, qword ptr [{ring} + {r_head}]\n",
            "mov {h}, qword ptr [{ring}]\n",
            "mov rdx, {h}\n",
            "and rdx, qword ptr [{table} + {ring_mask}]\n",
            "shl rdx, {slot_shift}\n",
            "add {a}, rdx\n",
            "mov rdx, {h}\n",
            "bts rdx, {claimed}\n",
            "mov qword ptr [{a}], rdx\n",
        )
    };
}

/// `{b}` = the slot at `h + 1`, claimed (`CLAIMED | h + 1`): `{a}`'s slot moved by one, less
/// the ring's size if that wraps (`a - slot(h) + slot(h + 1)`, the slots' base not loaded
/// again).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
macro_rules! claim_second {
    () => {
        concat!(
            "lea {b}, [{h} + 1]\n",
            "and {b}, qword ptr [{table} + {ring_mask}]\n",
            "shl {b}, {slot_shift}\n",
            "add {b}, {a}\n",
            "mov rdx, {h}\n",
            "and rdx, qword ptr [{table} + {ring_mask}]\n",
            "shl rdx, {slot_shift}\n",
            "sub {b}, rdx\n",
            "lea rdx, [{h} + 1]\n",
            "bts rdx, {claimed}\n",
            "mov qword ptr [{b}], rdx\n",
        )
    };
}

/// The parent's payload into `{a}`: the type word `| cpu << CPU_SHIFT | h << POSITION_SHIFT`
/// (`{cpu}` is spent), then the six words after it.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
macro_rules! payload_first {
    () => {
        concat!(
            "shl {cpu}, {cpu_shift}\n",
            "or {cpu}, qword ptr [{w}]\n",
            "mov rdx, {h}\n",
            "shl rdx, {position_shift}\n",
            "or {cpu}, rdx\n",
            "mov qword ptr [{a} + 8], {cpu}\n",
            "mov rdx, qword ptr [{w} + 8]\n",
            "mov qword ptr [{a} + 16], rdx\n",
            "mov rdx, qword ptr [{w} + 16]\n",
            "mov qword ptr [{a} + 24], rdx\n",
            "mov rdx, qword ptr [{w} + 24]\n",
            "mov qword ptr [{a} + 32], rdx\n",
            "mov rdx, qword ptr [{w} + 32]\n",
            "mov qword ptr [{a} + 40], rdx\n",
            "mov rdx, qword ptr [{w} + 40]\n",
            "mov qword ptr [{a} + 48], rdx\n",
            "mov rdx, qword ptr [{w} + 48]\n",
            "mov qword ptr [{a} + 56], rdx\n",
        )
    };
}

/// The continuation's payload into `{b}`: words 7 to 13.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
macro_rules! payload_second {
    () => {
        concat!(
            "mov rdx, qword ptr [{w} + 56]\n",
            "mov qword ptr [{b} + 8], rdx\n",
            "mov rdx, qword ptr [{w} + 64]\n",
            "mov qword ptr [{b} + 16], rdx\n",
            "mov rdx, qword ptr [{w} + 72]\n",
            "mov qword ptr [{b} + 24], rdx\n",
            "mov rdx, qword ptr [{w} + 80]\n",
            "mov qword ptr [{b} + 32], rdx\n",
            "mov rdx, qword ptr [{w} + 88]\n",
            "mov qword ptr [{b} + 40], rdx\n",
            "mov rdx, qword ptr [{w} + 96]\n",
            "mov qword ptr [{b} + 48], rdx\n",
            "mov rdx, qword ptr [{w} + 104]\n",
            "mov qword ptr [{b} + 56], rdx\n",
        )
    };
}

/// The parent's stamp into `{a}` and `rax`: `rdtsc`, the claim and continuation bits
/// clear, at least the floor (the ring's last stamp, made odd, plus one: into `{cpu}`,
/// spent, before the `rdtsc`, so that after it come only the stamp's bits and stores),
/// unless the floor is more than `{ahead}` past the clock (a damaged `last_stamp`: then
/// none): the floor if it is at most `{ahead}` past the clock (their difference, wrapping,
/// compared once: a floor below the clock wraps far above), else the clock.
/// [`Stamp::next_after`] is its model.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
macro_rules! stamp {
    () => {
        concat!(
            "mov {cpu}, qword ptr [{ring} + {last_stamp}]\n",
            "or {cpu}, 1\n",
            "add {cpu}, 1\n",
            "rdtsc\n",
            "shl rdx, 32\n",
            "or rax, rdx\n",
            "btr rax, {claimed}\n",
            "and rax, -2\n",
            "mov rdx, {cpu}\n",
            "sub rdx, rax\n",
            "cmp rdx, {ahead}\n",
            "cmovbe rax, {cpu}\n",
            "mov qword ptr [{a}], rax\n",
        )
    };
}

/// The continuation's stamp into `{b}`: the parent's, odd.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
macro_rules! stamp_second {
    () => {
        concat!("lea rdx, [rax + 1]\n", "mov qword ptr [{b}], rdx\n")
    };
}

/// `last_stamp` = the stamp, then the commit: `head = h + slots` (the operand given), and
/// the commit's end (22). `{ring}` is `&head` ([`claim_first`]).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
macro_rules! commit {
    ($slots:literal) => {
        concat!(
            "mov qword ptr [{ring} + {last_stamp}], rax\n",
            "add {h}, ",
            $slots,
            "\n",
            "mov qword ptr [{ring}], {h}\n",
            "22:\n",
        )
    };
}

/// One aux record, `{s}`'s, into this CPU's buffer, ending with its commit (`last`): `{h}`
/// = its start (the buffer's `last`); `{a}` = `first`, repaired to the start when out of
/// range, then moved past each record the new one overwrites (each record is walked once,
/// when it is overwritten) and stored if it moved; the header (`path | cpu << CPU_SHIFT`,
/// timestamp, context); the payload's whole words, with `rep movsb` when they are many and
/// do not wrap (the CPU's widest stores), else word by word; the tail word; then `last`.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
macro_rules! aux_record {
    () => {
        concat!(
            "mov rdx, qword ptr [{ring} + {r_aux_first}]\n",
            "mov {h}, qword ptr [rdx + {aux_last}]\n",
            "mov {a}, qword ptr [rdx]\n",
            "mov rsi, {a}\n",
            "cmp {a}, {h}\n",
            "ja 31f\n",
            "test {a}, 7\n",
            "jnz 31f\n",
            "mov rax, {h}\n",
            "sub rax, {a}\n",
            "cmp rax, qword ptr [{table} + {aux_size}]\n",
            "jbe 32f\n",
            "31:\n",
            "mov {a}, {h}\n",
            "32:\n",
            // Advance first while start + record - first > size.
            "33:\n",
            "mov rax, {h}\n",
            "add rax, qword ptr [{s} + {x_record_bytes}]\n",
            "sub rax, {a}\n",
            "cmp rax, qword ptr [{table} + {aux_size}]\n",
            "jbe 34f\n",
            // The record at first: its length, header included, rounded up to 8.
            "mov rax, {a}\n",
            "and rax, qword ptr [{table} + {aux_mask}]\n",
            "mov rdx, qword ptr [{ring} + {r_aux_words}]\n",
            "mov rax, qword ptr [rdx + rax]\n",
            "shr rax, {len_shift}\n",
            "and rax, {len_mask}\n",
            "add rax, {header_round}\n",
            "and rax, -8\n",
            "add {a}, rax\n",
            "jmp 33b\n",
            "34:\n",
            "cmp rsi, {a}\n",
            "je 35f\n",
            "mov rdx, qword ptr [{ring} + {r_aux_first}]\n",
            "mov qword ptr [rdx], {a}\n",
            "35:\n",
            // The header; rdi = the offset of each word in turn.
            "mov rdx, qword ptr [{ring} + {r_aux_words}]\n",
            "mov rdi, {h}\n",
            "and rdi, qword ptr [{table} + {aux_mask}]\n",
            "mov rax, {cpu}\n",
            "shl rax, {path_cpu_shift}\n",
            "or rax, qword ptr [{s} + {x_path}]\n",
            "mov qword ptr [rdx + rdi], rax\n",
            "add rdi, 8\n",
            "and rdi, qword ptr [{table} + {aux_mask}]\n",
            "mov rax, qword ptr [{s} + {x_timestamp}]\n",
            "mov qword ptr [rdx + rdi], rax\n",
            "add rdi, 8\n",
            "and rdi, qword ptr [{table} + {aux_mask}]\n",
            "mov rax, qword ptr [{s} + {x_ctx}]\n",
            "mov qword ptr [rdx + rdi], rax\n",
            "add rdi, 8\n",
            "and rdi, qword ptr [{table} + {aux_mask}]\n",
            // The payload's whole words: rsi = source, rcx = count; rdi ends as the address
            // of the tail word.
            "mov rsi, qword ptr [{s} + {x_src}]\n",
            "mov rcx, qword ptr [{s} + {x_full_words}]\n",
            "lea rax, [rdi + 8 * rcx + 8]\n",
            "cmp rax, qword ptr [{table} + {aux_size}]\n",
            "ja 37f\n",
            "add rdi, rdx\n",
            "cmp rcx, {long_words}\n",
            "jb 36f\n",
            "shl rcx, 3\n",
            "rep movsb\n",
            "jmp 39f\n",
            "36:\n",
            "test rcx, rcx\n",
            "jz 39f\n",
            "mov rax, qword ptr [rsi]\n",
            "mov qword ptr [rdi], rax\n",
            "add rsi, 8\n",
            "add rdi, 8\n",
            "sub rcx, 1\n",
            "jmp 36b\n",
            // Wrapping: word by word, each offset masked.
            "37:\n",
            "test rcx, rcx\n",
            "jz 38f\n",
            "mov rax, qword ptr [rsi]\n",
            "mov qword ptr [rdx + rdi], rax\n",
            "add rsi, 8\n",
            "add rdi, 8\n",
            "and rdi, qword ptr [{table} + {aux_mask}]\n",
            "sub rcx, 1\n",
            "jmp 37b\n",
            "38:\n",
            "add rdi, rdx\n",
            "39:\n",
            // The tail word, if the length is not a multiple of 8.
            "test qword ptr [{s} + {x_path}], {tail_bits}\n",
            "jz 30f\n",
            "mov rax, qword ptr [{s} + {x_tail}]\n",
            "mov qword ptr [rdi], rax\n",
            "30:\n",
            // The record's commit: last = start + record bytes.
            "mov rax, {h}\n",
            "add rax, qword ptr [{s} + {x_record_bytes}]\n",
            "mov rdx, qword ptr [{ring} + {r_aux_first}]\n",
            "mov qword ptr [rdx + {aux_last}], rax\n",
        )
    };
}

/// Payloads of at least this many whole words are copied with `rep movsb` when they do not
/// wrap; shorter ones word by word (where `rep movsb` starts slowly).
const LONG_WORDS: u64 = 32;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
impl Restartable {
    /// Writes one entry (`words`: type word without CPU, context, 5 arguments) into the
    /// restartable ring of the calling thread's CPU. Returns the committed stamp, or 0 if
    /// the caller must use the shared ring (no restartable ring for this CPU, or [`TRIES`]
    /// aborted attempts).
    #[inline(always)]
    pub fn write(&self, words: &[u64; 7]) -> u64 {
        use ttrace_layouts::entry::{Stamp, TypeWord};
        let stamp: u64;
        // SAFETY: `table` was built by `Restartable::of` from the live mappings of one
        // device, whose restartable rings only restartable sections write; every address
        // formed below is inside them (the CPU index is checked against the table's ring
        // count, positions are masked by the ring mask); `fs:[offset]` is this thread's rseq
        // area, registered by glibc (`area`).
        unsafe {
            core::arch::asm!(
                section_start!(),
                claim_first!(),
                payload_first!(),
                stamp!(),
                commit!("1"),
                "jmp 27f",
                section_end!("{tries}"),
                off = in(reg) self.offset,
                table = in(reg) self.table.as_ptr(),
                w = in(reg) words.as_ptr(),
                tries = inout(reg) TRIES => _,
                cpu = out(reg) _,
                ring = out(reg) _,
                h = out(reg) _,
                a = out(reg) _,
                out("rax") stamp,
                out("rdx") _,
                rseq_cs = const offset_of!(RseqArea, rseq_cs),
                cpu_id = const offset_of!(RseqArea, cpu_id),
                rings = const offset_of!(TableHead, rings),
                row_shift = const ROW_SHIFT,
                ring_mask = const offset_of!(TableHead, ring_mask),
                r_head = const ROW + offset_of!(TableRing, head),
                r_slots = const ROW + offset_of!(TableRing, slots),
                slot_shift = const size_of::<Slot>().trailing_zeros(),
                last_stamp = const LAST_STAMP,
                claimed = const Stamp::CLAIMED.trailing_zeros(),
                ahead = const Stamp::FLOOR_AHEAD,
                cpu_shift = const TypeWord::CPU_SHIFT,
                position_shift = const TypeWord::POSITION_SHIFT,
                options(nostack),
            );
        }
        stamp
    }

    /// Writes a parent entry and its continuation (`words[..7]` and `words[7..]`, the type
    /// word without CPU first) into two consecutive slots of the restartable ring of the
    /// calling thread's CPU. Returns the parent's stamp, or 0 as [`Restartable::write`].
    #[inline(always)]
    pub fn write_pair(&self, words: &[u64; 14]) -> u64 {
        use ttrace_layouts::entry::{Stamp, TypeWord};
        let stamp: u64;
        // SAFETY: as in `write`.
        unsafe {
            core::arch::asm!(
                section_start!(),
                claim_first!(),
                claim_second!(),
                payload_first!(),
                payload_second!(),
                stamp!(),
                stamp_second!(),
                commit!("2"),
                "jmp 27f",
                section_end!("{tries}"),
                off = in(reg) self.offset,
                table = in(reg) self.table.as_ptr(),
                w = in(reg) words.as_ptr(),
                tries = inout(reg) TRIES => _,
                cpu = out(reg) _,
                ring = out(reg) _,
                h = out(reg) _,
                a = out(reg) _,
                b = out(reg) _,
                out("rax") stamp,
                out("rdx") _,
                rseq_cs = const offset_of!(RseqArea, rseq_cs),
                cpu_id = const offset_of!(RseqArea, cpu_id),
                rings = const offset_of!(TableHead, rings),
                row_shift = const ROW_SHIFT,
                ring_mask = const offset_of!(TableHead, ring_mask),
                r_head = const ROW + offset_of!(TableRing, head),
                r_slots = const ROW + offset_of!(TableRing, slots),
                slot_shift = const size_of::<Slot>().trailing_zeros(),
                last_stamp = const LAST_STAMP,
                claimed = const Stamp::CLAIMED.trailing_zeros(),
                ahead = const Stamp::FLOOR_AHEAD,
                cpu_shift = const TypeWord::CPU_SHIFT,
                position_shift = const TypeWord::POSITION_SHIFT,
                options(nostack),
            );
        }
        stamp
    }

    /// Writes an event and its strings in one section: each of `e.strings[..e.count]` as
    /// an aux record into the buffer of the calling thread's CPU's restartable ring, its
    /// reference into `e.words` at its `word_at`, then the entry (`e.slots` slots) into that
    /// ring. Returns the parent's stamp, or 0 as [`Restartable::write`] (having counted
    /// `e.tries` down). The Rust model of the same stores is
    /// [`devttrace::restartable::write_event`].
    ///
    /// # Safety
    ///
    /// `e.count` is at most [`MAX_ARGS`]; each string's `src` points to `full_words * 8`
    /// readable bytes, its `record_bytes` is at most the buffer's size, and its `word_at` is
    /// the byte offset of a word of `e.words`; `e.slots` is 1 or 2.
    #[inline(always)]
    pub unsafe fn write_event(&self, e: &mut EventArgs) -> u64 {
        use ttrace_layouts::aux::{
            AuxPath, AUX_HEADER_BYTES, AUX_REF_BUFFERS, AUX_REF_OFFSET_BITS,
        };
        use ttrace_layouts::entry::{Stamp, TypeWord};
        let stamp: u64;
        // SAFETY: as in `write` and `aux_write`; the strings' records are within `e`
        // (`count` at most `MAX_ARGS`), and the words the section completes within
        // `e.words` (the caller's contract).
        unsafe {
            core::arch::asm!(
                section_start!("mov rax, qword ptr [{w} + {e_offset}]\n", "rax"),
                // The strings: {s} walks their records up to the count's end.
                "lea {s}, [{w} + {e_strings}]",
                "40:",
                "mov rax, qword ptr [{w} + {e_count}]",
                "shl rax, {x_shift}",
                "lea rax, [{w} + rax + {e_strings}]",
                "cmp {s}, rax",
                "jae 49f",
                aux_record!(),
                // Its argument word: AUX_REF | buffer << 48 | the start's low 48 bits.
                "mov rax, {h}",
                "shl rax, {ref_low}",
                "shr rax, {ref_low}",
                "mov rdx, {cpu}",
                "and rdx, {ref_buffers}",
                "shl rdx, {ref_shift}",
                "or rax, rdx",
                "bts rax, 63",
                "mov rdx, qword ptr [{s} + {x_word_at}]",
                "mov qword ptr [{w} + rdx], rax",
                "add {s}, {x_size}",
                "jmp 40b",
                // The entry, of one slot or two.
                "49:",
                "cmp qword ptr [{w} + {e_slots}], 1",
                "jne 52f",
                claim_first!(),
                payload_first!(),
                stamp!(),
                "jmp 53f",
                "52:",
                claim_first!(),
                claim_second!(),
                payload_first!(),
                payload_second!(),
                stamp!(),
                stamp_second!(),
                "53:",
                commit!("qword ptr [{w} + {e_slots}]"),
                "jmp 27f",
                section_end!("qword ptr [{w} + {e_tries}]"),
                table = in(reg) self.table.as_ptr(),
                w = in(reg) e as *mut EventArgs,
                cpu = out(reg) _,
                ring = out(reg) _,
                h = out(reg) _,
                a = out(reg) _,
                b = out(reg) _,
                s = out(reg) _,
                out("rax") stamp,
                out("rdx") _,
                out("rcx") _,
                out("rsi") _,
                out("rdi") _,
                rseq_cs = const offset_of!(RseqArea, rseq_cs),
                cpu_id = const offset_of!(RseqArea, cpu_id),
                rings = const offset_of!(TableHead, rings),
                row_shift = const ROW_SHIFT,
                ring_mask = const offset_of!(TableHead, ring_mask),
                aux_mask = const offset_of!(TableHead, aux_mask),
                aux_size = const offset_of!(TableHead, aux_size),
                r_head = const ROW + offset_of!(TableRing, head),
                r_slots = const ROW + offset_of!(TableRing, slots),
                r_aux_first = const ROW + offset_of!(TableRing, aux_first),
                r_aux_words = const ROW + offset_of!(TableRing, aux_words),
                slot_shift = const size_of::<Slot>().trailing_zeros(),
                last_stamp = const LAST_STAMP,
                aux_last = const AUX_LAST,
                claimed = const Stamp::CLAIMED.trailing_zeros(),
                ahead = const Stamp::FLOOR_AHEAD,
                cpu_shift = const TypeWord::CPU_SHIFT,
                position_shift = const TypeWord::POSITION_SHIFT,
                len_shift = const AuxPath::LEN_SHIFT,
                len_mask = const AuxPath::LEN_MASK,
                header_round = const AUX_HEADER_BYTES + 7,
                path_cpu_shift = const AuxPath::CPU_SHIFT,
                tail_bits = const 7 << AuxPath::LEN_SHIFT,
                long_words = const LONG_WORDS,
                ref_low = const 64 - AUX_REF_OFFSET_BITS,
                ref_buffers = const AUX_REF_BUFFERS - 1,
                ref_shift = const AUX_REF_OFFSET_BITS,
                e_offset = const offset_of!(EventArgs, offset),
                e_slots = const offset_of!(EventArgs, slots),
                e_count = const offset_of!(EventArgs, count),
                e_tries = const offset_of!(EventArgs, tries),
                e_strings = const offset_of!(EventArgs, strings),
                x_shift = const size_of::<AuxArgs>().trailing_zeros(),
                x_size = const size_of::<AuxArgs>(),
                x_path = const offset_of!(AuxArgs, path),
                x_timestamp = const offset_of!(AuxArgs, timestamp),
                x_ctx = const offset_of!(AuxArgs, ctx),
                x_record_bytes = const offset_of!(AuxArgs, record_bytes),
                x_full_words = const offset_of!(AuxArgs, full_words),
                x_tail = const offset_of!(AuxArgs, tail),
                x_src = const offset_of!(AuxArgs, src),
                x_word_at = const offset_of!(AuxArgs, word_at),
                options(nostack),
            );
        }
        stamp
    }

    /// Writes the aux record `args` into the aux buffer of the calling thread's CPU's
    /// restartable ring. Returns `(ring + 1, offset)` of the record, or `(0, _)` if the
    /// caller must use the shared ring's buffer.
    ///
    /// # Safety
    ///
    /// `args.src` points to `args.full_words * 8` readable bytes, and `args.record_bytes` is
    /// at most the buffer's size.
    #[inline(always)]
    pub unsafe fn aux_write(&self, args: &AuxArgs) -> (u64, u64) {
        use ttrace_layouts::aux::{AuxPath, AUX_HEADER_BYTES};
        let found: u64;
        let start: u64;
        // SAFETY: as in `write`; the payload words are stored at masked offsets of the
        // buffer (or, when they do not wrap, from the record's start to below the buffer's
        // end), and read from `src` within its `full_words` words (the caller's contract).
        unsafe {
            core::arch::asm!(
                section_start!(),
                aux_record!(),
                "22:",
                "mov rax, {ring}",
                "sub rax, {table}",
                "shr rax, {row_shift}",
                "add rax, 1",
                "jmp 27f",
                section_end!("{tries}"),
                off = in(reg) self.offset,
                table = in(reg) self.table.as_ptr(),
                s = in(reg) args as *const AuxArgs,
                tries = inout(reg) TRIES => _,
                cpu = out(reg) _,
                ring = out(reg) _,
                h = out(reg) start,
                a = out(reg) _,
                out("rax") found,
                out("rdx") _,
                out("rcx") _,
                out("rsi") _,
                out("rdi") _,
                rseq_cs = const offset_of!(RseqArea, rseq_cs),
                cpu_id = const offset_of!(RseqArea, cpu_id),
                rings = const offset_of!(TableHead, rings),
                row_shift = const ROW_SHIFT,
                aux_mask = const offset_of!(TableHead, aux_mask),
                aux_size = const offset_of!(TableHead, aux_size),
                r_aux_first = const ROW + offset_of!(TableRing, aux_first),
                r_aux_words = const ROW + offset_of!(TableRing, aux_words),
                aux_last = const AUX_LAST,
                len_shift = const AuxPath::LEN_SHIFT,
                len_mask = const AuxPath::LEN_MASK,
                header_round = const AUX_HEADER_BYTES + 7,
                path_cpu_shift = const AuxPath::CPU_SHIFT,
                tail_bits = const 7 << AuxPath::LEN_SHIFT,
                long_words = const LONG_WORDS,
                x_path = const offset_of!(AuxArgs, path),
                x_timestamp = const offset_of!(AuxArgs, timestamp),
                x_ctx = const offset_of!(AuxArgs, ctx),
                x_record_bytes = const offset_of!(AuxArgs, record_bytes),
                x_full_words = const offset_of!(AuxArgs, full_words),
                x_tail = const offset_of!(AuxArgs, tail),
                x_src = const offset_of!(AuxArgs, src),
                options(nostack),
            );
        }
        (found, start)
    }
}

/// Every offset the sections read, as the layouts of this build place it. The sections
/// take their offsets from `offset_of!`, so a moved field changes the code, not its
/// meaning; these pin the layouts themselves (the ring header's words are shared with
/// every other process and reader), so that moving one is a deliberate change here.
macro_rules! pinned {
    ($($what:expr => $at:expr),* $(,)?) => {
        $(const _: () = assert!($what == $at, concat!(
            "a layout the rseq sections read has changed: ", stringify!($what),
            " is no longer ", stringify!($at), " (see ttrace-core/src/rseq.rs)"
        ));)*
    };
}
pinned! {
    offset_of!(RseqArea, cpu_id) => 4,
    offset_of!(RseqArea, rseq_cs) => 8,
    size_of::<RseqCs>() => 32,
    offset_of!(RseqCs, start_ip) => 8,
    offset_of!(RseqCs, post_commit_offset) => 16,
    offset_of!(RseqCs, abort_ip) => 24,
    LAST_STAMP => 8,
    AUX_LAST => 8,
    ROW => 32,
    offset_of!(TableHead, rings) => 0,
    offset_of!(TableHead, ring_mask) => 8,
    offset_of!(TableHead, aux_mask) => 16,
    offset_of!(TableHead, aux_size) => 24,
    offset_of!(TableRing, head) => 0,
    offset_of!(TableRing, slots) => 8,
    offset_of!(TableRing, aux_first) => 16,
    offset_of!(TableRing, aux_words) => 24,
    offset_of!(AuxArgs, path) => 0,
    offset_of!(AuxArgs, timestamp) => 8,
    offset_of!(AuxArgs, ctx) => 16,
    offset_of!(AuxArgs, record_bytes) => 24,
    offset_of!(AuxArgs, full_words) => 32,
    offset_of!(AuxArgs, tail) => 40,
    offset_of!(AuxArgs, src) => 48,
    offset_of!(AuxArgs, word_at) => 56,
    size_of::<AuxArgs>() => 64,
    offset_of!(EventArgs, words) => 0,
    offset_of!(EventArgs, slots) => 112,
    offset_of!(EventArgs, count) => 120,
    offset_of!(EventArgs, tries) => 128,
    offset_of!(EventArgs, offset) => 136,
    offset_of!(EventArgs, strings) => 144,
    ttrace_layouts::aux::AuxPath::LEN_SHIFT => 4,
    ttrace_layouts::aux::AUX_REF => 1 << 63,
    size_of::<Slot>() => 64,
}
