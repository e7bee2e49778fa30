//! Restartable per-CPU writes (Linux rseq): a trace entry, or an aux record, written into
//! the restartable ring (or aux buffer) of the CPU the thread runs on with plain loads and
//! stores, no locked instruction.
//!
//! glibc (2.35 and later) registers an rseq area for every thread. A thread that stores the
//! address of a *critical-section descriptor* into the area's `rseq_cs` field before running
//! the section's instructions is restarted at the descriptor's abort address if the kernel
//! preempts it, migrates it or delivers it a signal while its instruction pointer is between
//! the section's start and its commit; the commit is the section's last instruction, one
//! store. So among all threads of all processes running on one CPU, at most one is inside a
//! section for that CPU's ring at any time, and a section either reaches its commit store or
//! never happened, as far as the commit word is concerned. (A thread killed inside a section
//! leaves it like an aborted one.)
//!
//! **Ring write** ([`write`]), for ring `c = cpu_id` read inside the section:
//!
//! 1. `h = head`; the slot of position `h` (and `h + 1` for a continued event);
//! 2. each slot's stamp becomes a claim, `CLAIMED | position` (a reader rejects it);
//! 3. the payload words: the type word with the CPU and the position tag (`h`'s low 28
//!    bits), the context, the arguments;
//! 4. `rdtsc`, raised above the ring's `last_stamp` (`Stamp::next_after`), so stamps
//!    strictly increase along the ring without reading the slot's old line; the parent's
//!    stamp, then the continuation's; `last_stamp`;
//! 5. commit: `head = h + 1` (or `h + 2`).
//!
//! An aborted section leaves `head` unchanged, so the next writer on that CPU takes the same
//! position and writes the same slots again. What the aborted one stored is in the slots of
//! positions `h - ring_slots` (and the next): a reader expects there the entry of that older
//! position, and rejects one tagged `h` (see [`crate::ring`]). [`crate::ring::Ring::write_restartable`] is this
//! sequence as Rust code over any atomic word, step by step, which the loom models check; the
//! assembly below stores the same words in the same order (a test compares the two).
//!
//! **Aux write** ([`aux_write`]), for the aux buffer of ring `c`:
//!
//! 1. `start = last`, `first` (repaired to `start` if out of range);
//! 2. while the new record would reach past `first + size`: `first` += the length of the
//!    record at `first`; store `first` if it moved (readers drop what is below it);
//! 3. the header (valid at once: nobody reads beyond `last`) and the payload;
//! 4. commit: `last = start + record bytes`.
//!
//! A record is never seen half-written, so the aux buffers of restartable rings hold no
//! invalid records and never wait for a writer. An aborted section may have moved `first`
//! (dropping old records a little early) and written beyond `last` (invisible).
//!
//! x86-64 orders stores with stores and loads with loads, so the stores of a section reach
//! other CPUs in program order, as the Release fences of the models require; the section is
//! one `asm!` block, which the compiler treats as reading and writing all memory.
//!
//! A section is retried [`TRIES`] times; then (a debugger single-stepping it aborts it every
//! time), or on a CPU without a restartable ring, the caller falls back to the shared ring.

#[cfg(all(target_arch = "x86_64", target_os = "linux", not(loom)))]
pub use imp::*;

/// Times a section is tried before the caller falls back to the shared ring.
pub const TRIES: u64 = 16;

/// Words of the table the sections read: a header, then one entry per restartable ring.
pub const TABLE_ENTRY_WORDS: usize = 4;

/// The table the sections find their ring in: entry 0 is `[rings, ring_mask, aux_mask, 0]`,
/// entry `1 + c` is ring `c`'s `[&head, &slots[0], &aux_first, &aux_words[0]]` (`last_stamp`
/// is the word after `head`, `aux_last` the word after `aux_first`).
pub type Table = Box<[[usize; TABLE_ENTRY_WORDS]]>;

/// An aux record to write: what [`aux_write`] reads through one pointer.
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

