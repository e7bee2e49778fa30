//! What the layer knows of each `tracing` callsite: its ttrace tracepoints, found from the
//! callsite's metadata without a lock.
//!
//! An event callsite has one tracepoint of [`Role::Event`] per argument-type signature (a
//! field seen once as an integer and once as a string gets a second tracepoint of the same
//! name). A span callsite has the steps of its instances ([`ttrace_layouts::role`]): `new`
//! and `record` per signature (their fields follow the id, and for `new` the parent), and
//! `enter`, `exit`, `close` and `follows`, whose arguments are ids only, registered when the
//! callsite is: whether they are enabled is whether the span is.
//!
//! A field not recorded (declared `Empty`, or left as it was by a span's `record`) makes a
//! signature of its own, whose format shows it as `name=<unset>` (an event, a span's `new`)
//! or leaves it out (`record`), without a word: readers never see it as a lost string.
//!
//! An event without a name of its own is named by its message at its first event
//! ([`crate::name`]); until then its callsite's interest is its level's.
//!
//! A callsite of tokio's waker events ([`crate::wake`]) is recognised here, once, by its
//! target: it has the one tracepoint of the built-in `task_wake` and no signatures of its
//! own, and the control of `task_wake` decides its interest.

use crate::fields::{Shape, Ty};
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Mutex, OnceLock};
use tracing_core::Metadata;
use ttrace_core::{Definition, Kind, Level, Role, Writer};

/// The class bit of a `tracing` level, so that `ttrace-reader ctl level`, `setbits` and
/// `clrbits` switch levels.
pub const fn level_class(level: &tracing_core::Level) -> u64 {
    level_of(level).class()
}

/// ttrace's name for a `tracing` level.
pub(crate) const fn level_of(level: &tracing_core::Level) -> Level {
    match *level {
        tracing_core::Level::ERROR => Level::Error,
        tracing_core::Level::WARN => Level::Warn,
        tracing_core::Level::INFO => Level::Info,
        tracing_core::Level::DEBUG => Level::Debug,
        tracing_core::Level::TRACE => Level::Trace,
    }
}

/// The tracepoints of one role of a callsite, one per argument-type signature.
pub(crate) struct Signatures {
    role: Role,
    pub(crate) shape: Shape,
    /// The first signature registered (`u64::MAX`: none yet) and its shared word.
    first_sig: AtomicU64,
    first_word: AtomicPtr<AtomicU64>,
    /// Further signatures, rare.
    others: Mutex<Vec<(u64, &'static AtomicU64)>>,
}

impl Signatures {
    fn new(role: Role, shape: Shape) -> Signatures {
        Signatures {
            role,
            shape,
            first_sig: AtomicU64::new(u64::MAX),
            first_word: AtomicPtr::new(core::ptr::null_mut()),
            others: Mutex::new(Vec::new()),
        }
    }

    /// The signatures of a callsite whose one tracepoint, `word`'s, is registered with it
    /// (tokio's waker events: [`crate::wake`]): [`Signatures::enabled`] reads that word;
    /// nothing registers another.
    fn fixed(word: &'static AtomicU64) -> Signatures {
        let s = Signatures::new(Role::Event, Shape::new(&[], &[]));
        // Relaxed: the callsite is not shared yet; the Release store of its key in the
        // table publishes it.
        s.first_word
            .store(word as *const AtomicU64 as *mut AtomicU64, Relaxed);
        s
    }

    /// Whether the first signature's tracepoint records now; `None` before it registers.
    #[inline]
    fn enabled(&self) -> Option<bool> {
        // Acquire: pairs with the Release store in `word_slow`: the pointer is to a live
        // shared word.
        let w = self.first_word.load(Acquire);
        // SAFETY: a non-null pointer is to a shared word of the 'static device, or to NEVER.
        (!w.is_null()).then(|| unsafe { &*w }.load(Relaxed) != 0)
    }

    /// The word to record with, for argument types `tys` of signature `sig`: its type
    /// word if enabled, else 0. Registers the signature's tracepoint the first time.
    #[inline]
    pub(crate) fn word(&self, cs: &Callsite, dev: &'static Writer, sig: u64, tys: &[Ty]) -> u64 {
        // Relaxed: `first_word` is published after `first_sig` and read with Acquire.
        if self.first_sig.load(Relaxed) == sig {
            let w = self.first_word.load(Acquire);
            if !w.is_null() {
                // SAFETY: as in `enabled`. Relaxed: the word is self-contained.
                return unsafe { &*w }.load(Relaxed);
            }
        }
        self.word_slow(cs, dev, sig, tys)
    }

