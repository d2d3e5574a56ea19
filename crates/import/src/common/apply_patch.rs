//! Codex's `apply_patch` tool, wherever a log shows its calls (a Codex rollout, `codex
//! exec --json` output, Codex's telemetry): the files a patch names and what it does to
//! them, whether the tool reported it applied, and its unified diff.

use serde_json::Value;

use crate::EditKind;

/// The files a patch names, and what it does to them.
pub(crate) fn patch_files(patch: &str) -> (EditKind, Vec<String>) {
    let mut changes = Vec::new();
    for line in patch.lines() {
        let line = line.trim_end();
        for (prefix, kind) in [
            ("*** Add File: ", Change::Add),
            ("*** Delete File: ", Change::Delete),
            ("*** Update File: ", Change::Update),
            ("*** Move to: ", Change::Update),
        ] {
            if let Some(path) = line.strip_prefix(prefix) {
                changes.push((path.trim().to_string(), kind));
            }
        }
    }
    summarise(&changes)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    Add,
    Delete,
    Update,
}

pub(crate) fn change_kind(name: &str) -> Change {
    match name.to_ascii_lowercase().as_str() {
        "add" | "create" => Change::Add,
        "delete" | "remove" => Change::Delete,
        _ => Change::Update,
    }
}

/// One mutation whatever the number of files: `create` when every file is new,
/// `delete` when every file is removed, else `edit`.
pub(crate) fn summarise(changes: &[(String, Change)]) -> (EditKind, Vec<String>) {
    let mut paths: Vec<String> = Vec::new();
    for (p, _) in changes {
        if !paths.contains(p) {
            paths.push(p.clone());
        }
    }
    let kind = if !changes.is_empty() && changes.iter().all(|(_, k)| *k == Change::Add) {
        EditKind::Create
    } else if !changes.is_empty() && changes.iter().all(|(_, k)| *k == Change::Delete) {
        EditKind::Delete
    } else {
        EditKind::Edit
    };
    (kind, paths)
}

/// The success of an `apply_patch` the log reports only in words.
pub(crate) fn patch_ok_from_text(text: &str, exit: Option<i64>) -> bool {
    if text.contains("Success. Updated the following files") {
        return true;
    }
    match exit {
        Some(code) => code == 0,
        // No output at all: the outcome is unknown, which counts as possibly changed;
        // any other words are Codex reporting the patch did not apply.
        None => text.trim().is_empty(),
    }
}

/// One file of a Codex patch (`*** Update File:` / `*** Add File:` / `*** Delete File:`).
#[derive(Debug, Default)]
struct FilePatch {
    path: String,
    kind: Option<Change>,
    move_to: Option<String>,
    /// An added file's lines.
    added: Vec<String>,
    /// An update's chunks: the `@@` text and the ` `/`-`/`+` lines.
    chunks: Vec<(String, Vec<(char, String)>)>,
}

fn parse_patch(text: &str) -> Vec<FilePatch> {
    let mut files: Vec<FilePatch> = Vec::new();
    for line in text.lines() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let header = [
            ("*** Add File: ", Change::Add),
            ("*** Delete File: ", Change::Delete),
            ("*** Update File: ", Change::Update),
        ]
        .into_iter()
        .find_map(|(prefix, kind)| line.strip_prefix(prefix).map(|p| (p.trim().to_string(), kind)));
        if let Some((path, kind)) = header {
            files.push(FilePatch { path, kind: Some(kind), ..FilePatch::default() });
            continue;
        }
        if line.starts_with("*** ") {
            if let (Some(to), Some(f)) = (line.strip_prefix("*** Move to: "), files.last_mut()) {
                f.move_to = Some(to.trim().to_string());
            }
            // `*** Begin Patch`, `*** End Patch`, `*** End of File`.
            continue;
        }
        let Some(f) = files.last_mut() else { continue };
        match f.kind {
            Some(Change::Add) => {
                if let Some(l) = line.strip_prefix('+') {
                    f.added.push(l.to_string());
                }
            }
            Some(Change::Update) => {
                if let Some(context) = line.strip_prefix("@@") {
                    f.chunks.push((context.trim().to_string(), Vec::new()));
                    continue;
                }
                // A first chunk may come without `@@`; a blank line is a blank context line.
                let (tag, body) = match line.chars().next() {
                    Some(c @ (' ' | '-' | '+')) => (c, &line[1..]),
                    None => (' ', ""),
                    Some(_) => continue,
                };
                if f.chunks.is_empty() {
                    f.chunks.push((String::new(), Vec::new()));
                }
                if let Some((_, lines)) = f.chunks.last_mut() {
                    lines.push((tag, body.to_string()));
                }
            }
            _ => {}
        }
    }
    files
}

/// A hunk range as `diff -u` writes it: `start,len`, `start` alone for one line, the
/// line before and `,0` for none.
fn range(start: usize, len: usize) -> String {
    match len {
        0 => format!("{},0", start.saturating_sub(1)),
        1 => format!("{start}"),
        n => format!("{start},{n}"),
    }
}

