//! One aider session's text, read into turns of events.
//!
//! aider's `InputOutput` writes three kinds of lines to `.aider.chat.history.md`
//! (aider/io.py): a person's input as `#### ` lines (`user_input`), aider's own output
//! as `> ` lines (`tool_output`, `tool_error`, `tool_warning`, `confirm_ask`), both
//! ending in two spaces (a markdown line break), and the model's replies as plain text
//! after a blank line (`ai_output`). A multi-line `tool_output` gets the `> ` on its
//! first line and the two spaces on its last only, so the lines between belong to it
//! whatever they look like. Only aider's own lines are read for what aider did: the
//! model's words never count.

use super::lines::{confirm, is_command_line, is_edit_failure, is_undo_failure, model_line, tokens};

/// A session: its announcements and its turns, in order.
#[derive(Debug, Default)]
pub(super) struct Session {
    /// `> /path/to/aider ARGS`: the logged command line, when aider wrote one.
    pub command_line: Option<String>,
    pub version: Option<String>,
    /// Main models the `Model: X with F edit format` lines name, in order.
    pub models: Vec<String>,
    /// `Git working dir: X` (aider since 0.5x, when started below the repository root).
    pub git_dir: Option<String>,
    /// Turns; the first has no input when aider printed events before any input.
    pub turns: Vec<Turn>,
    /// Any line besides the header.
    pub has_content: bool,
}

