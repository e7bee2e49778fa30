//! Tracepoint names for `tracing` callsites, the same on every machine that builds the
//! program: `target::name`, and for an event without a name of its own (`tracing` names it
//! `event <file>:<line>`, the file as the compiler saw it: an absolute path for a crate
//! from the registry) `target::<file>:<line>` with the file relative to its crate.

use tracing_core::Metadata;

/// The directories of a crate that hold sources, as they appear in paths.
const CRATE_DIRS: [&str; 5] = ["src", "examples", "tests", "benches", "build"];

/// The tracepoint name of the callsite `meta` (whitespace made `_`, so that the name is one
/// word for `ctl` patterns and readers' columns).
pub(crate) fn of(meta: &Metadata<'_>) -> String {
    let name = match (
        meta.is_event(),
        meta.name().starts_with("event "),
        meta.file(),
    ) {
        (true, true, Some(file)) => format!(
            "{}::{}:{}",
            meta.target(),
            crate_relative(file),
            meta.line().unwrap_or(0)
        ),
        _ => format!("{}::{}", meta.target(), meta.name()),
    };
    name.chars()
        .map(|c| if c.is_whitespace() { '_' } else { c })
        .collect()
}

/// `file` from its crate's source directory on (`src/server.rs`): the part that names
/// the same file on every machine. A path with no such directory keeps its last two
/// components; a relative path without `..` is kept as it is (the workspace's own crates).
pub(crate) fn crate_relative(file: &str) -> &str {
    let file_rel = !file.starts_with(['/', '\\']) && file.get(1..2) != Some(":");
    if file_rel && !file.contains("..") {
        return file;
    }
    let parts: Vec<(usize, &str)> = file
        .match_indices(['/', '\\'])
        .map(|(i, _)| i + 1)
        .scan(0, |start, end| {
            let part = (*start, &file[*start..end - 1]);
            *start = end;
            Some(part)
        })
        .collect();
    if let Some(&(at, _)) = parts.iter().rev().find(|(_, p)| CRATE_DIRS.contains(p)) {
        return &file[at..];
    }
    match parts.last() {
        Some(&(at, _)) => &file[at..],
        None => file,
    }
}

#[cfg(test)]
mod tests {
    use super::crate_relative;

    #[test]
    fn machine_paths_are_cut_to_the_crate() {
        let cases = [
            (
                "/home/ann/.cargo/registry/src/index.crates.io-6f17d22bba15001f/mini-redis-0.4.1/src/server.rs",
                "src/server.rs",
            ),
            ("/build/ttrace/ttrace-tracing/examples/tokio.rs", "examples/tokio.rs"),
            ("C:\\Users\\ann\\app\\src\\main.rs", "src\\main.rs"),
            ("/opt/gen/out/bindings.rs", "out/bindings.rs"),
            ("/main.rs", "/main.rs"),
            ("ttrace-tracing/tests/spans.rs", "ttrace-tracing/tests/spans.rs"),
            ("../vendored/src/lib.rs", "src/lib.rs"),
            // A crate's own `src` inside a registry `src`: the innermost.
            ("/r/src/x-1.0/src/a/src.rs", "src/a/src.rs"),
        ];
        for (path, relative) in cases {
            assert_eq!(crate_relative(path), relative, "{path}");
        }
    }
}
