//! What a tracepoint's events mean beyond their [`Kind`]: a native trace point, a `tracing`
//! event, or one step in the life of a `tracing` span instance.
//!
//! A span instance is recorded as its steps, each a tracepoint of its own named after the
//! span's callsite, whose first argument is the instance's id (unique within its process
//! while the instance lives; readers key instances by pid and id):
//!
//! | role             | kind    | arguments                               |
//! |------------------|---------|-----------------------------------------|
//! | [`Role::SpanNew`]    | start | id, parent id (0: a root), the fields   |
//! | [`Role::SpanEnter`]  | entry | id (a poll, or a scope, begins)        |
//! | [`Role::SpanExit`]   | exit  | id                                      |
//! | [`Role::SpanClose`]  | stop  | id (the last handle dropped)           |
//! | [`Role::SpanRecord`] | start | id, fields recorded after creation      |
//! | [`Role::SpanFollows`]| start | id, the id of the span it follows from  |
//!
//! The role travels in the high half of the tracepoint record's `kind` byte; the low half
//! is the kind, as the type word has it.

use crate::entry::Kind;

/// What a tracepoint's events mean.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Role {
    /// A native trace point: its [`Kind`] says it all.
    #[default]
    Point = 0,
    /// A `tracing` event: something happened, at a level.
    Event = 1,
    /// A span instance is created.
    SpanNew = 2,
    /// A span instance is entered (an async span: one poll begins).
    SpanEnter = 3,
    /// A span instance is left.
    SpanExit = 4,
    /// A span instance is closed.
    SpanClose = 5,
    /// Fields recorded into a span instance after its creation.
    SpanRecord = 6,
    /// A span instance follows from another (a causal link, not a parent).
    SpanFollows = 7,
}

impl Role {
    /// Bits of the record's `kind` byte that hold the role.
    pub const SHIFT: u32 = 4;

    /// The role in a tracepoint record's `kind` byte; unknown roles read as
    /// [`Role::Point`].
    ///
    /// ```
    /// use ttrace_layouts::{entry::Kind, role::Role};
    /// let byte = Role::SpanExit.kind_byte(Kind::Exit);
    /// assert_eq!((Role::of_kind_byte(byte), Kind::from_bits(byte as u64)), (Role::SpanExit, Kind::Exit));
    /// assert_eq!(Role::of_kind_byte(Kind::Stop as u8), Role::Point);
    /// ```
    pub const fn of_kind_byte(byte: u8) -> Role {
        match byte >> Self::SHIFT {
            1 => Role::Event,
            2 => Role::SpanNew,
            3 => Role::SpanEnter,
            4 => Role::SpanExit,
            5 => Role::SpanClose,
            6 => Role::SpanRecord,
            7 => Role::SpanFollows,
            _ => Role::Point,
        }
    }

    /// The kind its events are recorded with (a native point's own kind is its own).
    pub const fn kind(self) -> Option<Kind> {
        match self {
            Role::Point => None,
            Role::Event | Role::SpanNew | Role::SpanRecord | Role::SpanFollows => Some(Kind::Start),
            Role::SpanEnter => Some(Kind::Entry),
            Role::SpanExit => Some(Kind::Exit),
            Role::SpanClose => Some(Kind::Stop),
        }
    }

    /// The record's `kind` byte of a tracepoint of this role and `kind`: the kind in the
    /// low half, the role in the high half.
    pub const fn kind_byte(self, kind: Kind) -> u8 {
        kind as u8 | (self as u8) << Self::SHIFT
    }

    /// Whether its events are steps of a span instance (their first argument its id).
    pub const fn is_span(self) -> bool {
        !matches!(self, Role::Point | Role::Event)
    }

    /// How readers label its events: `event`, `new`, `enter`, `exit`, `close`, `record`,
    /// `follows`; `None` for a native point (its kind's name is used).
    pub const fn label(self) -> Option<&'static str> {
        match self {
            Role::Point => None,
            Role::Event => Some("event"),
            Role::SpanNew => Some("new"),
            Role::SpanEnter => Some("enter"),
            Role::SpanExit => Some("exit"),
            Role::SpanClose => Some("close"),
            Role::SpanRecord => Some("record"),
            Role::SpanFollows => Some("follows"),
        }
    }
}