#[derive(Debug, Default)]
pub(super) struct Turn {
    /// The input: first line number and text (`#### ` removed); `None` for what aider
    /// printed before the first input.
    pub input: Option<(usize, String)>,
    pub events: Vec<Event>,
    /// aider's output before the model's first reply (a `/run` command's output, which
    /// aider before 0.5x logged).
    pub output: String,
    /// The turn's first `> ` message as aider wrote it (its `> ` and the two spaces
    /// ending it removed, the lines between untouched), when it came before any reply:
    /// what a `/run`, `/test` or `/git` printed, in the versions that log it.
    pub first_output: Option<String>,
    /// The main model a `Model: X with F edit format` line of this turn names (at start,
    /// after `/model`): the model of the replies from here on.
    pub model: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Event {
    /// A block of the model's reply text, whole (aider logs `content.strip()`; blank
    /// lines before the next `> ` or `#### ` line may trail it).
    Reply(String),
    /// `Tokens: N sent, N received. Cost: $X request, $Y session.`
    Tokens { sent: Option<i64>, received: Option<i64>, session_usd: Option<f64>, rounded: bool },
    /// One reply's `Applied edit to F` lines; `created` when aider said every file is new.
    Applied { paths: Vec<String>, created: bool },
    /// `Did not apply edit to F (--dry-run)`.
    DryRun(Vec<String>),
    /// The reply's edits failed (`did not conform to the edit format`, `SEARCH/REPLACE
    /// block failed to match`); `partial` when aider says the other blocks were applied.
    EditFailed { paths: Vec<String>, partial: bool },
    /// `Skipping edits to F`: refused by a person or a policy before it was made.
    Skipped(String),
    /// `Attempt to fix lint errors?`, with the last `## Running: CMD` line before it.
    LintFailed { running: Option<String> },
    /// `Attempt to fix test errors?`.
    TestFailed,
    /// A `(Y)es/(N)o` question and its answer (`y`, `n`, `a`, `s`, `d`); `auto` when the
    /// log itself shows aider answered (a group answer, or `--yes` echoing it).
    Confirm { question: String, answer: char, auto: bool },
    /// `Running CMD` after `Run shell command?` was answered yes.
    ShellRan { command: String, output: String },
    /// `Run shell command?` answered no: the commands it asked about.
    ShellRefused(Vec<String>),
    /// `^C again to exit`, `^C KeyboardInterrupt`.
    Interrupt,
    /// The model call failed (`Unexpected error: ...`, a `litellm.` exception).
    LlmError,
    /// `Retrying in N seconds...`: the failure before it was retried.
    Retry,
    /// A token or context limit (`hit a token limit`, `exceeds the ... token limit`).
    LimitHit,
    /// `Only N reflections allowed, stopping.`
    ReflectionLimit,
    /// `/undo` output `Removed: SHA message`.
    UndoRemoved(String),
    /// `/undo` refused (`Cannot undo`, `was not made by aider`, ...).
    UndoFailed,
    /// `Added N lines of output to the chat.` (`/test` adds it only on a non-zero exit).
    OutputAdded,
}

/// `strict`: the log keeps aider's two trailing spaces, so a `> ` or `#### ` line the
/// model wrote in its reply (a quote, a heading) is not taken for aider's own.
fn is_input(line: &str, strict: bool) -> bool {
    line.starts_with("#### ") && (!strict || line.ends_with("  "))
}

/// `> text` or a bare `>`, not `>>>>>>> REPLACE`.
fn is_tool(line: &str) -> bool {
    line.starts_with("> ") || line.trim_end() == ">"
}

/// A group answer aider echoes as input (`#### Q (Y)es/(N)o/(A)ll ... [Yes]: all`).
fn is_group_echo(text: &str) -> bool {
    text.contains("(Y)es/(N)o") && text.contains("]: ")
}

/// A `> ` message's text as aider was given it: `tool_output` writes `> ` before the
/// message and, in a log that keeps them, two spaces after it (its last line rstripped).
fn as_printed(raw: &[String], strict: bool) -> String {
    let mut text = raw.join("\n");
    text = text.strip_prefix("> ").or_else(|| text.strip_prefix('>')).unwrap_or(&text).to_string();
    if strict {
        if let Some(t) = text.strip_suffix("  ") {
            text.truncate(t.len());
        }
    }
    text
}

/// Reads a session's lines (`first` is the header's line number).
pub(super) fn session(text: &str, first: usize) -> Session {
    let lines: Vec<&str> = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
    let strict = lines.iter().skip(1).any(|l| (l.starts_with('>') || l.starts_with("#### ")) && l.ends_with("  "));
    let mut p = Parser { strict, ..Parser::default() };
    p.turns.push(Turn::default());
    for (i, line) in lines.iter().enumerate().skip(1) {
        p.line(first + i, line);
    }
    p.flush_item();
    p.flush_applied();
    let mut s = p.session;
    s.has_content = lines.iter().skip(1).any(|l| !l.trim().is_empty());
    s.turns = p.turns;
    if s.turns.first().is_some_and(|t| t.events.is_empty()) {
        s.turns.remove(0);
    }
    s
}

#[derive(Default)]
struct Parser {
    strict: bool,
    session: Session,
    turns: Vec<Turn>,
    /// The open `> ` item: its text lines (continuations appended).
    item: Option<Vec<String>>,
    /// The open item's lines as the log has them (the first with its `> `).
    item_raw: Vec<String>,
    /// The previous line was a `> ` line or a continuation of one (no trailing spaces).
    in_item: bool,
    /// The open item is a multi-line message whose last line has not come yet.
    open_message: bool,
    continuing: bool,
    /// The previous line was input (a multi-line input continues).
    in_input: bool,
    /// The input block being read is an echo of the command before it.
    echoing: bool,
    /// A reply text block is open (blank lines inside it do not end it).
    in_reply: bool,
    /// The last finished item (a question's subject).
    last_item: Vec<String>,
    region: Region,
    /// The next question was answered by aider (a group answer echoed as input).
    auto_next: bool,
}

/// What one reply's `> ` block has shown so far: reset by reply text and input.
#[derive(Default)]
struct Region {
    applied: Vec<String>,
    new_files: Vec<String>,
    failed_at: Option<usize>,
    running: Option<String>,
    shell_ok: bool,
}

impl Parser {
    fn events(&mut self) -> &mut Vec<Event> {
        &mut self.turns.last_mut().expect("a turn").events
    }

