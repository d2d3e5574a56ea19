//! The session's events, in stream order, told to the [`Recorder`]: each tool call
//! where it starts (its result looked up by `tool_use_id`, its output, arguments and
//! edit diff with it), the conversation's message parts, people's messages, decisions
//! and interrupts, and one completion claim per turn.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::head::parse_ts;
use super::parse::{bare_command, Agent, Ev, Res, Said, What, Who};
use crate::diff;
use crate::recorder::{Call, EditKind, Grade, Message, Recorder, Role, HARNESS};

/// A tool result, as Claude Code words a call refused before it ran.
enum Refused {
    /// A person declined it at the prompt.
    Person(String),
    /// A permission mode, an allow list, a settings rule or a hook.
    Policy,
}

const PERSON_REFUSALS: [&str; 2] =
    ["The user doesn't want to proceed with this tool use", "The user doesn't want to take this action right now"];

fn refusal(id: &str, res: Option<&Res>, denied: &HashSet<String>, name: &str) -> Option<Refused> {
    let decision = res.and_then(|r| r.decision.as_ref()).and_then(Value::as_object);
    let declined = decision
        .and_then(|d| d.get("decision").and_then(Value::as_str))
        .is_some_and(|d| matches!(d, "reject" | "deny" | "denied" | "rejected"));
    let by_person = decision.and_then(|d| d.get("source").and_then(Value::as_str)) == Some("user");
    if let Some(r) = res {
        let rejected_text = PERSON_REFUSALS.iter().any(|p| r.text.contains(p))
            || r.structured.as_ref().and_then(Value::as_str) == Some("User rejected tool use");
        if rejected_text || (declined && by_person) {
            let said = r.text.split_once("the user said:").map(|(_, s)| s.trim()).filter(|s| !s.is_empty());
            return Some(Refused::Person(said.map_or_else(|| format!("rejected the {name} call"), str::to_string)));
        }
        if r.is_error && policy_text(&r.text) {
            return Some(Refused::Policy);
        }
    }
    (denied.contains(id) || declined).then_some(Refused::Policy)
}

fn policy_text(t: &str) -> bool {
    (t.contains("requested permissions to") && t.contains("haven't granted it yet"))
        || t.contains("This command requires approval")
        || (t.contains("PreToolUse:")
            && (t.contains("hook error") || t.contains("blocking error") || t.contains("denied this tool")))
        || (t.starts_with("Permission to use") && t.contains("has been denied"))
}

/// The structured edit tools (section 4: observed mutations).
fn is_edit(name: &str) -> bool {
    matches!(name, "Edit" | "MultiEdit" | "Write" | "NotebookEdit")
}

/// The action kind of a tool that is neither the shell nor an edit; `None`: its effect
/// on the files cannot be told (MCP and unknown tools): opaque.
fn kind_of(name: &str) -> Option<&'static str> {
    Some(match name {
        "Read" | "NotebookRead" | "WebFetch" | "BashOutput" | "TaskOutput" => "read",
        "Glob" | "Grep" | "LS" | "WebSearch" | "ToolSearch" => "search",
        "TodoWrite" | "TodoRead" | "ExitPlanMode" | "EnterPlanMode" | "TaskCreate" | "TaskUpdate" | "TaskList"
        | "TaskGet" => "plan",
        "AskUserQuestion" => "message",
        "Task" | "Agent" | "Skill" | "SlashCommand" | "KillShell" | "KillBash" | "TaskStop" => "other",
        _ => return None,
    })
}

fn paths_of(input: &Value, res: Option<&Res>) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for key in ["file_path", "notebook_path", "path"] {
        if let Some(p) = input.get(key).and_then(Value::as_str).filter(|p| !p.is_empty()) {
            paths.push(p.to_string());
        }
    }
    if paths.is_empty() {
        if let Some(p) = res.and_then(|r| r.structured.as_ref()).and_then(|s| s.get("filePath")).and_then(Value::as_str)
        {
            paths.push(p.to_string());
        }
    }
    paths
}