    #[cold]
    fn word_slow(&self, cs: &Callsite, dev: &'static Writer, sig: u64, tys: &[Ty]) -> u64 {
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
                    .shape
                    .args
                    .iter()
                    .zip(tys)
                    .filter_map(|(a, t)| match t {
                        Ty::Absent if self.role == Role::SpanRecord => None,
                        Ty::Absent => Some(format!("{a}=<unset>")),
                        _ => Some(format!("{a}={{{a}{}}}", t.spec())),
                    })
                    .collect::<Vec<_>>()
                    .join(" ");
                let w = register(dev, cs, self.role, format);
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
}

/// A span's steps whose arguments are ids only: registered with the callsite.
pub(crate) struct Steps {
    enter: &'static AtomicU64,
    exit: &'static AtomicU64,
    close: &'static AtomicU64,
    follows: &'static AtomicU64,
}

/// What the layer knows of one callsite.
pub(crate) struct Callsite {
    /// Its metadata.
    pub(crate) meta: &'static Metadata<'static>,
    /// The tracepoint name (see [`crate::name`]): set when made, or, for an event named by
    /// its message, at its first event.
    name: OnceLock<&'static str>,
    classes: u64,
    /// An event's tracepoints, or a span's `new` ones.
    pub(crate) fields: Signatures,
    /// A span's `record` tracepoints.
    pub(crate) record: Option<Signatures>,
    /// A span's other steps.
    steps: Option<Steps>,
    /// The word of `task_wake`, for a callsite of tokio's waker events ([`crate::wake`]).
    pub(crate) wake: Option<&'static AtomicU64>,
}

/// The word of a tracepoint that could not be registered: never enabled.
static NEVER: AtomicU64 = AtomicU64::new(0);

impl Callsite {
    fn new(dev: &'static Writer, meta: &'static Metadata<'static>) -> Callsite {
        let fields: Vec<&'static str> = meta.fields().iter().map(|f| f.name()).collect();
        let name = OnceLock::new();
        if let Some(n) = crate::name::of(meta) {
            let _ = name.set(&*Box::leak(n.into_boxed_str()));
        }
        let mut cs = Callsite {
            meta,
            name,
            classes: level_class(meta.level()),
            fields: Signatures::new(Role::Event, Shape::new(&[], &fields)),
            record: None,
            steps: None,
            wake: None,
        };
        if crate::wake::is_waker(meta) {
            let _ = cs.name.set(crate::wake::WAKE_NAME);
            cs.classes = ttrace_core::CLASS_MESSAGES;
            let word = crate::wake::register(dev).unwrap_or(&NEVER);
            cs.fields = Signatures::fixed(word);
            cs.wake = Some(word);
        }
        if meta.is_span() {
            cs.fields = Signatures::new(Role::SpanNew, Shape::new(&["span", "parent"], &fields));
            cs.record = Some(Signatures::new(
                Role::SpanRecord,
                Shape::new(&["span"], &fields),
            ));
            let id = |role| register(dev, &cs, role, "span={span:x}".into());
            cs.steps = Some(Steps {
                enter: id(Role::SpanEnter),
                exit: id(Role::SpanExit),
                close: id(Role::SpanClose),
                follows: register(
                    dev,
                    &cs,
                    Role::SpanFollows,
                    "span={span:x} follows={follows:x}".into(),
                ),
            });
        }
        cs
    }

    /// Whether its tracepoints record now (`ctl` may change it at any time): a span's as
    /// its steps say; an event's as its first signature's tracepoint says (a waker event's:
    /// `task_wake`), and `true` before one registered (the first event registers it, and
    /// then reads its word: one load from then on, whatever the control says).
    #[inline]
    pub(crate) fn enabled(&self) -> bool {
        match &self.steps {
            // Relaxed: the word is self-contained.
            Some(s) => s.enter.load(Relaxed) != 0,
            None => self.fields.enabled().unwrap_or(true),
        }
    }