    fn line(&mut self, n: usize, line: &str) {
        if is_input(line, self.strict) {
            let text = line["#### ".len()..].trim_end().to_string();
            self.flush_item();
            self.in_reply = false;
            if is_group_echo(&text) {
                self.auto_next = true;
                self.in_input = false;
                return;
            }
            if self.in_input {
                if self.echoing {
                    return;
                }
                if let Some((_, t)) = &mut self.turns.last_mut().expect("a turn").input {
                    t.push('\n');
                    t.push_str(&text);
                }
                return;
            }
            self.flush_applied();
            self.region = Region::default();
            self.in_input = true;
            self.echoing = self.is_echo(&text);
            if self.echoing {
                return;
            }
            self.turns.push(Turn { input: Some((n, text)), ..Turn::default() });
            return;
        }
        self.in_input = false;
        // A multi-line message aider logged: its first line has the `> `, its last line
        // (rstripped, so never blank) the two spaces; everything between is the
        // message's, whatever it looks like.
        if self.open_message {
            if let Some(item) = &mut self.item {
                item.push(line.trim_end().to_string());
                self.item_raw.push(line.to_string());
            }
            // A blank line inside the message may end in spaces; its last line has text.
            self.open_message = !line.ends_with("  ") || line.trim().is_empty();
            return;
        }
        // Inside a reply, a quote the model wrote has no trailing spaces.
        if is_tool(line) && (!self.strict || !self.in_reply || line.ends_with("  ")) {
            self.flush_item();
            self.in_reply = false;
            let text = line[1..].strip_prefix(' ').unwrap_or(&line[1..]).trim_end().to_string();
            self.item = Some(vec![text]);
            self.item_raw = vec![line.to_string()];
            self.open_message = self.strict && !line.ends_with("  ");
            self.continuing = false;
            self.in_item = !self.strict;
            return;
        }
        if line.trim().is_empty() {
            if self.continuing {
                if let Some(item) = &mut self.item {
                    item.push(String::new());
                    self.item_raw.push(line.to_string());
                }
            } else {
                self.flush_item();
                if self.in_reply {
                    self.reply_line(line);
                }
            }
            return;
        }
        // Without the trailing spaces (a copy whose whitespace was trimmed), plain lines
        // right after a `> ` line continue it.
        if self.item.is_some() && (self.in_item || self.continuing) {
            self.continuing = true;
            if let Some(item) = &mut self.item {
                item.push(line.trim_end().to_string());
                self.item_raw.push(line.to_string());
            }
            return;
        }
        self.flush_item();
        if self.in_reply {
            self.reply_line(line);
        } else {
            self.flush_applied();
            self.region = Region::default();
            self.in_reply = true;
            self.events().push(Event::Reply(line.to_string()));
        }
    }

    /// A further line of the open reply (the reply is the turn's last event).
    fn reply_line(&mut self, line: &str) {
        if let Some(Event::Reply(text)) = self.events().last_mut() {
            text.push('\n');
            text.push_str(line);
        }
    }

    /// The message `/ask Q` (also `/code`, `/architect`, ...) sends, which aider logs again
    /// as input right after the command: part of the command's turn.
    fn is_echo(&self, text: &str) -> bool {
        let Some(turn) = self.turns.last() else {
            return false;
        };
        let Some((_, prev)) = &turn.input else {
            return false;
        };
        let Some(args) = prev.strip_prefix('/').and_then(|p| p.split_once(char::is_whitespace)).map(|(_, a)| a.trim())
        else {
            return false;
        };
        let first = args.lines().next().unwrap_or("").trim();
        turn.events.is_empty() && !first.is_empty() && first == text.trim()
    }

    fn flush_applied(&mut self) {
        if self.region.applied.is_empty() {
            return;
        }
        let paths = std::mem::take(&mut self.region.applied);
        let created = paths.iter().all(|p| self.region.new_files.contains(p));
        self.events().push(Event::Applied { paths, created });
    }

    fn flush_item(&mut self) {
        self.in_item = false;
        self.continuing = false;
        self.open_message = false;
        let Some(item) = self.item.take() else { return };
        let raw = std::mem::take(&mut self.item_raw);
        let turn = self.turns.last_mut().expect("a turn");
        if !turn.events.iter().any(|e| matches!(e, Event::Reply(_))) {
            if turn.output.is_empty() {
                turn.first_output = Some(as_printed(&raw, self.strict));
            }
            for l in &item {
                turn.output.push_str(l);
                turn.output.push('\n');
            }
        }
        self.item_events(&item);
        self.last_item = item;
    }

