//! One ttrace tracepoint per `tracing` callsite (one per argument-type signature, really: a
//! field seen once as an integer and once as a string gets a second tracepoint of the same
//! name), found from the callsite's metadata without a lock.

use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::Mutex;
use tracing_core::{Level, Metadata};
use ttrace_core::Definition;
use ttrace_core::{Kind, Writer};

/// Argument words an event can carry.
pub(crate) const MAX_ARGS: usize = 12;

/// How a field's value is stored in its argument word, and shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Ty {
    /// Not recorded (an `Empty` field): shown as a lost string.
    Absent = 0,
    /// `u64`: decimal.
    U = 1,
    /// `i64`: signed decimal.
    I = 2,
    /// `f64`: its bits.
    F = 3,
    /// `bool`: 0 or 1.
    B = 4,
    /// A string in the aux buffer (`&str`, or a `Debug` value formatted).
    S = 5,
}

impl Ty {
    fn spec(self) -> &'static str {
        match self {
            Ty::U => "",
            Ty::I => ":d",
            Ty::F => ":f",
            Ty::B => ":b",
            Ty::S | Ty::Absent => ":s",
        }
    }
}

/// The signature of a list of types: 3 bits each.
pub(crate) fn signature(tys: &[Ty]) -> u64 {
    tys.iter()
        .enumerate()
        .fold(0, |s, (i, &t)| s | (t as u64) << (3 * i))
}

/// The class bit of each level, so that `ttrace-reader ctl setbits`/`clrbits` switch levels.
pub const fn level_class(level: &Level) -> u64 {
    match *level {
        Level::ERROR => crate::CLASS_ERROR,
        Level::WARN => crate::CLASS_WARN,
        Level::INFO => crate::CLASS_INFO,
        Level::DEBUG => crate::CLASS_DEBUG,
        Level::TRACE => crate::CLASS_TRACE,
    }
}

/// What the layer knows of one callsite.
pub(crate) struct Callsite {
    /// The tracepoint name: `target::name`, or `target::file:line` for an event that has
    /// no name of its own.
    name: &'static str,
    classes: u64,
    span: bool,
    /// The argument names: the callsite's fields, or its first 11 and `dropped_fields`
    /// when it has more than 12.
    args: Vec<&'static str>,
    /// Fields with a word of their own (`args.len()`, less `dropped_fields`).
    pub(crate) slots: usize,
    /// Whether the last argument counts the fields beyond the others.
    pub(crate) overflow: bool,
    /// The first signature registered (`u64::MAX`: none yet) and its shared word.
    first_sig: AtomicU64,
    first_word: AtomicPtr<AtomicU64>,
    /// Further signatures, rare.
    others: Mutex<Vec<(u64, &'static AtomicU64)>>,
    /// Spans: the shared word of the exit tracepoint.
    exit_word: AtomicPtr<AtomicU64>,
}

/// The word of a tracepoint that could not be registered: never enabled.
static NEVER: AtomicU64 = AtomicU64::new(0);

impl Callsite {
    fn new(meta: &'static Metadata<'static>) -> Callsite {
        let clean = |s: &str| -> String {
            s.chars()
                .map(|c| if c.is_whitespace() { '_' } else { c })
                .collect()
        };
        let name = match (
            meta.is_event(),
            meta.name().starts_with("event "),
            meta.file(),
        ) {
            (true, true, Some(file)) => {
                format!("{}::{}:{}", meta.target(), file, meta.line().unwrap_or(0))
            }
            _ => format!("{}::{}", meta.target(), meta.name()),
        };
        let fields: Vec<&'static str> = meta.fields().iter().map(|f| f.name()).collect();
        let overflow = fields.len() > MAX_ARGS;
        let slots = if overflow { MAX_ARGS - 1 } else { fields.len() };
        let mut args = fields[..slots].to_vec();
        if overflow {
            args.push("dropped_fields");
        }
        Callsite {
            name: Box::leak(clean(&name).into_boxed_str()),
            classes: level_class(meta.level()),
            span: meta.is_span(),
            args,
            slots,
            overflow,
            first_sig: AtomicU64::new(u64::MAX),
            first_word: AtomicPtr::new(core::ptr::null_mut()),
            others: Mutex::new(Vec::new()),
            exit_word: AtomicPtr::new(core::ptr::null_mut()),
        }
    }

    /// The number of argument words its events carry.
    pub(crate) fn nargs(&self) -> usize {
        self.args.len()
    }

    /// Whether its tracepoints record now (`ctl` may change it at any time), as far as a
    /// signature was registered; `true` before the first.
    #[inline]
    pub(crate) fn enabled(&self) -> bool {
        // Acquire: pairs with the Release store in `word_slow`: the pointer is to a live
        // shared word.
        let w = self.first_word.load(Acquire);
        // SAFETY: a non-null pointer is to a shared word of the 'static device, or to NEVER.
        w.is_null() || unsafe { &*w }.load(Relaxed) != 0
    }

    /// The word to record an event (span entry) of signature `sig` with: its type word if
    /// enabled, else 0. Registers the signature's tracepoint the first time.
    #[inline]
    pub(crate) fn word(&self, dev: &'static Writer, sig: u64, tys: &[Ty]) -> u64 {
        // Relaxed: `first_word` is published after `first_sig` and read with Acquire.
        if self.first_sig.load(Relaxed) == sig {
            let w = self.first_word.load(Acquire);
            if !w.is_null() {
                // SAFETY: as in `enabled`. Relaxed: the word is self-contained.
                return unsafe { &*w }.load(Relaxed);
            }
        }
        self.word_slow(dev, sig, tys)
    }