/// A tool error in Claude Code's words: the call did not run (validation, a sibling
/// call's error) when wrapped in `<tool_use_error>`.
fn failure_of(text: &str) -> &'static str {
    if text.contains("InputValidationError") {
        "parse_error"
    } else if text.contains("does not exist") || text.contains("No such file") || text.contains("ENOENT") {
        "not_found"
    } else {
        "other"
    }
}

fn did_not_run(res: Option<&Res>) -> bool {
    res.is_some_and(|r| r.is_error && r.text.trim_start().starts_with("<tool_use_error>"))
}

fn duration(start: Option<&str>, end: Option<&str>) -> Option<f64> {
    let (a, b) = (parse_ts(start?)?, parse_ts(end?)?);
    let ms = (b - a).num_milliseconds();
    (ms >= 0).then_some(ms as f64)
}

/// Claude Code reports every exit but 0 as an error carrying its code (section 3), so a
/// result that is no error, not interrupted, not backgrounded and carries no
/// `returnCodeInterpretation` (a non-zero code it calls normal: grep's 1) exited 0.
fn bash_exit(res: &Res) -> Option<i64> {
    let s = res.structured.as_ref().and_then(Value::as_object);
    let field = |k: &str| s.and_then(|s| s.get(k)).filter(|v| !v.is_null() && v.as_str() != Some(""));
    let clean = !res.is_error
        && field("returnCodeInterpretation").is_none()
        && field("backgroundTaskId").is_none()
        && s.and_then(|s| s.get("interrupted")).and_then(Value::as_bool) != Some(true)
        && !res.text.starts_with("Command running in background");
    clean.then_some(0)
}

/// The id of a command Claude Code left running in the background
/// (`toolUseResult.backgroundTaskId`, or the result's `Command running in background
/// with ID: X`).
fn background_id(res: &Res) -> Option<String> {
    let structured = res.structured.as_ref().and_then(|s| s.get("backgroundTaskId")).and_then(Value::as_str);
    let from_text = res
        .text
        .strip_prefix("Command running in background with ID: ")
        .and_then(|rest| rest.split_whitespace().next())
        .map(|id| id.trim_end_matches('.'));
    structured.or(from_text).filter(|id| !id.is_empty()).map(str::to_string)
}

/// The exit code a `BashOutput` / `TaskOutput` result shows for a command that has
/// completed (`<status>completed</status>` ... `<exit_code>N</exit_code>`); none while it
/// is still running.
fn completed_exit(text: &str) -> Option<i64> {
    let tag = |name: &str| {
        let open = format!("<{name}>");
        let at = text.find(&open)? + open.len();
        let end = text[at..].find(&format!("</{name}>"))?;
        Some(text[at..at + end].trim().to_string())
    };
    (tag("status")?.as_str() == "completed").then(|| tag("exit_code")?.parse().ok()).flatten()
}

/// What the whole stream showed, for the caller's notes.
#[derive(Debug, Default)]
pub(super) struct Summary {
    pub calls: usize,
    pub subagent_calls: usize,
    pub without_result: usize,
    /// The session's last word was a message the tool wrote for a failed request.
    pub ended_in_error: Option<String>,
}

/// What the whole log says that an event is looked up in.
pub(super) struct Log<'a> {
    pub results: &'a HashMap<String, Res>,
    pub denied: &'a HashSet<String>,
    /// Each assistant message's usage (its last line's), by `message.id`.
    pub usage: &'a HashMap<String, (i64, i64)>,
}

