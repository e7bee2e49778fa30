//! The names of a tracepoint's arguments, from its format string: a placeholder's name, or
//! `argN` for an unnamed one (N its place), made unique (`a`, `a_1`, ...). What the exports
//! name fields by, what `report --by` and the snapshot rules (`event NAME if ARG == 3`) take.

use ttrace_layouts::format::{Token, Tokens};

/// The argument names of `format`, in the order of the argument words.
///
/// ```
/// assert_eq!(ttrace_model::arguments::names("{a} {a} {a_1} {} {:x}"), ["a", "a_1", "a_1_1", "arg3", "arg4"]);
/// ```
pub fn names(format: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for token in Tokens::new(format) {
        if let Token::Arg { name, .. } = token {
            let base = match name.is_empty() {
                true => format!("arg{}", names.len()),
                false => name.to_string(),
            };
            let name = unique(&base, |n| names.iter().any(|a| a == n));
            names.push(name);
        }
    }
    names
}

/// `base`, or `base_1`, `base_2`, ...: the first that `taken` says is free.
pub fn unique(base: &str, taken: impl Fn(&str) -> bool) -> String {
    let mut name = base.to_string();
    let mut k = 1;
    while taken(&name) {
        name = format!("{base}_{k}");
        k += 1;
    }
    name
}