    fn item_events(&mut self, item: &[String]) {
        let first = item[0].trim();
        if let Some(v) = first.strip_prefix("Aider v") {
            if self.session.version.is_none() {
                self.session.version = v.split_whitespace().next().map(str::to_string);
            }
            return;
        }
        if self.session.version.is_none() && self.session.command_line.is_none() && is_command_line(first) {
            self.session.command_line = Some(first.to_string());
            return;
        }
        if let Some(dir) = first.strip_prefix("Git working dir:") {
            self.session.git_dir.get_or_insert_with(|| dir.trim().to_string());
            return;
        }
        if let Some(m) = model_line(first) {
            self.turns.last_mut().expect("a turn").model = Some(m.clone());
            self.session.models.push(m);
            return;
        }
        if let Some(path) = first.strip_prefix("Applied edit to ") {
            self.region.applied.push(path.trim().to_string());
            return;
        }
        self.flush_applied();
        if first.starts_with("Tokens:") {
            self.events().push(tokens(first));
            return;
        }
        if let Some(path) = first.strip_prefix("Did not apply edit to ").and_then(|p| p.strip_suffix("(--dry-run)")) {
            self.events().push(Event::DryRun(vec![path.trim().to_string()]));
            return;
        }
        if let Some(path) = first.strip_prefix("Dry run, did not apply edit to ") {
            self.events().push(Event::DryRun(vec![path.trim().to_string()]));
            return;
        }
        let applied_rest = self.region.failed_at.is_some()
            && item.iter().any(|l| l.contains("were applied successfully") || l.contains("was applied successfully"));
        if applied_rest || item.iter().any(|l| is_edit_failure(l)) {
            self.edit_failure(item);
            return;
        }
        if let Some(path) = first.strip_prefix("Skipping edits to ") {
            self.events().push(Event::Skipped(path.trim().to_string()));
            return;
        }
        if let Some(cmd) = first.strip_prefix("## Running:") {
            self.region.running = Some(cmd.trim().to_string());
            return;
        }
        if first.starts_with("Attempt to fix lint errors?") {
            let running = self.region.running.clone();
            self.events().push(Event::LintFailed { running });
        } else if first.starts_with("Attempt to fix test errors?") {
            self.events().push(Event::TestFailed);
        }
        if let Some((question, answer)) = confirm(first) {
            // aider before 0.5x printed an answer it gave itself (`--yes`) twice.
            let repeated = self.last_item.first().map(|l| l.trim()) == Some(first);
            if let (true, Some(Event::Confirm { question: q, auto, .. })) = (repeated, self.events().last_mut()) {
                if *q == question {
                    *auto = true;
                    return;
                }
            }
            self.question(question, answer);
            return;
        }
        if let Some(cmd) = first.strip_prefix("Running ") {
            if self.region.shell_ok {
                let output = item[1..].join("\n");
                self.events().push(Event::ShellRan { command: cmd.trim().to_string(), output });
            }
            return;
        }
        let event = if first.starts_with("^C again to exit") || first.starts_with("^C KeyboardInterrupt") {
            Event::Interrupt
        } else if first.starts_with("Unexpected error") || first.starts_with("litellm.") {
            Event::LlmError
        } else if first.starts_with("Retrying in ") {
            Event::Retry
        } else if first.contains("hit a token limit") || first.contains("exceeds the") && first.contains("token limit")
        {
            Event::LimitHit
        } else if first.starts_with("Only ") && first.contains("reflections allowed") {
            Event::ReflectionLimit
        } else if let Some(rest) = first.strip_prefix("Removed: ") {
            Event::UndoRemoved(rest.split_whitespace().next().unwrap_or("").to_string())
        } else if is_undo_failure(first) {
            Event::UndoFailed
        } else if first.starts_with("Added ") && first.contains("of output to the chat") {
            Event::OutputAdded
        } else {
            return;
        };
        self.events().push(event);
    }

    fn edit_failure(&mut self, item: &[String]) {
        let idx = match self.region.failed_at {
            Some(i) => i,
            None => {
                self.events().push(Event::EditFailed { paths: Vec::new(), partial: false });
                let i = self.events().len() - 1;
                self.region.failed_at = Some(i);
                i
            }
        };
        let mut named = Vec::new();
        let mut partial = false;
        for l in item {
            if let Some((_, p)) = l.split_once("failed to exactly match lines in ") {
                named.push(p.trim().to_string());
            }
            if let Some(p) = l.trim().strip_prefix("Failed to apply edit to ") {
                named.push(p.trim().to_string());
            }
            partial |= l.contains("were applied successfully") || l.contains("was applied successfully");
        }
        if let Some(Event::EditFailed { paths, partial: p }) = self.events().get_mut(idx) {
            for n in named {
                if !paths.contains(&n) {
                    paths.push(n);
                }
            }
            *p |= partial;
        }
    }

    fn question(&mut self, question: String, answer: char) {
        let auto = std::mem::take(&mut self.auto_next);
        let yes = matches!(answer, 'y' | 'a');
        // The question's subject is the `> ` item aider printed just before it.
        let subject: Vec<String> =
            self.last_item.iter().map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect();
        if question.starts_with("Run shell command") {
            self.region.shell_ok = yes;
        }
        if let Some(path) = question.strip_prefix("Allow creation of new file ").and_then(|p| p.strip_suffix('?')) {
            if yes {
                self.region.new_files.push(path.trim().to_string());
            }
        } else if question.starts_with("Create new file?") && yes {
            if let Some(path) = subject.first() {
                self.region.new_files.push(path.clone());
            }
        }
        let refused_shell = question.starts_with("Run shell command") && !yes;
        self.events().push(Event::Confirm { question, answer, auto });
        if refused_shell {
            let commands: Vec<String> = subject.into_iter().filter(|c| !c.starts_with('#')).collect();
            self.events().push(Event::ShellRefused(commands));
        }
    }
}
