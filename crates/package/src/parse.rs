//! Validation of a package against `episode-package/1` (docs/format.md §7) and its typed form.

use std::collections::HashMap;

use serde_json::Value;

use crate::derive::derive_state;
use crate::error::Problem;
use crate::fields::{extra_text, nest_unknown, nest_unknown_items, FieldResult, Obj, Place};
use crate::model::*;
use crate::source::RawPackage;
use crate::{Revision, FORMATS, FORMAT_V1, FORMAT_V1_1};

pub const MANIFEST_FILE: &str = "manifest.json";
pub const OUTCOME_FILE: &str = "outcome.json";
const MANIFEST: &str = MANIFEST_FILE;
const OUTCOME: &str = OUTCOME_FILE;
/// Report files that, when written as `.json`, must be JSON.
const JSON_REPORTS: &[&str] = &["reports/verification.json", "reports/final.json"];

/// Validates a package and returns its typed form with derived state filled in.
pub fn parse_package(raw: &RawPackage) -> Result<Episode, Box<Problem>> {
    let name = raw.name.as_str();
    let required_file = |file: &str| {
        raw.file(file).ok_or_else(|| Box::new(place(name, file, None).problem(None, "required file is missing")))
    };
    let manifest_bytes = required_file(MANIFEST)?;
    let outcome_bytes = required_file(OUTCOME)?;

    let manifest_value = parse_json(name, MANIFEST, manifest_bytes)?;
    let manifest = parse_manifest(&Obj::new(&manifest_value, place(name, MANIFEST, None), "")?)?;
    let outcome_value = parse_json(name, OUTCOME, outcome_bytes)?;
    let outcome = parse_outcome(&Obj::new(&outcome_value, place(name, OUTCOME, None), "")?, &manifest.format)?;
    for report in JSON_REPORTS {
        if let Some(bytes) = raw.file(report) {
            parse_json(name, report, bytes)?;
        }
    }

    let mut episode = Episode {
        manifest,
        outcome,
        actions: None,
        tools: None,
        context: None,
        checks: None,
        attributions: None,
        interventions: None,
        entropy: None,
        messages: None,
        derived: Derived { final_revision: 0, posture: String::new() },
    };
    let revision = episode.manifest.revision();
    for (file, kind) in TRACE_FILES {
        let Some(bytes) = raw.file(file) else {
            continue;
        };
        let lines = bytes;
        match kind {
            TraceKind::Actions => episode.actions = Some(records(name, file, lines, revision, parse_action)?),
            TraceKind::Tools => episode.tools = Some(records(name, file, lines, revision, parse_tool)?),
            TraceKind::Context => episode.context = Some(records(name, file, lines, revision, parse_context)?),
            TraceKind::Verification => episode.checks = Some(records(name, file, lines, revision, parse_check)?),
            TraceKind::Attribution => {
                episode.attributions = Some(records(name, file, lines, revision, parse_attribution)?)
            }
            TraceKind::Interventions => {
                episode.interventions = Some(records(name, file, lines, revision, parse_intervention)?)
            }
            TraceKind::Entropy => episode.entropy = Some(records(name, file, lines, revision, parse_entropy)?),
            // Before revision 1.2 the file is an ordinary file of the package.
            TraceKind::Messages if revision >= Revision::V1_2 => {
                episode.messages = Some(records(name, file, lines, revision, parse_message)?)
            }
            TraceKind::Messages => {}
        }
    }
    for tool in episode.tools.iter_mut().flatten() {
        read_output(raw, tool);
    }
    if episode.manifest.format == FORMAT_V1 {
        refuse_revision_1_1_results(name, &episode)?;
    }
    check_references(name, &episode)?;
    derive_state(&mut episode).map_err(|(file, line, message)| {
        Box::new(Problem {
            package: name.to_string(),
            file: Some(file.to_string()),
            line: Some(line as usize),
            field: Some("revision".into()),
            message,
        })
    })?;
    Ok(episode)
}

/// A revision 1 package may not use what revision 1.1 added (docs/format.md §8).
fn refuse_revision_1_1_results(package: &str, e: &Episode) -> Result<(), Box<Problem>> {
    match e.checks.iter().flatten().find(|c| c.result.as_deref() == Some("unknown")) {
        Some(c) => Err(Box::new(place(package, TRACE_FILES[3].0, Some(c.common.line as usize)).problem(
            Some("result".into()),
            format!("`unknown` needs format `{FORMAT_V1_1}` (this package declares `{FORMAT_V1}`)"),
        ))),
        None => Ok(()),
    }
}

fn place<'a>(package: &'a str, file: &'a str, line: Option<usize>) -> Place<'a> {
    Place { package, file, line }
}

fn utf8<'a>(package: &str, file: &str, bytes: &'a [u8]) -> Result<&'a str, Box<Problem>> {
    std::str::from_utf8(bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() + 1;
        Box::new(place(package, file, Some(line)).problem(None, "not valid UTF-8"))
    })
}

/// How deep JSON in a package may nest (arrays and objects inside each other). The
/// format allows any JSON; serde_json alone stops at 128 levels, which real `extra`
/// payloads can pass. Beyond this bound a file is refused, naming the line, instead of
/// risking the stack: values this deep are parsed on a stack that grows (serde_stacker).
pub const MAX_JSON_DEPTH: usize = 1024;

/// The deepest nesting of `text` and the 1-based line where it first passes
/// [`MAX_JSON_DEPTH`], if it does. Brackets inside strings do not count.
fn too_deep(text: &str) -> Option<usize> {
    too_deep_bytes(text.as_bytes())
}

fn too_deep_bytes(bytes: &[u8]) -> Option<usize> {
    let (mut depth, mut line, mut at) = (0usize, 1usize, 0usize);
    while at < bytes.len() {
        match bytes[at] {
            b'\n' => line += 1,
            b'"' => {
                // Most of a trace's bytes are string contents (messages, output): jump
                // from quote to quote rather than walk them a byte at a time.
                at += 1;
                loop {
                    // Unterminated: the JSON parser says so.
                    let found = memchr::memchr3(b'"', b'\\', b'\n', bytes.get(at..)?)?;
                    at += found;
                    match bytes[at] {
                        b'"' => break,
                        b'\n' => line += 1,
                        _ => at += 1, // an escape: skip the escaped byte too
                    }
                    at += 1;
                }
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_JSON_DEPTH {
                    return Some(line);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        at += 1;
    }
    None
}

/// Deserialises JSON as a package file is read: nested at most [`MAX_JSON_DEPTH`]
/// deep, past the 128 levels plain `serde_json` stops at (so an importer takes what
/// `ingest` takes); deeper is an error naming its line, found before any parsing, so
/// no value too deep to drop is ever built.
///
/// Agents' logs are read leniently in one way: a `\uD83D` escape with no partner (a
/// lone UTF-16 surrogate, which a tool cutting text inside an emoji writes) is read as
/// U+FFFD, the replacement character, where `serde_json` refuses the whole text.
pub fn json_from_slice<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    if let Some(line) = too_deep_bytes(bytes) {
        return Err(serde::de::Error::custom(format!(
            "JSON nested deeper than {MAX_JSON_DEPTH} levels (the limit) at line {line}"
        )));
    }
    match deserialize_deep(bytes) {
        Err(e) => {
            // Only when the text holds a lone surrogate; otherwise the error stands.
            let fixed = without_lone_surrogates(bytes);
            if fixed == bytes {
                return Err(e);
            }
            deserialize_deep(&fixed)
        }
        read => read,
    }
}

fn deserialize_deep<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    de.disable_recursion_limit();
    let value = T::deserialize(serde_stacker::Deserializer::new(&mut de))?;
    de.end()?;
    Ok(value)
}

/// `bytes` with every `\uXXXX` escape of a lone surrogate (one not part of a
/// high-low pair) replaced by `\uFFFD`. Escaped backslashes are skipped whole, so
/// `\\uD800` (a backslash, then text) is left alone.
fn without_lone_surrogates(bytes: &[u8]) -> Vec<u8> {
    let unit = |at: usize| -> Option<u16> {
        let hex = bytes.get(at..at + 6)?;
        if hex[0] != b'\\' || hex[1] != b'u' {
            return None;
        }
        u16::from_str_radix(std::str::from_utf8(&hex[2..]).ok()?, 16).ok()
    };
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] != b'\\' {
            out.push(bytes[at]);
            at += 1;
            continue;
        }
        match unit(at) {
            Some(0xD800..=0xDBFF) if matches!(unit(at + 6), Some(0xDC00..=0xDFFF)) => {
                out.extend_from_slice(&bytes[at..at + 12]);
                at += 12;
            }
            Some(0xD800..=0xDFFF) => {
                out.extend_from_slice(b"\\uFFFD");
                at += 6;
            }
            _ => {
                // Any other escape: the backslash and the character it escapes.
                let end = (at + 2).min(bytes.len());
                out.extend_from_slice(&bytes[at..end]);
                at = end;
            }
        }
    }
    out
}

/// [`json_from_slice`] of text.
pub fn json_from_str<T: serde::de::DeserializeOwned>(text: &str) -> serde_json::Result<T> {
    json_from_slice(text.as_bytes())
}

/// Parses JSON text as a package file is parsed: nested at most [`MAX_JSON_DEPTH`]
/// deep. For reading back what a package held (the `extra` fields), which plain
/// `serde_json::from_str` refuses past 128 levels.
pub fn parse_json_text(text: &str) -> Result<Value, String> {
    json_value(text).map_err(|(_, message)| message)
}

/// One JSON text, nested at most [`MAX_JSON_DEPTH`] deep.
fn json_value(text: &str) -> Result<Value, (Option<usize>, String)> {
    if let Some(line) = too_deep(text) {
        return Err((Some(line), format!("JSON nested deeper than {MAX_JSON_DEPTH} levels (the limit)")));
    }
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    let value = serde::Deserialize::deserialize(serde_stacker::Deserializer::new(&mut de))
        .and_then(|v: Value| de.end().map(|()| v))
        .map_err(|e| (Some(e.line()), format!("not valid JSON: {e}")))?;
    Ok(value)
}

fn parse_json(package: &str, file: &str, bytes: &[u8]) -> Result<Value, Box<Problem>> {
    let text = utf8(package, file, bytes)?;
    json_value(text).map_err(|(line, message)| Box::new(place(package, file, line).problem(None, message)))
}

/// The typed records of a JSON Lines file, one per non-blank line. Each line is parsed
/// and turned into its record before the next is read, so a trace of millions of
/// records never holds more than one line's JSON tree at a time (the trees cost many
/// times the record's own size).
fn records<T: Record>(
    package: &str,
    file: &str,
    bytes: &[u8],
    revision: Revision,
    parse: fn(&Obj, Common, Revision) -> FieldResult<T>,
) -> Result<Vec<T>, Box<Problem>> {
    let text = utf8(package, file, bytes)?;
    let mut out = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        let number = i + 1;
        let at = || place(package, file, Some(number));
        let value = json_value(line).map_err(|(_, message)| Box::new(at().problem(None, message)))?;
        let obj = Obj::new(&value, at(), "")?;
        let common = Common {
            seq: obj.required("seq", obj.seq("seq"))?,
            line: number as u32,
            ts: obj.timestamp("ts")?,
            grade: obj.enumerated("grade", GRADES)?.unwrap_or_else(|| "observed".into()),
            revision: 0,
            extra: None,
        };
        let mut record = parse(&obj, common, revision)?;
        // Unknown fields are kept (docs/format.md §2): every field neither the common reads above
        // nor the record's parser read.
        record.common_mut().extra = obj.extra();
        out.push(record);
    }
    Ok(out)
}

/// A trace record, whose `extra` [`records`] fills in once its parser has read it.
trait Record {
    fn common_mut(&mut self) -> &mut Common;
}

macro_rules! record {
    ($($t:ty),*) => {
        $(impl Record for $t {
            fn common_mut(&mut self) -> &mut Common {
                &mut self.common
            }
        })*
    };
}

record!(Action, Tool, ContextRecord, Check, Attribution, Intervention, EntropyFinding, Message);