/// An update's chunks as hunks numbered within the chunks (the patch gives no line
/// numbers of the file): the first chunk starts at line 1, each next one after the
/// lines of those before it.
fn chunks_diff(from: &str, to: &str, chunks: &[(String, Vec<(char, String)>)]) -> String {
    let mut out = format!("--- a/{from}\n+++ b/{to}\n");
    let (mut old_at, mut new_at) = (1, 1);
    for (context, lines) in chunks {
        let old = lines.iter().filter(|(t, _)| *t != '+').count();
        let new = lines.iter().filter(|(t, _)| *t != '-').count();
        if old == 0 && new == 0 {
            continue;
        }
        out.push_str(&format!("@@ -{} +{} @@", range(old_at, old), range(new_at, new)));
        if !context.is_empty() {
            out.push(' ');
            out.push_str(context);
        }
        out.push('\n');
        for (tag, body) in lines {
            out.push(*tag);
            out.push_str(body);
            out.push('\n');
        }
        old_at += old;
        new_at += new;
    }
    out
}

/// A change the log shows with its own diff or contents (a patch event's or file-change
/// item's `changes` entry): its unified diff, with the file's line numbers.
fn structured_diff(path: &str, change: &Value, rel: &dyn Fn(&str) -> String) -> Option<String> {
    // `{"type": "update", ...}`, or the older `{"update": {...}}`.
    let (kind, body) = match change.get("type").and_then(Value::as_str) {
        Some(t) => (change_kind(t), change),
        None => {
            let (k, v) = change.as_object()?.iter().next()?;
            (change_kind(k), v)
        }
    };
    let from = rel(path);
    match kind {
        Change::Add => Some(crate::diff::unified(&from, None, Some(body.get("content")?.as_str()?))),
        Change::Delete => Some(crate::diff::unified(&from, Some(body.get("content")?.as_str()?), None)),
        Change::Update => {
            let hunks = body.get("unified_diff").or(body.get("diff")).and_then(Value::as_str)?;
            if hunks.starts_with("--- ") {
                return Some(with_newline(hunks.to_string()));
            }
            let to = body.get("move_path").and_then(Value::as_str).map(rel).unwrap_or_else(|| from.clone());
            if hunks.trim().is_empty() && to == from {
                return None;
            }
            let (from, to) = (from.trim_start_matches('/'), to.trim_start_matches('/'));
            Some(with_newline(format!("--- a/{from}\n+++ b/{to}\n{hunks}")))
        }
    }
}

fn with_newline(mut s: String) -> String {
    if !s.is_empty() && !s.ends_with('\n') {
        s.push('\n');
    }
    s
}

/// The unified diff of one `apply_patch` call, every file it touches one after the
/// other, in the patch's order: a file's own diff from the patch event or file-change
/// item (`changes`: Codex's `unified_diff` with the file's line numbers, an added or
/// deleted file's contents) where the log gives one, else the patch text converted
/// (an update's chunks numbered within the chunks: the second value is then true). A
/// file deleted by a patch whose log shows no contents has no diff.
pub(crate) fn patch_diff(text: &str, changes: Option<&Value>, rel: &dyn Fn(&str) -> String) -> (Option<String>, bool) {
    let mut structured: Vec<(String, String)> = Vec::new();
    match changes {
        Some(Value::Object(map)) => {
            for (path, change) in map {
                if let Some(d) = structured_diff(path, change, rel) {
                    structured.push((rel(path), d));
                }
            }
        }
        Some(Value::Array(items)) => {
            for item in items {
                let Some(path) = item.get("path").and_then(Value::as_str) else { continue };
                let mut change = item.clone();
                if let (Some(o), Some(kind)) = (change.as_object_mut(), item.get("kind")) {
                    let (t, mv) = match kind {
                        Value::Object(k) => (k.get("type").cloned(), k.get("move_path").cloned()),
                        other => (Some(other.clone()), None),
                    };
                    o.insert("type".into(), t.unwrap_or(Value::Null));
                    if let Some(mv) = mv {
                        o.insert("move_path".into(), mv);
                    }
                }
                if let Some(d) = structured_diff(path, &change, rel) {
                    structured.push((rel(path), d));
                }
            }
        }
        _ => {}
    }
    let mut out = String::new();
    let mut fragment = false;
    let mut used = vec![false; structured.len()];
    for f in parse_patch(text) {
        let path = rel(&f.path);
        // The patch names a file relative to where it ran, the events by its full path.
        let same = |p: &str| p == path || p.ends_with(&format!("/{}", path.trim_start_matches('/')));
        if let Some(i) = structured.iter().enumerate().position(|(i, (p, _))| !used[i] && same(p)) {
            used[i] = true;
            out.push_str(&structured[i].1);
            continue;
        }
        let p = path.trim_start_matches('/');
        match f.kind {
            Some(Change::Add) => {
                let content: String = f.added.iter().map(|l| format!("{l}\n")).collect();
                out.push_str(&crate::diff::unified(p, None, Some(&content)));
            }
            Some(Change::Update) => {
                let to = f.move_to.as_deref().map(rel).unwrap_or_else(|| path.clone());
                let changed = f.chunks.iter().any(|(_, l)| !l.is_empty());
                fragment |= changed;
                if changed || to != path {
                    out.push_str(&chunks_diff(p, to.trim_start_matches('/'), &f.chunks));
                }
            }
            _ => {}
        }
    }
    for (i, (_, d)) in structured.iter().enumerate() {
        if !used[i] {
            out.push_str(d);
        }
    }
    ((!out.trim().is_empty()).then_some(out), fragment)
}
