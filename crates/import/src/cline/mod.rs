//! Cline, Roo Code and Kilo Code (`cline`): a task folder, `tasks/<id>/`, as the VS Code
//! extensions (`saoudrizwan.claude-dev`, `rooveterinaryinc.roo-cline`,
//! `kilocode.kilo-code`) and their CLIs write it (docs/importers.md §9.15).
//!
//! `api_conversation_history.json` is the run: the Anthropic-style messages sent to the
//! model, with the agent's tool calls as XML in its text (before native tools) or as
//! `tool_use` blocks, and their results in the next user message. `ui_messages.json`
//! adds the times and each request's tokens and cost; `task_metadata.json` the models.

mod history;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::{Context, Format, Input, Part, Plan, Recorder, Refusal, Unit};

#[cfg(test)]
mod tests;

/// This source's name (section 9).
pub(crate) const FORMAT: Format = Format::new("cline");

/// The file that is the run.
const HISTORY: &str = "api_conversation_history.json";
/// The task folder's other files, read with it.
const BESIDE: [&str; 5] =
    ["ui_messages.json", "task_metadata.json", "history_item.json", "context_history.json", "claude_messages.json"];

/// The registry's Cline / Roo / Kilo reader.
pub(crate) struct Cline;

impl crate::Importer for Cline {
    fn format(&self) -> Format {
        FORMAT
    }
    fn about(&self) -> &'static str {
        "Cline, Roo Code and Kilo Code task folders (tasks/ID/api_conversation_history.json, ui_messages.json)"
    }
    fn file_names(&self) -> &'static [&'static str] {
        &[HISTORY]
    }
    fn detect(&self, s: &crate::Sniff) -> Option<crate::Confidence> {
        let array = s.text.starts_with('[');
        let object = s.text.starts_with('{');
        match s.name.as_str() {
            HISTORY if array && (s.near("role") || s.text.trim_end() == "[]") => Some(crate::Confidence::Certain),
            "ui_messages.json" if array && (s.near("say") || s.near("ask")) && s.near("ts") => {
                Some(crate::Confidence::Certain)
            }
            "task_metadata.json" if object && (s.near("files_in_context") || s.near("model_usage")) => {
                Some(crate::Confidence::Certain)
            }
            "history_item.json" | "context_history.json" if s.in_folder("tasks") => Some(crate::Confidence::Certain),
            _ => None,
        }
    }
    fn plan(&self, inputs: Vec<Arc<Input>>, _: &crate::Options, plan: &mut Plan) {
        // By task folder: the history first, then the files beside it.
        let mut folders: BTreeMap<PathBuf, Vec<Arc<Input>>> = BTreeMap::new();
        for input in inputs {
            let dir = input.path.parent().map(Path::to_path_buf).unwrap_or_default();
            folders.entry(dir).or_default().push(input);
        }
        for (dir, mut files) in folders {
            files.sort_by_key(|f| f.file_name() != HISTORY);
            if files[0].file_name() != HISTORY {
                // The history may be there without having been given (one file named).
                let history = dir.join(HISTORY);
                if history.is_file() {
                    files.insert(0, Arc::new(Input::new(history, FORMAT)));
                } else {
                    for f in files {
                        plan.refuse(
                            FORMAT,
                            f.refuse(
                                None,
                                "a Cline / Roo / Kilo task file without its task's api_conversation_history.json",
                            ),
                        );
                    }
                    continue;
                }
            }
            // The others beside the history, whether given or found.
            for name in BESIDE {
                let path = dir.join(name);
                if path.is_file() && !files.iter().any(|f| f.path == path) {
                    files.push(Arc::new(Input::new(path, FORMAT)));
                }
            }
            plan.units.push(Unit::new(FORMAT, files, Part::Whole));
        }
    }
    fn read(&self, unit: &Unit, ctx: &Context) -> Vec<Result<Recorder, Refusal>> {
        vec![read(unit, ctx)]
    }
}