/// What `output_text` keeps of a tool's output file (docs/format.md §9.3).
pub const OUTPUT_TEXT_CAP: usize = 16 * 1024;

/// Fills a tool record's `output_text` and `output_bytes` from the file its `output`
/// names, when the package holds that file (docs/format.md §9.3).
fn read_output(raw: &RawPackage, tool: &mut Tool) {
    let Some(path) = tool.output.as_deref() else { return };
    let Some(bytes) = raw.file(path) else { return };
    tool.output_bytes = Some(bytes.len() as u64);
    tool.output_text = Some(output_text(path, bytes));
}

/// The capped text of an output file: whole when it fits, else cut on a character
/// boundary at [`OUTPUT_TEXT_CAP`] bytes and followed by the truncation marker.
pub fn output_text(path: &str, bytes: &[u8]) -> String {
    if bytes.len() <= OUTPUT_TEXT_CAP {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    // Back off to a UTF-8 boundary (at most 3 bytes); invalid bytes before it are
    // replaced, so the kept part is always text.
    let mut cut = OUTPUT_TEXT_CAP;
    while cut > OUTPUT_TEXT_CAP - 4 && (bytes[cut] & 0xC0) == 0x80 {
        cut -= 1;
    }
    let mut text = String::from_utf8_lossy(&bytes[..cut]).into_owned();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&format!(
        "[epistore: output truncated at {OUTPUT_TEXT_CAP} of {} bytes; the whole output is in {path}]",
        bytes.len()
    ));
    text
}

fn parse_message(o: &Obj, common: Common, _: Revision) -> FieldResult<Message> {
    Ok(Message {
        common,
        role: o.required("role", o.enumerated("role", ROLES))?,
        author: o.string("author")?,
        text: o.string("text")?,
        reasoning: o.string("reasoning")?,
        tool_call_id: o.string("tool_call_id")?,
        tool: o.string("tool")?,
        arguments: o.raw("arguments").filter(|v| !v.is_null()).map(Value::to_string),
        tool_seq: o.seq("tool_seq")?,
        is_error: o.boolean("is_error")?,
        tokens_in: o.integer("tokens_in", 0, i64::MAX)?,
        tokens_out: o.integer("tokens_out", 0, i64::MAX)?,
        model: o.string("model")?,
    })
}

fn parse_action(o: &Obj, common: Common, revision: Revision) -> FieldResult<Action> {
    if revision >= Revision::V1_2 {
        o.string_kept_in_extra(STATE_DIGEST)?;
    }
    let kind = o.enumerated("kind", ACTION_KINDS)?;
    let mutates_by_default = matches!(kind.as_deref(), Some("edit" | "create" | "delete"));
    Ok(Action {
        common,
        paths: o.string_array("paths", None)?.unwrap_or_default(),
        summary: o.string("summary")?,
        mutates: o.boolean("mutates")?.unwrap_or(mutates_by_default),
        ok: o.boolean("ok")?.unwrap_or(true),
        tool_seq: o.seq("tool_seq")?,
        diff: if revision >= Revision::V1_2 { o.string("diff")? } else { None },
        kind,
    })
}

fn parse_tool(o: &Obj, common: Common, _: Revision) -> FieldResult<Tool> {
    let exit_code = o.integer("exit_code", i64::MIN, i64::MAX)?;
    let timed_out = o.boolean("timed_out")?.unwrap_or(false);
    let recorded = o.enumerated("failure_type", FAILURE_TYPES)?;
    // The recorded type is the truth; otherwise derive it (docs/format.md §5.3).
    let failure_type = recorded.clone().unwrap_or_else(|| {
        if timed_out {
            "timeout".into()
        } else if exit_code.is_some_and(|c| c != 0) {
            "nonzero_exit".into()
        } else {
            "none".into()
        }
    });
    Ok(Tool {
        common,
        tool: o.string_req("tool")?,
        command: o.string("command")?,
        exit_code,
        duration_ms: o.number("duration_ms", 0.0, f64::MAX)?,
        timed_out,
        recorded_failure_type: recorded,
        failure_type,
        recovered_by: o.seq("recovered_by")?,
        output: o.string("output")?,
        output_text: None,
        output_bytes: None,
    })
}

fn parse_context(o: &Obj, common: Common, _: Revision) -> FieldResult<ContextRecord> {
    Ok(ContextRecord {
        common,
        artifact: o.string_req("artifact")?,
        kind: o.enumerated("kind", CONTEXT_KINDS)?,
        purpose: o.string("purpose")?,
        used: o.boolean("used")?.unwrap_or(true),
    })
}

fn parse_check(o: &Obj, common: Common, revision: Revision) -> FieldResult<Check> {
    if revision >= Revision::V1_2 {
        o.string_kept_in_extra(STATE_DIGEST)?;
    }
    let actor = o.enumerated("actor", CHECK_ACTORS)?;
    let verifier = o.string("verifier")?;
    let verdict = o.enumerated("verdict", VERDICTS)?;
    if actor.as_deref() == Some("verifier") {
        if verifier.is_none() {
            return o.fail("verifier", "required when actor is verifier");
        }
        if verdict.is_none() {
            return o.fail("verdict", "required when actor is verifier");
        }
    }
    Ok(Check {
        common,
        check_id: o.string_req("check_id")?,
        actor,
        method: o.enumerated("method", CHECK_METHODS)?,
        command: o.string("command")?,
        result: o.enumerated("result", CHECK_RESULTS)?,
        exit_code: o.integer("exit_code", i64::MIN, i64::MAX)?,
        duration_ms: o.number("duration_ms", 0.0, f64::MAX)?,
        requirements: o.string_array("requirements", None)?.unwrap_or_default(),
        recorded_revision: o.seq("revision")?,
        bound_revision: 0,
        fresh: false,
        suite_id: o.string("suite_id")?,
        verifier,
        verdict,
        score: o.number("score", f64::MIN, f64::MAX)?,
        interpretation: o.string("interpretation")?,
    })
}

fn parse_attribution(o: &Obj, common: Common, _: Revision) -> FieldResult<Attribution> {
    Ok(Attribution {
        common,
        failure_seq: o.required("failure_seq", o.seq("failure_seq"))?,
        category: o.enumerated("category", ATTRIBUTION_CATEGORIES)?,
        responsibility: o.enumerated("responsibility", RESPONSIBILITIES)?,
        location: o.string("location")?,
        rank: o.integer("rank", 1, i64::MAX)?,
        confidence: o.number("confidence", 0.0, 1.0)?,
        evidence: o.seq_array("evidence")?.unwrap_or_default(),
    })
}

fn parse_intervention(o: &Obj, common: Common, _: Revision) -> FieldResult<Intervention> {
    Ok(Intervention {
        common,
        actor: o.enumerated("actor", INTERVENTION_ACTORS)?,
        kind: o.enumerated("kind", INTERVENTION_KINDS)?,
        reason: o.string("reason")?,
        missing_responsibility: o.enumerated("missing_responsibility", RESPONSIBILITIES)?,
        avoidable: o.boolean("avoidable")?,
        burden: o.enumerated("burden", BURDENS)?,
        minutes: o.number("minutes", 0.0, f64::MAX)?,
    })
}

fn parse_entropy(o: &Obj, common: Common, _: Revision) -> FieldResult<EntropyFinding> {
    Ok(EntropyFinding {
        common,
        category: o.enumerated("category", ENTROPY_CATEGORIES)?,
        severity: o.integer("severity", 0, 3)?,
        phase: o.enumerated("phase", ENTROPY_PHASES)?.unwrap_or_else(|| "post".into()),
        path: o.string("path")?,
        note: o.string("note")?,
    })
}

fn parse_manifest(o: &Obj) -> FieldResult<Manifest> {
    let format = o.string_req("format")?;
    if !FORMATS.contains(&format.as_str()) {
        return o.fail("format", format!("unsupported format `{format}` (this build reads {})", quoted_list(FORMATS)));
    }
    let revision = Revision::of(&format).expect("checked above");
    if revision >= Revision::V1_1 {
        check_provenance(o)?;
    }
    let model = o.required("model", o.object("model"))?;
    let harness = o.required("harness", o.object("harness"))?;
    let task = o.required("task", o.object("task"))?;
    let repository = o.object("repository")?;
    let mut requirements = Vec::new();
    let mut requirements_unknown = Vec::new();
    for (i, item) in o.array("requirements")?.into_iter().flatten().enumerate() {
        let r = Obj::new(item, o.place, &format!("requirements[{i}]."))?;
        requirements.push(Requirement { id: r.string_req("id")?, text: r.string("text")? });
        requirements_unknown.push(r.unknown());
    }
    let tags = o.object("tags")?.map(|t| t.json_text());
    let task_id = task.string_req("id")?;
    let mut manifest = Manifest {
        format,
        episode: o.string_req("episode")?,
        model: model.string_req("name")?,
        model_version: model.string("version")?,
        model_provider: model.string("provider")?,
        harness_name: harness.string("name")?,
        harness_level: harness.string_req("level")?,
        harness_version: harness.string("version")?,
        harness_components: harness.string_array("components", Some(RESPONSIBILITIES))?,
        task_family: task.string("family")?,
        cluster: task.string("cluster")?.unwrap_or_else(|| task_id.clone()),
        task: task_id,
        repository_url: repository.as_ref().map(|r| r.string("url")).transpose()?.flatten(),
        repository_commit: repository.as_ref().map(|r| r.string("commit")).transpose()?.flatten(),
        requirements,
        seed: o.integer("seed", i64::MIN, i64::MAX)?,
        attempt: o.integer("attempt", 1, i64::MAX)?.unwrap_or(1),
        started_at: o.timestamp("started_at")?,
        ended_at: o.timestamp("ended_at")?,
        trace_complete: o.boolean("trace_complete")?.unwrap_or(true),
        tags,
        task_prompt: if revision >= Revision::V1_2 { task.string("prompt")? } else { None },
        extra: None,
    };
    // Unknown fields are kept (docs/format.md §2), nested ones under their parent's key: every
    // field not read above.
    let mut extra = o.unknown();
    nest_unknown(&mut extra, "model", model.unknown());
    nest_unknown(&mut extra, "harness", harness.unknown());
    nest_unknown(&mut extra, "task", task.unknown());
    if let Some(r) = &repository {
        nest_unknown(&mut extra, "repository", r.unknown());
    }
    nest_unknown_items(&mut extra, "requirements", requirements_unknown);
    manifest.extra = extra_text(extra);
    Ok(manifest)
}

/// The shape of a revision 1.1 `provenance` object. It stays among the unknown fields
/// (the revision keeps it like one), but a malformed one is refused, so every reader of
/// a stored 1.1 package can rely on it.
fn check_provenance(o: &Obj) -> FieldResult<()> {
    let Some(p) = o.object_kept_in_extra("provenance")? else {
        return Ok(());
    };
    for name in ["importer", "source_format", "source_version", "supersedes"] {
        p.string(name)?;
    }
    p.integer("opaque_calls", 0, i64::MAX)?;
    p.string_array("notes", None)?;
    for (i, item) in p.array("source_files")?.into_iter().flatten().enumerate() {
        let f = Obj::new(item, p.place, &format!("provenance.source_files[{i}]."))?;
        f.string_req("name")?;
        let hash = f.string_req("blake3")?;
        if hash.len() != 64 || crate::parse_hex(&hash).is_none() {
            return f.fail("blake3", "expected 64 hex digits");
        }
        if let Some(part) = f.raw("part") {
            if !(part.is_string() || part.is_u64() || part.is_null()) {
                return f.fail("part", "expected a member name or a line number");
            }
        }
    }
    Ok(())
}

fn quoted_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("`{i}`")).collect();
    match quoted.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

