//! The shape of the crates, read from their sources: which module uses which, and where a
//! type is implemented.
//!
//! Each library crate's `lib.rs` (and each `mod.rs`) lists its modules from the bottom up;
//! a module may use only the modules listed before it. That makes the list the layer map
//! of the crate: no module uses one above it, and there is no circle. A use is a path in
//! code (`crate::ring::Ring`, `use crate::{aux, lock}`, `super::Schema`), comments and
//! strings left out; a name that `lib.rs` re-exports (`crate::Writer`) counts as a use of
//! the module it comes from. A directory module's `mod.rs` is the bottom of its own
//! list: its children may use it, and it declares them and re-exports from them, nothing
//! more.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// A use of a module listed later than the user.
#[derive(Debug, PartialEq, Eq)]
pub struct Upward {
    /// The file that uses it.
    pub file: PathBuf,
    /// The module used, as `lib.rs` (or `mod.rs`) lists it.
    pub uses: String,
}

/// The code of a Rust source file without its comments and the contents of its string and
/// character literals, so that only paths in code are seen.
pub fn code_of(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i] == b'"'
            || (b[i] == b'r' && b.get(i + 1).is_some_and(|&c| c == b'#' || c == b'"'))
        {
            // A string: plain, or raw with any number of `#`.
            let raw = b[i] == b'r';
            let mut hashes = 0;
            if raw {
                i += 1;
                while b[i] == b'#' {
                    hashes += 1;
                    i += 1;
                }
            }
            i += 1;
            while i < b.len() {
                if !raw && b[i] == b'\\' {
                    i += 2;
                    continue;
                }
                if b[i] == b'"'
                    && b[i + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&c| c == b'#')
                        .count()
                        == hashes
                {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
            out.push_str("\"\"");
        } else if b[i] == b'\'' && b.get(i + 2) == Some(&b'\'') {
            // A character literal (a lifetime has no closing quote two bytes on).
            i += 3;
            out.push_str("' '");
        } else if b[i] == b'\'' && b.get(i + 1) == Some(&b'\\') {
            i += 2;
            while i < b.len() && b[i] != b'\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else {
            let c = src[i..].chars().next().expect("a char");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// `code` (as [`code_of`] gives it) without its unit-test modules (`#[cfg(test)] mod x {
/// .. }`): tests may use any module of their crate.
pub fn without_tests(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(i) = rest.find("#[cfg(") {
        out.push_str(&rest[..i]);
        let after = &rest[i..];
        let attr_end = after.find(")]").map_or(after.len(), |e| e + 2);
        let (attr, body) = after.split_at(attr_end);
        let testing = attr
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .any(|w| w == "test");
        let head = body.trim_start();
        let is_mod = head.starts_with("mod ") || head.starts_with("pub mod ");
        match (testing && is_mod, body.find('{')) {
            (true, Some(open)) if !body[..open].contains(';') => {
                let mut depth = 0;
                let mut end = body.len();
                for (k, c) in body[open..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = open + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                rest = &body[end..];
            }
            _ => {
                out.push_str(attr);
                rest = body;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The files that `#[path = "file.rs"]` attributes name, by module: an attribute on the line
/// right before `mod name;` (read from the source itself: the code of [`code_of`] has no
/// string contents).
fn path_attributes(src: &str) -> HashMap<String, String> {
    let lines: Vec<&str> = src.lines().map(str::trim).collect();
    let mut paths = HashMap::new();
    for pair in lines.windows(2) {
        let Some(file) = pair[0]
            .strip_prefix("#[path = \"")
            .and_then(|p| p.split('"').next())
        else {
            continue;
        };
        let mut name = pair[1]
            .trim_end_matches(';')
            .split_whitespace()
            .skip_while(|w| *w != "mod");
        if let Some(name) = name.nth(1) {
            paths.insert(name.to_string(), file.to_string());
        }
    }
    paths
}

/// The modules a `lib.rs` or `mod.rs` declares, in order, with their files.
fn modules(dir: &Path, code: &str, paths: &HashMap<String, String>) -> Vec<(String, PathBuf)> {
    let mut list = Vec::new();
    for line in code.lines() {
        let words: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || c == ';')
            .filter(|w| !w.is_empty())
            .collect();
        let Some(at) = words.iter().position(|&w| w == "mod") else {
            continue;
        };
        // `mod name;` (with `pub`, `pub(crate)` or attributes before it), not `mod name {`.
        if !line.trim_end().ends_with(';') || at + 1 >= words.len() {
            continue;
        }
        let name = words[at + 1].to_string();
        let file = if let Some(p) = paths.get(&name) {
            dir.join(p)
        } else if dir.join(format!("{name}.rs")).exists() {
            dir.join(format!("{name}.rs"))
        } else {
            dir.join(&name).join("mod.rs")
        };
        list.push((name, file));
    }
    list
}

/// The first segments of the paths in `code` that start with `prefix` (`crate::` or
/// `super::`), grouped imports (`crate::{a, b::c}`) included.
fn used(code: &str, prefix: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + prefix.len()..];
        // `$crate::` is a macro's own crate; `foo_crate::` another name.
        if before.is_some_and(|c| c == '$' || c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let first: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !first.is_empty() {
                    names.push(first);
                }
            }
        } else {
            let first: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !first.is_empty() {
                names.push(first);
            }
        }
    }
    names
}

/// The names a `lib.rs` or `mod.rs` re-exports from its own modules: name → module.
fn reexports(code: &str, mods: &[(String, PathBuf)]) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for stmt in code.split(';') {
        let stmt = stmt.trim();
        let Some(path) = stmt
            .strip_prefix("pub use ")
            .or_else(|| stmt.strip_prefix("pub(crate) use "))
        else {
            continue;
        };
        let path = path.trim_start_matches("self::");
        let Some((module, items)) = path.split_once("::") else {
            continue;
        };
        if !mods.iter().any(|(m, _)| m == module) {
            continue;
        }
        let items = items.trim().trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let item = item.trim();
            let name = match item.split_once(" as ") {
                Some((_, alias)) => alias.trim(),
                None => item.rsplit("::").next().unwrap_or(item).trim(),
            };
            if !name.is_empty() {
                map.insert(name.to_string(), module.to_string());
            }
        }
    }
    map
}

/// Every use, in the crate whose `lib.rs` is `lib`, of a module listed after the user.
pub fn upward_uses(lib: &Path) -> Vec<Upward> {
    let mut found = Vec::new();
    check_level(lib, lib, "crate::", &mut found);
    found
}

/// Checks the modules `root` (a `lib.rs` or `mod.rs`) lists, against each other: each
/// module's file and files below it may use, through `prefix` (`crate::` at the top,
/// `super::` from a child of a directory module), only modules listed before it.
fn check_level(lib: &Path, root: &Path, prefix: &str, found: &mut Vec<Upward>) {
    let dir = root.parent().expect("a source directory");
    let root_code = code_of(&std::fs::read_to_string(root).expect("readable source"));
    let raw = std::fs::read_to_string(root).expect("readable source");
    let mods = modules(dir, &root_code, &path_attributes(&raw));
    let names = reexports(&root_code, &mods);
    let rank = |name: &str| {
        mods.iter().position(|(m, _)| m == name).or_else(|| {
            names
                .get(name)
                .and_then(|m| mods.iter().position(|(n, _)| n == m))
        })
    };
    for (k, (_, file)) in mods.iter().enumerate() {
        for f in files_of(file) {
            let code = without_tests(&code_of(
                &std::fs::read_to_string(&f).expect("readable source"),
            ));
            // From below a directory module, `super::` reaches this level only from its
            // direct children; deeper files reach it through `crate::`.
            let mut uses = Vec::new();
            if root == lib {
                uses.extend(used(&code, "crate::"));
            } else if f.parent() == Some(dir) || f == *file {
                uses.extend(used(&code, prefix));
            }
            for u in uses {
                if let Some(r) = rank(&u) {
                    if r > k {
                        found.push(Upward {
                            file: f.clone(),
                            uses: u,
                        });
                    }
                }
            }
        }
        // A directory module: its children against each other, `mod.rs` at the bottom.
        if file.ends_with("mod.rs") {
            check_level(lib, file, "super::", found);
        }
    }
}

/// The file of a module and, for a directory module, every file below it.
fn files_of(file: &Path) -> Vec<PathBuf> {
    match file.ends_with("mod.rs") {
        true => rust_files(file.parent().expect("a directory")),
        false => vec![file.to_path_buf()],
    }
}

/// The files of the crate under `src` that implement `ty` (`impl Ty`, `impl<..> Ty<..>`,
/// `impl Trait for Ty`).
pub fn implementing(src: &Path, ty: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for f in rust_files(src) {
        let code = code_of(&std::fs::read_to_string(&f).expect("readable source"));
        let mut rest = code.as_str();
        let mut implements = false;
        while let Some(i) = rest.find("impl") {
            let before = rest[..i].chars().next_back();
            let after = &rest[i + 4..];
            rest = after;
            let word = before.is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
                && after.starts_with(|c: char| c.is_whitespace() || c == '<');
            if !word {
                continue;
            }
            let head = after.split('{').next().unwrap_or("");
            let head = head.trim_start();
            let head = if head.starts_with('<') {
                skip_generics(head)
            } else {
                head
            };
            let target = head.rsplit(" for ").next().unwrap_or(head).trim_start();
            let path = target
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .next()
                .unwrap_or("");
            implements |= path.rsplit("::").next() == Some(ty);
        }
        if implements {
            out.push(f);
        }
    }
    out
}

/// Every `.rs` file below `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("readable directory") {
            let p = e.expect("an entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

/// `s` after its leading `<...>`.
fn skip_generics(s: &str) -> &str {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => {
                depth -= 1;
                if depth == 0 {
                    return &s[i + 1..];
                }
            }
            _ => {}
        }
    }
    ""
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_keeps_paths_and_drops_comments_and_strings() {
        let src = "use crate::a; // crate::b\n/* crate::c */ let s = \"crate::d\"; let c = '\"';\nr#\"crate::e\"#; crate::{f, g::h};";
        let code = code_of(src);
        assert_eq!(used(&code, "crate::"), ["a", "f", "g"]);
        assert_eq!(
            used("$crate::x y_crate::z", "crate::"),
            Vec::<String>::new()
        );
    }
}
