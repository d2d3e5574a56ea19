//! The conversation of a sample (docs/format.md §9.1), read from its ModelEvents in
//! stream order: before each model call, the messages of its input not recorded yet
//! (the system prompt, the task, the harness's and people's later user messages);
//! after it, the reply. The reply's tool calls are the ToolEvents that follow, whose
//! call and result messages the recorder writes, so `tool` messages are never taken
//! from an input.
//!
//! Each model call's input repeats the whole conversation so far, so a message is
//! recorded once: by its `id`, or in the first logs (no ids) by its role and content,
//! counted (the third identical "continue" message of an input is new when only two
//! were recorded). Newer logs keep the inputs once, in a pool (`events_data.messages`,
//! `message_pool`, or the chunked layout's `messages/` chunks), and each ModelEvent
//! names its slice of it with `input_refs` (half-open `[start, end)` ranges).

use std::collections::HashMap;

use serde_json::Value;

use crate::recorder::Message;
use crate::Recorder;

/// A message's visible text and thinking, from a string or a list of content parts
/// (`text` parts joined by a newline, as Inspect's own `.text` joins them; `reasoning`
/// parts, or the summary of a redacted one).
pub(super) fn text_and_reasoning(content: Option<&Value>) -> (String, String) {
    match content {
        Some(Value::String(s)) => (s.clone(), String::new()),
        Some(Value::Array(parts)) => {
            let mut text = Vec::new();
            let mut reasoning = Vec::new();
            for p in parts {
                match p.get("type").and_then(Value::as_str) {
                    Some("text") | None => {
                        if let Some(t) = p.get("text").and_then(Value::as_str).or(p.as_str()) {
                            text.push(t);
                        }
                    }
                    Some("reasoning") => {
                        let redacted = p.get("redacted").and_then(Value::as_bool) == Some(true);
                        let r = if redacted { None } else { p.get("reasoning").and_then(Value::as_str) };
                        if let Some(r) = r.or_else(|| p.get("summary").and_then(Value::as_str)) {
                            reasoning.push(r);
                        }
                    }
                    _ => {} // images, audio, documents, server-side tool use: not text
                }
            }
            (text.join("\n"), reasoning.join("\n"))
        }
        _ => (String::new(), String::new()),
    }
}

/// The task as the sample gives it: its `input` string, or the text of the user
/// messages of an input list.
pub(super) fn task_prompt(sample: &Value) -> Option<String> {
    match sample.get("input")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(messages) => {
            let users: Vec<String> = messages
                .iter()
                .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
                .map(|m| text_and_reasoning(m.get("content")).0)
                .filter(|t| !t.trim().is_empty())
                .collect();
            (!users.is_empty()).then(|| users.join("\n\n"))
        }
        _ => None,
    }
}

/// The conversation being recorded.
pub(super) struct Conversation<'a> {
    /// The pool `input_refs` index.
    pool: &'a [Value],
    /// How many times each message (by key) has been recorded or skipped.
    seen: HashMap<String, usize>,
    /// The user texts of the sample's input: a user message with one of them is the task.
    task: Vec<String>,
    /// What people typed (InputEvents), in order.
    typed: Vec<String>,
    /// Replies recorded (ModelEvents outside scorers with an output).
    pub replies: usize,
}

impl<'a> Conversation<'a> {
    pub(super) fn new(sample: &'a Value) -> Conversation<'a> {
        let pool = [sample.get("message_pool"), sample.get("events_data").and_then(|d| d.get("messages"))]
            .into_iter()
            .flatten()
            .filter_map(Value::as_array)
            .find(|p| !p.is_empty())
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let task = match sample.get("input") {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(m)) => m.iter().map(|m| text_and_reasoning(m.get("content")).0).collect(),
            _ => Vec::new(),
        };
        Conversation { pool, seen: HashMap::new(), task, typed: Vec::new(), replies: 0 }
    }

    /// A person typed `text` (an InputEvent): a later user message with it is theirs.
    pub(super) fn typed(&mut self, text: &str) {
        if !text.trim().is_empty() {
            self.typed.push(text.to_string());
        }
    }

    /// One ModelEvent: its input's new messages, then its reply. `author`: the
    /// subagent that called the model, if not the sample's own agent.
    pub(super) fn model_event(&mut self, e: &Value, author: Option<&str>, rec: &mut Recorder) {
        let model = e.get("model").and_then(Value::as_str);
        let input = self.input_of(e);
        for m in self.new_messages(input) {
            self.input_message(m, author, rec);
        }
        let Some(output) = e.get("output").filter(|o| !o.is_null()) else {
            return;
        };
        let Some(reply) = output.get("choices").and_then(|c| c.get(0)).and_then(|c| c.get("message")) else {
            return;
        };
        *self.seen.entry(key(reply)).or_default() += 1;
        self.replies += 1;
        let usage = output.get("usage");
        let tokens = |k: &str| usage.and_then(|u| u.get(k)).and_then(Value::as_i64);
        let (text, reasoning) = text_and_reasoning(reply.get("content"));
        let model =
            model.or(reply.get("model").and_then(Value::as_str)).or(output.get("model").and_then(Value::as_str));
        let ts = e.get("completed").or(e.get("timestamp")).and_then(Value::as_str);
        let mut m = Message::assistant(text)
            .reasoning(reasoning)
            .model(model)
            .tokens(tokens("input_tokens"), tokens("output_tokens"))
            .ts(ts);
        if let Some(a) = author {
            m = m.author(a);
        }
        rec.message(m);
    }

