//! Claude Code (`claude-code`): session transcripts and headless `stream-json` output
//! (docs/importers.md §2 to §7).
//!
//! One episode per session (`sessionId`). Its files:
//! - the transcript `<dir>/<session>.jsonl`, and its subagents' transcripts
//!   (`<dir>/<session>/subagents/agent-*.jsonl`, or `<dir>/agent-*.jsonl` in older
//!   versions; every line `isSidechain`, `sessionId` the parent's): one unit;
//! - `--output-format stream-json` outputs of the session (a first run and its
//!   `--resume`s), joined in the order of their first timestamps; a transcript of the
//!   same session given in the same call supersedes them (reported covered).
//!
//! Subagents: their tool calls are the session's tool calls (one tools record per tool
//! call of the run; a subagent's edits change the same workspace), placed at their
//! timestamps among the session's own events; the `Task` call that started them is a
//! call too (`other`). Their prompts are not a person's, their last words not the
//! session's completion claim, their models noted beside the session's. Older
//! versions also copy a running subagent's messages into the session file
//! (`progress` / `agent_progress`); a call seen twice is recorded once.
//!
//! Cost: usage once per `message.id` (an assistant message is written once per content
//! block), `tokens_in` = `input_tokens` + `cache_creation_input_tokens` +
//! `cache_read_input_tokens` (every token the model read; `input_tokens` alone is the
//! uncached remainder, a few tokens per call with the prompt cache on). stream-json
//! takes its `result` lines instead: their `modelUsage` and `total_cost_usd` are the
//! process's running totals, and a transcript's `cost-state` lines the same.
//!
//! Content (docs/format.md §9): the conversation in stream order. A person's prompts
//! are `human` (a slash command with its arguments too); what Claude Code writes in the
//! user's place is `harness` (reminders, caveats, hook context, command output,
//! compaction summaries, `isMeta` lines, interrupt notices, attachments as `rendered`);
//! the agent's text and thinking blocks carry `message.model`, and the message's usage
//! (counted as for the cost) goes on its first text or thinking part, or for a reply
//! that only calls tools on a record of its own before its first call; the system prompt
//! is kept where the log has it (`api-request-shape`). A subagent's parts carry its
//! `Task` call's `subagent_type` (else its `agentId`) as author; a line copied into the
//! session file is said once (by `uuid`). Each call's `tool_result` content (text
//! blocks joined, an image as `[image]`) is its output file. An applied edit's diff is
//! `structuredPatch` (the file's line numbers), a created file's content, an
//! overwritten file's `originalFile` against its new content, else the replaced text's
//! fragment. The task is the first thing a person typed; stream-json's `result` text is
//! the final message.
//!
//! Where each rule lives: `head` (what a file is), `parse` and `stream` (what a line
//! means), `emit` (what it becomes: tool calls, people, completion claims).

mod emit;
mod head;
mod parse;
mod stream;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use head::{head, Head};
use parse::{parse_file, Ev, FileData, What};

use crate::{Context, Format, Input, Part, Plan, Recorder, Refusal, Unit};

/// This source's name (section 9).
pub(crate) const FORMAT: Format = Format::new("claude-code");

