//! What does not compile, and what the compiler then says: each case is a small program
//! using `ttrace-core`, built in a project of its own; a case's errors must name what is
//! wrong (the placeholder, the spec, the valid ones). One case that must compile keeps the
//! harness honest.
//!
//! `cargo build`, not `cargo check`: an argument's type is checked against its spec in a
//! constant of a generic function, which only a build instantiates.
//!
//! The project resolves its dependencies from this workspace's `Cargo.lock`, offline: the
//! workspace's own build has already fetched them.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// `(case, program, what its errors must contain)`; an empty list: it must compile.
const CASES: &[(&str, &str, &[&str])] = &[
    (
        "compiles",
        r#"
        use ttrace_core::{point, tracepoint, values};
        values!(static OPEN_FLAGS: flags = { O_RDONLY = 0, O_WRONLY = 1, O_CREAT = 0o100 });
        values!(static STATE: enum = { Idle = 0, Busy = 1, Lost = -1 });
        tracepoint!(static OPEN: Entry = "open", "path={path:s} flags={flags:OPEN_FLAGS} state={state:STATE}", OPEN_FLAGS, STATE);
        tracepoint!(static MIXED: Start = "mixed", "fd={fd} ok={ok} f={f} s={s} c={c} p={p} h={h:x} u={u:u} b={b:b}");
        fn main() {
            let name = String::from("x");
            point!(OPEN, format!("/tmp/{name}").as_str(), 0o101u32, -1i32);
            point!(MIXED, -3i32, true, 1.5f64, "s", 'c', &name as *const String, 255u8, -1i64, 2u32);
        }
        "#,
        &[],
    ),
    (
        "unknown_spec",
        r#"
        ttrace_core::tracepoint!(static T: Start = "t", "n={n:q}");
        fn main() { ttrace_core::point!(T, 1u32); }
        "#,
        &[
            "tracepoint `t`: placeholder `{n:q}` has an unknown spec `q`",
            "u (unsigned), d (signed), x (hex), f (float), s (string), b (bool), c (char)",
        ],
    ),
    (
        "string_as_hex",
        r#"
        ttrace_core::tracepoint!(static OPEN: Entry = "open", "path={path:x}");
        fn main() { ttrace_core::point!(OPEN, "/etc/hosts"); }
        "#,
        &["tracepoint `open`: placeholder `{path:x}` cannot show a string (argument 1)"],
    ),
    (
        "integer_as_string",
        r#"
        ttrace_core::tracepoint!(static T: Start = "t", "a={a} n={n:s}");
        fn main() { ttrace_core::point!(T, 1u8, 5u32); }
        "#,
        &["placeholder `{n:s}` cannot show a u32 (argument 2)"],
    ),
    (
        "float_as_table",
        r#"
        ttrace_core::values!(static STATE: enum = { Idle = 0, Busy = 1 });
        ttrace_core::tracepoint!(static T: Start = "t", "s={s:STATE}", STATE);
        fn main() { ttrace_core::point!(T, 1.0f64); }
        "#,
        &["placeholder `{s:STATE}` cannot show a float"],
    ),
    (
        "table_not_listed",
        r#"
        ttrace_core::values!(static STATE: enum = { Idle = 0, Busy = 1 });
        ttrace_core::tracepoint!(static T: Start = "t", "s={s:STATE}");
        fn main() { ttrace_core::point!(T, 1u32); let _ = &STATE; }
        "#,
        &["placeholder `{s:STATE}` has an unknown spec `STATE`"],
    ),
    (
        "table_not_used",
        r#"
        ttrace_core::values!(static STATE: enum = { Idle = 0, Busy = 1 });
        ttrace_core::tracepoint!(static T: Start = "t", "s={s}", STATE);
        fn main() { ttrace_core::point!(T, 1u32); }
        "#,
        &["tracepoint `t` lists value table `STATE` but no placeholder of its format names it"],
    ),
    (
        "table_repeats_a_value",
        r#"
        ttrace_core::values!(static STATE: enum = { Idle = 0, Busy = 1, Done = 1 });
        fn main() { let _ = &STATE; }
        "#,
        &["a value table names each value once: a value has two names"],
    ),
    (
        "table_repeats_a_name",
        r#"
        ttrace_core::values!(static F: flags = { A = 1, B = 2, A = 4 });
        fn main() { let _ = &F; }
        "#,
        &["a value table names each value once: a name is repeated"],
    ),
    (
        "table_of_no_kind",
        r#"
        ttrace_core::values!(static F: bitmask = { A = 1 });
        fn main() {}
        "#,
        &["no rules expected"],
    ),
    (
        "unclosed_brace",
        r#"
        ttrace_core::tracepoint!(static T: Start = "t", "n={n");
        fn main() { ttrace_core::point!(T, 1u32); }
        "#,
        &["the `{` at byte 2 of its format is never closed"],
    ),
];

/// Each case's error messages, from one `cargo build` of them all.
fn check_all() -> BTreeMap<String, Vec<String>> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("compile-errors");
    let bins = dir.join("src/bin");
    let _ = std::fs::remove_dir_all(&bins);
    std::fs::create_dir_all(&bins).unwrap();
    let core = workspace.join("ttrace-core");
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"ttrace-compile-errors\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
             publish = false\n\n[dependencies]\nttrace-core = {{ path = {:?} }}\n\n[workspace]\n",
            core.display().to_string()
        ),
    )
    .unwrap();
    std::fs::copy(workspace.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    for (name, program, _) in CASES {
        std::fs::write(bins.join(format!("{name}.rs")), program).unwrap();
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "build",
            "--bins",
            "--keep-going",
            "--offline",
            "--message-format=json",
        ])
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env_remove("RUSTFLAGS")
        .output()
        .expect("cargo runs");
    let mut errors: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if v["reason"] != "compiler-message" || v["message"]["level"] != "error" {
            continue;
        }
        let target = v["target"]["name"].as_str().unwrap_or("?").to_string();
        let rendered = v["message"]["rendered"].as_str().unwrap_or("").to_string();
        errors.entry(target).or_default().push(rendered);
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("error: failed to") && !stderr.contains("no matching package"),
        "cargo could not set the project up:\n{stderr}"
    );
    errors
}

#[test]
fn malformed_formats_tables_and_arguments_fail_to_compile_naming_the_fault() {
    let errors = check_all();
    for (name, _, expected) in CASES {
        let got = errors.get(*name).cloned().unwrap_or_default();
        if expected.is_empty() {
            assert!(
                got.is_empty(),
                "case {name} must compile:\n{}",
                got.join("\n")
            );
            continue;
        }
        assert!(!got.is_empty(), "case {name} compiled");
        let all = got.join("\n");
        for want in *expected {
            assert!(
                all.contains(want),
                "case {name}: no error says {want:?}:\n{all}"
            );
        }
    }
}
