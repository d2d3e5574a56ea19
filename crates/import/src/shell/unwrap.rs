//! Wrappers (`env`, `timeout`, `sudo`, `uv run`, `npx`, shell keywords, ...) taken off a
//! command to find the program it runs, and the shells (`bash -c`, `sh SCRIPT`) whose
//! commands are unwrapped in turn.

// ---------------------------------------------------------------------------------------
// Unwrapping

use super::args::listed;

pub(super) fn basename(w: &str) -> &str {
    w.rsplit('/').next().unwrap_or(w)
}

pub(super) fn is_assignment(w: &str) -> bool {
    let Some((name, _)) = w.split_once('=') else {
        return false;
    };
    let name = name.strip_suffix('+').unwrap_or(name);
    let mut cs = name.chars();
    cs.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Index after the options starting at `i` (a `--` is consumed and ends them); the options in
/// `values` take the next word as their value unless written `--opt=value`.
pub(super) fn skip_opts(words: &[String], mut i: usize, values: &str) -> usize {
    while let Some(w) = words.get(i) {
        if w == "--" {
            return i + 1;
        }
        if !w.starts_with('-') || w.len() == 1 {
            break;
        }
        i += if listed(values, w) { 2 } else { 1 };
    }
    i
}

pub(super) enum ShellRun {
    /// `-c X`
    Command(Option<String>),
    Script,
    Stdin,
}

fn shell_run(args: &[String]) -> ShellRun {
    let mut j = 0;
    let mut has_c = false;
    while let Some(a) = args.get(j) {
        if a == "--" || a == "-" {
            j += 1;
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            j += if long == "rcfile" || long == "init-file" { 2 } else { 1 };
            continue;
        }
        if (a.starts_with('-') || a.starts_with('+')) && a.len() > 1 {
            let mut consume = 1;
            for ch in a[1..].chars() {
                match ch {
                    'c' => has_c = true,
                    // `-o pipefail`, `-O extglob`
                    'o' | 'O' => consume += 1,
                    _ => {}
                }
            }
            j += consume;
            continue;
        }
        break;
    }
    if has_c {
        ShellRun::Command(args.get(j).cloned())
    } else if j < args.len() {
        ShellRun::Script
    } else {
        ShellRun::Stdin
    }
}

const RUN_WRAPPER_VALUES: &str = "--with --with-editable --with-requirements --python -p \
    --directory --project -C -P --extra --group --only-group --no-group --env-file --package \
    --index --default-index --index-url --extra-index-url -e --env";

/// Index of the unwrapped head's first word, and what the shell runs when that head is one.
pub(super) fn unwrap(words: &[String]) -> (usize, Option<ShellRun>) {
    let mut i = 0;
    loop {
        let Some(w) = words.get(i) else {
            return (i, None);
        };
        if is_assignment(w) {
            i += 1;
            continue;
        }
        let next = words.get(i + 1).map(String::as_str);
        match basename(w) {
            "env" => {
                i += 1;
                while let Some(a) = words.get(i) {
                    if a == "--" {
                        i += 1;
                        break;
                    }
                    if a.starts_with('-') {
                        let takes = ["-u", "--unset", "-C", "--chdir", "-S", "--split-string"].contains(&a.as_str());
                        i += if takes { 2 } else { 1 };
                    } else if is_assignment(a) {
                        i += 1;
                    } else {
                        break;
                    }
                }
            }
            "time" => i = skip_opts(words, i + 1, "-f --format -o --output"),
            "nice" => i = skip_opts(words, i + 1, "-n --adjustment"),
            "sudo" => {
                i = skip_opts(
                    words,
                    i + 1,
                    "-u --user -g --group -p --prompt -C -D --chdir -r --role -t --type -T -U -h \
                        --host",
                )
            }
            "timeout" => {
                i = skip_opts(words, i + 1, "-s --signal -k --kill-after");
                if i < words.len() {
                    i += 1; // the duration
                }
            }
            // Reading: `nohup`, `exec` and `bundle exec` run their command unchanged, so they
            // are unwrapped like the wrappers § 4 lists.
            "nohup" => i += 1,
            "exec" => i = skip_opts(words, i + 1, "-a"),
            "bundle" if next == Some("exec") => i += 2,
            // Reading: shell keywords (`if pytest; then ...`) are unwrapped so the commands of
            // a compound command are classified; `!` is not, since it inverts the exit code.
            "if" | "then" | "else" | "elif" | "do" | "while" | "until" => i += 1,
            "uv" | "poetry" | "pdm" | "hatch" | "pipenv" if next == Some("run") => {
                i = skip_opts(words, i + 2, RUN_WRAPPER_VALUES)
            }
            "conda" | "mamba" | "micromamba" if next == Some("run") => {
                i = skip_opts(words, i + 2, "-n --name -p --prefix --cwd")
            }
            "npx" | "bunx" | "uvx" => i = skip_opts(words, i + 1, "-p --package --from --with --python"),
            "pnpm" if next == Some("exec") => i = skip_opts(words, i + 2, ""),
            "bash" | "sh" | "zsh" | "dash" => return (i, Some(shell_run(&words[i + 1..]))),
            _ => return (i, None),
        }
    }
}