pub(super) fn emit(rec: &mut Recorder, events: &[Ev], log: &Log<'_>) -> Summary {
    let (results, denied) = (log.results, log.denied);
    let mut summary = Summary::default();
    let mut speakers = Speakers::new(events, results);
    // The task: the first thing a person typed, a slash command only with its arguments.
    let task = events.iter().find_map(|e| match &e.what {
        What::Said(Said { who: Who::Human, text, .. }) if !bare_command(text) => Some(text),
        _ => None,
    });
    if let Some(text) = task {
        rec.task_prompt(text);
    }
    let claims = claims(events);
    // Text a person typed before the agent first acted is the run's first prompt.
    let first_act = events
        .iter()
        .position(|e| !e.sub && matches!(e.what, What::Text(_) | What::Call { .. }))
        .unwrap_or(events.len());
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut decided: HashSet<&str> = HashSet::new();
    // The mutations recorded before each prompt a person typed (by its message part's
    // key), for what a rewind's abandoned branch did.
    let mut before_prompt: HashMap<&str, u64> = HashMap::new();
    for (i, ev) in events.iter().enumerate() {
        let ts = ev.ts.as_deref();
        rec.saw_time(ts);
        match &ev.what {
            What::Call { id, name, input, agent } => {
                // One call, once: a subagent's calls may also be copied into the session file.
                if !id.is_empty() && !seen.insert(id.as_str()) {
                    continue;
                }
                names.insert(id.as_str(), name.as_str());
                let res = results.get(id);
                summary.calls += 1;
                summary.subagent_calls += usize::from(ev.sub);
                summary.without_result += usize::from(res.is_none());
                let author = agent.as_ref().map(|a| speakers.author(a));
                call(rec, ev, (id, name, input, author), res, denied);
            }
            What::Results(ids) => {
                for id in ids {
                    let name = names.get(id.as_str()).copied().unwrap_or("tool");
                    let Some(res) = results.get(id).filter(|_| decided.insert(id.as_str())) else {
                        continue;
                    };
                    match refusal(id, Some(res), denied, name) {
                        Some(Refused::Person(reason)) => {
                            rec.person_decision(ts, false, &reason);
                        }
                        _ if person_approved(res) => {
                            rec.person_decision(ts, true, &format!("approved the {name} call"));
                        }
                        _ => {}
                    }
                }
            }
            What::Person { text, .. } if i > first_act => {
                rec.person_message(ts, text);
            }
            What::Abort(text) => {
                rec.person_abort(ts, text);
            }
            What::PersonShell { command, output } if i > first_act => {
                let mut c = Call::new("Bash").ts(ev.ts.clone());
                if let Some(o) = output {
                    c = c.output(o.clone());
                }
                rec.person_command(c, command);
            }
            What::Said(said) => {
                if let (Who::Human, Some(key)) = (&said.who, &said.key) {
                    before_prompt.entry(key.as_str()).or_insert(rec.ok_mutations());
                }
                speakers.say(rec, ev, said, log.usage)
            }
            What::Rewind { since } => {
                let changed = before_prompt.get(since.as_str()).is_some_and(|before| rec.ok_mutations() > *before);
                rec.person_rewind(ts, changed);
            }
            _ => {}
        }
        if claims[i] {
            if let What::Text(text) = &ev.what {
                rec.complete(ts, Some(text));
            }
        }
    }
    let last =
        events.iter().rev().find(|e| !e.sub && matches!(e.what, What::Text(_) | What::Call { .. } | What::ApiError(_)));
    if let Some(Ev { what: What::ApiError(text), .. }) = last {
        summary.ended_in_error = Some(text.clone());
    }
    summary
}

fn person_approved(res: &Res) -> bool {
    let d = res.decision.as_ref().and_then(Value::as_object);
    let accepted =
        d.and_then(|d| d.get("decision").and_then(Value::as_str)).is_some_and(|d| matches!(d, "accept" | "allow"));
    accepted && d.and_then(|d| d.get("source").and_then(Value::as_str)) == Some("user")
}

/// A call: its id, tool name, input and, for a subagent's, the subagent's name.
type CallParts<'a> = (&'a str, &'a str, &'a Value, Option<String>);

