//! Helpers more than one format uses: JSON refused at its line, message text, diffs
//! told from other submissions, SWE-bench ids, instance templates (SWE-agent and
//! mini-SWE-agent), predictions files, Python literals (SWE-bench reports as OpenHands
//! prints them) and Codex's `apply_patch` language (rollouts and telemetry). Formats
//! import from here, never from each other's folders.

use serde_json::Value;

use crate::{Input, Recorder, Refusal};

pub(crate) mod apply_patch;
pub(crate) mod preds;
pub(crate) mod pylit;

/// Parses a whole JSON log, refusing it at the line where it breaks.
pub(crate) fn parse_json(input: &Input, bytes: &[u8], expected: &str) -> Result<Value, Refusal> {
    epistore_package::json_from_slice(bytes).map_err(|e| {
        let what = if e.is_eof() { "truncated JSON" } else { "not valid JSON" };
        Refusal::at_line(input.display(), e.line().max(1), format!("{what} ({e}); expected {expected}"))
    })
}

/// A message's text: a string, or the `text` of its content parts.
pub(crate) fn content_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str).or_else(|| p.as_str()))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Whether a submission is a diff (SWE-agent's EnIGMA mode submits flags, mini-SWE-agent
/// whatever the final command printed): only a diff becomes `patch.diff`.
pub(crate) fn looks_like_diff(s: &str) -> bool {
    let mut minus = false;
    for line in s.lines() {
        if line.starts_with("diff --git ") || (minus && line.starts_with("+++ ")) {
            return true;
        }
        minus = line.starts_with("--- ");
    }
    false
}

/// `task.cluster`: the repository when a structured field or the SWE-bench instance id
/// names it, else the working directory's last component.
pub(crate) fn cluster(rec: &mut Recorder, repository: Option<String>, instance_id: &str) {
    let from_dir = rec.workdir_known().and_then(|d| d.rsplit('/').find(|p| !p.is_empty())).map(str::to_string);
    if let Some(c) = repository.or_else(|| swe_bench_repo(instance_id)).or(from_dir) {
        rec.cluster(c);
    }
}

/// The task inside an instance template's rendering: the text where the template's
/// placeholder for it (`{{task}}`, `{{problem_statement}}`, 0.x `{issue}`) stands, found
/// by the template's line of literal text before it and after it. `None` when the text
/// does not match.
pub(crate) fn template_fill(template: &str, text: &str) -> Option<String> {
    use std::sync::OnceLock;
    static RES: OnceLock<(regex::Regex, regex::Regex)> = OnceLock::new();
    let (task, any) = RES.get_or_init(|| {
        (
            regex::Regex::new(r"\{\{-?\s*(task|problem_statement|issue)\s*-?\}\}|\{(issue|problem_statement)\}")
                .expect("regex"),
            regex::Regex::new(r"(?s)\{\{.*?\}\}|\{%.*?%\}|\{[A-Za-z_][A-Za-z0-9_]*\}").expect("regex"),
        )
    });
    let m = task.find(template)?;
    let before = &template[..m.start()];
    let after = &template[m.end()..];
    let before = any.find_iter(before).last().map_or(before, |p| &before[p.end()..]);
    let after = any.find(after).map_or(after, |p| &after[..p.start()]);
    // Only the line next to the placeholder: the rest of a template kept in a
    // configuration may differ from the one the run rendered.
    let content_end = before.trim_end().len();
    let before = &before[before[..content_end].rfind('\n').map_or(0, |i| i + 1)..];
    let content_start = after.len() - after.trim_start().len();
    let after = &after[..after[content_start..].find('\n').map_or(after.len(), |i| content_start + i)];
    let start = if before.is_empty() { 0 } else { text.find(before)? + before.len() };
    let rest = &text[start..];
    let end = if after.is_empty() { rest.len() } else { rest.find(after)? };
    let fill = &rest[..end];
    (!fill.trim().is_empty()).then(|| fill.to_string())
}

/// The first string at `key` anywhere in a JSON value (a template in a configuration).
pub(crate) fn find_string<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    match v {
        Value::Object(m) => m.get(key).and_then(Value::as_str).or_else(|| m.values().find_map(|x| find_string(x, key))),
        Value::Array(a) => a.iter().find_map(|x| find_string(x, key)),
        _ => None,
    }
}

/// The repository of a SWE-bench instance id (`owner__name-123`, as SWE-bench builds its ids).
pub(crate) fn swe_bench_repo(instance_id: &str) -> Option<String> {
    let (owner, rest) = instance_id.split_once("__")?;
    let (name, number) = rest.rsplit_once('-')?;
    let ok = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    (ok(owner) && ok(name) && !number.is_empty() && number.chars().all(|c| c.is_ascii_digit()))
        .then(|| format!("{owner}/{name}"))
}
