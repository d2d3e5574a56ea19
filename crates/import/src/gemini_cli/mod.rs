//! Gemini CLI (`gemini-cli`): session recordings under `~/.gemini/tmp/<project>/chats/`
//! (docs/importers.md §9.10): the legacy single JSON document (`session-*.json`, v0.4
//! to v0.38) and the JSON Lines log (`session-*.jsonl`, v0.39+), replayed by `replay`
//! and mapped by `record`.
//!
//! One episode per session (`sessionId`). A legacy `.json` that gemini-cli migrated on
//! resume (its `.jsonl` is the same path plus `l`, the same session) is covered by the
//! `.jsonl`. A subagent's session (`kind: "subagent"`, in `chats/<parent session>/`)
//! is read with its parent, where the parent's call names it (`agentId`).

mod record;
mod replay;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Value;

use crate::{Context, Format, Input, Part, Plan, Recorder, Refusal, Unit};

/// This source's name (section 9).
pub(crate) const FORMAT: Format = Format::new("gemini-cli");

/// The registry's Gemini CLI reader.
pub(crate) struct GeminiCli;

/// A header only Gemini CLI writes: `sessionId` with `projectHash` (the legacy
/// document's top keys, or the first line of the JSON Lines log).
fn header(s: &crate::Sniff) -> bool {
    match &s.first {
        Some(_) => s.first_has("sessionId") && s.first_has("projectHash"),
        None => s.text.starts_with('{') && s.near("sessionId") && s.near("projectHash") && s.near("messages"),
    }
}

impl crate::Importer for GeminiCli {
    fn format(&self) -> Format {
        FORMAT
    }
    fn about(&self) -> &'static str {
        "Gemini CLI sessions (chats/session-*.json, and JSON Lines from 0.39), with subagent sessions"
    }
    fn file_names(&self) -> &'static [&'static str] {
        &["session-2026-01-01T10-00-abcdef12.jsonl", "session-2026-01-01T10-00-abcdef12.json"]
    }
    fn detect(&self, s: &crate::Sniff) -> Option<crate::Confidence> {
        header(s).then_some(crate::Confidence::Certain)
    }
    fn plan(&self, inputs: Vec<Arc<Input>>, _: &crate::Options, plan: &mut Plan) {
        self::plan(inputs, plan)
    }
    fn read(&self, unit: &Unit, ctx: &Context) -> Vec<Result<Recorder, Refusal>> {
        vec![read(unit, ctx)]
    }
}

/// A file's session id and whether it is a subagent's: from the first line of a JSON
/// Lines log (its header), so planning does not replay a log reading will replay; a
/// legacy document is read whole.
fn session_of(input: &Input) -> Result<(String, bool), Refusal> {
    use std::io::BufRead;
    let file = input.open()?;
    let mut first = String::new();
    std::io::BufReader::new(file).read_line(&mut first).map_err(|e| input.io(e))?;
    let meta = match epistore_package::json_from_str::<Value>(first.trim_start_matches('\u{feff}')) {
        Ok(Value::Object(header)) if header.contains_key("sessionId") => header,
        _ => replay::load(input)?.meta,
    };
    let id = meta.get("sessionId").and_then(Value::as_str).unwrap_or_default().to_string();
    let subagent = meta.get("kind").and_then(Value::as_str) == Some("subagent");
    Ok((id, subagent))
}

pub(crate) fn plan(inputs: Vec<Arc<Input>>, plan: &mut Plan) {
    let mut mains: BTreeMap<String, Vec<Arc<Input>>> = BTreeMap::new();
    let mut subagents: Vec<(Arc<Input>, String)> = Vec::new();
    for input in inputs {
        match session_of(&input) {
            Err(r) => plan.refuse(FORMAT, r),
            Ok((_, true)) => {
                // `chats/<parent session id>/<subagent session id>.jsonl`.
                let parent = input.path.parent().and_then(|p| p.file_name()).map(|n| n.to_string_lossy().into_owned());
                subagents.push((input, parent.unwrap_or_default()));
            }
            Ok((id, false)) => mains.entry(id).or_default().push(input),
        }
    }
    let mut units: BTreeMap<String, Vec<Arc<Input>>> = BTreeMap::new();
    for (id, mut files) in mains {
        files.sort_by_key(|f| f.display());
        // A legacy `.json` migrated on resume: its `.jsonl` (the same path plus `l`)
        // continues it.
        let names: HashMap<String, usize> = files.iter().enumerate().map(|(i, f)| (f.display(), i)).collect();
        let mut kept = Vec::new();
        for f in &files {
            match names.get(&format!("{}l", f.display())) {
                Some(&j) => plan.cover(
                    FORMAT,
                    f,
                    format!("continued in {} (the same session, migrated on resume)", files[j].file_name()),
                ),
                None => kept.push(f.clone()),
            }
        }
        for (k, f) in kept.into_iter().enumerate() {
            // Two logs of one session that are not a migration: each its own run.
            let key = if k == 0 { id.clone() } else { format!("{id}#{k}") };
            units.insert(key, vec![f]);
        }
    }
    for (input, parent) in subagents {
        match units.get_mut(&parent) {
            Some(files) => {
                plan.cover(FORMAT, &input, "a subagent's session: read with its parent session");
                files.push(input);
            }
            None => plan.refuse(
                FORMAT,
                input.refuse(
                    None,
                    "a subagent's session (kind: subagent) without its parent session in this import: import the \
                     parent's chats folder",
                ),
            ),
        }
    }
    for (_, files) in units {
        plan.units.push(Unit::new(FORMAT, files, Part::Whole));
    }
}

fn read(unit: &Unit, _ctx: &Context) -> Result<Recorder, Refusal> {
    let main = &unit.files[0];
    let record = replay::load(main)?;
    let session = record.session_id().unwrap_or_default().to_string();
    let mut rec = Recorder::new(FORMAT, session);
    rec.source(&main.file_name(), &main.blake3()?, Part::Whole, main.read()?)?;
    if let Some(start) = record.meta.get("startTime").and_then(Value::as_str) {
        rec.saw_time(Some(start));
    }
    // Subagents' sessions, by their session id, read where a call names them.
    let mut subs: HashMap<String, (Arc<Input>, replay::Record)> = HashMap::new();
    for f in unit.files.iter().skip(1) {
        let r = replay::load(f)?;
        subs.insert(r.session_id().unwrap_or_default().to_string(), (f.clone(), r));
    }
    let mut failed: Option<Refusal> = None;
    let mut read_sub = |id: &str, name: &str, rec: &mut Recorder| {
        let Some((file, sub)) = subs.remove(id) else {
            rec.note(format!("the subagent session {id} is not in this import: its calls are not read"));
            return;
        };
        let added =
            file.blake3().and_then(|h| file.read().and_then(|b| rec.source(&file.file_name(), &h, Part::Whole, b)));
        if let Err(r) = added {
            failed.get_or_insert(r);
            return;
        }
        record::Mapper::new(rec, Some(name.to_string())).record(&sub, &mut |_, _, r: &mut Recorder| {
            r.note("a subagent's own subagents are not read");
        });
    };
    record::Mapper::new(&mut rec, None).record(&record, &mut read_sub);
    if let Some(r) = failed {
        return Err(r);
    }
    if let Some(end) = record.meta.get("lastUpdated").and_then(Value::as_str) {
        rec.saw_time(Some(end));
    }
    Ok(rec)
}
