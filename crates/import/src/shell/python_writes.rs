//! Whether Python code writes a file (`open(..., 'w')`, `.write_text(`, `os.open` with write
//! flags, ...), and which literal paths it writes.

use regex::Regex;
use std::sync::OnceLock;

/// Python code (Inspect python() tool, `python -c`) that opens a file for writing (`open(...,
/// 'w'|'a'|'x'|'wb'|'r+'...)`, `.write_text(`, `.write_bytes(`).
pub fn python_writes_file(code: &str) -> bool {
    python_write_targets(code).0
}

/// The arguments of a Python call, `s` starting just after its `(`: split at top-level
/// commas, strings and brackets stepped over.
fn py_call_args(s: &str) -> Vec<&str> {
    let b = s.as_bytes();
    let mut args = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            q @ (b'\'' | b'"') => {
                if b[i..].starts_with(&[q, q, q]) {
                    i += 3;
                    while i < b.len() && !b[i..].starts_with(&[q, q, q]) {
                        i += if b[i] == b'\\' { 2 } else { 1 };
                    }
                    i += 3;
                } else {
                    i += 1;
                    while i < b.len() && b[i] != q && b[i] != b'\n' {
                        i += if b[i] == b'\\' { 2 } else { 1 };
                    }
                    i += 1;
                }
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                if depth == 0 {
                    let last = s[start..i].trim();
                    if !last.is_empty() {
                        args.push(last);
                    }
                    return args;
                }
                depth -= 1;
            }
            b',' if depth == 0 => {
                args.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    let last = s.get(start..).unwrap_or("").trim();
    if !last.is_empty() {
        args.push(last);
    }
    args
}

/// The text of a plain Python string literal (`'w'`, `r"a.txt"`), None for anything else.
fn py_str_literal(arg: &str) -> Option<String> {
    let a = arg.trim();
    let a = a.trim_start_matches(['r', 'R', 'b', 'B', 'u', 'U']);
    let q = a.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let inner = a.strip_prefix(q)?.strip_suffix(q)?;
    if inner.contains(q) {
        return None;
    }
    Some(inner.to_string())
}

fn is_write_mode(m: &str) -> bool {
    !m.is_empty() && m.chars().all(|c| "rwxabtU+".contains(c)) && m.chars().any(|c| "wax+".contains(c))
}

fn kwarg<'a>(args: &[&'a str], name: &str) -> Option<&'a str> {
    args.iter().find_map(|a| {
        let (k, v) = a.split_once('=')?;
        (k.trim() == name && !v.starts_with('=')).then_some(v)
    })
}

fn positional_args<'a>(args: &[&'a str]) -> Vec<&'a str> {
    args.iter()
        .copied()
        .filter(|a| {
            a.split_once('=').is_none_or(|(k, v)| {
                let k = k.trim();
                v.starts_with('=') || k.is_empty() || !k.chars().all(|c| c.is_alphanumeric() || c == '_')
            })
        })
        .collect()
}

/// Whether the code writes a file, the literal paths it writes, and whether every write
/// names its path literally.
pub(super) fn python_write_targets(code: &str) -> (bool, Vec<String>, bool) {
    struct Res {
        write_method: Regex,
        path_write: Regex,
        open: Regex,
        path_before: Regex,
    }
    static RES: OnceLock<Res> = OnceLock::new();
    let res = RES.get_or_init(|| {
        let lit = r#"[rRbBuU]?(?:'([^'\n]*)'|"([^"\n]*)")"#;
        Res {
            write_method: Regex::new(r"\.write_(?:text|bytes)\s*\(").expect("regex"),
            path_write: Regex::new(&format!(
                r"\b(?:Path|PurePath|PosixPath)\(\s*{lit}\s*\)\s*\.write_(?:text|bytes)\s*\("
            ))
            .expect("regex"),
            open: Regex::new(r"\bopen\s*\(").expect("regex"),
            path_before: Regex::new(&format!(r"\b(?:Path|PurePath|PosixPath)\(\s*{lit}\s*\)\s*$")).expect("regex"),
        }
    });
    let lit_of = |c: &regex::Captures| -> String {
        c.get(1).or_else(|| c.get(2)).map_or(String::new(), |m| m.as_str().to_string())
    };
    let mut writes = false;
    let mut paths = Vec::new();
    let mut all_known = true;

    let method_writes = res.write_method.find_iter(code).count();
    if method_writes > 0 {
        writes = true;
        let literal: Vec<String> = res.path_write.captures_iter(code).map(|c| lit_of(&c)).collect();
        if literal.len() < method_writes {
            all_known = false;
        }
        paths.extend(literal);
    }

    for m in res.open.find_iter(code) {
        let before = &code[..m.start()];
        let args = py_call_args(&code[m.end()..]);
        let pos = positional_args(&args);
        let (mode, path): (Option<&str>, Option<&str>) = if let Some(recv) = before.strip_suffix('.') {
            let start = recv.rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.')).map_or(0, |k| k + 1);
            let name = recv[start..].rsplit('.').next().unwrap_or("");
            match name {
                "os" => {
                    let flags = ["O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"];
                    if args.iter().skip(1).any(|a| flags.iter().any(|f| a.contains(f))) {
                        writes = true;
                        match pos.first().and_then(|p| py_str_literal(p)) {
                            Some(p) => paths.push(p),
                            None => all_known = false,
                        }
                    }
                    continue;
                }
                "io" | "codecs" | "gzip" | "bz2" | "lzma" => {
                    (kwarg(&args, "mode").or(pos.get(1).copied()), pos.first().copied())
                }
                // a method: `Path(...).open(mode)`
                _ => {
                    let mode = kwarg(&args, "mode").or(pos.first().copied());
                    if mode.and_then(py_str_literal).is_some_and(|m| is_write_mode(&m)) {
                        writes = true;
                        match res.path_before.captures(recv) {
                            Some(c) => paths.push(lit_of(&c)),
                            None => all_known = false,
                        }
                    }
                    continue;
                }
            }
        } else {
            (kwarg(&args, "mode").or(pos.get(1).copied()), pos.first().copied())
        };
        if mode.and_then(py_str_literal).is_some_and(|m| is_write_mode(&m)) {
            writes = true;
            match path.and_then(py_str_literal) {
                Some(p) => paths.push(p),
                None => all_known = false,
            }
        }
    }
    (writes, paths, all_known)
}