/// The start of a restartable section, as `asm!` template text: the retry point (26),
/// publishing the descriptor (23) in the thread's rseq area, then the section proper (21):
/// `{cpu}` = this CPU, leaving for 25 (fall back) if it has no restartable ring, and
/// `{ring}` = `table + 32 * cpu` (its entry is at `{ring} + 32`).
#[cfg(all(target_arch = "x86_64", target_os = "linux", not(loom)))]
macro_rules! section_start {
    () => {
        concat!(
            "26:\n",
            "lea {ring}, [rip + 23f]\n",
            "mov qword ptr fs:[{off} + 8], {ring}\n",
            "21:\n",
            "mov {cpu:e}, dword ptr fs:[{off} + 4]\n",
            "cmp {cpu}, qword ptr [{table}]\n",
            "jae 25f\n",
            "mov {ring}, {cpu}\n",
            "shl {ring}, 5\n",
            "add {ring}, {table}\n",
        )
    };
}

/// The end of a restartable section, after its commit (22) and whatever follows it, which
/// must jump to 27: the abort handler (24, behind the signature glibc registered: retry at
/// 26 until `{tries}` runs out), the descriptor (version, flags, start 21, length to the
/// commit's end 22, abort 24), and the fall-back exit (25: `eax` = 0).
#[cfg(all(target_arch = "x86_64", target_os = "linux", not(loom)))]
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

#[cfg(all(target_arch = "x86_64", target_os = "linux", not(loom)))]
mod imp {
    use super::{AuxArgs, TRIES};
    use core::arch::asm;

    /// Writes one entry (`words`: type word without CPU, context, 5 arguments) into the
    /// restartable ring of the calling thread's CPU. Returns the committed stamp, or 0 if
    /// the caller must use the shared ring (no restartable ring for this CPU, or [`TRIES`]
    /// aborted attempts).
    ///
    /// # Safety
    ///
    /// `rseq_offset` is glibc's registered rseq area offset (`__rseq_offset`, registration
    /// checked); `table` is a [`super::Table`] whose pointers refer to the live mappings of
    /// one device, and only restartable sections write its restartable rings.
    #[inline(always)]
    pub unsafe fn write(rseq_offset: i64, table: *const usize, words: &[u64; 7]) -> u64 {
        let stamp: u64;
        // SAFETY: the caller's contract: every address formed below is inside the device's
        // mappings (the CPU index is checked against the table's ring count, positions are
        // masked by the ring mask); `fs:[rseq_offset]` is this thread's rseq area.
        unsafe {
            asm!(
                section_start!(),
                // h = head; slot = slots + (h & mask) * 64
                "mov rdx, qword ptr [{ring} + 32]",
                "mov {h}, qword ptr [rdx]",
                "mov {slot}, {h}",
                "and {slot}, qword ptr [{table} + 8]",
                "shl {slot}, 6",
                "add {slot}, qword ptr [{ring} + 40]",
                // Invalidate: a claim (CLAIMED | h); the slot's line is only written.
                "mov rdx, {h}",
                "bts rdx, 63",
                "mov qword ptr [{slot}], rdx",
                // floor = the ring's last stamp, made odd, plus one.
                "mov rdx, qword ptr [{ring} + 32]",
                "mov {old}, qword ptr [rdx + 8]",
                "or {old}, 1",
                "add {old}, 1",
                // Payload: type word | cpu << 8 | h << 36 (the position tag), six words.
                "shl {cpu}, 8",
                "or {cpu}, qword ptr [{w}]",
                "mov rdx, {h}",
                "shl rdx, 36",
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
                // Stamp: rdtsc, bits 0 and 63 clear, at least the floor.
                "rdtsc",
                "shl rdx, 32",
                "or rax, rdx",
                "btr rax, 63",
                "and rax, -2",
                "cmp rax, {old}",
                "cmovb rax, {old}",
                "mov qword ptr [{slot}], rax",
                // last_stamp, then the commit: head = h + 1.
                "mov rdx, qword ptr [{ring} + 32]",
                "mov qword ptr [rdx + 8], rax",
                "add {h}, 1",
                "mov qword ptr [rdx], {h}",
                "22:",
                "jmp 27f",
                section_end!(),
                off = in(reg) rseq_offset,
                table = in(reg) table,
                w = in(reg) words.as_ptr(),
                tries = inout(reg) TRIES => _,
                cpu = out(reg) _,
                ring = out(reg) _,
                h = out(reg) _,
                slot = out(reg) _,
                old = out(reg) _,
                out("rax") stamp,
                out("rdx") _,
                options(nostack),
            );
        }
        stamp
    }

