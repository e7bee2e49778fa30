//! Which thread wrote an event: what pairs are keyed by ([`crate::pairs`]). An event names
//! its writer by id (`pid << 32 | tid`), and the kernel gives a dead thread's id to a later thread; the names area tells the two apart. A
//! thread's name is recorded when it first traces, before any of its events, and the record
//! says whether it names a new thread of the id or renames the one it had (see
//! [`TaskIndex`]). So the thread that wrote an event is its id's latest new-thread
//! record at or before the event's time, exactly: the old thread's events all came before it
//! died, the new thread's record before all of its events.
//!
//! An id the names area has no record of (its name was dropped, or it was written through
//! the library with no name) is one thread; so is an id whose later thread's record was
//! dropped: the reader cannot tell those apart.

use devttrace::meta::{Metadata, TaskIndex};
use foldhash::HashMap as FoldHashMap;
use std::ops::Range;

/// One thread: its id, and which of the threads that had the id it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Thread {
    /// `pid << 32 | tid`.
    pub ctx: u64,
    /// 0 for the first thread the names area has of this id (and for an id it has none of),
    /// one more for each later one.
    pub incarnation: u32,
}

/// Tells the threads that had one id apart, for events looked up mostly in time order.
#[derive(Clone, Debug, Default)]
pub struct Threads {
    index: TaskIndex,
    /// Per id, the thread last found and the times its record holds for: events come in
    /// runs of one thread, so most lookups end here.
    recent: FoldHashMap<u64, (Range<u64>, u32)>,
}

impl Threads {
    /// The threads named in `meta`.
    pub fn new(meta: &Metadata) -> Threads {
        Threads {
            index: TaskIndex::threads(meta),
            recent: FoldHashMap::default(),
        }
    }

    /// The thread with id `ctx` at `timestamp`.
    ///
    /// ```
    /// use devttrace::meta::{Metadata, TaskInfo};
    /// use ttrace_model::incarnation::{Thread, Threads};
    /// let task = |timestamp, name: &str, renamed| TaskInfo {
    ///     pid: 1, tid: 2, timestamp, name: name.into(), renamed, ..Default::default()
    /// };
    /// let meta = Metadata {
    ///     threads: vec![task(100, "old", false), task(200, "new", false), task(300, "renamed", true)],
    ///     ..Default::default()
    /// };
    /// let mut threads = Threads::new(&meta);
    /// let ctx = 1 << 32 | 2;
    /// assert_eq!(threads.of(ctx, 150), Thread { ctx, incarnation: 0 });
    /// assert_eq!(threads.of(ctx, 250), Thread { ctx, incarnation: 1 });
    /// assert_eq!(threads.of(ctx, 350), Thread { ctx, incarnation: 1 });
    /// assert_eq!(threads.of(ctx, 120), Thread { ctx, incarnation: 0 });
    /// assert_eq!(threads.of(7, 120), Thread { ctx: 7, incarnation: 0 });
    /// ```
    pub fn of(&mut self, ctx: u64, timestamp: u64) -> Thread {
        let incarnation = match self.recent.get(&ctx) {
            Some((during, k)) if during.contains(&timestamp) => *k,
            _ => {
                let (during, k) = self
                    .index
                    .at(ctx, timestamp)
                    .map_or((0..u64::MAX, 0), |c| (c.during, c.incarnation));
                self.recent.insert(ctx, (during, k));
                k
            }
        };
        Thread { ctx, incarnation }
    }
}