pub(crate) fn plan(inputs: Vec<Arc<Input>>, plan: &mut Plan) {
    let mut mains: BTreeMap<String, Vec<Arc<Input>>> = BTreeMap::new();
    let mut subs: BTreeMap<String, Vec<Arc<Input>>> = BTreeMap::new();
    let mut streams: BTreeMap<String, Vec<(Head, Arc<Input>)>> = BTreeMap::new();
    for input in inputs {
        match head(&input) {
            Err(r) => plan.refuse(crate::claude_code::FORMAT, r),
            Ok(h) if h.stream => streams.entry(h.session.clone()).or_default().push((h, input)),
            Ok(h) if h.sidechain => subs.entry(h.session).or_default().push(input),
            Ok(h) => mains.entry(h.session).or_default().push(input),
        }
    }
    for list in subs.values_mut() {
        list.sort_by(|a, b| a.path.cmp(&b.path));
    }
    for (session, list) in &mains {
        let mut own = subs.remove(session).unwrap_or_default();
        for (i, main) in list.iter().enumerate() {
            // With two transcripts of one session, each takes the subagents beside it.
            let (mine, rest): (Vec<_>, Vec<_>) =
                own.into_iter().partition(|s| i + 1 == list.len() || beside(&main.path, &s.path));
            own = rest;
            let mut files = vec![main.clone()];
            files.extend(mine);
            plan.units.push(Unit::new(crate::claude_code::FORMAT, files, Part::Whole));
        }
    }
    for (session, mut list) in streams {
        if let Some(main) = mains.get(&session).and_then(|m| m.first()) {
            for (_, input) in &list {
                let why = format!("superseded by the session transcript {} (session {session})", main.file_name());
                plan.cover(crate::claude_code::FORMAT, input, why);
            }
            continue;
        }
        list.sort_by(|(a, x), (b, y)| {
            (a.first_ts.is_none(), a.first_ts, &x.path).cmp(&(b.first_ts.is_none(), b.first_ts, &y.path))
        });
        let mut files: Vec<Arc<Input>> = list.into_iter().map(|(_, i)| i).collect();
        files.extend(subs.remove(&session).unwrap_or_default());
        plan.units.push(Unit::new(crate::claude_code::FORMAT, files, Part::Whole));
    }
    for (session, list) in subs {
        for input in list {
            let why = format!(
                "a subagent transcript of session {session}: it belongs to that session's episode; give the session transcript {session}.jsonl with it"
            );
            plan.refuse(crate::claude_code::FORMAT, input.refuse(None, why));
        }
    }
}

/// A subagent file in the session's folder (`<dir>/<session>/subagents/`) or beside it.
fn beside(main: &Path, sub: &Path) -> bool {
    sub.starts_with(main.with_extension("")) || sub.parent() == main.parent()
}

pub(crate) fn read(unit: &Unit, _ctx: &Context) -> Vec<Result<Recorder, Refusal>> {
    vec![read_run(unit)]
}

fn read_run(unit: &Unit) -> Result<Recorder, Refusal> {
    let main = &unit.files[0];
    let first = head(main)?;
    let mut rec = Recorder::new(crate::claude_code::FORMAT, first.session.clone());
    // Stream-json files of the session first (the main stream), then subagent files.
    let mut mains: Vec<FileData> = Vec::new();
    let mut subs: Vec<FileData> = Vec::new();
    let mut names: HashSet<String> = HashSet::new();
    for input in &unit.files {
        let h = if Arc::ptr_eq(input, main) { first.clone() } else { head(input)? };
        let is_sub = !h.stream && h.sidechain;
        let data = parse_file(input, h.stream, is_sub)?;
        let mut name = if is_sub { format!("subagents/{}", input.file_name()) } else { input.file_name() };
        if !names.insert(name.clone()) {
            name = format!("{}-{name}", names.len());
            names.insert(name.clone());
        }
        rec.source(&name, &input.blake3()?, Part::Whole, input.read()?)?;
        if is_sub {
            subs.push(data);
        } else {
            mains.push(data);
        }
    }
    let stream = first.stream;

    let versions: Vec<&String> = mains.iter().flat_map(|d| &d.versions).collect();
    let mut distinct: Vec<&str> = Vec::new();
    for v in &versions {
        if !distinct.contains(&v.as_str()) {
            distinct.push(v);
        }
    }
    rec.harness_version(distinct.last().copied());
    if distinct.len() > 1 {
        rec.note(format!("the session was written by several Claude Code versions: {}", distinct.join(", ")));
    }
    if let Some(cwd) = mains.iter().find_map(|d| d.cwd.clone()) {
        rec.workdir(cwd.clone());
        if let Some(last) = Path::new(cwd.trim_end_matches('/')).file_name() {
            rec.cluster(last.to_string_lossy());
        }
    }

    models(&mut rec, &mains, &subs);

    let mut main_events: Vec<Ev> = Vec::new();
    for (i, d) in mains.iter_mut().enumerate() {
        if i > 0 {
            // A resumed headless run is a new turn.
            main_events.push(Ev { ts: None, sub: false, what: What::Boundary });
        }
        main_events.append(&mut d.events);
    }
    let mut streams = vec![main_events];
    streams.extend(subs.iter_mut().map(|d| std::mem::take(&mut d.events)));
    let events = merge(streams);

    let mut results = HashMap::new();
    let mut denied = HashSet::new();
    for d in mains.iter_mut().chain(subs.iter_mut()) {
        for (id, r) in d.results.drain() {
            results.entry(id).or_insert(r);
        }
        denied.extend(d.denied.drain(..));
    }
    // Each assistant message's usage, once (its last line's, as for the cost below).
    let mut usage = HashMap::new();
    for (id, tin, tout) in mains.iter().chain(subs.iter()).flat_map(|d| &d.usage) {
        usage.insert(id.clone(), (*tin, *tout));
    }
    // Every Claude Code log is a conversation.
    rec.record_messages();
    let log = emit::Log { results: &results, denied: &denied, usage: &usage };
    let summary = emit::emit(&mut rec, &events, &log);
    if stream {
        // The `result` line's text is the agent's last message of the run.
        if let Some(text) = mains.last().and_then(|d| d.outcomes.last()).and_then(|o| o.result.as_deref()) {
            rec.final_message(text);
        }
    }

    cost(&mut rec, &mains, &subs, stream);
    if let Some(reason) = stop_reason(&mains, stream, summary.ended_in_error.as_deref()) {
        rec.stop_reason(reason);
    }
    if summary.subagent_calls > 0 {
        rec.note(format!(
            "{} of the {} tool calls are subagents' (the session's own too, placed at their timestamps)",
            summary.subagent_calls, summary.calls
        ));
    }
    if summary.without_result > 0 {
        rec.note(format!("{} tool calls have no result in the log (exit code unknown)", summary.without_result));
    }
    if stream {
        rec.note("stream-json output does not show the prompts given with -p; a resumed run's prompt is not an intervention here");
    }
    Ok(rec)
}

