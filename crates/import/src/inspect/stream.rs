//! A sample's `events` (not its `messages`, which drop calls such as `submit`) read in
//! stream order into recorder calls, the conversation with them ([`super::messages`]:
//! each model call's new input messages and its reply, before the calls it made).
//!
//! Three layouts of the same events exist across Inspect versions, and the exit code of
//! a tool call is found differently in each:
//! - spans (0.3.9x on): a tool call opens a `span_begin` of type `tool` and its
//!   `ToolEvent` follows at once (the event carries the parent's `span_id`); the sandbox
//!   `exec` events of the call carry the tool span's id, or a span inside it;
//! - `step` events with the call's events nested in `ToolEvent.events` (the first logs);
//! - `step` events with flat events: the `exec`s between the call's start and its result.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, FixedOffset};
use serde_json::Value;

use super::messages::Conversation;
use super::sample::Header;
use super::tools;
use crate::Recorder;

/// What the walk saw that the run's outcome needs.
#[derive(Debug, Default)]
pub(super) struct Seen {
    pub budget_limit: bool,
    pub error: bool,
    /// The answer of the agent's last successful submission.
    pub submitted: Option<String>,
    /// Model replies recorded as messages.
    pub replies: usize,
}

pub(super) fn walk<'a>(
    header: &Header,
    events: &'a [Value],
    conversation: &mut Conversation<'a>,
    rec: &mut Recorder,
) -> Seen {
    let mut approvals = HashMap::new();
    collect_approvals(events, &mut approvals, 0);
    let mut w = Walker {
        header,
        approvals,
        seen: Seen::default(),
        scorer_steps: 0,
        skipped_scorer_tools: false,
        conversation,
        truncated_outputs: 0,
    };
    w.list(events, rec, 0, false, None);
    if w.skipped_scorer_tools {
        rec.note("tool calls made inside scorers are the evaluator's, not the agent's: not recorded");
    }
    if w.truncated_outputs > 0 {
        rec.note(format!(
            "Inspect cut the output of {} tool calls to its max_tool_output before logging it: their output files hold what the log holds",
            w.truncated_outputs
        ));
    }
    w.seen.replies = w.conversation.replies;
    w.seen
}

/// The last decision taken before each call ran (`stage` `call`), by tool call id.
fn collect_approvals<'a>(events: &'a [Value], out: &mut HashMap<String, &'a str>, depth: usize) {
    for e in events {
        if kind(e) == "approval" && e.get("stage").and_then(Value::as_str).unwrap_or("call") == "call" {
            let id = e.get("call").and_then(|c| c.get("id")).and_then(Value::as_str);
            if let (Some(id), Some(d)) = (id, e.get("decision").and_then(Value::as_str)) {
                out.insert(id.to_string(), d);
            }
        }
        if depth < 16 {
            if let Some(nested) = e.get("events").and_then(Value::as_array) {
                collect_approvals(nested, out, depth + 1);
            }
        }
    }
}

pub(super) fn kind(e: &Value) -> &str {
    e.get("event").and_then(Value::as_str).unwrap_or("")
}

fn str_of<'a>(e: &'a Value, key: &str) -> Option<&'a str> {
    e.get(key).and_then(Value::as_str)
}

pub(super) fn time(ts: Option<&str>) -> Option<DateTime<FixedOffset>> {
    DateTime::parse_from_rfc3339(ts?.trim()).ok()
}

struct Span<'a> {
    ty: &'a str,
    name: &'a str,
    parent: Option<&'a str>,
}

/// The span structure of one event list.
struct Spans<'a> {
    by_id: HashMap<&'a str, Span<'a>>,
    /// Tool span id -> the sandbox execs the call ran, in order.
    execs: HashMap<&'a str, Vec<&'a Value>>,
    /// Event index of a `ToolEvent` -> its tool span id.
    tool_span: HashMap<usize, &'a str>,
}