/// The extension that wrote a task, by the storage folder it is in (a folder named
/// exactly so: the extension's id, or its CLI's data folder).
fn harness(path: &Path) -> &'static str {
    for c in path.components() {
        match c.as_os_str().to_string_lossy().to_lowercase().as_str() {
            "rooveterinaryinc.roo-cline" | ".roocode" | ".roo" | ".vscode-mock" => return "roo-code",
            "kilocode.kilo-code" | ".kilocode" => return "kilo-code",
            _ => {}
        }
    }
    "cline"
}

/// A file of the task as JSON, from its bytes.
fn json_of(input: &Input, bytes: &[u8]) -> Result<Value, Refusal> {
    epistore_package::json_from_slice::<Value>(bytes)
        .map_err(|e| Refusal::at_line(input.display(), e.line(), format!("malformed JSON: {e}")))
}

fn read(unit: &Unit, ctx: &Context) -> Result<Recorder, Refusal> {
    let history = &unit.files[0];
    let task_dir = history.path.parent().unwrap_or(Path::new("."));
    let id = task_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "task".into());
    let mut rec = Recorder::new(FORMAT, id.clone());
    rec.harness_name(Some(harness(&history.path)));
    let (mut messages, mut ui, mut metadata) = (None, Vec::new(), None);
    // Each file read once: parsed, then kept as its source copy.
    for f in &unit.files {
        let bytes = f.read()?;
        match f.file_name().as_str() {
            HISTORY => match json_of(f, &bytes)? {
                Value::Array(m) => messages = Some(m),
                _ => return Err(f.refuse(None, "expected a JSON array of messages")),
            },
            "ui_messages.json" => {
                if let Value::Array(m) = json_of(f, &bytes)? {
                    ui = m;
                }
            }
            "task_metadata.json" => metadata = Some(json_of(f, &bytes)?),
            _ => {}
        }
        rec.source(&f.file_name(), &f.blake3()?, Part::Whole, bytes)?;
    }
    let messages = messages.ok_or_else(|| history.refuse(None, "no api_conversation_history.json"))?;
    // The task folder is rewritten as the task goes on: read again, it replaces its
    // earlier import.
    if let Some(old) = ctx.prior.and_then(|p| p.latest(FORMAT, &id)) {
        rec.supersedes(old);
    }
    if let Some(m) = &metadata {
        for usage in m.get("model_usage").and_then(Value::as_array).into_iter().flatten() {
            if let Some(model) = usage.get("model_id").and_then(Value::as_str) {
                rec.model(model);
            }
        }
    }
    ui_totals(&mut rec, &ui);
    history::record(&mut rec, &messages);
    Ok(rec)
}

/// Times, tokens and cost from `ui_messages.json`: its first and last `ts`, and every
/// `api_req_started` request's counts (the only usage classic Cline and Roo keep).
fn ui_totals(rec: &mut Recorder, ui: &[Value]) {
    let ms = |v: &Value| {
        v.get("ts")
            .and_then(Value::as_i64)
            .and_then(chrono::DateTime::from_timestamp_millis)
            .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
    };
    if let (Some(first), Some(last)) = (ui.first(), ui.last()) {
        rec.saw_time(ms(first).as_deref());
        rec.saw_time(ms(last).as_deref());
    }
    let (mut read, mut out, mut usd, mut any) = (0i64, 0i64, 0f64, false);
    for m in ui.iter().filter(|m| m.get("say").and_then(Value::as_str) == Some("api_req_started")) {
        let Some(Ok(Value::Object(info))) =
            m.get("text").and_then(Value::as_str).map(epistore_package::json_from_str::<Value>)
        else {
            continue;
        };
        let n = |k: &str| info.get(k).and_then(Value::as_i64).unwrap_or(0);
        if info.contains_key("tokensIn") {
            any = true;
            read += n("tokensIn") + n("cacheReads") + n("cacheWrites");
            out += n("tokensOut");
        }
        usd += info.get("cost").and_then(Value::as_f64).unwrap_or(0.0);
    }
    if any {
        rec.tokens(Some(read), Some(out));
    }
    if usd > 0.0 {
        rec.usd(usd);
    }
}
