//! Restartable per-CPU writes (Linux rseq): glibc's registration, the table of this
//! process's restartable rings, and the three critical sections, in x86-64 assembly.
//!
//! A section runs with this thread's rseq area pointing at its descriptor; the kernel
//! restarts it at its abort handler if the thread is preempted, migrated or signalled before
//! its one commit store, so all threads of all processes on one CPU run the sections for
//! that CPU's ring one at a time, each to its commit or not at all. What each section
//! stores, in which order, and why a reader never accepts what an aborted one left, is the
//! *restartable protocol* of `docs/DESIGN.md`; its Rust model, over any atomic word, is
//! [`Ring::write_restartable`](devttrace::ring::Ring::write_restartable) and
//! [`Aux::write_restartable`](devttrace::aux::Aux::write_restartable), which the loom
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
use ttrace_layouts::entry::Slot;
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
    _reserved: usize,
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

/// An aux record to write: what [`Restartable::aux_write`] reads through one pointer.
#[repr(C)]
pub struct AuxArgs {
    /// The record's path word, without its CPU (valid).
    pub path: u64,
    /// The header's timestamp word.
    pub timestamp: u64,
    /// The header's context word.
    pub ctx: u64,
    /// Bytes of the whole record (header, payload, padding).
    pub record_bytes: u64,
    /// Whole payload words to copy from `src`.
    pub full_words: u64,
    /// The last payload word, zero-padded (stored if `has_tail`).
    pub tail: u64,
    /// 1 if the payload ends with a partial word.
    pub has_tail: u64,
    /// The payload.
    pub src: *const u8,
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
                aux_mask: map.aux(0).words.len() * 8 - 1,
                _reserved: 0,
            },
        });
        for c in 0..n {
            let (ring, header, aux) = (map.ring(c), map.ring_header(c), map.aux(c));
            table.push(Row {
                ring: TableRing {
                    head: &header.head,
                    slots: ring.slots.as_ptr(),
                    aux_first: &header.aux_first,
                    aux_words: aux.words.as_ptr(),
                },
            });
        }
        Some(Restartable {
            offset: area.offset,
            table: table.into_boxed_slice(),
        })
    }
}

