//! One parsed aider session, told to the recorder in stream order (section 6a).

use crate::recorder::rfc3339;
use crate::shell::Declared;
use crate::{Call, Context, EditKind, Recorder, Refusal};

use super::gitlog;
use super::input::{args, classify, Args, Input};
use super::parse::{Event, Session, Turn};

/// Where the model's reply of a turn stands.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Llm {
    /// No model call in this turn (yet).
    Idle,
    /// A call is under way: a reply streaming, or aider reflecting an error back.
    Waiting,
    Done,
    Failed,
}

pub(super) fn session(rec: &mut Recorder, s: &Session, ts: &str, ctx: &Context) -> Result<(), Refusal> {
    if rfc3339(ts).is_some() {
        rec.saw_time(Some(ts));
    } else {
        rec.note("aider writes no time per event, and its session start is local time without a zone: no started_at");
    }
    rec.harness_version(s.version.clone());
    if let Some(dir) = &s.git_dir {
        // aider names files relative to the repository root it prints here.
        rec.workdir(dir.clone());
        if let Some(name) = dir.trim_end_matches(['/', '\\']).rsplit(['/', '\\']).next() {
            rec.cluster(name);
        }
    }
    for m in &s.models {
        rec.model(m.clone());
    }
    let args = match &s.command_line {
        Some(c) => args(c),
        None => {
            rec.note("no command line logged: declared test and lint commands unknown");
            Args::default()
        }
    };
    if args.lint.len() > 1 {
        rec.note(format!(
            "several --lint-cmd values; the first is the declared lint command: {}",
            args.lint.join(" | ")
        ));
    }
    rec.declared(Declared { test_cmd: args.test.clone(), lint_cmd: args.lint.first().cloned() });
    let mut m =
        Mapper { rec, args: &args, ctx, prompted: false, usd: None, rounded: false, last: None, git_log_kept: false };
    for turn in &s.turns {
        m.turn(turn)?;
    }
    if let Some(usd) = m.usd {
        m.rec.usd(usd);
    }
    if m.rounded {
        m.rec.note("token counts as aider prints them, rounded to thousands (`2.3k`)");
    }
    match m.last {
        Some(End::Limit) => m.rec.stop_reason("budget_exhausted"),
        Some(End::Error) => m.rec.stop_reason("infra_error"),
        _ => {}
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum End {
    Limit,
    Error,
    Other,
}

struct Mapper<'a> {
    rec: &'a mut Recorder,
    args: &'a Args,
    ctx: &'a Context<'a>,
    /// The run's first prompt was given: later messages are interventions.
    prompted: bool,
    usd: Option<f64>,
    rounded: bool,
    /// How the last turn that did anything ended.
    last: Option<End>,
    git_log_kept: bool,
}

impl Mapper<'_> {
    fn turn(&mut self, turn: &Turn) -> Result<(), Refusal> {
        let kind = turn.input.as_ref().map_or(Input::Quiet, |(_, t)| classify(t));
        let text = turn.input.as_ref().map_or("", |(_, t)| t.as_str());
        self.input(&kind, text, turn)?;
        let mut llm = if matches!(kind, Input::Message | Input::Harness) { Llm::Waiting } else { Llm::Idle };
        let (mut reply, mut aborted, mut limit) = (None::<&str>, false, false);
        for event in &turn.events {
            match event {
                Event::Reply(first) => {
                    reply = Some(first);
                    llm = Llm::Waiting;
                }
                Event::Tokens { sent, received, session_usd, rounded } => {
                    self.rec.tokens(*sent, *received);
                    self.usd = session_usd.or(self.usd);
                    self.rounded |= rounded;
                    llm = Llm::Done;
                }
                Event::Applied { paths, created } => {
                    let kind = if *created { EditKind::Create } else { EditKind::Edit };
                    self.rec.edit(Call::new("edit"), kind, paths, true);
                    llm = Llm::Done;
                }
                Event::DryRun(paths) => {
                    self.rec.tool(Call::new("edit"), "edit", paths);
                    llm = Llm::Done;
                }
                Event::EditFailed { paths, partial } => {
                    // Blocks applied before one failed did change the files: ok stays
                    // true then, so a check before it cannot look current.
                    self.rec.edit(Call::new("edit").failure("other"), EditKind::Edit, paths, *partial);
                    llm = Llm::Waiting;
                }
                Event::Skipped(_) => {
                    self.rec.refused(Call::new("edit"), "edit");
                }
                Event::LintFailed { running } => {
                    let cmd = self.lint_command(running.as_deref());
                    let call = with_command(Call::new("shell"), cmd).failure("nonzero_exit");
                    self.rec.harness_check(call, "lint", "fail");
                }
                Event::TestFailed => {
                    if self.args.test.is_none() {
                        self.rec.note("a test run failed, but the command line declares no --test-cmd");
                    }
                    let call = with_command(Call::new("shell"), self.args.test.clone()).failure("nonzero_exit");
                    self.rec.harness_check(call, "registered_test", "fail");
                }
                Event::Confirm { question, answer, auto } => {
                    let yes = matches!(answer, 'y' | 'a');
                    if !auto && !self.args.yes_always {
                        self.rec.person_decision(None, yes, question);
                        self.rec.note(
                            "(Y)es/(N)o answers are counted as typed by a person: the command line has no \
                             --yes-always (a config file or environment setting would not show)",
                        );
                    }
                    // A yes that sends something back to the model starts another reply;
                    // any other answer is given while the model is idle.
                    let resend = ["Attempt to fix", "Add ", "Edit the files"].iter().any(|p| question.starts_with(p));
                    llm = if yes && resend { Llm::Waiting } else { Llm::Done };
                }
                Event::ShellRan { command, output } => {
                    self.rec.shell(Call::new("shell").output(output.clone()), command);
                }
                Event::ShellRefused(commands) => {
                    if commands.is_empty() {
                        self.rec.refused(Call::new("shell"), "run");
                    }
                    for c in commands {
                        self.rec.refused(Call::new("shell").command(c.clone()), "run");
                    }
                }
                Event::Interrupt => {
                    if llm == Llm::Waiting && !aborted {
                        self.rec.person_abort(None, "^C: interrupted the model's reply");
                        aborted = true;
                    }
                }
                Event::LlmError => llm = Llm::Failed,
                Event::Retry => llm = Llm::Waiting,
                Event::LimitHit | Event::ReflectionLimit => {
                    limit = true;
                    if llm == Llm::Waiting {
                        llm = Llm::Done;
                    }
                }
                Event::UndoRemoved(_) | Event::UndoFailed | Event::OutputAdded => {}
            }
        }
        // The agent's last reply of the turn is its completion claim, unless a person
        // cut it off or the model call failed.
        if let (Some(first), false, false) = (reply, aborted, llm == Llm::Failed) {
            self.rec.complete(None, Some(first));
        }
        if kind != Input::Quiet || !turn.events.is_empty() {
            self.last = Some(if limit {
                End::Limit
            } else if llm == Llm::Failed {
                End::Error
            } else {
                End::Other
            });
        }
        Ok(())
    }

    /// The input's own records, at its place in the stream.
    fn input(&mut self, kind: &Input, text: &str, turn: &Turn) -> Result<(), Refusal> {
        match kind {
            Input::Message | Input::Harness => {
                if self.prompted && *kind == Input::Message {
                    self.rec.person_message(None, text);
                }
                self.prompted = true;
            }
            Input::Run(cmd) | Input::Git(cmd) => {
                self.rec.person_command(Call::new("shell").output(turn.output.clone()), cmd);
            }
            Input::Test(cmd) => match cmd.clone().or_else(|| self.args.test.clone()) {
                Some(cmd) => {
                    let mut call = Call::new("shell").output(turn.output.clone());
                    // `/test` adds the output to the chat only when the command failed.
                    if turn.events.contains(&Event::OutputAdded) {
                        call = call.failure("nonzero_exit");
                    }
                    self.rec.person_command(call, &cmd);
                }
                None if self.prompted => {
                    self.rec.person_message(None, text);
                }
                None => {}
            },
            Input::Undo => self.undo(turn)?,
            Input::Quiet => {}
            Input::Command => {
                if self.prompted {
                    self.rec.person_message(None, text);
                }
            }
        }
        Ok(())
    }

    /// `/undo`: the files of the commit it removed come from `--git-log`, when given.
    fn undo(&mut self, turn: &Turn) -> Result<(), Refusal> {
        let removed = turn.events.iter().find_map(|e| match e {
            Event::UndoRemoved(sha) => Some(sha.as_str()),
            _ => None,
        });
        let call = Call::new("undo").command("/undo");
        if removed.is_none() && turn.events.contains(&Event::UndoFailed) {
            self.rec.person_rollback_failed(call);
            return Ok(());
        }
        let mut paths: Vec<String> = Vec::new();
        if let (Some(sha), Some(path)) = (removed, self.ctx.options.git_log.as_ref()) {
            let loaded = gitlog::load(path);
            let loaded = match loaded.as_ref() {
                Ok(l) => l,
                Err(r) => return Err(r.clone()),
            };
            match loaded.log.paths(sha) {
                Some(p) => paths = p.to_vec(),
                None => self.rec.note(format!("commit {sha} removed by /undo is not in the --git-log file")),
            }
            let name = loaded.input.file_name();
            let hash = loaded.input.blake3()?;
            if !self.git_log_kept {
                // Shared: every session may read it, so it does not make one look imported.
                self.rec.source_part(&name, &hash, crate::Part::Whole, &name, loaded.bytes.clone(), true)?;
                self.git_log_kept = true;
            }
        }
        self.rec.person_rollback(call, &paths);
        Ok(())
    }

    fn lint_command(&self, running: Option<&str>) -> Option<String> {
        match (self.args.lint.as_slice(), running) {
            ([], r) => r.map(str::to_string),
            ([one], _) => Some(one.clone()),
            (many, Some(r)) => many.iter().find(|c| r.starts_with(c.as_str())).or(many.first()).cloned(),
            (many, None) => many.first().cloned(),
        }
    }
}

fn with_command(call: Call, command: Option<String>) -> Call {
    match command {
        Some(c) => call.command(c),
        None => call,
    }
}
