//! What the loom models share: an aux record they own, to compare a snapshot's records
//! (which borrow the snapshot's copy) with the writes that made them.

use devttrace::aux::{AuxRecord, AuxSnapshot};

/// An [`AuxRecord`] with its payload owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rec {
    pub buffer: u32,
    pub offset: u64,
    pub tag: u16,
    pub cpu: u32,
    pub timestamp: u64,
    pub ctx: u64,
    pub truncated: bool,
    pub bytes: Vec<u8>,
}

impl From<AuxRecord<'_>> for Rec {
    fn from(r: AuxRecord<'_>) -> Rec {
        Rec {
            buffer: r.buffer,
            offset: r.offset,
            tag: r.tag,
            cpu: r.cpu,
            timestamp: r.timestamp,
            ctx: r.ctx,
            truncated: r.truncated,
            bytes: r.bytes.to_vec(),
        }
    }
}

impl Rec {
    /// Bytes the record takes in the buffer: its 3 header words and its payload, in words.
    pub fn size(&self) -> u64 {
        (24 + self.bytes.len() as u64).div_ceil(8) * 8
    }
}

/// The records of `snap`, owned, oldest first.
pub fn records(snap: &AuxSnapshot) -> Vec<Rec> {
    snap.records().map(Rec::from).collect()
}
