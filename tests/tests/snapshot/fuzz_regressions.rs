//! Replays the fuzz corpus (`fuzz/corpus/<target>/`) and every crash, hang or out-of-memory
//! input the fuzzers ever found (`fuzz/artifacts/<target>/`) through the targets' bodies in
//! `ttrace_tests::fuzz`, plus the seeds made from a real device. A panic here is a
//! regression; the long fuzz runs themselves are `fuzz/run.sh` (see docs/RELIABILITY.md).

use std::path::Path;

fn open(data: &[u8]) {
    ttrace_tests::fuzz::open(data);
}

/// The files in `dir`, sorted; none if it does not exist.
fn inputs(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = match std::fs::read_dir(dir) {
        Ok(d) => d.map(|e| e.expect("corpus entry").path()).collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("{}: {e}", dir.display()),
    };
    files.sort();
    files
}

fn replay(target: &str, run: fn(&[u8])) {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let mut n = 0;
    for (t, seed) in ttrace_tests::fuzz::seeds() {
        if t == target {
            run(&seed);
            n += 1;
        }
    }
    let saved = [
        fuzz.join("corpus").join(target),
        fuzz.join("artifacts").join(target),
    ];
    let files: Vec<_> = saved.iter().flat_map(|d| inputs(d)).collect();
    for f in &files {
        let bytes = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        // A panic names the input: rerun it with `cargo fuzz run <target> <file>`.
        eprintln!("{target}: {}", f.display());
        run(&bytes);
    }
    n += files.len();
    // The committed corpus holds more than the seeds: an empty replay would test nothing.
    assert!(
        files.len() > 1,
        "{target}: no saved inputs in {}",
        fuzz.display()
    );
    eprintln!("{target}: {n} inputs replayed");
}

#[test]
fn open_corpus_and_crashes_replay_cleanly() {
    replay("open", open);
}

#[test]
fn ring_corpus_and_crashes_replay_cleanly() {
    replay("ring", ttrace_tests::fuzz::ring);
}

#[test]
fn aux_corpus_and_crashes_replay_cleanly() {
    replay("aux", |d| {
        ttrace_tests::fuzz::aux(d);
    });
}

#[test]
fn metadata_corpus_and_crashes_replay_cleanly() {
    replay("metadata", ttrace_tests::fuzz::metadata);
}

#[test]
fn decode_corpus_and_crashes_replay_cleanly() {
    replay("decode", ttrace_tests::fuzz::decode);
}

#[test]
fn snapshot_corpus_and_crashes_replay_cleanly() {
    replay("snapshot", |d| {
        ttrace_tests::fuzz::snapshot(d);
    });
}

#[test]
fn the_unedited_snapshot_reads_and_a_cut_one_is_refused() {
    let whole = ttrace_tests::fuzz::snapshot(&[]).expect("the unedited snapshot opens");
    assert!(whole > 1000, "{whole} bytes dumped");
    // Truncate (op 2) the file to 100 bytes: inside the header page.
    assert_eq!(ttrace_tests::fuzz::snapshot(&[2, 0, 100, 0]), None);
}

#[test]
fn ctl_corpus_and_crashes_replay_cleanly() {
    replay("ctl", ttrace_tests::fuzz::ctl);
}

/// The edits `open` decodes are the ones its input spells, so the corpus means what it
/// meant when it was found.
#[test]
fn open_inputs_decode_to_the_edits_they_spell() {
    use ttrace_tests::fuzz::Edit;
    let input = [
        0, 1, 4, 0, 2, 0xaa, 0xbb, // write 2 bytes at 4 of file 1
        1, 0, 8, 0, 14, // word u64::MAX at 8 of file 0
        1, 2, 0, 0, 99, 1, 2, 3, 4, 5, 6, 7, 8, // a raw word
        2, 3, 16, 0, // truncate file 3 to 16
        3, 4, 1, 9, // append one byte
        4, 5, // remove file 5
        5, 6, 7, // symlink file 6 to file 7
        6, 8, // writable file 8
        0, 1, 4, 0, 9, // a write of 9 bytes with 0 left: ignored
    ];
    assert_eq!(
        Edit::decode(&input),
        vec![
            Edit::Write {
                file: 1,
                at: 4,
                bytes: vec![0xaa, 0xbb]
            },
            Edit::Word {
                file: 0,
                at: 8,
                value: u64::MAX
            },
            Edit::Word {
                file: 2,
                at: 0,
                value: u64::from_le_bytes([1, 2, 3, 4, 5, 6, 7, 8])
            },
            Edit::Truncate { file: 3, len: 16 },
            Edit::Append {
                file: 4,
                bytes: vec![9]
            },
            Edit::Remove { file: 5 },
            Edit::Symlink { file: 6, to: 7 },
            Edit::Writable { file: 8 },
        ]
    );
}

/// The `open` target reaches the decoder: the unedited device is opened and dumped, and one
/// wrong byte of the magic gets it refused.
#[test]
fn open_dumps_the_unedited_device_and_refuses_a_bad_magic() {
    let whole = ttrace_tests::fuzz::open(&[]).expect("the unedited device opens");
    assert!(whole > 1000, "{whole} bytes dumped");
    let header = ttrace_tests::fuzz::file_index("header");
    assert_eq!(ttrace_tests::fuzz::open(&[0, header, 0, 0, 1, 0xff]), None);
}

/// The aux seed is a real buffer: the parser finds its records (a string argument and a
/// message's text).
#[test]
fn the_aux_seed_holds_the_devices_records() {
    let (_, seed) = ttrace_tests::fuzz::seeds()
        .into_iter()
        .find(|(t, _)| *t == "aux")
        .unwrap();
    assert_eq!(ttrace_tests::fuzz::aux(&seed), 2);
}