/// The start of a restartable section, as `asm!` template text: the retry point (26),
/// publishing the descriptor (23) in the thread's rseq area, then the section proper (21):
/// `{cpu}` = this CPU, leaving for 25 (fall back) if it has no restartable ring, and
/// `{ring}` = `table + ROW * cpu` (its row is at `{ring} + ROW`).
///
/// Its operands: `{off}` the rseq area's offset, `{table}`, and the constants `{rseq_cs}`
/// and `{cpu_id}` (offsets in the rseq area), `{rings}` (in row 0) and `{row_shift}`.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
macro_rules! section_start {
    () => {
        concat!(
            "26:\n",
            "lea {ring}, [rip + 23f]\n",
            "mov qword ptr fs:[{off} + {rseq_cs}], {ring}\n",
            "21:\n",
            "mov {cpu:e}, dword ptr fs:[{off} + {cpu_id}]\n",
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
/// 26 until `{tries}` runs out), the descriptor (an `RseqCs`: version, flags, start 21,
/// length to the commit's end 22, abort 24), and the fall-back exit (25: `eax` = 0).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
macro_rules! section_end {
    () => {
        concat!(
            ".pushsection __rseq_failure, \"ax\"\n",
            ".byte 0x0f, 0xb9, 0x3d\n",
            ".long 0x53053053\n",
            "24:\n",
            "sub {tries}, 1\n",
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
                // h = head; slot = slots + (h & mask) * 64
                "mov rdx, qword ptr [{ring} + {r_head}]",
                "mov {h}, qword ptr [rdx]",
                "mov {slot}, {h}",
                "and {slot}, qword ptr [{table} + {ring_mask}]",
                "shl {slot}, {slot_shift}",
                "add {slot}, qword ptr [{ring} + {r_slots}]",
                // Invalidate: a claim (CLAIMED | h); the slot's line is only written.
                "mov rdx, {h}",
                "bts rdx, {claimed}",
                "mov qword ptr [{slot}], rdx",
                // floor = the ring's last stamp, made odd, plus one.
                "mov rdx, qword ptr [{ring} + {r_head}]",
                "mov {old}, qword ptr [rdx + {last_stamp}]",
                "or {old}, 1",
                "add {old}, 1",
                // Payload: type word | cpu << CPU_SHIFT | h << POSITION_SHIFT, six words.
                "shl {cpu}, {cpu_shift}",
                "or {cpu}, qword ptr [{w}]",
                "mov rdx, {h}",
                "shl rdx, {position_shift}",
                "or {cpu}, rdx",
                "mov qword ptr [{slot} + 8], {cpu}",
                "mov rdx, qword ptr [{w} + 8]",
                "mov qword ptr [{slot} + 16], rdx",
                "mov rdx, qword ptr [{w} + 16]",
                "mov qword ptr [{slot} + 24], rdx",
                "mov rdx, qword ptr [{w} + 24]",
                "mov qword ptr [{slot} + 32], rdx",
                "mov rdx, qword ptr [{w} + 32]",
                "mov qword ptr [{slot} + 40], rdx",
                "mov rdx, qword ptr [{w} + 40]",
                "mov qword ptr [{slot} + 48], rdx",
                "mov rdx, qword ptr [{w} + 48]",
                "mov qword ptr [{slot} + 56], rdx",
                // Stamp: rdtsc, the claim and continuation bits clear, at least the floor.
                "rdtsc",
                "shl rdx, 32",
                "or rax, rdx",
                "btr rax, {claimed}",
                "and rax, -2",
                "cmp rax, {old}",
                "cmovb rax, {old}",
                "mov qword ptr [{slot}], rax",
                // last_stamp, then the commit: head = h + 1.
                "mov rdx, qword ptr [{ring} + {r_head}]",
                "mov qword ptr [rdx + {last_stamp}], rax",
                "add {h}, 1",
                "mov qword ptr [rdx], {h}",
                "22:",
                "jmp 27f",
                section_end!(),
                off = in(reg) self.offset,
                table = in(reg) self.table.as_ptr(),
                w = in(reg) words.as_ptr(),
                tries = inout(reg) TRIES => _,
                cpu = out(reg) _,
                ring = out(reg) _,
                h = out(reg) _,
                slot = out(reg) _,
                old = out(reg) _,
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
                // h = head; a = slot(h), b = slot(h + 1)
                "mov rdx, qword ptr [{ring} + {r_head}]",
                "mov {h}, qword ptr [rdx]",
                "mov {a}, {h}",
                "and {a}, qword ptr [{table} + {ring_mask}]",
                "shl {a}, {slot_shift}",
                "add {a}, qword ptr [{ring} + {r_slots}]",
                "lea {b}, [{h} + 1]",
                "and {b}, qword ptr [{table} + {ring_mask}]",
                "shl {b}, {slot_shift}",
                "add {b}, qword ptr [{ring} + {r_slots}]",
                // Invalidate both: claims (CLAIMED | h, CLAIMED | h + 1).
                "mov rdx, {h}",
                "bts rdx, {claimed}",
                "mov qword ptr [{a}], rdx",
                "add rdx, 1",
                "mov qword ptr [{b}], rdx",
                // floor = the ring's last stamp, made odd, plus one.
                "mov rdx, qword ptr [{ring} + {r_head}]",
                "mov {old}, qword ptr [rdx + {last_stamp}]",
                "or {old}, 1",
                "add {old}, 1",
                // Payloads; the type word with its CPU and position tag.
                "shl {cpu}, {cpu_shift}",
                "or {cpu}, qword ptr [{w}]",
                "mov rdx, {h}",
                "shl rdx, {position_shift}",
                "or {cpu}, rdx",
                "mov qword ptr [{a} + 8], {cpu}",
                "mov rdx, qword ptr [{w} + 8]",
                "mov qword ptr [{a} + 16], rdx",
                "mov rdx, qword ptr [{w} + 16]",
                "mov qword ptr [{a} + 24], rdx",
                "mov rdx, qword ptr [{w} + 24]",
                "mov qword ptr [{a} + 32], rdx",
                "mov rdx, qword ptr [{w} + 32]",
                "mov qword ptr [{a} + 40], rdx",
                "mov rdx, qword ptr [{w} + 40]",
                "mov qword ptr [{a} + 48], rdx",
                "mov rdx, qword ptr [{w} + 48]",
                "mov qword ptr [{a} + 56], rdx",
                "mov rdx, qword ptr [{w} + 56]",
                "mov qword ptr [{b} + 8], rdx",
                "mov rdx, qword ptr [{w} + 64]",
                "mov qword ptr [{b} + 16], rdx",
                "mov rdx, qword ptr [{w} + 72]",
                "mov qword ptr [{b} + 24], rdx",
                "mov rdx, qword ptr [{w} + 80]",
                "mov qword ptr [{b} + 32], rdx",
                "mov rdx, qword ptr [{w} + 88]",
                "mov qword ptr [{b} + 40], rdx",
                "mov rdx, qword ptr [{w} + 96]",
                "mov qword ptr [{b} + 48], rdx",
                "mov rdx, qword ptr [{w} + 104]",
                "mov qword ptr [{b} + 56], rdx",
                // Stamps: the parent's, then the continuation's (stamp | 1).
                "rdtsc",
                "shl rdx, 32",
                "or rax, rdx",
                "btr rax, {claimed}",
                "and rax, -2",
                "cmp rax, {old}",
                "cmovb rax, {old}",
                "mov qword ptr [{a}], rax",
                "lea rdx, [rax + 1]",
                "mov qword ptr [{b}], rdx",
                // last_stamp, then the commit: head = h + 2.
                "mov rdx, qword ptr [{ring} + {r_head}]",
                "mov qword ptr [rdx + {last_stamp}], rax",
                "add {h}, 2",
                "mov qword ptr [rdx], {h}",
                "22:",
                "jmp 27f",
                section_end!(),
                off = in(reg) self.offset,
                table = in(reg) self.table.as_ptr(),
                w = in(reg) words.as_ptr(),
                tries = inout(reg) TRIES => _,
                cpu = out(reg) _,
                ring = out(reg) _,
                h = out(reg) _,
                a = out(reg) _,
                b = out(reg) _,
                old = out(reg) _,
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
                cpu_shift = const TypeWord::CPU_SHIFT,
                position_shift = const TypeWord::POSITION_SHIFT,
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
        // buffer, and read from `src` within its `full_words` words (the caller's contract).
        unsafe {
            core::arch::asm!(
                section_start!(),
                // start = last, first = first (repaired to start when out of range).
                "mov rdx, qword ptr [{ring} + {r_aux_first}]",
                "mov {start}, qword ptr [rdx + {aux_last}]",
                "mov {first}, qword ptr [rdx]",
                "mov {i}, {first}",
                "cmp {first}, {start}",
                "ja 31f",
                "test {first}, 7",
                "jnz 31f",
                "mov rax, {start}",
                "sub rax, {first}",
                "mov rdx, qword ptr [{table} + {aux_mask}]",
                "add rdx, 1",
                "cmp rax, rdx",
                "jbe 32f",
                "31:",
                "mov {first}, {start}",
                "32:",
                // Advance first while start + record - first > size.
                "33:",
                "mov rax, {start}",
                "add rax, qword ptr [{args} + {a_record_bytes}]",
                "sub rax, {first}",
                "mov rdx, qword ptr [{table} + {aux_mask}]",
                "add rdx, 1",
                "cmp rax, rdx",
                "jbe 34f",
                // The record at first: its length, header included, rounded up to 8.
                "mov rax, {first}",
                "and rax, qword ptr [{table} + {aux_mask}]",
                "mov rdx, qword ptr [{ring} + {r_aux_words}]",
                "mov rax, qword ptr [rdx + rax]",
                "shr rax, {len_shift}",
                "and rax, {len_mask}",
                "add rax, {header_round}",
                "and rax, -8",
                "add {first}, rax",
                "jmp 33b",
                "34:",
                "cmp {i}, {first}",
                "je 35f",
                "mov rdx, qword ptr [{ring} + {r_aux_first}]",
                "mov qword ptr [rdx], {first}",
                "35:",
                // Header at start: path | cpu << CPU_SHIFT, timestamp, context.
                "mov rdx, qword ptr [{ring} + {r_aux_words}]",
                "mov {i}, {start}",
                "and {i}, qword ptr [{table} + {aux_mask}]",
                "shl {cpu}, {path_cpu_shift}",
                "or {cpu}, qword ptr [{args} + {a_path}]",
                "mov qword ptr [rdx + {i}], {cpu}",
                "add {i}, 8",
                "and {i}, qword ptr [{table} + {aux_mask}]",
                "mov rax, qword ptr [{args} + {a_timestamp}]",
                "mov qword ptr [rdx + {i}], rax",
                "add {i}, 8",
                "and {i}, qword ptr [{table} + {aux_mask}]",
                "mov rax, qword ptr [{args} + {a_ctx}]",
                "mov qword ptr [rdx + {i}], rax",
                // Payload words, wrapping at the end of the buffer.
                "mov {first}, qword ptr [{args} + {a_src}]",
                "mov {cpu}, qword ptr [{args} + {a_full_words}]",
                "36:",
                "add {i}, 8",
                "and {i}, qword ptr [{table} + {aux_mask}]",
                "test {cpu}, {cpu}",
                "jz 37f",
                "mov rax, qword ptr [{first}]",
                "mov qword ptr [rdx + {i}], rax",
                "add {first}, 8",
                "sub {cpu}, 1",
                "jmp 36b",
                "37:",
                "cmp qword ptr [{args} + {a_has_tail}], 0",
                "je 38f",
                "mov rax, qword ptr [{args} + {a_tail}]",
                "mov qword ptr [rdx + {i}], rax",
                "38:",
                // Commit: last = start + record bytes.
                "mov rax, {start}",
                "add rax, qword ptr [{args} + {a_record_bytes}]",
                "mov rdx, qword ptr [{ring} + {r_aux_first}]",
                "mov qword ptr [rdx + {aux_last}], rax",
                "22:",
                "mov rax, {ring}",
                "sub rax, {table}",
                "shr rax, {row_shift}",
                "add rax, 1",
                "jmp 27f",
                section_end!(),
                off = in(reg) self.offset,
                table = in(reg) self.table.as_ptr(),
                args = in(reg) args as *const AuxArgs,
                tries = inout(reg) TRIES => _,
                cpu = out(reg) _,
                ring = out(reg) _,
                start = out(reg) start,
                first = out(reg) _,
                i = out(reg) _,
                out("rax") found,
                out("rdx") _,
                rseq_cs = const offset_of!(RseqArea, rseq_cs),
                cpu_id = const offset_of!(RseqArea, cpu_id),
                rings = const offset_of!(TableHead, rings),
                row_shift = const ROW_SHIFT,
                aux_mask = const offset_of!(TableHead, aux_mask),
                r_aux_first = const ROW + offset_of!(TableRing, aux_first),
                r_aux_words = const ROW + offset_of!(TableRing, aux_words),
                aux_last = const AUX_LAST,
                len_shift = const AuxPath::LEN_SHIFT,
                len_mask = const AuxPath::LEN_MASK,
                header_round = const AUX_HEADER_BYTES + 7,
                path_cpu_shift = const AuxPath::CPU_SHIFT,
                a_path = const offset_of!(AuxArgs, path),
                a_timestamp = const offset_of!(AuxArgs, timestamp),
                a_ctx = const offset_of!(AuxArgs, ctx),
                a_record_bytes = const offset_of!(AuxArgs, record_bytes),
                a_full_words = const offset_of!(AuxArgs, full_words),
                a_tail = const offset_of!(AuxArgs, tail),
                a_has_tail = const offset_of!(AuxArgs, has_tail),
                a_src = const offset_of!(AuxArgs, src),
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
    offset_of!(AuxArgs, has_tail) => 48,
    offset_of!(AuxArgs, src) => 56,
    size_of::<Slot>() => 64,
}
