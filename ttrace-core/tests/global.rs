//! The `tracepoint!` / `point!` path into the process's device.

use std::cell::Cell;
use std::time::Duration;
use ttrace_core::{point, tracepoint, Config};
use ttrace_layouts::aux::AUX_REF;

tracepoint!(static NONE: Start = "t_none", "");
tracepoint!(static FIVE: Entry[0b10] = "t_five", "a={a} b={b:x} c={c:d} d={d} e={e}");
tracepoint!(static TWELVE: Exit = "t_twelve", "{a}{b}{c}{d}{e}{f}{g}{h}{i}{j}{k}{l}");
tracepoint!(static TEXT: Stop = "t_text", "path={path:s} n={n}");
tracepoint!(static OFF: Start = "t_off", "x={x}");

#[test]
fn trace_points_record_arguments_strings_and_thread_names() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = Config {
        ring_slots: 1024,
        cpus: Some(1),
        calibration: Duration::from_millis(2),
        ..Config::at(tmp.path().join("dev"))
    };
    let dev = ttrace_core::init(&cfg).unwrap();
    assert!(
        std::ptr::eq(dev, ttrace_core::init(&cfg).unwrap()),
        "init is idempotent"
    );
    assert!(ttrace_core::init(&Config::at(tmp.path().join("other"))).is_err());

    point!(OFF, 0u8); // registers it
    dev.device().apply_text("disable t_off").unwrap();
    let evaluated = Cell::new(false);
    point!(OFF, {
        evaluated.set(true);
        1u8
    });
    assert!(
        !evaluated.get(),
        "arguments of a disabled point are not evaluated"
    );

    std::thread::Builder::new()
        .name("worker-7".into())
        .spawn(|| {
            point!(NONE);
            point!(FIVE, 1u8, 0xabu16, -3i32, 4u64, true);
            point!(TWELVE, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11);
            point!(TEXT, "/etc/hosts", 9);
        })
        .unwrap()
        .join()
        .unwrap();

    // One CPU's rings: its restartable one, and the shared one of every CPU (CPU 1 folds
    // onto CPU 0's shared ring), in time order.
    let mut events: Vec<_> = (0..dev.device().mapping().num_rings())
        .flat_map(|r| dev.device().mapping().ring(r).reader().snapshot().events)
        .collect();
    events.sort_by_key(|e| e.stamp);
    let meta = dev.device().reader().metadata();
    let name_of = |e: &devttrace::Event| {
        meta.tracepoints[e.type_word.tracepoint() as usize]
            .name
            .clone()
    };
    let got: Vec<(String, Vec<u64>)> = events
        .iter()
        .map(|e| (name_of(e), e.args().to_vec()))
        .collect();
    assert_eq!(got[0], ("t_off".to_string(), vec![0]));
    assert_eq!(got[1], ("t_none".to_string(), vec![]));
    assert_eq!(
        got[2],
        ("t_five".to_string(), vec![1, 0xab, -3i64 as u64, 4, 1])
    );
    assert_eq!(
        got[3],
        ("t_twelve".to_string(), (0..12).collect::<Vec<u64>>())
    );
    assert_eq!(got[4].0, "t_text");
    assert_eq!(got.len(), 5);
    let worker = events[1].ctx;
    assert!(events[1..].iter().all(|e| e.ctx == worker));
    assert_eq!(
        meta.thread_name((worker >> 32) as u32, worker as u32),
        Some("worker-7")
    );
    assert_eq!((worker >> 32) as u32, std::process::id());
    assert!(meta.process_name(std::process::id()).is_some());

    let text = events[4].args()[0];
    assert_ne!(text & AUX_REF, 0);
    let aux = dev.device().reader().aux().unwrap();
    let rec = aux.get(text).expect("string kept");
    assert_eq!(rec.bytes, b"/etc/hosts");
    assert_eq!(rec.ctx, worker);
    assert_eq!(events[4].args()[1], 9);

    // A message: an event of the `info` tracepoint, its text in the aux buffer.
    assert!(ttrace_core::info("hello"));
    let aux = dev.device().reader().aux().unwrap();
    let events = |dev: &ttrace_core::Writer| -> Vec<_> {
        (0..dev.device().mapping().num_rings())
            .flat_map(|r| dev.device().mapping().ring(r).reader().snapshot().events)
            .collect()
    };
    let message = events(dev)
        .into_iter()
        .find(|e| {
            let id = e.type_word.tracepoint();
            dev.device().reader().metadata().tracepoints[id as usize].is_message()
        })
        .expect("the message's event");
    assert_eq!(aux.get(message.args()[0]).unwrap().bytes, b"hello");

    // The class mask applies to registered tracepoints at once.
    let before = events(dev).len();
    dev.device().apply_text("clrbits 0x2").unwrap();
    point!(FIVE, 1, 2, 3, 4, 5);
    assert_eq!(events(dev).len(), before);
}