    /// Writes a parent entry and its continuation (`words[..7]` and `words[7..]`, the type
    /// word without CPU first) into two consecutive slots of the restartable ring of the
    /// calling thread's CPU. Returns the parent's stamp, or 0 as [`write`].
    ///
    /// # Safety
    ///
    /// As [`write`].
    #[inline(always)]
    pub unsafe fn write_pair(rseq_offset: i64, table: *const usize, words: &[u64; 14]) -> u64 {
        let stamp: u64;
        // SAFETY: as in `write`.
        unsafe {
            asm!(
                section_start!(),
                // h = head; a = slot(h), b = slot(h + 1)
                "mov rdx, qword ptr [{ring} + 32]",
                "mov {h}, qword ptr [rdx]",
                "mov {a}, {h}",
                "and {a}, qword ptr [{table} + 8]",
                "shl {a}, 6",
                "add {a}, qword ptr [{ring} + 40]",
                "lea {b}, [{h} + 1]",
                "and {b}, qword ptr [{table} + 8]",
                "shl {b}, 6",
                "add {b}, qword ptr [{ring} + 40]",
                // Invalidate both: claims (CLAIMED | h, CLAIMED | h + 1).
                "mov rdx, {h}",
                "bts rdx, 63",
                "mov qword ptr [{a}], rdx",
                "add rdx, 1",
                "mov qword ptr [{b}], rdx",
                // floor = the ring's last stamp, made odd, plus one.
                "mov rdx, qword ptr [{ring} + 32]",
                "mov {old}, qword ptr [rdx + 8]",
                "or {old}, 1",
                "add {old}, 1",
                // Payloads; the type word with its CPU and position tag.
                "shl {cpu}, 8",
                "or {cpu}, qword ptr [{w}]",
                "mov rdx, {h}",
                "shl rdx, 36",
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
                "btr rax, 63",
                "and rax, -2",
                "cmp rax, {old}",
                "cmovb rax, {old}",
                "mov qword ptr [{a}], rax",
                "lea rdx, [rax + 1]",
                "mov qword ptr [{b}], rdx",
                // last_stamp, then the commit: head = h + 2.
                "mov rdx, qword ptr [{ring} + 32]",
                "mov qword ptr [rdx + 8], rax",
                "add {h}, 2",
                "mov qword ptr [rdx], {h}",
                "22:",
                "jmp 27f",
                section_end!(),
                off = in(reg) rseq_offset,
                table = in(reg) table,
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
                options(nostack),
            );
        }
        stamp
    }

