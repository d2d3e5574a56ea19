//! Commands that edit files in place or write copies: `sed -i`, `perl -i`, `awk -i inplace`,
//! `cp` / `ln`, and Codex's `apply_patch`.

use regex::Regex;
use std::sync::OnceLock;

use super::args::{has, opt_value, positionals};
use super::classify::{mutation, read, Class};

pub(super) fn sed(args: &[String]) -> Class {
    let mut inplace = false;
    let mut script_given = false;
    let mut pos = Vec::new();
    let mut i = 0;
    let mut rest = false;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if rest || a == "-" || !a.starts_with('-') {
            pos.push(a.clone());
            continue;
        }
        if a == "--" {
            rest = true;
            continue;
        }
        if let Some(long) = a.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, _)) => (n, true),
                None => (long, false),
            };
            match name {
                "in-place" => inplace = true,
                "expression" | "file" => {
                    script_given = true;
                    if !inline {
                        i += 1;
                    }
                }
                "line-length" if !inline => i += 1,
                _ => {}
            }
            continue;
        }
        let chars: Vec<char> = a[1..].chars().collect();
        for (k, ch) in chars.iter().enumerate() {
            let last = k + 1 == chars.len();
            match ch {
                'i' => {
                    inplace = true;
                    // BSD sed's `-i ''`: an empty suffix given as its own word
                    if last && args.get(i).is_some_and(|s| s.is_empty()) {
                        i += 1;
                    }
                    break; // the rest of the word is a backup suffix
                }
                'e' | 'f' => {
                    script_given = true;
                    if last {
                        i += 1;
                    }
                    break;
                }
                'l' => {
                    if last {
                        i += 1;
                    }
                    break;
                }
                _ => {}
            }
        }
    }
    let files: Vec<String> = if script_given { pos } else { pos.into_iter().skip(1).collect() };
    if inplace {
        mutation("edit", files)
    } else {
        read(files)
    }
}

pub(super) fn perl(args: &[String]) -> Class {
    let mut inplace = false;
    let mut script_given = false;
    let mut pos = Vec::new();
    let mut i = 0;
    let mut rest = false;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if rest || a == "-" || !a.starts_with('-') {
            pos.push(a.clone());
            continue;
        }
        if a == "--" {
            rest = true;
            continue;
        }
        let chars: Vec<char> = a[1..].chars().collect();
        for (k, ch) in chars.iter().enumerate() {
            match ch {
                'i' => {
                    inplace = true;
                    break;
                }
                'e' | 'E' => {
                    script_given = true;
                    if k + 1 == chars.len() {
                        i += 1;
                    }
                    break;
                }
                // options whose argument is the rest of the word
                'M' | 'm' | 'I' | 'l' | '0' | 'x' | 'C' | 'd' | 'D' | 'F' => break,
                _ => {}
            }
        }
    }
    let files: Vec<String> = if script_given { pos } else { pos.into_iter().skip(1).collect() };
    if inplace {
        mutation("edit", files)
    } else {
        Class::Opaque
    }
}

pub(super) fn awk(args: &[String]) -> Class {
    let inplace = args.iter().enumerate().any(|(k, a)| {
        a == "-iinplace"
            || a == "--include=inplace"
            || ((a == "-i" || a == "--include") && args.get(k + 1).map(String::as_str) == Some("inplace"))
    });
    let values = "-F -v -f -i --include --field-separator --assign --file";
    let script_given = has(args, "-f --file");
    let pos = positionals(args, values);
    let files: Vec<String> = if script_given { pos } else { pos.into_iter().skip(1).collect() };
    if inplace {
        mutation("edit", files)
    } else {
        read(files)
    }
}

/// `cp` and `ln` change only their destination: the last operand or `-t DIR`.
pub(super) fn copy_like(args: &[String], kind: &'static str) -> Class {
    let values = "-t --target-directory -S --suffix";
    let pos = positionals(args, values);
    let target = opt_value(args, "-t --target-directory");
    let decide: Vec<String> = match &target {
        Some(t) => vec![t.clone()],
        None if pos.len() >= 2 => pos.last().cloned().into_iter().collect(),
        None => Vec::new(),
    };
    let mut paths = pos;
    paths.extend(target);
    Class::Mut { kind, paths, decide }
}

pub(super) fn apply_patch(text: &str) -> Class {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"(?m)^\*\*\* (Add File|Update File|Delete File|Move to): *(.+?)\s*$").expect("regex")
    });
    let mut paths = Vec::new();
    let (mut adds, mut deletes, mut others) = (0, 0, 0);
    for c in re.captures_iter(text) {
        match &c[1] {
            "Add File" => adds += 1,
            "Delete File" => deletes += 1,
            _ => others += 1,
        }
        paths.push(c[2].to_string());
    }
    let kind = if adds > 0 && deletes == 0 && others == 0 {
        "create"
    } else if deletes > 0 && adds == 0 && others == 0 {
        "delete"
    } else {
        "edit"
    };
    mutation(kind, paths)
}