    #[cold]
    fn word_slow(&self, dev: &'static Writer, sig: u64, tys: &[Ty]) -> u64 {
        let mut others = self.others.lock().unwrap_or_else(|e| e.into_inner());
        let found = if self.first_sig.load(Relaxed) == sig {
            // SAFETY: as in `enabled`; set under this lock before `first_sig`'s readers
            // could match (we hold the lock that registered it).
            Some(unsafe { &*self.first_word.load(Acquire) })
        } else {
            others.iter().find(|(s, _)| *s == sig).map(|(_, w)| *w)
        };
        let word = match found {
            Some(w) => w,
            None => {
                let format: String = self
                    .args
                    .iter()
                    .zip(tys)
                    .map(|(a, t)| format!("{a}={{{a}{}}}", t.spec()))
                    .collect::<Vec<_>>()
                    .join(" ");
                let kind = if self.span { Kind::Entry } else { Kind::Start };
                let w = register(dev, self.name, kind, self.classes, format, self.nargs());
                if self.first_word.load(Relaxed).is_null() {
                    self.first_sig.store(sig, Relaxed);
                    // Release: the word is registered before a reader uses the pointer.
                    self.first_word
                        .store(w as *const AtomicU64 as *mut AtomicU64, Release);
                } else {
                    others.push((sig, w));
                }
                w
            }
        };
        // Relaxed: the word is self-contained.
        word.load(Relaxed)
    }

    /// The word of the span's exit tracepoint (registered the first time).
    #[inline]
    pub(crate) fn exit_word(&self, dev: &'static Writer) -> u64 {
        // Acquire: as in `enabled`.
        let mut w = self.exit_word.load(Acquire);
        if w.is_null() {
            let word = register(dev, self.name, Kind::Exit, self.classes, String::new(), 0);
            w = word as *const AtomicU64 as *mut AtomicU64;
            // Release: as in `word_slow`; two threads racing register the same definition,
            // which the device gives one id and one word.
            self.exit_word.store(w, Release);
        }
        // SAFETY: as in `enabled`. Relaxed: the word is self-contained.
        unsafe { &*w }.load(Relaxed)
    }
}

/// Registers a tracepoint (names and formats are leaked: one per callsite and signature) and
/// returns its shared word, or a word that is never enabled if the device refuses it.
fn register(
    dev: &'static Writer,
    name: &'static str,
    kind: Kind,
    classes: u64,
    format: String,
    nargs: usize,
) -> &'static AtomicU64 {
    let def = Definition {
        name,
        kind,
        classes,
        format: Box::leak(format.into_boxed_str()),
        nargs: nargs as u8,
        types: &[],
        tables: &[],
    };
    match dev.register_tracepoint(&def) {
        Ok((id, _)) => dev.tracepoint_word(id),
        Err(e) => {
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| eprintln!("ttrace-tracing: {name} not recorded: {e}"));
            &NEVER
        }
    }
}

/// Slots of the lock-free table: callsites are statics, a program has a few thousand.
const TABLE: usize = 1 << 13;

/// Callsites by the address of their metadata: readers probe without a lock; inserts take
/// one. A full table falls back to a locked list.
struct Table {
    keys: [AtomicUsize; TABLE],
    values: [AtomicPtr<Callsite>; TABLE],
    insert: Mutex<Vec<(usize, &'static Callsite)>>,
}

static CALLSITES: Table = Table {
    keys: [const { AtomicUsize::new(0) }; TABLE],
    values: [const { AtomicPtr::new(core::ptr::null_mut()) }; TABLE],
    insert: Mutex::new(Vec::new()),
};

fn slot(key: usize) -> usize {
    // Fibonacci hashing of the address (metadata are at least 8-aligned).
    (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) % TABLE
}

/// The callsite of `meta`, made the first time.
#[inline]
pub(crate) fn of(meta: &'static Metadata<'static>) -> &'static Callsite {
    let key = meta as *const Metadata<'static> as usize;
    let mut i = slot(key);
    for _ in 0..TABLE {
        // Acquire: pairs with the Release store of the key, after its value.
        match CALLSITES.keys[i].load(Acquire) {
            k if k == key => {
                // SAFETY: values are leaked Boxes, stored before their key.
                return unsafe { &*CALLSITES.values[i].load(Relaxed) };
            }
            0 => break,
            _ => i = (i + 1) % TABLE,
        }
    }
    insert(meta)
}

#[cold]
fn insert(meta: &'static Metadata<'static>) -> &'static Callsite {
    let key = meta as *const Metadata<'static> as usize;
    let mut spill = CALLSITES.insert.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, c)) = spill.iter().find(|(k, _)| *k == key) {
        return c;
    }
    let mut i = slot(key);
    for _ in 0..TABLE {
        // Relaxed: keys change only under this lock.
        match CALLSITES.keys[i].load(Relaxed) {
            k if k == key => {
                // SAFETY: as in `of`.
                return unsafe { &*CALLSITES.values[i].load(Relaxed) };
            }
            0 => {
                let c: &'static Callsite = Box::leak(Box::new(Callsite::new(meta)));
                CALLSITES.values[i].store(c as *const Callsite as *mut Callsite, Relaxed);
                // Release: the value is stored before a reader finds the key.
                CALLSITES.keys[i].store(key, Release);
                return c;
            }
            _ => i = (i + 1) % TABLE,
        }
    }
    let c: &'static Callsite = Box::leak(Box::new(Callsite::new(meta)));
    spill.push((key, c));
    c
}
