//! An event and its strings in one restartable section: the model, as Rust code over any
//! atomic word, of the writer front end's combined section
//! (`ttrace_core::rseq::Restartable::write_event`).
//!
//! The section writes each string's aux record ([`AuxWriter::write_restartable`]'s stores, the
//! record's `last` its own little commit), puts the record's [`aux_ref`] in the argument
//! word that names it, then writes the entry ([`RingWriter::write_restartable`]'s stores), whose
//! `head` is the section's commit. The CPU runs one section at a time, so nothing of
//! another writer falls between the records and their entry.
//!
//! Why a reader never accepts a wrong string: a record is whole before its `last` is
//! published (Release), and the entry that refers to it is published after it (its stamp
//! and `head`, Release, later in program order), so a reader that acquires the entry and
//! then the buffer's `last` finds the record whole, or gone (overwritten: the offset is
//! below `first`, and the string shows as lost). A section stopped after a record's `last`
//! and before `head` leaves a whole record that no entry names: space, not a wrong string;
//! its retry writes the record again after it.

use crate::aux::AuxWriter;
use crate::ring::{RingWriter, SlotWords};
use ttrace_layouts::aux::{aux_ref, AuxPath};
use ttrace_layouts::entry::SLOT_WORDS;

/// A string argument of an event: the index of its word in the event's words (the parent's
/// seven, then the continuation's), the path of its record (valid, its CPU included), and
/// its bytes (at most the path's length).
#[derive(Clone, Copy, Debug)]
pub struct StringArg<'b> {
    /// Index of the argument's word among the event's 14 words (2..7 in the parent, 7..14
    /// in the continuation).
    pub word: usize,
    /// The record's path word.
    pub path: AuxPath,
    /// The payload.
    pub bytes: &'b [u8],
}

/// Writes `strings` into `aux` (buffer number `buffer` of the device) and then the event
/// `words` (one entry, or with `continued` a parent and its continuation) into `ring`, as
/// the combined section does: the same stores in the same order. Each string's argument
/// word in `words` is set to its record's reference. Only `steps` stores are made (a
/// section preempted or killed inside), so `usize::MAX` is a whole write; returns the
/// entry's stamp once the commit (`head`) is made. The caller is the only writer of the ring
/// and the buffer while it runs.
#[allow(clippy::too_many_arguments)]
pub fn write_event<S: SlotWords>(
    ring: &RingWriter<'_, S>,
    last_stamp: &S::Word,
    aux: &AuxWriter<'_, S::Word>,
    buffer: usize,
    timestamp: u64,
    words: &mut [u64; 2 * (SLOT_WORDS - 1)],
    continued: bool,
    strings: &[StringArg<'_>],
    steps: usize,
) -> Option<u64> {
    let mut step = crate::sync::steps(steps);
    for s in strings {
        let start = aux.write_restartable_steps(s.path, 0, words[1], s.bytes, &mut step)?;
        words[s.word] = aux_ref(buffer, start);
    }
    let (parent, cont) = words.split_at(SLOT_WORDS - 1);
    let parent: &[u64; SLOT_WORDS - 1] = parent.try_into().expect("seven words");
    let cont: &[u64; SLOT_WORDS - 1] = cont.try_into().expect("seven words");
    ring.write_restartable_steps(
        last_stamp,
        timestamp,
        parent,
        continued.then_some(cont),
        &mut step,
    )
}
