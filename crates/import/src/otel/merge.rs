//! A session seen both ways (docs/importers.md §9.18): its session file read by the
//! agent's own importer and its telemetry become one episode. The file is the richer
//! record (messages, tool output, edits and their diffs); the telemetry adds what the
//! file lacks, each fact marked as the telemetry's: a call's duration and the person's
//! decision on its tools record (`telemetry`, kept in the record's extra), the agent's
//! cost estimate. Whichever source reaches the store second writes the merged episode,
//! superseding the first.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::{events, Agent, Event};
use crate::{Companion, Context, Input, Part, Plan, Prior, Recorder, Refusal, Unit};

/// The telemetry facts of one call, by the id the session file gives it.
fn call_facts(events: &[Event]) -> Vec<(String, Map<String, Value>)> {
    let mut out: Vec<(String, Map<String, Value>)> = Vec::new();
    let mut add = |id: String, key: &str, v: Value| {
        if v.is_null() {
            return;
        }
        match out.iter_mut().find(|(i, _)| *i == id) {
            Some((_, m)) => {
                m.insert(key.to_string(), v);
            }
            None => {
                let mut m = Map::new();
                m.insert("from".into(), json!("telemetry"));
                m.insert(key.to_string(), v);
                out.push((id, m));
            }
        }
    };
    for e in events {
        let id = match e.agent {
            Agent::ClaudeCode => e.str("tool_use_id").map(str::to_string),
            Agent::Codex => e.str("call_id").map(str::to_string),
            // Gemini CLI's call ids are `<function>-<start ms>-<random>`: the event gives
            // the first two.
            Agent::GeminiCli => match (e.str("function_name"), e.int("start_time")) {
                (Some(f), Some(ms)) => Some(format!("{f}-{ms}-")),
                _ => None,
            },
        };
        let Some(id) = id else { continue };
        match e.name.as_str() {
            "tool_decision" => {
                add(id.clone(), "decision", json!(e.str("decision")));
                add(id, "decision_source", json!(e.str("source")));
            }
            "tool_result" | "tool_call" => {
                add(id.clone(), "duration_ms", json!(e.float("duration_ms")));
                add(id.clone(), "success", json!(e.flag("success")));
                if e.agent == Agent::GeminiCli {
                    add(id.clone(), "decision", json!(e.str("decision")));
                }
                if let Some(d) = e.str("decision_type") {
                    add(id.clone(), "decision", json!(d));
                }
                if let Some(s) = e.str("decision_source") {
                    add(id, "decision_source", json!(s));
                }
            }
            _ => {}
        }
    }
    out
}

/// Adds a session's telemetry to the recorder of its session file: per call, the
/// facts; the cost estimate when the file gives none; the telemetry's source files.
pub(crate) fn add_telemetry(
    rec: &mut Recorder,
    events: &[Event],
    sources: Vec<(String, String, Part, Vec<u8>)>,
) -> Result<(), Refusal> {
    let facts = call_facts(events);
    let mut matched = 0;
    for (id, f) in facts {
        let gemini = id.ends_with('-');
        if rec.call_facts(|call_id| if gemini { call_id.starts_with(&id) } else { call_id == id }, f) {
            matched += 1;
        }
    }
    let usd: f64 = events.iter().filter(|e| e.name == "api_request").filter_map(|e| e.float("cost_usd")).sum();
    let mut added_cost = false;
    if usd > 0.0 && !rec.usd_known() {
        rec.usd(usd);
        added_cost = true;
    }
    rec.note(format!(
        "merged with the session's telemetry ({} events): durations and decisions of {matched} calls{}, marked \
         `telemetry` on their tools records",
        events.len(),
        if added_cost { ", and the agent's own cost estimate (cost_usd)" } else { "" }
    ));
    for (name, hash, part, bytes) in sources {
        rec.source(&name, &hash, part, bytes)?;
    }
    Ok(())
}

/// The session's file, read again from its stored copy by its own importer.
fn reread(agent: Agent, episode: &str, name: &str, bytes: Vec<u8>, ctx: &Context) -> Option<Recorder> {
    let format = agent.transcript();
    let input = Arc::new(Input::in_memory(PathBuf::from(name), format, bytes));
    let mut plan = Plan::default();
    format.importer().plan(vec![input], ctx.options, &mut plan);
    let quiet = Context { options: ctx.options, reports: ctx.reports, prior: None };
    plan.units
        .iter()
        .flat_map(|u| format.importer().read(u, &quiet))
        .filter_map(Result::ok)
        .find(|r| r.episode() == episode)
}

/// The telemetry sources of a companion episode: every source of a telemetry episode;
/// of a merged one, every source after its session file.
fn telemetry_sources(companion: &Companion, agent: Agent) -> &[(String, String, Vec<u8>)] {
    if companion.format == agent.format() {
        &companion.sources
    } else {
        companion.sources.get(1..).unwrap_or_default()
    }
}

/// The recorder of a run merged with its companion when the store has one, and the
/// episode it then supersedes (unless the run's own earlier import comes first: see
/// [`crate::read_unit`]).
pub(crate) fn with_companion(
    rec: Recorder,
    agent: Agent,
    telemetry: bool,
    unit: &Unit,
    ctx: &Context,
    prior: &dyn Prior,
) -> Result<(Recorder, Option<String>), Refusal> {
    let Some(companion) = prior.companion(rec.format(), rec.episode()) else {
        return Ok((rec, None));
    };
    if telemetry {
        // Telemetry second: the session file read again, with this run's telemetry.
        if companion.format != agent.transcript() {
            return Ok((rec, None));
        }
        let Some((name, _, bytes)) = companion.sources.first().cloned() else {
            return Ok((rec, None));
        };
        let Some(mut file) = reread(agent, rec.episode(), &name, bytes, ctx) else {
            return Ok((rec, None));
        };
        let (_, events, bytes) = super::unit_events(agent, unit)?;
        let input = &unit.files[0];
        let mut sources = vec![(input.file_name(), input.blake3()?, unit.part.clone(), bytes)];
        // Telemetry an earlier merge kept that this run's file does not hold (another
        // collector's file of the same session) stays.
        for (n, h, b) in telemetry_sources(&companion, agent) {
            if *n != input.file_name() {
                sources.push((n.clone(), h.clone(), Part::Whole, b.clone()));
            }
        }
        add_telemetry(&mut file, &events, sources)?;
        Ok((file, Some(companion.episode_id)))
    } else {
        // The session file second: its telemetry comes from the store.
        let kept = telemetry_sources(&companion, agent);
        if kept.is_empty() {
            return Ok((rec, None));
        }
        let mut rec = rec;
        let mut all = Vec::new();
        for (name, _, bytes) in kept {
            let text = String::from_utf8_lossy(bytes);
            all.extend(events(name, &text)?.into_iter().filter(|e| e.agent == agent && e.session == rec.episode()));
        }
        all.sort_by_key(|e| e.nanos);
        let sources = kept.iter().map(|(n, h, b)| (n.clone(), h.clone(), Part::Whole, b.clone())).collect();
        add_telemetry(&mut rec, &all, sources)?;
        // A merged episode is superseded through its session file's chain (grown);
        // a telemetry episode by this merge.
        let supersede = (companion.format == agent.format()).then_some(companion.episode_id);
        Ok((rec, supersede))
    }
}
