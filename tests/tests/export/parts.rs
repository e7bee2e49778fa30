//! A long trace decoded in parts on every core (`Merge::split`, `ttrace_reader::ordered`)
//! gives, byte for byte, the text that one walk over it gives: the same lines in the same
//! order (events of equal stamps on several rings included), the same counts, whatever
//! the filter.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use ttrace_core::{Config, Definition, Kind, Writer};
use ttrace_reader::decode::{Decoder, Tally, TimeFormat};
use ttrace_reader::export::pipeline::{self, Parts, Walked};
use ttrace_reader::merge::{Filter, Item, Merge};

/// Slots of each ring: three rings of them make more than the parts' minimum twice over.
const SLOTS: u64 = 1 << 17;

/// A device whose rings 0, 1 and 2 are full; many stamps repeat within and across rings.
fn device(dir: &std::path::Path) -> Writer {
    device_of(dir, [("request", Kind::Start), ("reply", Kind::Stop)])
}

/// [`device`], its events alternately of the two tracepoints `points` (each ring's events
/// one thread's).
fn device_of(dir: &std::path::Path, points: [(&'static str, Kind); 2]) -> Writer {
    let dev = Writer::open(&Config {
        ring_slots: SLOTS,
        cpus: Some(2),
        ..Config::at(dir)
    })
    .unwrap();
    let define = |name, kind| {
        dev.device()
            .register_tracepoint(&Definition::untyped(name, kind, 1, "n={n} x={x:x}"))
            .unwrap()
            .1
    };
    let words = points.map(|(name, kind)| define(name, kind));
    dev.device().note_thread(1, 2, "worker").unwrap();
    let base = dev.now();
    for ring in 0..3u64 {
        for i in 0..SLOTS {
            let tw = words[(i % 2) as usize];
            let word = ttrace_layouts::entry::TypeWord(tw).with_cpu((ring % 2) as u32);
            let w = [word.0, 1 << 32 | 2, i, i ^ ring, 0, 0, 0];
            // Runs of four equal stamps, shifted per ring so that rings tie often.
            let stamp = base + (i / 4) * 8 + ring % 2;
            dev.device()
                .mapping()
                .ring(ring as usize)
                .write(stamp, 1, &w);
        }
    }
    dev
}

/// The text and tally of the items of `view` that `filter` keeps: in parts (no limit) or
/// in one walk (a limit above the number of events takes that path).
fn decode(view: &devttrace::View<'_>, filter: &Filter, parts: bool) -> (Vec<u8>, Tally) {
    let mut out = Vec::new();
    let limit = (!parts).then_some(u64::MAX);
    let tally = Decoder::new(view, TimeFormat::Relative)
        .write_counted(Merge::view(view, filter), limit, &mut out)
        .unwrap();
    (out, tally)
}

/// Calls `f` with a view of a fresh [`device`].
fn with_view(f: impl FnOnce(&devttrace::View<'_>)) {
    let tmp = tempfile::tempdir().unwrap();
    let dev = device(&tmp.path().join("dev"));
    let reader = devttrace::Reader::open(dev.device().reader().dir()).unwrap();
    f(&devttrace::View::of(&reader, 0).unwrap());
}

/// Calls `f` with a view of a fresh [`device`], then of one of calls ([`with_calls`]).
fn both(f: impl Fn(&devttrace::View<'_>)) {
    with_view(&f);
    with_calls(&f);
}

/// Calls `f` with a view of a fresh device of calls (entries and exits, [`device_of`]).
fn with_calls(f: impl FnOnce(&devttrace::View<'_>)) {
    let tmp = tempfile::tempdir().unwrap();
    let points = [("call", Kind::Entry), ("call_done", Kind::Exit)];
    let dev = device_of(&tmp.path().join("dev"), points);
    let reader = devttrace::Reader::open(dev.device().reader().dir()).unwrap();
    f(&devttrace::View::of(&reader, 0).unwrap());
}

#[test]
fn a_trace_decoded_in_parts_is_the_trace_decoded_in_one_walk() {
    with_view(|view| {
        let filters = [
            Filter::default(),
            Filter {
                name: Some("rep*".into()),
                ..Filter::default()
            },
            Filter {
                cpus: vec![1, 2],
                ..Filter::default()
            },
        ];
        for filter in &filters {
            let (whole, counted) = decode(view, filter, false);
            let (parts, tallied) = decode(view, filter, true);
            assert_eq!(counted, tallied, "{filter:?}");
            // Each filter keeps more than the 2^17 items from which a trace is decoded in parts.
            assert!(counted.points > SLOTS, "{filter:?}: {counted:?}");
            assert_eq!(
                whole.iter().filter(|&&b| b == b'\n').count() as u64,
                counted.events()
            );
            assert!(whole == parts, "{filter:?}: the texts differ");
        }
    });
}

/// What a merge gives, as (ring, stamp, first argument) per item.
fn items(m: Merge<'_>) -> Vec<(usize, u64, u64)> {
    m.map(|item| match item {
        Item::Point { cpu, event } => (cpu, event.stamp, event.args()[0]),
        Item::Message(m) => (usize::MAX, m.timestamp, 0),
    })
    .collect()
}

#[test]
fn the_parts_of_a_merge_give_what_it_gives_one_after_the_other() {
    with_view(|view| {
        let whole = items(Merge::view(view, &Filter::default()));
        assert_eq!(whole.len() as u64, 3 * SLOTS);
        for parts in [1, 2, 3, 7, 64, 1000] {
            let merge = Merge::view(view, &Filter::default());
            let split = merge.split(parts);
            assert!(split.len() <= parts, "{parts}: {} parts", split.len());
            if parts > 1 {
                assert!(split.len() > 1, "{parts}: not split");
            }
            let joined: Vec<_> = split.into_iter().flat_map(items).collect();
            assert!(joined == whole, "{parts} parts: the items differ");
        }
    });
}

/// Runs `export` on one thread then on two, and checks that it wrote over a megabyte, the
/// same bytes both times (else where they first differ), and counted the same.
fn same_on_one_and_two_threads<W: PartialEq + std::fmt::Debug>(
    export: impl Fn(bool) -> (Vec<u8>, W),
) {
    let (one, one_counts) = export(false);
    let (two, two_counts) = export(true);
    assert_eq!(one_counts, two_counts);
    assert!(one.len() > 1 << 20, "{} bytes", one.len());
    let differ = one.iter().zip(&two).position(|(a, b)| a != b);
    assert!(
        one.len() == two.len() && differ.is_none(),
        "{} and {} bytes, first difference at {differ:?}",
        one.len(),
        two.len()
    );
}

/// What an item or step of an export's walk is, as numbers appended to `out`: its kind, its
/// events (each as its stamp, writer, tracepoint and second argument), the event fed and
/// the span of a step.
fn walked(walked: Walked<'_, '_>, out: &mut Vec<u64>) {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let e = |e: &devttrace::Event, out: &mut Vec<u64>| {
        let args = e.args();
        let w = [e.stamp, e.ctx, e.type_word.tracepoint().into(), args[1]];
        out.extend_from_slice(&w)
    };
    match walked {
        Walked::Point { event, cpu } => {
            out.extend_from_slice(&[1, cpu as u64]);
            e(event, out)
        }
        Walked::Fed(event) => {
            out.push(2);
            e(event, out)
        }
        Walked::Message(m) => out.extend_from_slice(&[3, m.timestamp, m.ctx]),
        Walked::Step { step, fed, span } => {
            out.extend_from_slice(&[4, span.0, span.1]);
            let mut of = Vec::new();
            let kind = step.map(|event| e(event, &mut of));
            let mut h = DefaultHasher::new();
            std::mem::discriminant(&kind).hash(&mut h);
            out.push(h.finish());
            out.append(&mut of);
            if let Some(fed) = fed {
                e(fed, out)
            }
        }
    }
}

/// A formatter of parts that writes each part's items and steps as numbers ([`walked`]),
/// with its index; the part it is handed first, it holds until `elsewhere` counts a part
/// formatted on another thread than `hold` (if given), and it counts its parts formatted
/// on another thread in `elsewhere`.
struct Numbers<'a> {
    index: usize,
    numbers: Vec<u64>,
    hold: Option<std::thread::ThreadId>,
    elsewhere: &'a AtomicUsize,
}

impl<'s> Parts<'s> for Numbers<'_> {
    type Out = (usize, Vec<u64>);

    fn begin(&mut self, index: usize, _: &[bool]) {
        let here = std::thread::current().id();
        if self.hold.is_some_and(|h| h != here) {
            self.elsewhere.fetch_add(1, SeqCst);
        } else if self.hold.is_some() && index == 0 {
            // The model's thread fills the channel, then formats a part itself.
            while self.elsewhere.load(SeqCst) == 0 {
                std::thread::yield_now();
            }
        }
        self.index = index;
    }

    fn walked(&mut self, w: Walked<'_, 's>) {
        walked(w, &mut self.numbers)
    }

    fn end(&mut self) -> (usize, Vec<u64>) {
        (self.index, std::mem::take(&mut self.numbers))
    }
}

/// The items and steps of a walk of `view` in parts on `workers` ([`Numbers`], `hold` as
/// there), checked to come in order, and the length of each part's; and those of the walk
/// on one thread.
fn in_parts(
    view: &devttrace::View<'_>,
    workers: usize,
    hold: Option<std::thread::ThreadId>,
    elsewhere: &AtomicUsize,
) -> (Vec<u64>, Vec<u64>, Vec<usize>) {
    let model = || ttrace_model::model::Model::new(&view.meta, &view.cpus);
    let items = || Merge::view(view, &Filter::default());
    let mut whole = Vec::new();
    pipeline::walk(items(), model(), false, &mut |w| {
        walked(w, &mut whole);
        Ok::<(), ()>(())
    })
    .unwrap();
    assert!(whole.len() > 1 << 20, "{} numbers", whole.len());
    let (mut parts, mut indices, mut lengths) = (Vec::new(), Vec::new(), Vec::new());
    let state = || Numbers {
        index: 0,
        numbers: Vec::new(),
        hold,
        elsewhere,
    };
    pipeline::walk_in_parts(items(), model(), workers, state, |(index, numbers)| {
        indices.push(index);
        lengths.push(numbers.len());
        parts.extend_from_slice(&numbers);
        Ok::<(), ()>(())
    })
    .unwrap();
    assert!(indices.len() > 1, "{workers} workers: one part");
    assert!(
        indices.iter().enumerate().all(|(i, &p)| i == p),
        "{workers} workers"
    );
    (whole, parts, lengths)
}

/// An export's walk cut into parts, formatted on the calling thread (as the model makes
/// its steps) or on one or three threads (`pipeline::walk_in_parts`), hands the formatter
/// what the walk on one thread hands it, item for item and step for step, each part once
/// and in order, cut at the same items whatever the threads: of start/stop events and of
/// calls.
#[test]
fn a_walk_in_parts_on_any_threads_is_the_walk_on_one() {
    both(|view| {
        let mut cuts = Vec::new();
        for workers in [0, 1, 3] {
            let (whole, parts, lengths) = in_parts(view, workers, None, &AtomicUsize::new(0));
            cuts.push(lengths);
            let differ = whole.iter().zip(&parts).position(|(a, b)| a != b);
            assert!(
                whole == parts,
                "{workers} workers: {} and {} numbers, first difference at {differ:?}",
                whole.len(),
                parts.len()
            );
        }
        assert!(cuts.iter().all(|c| *c == cuts[0]), "the parts differ");
    });
}

/// When the formatting falls behind (here the calling thread, the one formatter, holds the
/// first part until the model's thread has formatted one), the model's thread formats
/// parts itself instead of waiting, and the walk is still the one-thread walk.
#[test]
fn the_models_thread_formats_parts_while_the_formatting_is_behind() {
    with_view(|view| {
        let elsewhere = AtomicUsize::new(0);
        let caller = std::thread::current().id();
        let (whole, parts, _) = in_parts(view, 1, Some(caller), &elsewhere);
        assert!(elsewhere.into_inner() > 0);
        assert!(
            whole == parts,
            "{} and {} numbers",
            whole.len(),
            parts.len()
        );
    });
}

/// The Chrome export of a long trace formatted in parts on one or three threads, the merge
/// and the event model on a thread of their own (`ttrace_reader::export::pipeline`), writes,
/// byte for byte, what it writes all on one thread, and counts the same: its parts' text
/// depends on nothing before it. Of start/stop events (async slices, with their ids) and of
/// calls.
#[test]
fn chrome_in_parts_on_any_threads_writes_what_it_writes_on_one() {
    both(|view| {
        let run = |workers| {
            let mut out = Vec::new();
            let items = Merge::view(view, &Filter::default());
            assert!(items.len() >= pipeline::MIN_ITEMS);
            let written = ttrace_reader::export::chrome::write_on(
                view.into(),
                &view.cpus,
                items,
                &mut out,
                |_| {},
                workers,
            )
            .unwrap();
            (out, written)
        };
        same_on_one_and_two_threads(|threads| run(threads as usize));
        same_on_one_and_two_threads(|threads| run(3 * threads as usize));
    });
}

/// The same of the Perfetto export.
#[test]
fn perfetto_on_two_threads_writes_what_it_writes_on_one() {
    both(|view| {
        let run = |threads| {
            let mut out = Vec::new();
            let items = Merge::view(view, &Filter::default());
            let written = ttrace_reader::export::perfetto::write_on(
                view.into(),
                &view.cpus,
                items,
                &[],
                &mut out,
                |_| {},
                threads,
            )
            .unwrap();
            (out, written)
        };
        same_on_one_and_two_threads(run);
    });
}

/// The uftrace export of a long trace formatted in parts on one or three threads writes
/// what it writes all on one thread, every file of its directory byte for byte: a part's
/// records are written before the depth its threads begin at is known, and settled after.
/// Of start/stop events and of calls (records at every depth).
#[test]
fn uftrace_in_parts_on_any_threads_writes_what_it_writes_on_one() {
    both(|view| {
        let tmp = tempfile::tempdir().unwrap();
        let run = |workers: usize| {
            let dir = tmp.path().join(format!("workers-{workers}"));
            let items = Merge::view(view, &Filter::default());
            let written = ttrace_reader::export::uftrace::write_on(
                view.into(),
                &view.cpus,
                items,
                &dir,
                |_| {},
                workers,
            )
            .unwrap();
            let mut files: Vec<(std::ffi::OsString, Vec<u8>)> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| {
                    let e = e.unwrap();
                    (e.file_name(), std::fs::read(e.path()).unwrap())
                })
                .collect();
            files.sort();
            (files, written)
        };
        let (one, one_counts) = run(0);
        let bytes: usize = one.iter().map(|f| f.1.len()).sum();
        assert!(bytes > 1 << 20, "{bytes} bytes");
        let names = |fs: &[(std::ffi::OsString, Vec<u8>)]| -> Vec<_> {
            fs.iter().map(|f| f.0.clone()).collect()
        };
        for workers in [1, 3] {
            let (parts, counts) = run(workers);
            assert_eq!(one_counts, counts);
            assert_eq!(names(&one), names(&parts));
            for ((name, a), (_, b)) in one.iter().zip(&parts) {
                assert!(a == b, "{workers} workers: {name:?} differs");
            }
        }
    });
}

/// The same of the OTLP export, in both encodings, of calls (what it makes spans of).
#[test]
fn otlp_on_two_threads_writes_what_it_writes_on_one() {
    use ttrace_reader::export::otlp::{write_on, Encoding};
    with_calls(|view| {
        for encoding in [Encoding::Json, Encoding::Proto] {
            let run = |threads| {
                let mut out = Vec::new();
                let items = Merge::view(view, &Filter::default());
                let mut batch = |b: &[u8]| {
                    out.extend_from_slice(b);
                    Ok(())
                };
                let written = write_on(
                    view.into(),
                    &view.cpus,
                    items,
                    encoding,
                    "dev",
                    &mut batch,
                    threads,
                )
                .unwrap();
                (out, written)
            };
            same_on_one_and_two_threads(run);
        }
    });
}