    /// The sample's `messages` when no model call was logged (the run ended before
    /// one, or its events are not kept): every message but the tools' results.
    pub(super) fn messages_without_events(&mut self, messages: &'a [Value], rec: &mut Recorder) {
        for m in self.new_messages(messages.iter().collect()) {
            self.input_message(m, None, rec);
        }
    }

    /// The messages of `list` not recorded yet: the k-th copy of a message in the list
    /// is new when fewer than k copies were recorded.
    fn new_messages<'e>(&mut self, list: Vec<&'e Value>) -> Vec<&'e Value> {
        let mut counts: HashMap<String, usize> = HashMap::new();
        let mut out = Vec::new();
        for m in list {
            let key = key(m);
            let n = counts.entry(key.clone()).or_default();
            *n += 1;
            let recorded = self.seen.entry(key).or_default();
            if *n > *recorded {
                *recorded = *n;
                out.push(m);
            }
        }
        out
    }

    fn input_of<'e>(&self, e: &'e Value) -> Vec<&'e Value>
    where
        'a: 'e,
    {
        if let Some(input) = e.get("input").and_then(Value::as_array).filter(|i| !i.is_empty()) {
            return input.iter().collect();
        }
        let mut out = Vec::new();
        for range in e.get("input_refs").and_then(Value::as_array).into_iter().flatten() {
            let bound = |i: usize| range.get(i).and_then(Value::as_u64).map(|n| n as usize);
            if let (Some(start), Some(end)) = (bound(0), bound(1)) {
                let end = end.min(self.pool.len());
                if start < end {
                    out.extend(self.pool[start..end].iter());
                }
            }
        }
        out
    }

    /// A message of a model call's input, first seen there.
    fn input_message(&mut self, m: &Value, author: Option<&str>, rec: &mut Recorder) {
        let (text, reasoning) = text_and_reasoning(m.get("content"));
        let message = match m.get("role").and_then(Value::as_str) {
            Some("system") => Message::system(text),
            Some("user") => {
                let from_input = m.get("source").and_then(Value::as_str) == Some("input")
                    || self.task.iter().any(|t| t.trim() == text.trim());
                if from_input {
                    Message::user(text) // the task as the dataset wrote it
                } else if self.typed.iter().any(|t| !text.trim().is_empty() && t.contains(text.trim())) {
                    Message::human(text)
                } else {
                    Message::harness(text) // a solver's prompt: continue, a template, a summary
                }
            }
            // A reply not logged as a model call's output (a prefill, another agent's).
            Some("assistant") => {
                let mut a = Message::assistant(text).reasoning(reasoning);
                a = a.model(m.get("model").and_then(Value::as_str));
                if let Some(name) = author {
                    a = a.author(name);
                }
                a
            }
            _ => return, // `tool`: the ToolEvent's result
        };
        rec.message(message);
    }
}

/// What makes two copies of a message the same message: its id, or in logs without
/// ids its role, content and tool calls.
fn key(m: &Value) -> String {
    if let Some(id) = m.get("id").and_then(Value::as_str).filter(|i| !i.is_empty()) {
        return format!("id:{id}");
    }
    let role = m.get("role").and_then(Value::as_str).unwrap_or("");
    let content = m.get("content").map(Value::to_string).unwrap_or_default();
    let calls: Vec<&str> = m
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("id").and_then(Value::as_str))
        .collect();
    let call_id = m.get("tool_call_id").and_then(Value::as_str).unwrap_or("");
    format!("{role}\u{0}{content}\u{0}{}\u{0}{call_id}", calls.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_parts_give_text_and_reasoning() {
        let parts = json!([
            {"type": "reasoning", "reasoning": "think first"},
            {"type": "text", "text": "one"},
            {"type": "image", "image": "data:..."},
            {"type": "text", "text": "two"},
            {"type": "reasoning", "reasoning": "ENCRYPTED", "redacted": true, "summary": "a summary"},
        ]);
        let (t, r) = text_and_reasoning(Some(&parts));
        assert_eq!(t, "one\ntwo");
        assert_eq!(r, "think first\na summary");
        assert_eq!(text_and_reasoning(Some(&json!("plain"))), ("plain".into(), String::new()));
    }

    #[test]
    fn the_task_prompt_is_the_input_string_or_its_user_messages() {
        assert_eq!(task_prompt(&json!({"input": "do it"})).as_deref(), Some("do it"));
        let list = json!({"input": [{"role": "system", "content": "sys"}, {"role": "user", "content": "q"}]});
        assert_eq!(task_prompt(&list).as_deref(), Some("q"));
    }
}
