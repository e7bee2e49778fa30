//! `ttrace-reader decode`: raw entries (the `cpuN` files of a mounted device) back to the
//! lines `dump` prints. The files are made here by the function the mount serves them with.

use std::path::Path;
use ttrace_tests::cli::Ran;
use ttrace_tests::reader;

/// A device with events of 1, 5 and 12 arguments and strings on both CPUs (each writer
/// pinned), and the `cpuN` files of it in `files/`.
fn device(tmp: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = tmp.join("dev");
    let dev = ttrace_core::Writer::open(&ttrace_tests::config(&dir, 1024, 2)).unwrap();
    for cpu in 0..2 {
        ttrace_tests::write_pinned(&dev, cpu, 0..100, true);
    }
    let files = tmp.join("files");
    std::fs::create_dir(&files).unwrap();
    let reader = devttrace::Reader::open(&dir).unwrap();
    for cpu in 0..2 {
        let bytes = ttrace_reader::raw::cpu_entries(&reader, cpu).unwrap();
        std::fs::write(files.join(format!("cpu{cpu}")), bytes).unwrap();
    }
    (dir, files)
}

/// `dump`'s event lines (of `--cpu N` if given), messages left out.
fn dumped(dir: &Path, cpu: Option<usize>) -> Vec<String> {
    ttrace_tests::dumped_lines(reader!(), dir, cpu)
}

fn decoded(out: Ran) -> Vec<String> {
    assert!(out.status.success(), "{}", out.stderr);
    out.stdout.lines().map(str::to_string).collect()
}

#[test]
fn each_cpu_file_decodes_to_the_lines_dump_prints_for_that_cpu() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, files) = device(tmp.path());
    let d = dir.to_str().unwrap();
    let mut total = 0;
    for cpu in 0..2 {
        let f = files.join(format!("cpu{cpu}"));
        let lines = decoded(reader!("decode", "--device", d, &f).run());
        assert!(lines.iter().all(|l| l.contains(&format!(" cpu{cpu} "))));
        assert_eq!(lines, dumped(&dir, Some(cpu)), "cpu{cpu}");
        total += lines.len();
    }
    assert_eq!(total, 600, "every event, once");
}

#[test]
fn several_files_merge_in_time_order_and_stdin_reads_the_same() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, files) = device(tmp.path());
    let d = dir.to_str().unwrap();
    let (c0, c1) = (files.join("cpu0"), files.join("cpu1"));
    let both = decoded(reader!("decode", "--device", d, &c0, &c1).run());
    assert_eq!(both, dumped(&dir, None));
    // `cat cpu0 | ttrace-reader decode --device DIR -`
    let piped = decoded(
        reader!("decode", "--device", d, "-")
            .input(std::fs::read(&c0).unwrap())
            .run(),
    );
    assert_eq!(piped, dumped(&dir, Some(0)));
}

#[test]
fn the_device_defaults_to_the_one_a_mounted_directory_serves() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, files) = device(tmp.path());
    // A mounted device's `version` names its source, as the files of `mount` do.
    std::fs::write(
        files.join("version"),
        format!("cpus 2\nsource {}\n", dir.display()),
    )
    .unwrap();
    let f = files.join("cpu1");
    assert_eq!(decoded(reader!("decode", &f).run()), dumped(&dir, Some(1)));
    // Standard input has no directory: the device must be named.
    let out = reader!("decode", "-").run();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stderr.contains("needs --device"));
}

#[test]
fn a_saved_copy_decodes_against_a_snapshot_file() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, files) = device(tmp.path());
    let snap = tmp.path().join("saved.ttrace");
    let out = reader!("snapshot", &dir, "-o", &snap).run();
    assert!(out.status.success());
    std::fs::remove_dir_all(&dir).unwrap();
    let f = files.join("cpu0");
    let lines = decoded(reader!("decode", "--device", &snap, &f).run());
    let cpu0 = std::fs::read(&f).unwrap().len() / 64;
    assert!(
        lines.len() > 100 && lines.len() <= cpu0,
        "{} lines",
        lines.len()
    );
    assert!(lines
        .iter()
        .any(|l| l.contains(") five(") && l.contains("s=\"s")));
}

#[test]
fn bad_input_is_one_error_naming_the_byte_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, files) = device(tmp.path());
    let d = dir.to_str().unwrap();
    let whole = std::fs::read(files.join("cpu0")).unwrap();
    let cases: Vec<(&str, Vec<u8>, String)> = vec![
        (
            "truncated",
            whole[..whole.len() - 10].to_vec(),
            format!("byte {}: 54 bytes left", whole.len() - 64),
        ),
        (
            "garbage",
            b"this is not a trace, just some text of a file!".repeat(3),
            "byte 0: ".into(),
        ),
        (
            "shifted by a word",
            whole[8..whole.len() - 56].to_vec(),
            "byte 0: ".into(),
        ),
        (
            "an empty slot",
            vec![0; 64],
            "byte 0: not a complete entry".into(),
        ),
    ];
    for (what, bytes, expected) in cases {
        let f = tmp.path().join(what.replace(' ', "-"));
        std::fs::write(&f, bytes).unwrap();
        let out = reader!("decode", "--device", d, &f).run();
        assert_eq!(out.status.code(), Some(1), "{what}");
        let err = out.stderr;
        assert_eq!(err.lines().count(), 1, "{what}: {err}");
        assert!(err.contains(&expected), "{what}: {err}");
        assert!(err.contains(f.to_str().unwrap()), "{what}: {err}");
    }
}

#[test]
fn an_entry_whose_tracepoint_the_device_does_not_know_still_decodes() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, files) = device(tmp.path());
    let mut bytes = std::fs::read(files.join("cpu0")).unwrap()[..64].to_vec();
    // Tracepoint id 200 (type word bits 20..36).
    let mut tw = u64::from_ne_bytes(bytes[8..16].try_into().unwrap());
    tw = (tw & !(0xffff << 20)) | (200 << 20);
    bytes[8..16].copy_from_slice(&tw.to_ne_bytes());
    let f = tmp.path().join("unknown");
    std::fs::write(&f, bytes).unwrap();
    let lines = decoded(reader!("decode", "--device", &dir, &f).run());
    assert_eq!(lines.len(), 1);
    assert!(lines[0].ends_with(" tracepoint#200(0x0)"), "{}", lines[0]);
}
