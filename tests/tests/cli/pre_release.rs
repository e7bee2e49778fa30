//! What the command line says of a device or a snapshot file of a pre-release ttrace: one
//! line, and a failure status.

use ttrace_tests::{make_pre_release_device, make_pre_release_snapshot, reader};

#[test]
fn a_pre_release_device_gives_one_line_saying_so() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    make_pre_release_device(&dir);
    let d = dir.display();
    let line = format!(
        "ttrace-reader: {d}: a device of a pre-release ttrace (layout 3.3); this ttrace reads \
         layout 1.0 — remove it (rm -r {d}) and a writer creates it anew\n"
    );
    assert_eq!(reader!("dump", &dir).fails(), line);
    assert_eq!(reader!("stats", &dir).fails(), line);
    assert_eq!(reader!("ctl", &dir, "enable", "x").fails(), line);
}

#[test]
fn a_pre_release_snapshot_file_gives_one_line_saying_so() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("old.ttrace");
    make_pre_release_snapshot(&tmp.path().join("dev"), &file);
    let line = format!(
        "ttrace-reader: {}: a snapshot of a pre-release ttrace (format 4); this ttrace reads \
         format 1\n",
        file.display()
    );
    assert_eq!(reader!("dump", &file).fails(), line);
    assert_eq!(reader!("stats", &file).fails(), line);
}
