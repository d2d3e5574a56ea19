//! Searching (`grep`, `rg`, `find`, `fd`) and the commands another one runs (`xargs CMD`,
//! `find -exec CMD`, `fd -x CMD`, `command CMD`).

use super::args::{has, positionals};
use super::classify::{classify_cmd, mutation, read, Class};
use super::unwrap::{skip_opts, unwrap};

pub(super) fn search_tool(prog: &str, args: &[String]) -> Class {
    let values = match prog {
        "rg" => {
            "-e -f -g --glob --iglob -t --type -T --type-not -m --max-count -A -B -C -M \
            --max-columns -j --threads --max-depth -d -r --replace -E --encoding --sort --sortr \
            --color --colors --type-add"
        }
        "ag" | "ack" => "-G --file-search-regex -A -B -C -m --ignore --ignore-dir --depth",
        _ => {
            "-e -f -m -A -B -C -d -D --regexp --file --max-count --include --exclude \
            --exclude-dir --color --colour --label --binary-files"
        }
    };
    let pattern_given = has(args, "-e -f --regexp --file");
    let pos = positionals(args, values);
    let paths = if pattern_given { pos } else { pos.into_iter().skip(1).collect() };
    Class::Read("search", paths)
}

/// A command another one runs (`xargs CMD`, `find -exec CMD`): what it does to files, never a
/// check of its own.
pub(super) fn sub_command(words: &[String]) -> Class {
    if words.is_empty() {
        return read(Vec::new());
    }
    let (s, shell) = unwrap(words);
    if shell.is_some() {
        return Class::Opaque;
    }
    match classify_cmd(&words[s..], &[], "") {
        Class::Check(_) => read(Vec::new()),
        c => c,
    }
}

pub(super) fn xargs(args: &[String]) -> Class {
    let values = "-n -I -P -d -L -s -a -E --max-args --replace --delimiter --arg-file --max-procs \
        --max-lines --max-chars --eof";
    let i = skip_opts(args, 0, values);
    sub_command(&args[i..])
}

// Reading: `find -delete` is a deletion and `find -exec CMD` does what CMD does, both under
// the directories find starts from; a find that only lists is a search.
pub(super) fn find(args: &[String]) -> Class {
    let mut i = 0;
    while args.get(i).is_some_and(|a| matches!(a.as_str(), "-L" | "-H" | "-P")) {
        i += 1;
    }
    let mut dirs = Vec::new();
    while let Some(a) = args.get(i) {
        if a.starts_with('-') || a == "(" || a == "!" {
            break;
        }
        dirs.push(a.clone());
        i += 1;
    }
    while i < args.len() {
        match args[i].as_str() {
            "-delete" => return mutation("delete", dirs),
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                let end = args[i + 1..].iter().position(|a| a == ";" || a == "+").map_or(args.len(), |k| i + 1 + k);
                match sub_command(&args[i + 1..end]) {
                    Class::Mut { kind, .. } => return mutation(kind, dirs),
                    Class::Opaque => return Class::Opaque,
                    _ => {}
                }
                i = end + 1;
            }
            "-fprint" | "-fprint0" | "-fprintf" | "-fls" => {
                return mutation("edit", args.get(i + 1).cloned().into_iter().collect());
            }
            _ => i += 1,
        }
    }
    Class::Read("search", dirs)
}

pub(super) fn fd(args: &[String]) -> Class {
    if let Some(k) = args.iter().position(|a| matches!(a.as_str(), "-x" | "--exec" | "-X" | "--exec-batch")) {
        return match sub_command(&args[k + 1..]) {
            Class::Mut { kind, .. } => mutation(kind, Vec::new()),
            Class::Opaque => Class::Opaque,
            _ => Class::Read("search", Vec::new()),
        };
    }
    let pos = positionals(args, "-e --extension -t --type -d --max-depth -E --exclude");
    Class::Read("search", pos.into_iter().skip(1).collect())
}
