//! A whole device copied at one moment.

use crate::aux::{AuxRecord, AuxSnapshots};
use crate::event::RingSnapshot;
use crate::meta::Metadata;
use crate::status::Status;
use crate::version::Version;
use std::path::PathBuf;
use ttrace_layouts::aux::AuxTag;

/// Every ring, the aux buffer and the metadata of a device.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// Where it was read from.
    pub dir: PathBuf,
    /// The header.
    pub version: Version,
    /// Counters and control words.
    pub status: Status,
    /// Definitions and names.
    pub meta: Metadata,
    /// Whether each tracepoint (by id) was enabled.
    pub enabled: Vec<bool>,
    /// One snapshot per ring.
    pub cpus: Vec<RingSnapshot>,
    /// The aux buffers.
    pub aux: AuxSnapshots,
    /// Why the aux buffer could not be copied, if it could not (strings then show as lost).
    pub aux_error: Option<String>,
    /// The messages (info records) that belong to this snapshot, as `(buffer, offset)`,
    /// sorted: `None` is all those the aux buffers hold; a [`crate::Follower`] lists those it
    /// releases.
    pub messages: Option<Vec<(u32, u64)>>,
}

impl Snapshot {
    /// The free-form messages of this snapshot, in the order they were written.
    pub fn messages(&self) -> impl Iterator<Item = AuxRecord<'_>> + '_ {
        self.aux.records().filter(move |r| {
            r.tag == AuxTag::Info as u16
                && self
                    .messages
                    .as_ref()
                    .is_none_or(|m| m.binary_search(&(r.buffer, r.offset)).is_ok())
        })
    }

    /// Events in all rings.
    pub fn events(&self) -> usize {
        self.cpus.iter().map(|c| c.events.len()).sum()
    }
}