fn parse_outcome(o: &Obj, format: &str) -> FieldResult<Outcome> {
    let revision = Revision::of(format).unwrap_or(Revision::V1);
    // Revision 1.1: a label present and null means "not adjudicated"; absent is still
    // missing, and null under revision 1 is refused naming the revision that allows it.
    let label = match o.raw("label") {
        Some(Value::Null) if revision >= Revision::V1_1 => None,
        Some(Value::Null) => {
            return o.fail("label", format!("`null` needs format `{FORMAT_V1_1}` (this package declares `{format}`)"))
        }
        _ => Some(o.required("label", o.enumerated("label", LABELS))?),
    };
    let mut requirements = Vec::new();
    let mut requirements_unknown = Vec::new();
    for (i, item) in o.array("requirements")?.into_iter().flatten().enumerate() {
        let r = Obj::new(item, o.place, &format!("requirements[{i}]."))?;
        requirements
            .push(RequirementStatus { id: r.string_req("id")?, status: r.enumerated("status", REQUIREMENT_STATUSES)? });
        requirements_unknown.push(r.unknown());
    }
    let mut locations_unknown = Vec::new();
    let fault_locations = match o.array("fault_locations")? {
        None => None,
        Some(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let field = format!("fault_locations[{i}]");
                match item {
                    // The contract writes objects; a bare string is read the same way.
                    Value::String(s) => {
                        out.push(s.clone());
                        locations_unknown.push(Default::default());
                    }
                    value => {
                        let loc = Obj::new(value, o.place, &format!("{field}."))?;
                        out.push(loc.string_req("location")?);
                        locations_unknown.push(loc.unknown());
                    }
                }
            }
            Some(out)
        }
    };
    let budget = o.object("budget")?;
    let cost = o.object("cost")?;
    if let (true, Some(cost)) = (revision >= Revision::V1_2, &cost) {
        // Revision 1.2: the prompt-cache parts of `tokens_in` (kept in `extra`; the
        // store's `episode_costs` prices them).
        cost.count_kept_in_extra("cache_read_tokens")?;
        cost.count_kept_in_extra("cache_write_tokens")?;
    }
    let count = |obj: &Option<Obj>, name: &str| obj.as_ref().map(|b| b.integer(name, 0, i64::MAX)).transpose();
    let amount = |obj: &Option<Obj>, name: &str| obj.as_ref().map(|b| b.number(name, 0.0, f64::MAX)).transpose();
    let mut outcome = Outcome {
        label,
        agent_reported_complete: o.boolean("agent_reported_complete")?,
        stop_reason: o.enumerated("stop_reason", STOP_REASONS)?.unwrap_or_else(|| "completed".into()),
        correct: o.boolean("correct")?,
        start_state: o.enumerated("start_state", START_STATES)?,
        admission: o.enumerated("admission", ADMISSIONS)?,
        requirements,
        actions_used: count(&budget, "actions_used")?.flatten(),
        actions_max: count(&budget, "actions_max")?.flatten(),
        budget_exhausted: budget.as_ref().map(|b| b.boolean("exhausted")).transpose()?.flatten(),
        tokens_in: count(&cost, "tokens_in")?.flatten(),
        tokens_out: count(&cost, "tokens_out")?.flatten(),
        cost_usd: amount(&cost, "usd")?.flatten(),
        wall_ms: amount(&cost, "wall_ms")?.flatten(),
        fault_locations,
        score: o.number("score", 0.0, 1.0)?,
        notes: o.string("notes")?,
        recorded_posture: o.enumerated("evidence_posture", POSTURES)?,
        final_message: if revision >= Revision::V1_2 { o.string("final_message")? } else { None },
        extra: None,
    };
    if revision >= Revision::V1_2 {
        o.string_kept_in_extra(FINAL_STATE_DIGEST)?;
    }
    // Unknown fields are kept (docs/format.md §2), nested ones under their parent's key: every
    // field not read above.
    let mut extra = o.unknown();
    nest_unknown_items(&mut extra, "requirements", requirements_unknown);
    if let Some(b) = &budget {
        nest_unknown(&mut extra, "budget", b.unknown());
    }
    if let Some(c) = &cost {
        nest_unknown(&mut extra, "cost", c.unknown());
    }
    nest_unknown_items(&mut extra, "fault_locations", locations_unknown);
    outcome.extra = extra_text(extra);
    Ok(outcome)
}

