//! The installed programs some tests check ttrace's output with (babeltrace2, uftrace).
//! Those tests are `#[ignore = "needs <program>: apt install <program>"]`, so that
//! `cargo test --workspace` passes on a machine that has only Rust; CI runs them with
//! `-- --include-ignored`, where a missing program fails the test naming it.

use std::ffi::OsStr;
use std::process::{Command, Stdio};

/// Runs the installed `program` with `args`; its standard output and error. Fails the test,
/// naming the program and how to install it, when it is missing or does not succeed.
pub fn run<S: AsRef<OsStr>>(program: &str, args: &[S]) -> (String, String) {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!("{program}: {e}: this test needs {program} installed (apt install {program})")
        });
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        out.status.success(),
        "{program} {:?}: {stderr}",
        args.iter().map(AsRef::as_ref).collect::<Vec<_>>()
    );
    (stdout, stderr)
}
