//! mini-SWE-agent `.traj.json` files (docs/importers.md §2 to §6).
//!
//! A trajectory is `{info: {exit_status, submission, model_stats, mini_version, config},
//! messages: [...], trajectory_format}` (1.x: `mini-swe-agent-1`, 2.x: `-1.1`), one run.
//! The messages are the stream: each assistant message's actions are tool calls (2.x
//! `extra.actions`, tool calls, or in 1.x the one ```` ```bash ```` block of its text),
//! the observations that follow carry their results (`extra.returncode`, or the
//! `<returncode>` tag of 1.x), and the messages the interactive agent writes for a person
//! (`extra.interrupt_type`) are interventions. The messages are also the run's
//! conversation (docs/format.md §9): each call's output is the observation's
//! `extra.raw_output` or its `<output>` text. The reading is in `messages`.
//!
//! Not trajectories: a bare list of messages (the upstream test data holds such lists)
//! is refused; a `preds.json` is predictions, joined to the runs of the call as SWE-agent's
//! are ([`crate::common::preds`]).

use std::sync::Arc;

use serde_json::Value;

use crate::common::{self, content_text, parse_json, preds};
use crate::swe_agent;
use crate::{Context, Format, Input, Part, Plan, Recorder, Refusal, Unit};

/// This source's name (section 9).
pub(crate) const FORMAT: Format = Format::new("mini-swe-agent");

mod messages;

#[cfg(test)]
mod tests;

const EXPECTED: &str = "a mini-swe-agent trajectory (an object with `info` and `messages`)";

pub(crate) fn plan(inputs: Vec<Arc<Input>>, plan: &mut Plan) {
    let format = crate::mini_swe_agent::FORMAT;
    let mut predictions = Vec::new();
    let mut trajectories = Vec::new();
    for input in inputs {
        match preds::shape_of(&input.path) {
            Some(shape) => predictions.push((input, shape)),
            None => trajectories.push(input),
        }
    }
    crate::whole_files(format, trajectories, plan);
    // After the trajectories, and after SWE-agent's plan (formats are planned in order):
    // mini-SWE-agent's and SWE-agent 1.x's `preds.json` look the same, so a document
    // here may belong to either tool's runs.
    for (input, shape) in predictions {
        swe_agent::join_predictions(format, input, shape, plan);
    }
}

pub(crate) fn read(unit: &Unit, _ctx: &Context) -> Vec<Result<Recorder, Refusal>> {
    vec![read_traj(&unit.files[0])]
}

fn read_traj(input: &Input) -> Result<Recorder, Refusal> {
    let bytes = input.read()?;
    let doc = parse_json(input, &bytes, EXPECTED)?;
    let obj = match &doc {
        Value::Object(obj) => obj,
        Value::Array(items) if items.iter().all(|m| m.get("role").is_some()) => {
            return Err(input.refuse(
                None,
                "a bare list of messages, not a trajectory: no `info` (exit status, model, submission); \
                 mini-swe-agent writes {info, messages, trajectory_format}",
            ))
        }
        _ => return Err(input.refuse(None, format!("expected {EXPECTED}"))),
    };
    let Some(msgs) = obj.get("messages").and_then(Value::as_array) else {
        let preds = obj.values().all(|v| v.get("model_patch").is_some()) && !obj.is_empty();
        let reason = if preds {
            "predictions (instance_id -> model_patch), not a trajectory".to_string()
        } else {
            format!("no `messages`: expected {EXPECTED}")
        };
        return Err(input.refuse(None, reason));
    };
    let empty = serde_json::Map::new();
    let info = obj.get("info").and_then(Value::as_object).unwrap_or(&empty);
    let config = info.get("config").cloned().unwrap_or(Value::Null);

    let name = input.file_name();
    let episode = preds::traj_stem(&name).unwrap_or_else(|| name.trim_end_matches(".json").to_string());
    let mut rec = Recorder::new(crate::mini_swe_agent::FORMAT, episode.clone());
    rec.source(&name, &input.blake3()?, Part::Whole, bytes)?;

    for m in models(&config) {
        rec.model(m);
    }
    rec.harness_version(info.get("mini_version").and_then(Value::as_str));
    let instance_id = obj.get("instance_id").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    if let Some(id) = &instance_id {
        rec.task(id.clone());
    }
    let instance_id = instance_id.unwrap_or_else(|| episode.clone());
    rec.instance_id = Some(instance_id.clone());
    if let Some(cwd) = config.pointer("/environment/cwd").and_then(Value::as_str) {
        rec.workdir(cwd);
    }
    common::cluster(&mut rec, None, &instance_id);
    if config.pointer("/agent/mode").and_then(Value::as_str) == Some("confirm") {
        rec.note("confirm mode: a person's approvals are not logged, only rejections");
    }
    if !info.contains_key("exit_status") {
        rec.note("the trajectory has no `info.exit_status`");
    }

    let exit_status = info
        .get("exit_status")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| {
            msgs.iter().rev().find_map(|m| m.pointer("/extra/exit_status").and_then(Value::as_str).map(str::to_string))
        })
        .unwrap_or_default();
    messages::stream(&mut rec, msgs, &config, &exit_status);

    match stop_reason(&exit_status) {
        Some(r) => rec.stop_reason(r),
        None if exit_status.is_empty() => rec.note("no exit status: the run did not finish"),
        None => {}
    }
    match info.get("submission") {
        Some(Value::String(s)) if common::looks_like_diff(s) => rec.patch(s),
        Some(Value::String(s)) if !s.trim().is_empty() => rec.note("the submission is not a diff: no patch.diff"),
        _ => {}
    }
    if let Some(usd) = info.get("model_stats").and_then(|s| s.get("instance_cost")).and_then(Value::as_f64) {
        rec.usd(usd);
    }
    Ok(rec)
}