/// `message.model` of the session's own assistant lines (the most frequent wins); a
/// subagent's model is the session's only when the session itself names none.
fn models(rec: &mut Recorder, mains: &[FileData], subs: &[FileData]) {
    let all: Vec<&(String, bool)> = mains.iter().chain(subs).flat_map(|d| &d.models).collect();
    let own: Vec<&String> = all.iter().filter(|(_, sub)| !sub).map(|(m, _)| m).collect();
    let theirs: Vec<&String> = all.iter().filter(|(_, sub)| *sub).map(|(m, _)| m).collect();
    if own.is_empty() {
        theirs.iter().for_each(|m| rec.model(m.as_str()));
        if theirs.is_empty() {
            // stream-json's `system/init` names the model the run asked for, its
            // `result` lines the models it was billed for.
            match mains.iter().find_map(|d| d.init_model.clone()) {
                Some(m) => rec.model(m),
                None => {
                    mains.iter().flat_map(|d| &d.outcomes).flat_map(|o| &o.models).for_each(|m| rec.model(m.as_str()))
                }
            }
        }
        return;
    }
    own.iter().for_each(|m| rec.model(m.as_str()));
    let mut others: Vec<&str> = Vec::new();
    for m in theirs {
        if !own.contains(&m) && !others.contains(&m.as_str()) {
            others.push(m);
        }
    }
    if !others.is_empty() {
        rec.note(format!("subagents ran on: {}", others.join(", ")));
    }
}

/// The session's events and its subagents', one stream: each file keeps its order and
/// the next event is the earliest head by timestamp (an event without one takes its
/// predecessor's); on a tie the session's own comes first.
fn merge(streams: Vec<Vec<Ev>>) -> Vec<Ev> {
    type Key = Option<chrono::DateTime<chrono::FixedOffset>>;
    let keyed: Vec<Vec<(Key, Ev)>> = streams
        .into_iter()
        .map(|s| {
            let mut last: Key = None;
            s.into_iter()
                .map(|e| {
                    if let Some(k) = e.ts.as_deref().and_then(head::parse_ts) {
                        last = Some(k);
                    }
                    (last, e)
                })
                .collect()
        })
        .collect();
    let total = keyed.iter().map(Vec::len).sum();
    let mut iters: Vec<std::iter::Peekable<std::vec::IntoIter<(Key, Ev)>>> =
        keyed.into_iter().map(|s| s.into_iter().peekable()).collect();
    let mut out = Vec::with_capacity(total);
    loop {
        let mut best: Option<(usize, Key)> = None;
        for (i, it) in iters.iter_mut().enumerate() {
            if let Some((k, _)) = it.peek() {
                if best.is_none_or(|(_, bk)| *k < bk) {
                    best = Some((i, *k));
                }
            }
        }
        let Some((i, _)) = best else { break };
        if let Some((_, e)) = iters[i].next() {
            out.push(e);
        }
    }
    out
}

