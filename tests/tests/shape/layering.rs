//! The crates keep their shape: in each library crate no module uses one listed after it in
//! its `lib.rs` (the layer map: no circle, nothing running back up), and each role of the
//! device is implemented in one file.

use std::path::{Path, PathBuf};
use ttrace_tests::layers::{implementing, upward_uses};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn no_module_uses_one_listed_after_it() {
    let mut found = Vec::new();
    for krate in [
        "layouts",
        "devttrace",
        "model",
        "ttrace-core",
        "snapshots",
        "ttrace-reader",
        "ttrace-tracing",
    ] {
        let lib = root().join(krate).join("src/lib.rs");
        assert!(lib.exists(), "{}", lib.display());
        found.extend(upward_uses(&lib));
    }
    let lines: Vec<String> = found
        .iter()
        .map(|u| format!("{} uses `{}`, listed after it", u.file.display(), u.uses))
        .collect();
    assert!(lines.is_empty(), "{}", lines.join("\n"));
}

#[test]
fn each_role_of_the_device_is_implemented_in_one_file() {
    for (krate, ty, file) in [
        ("devttrace", "Mapping", "mapping.rs"),
        ("devttrace", "Reader", "reader.rs"),
        ("devttrace", "Device", "device.rs"),
        ("ttrace-core", "Writer", "writer.rs"),
    ] {
        let src = root().join(krate).join("src");
        let files = implementing(&src, ty);
        assert_eq!(files, [src.join(file)], "{krate}: {ty}");
    }
}

#[test]
fn the_check_finds_a_use_of_a_later_module() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path();
    std::fs::write(
        src.join("lib.rs"),
        "pub mod low;\npub mod high;\npub use high::Top;\n",
    )
    .unwrap();
    std::fs::write(src.join("high.rs"), "use crate::low::x;\npub struct Top;\n").unwrap();
    std::fs::write(src.join("low.rs"), "// crate::high in a comment is no use\npub fn x() -> crate::Top { crate::Top }\nimpl crate::Top {}\n").unwrap();
    let found = upward_uses(&src.join("lib.rs"));
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(found
        .iter()
        .all(|u| u.file.ends_with("low.rs") && u.uses == "Top"));
    assert_eq!(implementing(src, "Top"), [src.join("low.rs")]);
}

#[test]
fn the_check_reads_a_module_from_the_file_its_path_attribute_names() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path();
    std::fs::write(
        src.join("lib.rs"),
        "#[path = \"below.rs\"]\npub mod low;\npub mod high;\n",
    )
    .unwrap();
    std::fs::write(src.join("high.rs"), "pub struct Top;\n").unwrap();
    std::fs::write(
        src.join("below.rs"),
        "pub fn x() -> crate::high::Top { todo!() }\n",
    )
    .unwrap();
    let found = upward_uses(&src.join("lib.rs"));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].file.ends_with("below.rs"), "{found:?}");
}
