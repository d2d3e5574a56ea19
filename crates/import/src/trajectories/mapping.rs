//! Which columns of a trajectory dataset's rows hold what: a small JSON mapping file
//! (`--mapping FILE`), every key optional; a key left out is looked for under the names
//! the public corpora use (SWE-smith, nebius SWE-agent and SWE-rebench-OpenHands, SWE-Gym,
//! mini-coder, ...). A path may go into nested objects with dots
//! (`test_result.git_patch`).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mapping {
    /// The harness that wrote the trajectories (`harness.name`), when the rows do not say.
    pub harness: Option<String>,
    pub run_id: Option<String>,
    pub instance_id: Option<String>,
    /// The column holding the messages (a list, or a JSON string of one).
    pub messages: Option<String>,
    pub model: Option<String>,
    /// A model for every row, when the dataset has one and no column.
    pub model_const: Option<String>,
    /// The evaluator's outcome: a bool, 0/1, or a reward (1 is correct).
    pub outcome: Option<String>,
    pub patch: Option<String>,
    /// A message's text field, and its role field.
    pub content: Option<String>,
    pub role: Option<String>,
    /// Raw roles to `system` / `user` / `assistant` / `tool` (`ai` is `assistant`...).
    #[serde(default)]
    pub roles: BTreeMap<String, String>,
}

impl Mapping {
    pub fn read(path: &Path) -> Result<Mapping, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: line {}: {e}", path.display(), e.line()))
    }
}

const RUN_ID: [&str; 5] = ["traj_id", "trajectory_id", "run_id", "id", "uuid"];
const INSTANCE_ID: [&str; 2] = ["instance_id", "task_id"];
pub(super) const MESSAGES: [&str; 4] = ["messages", "trajectory", "conversations", "chat"];
const MODEL: [&str; 3] = ["model", "model_name", "model_id"];
const OUTCOME: [&str; 7] =
    ["resolved", "target", "verified", "reward", "success", "test_result.report.resolved", "is_resolved"];
const PATCH: [&str; 5] = ["patch", "model_patch", "generated_patch", "git_patch", "test_result.git_patch"];
const CONTENT: [&str; 3] = ["content", "text", "value"];
const ROLE: [&str; 2] = ["role", "from"];

/// The value at a dotted path of a row.
pub(super) fn at<'a>(row: &'a Map<String, Value>, path: &str) -> Option<&'a Value> {
    let mut parts = path.split('.');
    let mut v = row.get(parts.next()?)?;
    for p in parts {
        v = v.get(p)?;
    }
    (!v.is_null()).then_some(v)
}

impl Mapping {
    fn pick<'a>(&self, row: &'a Map<String, Value>, given: &Option<String>, names: &[&str]) -> Option<&'a Value> {
        match given {
            Some(p) => at(row, p),
            None => names.iter().find_map(|n| at(row, n)),
        }
    }
    pub(super) fn run_id(&self, row: &Map<String, Value>) -> Option<String> {
        self.pick(row, &self.run_id, &RUN_ID).and_then(text)
    }
    pub(super) fn instance_id(&self, row: &Map<String, Value>) -> Option<String> {
        self.pick(row, &self.instance_id, &INSTANCE_ID).and_then(text)
    }
    /// The messages column, taken out of the row (a nested path: copied).
    pub(super) fn take_messages(&self, row: &mut Map<String, Value>) -> Option<Value> {
        let key = match &self.messages {
            Some(p) if p.contains('.') => return at(row, p).cloned(),
            Some(p) => p.clone(),
            None => MESSAGES.iter().find(|k| at(row, k).is_some())?.to_string(),
        };
        row.remove(&key).filter(|v| !v.is_null())
    }
    /// Whether a file with these top-level columns has the messages column.
    pub(super) fn has_messages_column(&self, columns: &[String]) -> bool {
        let has = |name: &str| columns.iter().any(|c| c == name);
        match &self.messages {
            Some(p) => has(p.split('.').next().unwrap_or(p)),
            None => MESSAGES.iter().any(|m| has(m)),
        }
    }
    pub(super) fn model(&self, row: &Map<String, Value>) -> Option<String> {
        self.model_const.clone().or_else(|| self.pick(row, &self.model, &MODEL).and_then(text))
    }
    /// The outcome as a verdict value: true / 1 is 1.0, false / 0 is 0.0, a reward as is.
    pub(super) fn outcome(&self, row: &Map<String, Value>) -> Option<(String, f64)> {
        let (name, v) = match &self.outcome {
            Some(p) => (p.clone(), at(row, p)?),
            None => OUTCOME.iter().find_map(|n| at(row, n).map(|v| (n.to_string(), v)))?,
        };
        let value = match v {
            Value::Bool(b) => f64::from(u8::from(*b)),
            Value::Number(n) => n.as_f64()?,
            Value::String(s) => match s.to_ascii_lowercase().as_str() {
                "true" | "resolved" | "pass" | "passed" => 1.0,
                "false" | "unresolved" | "fail" | "failed" => 0.0,
                _ => return None,
            },
            _ => return None,
        };
        // A tri-state -1 is "not evaluated": no verdict.
        (value >= 0.0).then_some((name, value))
    }
    pub(super) fn patch(&self, row: &Map<String, Value>) -> Option<String> {
        self.pick(row, &self.patch, &PATCH).and_then(text).filter(|p| !p.trim().is_empty())
    }
    /// A message's role, in the four words the package uses.
    pub(super) fn role_of(&self, m: &Value) -> String {
        let raw = match &self.role {
            Some(k) => m.get(k),
            None => ROLE.iter().find_map(|k| m.get(*k)),
        };
        let raw = raw.and_then(Value::as_str).unwrap_or("").to_ascii_lowercase();
        if let Some(r) = self.roles.get(&raw) {
            return r.clone();
        }
        match raw.as_str() {
            "ai" | "gpt" | "model" | "assistant" | "bot" => "assistant",
            "human" | "user" => "user",
            "function" | "observation" | "tool" | "ipython" | "environment" => "tool",
            "system" | "developer" => "system",
            _ => "user",
        }
        .to_string()
    }
    /// A message's text: its content field as a string, or its parts' text.
    pub(super) fn content_of(&self, m: &Value) -> String {
        let v = match &self.content {
            Some(k) => m.get(k),
            None => CONTENT.iter().find_map(|k| m.get(*k).filter(|v| !v.is_null())),
        };
        crate::tools::text(v)
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}