fn call(rec: &mut Recorder, ev: &Ev, parts: CallParts<'_>, res: Option<&Res>, denied: &HashSet<String>) {
    let (id, name, input, author) = parts;
    let shell = name == "Bash";
    let command = if shell {
        input.get("command").and_then(Value::as_str).unwrap_or("").to_string()
    } else {
        serde_json::to_string(input).unwrap_or_default()
    };
    let mut c = Call::new(name)
        .command(command.clone())
        .ts(ev.ts.clone())
        .id((!id.is_empty()).then_some(id))
        .arguments(input.clone())
        .author(author);
    c.duration_ms = duration(ev.ts.as_deref(), res.and_then(|r| r.ts.as_deref()));
    if let Some(r) = res {
        // The tool_result's content, as the model was given it.
        c = c.output(r.text.clone()).is_error(Some(r.is_error));
    }
    let refused_kind =
        if shell || (!is_edit(name) && kind_of(name).is_none()) { "run" } else { kind_of(name).unwrap_or("edit") };
    if refusal(id, res, denied, name).is_some() {
        rec.refused(c, refused_kind);
        return;
    }
    let error_text = res.filter(|r| r.is_error).map(|r| r.text.as_str());
    if !is_edit(name) && did_not_run(res) {
        // Refused by the tool itself (invalid input, a sibling call's error): no command
        // ran, so no check, no mutation, nothing opaque.
        rec.refused(c.failure(failure_of(error_text.unwrap_or(""))), refused_kind);
        return;
    }
    if shell {
        if let Some(r) = res {
            c.timed_out = r.is_error && r.text.contains("Command timed out after");
            c.exit_code = bash_exit(r).map(|code| (code, Grade::Derived));
            let interrupted =
                r.structured.as_ref().and_then(|s| s.get("interrupted")).and_then(Value::as_bool) == Some(true);
            if r.is_error && !c.timed_out && !interrupted && crate::shell::exit_code_from_text(&r.text).is_none() {
                c.failure_type = Some("other");
            }
        }
        let tool_seq = rec.shell(c, &command);
        if let Some(id) = res.and_then(background_id) {
            rec.background(id, tool_seq);
        }
        return;
    }
    if let Some(t) = error_text {
        c.failure_type = Some(failure_of(t));
    }
    let paths = paths_of(input, res);
    if is_edit(name) {
        let structured_type =
            res.and_then(|r| r.structured.as_ref()).and_then(|s| s.get("type")).and_then(Value::as_str);
        let created = name == "Write"
            && (structured_type == Some("create")
                || res.is_some_and(|r| r.text.starts_with("File created successfully")));
        // No result at all: the outcome is unknown, so the file possibly changed.
        let ok = error_text.is_none();
        if let (Some(r), true, Some(path)) = (res, ok, paths.first()) {
            let (d, fragment) = edit_diff(&rec.relative(path), name, input, r, created);
            if fragment && d.is_some() {
                rec.fragment_diff();
            }
            c = c.diff(d);
        }
        rec.edit(c, if created { EditKind::Create } else { EditKind::Edit }, &paths, ok);
    } else if let Some(kind) = kind_of(name) {
        rec.tool(c, kind, &paths);
        // Reading a background command's output once it completed gives its exit code.
        if matches!(name, "BashOutput" | "TaskOutput") {
            let id = input.get("bash_id").or_else(|| input.get("task_id")).and_then(Value::as_str);
            if let (Some(id), Some(code)) = (id, res.and_then(|r| completed_exit(&r.text))) {
                rec.background_ended(id, code);
            }
        }
    } else {
        rec.opaque(c);
    }
}