    /// Whether the device's mask and rules enable this callsite now (what `tracing`'s
    /// interest cache is rebuilt from: [`crate::interest`]): for an event not named yet, the
    /// mask alone (its first event names it, registers its tracepoint and reads its word,
    /// so that rules apply from that first event; then the name decides, from the next
    /// rebuild on).
    pub(crate) fn device_enables(&self, dev: &'static Writer) -> bool {
        let reader = dev.device().reader();
        match self.name.get() {
            Some(name) => reader.enables(name, self.classes),
            None => reader.mask() & self.classes != 0,
        }
    }

    /// Whether this is an event whose name waits for its first message.
    #[inline]
    pub(crate) fn unnamed(&self) -> bool {
        self.name.get().is_none()
    }

    /// The tracepoint name (an event is named before its first registration: if one were
    /// not, it is named as an event without a message word).
    fn name(&self) -> &'static str {
        self.name.get_or_init(|| {
            Box::leak(crate::name::of_message(self.meta.target(), None).into_boxed_str())
        })
    }

    /// Names an event by `message`, the text of its first event up to the first value,
    /// unless another thread's first event named it already. If the device's rules disable
    /// that name, `tracing` is asked to ask again for the callsite's interest (which was
    /// its level's alone: [`Callsite::device_enables`]).
    #[cold]
    pub(crate) fn name_by(&self, dev: &'static Writer, message: Option<&str>) {
        let mut named = false;
        self.name.get_or_init(|| {
            named = true;
            Box::leak(crate::name::of_message(self.meta.target(), message).into_boxed_str())
        });
        if named && !self.device_enables(dev) {
            crate::interest::stale();
        }
    }

    /// The word of a span's step of `role` (0: disabled, or not a span).
    #[inline]
    pub(crate) fn step(&self, role: Role) -> u64 {
        let Some(s) = &self.steps else { return 0 };
        let w = match role {
            Role::SpanEnter => s.enter,
            Role::SpanExit => s.exit,
            Role::SpanClose => s.close,
            _ => s.follows,
        };
        // Relaxed: the word is self-contained.
        w.load(Relaxed)
    }
}

/// Registers a tracepoint of `cs` for `role` (names and formats are leaked: one per
/// callsite, role and signature) and returns its shared word, or a word that is never
/// enabled if the device refuses it.
fn register(dev: &'static Writer, cs: &Callsite, role: Role, format: String) -> &'static AtomicU64 {
    let format: &'static str = Box::leak(format.into_boxed_str());
    let name = cs.name();
    let def = Definition::untyped(name, Kind::Start, cs.classes, format).with_role(role);
    match dev.device().register_tracepoint(&def) {
        Ok((id, _)) => dev.device().tracepoint_word(id),
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

/// The callsite of `meta`, made (and its fixed tracepoints registered in `dev`) the first
/// time.
#[inline]
pub(crate) fn of(dev: &'static Writer, meta: &'static Metadata<'static>) -> &'static Callsite {
    match find(meta) {
        Some(c) => c,
        None => insert(dev, meta),
    }
}

/// The callsite of `meta` if it was made (in the lock-free table: one of the few past its
/// capacity is not found).
#[inline]
pub(crate) fn find(meta: &Metadata<'_>) -> Option<&'static Callsite> {
    let key = meta as *const Metadata<'_> as usize;
    let mut i = slot(key);
    for _ in 0..TABLE {
        // Acquire: pairs with the Release store of the key, after its value.
        match CALLSITES.keys[i].load(Acquire) {
            k if k == key => {
                // SAFETY: values are leaked Boxes, stored before their key.
                return Some(unsafe { &*CALLSITES.values[i].load(Relaxed) });
            }
            0 => return None,
            _ => i = (i + 1) % TABLE,
        }
    }
    None
}

#[cold]
fn insert(dev: &'static Writer, meta: &'static Metadata<'static>) -> &'static Callsite {
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
                let c: &'static Callsite = Box::leak(Box::new(Callsite::new(dev, meta)));
                CALLSITES.values[i].store(c as *const Callsite as *mut Callsite, Relaxed);
                // Release: the value is stored before a reader finds the key.
                CALLSITES.keys[i].store(key, Release);
                return c;
            }
            _ => i = (i + 1) % TABLE,
        }
    }
    let c: &'static Callsite = Box::leak(Box::new(Callsite::new(dev, meta)));
    spill.push((key, c));
    c
}
