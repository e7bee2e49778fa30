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

/// Runs the Python script `script` (under `tests/python/`) with `args`, with the Python that
/// `TTRACE_PYTHON` names (default `python3`), which must have the packages `packages`
/// (`pip install <packages>`); its standard output. Fails the test, naming what to install,
/// when that Python or a package is missing, and with the script's one-line error when it
/// fails.
pub fn python<S: AsRef<OsStr>>(script: &str, packages: &str, args: &[S]) -> String {
    let python = std::env::var("TTRACE_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = format!("{}/python/{script}", env!("CARGO_MANIFEST_DIR"));
    let install = format!(
        "this test needs python3 with {packages} installed (pip install {packages}; \
         TTRACE_PYTHON names the python to use)"
    );
    let out = Command::new(&python)
        .arg(&script)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e}: {install}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("ModuleNotFoundError") {
        panic!("{python} {script}: {stderr}\n{install}");
    }
    assert!(out.status.success(), "{python} {script}: {stderr}");
    String::from_utf8(out.stdout).expect("the script prints UTF-8")
}