/// The diff of an edit that applied, and whether it is numbered within the replaced
/// text only: `toolUseResult.structuredPatch` (the file's own line numbers) when the log
/// has it; a created file's whole content; an overwritten file's `originalFile` against
/// the new content; else each replaced text against its replacement (`Edit`,
/// `MultiEdit`: a fragment).
fn edit_diff(path: &str, name: &str, input: &Value, res: &Res, created: bool) -> (Option<String>, bool) {
    let structured = res.structured.as_ref().and_then(Value::as_object);
    let field = |k: &str| structured.and_then(|s| s.get(k));
    if let Some(d) = field("structuredPatch").and_then(|p| structured_patch(path, p, created)) {
        return (Some(d), false);
    }
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
    if name == "Write" {
        let content = text(input.get("content")).or_else(|| text(field("content")));
        let Some(content) = content else { return (None, false) };
        let before = if created { None } else { text(field("originalFile")) };
        if !created && before.is_none() {
            return (None, false);
        }
        return (Some(diff::unified(path, before.as_deref(), Some(&content))), false);
    }
    let pair = |e: &Value| Some((text(e.get("old_string"))?, text(e.get("new_string"))?));
    let edits: Vec<(String, String)> = match name {
        "Edit" => pair(input).into_iter().collect(),
        "MultiEdit" => input.get("edits").and_then(Value::as_array).into_iter().flatten().filter_map(pair).collect(),
        _ => Vec::new(),
    };
    let d: String = edits.iter().map(|(old, new)| diff::fragment(path, old, new)).collect();
    if d.is_empty() {
        (None, false)
    } else {
        (Some(d), true)
    }
}

/// `structuredPatch` (jsdiff hunks: `oldStart`, `oldLines`, `newStart`, `newLines`,
/// `lines`) written as a unified diff, numbered as `diff -u` numbers it: a count of 1
/// is left out, and an empty side starts one line earlier (jsdiff keeps the line
/// after). `None` when there are no hunks or one is not of that shape.
fn structured_patch(path: &str, patch: &Value, created: bool) -> Option<String> {
    let hunks = patch.as_array().filter(|h| !h.is_empty())?;
    let path = path.trim_start_matches('/');
    let from = if created { "/dev/null".to_string() } else { format!("a/{path}") };
    let mut out = format!("--- {from}\n+++ b/{path}\n");
    let range = |start: i64, count: i64| {
        let start = if count == 0 { start.saturating_sub(1).max(0) } else { start };
        if count == 1 {
            format!("{start}")
        } else {
            format!("{start},{count}")
        }
    };
    for h in hunks {
        let n = |k: &str| h.get(k).and_then(Value::as_i64);
        let (os, ol, ns, nl) = (n("oldStart")?, n("oldLines")?, n("newStart")?, n("newLines")?);
        out.push_str(&format!("@@ -{} +{} @@\n", range(os, ol), range(ns, nl)));
        for line in h.get("lines")?.as_array()? {
            out.push_str(line.as_str()?);
            out.push('\n');
        }
    }
    Some(out)
}

/// Who says each message part: subagents named by the `Task` call that started them,
/// each assistant message's usage given once, each line's part said once.
struct Speakers<'a> {
    /// `Task` / `Agent` call id -> `subagent_type`.
    task_names: HashMap<&'a str, &'a str>,
    /// `agentId` -> the `Task` call id whose result names it.
    agent_tasks: HashMap<&'a str, &'a str>,
    said: HashSet<&'a str>,
    counted: HashSet<&'a str>,
    /// A person's message was said: a subagent's prompt can no longer be taken for the
    /// run's task.
    human: bool,
}

