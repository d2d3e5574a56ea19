//! What aider's command line declares, and what a person's input is.

/// What the logged command line declares (the words after `--test-cmd` / `--lint-cmd`
/// up to the next word starting with `--`, as aider logs `sys.argv` unquoted).
#[derive(Debug, Default, PartialEq)]
pub(super) struct Args {
    pub test: Option<String>,
    pub lint: Vec<String>,
    /// `--yes-always` (`--yes` before 0.5x): aider answers its own questions.
    pub yes_always: bool,
}

pub(super) fn args(command_line: &str) -> Args {
    let words: Vec<&str> = command_line.split_whitespace().collect();
    let mut args = Args::default();
    let mut i = 1;
    while i < words.len() {
        let w = words[i];
        i += 1;
        let (name, inline) = match w.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v)),
            _ => (w, None),
        };
        match name {
            "--yes-always" | "--yes" => args.yes_always = true,
            "--test-cmd" | "--lint-cmd" => {
                let mut value: Vec<&str> = inline.into_iter().filter(|v| !v.is_empty()).collect();
                while i < words.len() && !words[i].starts_with("--") {
                    value.push(words[i]);
                    i += 1;
                }
                let value = value.join(" ");
                if value.is_empty() {
                    continue;
                }
                if name == "--test-cmd" {
                    args.test = Some(value);
                } else {
                    args.lint.push(lint_command(&value));
                }
            }
            _ => {}
        }
    }
    args
}

/// `--lint-cmd "python: flake8 --select=E9"` lints one language: aider runs the part
/// after `LANG:`.
fn lint_command(value: &str) -> String {
    match value.split_once(':') {
        Some((lang, cmd)) if !lang.is_empty() && lang.chars().all(|c| c.is_ascii_lowercase()) => cmd.trim().to_string(),
        _ => value.to_string(),
    }
}

/// What a person's input is, by aider's command table (commands match by unique prefix).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Input {
    /// A message to the model (also `/ask Q`, `/code Q`, `/architect Q`, `/help Q`).
    Message,
    /// `# Fix any errors below, if possible.`: the message `/lint` and `--lint` send.
    Harness,
    Run(String),
    /// `/test [CMD]` (no CMD: the declared test command).
    Test(Option<String>),
    /// `/git ARGS`, run in the repository.
    Git(String),
    Undo,
    /// Exits, views and settings that change nothing the agent does.
    Quiet,
    /// Any other command (`/add`, `/drop`, `/clear`, `/model`, ...).
    Command,
}

const COMMANDS: &[&str] = &[
    "add",
    "architect",
    "ask",
    "chat-mode",
    "clear",
    "code",
    "commit",
    "context",
    "copy",
    "copy-context",
    "diff",
    "drop",
    "edit",
    "editor",
    "editor-model",
    "exit",
    "git",
    "help",
    "lint",
    "load",
    "ls",
    "map",
    "map-refresh",
    "model",
    "models",
    "multiline-mode",
    "paste",
    "quit",
    "read-only",
    "reasoning-effort",
    "report",
    "reset",
    "run",
    "save",
    "settings",
    "test",
    "think-tokens",
    "tokens",
    "undo",
    "voice",
    "weak-model",
    "web",
];

pub(super) fn classify(text: &str) -> Input {
    let t = text.trim();
    if let Some(cmd) = t.strip_prefix('!') {
        return Input::Run(cmd.trim().to_string());
    }
    if t.starts_with("# Fix any errors below") {
        return Input::Harness;
    }
    if t.is_empty() || t == "<blank>" {
        return Input::Quiet;
    }
    let Some(rest) = t.strip_prefix('/') else {
        return Input::Message;
    };
    let (word, args) = rest.split_once(char::is_whitespace).map_or((rest, ""), |(w, a)| (w, a.trim()));
    let matches: Vec<&str> = COMMANDS.iter().copied().filter(|c| c.starts_with(word)).collect();
    let name = if COMMANDS.contains(&word) {
        word
    } else if matches.len() == 1 {
        matches[0]
    } else {
        return Input::Command;
    };
    let has_args = !args.is_empty();
    match name {
        "ask" | "code" | "architect" | "context" | "help" if has_args => Input::Message,
        "run" => Input::Run(args.to_string()),
        "test" => Input::Test(has_args.then(|| args.to_string())),
        "git" if has_args => Input::Git(format!("git {args}")),
        "undo" => Input::Undo,
        "exit" | "quit" | "diff" | "tokens" | "ls" | "map" | "map-refresh" | "settings" | "copy" | "copy-context"
        | "report" | "multiline-mode" | "models" | "save" | "editor" | "edit" | "help" => Input::Quiet,
        _ => Input::Command,
    }
}
