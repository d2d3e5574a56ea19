//! `git` subcommands: which read, which change the working tree's files, which change none.

use super::args::{has, positionals};
use super::checks::det;
use super::classify::{generic, mutation, read, Class};

pub(super) fn git(args: &[String]) -> Class {
    let mut j = 0;
    while let Some(a) = args.get(j) {
        if !a.starts_with('-') {
            break;
        }
        let takes = ["-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"].contains(&a.as_str());
        j += if takes { 2 } else { 1 };
    }
    let Some(sub) = args.get(j).map(String::as_str) else {
        return generic(args);
    };
    let rest = &args[j + 1..];
    let after_dd = || -> Vec<String> { rest.iter().skip_while(|a| *a != "--").skip(1).cloned().collect() };
    match sub {
        "status" | "log" | "show" | "blame" | "ls-files" | "ls-tree" | "rev-parse" | "describe" | "shortlog"
        | "reflog" | "remote" | "branch" | "tag" | "cat-file" | "rev-list" | "show-ref" | "for-each-ref"
        | "name-rev" | "merge-base" | "whatchanged" | "version" | "help" => read(after_dd()),
        "diff" => {
            if has(rest, "--check") {
                det(rest)
            } else {
                read(after_dd())
            }
        }
        "grep" => Class::Read("search", after_dd()),
        // Reading: `fetch`, `push`, `config` and `init` change no file of the working tree
        // either, like the `commit` / `add` § 4 names.
        "commit" | "add" | "config" | "fetch" | "push" | "init" => Class::Inert,
        // Reading (against importers-v1 §4, which calls `git stash` no mutation): stashing
        // puts the working tree back to HEAD, so it changes the files a check tested
        // (docs/importers.md §10).
        "stash" => match rest.first().map(String::as_str) {
            None | Some("push" | "save") => mutation("edit", Vec::new()),
            Some(s) if s.starts_with('-') => mutation("edit", Vec::new()),
            Some("pop" | "apply" | "branch") => mutation("edit", Vec::new()),
            Some("list" | "show") => read(Vec::new()),
            Some("drop" | "clear" | "create" | "store") => Class::Inert,
            _ => Class::Opaque,
        },
        "apply" => {
            // Reading: `git apply --check` / `--stat` only report what the patch would do.
            if has(rest, "--check --stat --numstat --summary") && !has(rest, "--apply") {
                read(Vec::new())
            } else {
                mutation("edit", Vec::new())
            }
        }
        // Reading: `git rebase` rewrites the working tree like `merge` and `cherry-pick`.
        "am" | "revert" | "merge" | "cherry-pick" | "pull" | "rebase" => mutation("edit", Vec::new()),
        "checkout" => {
            if rest.iter().any(|a| a == "--") {
                mutation("edit", after_dd())
            } else if positionals(rest, "").iter().any(|a| a == ".") {
                mutation("edit", vec![".".to_string()])
            } else if has(rest, "-b -B") && positionals(rest, "-b -B").is_empty() {
                // Reading: a new branch at HEAD leaves the files as they are.
                Class::Inert
            } else {
                Class::Opaque
            }
        }
        "switch" => {
            if has(rest, "-c -C --create") && positionals(rest, "-c -C --create").is_empty() {
                Class::Inert
            } else {
                Class::Opaque
            }
        }
        "restore" => {
            // Reading: `git restore --staged` alone touches the index, not the files.
            if has(rest, "--staged -S") && !has(rest, "--worktree -W") {
                Class::Inert
            } else {
                mutation("edit", positionals(rest, "-s --source"))
            }
        }
        "reset" => {
            // Reading: only `--hard` (and `--merge` / `--keep`) reset the files; a soft or
            // mixed reset moves HEAD and the index.
            if has(rest, "--hard --merge --keep") {
                mutation("edit", Vec::new())
            } else {
                Class::Inert
            }
        }
        "rm" => {
            if has(rest, "--cached") {
                Class::Inert
            } else {
                mutation("delete", positionals(rest, ""))
            }
        }
        "mv" => mutation("edit", positionals(rest, "")),
        // Reading: `git clean` removes files, like `rm`; with `-n` it only lists them.
        "clean" => {
            let dry = rest
                .iter()
                .any(|a| a == "--dry-run" || (a.starts_with('-') && !a.starts_with("--") && a.contains('n')));
            if dry {
                read(Vec::new())
            } else {
                mutation("delete", Vec::new())
            }
        }
        _ => Class::Opaque,
    }
}