/// The model the configuration names (`info.config.model.model_name`; a roulette model's
/// `models[].model_name` each).
fn models(config: &Value) -> Vec<String> {
    let Some(model) = config.get("model") else {
        return Vec::new();
    };
    let name =
        |m: &Value| m.get("model_name").and_then(Value::as_str).filter(|s| !s.trim().is_empty()).map(str::to_string);
    match name(model) {
        Some(n) => vec![n],
        None => model.get("models").and_then(Value::as_array).into_iter().flatten().filter_map(name).collect(),
    }
}

/// `outcome.stop_reason` from `info.exit_status`: `Submitted`, a limit, or the class name
/// of the exception that ended the run.
fn stop_reason(status: &str) -> Option<&'static str> {
    Some(match status {
        "" | "Submitted" => return None,
        "LimitsExceeded"
        | "TimeExceeded"
        | "CostLimitExceeded"
        | "ContextWindowExceeded"
        | "ContextWindowExceededError" => "budget_exhausted",
        "FormatError" => "invalid_action",
        "UserInterruption" | "KeyboardInterrupt" => "other",
        _ => "infra_error",
    })
}

/// A message's text (`content`, or a Responses API item's `output`).
fn text(m: &Value) -> String {
    let t = content_text(m.get("content"));
    if t.is_empty() {
        content_text(m.get("output"))
    } else {
        t
    }
}

/// The registry's mini-SWE-agent reader.
pub(crate) struct MiniSweAgent;

impl crate::Importer for MiniSweAgent {
    fn format(&self) -> Format {
        FORMAT
    }
    fn about(&self) -> &'static str {
        "mini-SWE-agent trajectories (.traj.json) and predictions (preds.json)"
    }
    fn file_names(&self) -> &'static [&'static str] {
        &["run.traj.json", "preds.json"]
    }
    fn detect(&self, s: &crate::Sniff) -> Option<crate::Confidence> {
        use crate::Confidence::{Certain, Name, Shape};
        if s.first.is_some() {
            return None;
        }
        let traj_name = s.name.ends_with(".traj.json");
        if s.text.starts_with('{') {
            if s.near("trajectory_format") && s.text.contains("mini-swe-agent") {
                return Some(Certain);
            }
            if s.near("messages") && s.near("info") && s.near("mini_version") {
                return Some(Certain);
            }
            if s.near("messages") && s.near("info") && traj_name {
                return Some(Shape);
            }
            // `preds.json`: predictions, not trajectories (SWE-agent 1.x writes the
            // same shape: joined to whichever tool's runs it names).
            if s.near("model_patch") && s.near("instance_id") {
                return Some(Shape);
            }
            return (traj_name && (s.near("messages") || s.near("info"))).then_some(Name);
        }
        // A bare message list: refused by the module with its reason.
        let messages = s.text.starts_with('[') && s.near("role") && s.near("content");
        (messages && traj_name).then_some(Name)
    }
    fn plan(&self, inputs: Vec<Arc<Input>>, _: &crate::Options, plan: &mut Plan) {
        self::plan(inputs, plan)
    }
    fn read(&self, unit: &Unit, ctx: &Context) -> Vec<Result<Recorder, Refusal>> {
        self::read(unit, ctx)
    }
}
