//! Reading a command's arguments: option lists, option values and positional operands.

/// Whether `w` is one of the space-separated words of `list` (option and program lists are
/// written as one string each).
pub(super) fn listed(list: &str, w: &str) -> bool {
    list.split_whitespace().any(|v| v == w)
}

/// `names` given as words; a long name also matches `--name=value`.
pub(super) fn has(args: &[String], names: &str) -> bool {
    args.iter().any(|a| {
        names
            .split_whitespace()
            .any(|n| a == n || (n.starts_with("--") && a.strip_prefix(n).is_some_and(|r| r.starts_with('='))))
    })
}

/// The value of the first of the options `names` (`-t DIR`, `--target-directory=DIR`).
pub(super) fn opt_value(args: &[String], names: &str) -> Option<String> {
    for (k, a) in args.iter().enumerate() {
        for n in names.split_whitespace() {
            if a == n {
                return args.get(k + 1).cloned();
            }
            if let Some(v) = a.strip_prefix(n).and_then(|r| r.strip_prefix('=')) {
                return Some(v.to_string());
            }
        }
    }
    None
}

/// Words that are not options (a lone `-` is one), skipping the value of each option in
/// `values` written apart from it; every word after `--`.
pub(super) fn positionals(args: &[String], values: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut rest = false;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if rest || a == "-" || !a.starts_with('-') {
            out.push(a.clone());
        } else if a == "--" {
            rest = true;
        } else if listed(values, a) {
            i += 1;
        }
    }
    out
}