/// From 2.1.277 a process started with `--resume` restores the totals the session had
/// saved, so its running total restates the earlier runs' cost; before, it starts at 0.
fn restores_totals(version: Option<&str>) -> bool {
    let parts: Vec<u64> = version.unwrap_or("").split('.').map(|p| p.parse().unwrap_or(0)).collect();
    parts.len() >= 3 && (parts[0], parts[1], parts[2]) >= (2, 1, 277)
}

/// The session's total from each process's running total (in process order), each
/// counted once.
fn session_total(values: &[(f64, bool)]) -> f64 {
    let mut total = 0.0;
    let mut prev: Option<f64> = None;
    for &(v, restores) in values {
        match prev {
            Some(p) if restores && v >= p => total += v - p,
            _ => total += v,
        }
        prev = Some(v);
    }
    total
}

fn cost(rec: &mut Recorder, mains: &[FileData], subs: &[FileData], stream: bool) {
    let by_message = |files: &[&FileData]| {
        // Assistant lines repeat a message per content block: the last one's usage counts.
        let mut usage: HashMap<&str, (i64, i64)> = HashMap::new();
        for (id, tin, tout) in files.iter().flat_map(|d| &d.usage) {
            usage.insert(id.as_str(), (*tin, *tout));
        }
        usage.values().fold((0, 0), |(a, b), (x, y)| (a + x, b + y))
    };
    if !stream {
        let files: Vec<&FileData> = mains.iter().chain(subs).collect();
        if files.iter().any(|d| !d.usage.is_empty()) {
            let (tin, tout) = by_message(&files);
            rec.tokens(Some(tin), Some(tout));
            // The cached parts, deduplicated by message as the totals are.
            let mut cache: HashMap<&str, (i64, i64)> = HashMap::new();
            for (id, read, write) in files.iter().flat_map(|d| &d.cache_usage) {
                cache.insert(id.as_str(), (*read, *write));
            }
            let (read, write) = cache.values().fold((0, 0), |(a, b), (x, y)| (a + x, b + y));
            rec.cache_tokens(Some(read), Some(write));
        }
        // `cost-state` lines: one process's running total each, the last per process.
        let mut per_process: Vec<(Option<i64>, f64, bool)> = Vec::new();
        for c in mains.iter().flat_map(|d| &d.cost_states) {
            let restores = restores_totals(c.version.as_deref());
            match per_process.last_mut() {
                Some(last) if last.0 == c.start => *last = (c.start, c.usd, restores),
                _ => per_process.push((c.start, c.usd, restores)),
            }
        }
        if !per_process.is_empty() {
            let values: Vec<(f64, bool)> = per_process.iter().map(|&(_, u, r)| (u, r)).collect();
            rec.usd(session_total(&values));
        }
        return;
    }
    // stream-json: a `result` restates the process's running total; each file is a process.
    let mut usd: Vec<(f64, bool)> = Vec::new();
    let mut model_tokens: Vec<((f64, f64), bool)> = Vec::new();
    let (mut tin, mut tout, mut any) = (0i64, 0i64, false);
    for d in mains {
        let restores = restores_totals(d.versions.last().map(String::as_str));
        let Some(last) = d.outcomes.last() else {
            // No `result` (the process was stopped): its messages' own usage.
            if !d.usage.is_empty() {
                let (a, b) = by_message(&[d]);
                (tin, tout, any) = (tin + a, tout + b, true);
            }
            continue;
        };
        if let Some(u) = last.usd {
            usd.push((u, restores));
        }
        match last.model_usage {
            Some((a, b)) => model_tokens.push(((a as f64, b as f64), restores)),
            None => {
                for (a, b) in d.outcomes.iter().filter_map(|o| o.usage) {
                    (tin, tout, any) = (tin + a, tout + b, true);
                }
            }
        }
    }
    if !model_tokens.is_empty() {
        let ins: Vec<(f64, bool)> = model_tokens.iter().map(|&((a, _), r)| (a, r)).collect();
        let outs: Vec<(f64, bool)> = model_tokens.iter().map(|&((_, b), r)| (b, r)).collect();
        (tin, tout, any) = (tin + session_total(&ins) as i64, tout + session_total(&outs) as i64, true);
    }
    if any {
        rec.tokens(Some(tin), Some(tout));
    }
    if !usd.is_empty() {
        rec.usd(session_total(&usd));
    }
    if subs.iter().any(|d| !d.usage.is_empty()) {
        rec.note("subagent transcripts given with stream-json output: their usage is in the results' totals");
    }
}

