//! A device or a snapshot file of a pre-release ttrace (layouts up to 3.3, snapshot formats
//! up to 4, under magics of their own) is recognised as older, and refused with a typed
//! error that says so: by readers, and by writers, which never write into it.

use devttrace::{Device, Error, PreRelease, Reader};
use ttrace_tests::{config, make_pre_release_device, make_pre_release_snapshot};

#[test]
fn a_pre_release_device_is_refused_by_readers_and_writers_alike() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    make_pre_release_device(&dir);
    let header = std::fs::read(dir.join("header")).unwrap();
    let d = dir.display();
    let line = format!(
        "{d}: a device of a pre-release ttrace (layout 3.3); this ttrace reads layout 1.0 \
         — remove it (rm -r {d}) and a writer creates it anew"
    );
    let refused = |e: Error| match e {
        Error::PreRelease {
            ref path,
            what: PreRelease::Device,
        } => {
            assert_eq!(path, &dir);
            assert_eq!(e.to_string(), line);
        }
        other => panic!("not a pre-release device: {other:?}"),
    };
    refused(Reader::open(&dir).err().expect("a reader refuses it"));
    refused(Device::attach(&dir).err().expect("attaching refuses it"));
    // A writer neither reads it nor makes it anew over it (as for any device of another
    // major version): the directory stays as it was.
    refused(
        Device::open(&config(&dir, 64, 2))
            .err()
            .expect("a writer refuses it"),
    );
    refused(
        ttrace_core::Writer::open(&config(&dir, 64, 2))
            .err()
            .expect("the writer crate refuses it"),
    );
    assert_eq!(std::fs::read(dir.join("header")).unwrap(), header);
}

#[test]
fn a_pre_release_snapshot_file_is_refused_as_one() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("old.ttrace");
    make_pre_release_snapshot(&tmp.path().join("dev"), &file);
    match Reader::open(&file).err().expect("refused") {
        e @ Error::PreRelease {
            what: PreRelease::Snapshot,
            ..
        } => assert_eq!(
            e.to_string(),
            format!(
                "{}: a snapshot of a pre-release ttrace (format 4); this ttrace reads format 1",
                file.display()
            )
        ),
        other => panic!("not a pre-release snapshot: {other:?}"),
    }
}
