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

use super::{events, is_telemetry, once_each, Agent, Event, MERGED_NOTE};
use crate::{Context, Input, Part, Plan, Prior, Recorder, Refusal, Source, Unit};

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
pub(crate) fn add_telemetry(rec: &mut Recorder, events: &[Event], sources: Vec<Source>) -> Result<(), Refusal> {
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
        "{MERGED_NOTE} ({} events): durations and decisions of {matched} calls{}, marked `telemetry` on their \
         tools records",
        events.len(),
        if added_cost { ", and the agent's own cost estimate (cost_usd)" } else { "" }
    ));
    for s in sources {
        let part = s.part.map_or(Part::Whole, Part::Object);
        rec.source(&s.name, &s.blake3, part, s.bytes)?;
    }
    Ok(())
}

/// The session's files (its transcript and its subagents'), read again from their
/// stored copies by their own importer.
fn reread(agent: Agent, episode: &str, files: &[&Source], ctx: &Context) -> Option<Recorder> {
    let format = agent.transcript();
    let inputs =
        files.iter().map(|s| Arc::new(Input::in_memory(PathBuf::from(&s.name), format, s.bytes.clone()))).collect();
    let mut plan = Plan::default();
    format.importer().plan(inputs, ctx.options, &mut plan);
    let quiet = Context { options: ctx.options, reports: ctx.reports, prior: None };
    plan.units
        .iter()
        .flat_map(|u| format.importer().read(u, &quiet))
        .filter_map(Result::ok)
        .find(|r| r.episode() == episode)
}

/// The session's events in telemetry sources, each record once, in time order.
fn session_events(agent: Agent, session: &str, sources: &[&Source]) -> Result<Vec<Event>, Refusal> {
    let mut all = Vec::new();
    for s in sources {
        let text = String::from_utf8_lossy(&s.bytes);
        all.extend(events(&s.name, &text)?.into_iter().filter(|e| e.agent == agent && e.session == session));
    }
    Ok(once_each(all))
}

/// The recorder of a run merged with its companion when the store has one, and the
/// episode it then supersedes (for a session file, after its own earlier import: see
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
    // Which of the companion's sources are telemetry, which the session's own files
    // (its transcript and its subagents').
    let (kept, files): (Vec<&Source>, Vec<&Source>) = companion.sources.iter().partition(|s| is_telemetry(&s.bytes));
    if telemetry {
        // Telemetry second: the session's files read again, with all its telemetry.
        if companion.format != agent.transcript() || files.is_empty() {
            return Ok((rec, None));
        }
        let Some(mut merged) = reread(agent, rec.episode(), &files, ctx) else {
            return Ok((rec, None));
        };
        let (_, _, bytes) = super::unit_events(agent, unit)?;
        let input = &unit.files[0];
        let part = match &unit.part {
            Part::Object(p) => Some(p.clone()),
            _ => None,
        };
        let own = Source { name: input.file_name(), blake3: input.blake3()?, part, bytes };
        // Telemetry an earlier merge kept from another file (another collector's) stays,
        // its events with this run's.
        let mut sources: Vec<Source> = vec![own];
        sources.extend(kept.into_iter().filter(|s| s.name != input.file_name()).cloned());
        let refs: Vec<&Source> = sources.iter().collect();
        let events = session_events(agent, rec.episode(), &refs)?;
        add_telemetry(&mut merged, &events, sources)?;
        Ok((merged, Some(companion.episode_id)))
    } else {
        // The session file second: its telemetry comes from the store.
        if kept.is_empty() {
            return Ok((rec, None));
        }
        let mut rec = rec;
        let events = session_events(agent, rec.episode(), &kept)?;
        add_telemetry(&mut rec, &events, kept.into_iter().cloned().collect())?;
        // The newest current episode of the session (a telemetry episode, or an earlier
        // merge) is superseded, unless the file's own earlier import comes first.
        Ok((rec, Some(companion.episode_id)))
    }
}
