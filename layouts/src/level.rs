//! `tracing`'s levels as class bits: a tracepoint made from a `tracing` callsite has the
//! class bit of its level, so the device's type mask turns levels on and off
//! (`ttrace-reader ctl level info`, `ctl disable DEBUG`) and readers show the level.

/// A `tracing` level, from the most severe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Level {
    /// `ERROR`, class bit 8.
    Error = 0,
    /// `WARN`, class bit 9.
    Warn = 1,
    /// `INFO`, class bit 10.
    Info = 2,
    /// `DEBUG`, class bit 11.
    Debug = 3,
    /// `TRACE`, class bit 12.
    Trace = 4,
}

impl Level {
    /// Every level, the most severe first.
    pub const ALL: [Level; 5] = [
        Level::Error,
        Level::Warn,
        Level::Info,
        Level::Debug,
        Level::Trace,
    ];

    /// The lowest level class bit.
    pub const FIRST_BIT: u32 = 8;

    /// Every level's class bit.
    pub const MASK: u64 = 0x1f << Self::FIRST_BIT;

    /// Its class bit.
    pub const fn class(self) -> u64 {
        1 << (Self::FIRST_BIT + self as u32)
    }

    /// The class bits of this level and every more severe one: what `ctl level` keeps.
    ///
    /// ```
    /// use ttrace_layouts::level::Level;
    /// assert_eq!(Level::Info.and_above(), Level::Error.class() | Level::Warn.class() | Level::Info.class());
    /// ```
    pub const fn and_above(self) -> u64 {
        (self.class() << 1) - Level::Error.class()
    }

    /// The level of a tracepoint with `classes`: the one level bit it has (none, or more
    /// than one: not a `tracing` callsite's).
    ///
    /// ```
    /// use ttrace_layouts::level::Level;
    /// assert_eq!(Level::of_classes(Level::Debug.class()), Some(Level::Debug));
    /// assert_eq!(Level::of_classes(1), None);
    /// ```
    pub const fn of_classes(classes: u64) -> Option<Level> {
        let bits = classes & Self::MASK;
        if bits.count_ones() != 1 {
            return None;
        }
        Some(Level::ALL[(bits.trailing_zeros() - Self::FIRST_BIT) as usize])
    }

    /// Its name, as `tracing` writes it: `ERROR` .. `TRACE`.
    pub const fn name(self) -> &'static str {
        match self {
            Level::Error => "ERROR",
            Level::Warn => "WARN",
            Level::Info => "INFO",
            Level::Debug => "DEBUG",
            Level::Trace => "TRACE",
        }
    }

    /// The level named `name`, in any case.
    ///
    /// ```
    /// use ttrace_layouts::level::Level;
    /// assert_eq!(Level::named("debug"), Some(Level::Debug));
    /// assert_eq!(Level::named("verbose"), None);
    /// ```
    pub fn named(name: &str) -> Option<Level> {
        Level::ALL
            .into_iter()
            .find(|l| l.name().eq_ignore_ascii_case(name))
    }
}