impl<'a> Speakers<'a> {
    fn new(events: &'a [Ev], results: &'a HashMap<String, Res>) -> Speakers<'a> {
        let mut task_names = HashMap::new();
        for e in events {
            if let What::Call { id, name, input, .. } = &e.what {
                if matches!(name.as_str(), "Task" | "Agent") {
                    if let Some(t) = input.get("subagent_type").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                        task_names.insert(id.as_str(), t);
                    }
                }
            }
        }
        let mut agent_tasks = HashMap::new();
        for (id, r) in results {
            let agent = r.structured.as_ref().and_then(|s| s.get("agentId")).and_then(Value::as_str);
            if let Some(a) = agent.filter(|a| !a.is_empty()) {
                agent_tasks.insert(a, id.as_str());
            }
        }
        Speakers { task_names, agent_tasks, said: HashSet::new(), counted: HashSet::new(), human: false }
    }

    /// A subagent's name: its `Task` call's `subagent_type`, else its `agentId`.
    fn author(&self, agent: &Agent) -> String {
        let task = agent.task.as_deref().or_else(|| agent.id.as_deref().and_then(|a| self.agent_tasks.get(a).copied()));
        match (task.and_then(|t| self.task_names.get(t)), &agent.id) {
            (Some(name), _) => name.to_string(),
            (None, Some(id)) => id.clone(),
            (None, None) => "subagent".to_string(),
        }
    }

    fn say(&mut self, rec: &mut Recorder, ev: &Ev, said: &'a Said, usage: &HashMap<String, (i64, i64)>) {
        if let Some(key) = &said.key {
            if !self.said.insert(key.as_str()) {
                return;
            }
        }
        let author = said.agent.as_ref().map(|a| self.author(a));
        let counted = |id: &Option<String>| id.as_ref().is_some_and(|id| self.counted.contains(id.as_str()));
        if said.who == Who::Calls && (said.message_id.is_none() || counted(&said.message_id)) {
            // Its usage went on a text or thinking part, or there is none to give.
            return;
        }
        let mut m = match said.who {
            Who::Human => {
                self.human = true;
                Message::human(&said.text)
            }
            Who::Harness => Message::harness(&said.text),
            // Before any person spoke (stream-json shows no `-p` prompt) a subagent's
            // prompt is said as the harness's, so it is not taken for the run's task.
            Who::SubPrompt if !self.human => Message::harness(&said.text),
            Who::SubPrompt => Message::user(&said.text),
            Who::Assistant => Message::assistant(&said.text),
            Who::Thinking => Message::new(Role::Assistant).reasoning(&said.text),
            Who::Synthetic => Message::assistant(&said.text).author(HARNESS),
            Who::System => Message::system(&said.text),
            // A reply that only calls tools: its usage, before its first call.
            Who::Calls => Message::new(Role::Assistant),
        };
        let spoken = matches!(said.who, Who::Assistant | Who::Thinking | Who::Calls);
        if (spoken || matches!(said.who, Who::SubPrompt | Who::System)) && m.author.is_none() {
            if let Some(a) = &author {
                m = m.author(a);
            }
        }
        if spoken {
            m = m.model(said.model.clone());
            if let Some(id) = &said.message_id {
                if self.counted.insert(id.as_str()) {
                    if let Some(&(tin, tout)) = usage.get(id) {
                        m = m.tokens(Some(tin), Some(tout));
                    }
                }
            }
        }
        rec.message(m.ts(ev.ts.clone()));
    }
}

/// Which events a completion claim follows: the agent's last words of each turn. A
/// turn ends at `end_turn`, at the next thing a person does, at a boundary the tool
/// writes (`turn_duration`, a stream-json `result`, the next file) or at the end of the
/// log; one interrupted by the person (`[Request interrupted by user]`) claims nothing,
/// and neither does one whose last act was a tool call.
fn claims(events: &[Ev]) -> Vec<bool> {
    let mut out = vec![false; events.len()];
    let mut last: Option<(usize, bool)> = None;
    for (i, ev) in events.iter().enumerate() {
        if ev.sub {
            continue;
        }
        match &ev.what {
            What::Text(_) => last = Some((i, true)),
            What::Call { .. } | What::ApiError(_) => last = Some((i, false)),
            What::Abort(_) => last = None,
            What::Person { mid_turn: true, .. } => {}
            What::EndTurn | What::Boundary | What::Person { .. } | What::Command | What::PersonShell { .. } => {
                if let Some((j, true)) = last.take() {
                    out[j] = true;
                }
            }
            What::Tick | What::Results(_) | What::Said(_) | What::Rewind { .. } => {}
        }
    }
    if let Some((j, true)) = last {
        out[j] = true;
    }
    out
}
