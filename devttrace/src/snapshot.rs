//! A whole device copied at one moment.

use crate::aux::AuxSnapshots;
use crate::event::RingSnapshot;
use crate::meta::Metadata;
use crate::status::Status;
use crate::version::Version;
use std::path::PathBuf;

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
}

impl Snapshot {
    /// Events in all rings.
    pub fn events(&self) -> usize {
        self.cpus.iter().map(|c| c.events.len()).sum()
    }
}