    /// Writes the aux record `args` into the aux buffer of the calling thread's CPU's
    /// restartable ring. Returns `(cpu + 1, offset)` of the record, or `(0, _)` if the caller
    /// must use the shared ring's buffer.
    ///
    /// # Safety
    ///
    /// As [`write`]; `args.src` points to `args.full_words * 8` readable bytes, and
    /// `args.record_bytes` is at most the buffer's size.
    #[inline(always)]
    pub unsafe fn aux_write(rseq_offset: i64, table: *const usize, args: &AuxArgs) -> (u64, u64) {
        let found: u64;
        let start: u64;
        // SAFETY: as in `write`; the payload words are stored at masked offsets of the
        // buffer, and read from `src` within its `full_words` words.
        unsafe {
            asm!(
                section_start!(),
                // start = last, first = first (repaired to start when out of range).
                "mov rdx, qword ptr [{ring} + 48]",
                "mov {start}, qword ptr [rdx + 8]",
                "mov {first}, qword ptr [rdx]",
                "mov {i}, {first}",
                "cmp {first}, {start}",
                "ja 31f",
                "test {first}, 7",
                "jnz 31f",
                "mov rax, {start}",
                "sub rax, {first}",
                "mov rdx, qword ptr [{table} + 16]",
                "add rdx, 1",
                "cmp rax, rdx",
                "jbe 32f",
                "31:",
                "mov {first}, {start}",
                "32:",
                // Advance first while start + record - first > size.
                "33:",
                "mov rax, {start}",
                "add rax, qword ptr [{args} + 24]",
                "sub rax, {first}",
                "mov rdx, qword ptr [{table} + 16]",
                "add rdx, 1",
                "cmp rax, rdx",
                "jbe 34f",
                "mov rax, {first}",
                "and rax, qword ptr [{table} + 16]",
                "mov rdx, qword ptr [{ring} + 56]",
                "mov rax, qword ptr [rdx + rax]",
                "shr rax, 4",
                "and rax, 0xfff",
                "add rax, 31",
                "and rax, -8",
                "add {first}, rax",
                "jmp 33b",
                "34:",
                "cmp {i}, {first}",
                "je 35f",
                "mov rdx, qword ptr [{ring} + 48]",
                "mov qword ptr [rdx], {first}",
                "35:",
                // Header at start: path | cpu << 16, timestamp, context.
                "mov rdx, qword ptr [{ring} + 56]",
                "mov {i}, {start}",
                "and {i}, qword ptr [{table} + 16]",
                "shl {cpu}, 16",
                "or {cpu}, qword ptr [{args}]",
                "mov qword ptr [rdx + {i}], {cpu}",
                "add {i}, 8",
                "and {i}, qword ptr [{table} + 16]",
                "mov rax, qword ptr [{args} + 8]",
                "mov qword ptr [rdx + {i}], rax",
                "add {i}, 8",
                "and {i}, qword ptr [{table} + 16]",
                "mov rax, qword ptr [{args} + 16]",
                "mov qword ptr [rdx + {i}], rax",
                // Payload words, wrapping at the end of the buffer.
                "mov {first}, qword ptr [{args} + 56]",
                "mov {cpu}, qword ptr [{args} + 32]",
                "36:",
                "add {i}, 8",
                "and {i}, qword ptr [{table} + 16]",
                "test {cpu}, {cpu}",
                "jz 37f",
                "mov rax, qword ptr [{first}]",
                "mov qword ptr [rdx + {i}], rax",
                "add {first}, 8",
                "sub {cpu}, 1",
                "jmp 36b",
                "37:",
                "cmp qword ptr [{args} + 48], 0",
                "je 38f",
                "mov rax, qword ptr [{args} + 40]",
                "mov qword ptr [rdx + {i}], rax",
                "38:",
                // Commit: last = start + record bytes.
                "mov rax, {start}",
                "add rax, qword ptr [{args} + 24]",
                "mov rdx, qword ptr [{ring} + 48]",
                "mov qword ptr [rdx + 8], rax",
                "22:",
                "mov rax, {ring}",
                "sub rax, {table}",
                "shr rax, 5",
                "add rax, 1",
                "jmp 27f",
                section_end!(),
                off = in(reg) rseq_offset,
                table = in(reg) table,
                args = in(reg) args as *const AuxArgs,
                tries = inout(reg) TRIES => _,
                cpu = out(reg) _,
                ring = out(reg) _,
                start = out(reg) start,
                first = out(reg) _,
                i = out(reg) _,
                out("rax") found,
                out("rdx") _,
                options(nostack),
            );
        }
        (found, start)
    }
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use crate::aux::HeapAux;
    use crate::ring::HeapRing;
    use crate::{Config, Device, Kind};
    use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use ttrace_layouts::aux::{aux_ref_parts, AuxPath, AuxTag};
    use ttrace_layouts::entry::TypeWord;