fn stop_reason(mains: &[FileData], stream: bool, ended_in_error: Option<&str>) -> Option<&'static str> {
    if stream {
        if let Some(last) = mains.last().and_then(|d| d.outcomes.last()) {
            return match last.subtype.as_str() {
                "error_max_turns" | "error_max_budget_usd" => Some("budget_exhausted"),
                "error_during_execution" => Some("infra_error"),
                _ if last.is_error => Some("infra_error"),
                _ => None,
            };
        }
    }
    let text = ended_in_error?;
    let limit = ["usage limit", "Prompt is too long", "context window", "max_tokens"].iter().any(|p| text.contains(p));
    Some(if limit { "budget_exhausted" } else { "infra_error" })
}

#[cfg(test)]
mod tests;

/// The registry's Claude Code reader.
pub(crate) struct ClaudeCode;

/// A line only Claude Code writes: a transcript record (`sessionId` with the message
/// tree's `uuid` / `parentUuid` or an API `message` with its `role`, or a `summary`
/// with `leafUuid`), a file-history
/// snapshot, a queue operation, or a `stream-json` line (`session_id` with a
/// `system` / `user` / `assistant` / `result` type and that type's own key). Gemini
/// CLI, Pi and Copilot sessions also carry a session id, never with these.
fn claude_code_line(o: &serde_json::Map<String, serde_json::Value>) -> bool {
    let has = |k: &str| o.contains_key(k);
    let ty = o.get("type").and_then(|t| t.as_str()).unwrap_or("");
    match ty {
        "file-history-snapshot" => has("messageId") && has("snapshot"),
        "summary" => has("leafUuid"),
        "queue-operation" => has("sessionId") && has("operation"),
        "system" | "user" | "assistant" | "result" if has("session_id") => {
            (ty == "system" && has("subtype")) || has("message") || (ty == "result" && has("subtype"))
        }
        "user" | "assistant" if has("sessionId") && o.get("message").is_some_and(|m| m.get("role").is_some()) => true,
        _ => has("sessionId") && (has("uuid") || has("parentUuid") || has("isSidechain")),
    }
}

impl crate::Importer for ClaudeCode {
    fn format(&self) -> Format {
        FORMAT
    }
    fn about(&self) -> &'static str {
        "Claude Code session transcripts (with subagents) and headless stream-json output"
    }
    fn file_names(&self) -> &'static [&'static str] {
        &["session.jsonl"]
    }
    fn detect(&self, s: &crate::Sniff) -> Option<crate::Confidence> {
        // A transcript may open with lines of other types: any line of the first bytes.
        let first = s.first.as_ref()?;
        (claude_code_line(first) || s.objects().take(200).any(|o| claude_code_line(&o)))
            .then_some(crate::Confidence::Certain)
    }
    fn plan(&self, inputs: Vec<Arc<Input>>, _: &crate::Options, plan: &mut Plan) {
        self::plan(inputs, plan)
    }
    fn read(&self, unit: &Unit, ctx: &Context) -> Vec<Result<Recorder, Refusal>> {
        self::read(unit, ctx)
    }
}
