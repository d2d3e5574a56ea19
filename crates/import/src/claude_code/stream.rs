//! Headless `--output-format stream-json` lines: `system/init` (session, cwd,
//! model, version), the messages (`parent_tool_use_id` set for a subagent's) and the
//! `result` line that ends each turn with the process's running totals.

use serde_json::{Map, Value};

use super::head::str_of;
use super::parse::{usage_pair, FileData, Outcome, What};

impl FileData {
    pub(super) fn stream_line(&mut self, o: &Map<String, Value>) {
        let ts = o.get("timestamp").and_then(Value::as_str);
        if self.session.is_none() {
            self.session = o.get("session_id").and_then(Value::as_str).map(str::to_string);
        }
        let sub = o.get("parent_tool_use_id").is_some_and(|p| !p.is_null());
        self.start_line(o.get("uuid"), o.get("parent_tool_use_id"), None);
        match str_of(o, "type") {
            "system" if str_of(o, "subtype") == "init" => {
                self.cwd = self.cwd.take().or_else(|| o.get("cwd").and_then(Value::as_str).map(str::to_string));
                self.init_model = o.get("model").and_then(Value::as_str).map(str::to_string);
                self.version(o.get("claude_code_version").and_then(Value::as_str));
                self.tick(ts);
            }
            "assistant" => self.assistant(o.get("message"), ts, sub, false),
            "user" => {
                let meta: Vec<Value> = o.get("tool_result_meta").and_then(Value::as_array).cloned().unwrap_or_default();
                let structured = o.get("tool_use_result").or_else(|| o.get("toolUseResult"));
                let decision = move |id: &str| {
                    meta.iter()
                        .find(|m| m.get("id").and_then(Value::as_str) == Some(id))
                        .and_then(|m| m.get("permission_decision").cloned())
                };
                self.user(o.get("message"), ts, sub, structured, decision);
            }
            "result" => {
                let pair = |u: Option<&Value>| u.and_then(Value::as_object).map(usage_pair);
                let model_usage = o.get("modelUsage").and_then(Value::as_object).filter(|m| !m.is_empty()).map(|m| {
                    m.values().filter_map(Value::as_object).fold((0, 0), |(a, b), u| {
                        let n = |k: &str| u.get(k).and_then(Value::as_i64).unwrap_or(0);
                        (
                            a + n("inputTokens") + n("cacheReadInputTokens") + n("cacheCreationInputTokens"),
                            b + n("outputTokens"),
                        )
                    })
                });
                self.outcomes.push(Outcome {
                    subtype: str_of(o, "subtype").to_string(),
                    result: o.get("result").and_then(Value::as_str).map(str::to_string),
                    is_error: o.get("is_error").and_then(Value::as_bool) == Some(true),
                    // `cost_usd` before `total_cost_usd` (0.2.x).
                    usd: o.get("total_cost_usd").or_else(|| o.get("cost_usd")).and_then(Value::as_f64),
                    usage: pair(o.get("usage")),
                    model_usage,
                    models: o
                        .get("modelUsage")
                        .and_then(Value::as_object)
                        .map(|m| m.keys().cloned().collect())
                        .unwrap_or_default(),
                });
                for d in o.get("permission_denials").and_then(Value::as_array).into_iter().flatten() {
                    if let Some(id) = d.get("tool_use_id").and_then(Value::as_str) {
                        self.denied.push(id.to_string());
                    }
                }
                self.push(ts, false, What::Boundary);
            }
            _ => self.tick(ts),
        }
    }
}
