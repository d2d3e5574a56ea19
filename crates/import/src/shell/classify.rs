//! What one command is (check, mutation, read, inert, opaque): the table of programs, with
//! the tools that need more than a line of it in the files beside this one.

// ---------------------------------------------------------------------------------------
// Classification of one command (words after unwrapping)

use super::args::{has, listed, opt_value, positionals};
use super::checks::{
    cargo, det, gradle, guarded, lint, make, mvn, node_pm, test, GO_VALUES, JS_SELECTORS, JS_VALUES, NOX_VALUES,
    PYTEST_VALUES, TOX_VALUES,
};
use super::edits::{apply_patch, awk, copy_like, perl, sed};
use super::git::git;
use super::lex::Redir;
use super::python::{classify_python, is_python};
use super::search::{fd, find, search_tool, sub_command, xargs};
use super::unwrap::basename;

pub(super) enum Class {
    Check(&'static str),
    /// `decide`: the paths that say whether the workspace changed (for `cp` only the
    /// destination); empty when the command names none, which means the workspace.
    Mut {
        kind: &'static str,
        paths: Vec<String>,
        decide: Vec<String>,
    },
    Read(&'static str, Vec<String>),
    Inert,
    Opaque,
}

pub(super) fn mutation(kind: &'static str, paths: Vec<String>) -> Class {
    Class::Mut { kind, decide: paths.clone(), paths }
}

pub(super) fn read(paths: Vec<String>) -> Class {
    Class::Read("read", paths)
}

/// An unrecognised program: opaque, unless all it was asked for is its version or help.
// Reading: `node --version`, `go version` and the like print and change nothing.
pub(super) fn generic(args: &[String]) -> Class {
    if args.len() == 1 && ["--version", "--help", "-h", "-V", "version"].contains(&args[0].as_str()) {
        read(Vec::new())
    } else {
        Class::Opaque
    }
}

const INERT: &str = "cd pushd popd export unset set true false : source . exit return sleep wait \
    shopt ulimit umask alias unalias hash trap clear deactivate declare typeset local readonly \
    read fi done esac for select }";
/// reading commands whose arguments are not paths
const READ_NO_PATHS: &str = "echo printf pwd which whereis type date whoami id uname hostname \
    printenv ps seq test [ [[ tr jq yq nproc free uptime locale man history basename dirname \
    groups arch";
/// reading commands whose operands are paths
const READ_PATHS: &str = "cat ls ll head tail wc file stat du df tree less more diff cmp nl sort \
    uniq cut tac xxd hexdump od strings realpath readlink md5sum sha1sum sha256sum sha512sum \
    cksum bat batcat column colordiff";

fn read_values(prog: &str) -> &'static str {
    match prog {
        "head" | "tail" => "-n -c --lines --bytes",
        "cut" => "-d -f -c -b --delimiter --fields",
        "sort" => "-k -t -o -S -T --key",
        "tree" => "-L -I -P",
        "ls" => "-I --ignore -w",
        "du" => "-d --max-depth",
        "diff" => "-U -C --label",
        "xxd" => "-l -s -c -g",
        "od" => "-N -j -t -A",
        _ => "",
    }
}

pub(super) fn classify_cmd(words: &[String], redirs: &[Redir], text: &str) -> Class {
    let Some(first) = words.first() else {
        return Class::Inert;
    };
    // Reading: a program is matched by its file name, so `.venv/bin/pytest` and `./gradlew`
    // are `pytest` and `gradlew`.
    let prog = basename(first);
    let args = &words[1..];
    if is_python(prog) {
        return classify_python(args, redirs);
    }
    classify_prog(prog, args, text)
}

pub(super) fn classify_prog(prog: &str, args: &[String], text: &str) -> Class {
    let a0 = args.first().map(String::as_str);
    let first_path = || args.first().cloned().into_iter().collect::<Vec<_>>();
    match prog {
        // checks: test runners
        "pytest" | "py.test" => test(args, PYTEST_VALUES, ""),
        "tox" => test(args, TOX_VALUES, ""),
        "nox" => test(args, NOX_VALUES, ""),
        "jest" | "mocha" => test(args, JS_VALUES, JS_SELECTORS),
        "vitest" => {
            let rest = if matches!(a0, Some("run" | "watch")) { &args[1..] } else { args };
            test(rest, JS_VALUES, JS_SELECTORS)
        }
        "rspec" => test(args, "--format -f --require -r --seed --order -o --out", "-e --example"),
        "phpunit" => test(args, "-c --configuration --bootstrap --log-junit", "--filter --testsuite --group"),
        "ctest" => test(args, "-j -C --test-dir -L -LE -E --timeout --repeat", "-R --tests-regex"),
        "go" => match a0 {
            Some("test") => test(&args[1..], GO_VALUES, ""),
            Some("vet") => lint(&args[1..]),
            Some("build") => det(&args[1..]),
            _ => generic(args),
        },
        "cargo" => cargo(args),
        "npm" | "pnpm" | "yarn" => node_pm(prog, args),
        "bun" if a0 == Some("test") => test(&args[1..], JS_VALUES, JS_SELECTORS),
        "mvn" | "mvnw" => mvn(args),
        "gradle" | "gradlew" => gradle(args),
        "make" | "gmake" => make(args),
        "dotnet" if a0 == Some("test") => {
            test(&args[1..], "-c --configuration -f --framework -l --logger -r -s -v", "--filter")
        }
        "mix" if a0 == Some("test") => test(&args[1..], "--seed --max-failures --exclude --include", "--only"),
        "swift" if a0 == Some("test") => test(&args[1..], "--skip -c --configuration", "--filter"),
        // checks: linters
        "flake8" | "pylint" | "pyflakes" | "shellcheck" | "markdownlint" | "rubocop" | "staticcheck" | "semgrep"
        | "bandit" | "golangci-lint" => lint(args),
        "ruff" => {
            let rest = args.get(1..).unwrap_or(&[]);
            let values = "--config --select --ignore --extend-select --target-version \
                --line-length --exclude";
            match a0 {
                Some("check") => {
                    if has(rest, "--fix") && !has(rest, "--diff --no-fix") {
                        guarded(rest, mutation("edit", positionals(rest, values)))
                    } else {
                        lint(rest)
                    }
                }
                Some("format") => {
                    if has(rest, "--check") {
                        lint(rest)
                    } else if has(rest, "--diff") {
                        read(Vec::new())
                    } else {
                        guarded(rest, mutation("edit", positionals(rest, values)))
                    }
                }
                _ => generic(args),
            }
        }
        "eslint" => {
            if has(args, "--fix") {
                let values = "-c --config --ext --rule --parser --format -f -o --output-file \
                    --max-warnings --ignore-path --ignore-pattern --plugin --env --global";
                guarded(args, mutation("edit", positionals(args, values)))
            } else {
                lint(args)
            }
        }
        "black" => {
            if has(args, "--check") {
                lint(args)
            } else if has(args, "--diff") {
                read(Vec::new())
            } else {
                let values = "-l --line-length -t --target-version --config --include --exclude \
                    --extend-exclude --force-exclude --stdin-filename -W --workers \
                    --required-version";
                guarded(args, mutation("edit", positionals(args, values)))
            }
        }
        "isort" => {
            if has(args, "--check --check-only -c") {
                lint(args)
            } else if has(args, "--diff") {
                read(Vec::new())
            } else {
                let values = "--settings-path --sp --settings-file --profile -l --line-length \
                    --skip -s --src";
                guarded(args, mutation("edit", positionals(args, values)))
            }
        }
        "prettier" => {
            let values = "--config --ignore-path --parser --plugin --log-level --print-width \
                --tab-width --stdin-filepath";
            if has(args, "--check -c") {
                lint(args)
            } else if has(args, "--write -w") {
                guarded(args, mutation("edit", positionals(args, values)))
            } else {
                read(positionals(args, values))
            }
        }
        "gofmt" => {
            if has(args, "-w") {
                mutation("edit", positionals(args, "-r"))
            } else if has(args, "-l") {
                lint(args)
            } else {
                read(positionals(args, "-r"))
            }
        }
        // checks: deterministic
        "mypy" | "pyright" => det(args),
        "tsc" => {
            if args.iter().any(|a| a.eq_ignore_ascii_case("--noemit")) {
                det(args)
            } else {
                generic(args)
            }
        }
        "git" => git(args),
        // mutations
        "sed" | "gsed" => sed(args),
        "perl" => perl(args),
        "awk" | "gawk" => awk(args),
        "tee" => {
            let files: Vec<String> = positionals(args, "").into_iter().filter(|f| f != "/dev/null").collect();
            if files.is_empty() {
                read(Vec::new())
            } else {
                mutation("edit", files)
            }
        }
        "patch" => {
            if has(args, "--dry-run --check") {
                return read(Vec::new());
            }
            let values = "-p -i -d -o -r -B -z -D -F -V -Y --input --directory --output \
                --reject-file --strip";
            // The operands are the file to patch and the patch; a patch read from
            // `-i` or stdin names the files it changes only inside itself.
            let mut paths: Vec<String> = positionals(args, values).into_iter().take(1).collect();
            paths.extend(opt_value(args, "-o --output"));
            mutation("edit", paths)
        }
        "mv" => {
            let mut paths = positionals(args, "-t --target-directory -S --suffix");
            paths.extend(opt_value(args, "-t --target-directory"));
            mutation("edit", paths)
        }
        "cp" | "ln" => copy_like(args, "edit"),
        // Reading: `rmdir` and `unlink` delete like `rm`.
        "rm" | "rmdir" | "unlink" => mutation("delete", positionals(args, "")),
        "touch" => mutation("create", positionals(args, "-d -t -r --date --reference")),
        "mkdir" => mutation("create", positionals(args, "-m --mode")),
        "truncate" => mutation("edit", positionals(args, "-s --size -r --reference")),
        // Reading: Codex's `apply_patch` run as a shell command is an edit of the files its
        // patch names (the Codex importer upgrades it to observed when the output says so).
        "apply_patch" | "applypatch" => apply_patch(text),
        // SWE-agent / mini-SWE-agent tools
        "create" => mutation("create", first_path()),
        "edit" | "append" | "insert" => mutation("edit", Vec::new()),
        "str_replace_editor" => {
            let path: Vec<String> = args.get(1).cloned().into_iter().collect();
            match a0 {
                Some("create") => mutation("create", path),
                // Reading: `undo_edit` changes the file back, so it is an edit too.
                Some("str_replace" | "insert" | "undo_edit") => mutation("edit", path),
                Some("view") => read(path),
                _ => Class::Opaque,
            }
        }
        "open" | "goto" | "scroll_up" | "scroll_down" | "filemap" => {
            read(if prog == "open" || prog == "filemap" { first_path() } else { Vec::new() })
        }
        "search_file" | "search_dir" | "find_file" => Class::Read("search", Vec::new()),
        "submit" => Class::Inert,
        // reading and searching
        "xargs" => xargs(args),
        "find" => find(args),
        "fd" | "fdfind" => fd(args),
        "grep" | "egrep" | "fgrep" | "rg" | "ag" | "ack" => search_tool(prog, args),
        "locate" => Class::Read("search", Vec::new()),
        "pip" | "pip3" => match positionals(args, "").first().map(String::as_str) {
            Some("list" | "show" | "freeze" | "check") => read(Vec::new()),
            _ => generic(args),
        },
        "command" => {
            if matches!(a0, Some("-v" | "-V")) {
                read(Vec::new())
            } else {
                sub_command(args)
            }
        }
        "conda" if matches!(a0, Some("activate" | "deactivate")) => Class::Inert,
        "sort" if has(args, "-o --output") => mutation("edit", opt_value(args, "-o --output").into_iter().collect()),
        p if listed(INERT, p) => Class::Inert,
        p if listed(READ_NO_PATHS, p) => read(Vec::new()),
        p if listed(READ_PATHS, p) => read(positionals(args, read_values(p))),
        _ => generic(args),
    }
}