/// `seq` is unique across all trace files, and every reference names an existing
/// record; `failure_seq` must name a tool or verification record.
fn check_references(package: &str, e: &Episode) -> Result<(), Box<Problem>> {
    let mut by_seq: HashMap<u64, (TraceKind, &'static str, u32)> = HashMap::new();
    let mut all: Vec<(TraceKind, &'static str, &Common)> = Vec::new();
    fn push<'a, T>(
        all: &mut Vec<(TraceKind, &'static str, &'a Common)>,
        kind: TraceKind,
        file: &'static str,
        items: &'a Option<Vec<T>>,
        common: fn(&T) -> &Common,
    ) {
        for item in items.iter().flatten() {
            all.push((kind, file, common(item)));
        }
    }
    push(&mut all, TraceKind::Actions, TRACE_FILES[0].0, &e.actions, |r| &r.common);
    push(&mut all, TraceKind::Tools, TRACE_FILES[1].0, &e.tools, |r| &r.common);
    push(&mut all, TraceKind::Context, TRACE_FILES[2].0, &e.context, |r| &r.common);
    push(&mut all, TraceKind::Verification, TRACE_FILES[3].0, &e.checks, |r| &r.common);
    push(&mut all, TraceKind::Attribution, TRACE_FILES[4].0, &e.attributions, |r| &r.common);
    push(&mut all, TraceKind::Interventions, TRACE_FILES[5].0, &e.interventions, |r| &r.common);
    push(&mut all, TraceKind::Entropy, TRACE_FILES[6].0, &e.entropy, |r| &r.common);
    push(&mut all, TraceKind::Messages, TRACE_FILES[7].0, &e.messages, |r| &r.common);
    for (kind, file, common) in &all {
        if let Some((_, first_file, first_line)) = by_seq.insert(common.seq, (*kind, file, common.line)) {
            return Err(Box::new(place(package, file, Some(common.line as usize)).problem(
                Some("seq".into()),
                format!("seq {} repeats (first used at {first_file}:{first_line})", common.seq),
            )));
        }
    }
    let missing = |file: &str, line: u32, field: &str, seq: u64| {
        Box::new(
            place(package, file, Some(line as usize))
                .problem(Some(field.into()), format!("refers to seq {seq}, which no record has")),
        )
    };
    for a in e.actions.iter().flatten() {
        if let Some(s) = a.tool_seq.filter(|s| !by_seq.contains_key(s)) {
            return Err(missing(TRACE_FILES[0].0, a.common.line, "tool_seq", s));
        }
    }
    for t in e.tools.iter().flatten() {
        if let Some(s) = t.recovered_by.filter(|s| !by_seq.contains_key(s)) {
            return Err(missing(TRACE_FILES[1].0, t.common.line, "recovered_by", s));
        }
    }
    for m in e.messages.iter().flatten() {
        if let Some(s) = m.tool_seq.filter(|s| !by_seq.contains_key(s)) {
            return Err(missing(TRACE_FILES[7].0, m.common.line, "tool_seq", s));
        }
    }
    for a in e.attributions.iter().flatten() {
        let file = TRACE_FILES[4].0;
        match by_seq.get(&a.failure_seq) {
            None => return Err(missing(file, a.common.line, "failure_seq", a.failure_seq)),
            Some((TraceKind::Tools | TraceKind::Verification, _, _)) => {}
            Some((kind, _, _)) => {
                return Err(Box::new(place(package, file, Some(a.common.line as usize)).problem(
                    Some("failure_seq".into()),
                    format!(
                        "seq {} is a record of the {} trace; failure_seq must name a tool or verification record",
                        a.failure_seq,
                        kind.name()
                    ),
                )))
            }
        }
        if let Some((i, s)) = a.evidence.iter().enumerate().find(|(_, s)| !by_seq.contains_key(s)) {
            return Err(missing(file, a.common.line, &format!("evidence[{i}]"), *s));
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    //! Validation (docs/format.md §7) and the typed form of accepted packages. The package helper
    //! [`Pkg`] is shared with the tests of `derive.rs`.

    use std::collections::BTreeMap;

    use serde_json::{json, Value};

    use super::*;

    /// The display name every test package gets.
    pub(crate) const PACKAGE: &str = "test-pkg";

    /// A package under construction in memory: starts minimal and valid (manifest.json
    /// and outcome.json with only their required fields); tests add or replace files.
    #[derive(Clone)]
    pub(crate) struct Pkg {
        files: BTreeMap<String, Vec<u8>>,
    }

    impl Pkg {
        pub(crate) fn minimal() -> Pkg {
            Pkg { files: BTreeMap::new() }
                .json(
                    MANIFEST,
                    &json!({
                        "format": "episode-package/1",
                        "episode": "task-a/H0/seed-1",
                        "model": {"name": "model-a"},
                        "harness": {"level": "H0"},
                        "task": {"id": "task-a"},
                    }),
                )
                .json(OUTCOME, &json!({"label": "failed"}))
        }

        /// Adds or replaces a file with exactly these bytes.
        pub(crate) fn file(mut self, path: &str, bytes: impl Into<Vec<u8>>) -> Pkg {
            self.files.insert(path.to_string(), bytes.into());
            self
        }

        pub(crate) fn without(mut self, path: &str) -> Pkg {
            assert!(self.files.remove(path).is_some(), "test package has no {path}");
            self
        }

        pub(crate) fn json(self, path: &str, value: &Value) -> Pkg {
            self.file(path, serde_json::to_vec_pretty(value).unwrap())
        }

        /// Writes `traces/<name>.jsonl`, one record per line.
        pub(crate) fn trace(self, name: &str, records: &[Value]) -> Pkg {
            let text: String = records.iter().map(|r| format!("{r}\n")).collect();
            self.file(&format!("traces/{name}.jsonl"), text)
        }

        /// Edits a JSON file (manifest.json, outcome.json) of the package.
        pub(crate) fn edit(self, path: &str, f: impl FnOnce(&mut Value)) -> Pkg {
            let mut value: Value = serde_json::from_slice(&self.files[path]).unwrap();
            f(&mut value);
            self.json(path, &value)
        }

        /// Sets a field of a JSON file by dotted path (`model.name`), creating objects.
        pub(crate) fn set(self, path: &str, field: &str, new: Value) -> Pkg {
            self.edit(path, |v| {
                let mut parts: Vec<&str> = field.split('.').collect();
                let last = parts.pop().unwrap();
                let mut at = v;
                for p in parts {
                    at = at.as_object_mut().unwrap().entry(p).or_insert_with(|| json!({}));
                }
                at.as_object_mut().unwrap().insert(last.to_string(), new);
            })
        }

        /// Removes a field of a JSON file by dotted path.
        pub(crate) fn unset(self, path: &str, field: &str) -> Pkg {
            self.edit(path, |v| {
                let mut parts: Vec<&str> = field.split('.').collect();
                let last = parts.pop().unwrap();
                let mut at = v;
                for p in parts {
                    at = &mut at[p];
                }
                assert!(at.as_object_mut().unwrap().remove(last).is_some(), "no field {field} in {path}");
            })
        }

        pub(crate) fn raw(&self) -> RawPackage {
            RawPackage::new(PACKAGE.to_string(), self.files.clone())
        }

        pub(crate) fn parse(&self) -> Result<Episode, Box<Problem>> {
            parse_package(&self.raw())
        }

        /// The episode; fails the test with the problem when the package is rejected.
        pub(crate) fn ok(&self) -> Episode {
            self.parse().unwrap_or_else(|p| panic!("package rejected: {p}"))
        }
    }

    /// Asserts that the package is rejected at exactly this file, line and field, and
    /// returns the problem for further checks.
    #[track_caller]
    fn assert_rejected(pkg: &Pkg, file: &str, line: Option<usize>, field: Option<&str>) -> Problem {
        let problem = match pkg.parse() {
            Ok(_) => {
                panic!("package accepted; expected a rejection at {file}:{line:?} field {field:?}")
            }
            Err(p) => *p,
        };
        let got = (problem.file.as_deref(), problem.line, problem.field.as_deref());
        assert_eq!(got, (Some(file), line, field), "wrong place for: {problem}");
        assert_eq!(problem.package, PACKAGE);
        assert!(!problem.message.is_empty());
        problem
    }

    fn manifest_with(field: &str, value: Value) -> Pkg {
        Pkg::minimal().set(MANIFEST, field, value)
    }

    fn manifest_without(field: &str) -> Pkg {
        Pkg::minimal().unset(MANIFEST, field)
    }

    /// A package whose `name` trace holds a valid first record at line 1 and `record`
    /// at line 2: problems in `record` must be reported at line 2.
    fn second_line(name: &str, first: Value, record: Value) -> Pkg {
        Pkg::minimal().trace(name, &[first, record])
    }

    fn extra(text: &Option<String>) -> Value {
        parse_json_text(text.as_deref().expect("extra is set")).unwrap()
    }

    const ACTIONS: &str = "traces/actions.jsonl";
    const TOOLS: &str = "traces/tools.jsonl";
    const CONTEXT: &str = "traces/context.jsonl";
    const CHECKS: &str = "traces/verification.jsonl";
    const ATTRIBUTION: &str = "traces/attribution.jsonl";
    const INTERVENTIONS: &str = "traces/interventions.jsonl";
    const ENTROPY: &str = "traces/entropy.jsonl";

    // ---- JSON nesting ---------------------------------------------------------------

    fn nested(depth: usize) -> String {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn json_nested_far_deeper_than_serde_json_allows_is_accepted_up_to_the_bound() {
        // serde_json alone refuses 129 levels; the format allows any JSON.
        let deep = format!(
            r#"{{"format": "episode-package/1", "episode": "e", "model": {{"name": "m"}},
            "harness": {{"level": "H0"}}, "task": {{"id": "t"}}, "payload": {}}}"#,
            nested(MAX_JSON_DEPTH - 1)
        );
        let e = Pkg::minimal().file(MANIFEST, deep).ok();
        let payload = extra(&e.manifest.extra)["payload"].to_string();
        assert_eq!(payload, nested(MAX_JSON_DEPTH - 1));
        // Brackets inside strings are text, not nesting.
        let in_string = format!(r#"{{"label": "failed", "note": "{}"}}"#, "[".repeat(5000));
        assert!(Pkg::minimal().file(OUTCOME, in_string).parse().is_ok());
    }

    #[test]
    fn a_lone_surrogate_in_an_agents_log_reads_as_the_replacement_character() {
        let read = |text: &str| json_from_str::<Value>(text).map(|v| v["t"].as_str().unwrap().to_string());
        // serde_json alone refuses each of these.
        assert!(serde_json::from_str::<Value>(r#"{"t": "a \ud83d b"}"#).is_err());
        assert_eq!(read(r#"{"t": "a \ud83d b"}"#).unwrap(), "a \u{fffd} b");
        assert_eq!(read(r#"{"t": "cut \ud83d"}"#).unwrap(), "cut \u{fffd}");
        assert_eq!(read(r#"{"t": "\udc00\ud800"}"#).unwrap(), "\u{fffd}\u{fffd}");
        // A pair stays a character; an escaped backslash before `u` is text.
        assert_eq!(read(r#"{"t": "\ud83d\ude00 \ud800"}"#).unwrap(), "\u{1f600} \u{fffd}");
        assert_eq!(read(r#"{"t": "\\ud800"}"#).unwrap(), "\\ud800");
        // Other errors stay errors.
        assert!(read(r#"{"t": "\uZZZZ"}"#).is_err());
    }

    #[test]
    fn nesting_is_counted_outside_strings_only_whatever_they_escape() {
        let deep = nested(MAX_JSON_DEPTH + 1);
        assert_eq!(too_deep(&deep), Some(1));
        // An escaped quote does not end the string; an escaped backslash before the
        // closing quote does: the brackets after it count again.
        let hidden = format!(r#"{{"a": "x\" {}"}}"#, "[".repeat(MAX_JSON_DEPTH + 1));
        assert_eq!(too_deep(&hidden), None);
        let after = format!("{{\"a\": \"x\\\\\"}}\n{}", deep);
        assert_eq!(too_deep(&after), Some(2), "{after}");
        // Unterminated strings and lines before the deep one.
        assert_eq!(too_deep(r#"{"a": "never closed [[[["#), None);
        assert_eq!(too_deep(&format!("{{}}\n{{}}\n\"s\"{deep}")), Some(3));
    }

    #[test]
    fn json_nested_past_the_bound_is_refused_at_its_line() {
        let line = format!(r#"{{"seq": 1, "deep": {}}}"#, nested(MAX_JSON_DEPTH + 1));
        let pkg = Pkg::minimal().file(ACTIONS, format!("{{\"seq\": 0}}\n{line}\n"));
        let problem = pkg.parse().unwrap_err();
        assert_eq!((problem.file.as_deref(), problem.line), (Some(ACTIONS), Some(2)), "{problem}");
        assert!(problem.message.contains(&format!("deeper than {MAX_JSON_DEPTH} levels")), "{problem}");
    }

    // ---- acceptance of the minimal package -------------------------------------------

    #[test]
    fn minimal_package_is_accepted_with_no_traces() {
        let e = Pkg::minimal().ok();
        assert_eq!(e.manifest.format, FORMAT_V1);
        assert_eq!(e.manifest.episode, "task-a/H0/seed-1");
        assert_eq!(
            (e.manifest.model.as_str(), e.manifest.harness_level.as_str(), e.manifest.task.as_str()),
            ("model-a", "H0", "task-a")
        );
        assert_eq!(e.outcome.label.as_deref(), Some("failed"));
        for (_, kind) in TRACE_FILES {
            assert_eq!(e.trace_len(kind), None, "{kind:?} was not recorded");
        }
        assert_eq!(e.derived.final_revision, 0);
        assert_eq!(e.derived.posture, "gap");
    }

    // ---- required files and fields ---------------------------------------------------

    #[test]
    fn missing_manifest_is_rejected_naming_the_file() {
        assert_rejected(&Pkg::minimal().without(MANIFEST), MANIFEST, None, None);
    }

    #[test]
    fn missing_outcome_is_rejected_naming_the_file() {
        assert_rejected(&Pkg::minimal().without(OUTCOME), OUTCOME, None, None);
    }

    #[test]
    fn missing_required_manifest_fields_are_named() {
        for field in ["format", "episode", "model", "model.name", "harness", "harness.level", "task", "task.id"] {
            assert_rejected(&manifest_without(field), MANIFEST, None, Some(field));
        }
    }

    #[test]
    fn required_field_set_to_null_counts_as_missing() {
        assert_rejected(&manifest_with("episode", Value::Null), MANIFEST, None, Some("episode"));
        assert_rejected(&manifest_with("task.id", Value::Null), MANIFEST, None, Some("task.id"));
    }

    #[test]
    fn missing_outcome_label_is_named() {
        assert_rejected(&Pkg::minimal().unset(OUTCOME, "label"), OUTCOME, None, Some("label"));
    }

    #[test]
    fn missing_seq_is_named_with_its_line() {
        let pkg = second_line("actions", json!({"seq": 0, "kind": "read"}), json!({"kind": "read"}));
        assert_rejected(&pkg, ACTIONS, Some(2), Some("seq"));
    }

    #[test]
    fn missing_required_trace_fields_are_named_with_their_line() {
        let cases = [
            ("tools", TOOLS, json!({"seq": 0, "tool": "bash"}), json!({"seq": 1, "command": "ls"}), "tool"),
            (
                "context",
                CONTEXT,
                json!({"seq": 0, "artifact": "README.md"}),
                json!({"seq": 1, "kind": "doc"}),
                "artifact",
            ),
            (
                "verification",
                CHECKS,
                json!({"seq": 0, "check_id": "c", "actor": "agent"}),
                json!({"seq": 1, "actor": "agent", "result": "pass"}),
                "check_id",
            ),
        ];
        for (name, file, first, record, field) in cases {
            assert_rejected(&second_line(name, first, record), file, Some(2), Some(field));
        }
        let pkg = Pkg::minimal()
            .trace("tools", &[json!({"seq": 9, "tool": "bash", "exit_code": 1})])
            .trace("attribution", &[json!({"seq": 0, "failure_seq": 9}), json!({"seq": 1, "category": "tool"})]);
        assert_rejected(&pkg, ATTRIBUTION, Some(2), Some("failure_seq"));
    }

    #[test]
    fn verifier_records_need_verifier_and_verdict() {
        let verifier = |seq: u64| json!({"seq": seq, "check_id": "judge", "actor": "verifier", "verifier": "m", "verdict": "accept"});
        let without = |field: &str| {
            let mut r = verifier(1);
            r.as_object_mut().unwrap().remove(field);
            second_line("verification", verifier(0), r)
        };
        assert_rejected(&without("verifier"), CHECKS, Some(2), Some("verifier"));
        assert_rejected(&without("verdict"), CHECKS, Some(2), Some("verdict"));
        // Other actors need neither.
        let e = Pkg::minimal()
            .trace(
                "verification",
                &[json!({"seq": 0, "check_id": "oracle", "actor": "evaluator", "method": "oracle", "result": "pass"})],
            )
            .ok();
        assert_eq!(e.checks.unwrap()[0].verifier, None);
    }

    // ---- encoding and syntax ---------------------------------------------------------

    #[test]
    fn non_utf8_json_file_is_rejected_at_its_line() {
        let pkg = Pkg::minimal()
            .file(MANIFEST, b"{\n  \"format\": \"episode-package/1\",\n  \"episode\": \"\xff\"\n}".to_vec());
        assert_rejected(&pkg, MANIFEST, Some(3), None);
    }

    #[test]
    fn non_utf8_trace_line_is_rejected_at_its_line() {
        let pkg = Pkg::minimal()
            .file(TOOLS, b"{\"seq\": 0, \"tool\": \"a\"}\n\n{\"seq\": 1, \"tool\": \"\xc3\x28\"}\n".to_vec());
        assert_rejected(&pkg, TOOLS, Some(3), None);
    }

    #[test]
    fn invalid_json_line_is_counted_with_blank_lines() {
        let text = "{\"seq\": 0, \"tool\": \"a\"}\n\n   \n{\"seq\": 1, \"tool\": \"b\"}\n\n{\"seq\": 2, \"tool\": \n";
        assert_rejected(&Pkg::minimal().file(TOOLS, text), TOOLS, Some(6), None);
    }

    #[test]
    fn blank_lines_are_ignored_and_lines_are_numbered_in_the_file() {
        let text = "\n{\"seq\": 4, \"tool\": \"a\"}\r\n\t\r\n\n{\"seq\": 2, \"tool\": \"b\"}";
        let tools = Pkg::minimal().file(TOOLS, text).ok().tools.unwrap();
        let got: Vec<(u64, u32, &str)> = tools.iter().map(|t| (t.common.seq, t.common.line, t.tool.as_str())).collect();
        assert_eq!(got, [(4, 2, "a"), (2, 5, "b")]);
    }

    #[test]
    fn invalid_json_file_is_rejected_at_its_line() {
        let pkg = Pkg::minimal().file(OUTCOME, "{\n  \"label\": \"failed\",\n  oops\n}");
        assert_rejected(&pkg, OUTCOME, Some(3), None);
    }

    #[test]
    fn json_report_must_be_json_but_markdown_report_is_free_text() {
        assert_rejected(&Pkg::minimal().file("reports/final.json", "not json"), "reports/final.json", Some(1), None);
        let e = Pkg::minimal().file("reports/final.md", "not json {").file("artifacts/log.txt", [0xffu8, 0xfe]).ok();
        assert_eq!(e.outcome.label.as_deref(), Some("failed"));
    }

    #[test]
    fn non_object_json_is_rejected() {
        assert_rejected(&Pkg::minimal().file(MANIFEST, "[]"), MANIFEST, None, None);
        assert_rejected(&Pkg::minimal().file(TOOLS, "{\"seq\": 0, \"tool\": \"a\"}\n[1, 2]\n"), TOOLS, Some(2), None);
    }

    // ---- types -----------------------------------------------------------------------

    #[test]
    fn wrong_types_are_named() {
        assert_rejected(&manifest_with("model.name", json!(5)), MANIFEST, None, Some("model.name"));
        assert_rejected(&manifest_with("model", json!("model-a")), MANIFEST, None, Some("model"));
        assert_rejected(&manifest_with("trace_complete", json!("yes")), MANIFEST, None, Some("trace_complete"));
        assert_rejected(&manifest_with("seed", json!(1.5)), MANIFEST, None, Some("seed"));
        assert_rejected(&manifest_with("requirements", json!(["R1"])), MANIFEST, None, Some("requirements[0]"));
        assert_rejected(&manifest_with("tags", json!(["a"])), MANIFEST, None, Some("tags"));
        assert_rejected(&Pkg::minimal().set(OUTCOME, "correct", json!("true")), OUTCOME, None, Some("correct"));
        assert_rejected(
            &Pkg::minimal().set(OUTCOME, "cost.tokens_in", json!("many")),
            OUTCOME,
            None,
            Some("cost.tokens_in"),
        );

        let action = |record: Value| second_line("actions", json!({"seq": 0}), record);
        assert_rejected(&action(json!({"seq": "1"})), ACTIONS, Some(2), Some("seq"));
        assert_rejected(&action(json!({"seq": 1.5})), ACTIONS, Some(2), Some("seq"));
        assert_rejected(&action(json!({"seq": 1, "ok": 1})), ACTIONS, Some(2), Some("ok"));
        assert_rejected(&action(json!({"seq": 1, "paths": "src/a.js"})), ACTIONS, Some(2), Some("paths"));
        assert_rejected(&action(json!({"seq": 1, "paths": ["a", 2]})), ACTIONS, Some(2), Some("paths[1]"));
        assert_rejected(
            &second_line("tools", json!({"seq": 0, "tool": "a"}), json!({"seq": 1, "tool": "a", "exit_code": "1"})),
            TOOLS,
            Some(2),
            Some("exit_code"),
        );
    }

    #[test]
    fn integral_floats_are_integers() {
        let e = Pkg::minimal().trace("actions", &[json!({"seq": 3.0})]).ok();
        assert_eq!(e.actions.unwrap()[0].common.seq, 3);
    }

    // ---- enumerations ----------------------------------------------------------------

    #[test]
    fn values_outside_their_enumeration_are_named() {
        assert_rejected(
            &manifest_with("harness.components", json!(["verification", "magic"])),
            MANIFEST,
            None,
            Some("harness.components[1]"),
        );
        assert_rejected(&Pkg::minimal().set(OUTCOME, "label", json!("success")), OUTCOME, None, Some("label"));
        assert_rejected(
            &Pkg::minimal().set(OUTCOME, "stop_reason", json!("bored")),
            OUTCOME,
            None,
            Some("stop_reason"),
        );
        assert_rejected(
            &Pkg::minimal().set(OUTCOME, "evidence_posture", json!("great")),
            OUTCOME,
            None,
            Some("evidence_posture"),
        );
        assert_rejected(
            &Pkg::minimal().set(
                OUTCOME,
                "requirements",
                json!([{"id": "R1", "status": "verified"}, {"id": "R2", "status": "done"}]),
            ),
            OUTCOME,
            None,
            Some("requirements[1].status"),
        );

        let cases = [
            ("actions", ACTIONS, json!({"seq": 0}), json!({"seq": 1, "kind": "teleport"}), "kind"),
            ("actions", ACTIONS, json!({"seq": 0}), json!({"seq": 1, "grade": "guessed"}), "grade"),
            (
                "tools",
                TOOLS,
                json!({"seq": 0, "tool": "a"}),
                json!({"seq": 1, "tool": "a", "failure_type": "oops"}),
                "failure_type",
            ),
            (
                "context",
                CONTEXT,
                json!({"seq": 0, "artifact": "a"}),
                json!({"seq": 1, "artifact": "a", "kind": "gossip"}),
                "kind",
            ),
            (
                "verification",
                CHECKS,
                json!({"seq": 0, "check_id": "c"}),
                json!({"seq": 1, "check_id": "c", "result": "passed"}),
                "result",
            ),
            (
                "verification",
                CHECKS,
                json!({"seq": 0, "check_id": "c"}),
                json!({"seq": 1, "check_id": "c", "actor": "robot"}),
                "actor",
            ),
            (
                "verification",
                CHECKS,
                json!({"seq": 0, "check_id": "c"}),
                json!({"seq": 1, "check_id": "c", "actor": "verifier", "verifier": "m", "verdict": "maybe"}),
                "verdict",
            ),
            (
                "interventions",
                INTERVENTIONS,
                json!({"seq": 0}),
                json!({"seq": 1, "missing_responsibility": "luck"}),
                "missing_responsibility",
            ),
            ("interventions", INTERVENTIONS, json!({"seq": 0}), json!({"seq": 1, "burden": "huge"}), "burden"),
            ("entropy", ENTROPY, json!({"seq": 0}), json!({"seq": 1, "phase": "during"}), "phase"),
        ];
        for (name, file, first, record, field) in cases {
            assert_rejected(&second_line(name, first, record), file, Some(2), Some(field));
        }
    }

    // ---- ranges ----------------------------------------------------------------------

    #[test]
    fn values_outside_their_range_are_named() {
        assert_rejected(&manifest_with("attempt", json!(0)), MANIFEST, None, Some("attempt"));
        assert_rejected(&Pkg::minimal().set(OUTCOME, "score", json!(1.2)), OUTCOME, None, Some("score"));
        assert_rejected(&Pkg::minimal().set(OUTCOME, "score", json!(-0.1)), OUTCOME, None, Some("score"));
        assert_rejected(
            &Pkg::minimal().set(OUTCOME, "budget.actions_used", json!(-1)),
            OUTCOME,
            None,
            Some("budget.actions_used"),
        );
        assert_rejected(&second_line("actions", json!({"seq": 0}), json!({"seq": -1})), ACTIONS, Some(2), Some("seq"));
        assert_rejected(
            &second_line("entropy", json!({"seq": 0}), json!({"seq": 1, "severity": 4})),
            ENTROPY,
            Some(2),
            Some("severity"),
        );
        assert_rejected(
            &second_line("entropy", json!({"seq": 0}), json!({"seq": 1, "severity": -1})),
            ENTROPY,
            Some(2),
            Some("severity"),
        );

        let attribution = |record: Value| {
            Pkg::minimal()
                .trace("tools", &[json!({"seq": 9, "tool": "bash", "exit_code": 1})])
                .trace("attribution", &[json!({"seq": 0, "failure_seq": 9}), record])
        };
        let at = |field: &str, value: Value| {
            let mut r = json!({"seq": 1, "failure_seq": 9});
            r[field] = value;
            attribution(r)
        };
        assert_rejected(&at("confidence", json!(1.5)), ATTRIBUTION, Some(2), Some("confidence"));
        assert_rejected(&at("confidence", json!(-0.5)), ATTRIBUTION, Some(2), Some("confidence"));
        assert_rejected(&at("rank", json!(0)), ATTRIBUTION, Some(2), Some("rank"));
        assert_rejected(&at("failure_seq", json!(-9)), ATTRIBUTION, Some(2), Some("failure_seq"));
        assert_rejected(&at("evidence", json!([9, -1])), ATTRIBUTION, Some(2), Some("evidence[1]"));
    }

    #[test]
    fn range_bounds_are_inclusive() {
        let e = Pkg::minimal()
            .set(MANIFEST, "attempt", json!(1))
            .set(OUTCOME, "score", json!(1.0))
            .trace("tools", &[json!({"seq": 9, "tool": "bash", "exit_code": 1})])
            .trace(
                "attribution",
                &[
                    json!({"seq": 0, "failure_seq": 9, "rank": 1, "confidence": 0.0}),
                    json!({"seq": 1, "failure_seq": 9, "confidence": 1}),
                ],
            )
            .trace("entropy", &[json!({"seq": 2, "severity": 0}), json!({"seq": 3, "severity": 3})])
            .ok();
        assert_eq!(e.outcome.score, Some(1.0));
        let attributions = e.attributions.unwrap();
        assert_eq!(
            (attributions[0].rank, attributions[0].confidence, attributions[1].confidence),
            (Some(1), Some(0.0), Some(1.0))
        );
        let severities: Vec<_> = e.entropy.unwrap().iter().map(|f| f.severity).collect();
        assert_eq!(severities, [Some(0), Some(3)]);
    }

    // ---- seq uniqueness and references -----------------------------------------------

    #[test]
    fn seq_repeated_across_files_is_rejected_at_the_later_file() {
        let pkg = Pkg::minimal().trace("actions", &[json!({"seq": 1}), json!({"seq": 3})]).trace(
            "tools",
            &[json!({"seq": 2, "tool": "a"}), json!({"seq": 4, "tool": "b"}), json!({"seq": 3, "tool": "c"})],
        );
        let problem = assert_rejected(&pkg, TOOLS, Some(3), Some("seq"));
        assert!(problem.message.contains("traces/actions.jsonl:2"), "{problem}");
    }

    #[test]
    fn seq_repeated_within_a_file_is_rejected_at_the_second_use() {
        let pkg =
            Pkg::minimal().trace("context", &[json!({"seq": 5, "artifact": "a"}), json!({"seq": 5, "artifact": "b"})]);
        assert_rejected(&pkg, CONTEXT, Some(2), Some("seq"));
    }

    #[test]
    fn dangling_references_are_named() {
        let tool = |seq: u64| json!({"seq": seq, "tool": "bash", "exit_code": 1});
        let pkg = Pkg::minimal()
            .trace("tools", &[tool(1)])
            .trace("actions", &[json!({"seq": 0}), json!({"seq": 2, "tool_seq": 7})]);
        assert_rejected(&pkg, ACTIONS, Some(2), Some("tool_seq"));

        let pkg = Pkg::minimal()
            .trace("tools", &[tool(1), json!({"seq": 2, "tool": "bash", "exit_code": 1, "recovered_by": 30})]);
        assert_rejected(&pkg, TOOLS, Some(2), Some("recovered_by"));

        let pkg = Pkg::minimal()
            .trace("tools", &[tool(1)])
            .trace("attribution", &[json!({"seq": 2, "failure_seq": 1}), json!({"seq": 3, "failure_seq": 8})]);
        assert_rejected(&pkg, ATTRIBUTION, Some(2), Some("failure_seq"));

        let pkg = Pkg::minimal()
            .trace("tools", &[tool(1)])
            .trace("attribution", &[json!({"seq": 2, "failure_seq": 1, "evidence": [1, 2, 99]})]);
        assert_rejected(&pkg, ATTRIBUTION, Some(1), Some("evidence[2]"));
    }

    #[test]
    fn references_to_existing_records_are_accepted() {
        let e = Pkg::minimal()
            .trace("actions", &[json!({"seq": 0, "kind": "run", "tool_seq": 1})])
            .trace(
                "tools",
                &[
                    json!({"seq": 1, "tool": "bash", "exit_code": 1, "recovered_by": 2}),
                    json!({"seq": 2, "tool": "bash"}),
                ],
            )
            .trace("verification", &[json!({"seq": 3, "check_id": "t", "actor": "agent", "result": "fail"})])
            .trace(
                "attribution",
                &[
                    json!({"seq": 4, "failure_seq": 1, "evidence": [0, 1, 2]}),
                    json!({"seq": 5, "failure_seq": 3, "evidence": []}),
                ],
            )
            .ok();
        let attributions = e.attributions.unwrap();
        assert_eq!(attributions[0].evidence, [0, 1, 2]);
        assert_eq!(attributions[1].failure_seq, 3);
        assert_eq!(e.actions.unwrap()[0].tool_seq, Some(1));
        assert_eq!(e.tools.unwrap()[0].recovered_by, Some(2));
    }

    #[test]
    fn failure_seq_must_name_a_tool_or_verification_record() {
        for (name, record) in
            [("actions", json!({"seq": 1, "kind": "run"})), ("context", json!({"seq": 1, "artifact": "a"}))]
        {
            let pkg =
                Pkg::minimal().trace(name, &[record]).trace("attribution", &[json!({"seq": 2, "failure_seq": 1})]);
            let problem = assert_rejected(&pkg, ATTRIBUTION, Some(1), Some("failure_seq"));
            assert!(problem.message.contains(name), "{problem}");
        }
        // An attribution naming another attribution is no better.
        let pkg = Pkg::minimal()
            .trace("tools", &[json!({"seq": 1, "tool": "a", "exit_code": 2})])
            .trace("attribution", &[json!({"seq": 2, "failure_seq": 1}), json!({"seq": 3, "failure_seq": 2})]);
        assert_rejected(&pkg, ATTRIBUTION, Some(2), Some("failure_seq"));
    }

    #[test]
    fn revision_above_final_is_rejected_and_final_itself_is_accepted() {
        let checks = |revision: u64| {
            Pkg::minimal().trace("actions", &[json!({"seq": 0, "kind": "edit"})]).trace(
                "verification",
                &[
                    json!({"seq": 1, "check_id": "a", "actor": "agent", "result": "pass", "revision": 0}),
                    json!({"seq": 2, "check_id": "b", "actor": "evaluator", "method": "oracle", "result": "pass", "revision": revision}),
                ],
            )
        };
        assert_rejected(&checks(2), CHECKS, Some(2), Some("revision"));
        let e = checks(1).ok();
        assert_eq!(e.checks.unwrap()[1].bound_revision, 1);
        // With no action trace the final revision is 0: any revision above it is out.
        let pkg = Pkg::minimal().trace("verification", &[json!({"seq": 1, "check_id": "a", "revision": 1})]);
        assert_rejected(&pkg, CHECKS, Some(1), Some("revision"));
        let pkg = Pkg::minimal().trace("verification", &[json!({"seq": 1, "check_id": "a", "revision": -1})]);
        assert_rejected(&pkg, CHECKS, Some(1), Some("revision"));
    }

    // ---- format and timestamps -------------------------------------------------------

    #[test]
    fn unsupported_format_version_is_rejected() {
        for format in ["episode-package/2", "episode-package/1.3", "episode-package/1.10", "Episode-Package/1", ""] {
            assert_rejected(&manifest_with("format", json!(format)), MANIFEST, None, Some("format"));
        }
    }

    #[test]
    fn timestamps_must_be_rfc3339() {
        assert_rejected(&manifest_with("started_at", json!("2026-05-02 10:00")), MANIFEST, None, Some("started_at"));
        assert_rejected(&manifest_with("ended_at", json!("yesterday")), MANIFEST, None, Some("ended_at"));
        assert_rejected(
            &second_line("actions", json!({"seq": 0}), json!({"seq": 1, "ts": "2026-05-02T10:00:00"})),
            ACTIONS,
            Some(2),
            Some("ts"),
        );
        let e = manifest_with("started_at", json!("2026-05-02T10:00:00Z"))
            .trace("actions", &[json!({"seq": 0, "ts": "2026-05-02T12:00:00.250+02:00"})])
            .ok();
        assert_eq!(e.manifest.started_at.as_deref(), Some("2026-05-02T10:00:00Z"));
        assert_eq!(
            e.actions.unwrap()[0].common.ts.as_deref(),
            Some("2026-05-02T12:00:00.250+02:00"),
            "kept as written"
        );
    }

    // ---- unknown fields --------------------------------------------------------------

    #[test]
    fn unknown_fields_are_kept_in_extra() {
        let e = Pkg::minimal()
            .set(MANIFEST, "harness_flavour", json!("spicy"))
            .set(MANIFEST, "model.context_window", json!(32768))
            .set(MANIFEST, "requirements", json!([{"id": "R1"}, {"id": "R2", "priority": "high"}]))
            .set(OUTCOME, "reviewer", json!({"name": "ana"}))
            .set(OUTCOME, "cost.gpu_hours", json!(0.5))
            .set(OUTCOME, "fault_locations", json!(["a.js:3", {"location": "b.js:1-2", "kind": "logic"}]))
            .trace("actions", &[json!({"seq": 0, "kind": "edit", "diff_lines": 4, "meta": {"x": [1]}})])
            .ok();
        assert_eq!(
            extra(&e.manifest.extra),
            json!({
                "harness_flavour": "spicy",
                "model": {"context_window": 32768},
                "requirements": [{}, {"priority": "high"}],
            })
        );
        assert_eq!(e.manifest.model, "model-a");
        assert_eq!(e.manifest.requirements.len(), 2);
        assert_eq!(
            extra(&e.outcome.extra),
            json!({
                "reviewer": {"name": "ana"},
                "cost": {"gpu_hours": 0.5},
                "fault_locations": [{}, {"kind": "logic"}],
            })
        );
        assert_eq!(e.outcome.fault_locations, Some(vec!["a.js:3".to_string(), "b.js:1-2".to_string()]));
        assert_eq!(extra(&e.actions.unwrap()[0].common.extra), json!({"diff_lines": 4, "meta": {"x": [1]}}));
    }

    #[test]
    fn known_fields_leave_extra_empty() {
        let e = Pkg::minimal()
            .set(MANIFEST, "model.version", json!("v1"))
            .set(MANIFEST, "tags", json!({"arm": "a"}))
            .set(OUTCOME, "budget", json!({"actions_used": 3, "actions_max": 5, "exhausted": false}))
            .trace("tools", &[json!({"seq": 0, "tool": "bash", "ts": "2026-05-02T10:00:00Z", "grade": "derived", "exit_code": null})])
            .ok();
        assert_eq!(e.manifest.extra, None);
        assert_eq!(e.outcome.extra, None);
        assert_eq!(e.tools.unwrap()[0].common.extra, None);
        assert_eq!(
            e.manifest.tags.as_deref().map(|t| serde_json::from_str::<Value>(t).unwrap()),
            Some(json!({"arm": "a"}))
        );
        assert_eq!(
            (e.outcome.actions_used, e.outcome.actions_max, e.outcome.budget_exhausted),
            (Some(3), Some(5), Some(false))
        );
    }

    /// Every field the contract names, at every level of the manifest and outcome and
    /// in one record of each of the seven traces, each with a valid value (revision 1.1).
    fn every_known_field() -> (Value, Value, Vec<(&'static str, Value)>) {
        let ts = "2026-05-02T10:00:00Z";
        let manifest = json!({
            "format": FORMAT_V1_1,
            "episode": "task-a/H1/seed-1",
            "model": {"name": "model-a", "version": "v1", "provider": "lab"},
            "harness": {"name": "h", "level": "H1", "version": "2", "components": ["verification"]},
            "task": {"id": "task-a", "family": "login", "cluster": "login-app"},
            "repository": {"url": "https://example.com/r.git", "commit": "abc123"},
            "requirements": [{"id": "R1", "text": "logs in"}],
            "seed": 1,
            "attempt": 2,
            "started_at": ts,
            "ended_at": "2026-05-02T11:00:00Z",
            "trace_complete": true,
            "tags": {"arm": "a"},
        });
        let outcome = json!({
            "label": "failed",
            "agent_reported_complete": true,
            "stop_reason": "completed",
            "correct": false,
            "start_state": "wrong",
            "admission": "pending",
            "requirements": [{"id": "R1", "status": "failed"}],
            "budget": {"actions_used": 3, "actions_max": 5, "exhausted": false},
            "cost": {"tokens_in": 10, "tokens_out": 20, "usd": 0.5, "wall_ms": 1000},
            "fault_locations": [{"location": "a.js:3"}],
            "score": 0.25,
            "notes": "n",
            "evidence_posture": "failure",
        });
        let common = |seq: u64| json!({"seq": seq, "ts": ts, "grade": "observed"});
        let record = |seq: u64, fields: Value| {
            let mut r = common(seq);
            r.as_object_mut().unwrap().extend(fields.as_object().unwrap().clone());
            r
        };
        let traces = vec![
            (
                "tools",
                record(
                    0,
                    json!({"tool": "bash", "command": "make test", "exit_code": 1, "duration_ms": 5.5,
                           "timed_out": false, "failure_type": "nonzero_exit", "recovered_by": 1,
                           "output": "1 failed"}),
                ),
            ),
            (
                "actions",
                record(
                    1,
                    json!({"kind": "edit", "paths": ["a.js"], "summary": "fix", "mutates": true, "ok": true,
                           "tool_seq": 0}),
                ),
            ),
            ("context", record(2, json!({"artifact": "docs/arch.md", "kind": "doc", "purpose": "p", "used": true}))),
            (
                "verification",
                record(
                    3,
                    json!({"check_id": "c1", "actor": "verifier", "method": "judge", "command": "judge a.js",
                           "result": "fail", "exit_code": 1, "duration_ms": 3, "requirements": ["R1"],
                           "revision": 1, "suite_id": "s", "verifier": "judge-model", "verdict": "reject",
                           "score": 0.2, "interpretation": "wrong"}),
                ),
            ),
            (
                "attribution",
                record(
                    4,
                    json!({"failure_seq": 0, "category": "tool", "responsibility": "tool_access",
                           "location": "a.js:3", "rank": 1, "confidence": 0.5, "evidence": [0, 3]}),
                ),
            ),
            (
                "interventions",
                record(
                    5,
                    json!({"actor": "human", "kind": "hint", "reason": "r", "missing_responsibility": "verification",
                           "avoidable": true, "burden": "low", "minutes": 2}),
                ),
            ),
            (
                "entropy",
                record(6, json!({"category": "code", "severity": 1, "phase": "post", "path": "a.js", "note": "n"})),
            ),
        ];
        (manifest, outcome, traces)
    }

    fn package_of(manifest: &Value, outcome: &Value, traces: &[(&str, Value)]) -> Pkg {
        let mut pkg = Pkg::minimal().json(MANIFEST, manifest).json(OUTCOME, outcome);
        for (name, record) in traces {
            pkg = pkg.trace(name, std::slice::from_ref(record));
        }
        pkg
    }

    /// Each record's `extra`, by trace, in [`TRACE_FILES`] order.
    fn record_extras(e: &Episode) -> Vec<(&'static str, Vec<Option<String>>)> {
        fn of<T>(items: &Option<Vec<T>>, common: fn(&T) -> &Common) -> Vec<Option<String>> {
            items.iter().flatten().map(|r| common(r).extra.clone()).collect()
        }
        vec![
            ("actions", of(&e.actions, |r| &r.common)),
            ("tools", of(&e.tools, |r| &r.common)),
            ("context", of(&e.context, |r| &r.common)),
            ("verification", of(&e.checks, |r| &r.common)),
            ("attribution", of(&e.attributions, |r| &r.common)),
            ("interventions", of(&e.interventions, |r| &r.common)),
            ("entropy", of(&e.entropy, |r| &r.common)),
        ]
    }

    #[test]
    fn no_typed_field_leaks_into_extra() {
        let (manifest, outcome, traces) = every_known_field();
        let e = package_of(&manifest, &outcome, &traces).ok();
        assert_eq!(e.manifest.extra, None, "manifest");
        assert_eq!(e.outcome.extra, None, "outcome");
        for (trace, extras) in record_extras(&e) {
            assert_eq!(extras, [None], "the {trace} record");
        }
        // The fields were read, not skipped: a few from each level.
        assert_eq!(
            (e.manifest.model_provider.as_deref(), e.manifest.repository_commit.as_deref()),
            (Some("lab"), Some("abc123"))
        );
        assert_eq!(e.manifest.requirements[0].text.as_deref(), Some("logs in"));
        assert_eq!((e.outcome.tokens_out, e.outcome.wall_ms), (Some(20), Some(1000.0)));
        assert_eq!(e.outcome.fault_locations, Some(vec!["a.js:3".to_string()]));
        assert_eq!(e.tools.as_ref().unwrap()[0].output.as_deref(), Some("1 failed"));
        assert_eq!(e.checks.as_ref().unwrap()[0].interpretation.as_deref(), Some("wrong"));
        assert_eq!(e.entropy.as_ref().unwrap()[0].note.as_deref(), Some("n"));
    }

    /// Adds `"x_unknown": "<where>"` to every object of `value` (not inside `tags`,
    /// whose fields are all kept as tags).
    fn add_unknown_everywhere(value: &mut Value, at: &str) {
        match value {
            Value::Object(map) => {
                for (key, v) in map.iter_mut() {
                    if key != "tags" {
                        add_unknown_everywhere(v, &format!("{at}.{key}"));
                    }
                }
                map.insert("x_unknown".into(), json!(at));
            }
            Value::Array(items) => {
                for (i, v) in items.iter_mut().enumerate() {
                    add_unknown_everywhere(v, &format!("{at}[{i}]"));
                }
            }
            _ => {}
        }
    }

    #[test]
    fn every_unknown_field_at_every_level_is_kept_in_extra() {
        let (mut manifest, mut outcome, mut traces) = every_known_field();
        let typed = package_of(&manifest, &outcome, &traces).ok();
        add_unknown_everywhere(&mut manifest, "m");
        add_unknown_everywhere(&mut outcome, "o");
        for (name, record) in &mut traces {
            add_unknown_everywhere(record, name);
        }
        // Revision 1.1's provenance is read to be checked, yet kept whole among the
        // unknown fields.
        let provenance = json!({"importer": "epistore 0.1.0", "source_format": "codex", "opaque_calls": 1,
                                "source_files": [{"name": "r.jsonl", "blake3": "ab".repeat(32), "part": 2}]});
        manifest["provenance"] = provenance.clone();
        let e = package_of(&manifest, &outcome, &traces).ok();
        assert_eq!(
            extra(&e.manifest.extra),
            json!({
                "x_unknown": "m",
                "provenance": provenance,
                "model": {"x_unknown": "m.model"},
                "harness": {"x_unknown": "m.harness"},
                "task": {"x_unknown": "m.task"},
                "repository": {"x_unknown": "m.repository"},
                "requirements": [{"x_unknown": "m.requirements[0]"}],
            })
        );
        assert_eq!(e.manifest.provenance(), Some(provenance.as_object().unwrap().clone()));
        assert_eq!(
            extra(&e.outcome.extra),
            json!({
                "x_unknown": "o",
                "requirements": [{"x_unknown": "o.requirements[0]"}],
                "budget": {"x_unknown": "o.budget"},
                "cost": {"x_unknown": "o.cost"},
                "fault_locations": [{"x_unknown": "o.fault_locations[0]"}],
            })
        );
        for (trace, extras) in record_extras(&e) {
            let extras: Vec<Value> = extras.iter().map(extra).collect();
            assert_eq!(extras, [json!({"x_unknown": trace})], "the {trace} record");
        }
        // Nothing else changed: without its extra fields the episode is the typed one.
        let mut stripped = e.clone();
        stripped.manifest.extra = None;
        stripped.outcome.extra = None;
        macro_rules! strip {
            ($($trace:ident),*) => {
                $(for r in stripped.$trace.iter_mut().flatten() {
                    r.common.extra = None;
                })*
            };
        }
        strip!(actions, tools, context, checks, attributions, interventions, entropy);
        assert_eq!(stripped, typed);
    }

    // ---- defaults --------------------------------------------------------------------

    #[test]
    fn manifest_and_outcome_defaults_are_applied() {
        let e = Pkg::minimal().ok();
        assert_eq!(e.manifest.attempt, 1);
        assert!(e.manifest.trace_complete);
        assert_eq!(e.manifest.cluster, "task-a", "cluster defaults to task.id");
        assert_eq!(e.outcome.stop_reason, "completed");
        assert_eq!(e.outcome.fault_locations, None, "absent ground truth stays absent");
        assert_eq!(e.outcome.recorded_posture, None);

        let e = Pkg::minimal()
            .set(MANIFEST, "task.cluster", json!("login-app"))
            .set(MANIFEST, "attempt", json!(3))
            .set(MANIFEST, "trace_complete", json!(false))
            .set(OUTCOME, "stop_reason", json!("budget_exhausted"))
            .set(OUTCOME, "fault_locations", json!([]))
            .ok();
        assert_eq!(
            (e.manifest.cluster.as_str(), e.manifest.attempt, e.manifest.trace_complete),
            ("login-app", 3, false)
        );
        assert_eq!(e.outcome.stop_reason, "budget_exhausted");
        assert_eq!(e.outcome.fault_locations, Some(vec![]), "empty ground truth is kept apart from absent");
    }

    #[test]
    fn record_defaults_are_applied() {
        let e = Pkg::minimal()
            .trace("actions", &[json!({"seq": 0}), json!({"seq": 1, "grade": "inferred", "ok": false})])
            .trace("context", &[json!({"seq": 2, "artifact": "docs/arch.md"})])
            .trace("entropy", &[json!({"seq": 3, "category": "code"}), json!({"seq": 4, "phase": "pre"})])
            .trace("interventions", &[json!({"seq": 5, "actor": "human", "missing_responsibility": null})])
            .ok();
        let actions = e.actions.unwrap();
        assert_eq!((actions[0].common.grade.as_str(), actions[0].ok), ("observed", true));
        assert_eq!((actions[1].common.grade.as_str(), actions[1].ok), ("inferred", false));
        assert!(e.context.unwrap()[0].used, "used defaults to true");
        let phases: Vec<_> = e.entropy.unwrap().iter().map(|f| f.phase.clone()).collect();
        assert_eq!(phases, ["post", "pre"]);
        assert_eq!(e.interventions.unwrap()[0].missing_responsibility, None);
    }

    #[test]
    fn tool_failure_type_is_recorded_or_derived() {
        // (record fields, effective failure type, recorded failure type)
        let cases = [
            (json!({}), "none", None),
            (json!({"exit_code": 0}), "none", None),
            (json!({"exit_code": null}), "none", None),
            (json!({"exit_code": 2}), "nonzero_exit", None),
            (json!({"exit_code": -9}), "nonzero_exit", None),
            (json!({"timed_out": true}), "timeout", None),
            (json!({"timed_out": true, "exit_code": 124}), "timeout", None),
            (json!({"timed_out": false, "exit_code": 0}), "none", None),
            (json!({"exit_code": 1, "failure_type": "none"}), "none", Some("none")),
            (json!({"exit_code": 0, "failure_type": "crash"}), "crash", Some("crash")),
            (json!({"timed_out": true, "failure_type": "other"}), "other", Some("other")),
        ];
        for (i, (fields, effective, recorded)) in cases.iter().enumerate() {
            let mut record = json!({"seq": 0, "tool": "bash"});
            record.as_object_mut().unwrap().extend(fields.as_object().unwrap().clone());
            let tool = Pkg::minimal().trace("tools", &[record]).ok().tools.unwrap().remove(0);
            assert_eq!(tool.failure_type, *effective, "case {i}: {fields}");
            assert_eq!(tool.recorded_failure_type.as_deref(), *recorded, "case {i}: {fields}");
            assert_eq!(tool.failed(), *effective != "none", "case {i}: {fields}");
        }
    }

    #[test]
    fn mutates_defaults_to_true_only_for_edit_create_delete() {
        let records: Vec<Value> =
            ACTION_KINDS.iter().enumerate().map(|(i, kind)| json!({"seq": i, "kind": kind})).collect();
        let mut with_no_kind = records.clone();
        with_no_kind.push(json!({"seq": 99}));
        let actions = Pkg::minimal().trace("actions", &with_no_kind).ok().actions.unwrap();
        for a in &actions {
            let expected = matches!(a.kind.as_deref(), Some("edit" | "create" | "delete"));
            assert_eq!(a.mutates, expected, "kind {:?}", a.kind);
        }
        // An explicit value wins both ways.
        let actions = Pkg::minimal()
            .trace(
                "actions",
                &[
                    json!({"seq": 0, "kind": "edit", "mutates": false}),
                    json!({"seq": 1, "kind": "run", "mutates": true}),
                ],
            )
            .ok()
            .actions
            .unwrap();
        assert_eq!((actions[0].mutates, actions[1].mutates), (false, true));
    }

    // ---- recorded versus not recorded ------------------------------------------------

    #[test]
    fn empty_trace_is_recorded_and_missing_trace_is_not() {
        let e = Pkg::minimal().file(TOOLS, "").file(ENTROPY, "\n\n  \n").trace("actions", &[json!({"seq": 0})]).ok();
        assert_eq!(e.tools, Some(vec![]));
        assert_eq!(e.entropy, Some(vec![]), "blank lines only: recorded, nothing happened");
        assert_eq!(e.trace_len(TraceKind::Tools), Some(0));
        assert_eq!(e.trace_len(TraceKind::Actions), Some(1));
        assert_eq!(e.context, None);
        assert_eq!(e.trace_len(TraceKind::Context), None);
        assert_eq!(e.checks, None);
    }

    #[test]
    fn recorded_posture_is_kept_beside_the_derived_one() {
        let e = Pkg::minimal().set(OUTCOME, "evidence_posture", json!("current")).ok();
        assert_eq!(e.outcome.recorded_posture.as_deref(), Some("current"));
        assert_eq!(e.derived.posture, "gap");
    }

    // ---- episode identity (docs/format.md §6.4) ---------------------------------------

    /// The definition in docs/format.md §6.4, written out independently of the crate.
    fn expected_episode_id(files: &[(&str, &[u8])]) -> String {
        let mut sorted: Vec<&(&str, &[u8])> = files.iter().collect();
        sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let mut listing = Vec::new();
        for (path, bytes) in sorted {
            listing.extend_from_slice(path.as_bytes());
            listing.push(0);
            listing.extend_from_slice(blake3::hash(bytes).as_bytes());
        }
        let id = blake3::hash(&listing).to_hex().to_string();
        assert_eq!(id, id.to_lowercase());
        id
    }

    #[test]
    fn episode_id_is_blake3_of_the_listing_in_bytewise_path_order() {
        let manifest = serde_json::to_vec(&json!({
            "format": "episode-package/1", "episode": "e", "model": {"name": "m"},
            "harness": {"level": "H0"}, "task": {"id": "t"},
        }))
        .unwrap();
        // '-' (0x2d) < '.' (0x2e) < '/' (0x2f) < 'B' < '_' < 'a' < 'é': a sort by path
        // components or by case would order these differently.
        let files: Vec<(&str, &[u8])> = vec![
            ("manifest.json", &manifest),
            ("outcome.json", br#"{"label": "failed"}"#),
            ("artifacts/a/b.log", b"inner"),
            ("artifacts/a-b.log", b"dash"),
            ("artifacts/a.b.log", b""),
            ("artifacts/B.log", b"upper"),
            ("artifacts/_x.log", b"underscore"),
            ("artifacts/\u{e9}t\u{e9}.log", b"accent"),
            ("patch.diff", b"--- a\n+++ b\n"),
        ];
        let map: BTreeMap<String, Vec<u8>> = files.iter().map(|(p, b)| (p.to_string(), b.to_vec())).collect();
        let raw = RawPackage::new(PACKAGE.to_string(), map);
        assert_eq!(crate::hex(&raw.id), expected_episode_id(&files));
        assert_eq!(crate::parse_hex(&expected_episode_id(&files)), Some(raw.id));
        parse_package(&raw).expect("the package is valid");
    }

    #[test]
    fn episode_id_depends_on_every_path_and_byte() {
        let id = |pkg: &Pkg| pkg.raw().id;
        let base = Pkg::minimal().file("artifacts/log.txt", "hello");
        assert_eq!(id(&base), id(&base.clone()), "same package, same id");
        assert_ne!(id(&base), id(&base.clone().file("artifacts/log.txt", "hellO")));
        assert_ne!(id(&base), id(&base.clone().without("artifacts/log.txt").file("artifacts/log2.txt", "hello")));
        assert_ne!(id(&base), id(&base.clone().file("artifacts/empty", "")), "an empty file still counts");
        let expected = expected_episode_id(&[
            ("manifest.json", &base.files["manifest.json"]),
            ("outcome.json", &base.files["outcome.json"]),
            ("artifacts/log.txt", b"hello"),
        ]);
        assert_eq!(crate::hex(&id(&base)), expected);
    }

    // ---- revision 1.1 (docs/format.md §8) ----------------------------------------------

    fn revision_1_1() -> Pkg {
        Pkg::minimal().set(MANIFEST, "format", json!(FORMAT_V1_1))
    }

    fn unknown_check() -> Value {
        json!({"seq": 0, "check_id": "t", "actor": "agent", "result": "unknown"})
    }

    #[test]
    fn revision_1_1_accepts_unknown_results_null_labels_and_provenance() {
        let pkg = revision_1_1()
            .set(OUTCOME, "label", Value::Null)
            .set(
                MANIFEST,
                "provenance",
                json!({"importer": "epistore 0.1.0", "source_format": "codex", "opaque_calls": 2,
                       "source_files": [{"name": "rollout.jsonl", "blake3": "ab".repeat(32), "part": 3}],
                       "notes": ["model named twice"]}),
            )
            .trace("verification", &[unknown_check()]);
        let e = pkg.ok();
        assert_eq!(e.manifest.format, FORMAT_V1_1);
        assert_eq!(e.outcome.label, None);
        assert_eq!(e.checks.as_ref().unwrap()[0].result.as_deref(), Some("unknown"));
        assert_eq!(e.manifest.source_format().as_deref(), Some("codex"));
        assert_eq!(e.manifest.provenance().unwrap()["opaque_calls"], json!(2));
    }

    #[test]
    fn revision_1_additions_are_refused_naming_the_field_and_the_revision() {
        let p = assert_rejected(&Pkg::minimal().set(OUTCOME, "label", Value::Null), OUTCOME, None, Some("label"));
        assert!(p.message.contains(FORMAT_V1_1), "{p}");
        let pkg = Pkg::minimal().trace("verification", &[unknown_check()]);
        let p = assert_rejected(&pkg, "traces/verification.jsonl", Some(1), Some("result"));
        assert!(p.message.contains(FORMAT_V1_1), "{p}");
    }

    // ---- revision 1.2 (docs/format.md §9) ----------------------------------------------

    fn revision_1_2() -> Pkg {
        Pkg::minimal().set(MANIFEST, "format", json!(crate::FORMAT_V1_2))
    }

    fn conversation() -> Vec<Value> {
        vec![
            json!({"seq": 0, "role": "user", "author": "human", "text": "fix the login bug"}),
            json!({"seq": 1, "role": "assistant", "text": "Running the tests.", "reasoning": "tests first",
                   "tool_call_id": "c1", "tool": "Bash", "arguments": {"command": "pytest"},
                   "tokens_in": 120, "tokens_out": 8, "model": "m1", "mood": "calm"}),
            json!({"seq": 3, "role": "tool", "tool_call_id": "c1", "tool": "Bash", "tool_seq": 2, "is_error": true}),
        ]
    }

    #[test]
    fn revision_1_2_reads_messages_diffs_prompt_final_message_and_output_text() {
        let e = revision_1_2()
            .edit(MANIFEST, |m| m["task"]["prompt"] = json!("Fix the login bug.\nKeep the API."))
            .set(OUTCOME, "final_message", json!("Done: tests pass."))
            .trace("messages", &conversation())
            .trace("tools", &[json!({"seq": 2, "tool": "Bash", "output": "artifacts/tool-output/2.txt"})])
            .trace("actions", &[json!({"seq": 4, "kind": "edit", "paths": ["a.py"], "diff": "--- a/a.py\n"})])
            .file("artifacts/tool-output/2.txt", "E   ModuleNotFoundError: No module named pytest\n")
            .ok();
        assert_eq!(e.manifest.task_prompt.as_deref(), Some("Fix the login bug.\nKeep the API."));
        assert_eq!(e.outcome.final_message.as_deref(), Some("Done: tests pass."));
        let m = e.messages.as_ref().unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!((m[0].role.as_str(), m[0].author.as_deref()), ("user", Some("human")));
        assert_eq!(m[1].arguments.as_deref(), Some(r#"{"command":"pytest"}"#));
        assert_eq!((m[1].tokens_in, m[1].tokens_out, m[1].model.as_deref()), (Some(120), Some(8), Some("m1")));
        assert_eq!(extra(&m[1].common.extra), json!({"mood": "calm"}));
        assert_eq!((m[2].tool_seq, m[2].is_error, m[2].text.as_deref()), (Some(2), Some(true), None));
        assert_eq!(e.actions.as_ref().unwrap()[0].diff.as_deref(), Some("--- a/a.py\n"));
        let t = &e.tools.as_ref().unwrap()[0];
        assert_eq!(t.output_text.as_deref(), Some("E   ModuleNotFoundError: No module named pytest\n"));
        assert_eq!(t.output_bytes, Some(48));
        assert_eq!(e.trace_len(TraceKind::Messages), Some(3));
        assert_eq!(revision_1_2().trace("messages", &[]).ok().trace_len(TraceKind::Messages), Some(0));
        assert_eq!(revision_1_2().ok().trace_len(TraceKind::Messages), None);
    }

    #[test]
    fn revision_1_2_additions_under_earlier_revisions_stay_unknown_fields_and_files() {
        for pkg in [Pkg::minimal(), revision_1_1()] {
            let e = pkg
                .edit(MANIFEST, |m| m["task"]["prompt"] = json!(7))
                .set(OUTCOME, "final_message", json!(["not", "read"]))
                .trace("messages", &[json!({"role": "nobody"})])
                .trace("actions", &[json!({"seq": 0, "kind": "edit", "diff": 3})])
                .ok();
            assert_eq!(e.messages, None);
            assert_eq!(e.manifest.task_prompt, None);
            assert_eq!(extra(&e.manifest.extra), json!({"task": {"prompt": 7}}));
            assert_eq!(extra(&e.outcome.extra), json!({"final_message": ["not", "read"]}));
            assert_eq!(extra(&e.actions.as_ref().unwrap()[0].common.extra), json!({"diff": 3}));
        }
    }

    #[test]
    fn revision_1_2_state_digests_must_be_strings_and_stay_in_extra() {
        let e = revision_1_2()
            .set(OUTCOME, "final_state_digest", json!("tree:a"))
            .trace("actions", &[json!({"seq": 0, "kind": "edit", "state_digest": "tree:0"})])
            .ok();
        assert_eq!(extra(&e.outcome.extra), json!({"final_state_digest": "tree:a"}));
        assert_eq!(extra(&e.actions.as_ref().unwrap()[0].common.extra), json!({"state_digest": "tree:0"}));
        assert_rejected(
            &revision_1_2().set(OUTCOME, "final_state_digest", json!(1)),
            OUTCOME,
            None,
            Some("final_state_digest"),
        );
        let pkg = revision_1_2().trace("verification", &[json!({"seq": 0, "check_id": "t", "state_digest": ["x"]})]);
        assert_rejected(&pkg, "traces/verification.jsonl", Some(1), Some("state_digest"));
    }

    #[test]
    fn revision_1_2_cache_token_counts_are_whole_numbers_kept_in_extra() {
        let e = revision_1_2()
            .set(OUTCOME, "cost", json!({"tokens_in": 100, "tokens_out": 5, "cache_read_tokens": 80}))
            .ok();
        assert_eq!(e.outcome.tokens_in, Some(100));
        assert_eq!(extra(&e.outcome.extra), json!({"cost": {"cache_read_tokens": 80}}));
        let bad = revision_1_2().set(OUTCOME, "cost", json!({"tokens_in": 100, "cache_write_tokens": -1}));
        assert_rejected(&bad, OUTCOME, None, Some("cost.cache_write_tokens"));
    }

    #[test]
    fn revision_1_2_refuses_bad_messages_naming_line_and_field() {
        let bad = |record: Value, field: &str| {
            let pkg = revision_1_2().trace("messages", &[json!({"seq": 0, "role": "user"}), record]);
            assert_rejected(&pkg, "traces/messages.jsonl", Some(2), Some(field));
        };
        bad(json!({"seq": 1}), "role");
        bad(json!({"seq": 1, "role": "robot"}), "role");
        bad(json!({"seq": 1, "role": "tool", "tool_seq": 9}), "tool_seq");
        bad(json!({"seq": 1, "role": "assistant", "tokens_out": -1}), "tokens_out");
        bad(json!({"seq": 1, "role": "assistant", "text": 5}), "text");
        bad(json!({"seq": 0, "role": "assistant"}), "seq");
        let pkg = revision_1_2().trace("actions", &[json!({"seq": 0, "kind": "edit", "diff": 3})]);
        assert_rejected(&pkg, "traces/actions.jsonl", Some(1), Some("diff"));
        assert_rejected(&revision_1_2().set(OUTCOME, "final_message", json!(1)), OUTCOME, None, Some("final_message"));
    }

    #[test]
    fn output_text_is_capped_on_a_character_boundary_with_the_marker() {
        let path = "artifacts/tool-output/2.txt";
        // 'é' is two bytes: 16,383 ASCII bytes then 'é' straddles the cap.
        let long = format!("{}é{}", "a".repeat(OUTPUT_TEXT_CAP - 1), "b".repeat(100));
        let text = output_text(path, long.as_bytes());
        let (kept, marker) = text.rsplit_once('\n').unwrap();
        assert_eq!(kept, "a".repeat(OUTPUT_TEXT_CAP - 1));
        assert_eq!(
            marker,
            format!(
                "[epistore: output truncated at {OUTPUT_TEXT_CAP} of {} bytes; the whole output is in {path}]",
                long.len()
            )
        );
        let fits = "x".repeat(OUTPUT_TEXT_CAP);
        assert_eq!(output_text(path, fits.as_bytes()), fits);
        assert_eq!(output_text(path, b"caf\xff"), "caf\u{fffd}");
        // A tools record naming no file of the package has no text.
        let e = Pkg::minimal().trace("tools", &[json!({"seq": 0, "tool": "t", "output": "artifacts/none.txt"})]).ok();
        let t = &e.tools.as_ref().unwrap()[0];
        assert_eq!((t.output_text.as_ref(), t.output_bytes), (None, None));
    }

    #[test]
    fn provenance_under_revision_1_is_an_unknown_field_kept_uninterpreted() {
        let e = Pkg::minimal().set(MANIFEST, "provenance", json!({"source_format": 7})).ok();
        assert_eq!(extra(&e.manifest.extra), json!({"provenance": {"source_format": 7}}));
        assert_eq!(e.manifest.provenance(), None);
    }

    #[test]
    fn a_label_must_still_be_present_in_revision_1_1() {
        assert_rejected(&revision_1_1().unset(OUTCOME, "label"), OUTCOME, None, Some("label"));
    }

    #[test]
    fn malformed_provenance_is_named() {
        let with = |p: Value| revision_1_1().set(MANIFEST, "provenance", p);
        assert_rejected(&with(json!({"opaque_calls": -1})), MANIFEST, None, Some("provenance.opaque_calls"));
        assert_rejected(
            &with(json!({"source_files": [{"name": "x", "blake3": "nothex"}]})),
            MANIFEST,
            None,
            Some("provenance.source_files[0].blake3"),
        );
        assert_rejected(&with(json!({"notes": "one"})), MANIFEST, None, Some("provenance.notes"));
    }

    #[test]
    fn unknown_result_is_a_check_that_ran_but_not_a_pass() {
        // Posture rules 3, 4, 6 with an unknown result (docs/metrics.md §I).
        let edit = json!({"seq": 1, "kind": "edit"});
        let only_unknown = revision_1_1().trace("verification", &[unknown_check()]).ok();
        assert_eq!(only_unknown.derived.posture, "unknown", "ran (not gap), not a pass (not current)");
        let before_edit = revision_1_1().trace("verification", &[unknown_check()]).trace("actions", &[edit]).ok();
        assert_eq!(before_edit.derived.posture, "stale");
        let pass_and_unknown = revision_1_1()
            .trace(
                "verification",
                &[unknown_check(), json!({"seq": 1, "check_id": "u", "actor": "agent", "result": "pass"})],
            )
            .ok();
        assert_eq!(pass_and_unknown.derived.posture, "current", "unknown is not a failure");
    }
}