impl<'a> Spans<'a> {
    fn new(events: &'a [Value]) -> Spans<'a> {
        let mut by_id = HashMap::new();
        for e in events.iter().filter(|e| kind(e) == "span_begin") {
            if let Some(id) = str_of(e, "id") {
                let span = Span {
                    ty: str_of(e, "type").unwrap_or(""),
                    name: str_of(e, "name").unwrap_or(""),
                    parent: str_of(e, "parent_id"),
                };
                by_id.insert(id, span);
            }
        }
        let mut spans = Spans { by_id, execs: HashMap::new(), tool_span: HashMap::new() };
        for e in events.iter().filter(|e| is_exec(e)) {
            if let Some(owner) = spans.enclosing(str_of(e, "span_id"), |s| s.ty == "tool") {
                spans.execs.entry(owner.0).or_default().push(e);
            }
        }
        spans.claim_tool_spans(events);
        spans
    }

    /// The nearest span (from `start` outwards) that `pred` accepts, with its id.
    fn enclosing(&self, start: Option<&'a str>, pred: impl Fn(&Span) -> bool) -> Option<(&'a str, &Span<'a>)> {
        let mut at = start;
        for _ in 0..256 {
            let id = at?;
            let (key, span) = self.by_id.get_key_value(id)?;
            if pred(span) {
                return Some((key, span));
            }
            at = span.parent;
        }
        None
    }

    /// The agent that made a model call, when it is not the sample's own: the innermost
    /// of two or more nested `agent` spans (a handoff, an agent run as a tool), when its
    /// name is not the outermost's.
    fn subagent(&self, start: Option<&'a str>) -> Option<&'a str> {
        let mut at = start;
        let mut agents = Vec::new();
        for _ in 0..256 {
            let Some((_, span)) = at.and_then(|id| self.by_id.get_key_value(id)) else {
                break;
            };
            if span.ty == "agent" {
                agents.push(span.name);
            }
            at = span.parent;
        }
        // An agent that wraps one of its own name is still the sample's own agent.
        let (inner, outer) = (agents.first()?, agents.last()?);
        (agents.len() >= 2 && inner != outer && !inner.is_empty()).then_some(*inner)
    }

    /// Each `ToolEvent` is written right after its tool span begins; when something
    /// came between, the nearest unclaimed tool span of the same name and parent.
    fn claim_tool_spans(&mut self, events: &'a [Value]) {
        let mut claimed: HashSet<&str> = HashSet::new();
        let is_span_for = |e: &Value, function: &str, parent: Option<&str>| {
            kind(e) == "span_begin"
                && str_of(e, "type") == Some("tool")
                && str_of(e, "name") == Some(function)
                && (parent.is_none() || str_of(e, "parent_id") == parent)
        };
        for (i, e) in events.iter().enumerate().filter(|(_, e)| kind(e) == "tool") {
            let function = str_of(e, "function").unwrap_or("");
            let parent = str_of(e, "span_id");
            let mut found = None;
            for d in 1..=64usize {
                let candidates = [i.checked_sub(d), Some(i + d).filter(|j| *j < events.len())];
                for j in candidates.into_iter().flatten() {
                    let cand = &events[j];
                    let id = str_of(cand, "id").unwrap_or("");
                    if is_span_for(cand, function, if d == 1 && j < i { None } else { parent }) && !claimed.contains(id)
                    {
                        found = Some(id);
                        break;
                    }
                }
                if found.is_some() {
                    break;
                }
            }
            if let Some(id) = found {
                claimed.insert(id);
                self.tool_span.insert(i, id);
            }
        }
    }
}

pub(super) fn is_exec(e: &Value) -> bool {
    kind(e) == "sandbox" && str_of(e, "action") == Some("exec")
}

struct Walker<'h, 'a> {
    header: &'h Header,
    approvals: HashMap<String, &'a str>,
    seen: Seen,
    /// How many `step` scorers are open (logs without spans).
    scorer_steps: usize,
    skipped_scorer_tools: bool,
    conversation: &'h mut Conversation<'a>,
    /// Tool calls whose output Inspect cut before logging it.
    truncated_outputs: usize,
}

impl<'a> Walker<'_, 'a> {
    /// `nested_people`: the list is a call's nested events, whose approvals and inputs
    /// were placed before the call. `agent`: the subagent whose events these are
    /// (a handoff's or a subtask's nested events).
    fn list(
        &mut self,
        events: &'a [Value],
        rec: &mut Recorder,
        depth: usize,
        nested_people: bool,
        agent: Option<&'a str>,
    ) {
        let spans = Spans::new(events);
        let has_spans = !spans.by_id.is_empty();
        for (i, e) in events.iter().enumerate() {
            let ts = str_of(e, "timestamp");
            rec.saw_time(ts);
            rec.saw_time(str_of(e, "completed"));
            // The evaluator's own model and tool calls are not the agent's.
            let in_scorer = if has_spans {
                spans.enclosing(str_of(e, "span_id"), |s| s.ty == "scorer" || s.ty == "scorers").is_some()
            } else {
                self.scorer_steps > 0
            };
            match kind(e) {
                "model" if !in_scorer => {
                    if let Some(m) = str_of(e, "model") {
                        rec.model(m);
                    }
                    let author = spans.subagent(str_of(e, "span_id")).or(agent);
                    self.conversation.model_event(e, author, rec);
                }
                "tool" if in_scorer => self.skipped_scorer_tools = true,
                "tool" => {
                    let execs: Vec<&Value> = if let Some(span) = spans.tool_span.get(&i) {
                        spans.execs.get(span).cloned().unwrap_or_default()
                    } else {
                        flat_execs(events, i)
                    };
                    let nested = e.get("events").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
                    // Nested (first logs): the approval came before the call ran.
                    for n in nested.iter().filter(|n| matches!(kind(n), "approval" | "input")) {
                        self.person(n, rec);
                    }
                    let decision = str_of(e, "id").and_then(|id| self.approvals.get(id)).copied();
                    if e.get("truncated").is_some_and(|t| !t.is_null()) {
                        self.truncated_outputs += 1;
                    }
                    if let Some(answer) = tools::call(e, &execs, decision, &self.header.submit_names, rec) {
                        self.seen.submitted = Some(answer);
                    }
                    if depth < 16 && nested.iter().any(|n| matches!(kind(n), "tool" | "subtask" | "model")) {
                        // A handoff's events are its agent's.
                        let inner = str_of(e, "agent").or(agent);
                        self.list(nested, rec, depth + 1, true, inner);
                    }
                }
                "approval" | "input" if nested_people => {} // placed before their call
                "approval" | "input" | "interrupt" => self.person(e, rec),
                "sample_limit" if str_of(e, "type") != Some("operator") => self.seen.budget_limit = true,
                "error" => self.seen.error = true,
                "step" => {
                    let scorer_step = str_of(e, "type") == Some("scorer");
                    match (str_of(e, "action"), scorer_step) {
                        (Some("begin"), true) => self.scorer_steps += 1,
                        (Some("end"), true) => self.scorer_steps = self.scorer_steps.saturating_sub(1),
                        _ => {}
                    }
                }
                "subtask" if depth < 16 => {
                    if let Some(nested) = e.get("events").and_then(Value::as_array) {
                        self.list(nested, rec, depth + 1, false, str_of(e, "name").or(agent));
                    }
                }
                _ => {} // unknown and uninteresting event types are skipped
            }
        }
    }

    /// What a person did: an InputEvent, a human approver's decision, a user's cancel.
    fn person(&mut self, e: &Value, rec: &mut Recorder) {
        let ts = str_of(e, "timestamp");
        match kind(e) {
            "input" => {
                let text = input_text(e);
                self.conversation.typed(&text);
                rec.person_message(ts, &text);
            }
            // Inspect logs its own approvers unqualified (`human`, `auto`, `policy`).
            "approval" if matches!(str_of(e, "approver"), Some("human" | "inspect_ai/human")) => {
                let decision = str_of(e, "decision").unwrap_or("");
                let reason = str_of(e, "explanation").filter(|r| !r.trim().is_empty()).unwrap_or(decision);
                match decision {
                    "approve" | "modify" => rec.person_decision(ts, true, reason),
                    "reject" => rec.person_decision(ts, false, reason),
                    "terminate" => rec.person_abort(ts, reason),
                    _ => return, // `escalate`: another approver decides
                };
            }
            "interrupt" => match str_of(e, "source") {
                Some("user_cancel") => {
                    rec.person_abort(ts, "user_cancel");
                }
                Some("limit") => self.seen.budget_limit = true,
                _ => {}
            },
            _ => {}
        }
    }
}

/// The execs of a call in a log without spans: nested in the event, or the ones that
/// follow it and started between its start and its result.
fn flat_execs(events: &[Value], i: usize) -> Vec<&Value> {
    let e = &events[i];
    if let Some(nested) = e.get("events").and_then(Value::as_array).filter(|n| !n.is_empty()) {
        return nested.iter().filter(|n| is_exec(n)).collect();
    }
    let start = time(str_of(e, "timestamp"));
    let end = time(str_of(e, "completed"));
    let mut out = Vec::new();
    for next in &events[i + 1..] {
        if matches!(kind(next), "tool" | "model" | "step" | "subtask" | "span_begin") {
            break;
        }
        if is_exec(next) {
            let at = time(str_of(next, "timestamp"));
            let inside = match (start, end, at) {
                (Some(s), Some(en), Some(a)) => s <= a && a <= en,
                _ => true,
            };
            if inside {
                out.push(next);
            }
        }
    }
    out
}

/// A person's input, without the rules the console draws around it.
fn input_text(e: &Value) -> String {
    if let Some(content) = e.get("content").and_then(Value::as_object).filter(|c| !c.is_empty()) {
        let parts: Vec<String> =
            content.values().map(|v| v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())).collect();
        return parts.join("; ");
    }
    let text = str_of(e, "input").unwrap_or("");
    text.lines()
        .filter(|l| !l.trim_start().starts_with(|c: char| ('\u{2500}'..='\u{257f}').contains(&c)))
        .collect::<Vec<_>>()
        .join("\n")
}