    fn pin(cpu: usize) {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_setaffinity only reads it.
        unsafe {
            let mut set: libc::cpu_set_t = core::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            assert_eq!(
                libc::sched_setaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &set),
                0
            );
        }
    }

    fn words(ring: &crate::ring::Ring<'_, impl crate::ring::SlotWords>) -> Vec<u64> {
        use crate::sync::AtomicWord;
        ring.slots
            .iter()
            .flat_map(|s| s.words().iter().map(|w| w.load(Relaxed)))
            .collect()
    }

    /// The assembly stores what the Rust model of the same sequence stores: every word of
    /// every slot, the head and the last stamp after entries and continued entries that wrap
    /// a small ring, and every word of the aux buffer after records that wrap it. (Where
    /// this process has no rseq registration, the writes must go to the shared rings.)
    #[test]
    fn the_assembly_stores_what_the_model_stores() {
        let tmp = tempfile::tempdir().unwrap();
        let dev = Device::open(&Config {
            ring_slots: 16,
            aux_bytes: 1 << 14,
            cpus: Some(crate::device::configured_cpus()),
            calibration: std::time::Duration::from_millis(2),
            ..Config::at(tmp.path().join("dev"))
        })
        .unwrap();
        pin(0);
        let ring = if dev.restartable() {
            0
        } else {
            dev.shared_ring_index(0)
        };
        let model = HeapRing::<AtomicU64>::new(16);
        let last = AtomicU64::new(0);
        let ctx = 5 << 32 | 6;
        for i in 0..40u64 {
            let nargs = if i % 3 == 0 { 12 } else { 5 };
            let word = TypeWord::new(Kind::Start, nargs, 3).0;
            let args: [u64; 12] = core::array::from_fn(|k| i * 100 + k as u64);
            if nargs == 12 {
                assert!(dev.emit(word, ctx, &args));
            } else {
                assert!(dev.emit(word, ctx, &<[u64; 5]>::try_from(&args[..5]).unwrap()));
            }
            if !dev.restartable() {
                continue;
            }
            let stamp = dev.ring(ring).slots[(model.head.load(Relaxed) & 15) as usize].words[0]
                .load(Relaxed);
            let mut parent = [0u64; 7];
            parent[0] = TypeWord(word).with_cpu(0).0;
            parent[1] = ctx;
            parent[2..].copy_from_slice(&args[..5]);
            let cont: [u64; 7] = args[5..].try_into().unwrap();
            let cont = (nargs == 12).then_some(&cont);
            let m = model.ring();
            assert_eq!(
                m.write_restartable(&last, stamp, &parent, cont, usize::MAX),
                Some(stamp)
            );
            assert_eq!(words(&dev.ring(ring)), words(&model.ring()), "entry {i}");
            assert_eq!(dev.ring(ring).head.load(Relaxed), model.head.load(Relaxed));
            assert_eq!(
                dev.ring_header(ring).last_stamp.load(Relaxed),
                last.load(Relaxed)
            );
        }
        let events: usize = (0..dev.num_rings())
            .map(|r| dev.ring(r).snapshot().events.len())
            .sum();
        assert_eq!(
            events,
            16 - 4,
            "the last 16 slots hold 12 events (4 continued)"
        );
        // Aux records of every length class, wrapping the 16 KiB buffer several times.
        let aux = HeapAux::<AtomicU64>::new(1 << 11);
        for i in 0..300u64 {
            let bytes: Vec<u8> = (0..(i * 37 % 300)).map(|k| (k + i) as u8).collect();
            let w = dev.aux_write(AuxTag::String, ctx, &bytes).unwrap();
            let (buffer, offset) = aux_ref_parts(w).unwrap();
            assert_eq!(buffer, ring);
            if !dev.restartable() {
                continue;
            }
            let path = AuxPath::new(AuxTag::String, 0, bytes.len() as u64, false);
            let start = aux
                .aux()
                .write_restartable(path, 0, ctx, &bytes, usize::MAX);
            assert_eq!(start, Some(offset));
            let a = dev.aux(ring);
            let got: Vec<u64> = a.words.iter().map(|w| w.load(Relaxed)).collect();
            let want: Vec<u64> = aux.words.iter().map(|w| w.load(Relaxed)).collect();
            assert_eq!(got, want, "record {i}");
            assert_eq!(
                (a.first.load(Relaxed), a.last.load(Relaxed)),
                (aux.first.load(Relaxed), aux.last.load(Relaxed))
            );
        }
    }
}
