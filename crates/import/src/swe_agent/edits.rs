//! The diffs of SWE-agent's editor commands (docs/format.md §9.2), rebuilt from what the
//! trajectory shows:
//!
//! - `str_replace_editor create` (`file_text`): the created file, whole;
//! - `str_replace_editor str_replace` (`old_str`, `new_str`) and the replace editor's
//!   `edit <search> <replace>`: the replaced text only, numbered within it (a fragment);
//! - `str_replace_editor insert` (`insert_line`, `new_str`): an addition after that line;
//! - the windowed editor's `edit N:M` + text: lines N to M replaced, with the old lines
//!   taken from the file windows earlier observations printed (`[File: PATH (K lines
//!   total)]` then `N:text` lines); no diff when a replaced line was never shown;
//! - the replace editor's `insert <text>` (appended to the file): numbered by the window
//!   the insertion printed.
//!
//! Only an edit the tool reported applied gets a diff. The windows are forgotten for a
//! file an edit changed (its lines moved) and for every file after a command that may
//! change files (anything but the editor's own reading commands).

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::diff;

/// Commands that only show or search files: they keep what the windows showed.
const READERS: [&str; 9] =
    ["open", "goto", "scroll_up", "scroll_down", "search_file", "search_dir", "find_file", "filemap", "submit"];

/// An edit's diff, with the file it changed.
pub(super) struct EditDiff {
    pub path: String,
    pub diff: String,
    /// Numbered within the replaced text, not the file.
    pub fragment: bool,
}

/// What the file windows of the observations so far showed, by path (relative to the
/// working directory where it lies inside it).
pub(super) struct Windows {
    workdir: Option<String>,
    lines: HashMap<String, BTreeMap<u64, String>>,
    /// The file the last window showed.
    last: Option<String>,
}

impl Windows {
    pub fn new(workdir: Option<&str>) -> Windows {
        Windows { workdir: workdir.map(|w| w.trim_end_matches('/').to_string()), lines: HashMap::new(), last: None }
    }

    /// A path as the diff names it: relative to the working directory when inside it.
    pub fn key(&self, path: &str) -> String {
        let path = path.trim();
        let path = path.strip_prefix("./").unwrap_or(path);
        if let Some(w) = &self.workdir {
            if let Some(rest) = path.strip_prefix(w.as_str()).and_then(|r| r.strip_prefix('/')) {
                return rest.to_string();
            }
        }
        path.to_string()
    }

    /// One step: the diff of its edit when the log shows enough, then what its
    /// observation showed. `args`: the call's arguments (function calling); `open`: the
    /// file open before the step (the previous step's `state.open_file`).
    pub fn step(
        &mut self,
        action: &str,
        args: Option<&Value>,
        observation: &str,
        open: Option<&str>,
    ) -> Option<EditDiff> {
        let obs = observation.replace("\r\n", "\n");
        let head = action.split_whitespace().next().unwrap_or("");
        let open = open.map(|p| self.key(p)).or_else(|| self.last.clone());
        let rejected = obs.contains("Your proposed edit has introduced new syntax error");
        let out = match head {
            "str_replace_editor" => self.anthropic(action, args, &obs),
            "edit" if !rejected => self.edit(action, args, &obs, open.as_deref()),
            "insert" if !rejected => self.insert(action, args, &obs, open.as_deref()),
            _ => None,
        };
        match (&out, head) {
            (Some(d), _) => {
                self.lines.remove(&d.path);
            }
            (None, "edit" | "insert" | "append") if !rejected => {
                if let Some(p) = &open {
                    self.lines.remove(p);
                }
            }
            (None, "create" | "edit" | "insert" | "append") => {}
            (None, "str_replace_editor") => {
                let words = split_words(action);
                if words.get(1).map(String::as_str) != Some("view") {
                    if let Some(p) = words.get(2) {
                        let p = self.key(p);
                        self.lines.remove(&p);
                    }
                }
            }
            (None, h) if READERS.contains(&h) => {}
            (None, _) => self.lines.clear(),
        }
        self.observe(&obs);
        out
    }

    /// Learns the windows an observation printed; of a rejected edit, only the original
    /// code (the other window shows the edit that was not applied).
    fn observe(&mut self, obs: &str) {
        let text = match obs.split_once("This is the original code before your edit") {
            Some((_, original)) => original,
            None if obs.contains("This is how your edit would have looked if applied") => return,
            None => obs,
        };
        for (path, lines) in windows_in(text) {
            let key = self.key(&path);
            let known = self.lines.entry(key.clone()).or_default();
            known.extend(lines);
            self.last = Some(key);
        }
    }

    /// `str_replace_editor COMMAND PATH [--file_text T] [--old_str O] [--new_str N]
    /// [--insert_line L]`, or the same as function-calling arguments.
    fn anthropic(&self, action: &str, args: Option<&Value>, obs: &str) -> Option<EditDiff> {
        let words = split_words(action);
        let flag = |name: &str| -> Option<String> {
            if let Some(v) = args.and_then(|a| a.get(name)) {
                return match v {
                    Value::String(s) => Some(s.clone()),
                    Value::Number(n) => Some(n.to_string()),
                    _ => None,
                };
            }
            let at = words.iter().position(|w| w == &format!("--{name}"))?;
            words.get(at + 1).cloned()
        };
        let command = flag("command").or_else(|| words.get(1).cloned())?;
        let path = flag("path").or_else(|| words.get(2).cloned())?;
        let path = self.key(&path);
        match command.as_str() {
            "create" if obs.contains("File created successfully") => {
                let text = flag("file_text")?;
                Some(EditDiff { diff: diff::unified(&path, None, Some(&text)), path, fragment: false })
            }
            "str_replace" if obs.contains("has been edited") => {
                let (old, new) = (flag("old_str")?, flag("new_str").unwrap_or_default());
                Some(EditDiff {
                    diff: diff::fragment(&path, &lines_text(&old), &lines_text(&new)),
                    path,
                    fragment: true,
                })
            }
            "insert" if obs.contains("has been edited") => {
                // Line numbers are read as u32: arithmetic on them cannot overflow.
                let after = u64::from(flag("insert_line")?.trim().parse::<u32>().ok()?);
                let new = flag("new_str")?;
                let new: Vec<String> = new.lines().map(str::to_string).collect();
                Some(EditDiff { diff: hunk_diff(&path, after + 1, &[], &[], &new, &[]), path, fragment: false })
            }
            _ => None,
        }
    }

    /// `edit N:M` / text / `end_of_edit` (windowed editor), or the replace editor's
    /// `edit <search> <replace>`.
    fn edit(&self, action: &str, args: Option<&Value>, obs: &str, open: Option<&str>) -> Option<EditDiff> {
        let path = open?.to_string();
        let arg = |name: &str| args.and_then(|a| a.get(name)).and_then(Value::as_str).map(str::to_string);
        if let (Some(search), Some(replace)) = (arg("search"), arg("replace")) {
            return obs.contains("Text replaced").then(|| replaced(&path, &search, &replace));
        }
        let num = |name: &str| args.and_then(|a| a.get(name)).and_then(Value::as_u64);
        let (first, rest) = action.split_once('\n').unwrap_or((action, ""));
        let range = match (num("start_line"), num("end_line")) {
            (Some(a), Some(b)) if a >= 1 && b >= a => Some((a, b)),
            _ => line_range(first),
        };
        if let Some((start, end)) = range {
            if !obs.contains("File updated") {
                return None;
            }
            let text = match arg("replacement_text") {
                Some(t) => t,
                None => rest.lines().take_while(|l| l.trim() != "end_of_edit").map(|l| format!("{l}\n")).collect(),
            };
            let text: Vec<String> = text.lines().map(str::to_string).collect();
            return self.window_replace(&path, start, end, &text);
        }
        let words = split_words(action);
        if let [_, search, replace, ..] = words.as_slice() {
            if obs.contains("Text replaced") {
                return Some(replaced(&path, search, replace));
            }
        }
        None
    }

    /// The replace editor's `insert <text>`: appended to the file. The window it printed
    /// shows the inserted lines at the file's end (`K lines total`), and the lines before.
    fn insert(&self, action: &str, args: Option<&Value>, obs: &str, open: Option<&str>) -> Option<EditDiff> {
        let path = open?.to_string();
        let (text, line) = match args {
            Some(a) => (a.get("text")?.as_str()?.to_string(), a.get("line").filter(|l| !l.is_null()).cloned()),
            None => {
                let words = split_words(action);
                (words.get(1)?.clone(), words.get(2).map(|w| Value::String(w.clone())))
            }
        };
        if line.is_some() {
            return None;
        }
        let text = text.strip_suffix('\n').unwrap_or(&text);
        let new: Vec<String> = text.split('\n').map(str::to_string).collect();
        let (shown, total) = windows_in(obs).into_iter().find_map(|(p, lines)| {
            (self.key(&p) == path).then(|| (lines.into_iter().collect::<BTreeMap<_, _>>(), header_total(obs)))
        })?;
        let total = total?;
        let after = total.checked_sub(new.len() as u64)?;
        // The window must show the inserted lines where the count puts them.
        let at = |i: u64| shown.get(&i).cloned();
        if (0..new.len() as u64).any(|k| at(after + 1 + k).as_deref() != Some(new[k as usize].as_str())) {
            return None;
        }
        let before: Vec<String> = context_before(&shown, after + 1);
        Some(EditDiff { diff: hunk_diff(&path, after + 1, &before, &[], &new, &[]), path, fragment: false })
    }

    /// Lines `start..=end` of `path` replaced by `text`, when every replaced line was shown.
    fn window_replace(&self, path: &str, start: u64, end: u64, text: &[String]) -> Option<EditDiff> {
        let known = self.lines.get(path)?;
        let old: Vec<String> = (start..=end).map(|i| known.get(&i).cloned()).collect::<Option<_>>()?;
        let before = context_before(known, start);
        let after: Vec<String> = (end + 1..end + 4).map_while(|i| known.get(&i).cloned()).collect();
        let d = hunk_diff(path, start, &before, &old, text, &after);
        Some(EditDiff { path: path.to_string(), diff: d, fragment: false })
    }
}

/// A search/replace edit: the fragment's diff.
fn replaced(path: &str, search: &str, replace: &str) -> EditDiff {
    EditDiff {
        path: path.to_string(),
        diff: diff::fragment(path, &lines_text(search), &lines_text(replace)),
        fragment: true,
    }
}

/// A replaced text as whole lines (the tools replace within a line; the diff shows lines).
fn lines_text(s: &str) -> String {
    if s.ends_with('\n') || s.is_empty() {
        s.to_string()
    } else {
        format!("{s}\n")
    }
}

/// Up to three lines shown just before line `start`.
fn context_before(known: &BTreeMap<u64, String>, start: u64) -> Vec<String> {
    let mut out: Vec<String> =
        (start.saturating_sub(3).max(1)..start).rev().map_while(|i| known.get(&i).cloned()).collect();
    out.reverse();
    out
}

/// `edit N:M` (`N:M` in the first line).
fn line_range(first: &str) -> Option<(u64, u64)> {
    let mut words = first.split_whitespace();
    if words.next()? != "edit" {
        return None;
    }
    let (a, b) = words.next()?.split_once(':')?;
    let (a, b) = (u64::from(a.parse::<u32>().ok()?), u64::from(b.parse::<u32>().ok()?));
    (a >= 1 && b >= a).then_some((a, b))
}

/// The unified diff of `old` replaced by `new` at file line `first` (the first old line,
/// or where an insertion goes), with the shown context lines around it.
fn hunk_diff(path: &str, first: u64, before: &[String], old: &[String], new: &[String], after: &[String]) -> String {
    let join =
        |parts: [&[String]; 3]| -> String { parts.iter().flat_map(|p| p.iter()).map(|l| format!("{l}\n")).collect() };
    let old_text = join([before, old, after]);
    let new_text = join([before, new, after]);
    let d = diff::unified(path, Some(&old_text), Some(&new_text));
    let offset = first - 1 - before.len() as u64;
    d.lines()
        .map(|l| if l.starts_with("@@ ") { shift_hunk(l, offset) } else { l.to_string() })
        .map(|l| l + "\n")
        .collect()
}

/// `@@ -a,b +c,d @@` with `offset` added to both starts.
fn shift_hunk(line: &str, offset: u64) -> String {
    let shift = |range: &str| -> String {
        let (start, count) = match range.split_once(',') {
            Some((s, c)) => (s, Some(c)),
            None => (range, None),
        };
        let start = u64::from(start.parse::<u32>().unwrap_or(0));
        match count {
            Some(c) => format!("{},{c}", start + offset),
            None => format!("{}", start + offset),
        }
    };
    let mut parts = line.split(' ');
    let (Some("@@"), Some(old), Some(new)) = (parts.next(), parts.next(), parts.next()) else {
        return line.to_string();
    };
    let (Some(old), Some(new)) = (old.strip_prefix('-'), new.strip_prefix('+')) else {
        return line.to_string();
    };
    let rest: Vec<&str> = parts.collect();
    format!("@@ -{} +{} {}", shift(old), shift(new), rest.join(" "))
}

/// The file windows of an observation: the path of each `[File: PATH (K lines total)]`
/// header and the `N:text` lines under it.
pub(super) fn windows_in(obs: &str) -> Vec<(String, Vec<(u64, String)>)> {
    let mut out: Vec<(String, Vec<(u64, String)>)> = Vec::new();
    let mut current: Option<(String, Vec<(u64, String)>)> = None;
    for line in obs.lines() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if let Some(path) = header_path(line) {
            out.extend(current.take());
            current = Some((path, Vec::new()));
            continue;
        }
        let Some((_, lines)) = current.as_mut() else {
            continue;
        };
        if line.starts_with('(') && line.contains("more lines") {
            continue;
        }
        match numbered(line) {
            Some(l) => lines.push(l),
            None => out.extend(current.take()),
        }
    }
    out.extend(current);
    out
}

fn header_path(line: &str) -> Option<String> {
    let rest = line.strip_prefix("[File: ")?;
    let cut = rest.rfind(" (")?;
    rest[cut..].ends_with(" lines total)]").then(|| rest[..cut].to_string())
}

/// The `K` of the first `(K lines total)]` header.
fn header_total(obs: &str) -> Option<u64> {
    obs.lines().find_map(|l| {
        let l = l.strip_suffix('\r').unwrap_or(l);
        header_path(l)?;
        let rest = &l[l.rfind(" (")? + 2..];
        rest.strip_suffix(" lines total)]")?.parse::<u32>().ok().map(u64::from)
    })
}

fn numbered(line: &str) -> Option<(u64, String)> {
    let (n, text) = line.split_once(':')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((u64::from(n.trim().parse::<u32>().ok()?), text.to_string()))
}

/// A command's words as a POSIX shell splits them (quotes and backslashes), which is how
/// SWE-agent quotes the arguments it writes into an action.
pub(super) fn split_words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut has = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                has = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    cur.push(c);
                }
            }
            '"' => {
                has = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' if matches!(chars.peek(), Some('"' | '\\' | '$' | '`')) => {
                            cur.push(chars.next().unwrap_or('\\'))
                        }
                        '\\' if chars.peek() == Some(&'\n') => {
                            chars.next();
                        }
                        c => cur.push(c),
                    }
                }
            }
            '\\' => {
                has = true;
                match chars.next() {
                    Some('\n') | None => {}
                    Some(c) => cur.push(c),
                }
            }
            c if c.is_whitespace() => {
                if has {
                    out.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            c => {
                has = true;
                cur.push(c);
            }
        }
    }
    if has {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_windows_and_hunks() {
        assert_eq!(
            split_words("str_replace_editor str_replace /t/a.py   --old_str 'it'\"'\"'s' --new_str \"x\\\"y\""),
            ["str_replace_editor", "str_replace", "/t/a.py", "--old_str", "it's", "--new_str", "x\"y"]
        );
        let w = windows_in("[File: /r/a.py (12 lines total)]\n(3 more lines above)\n4:x\n5:\n(7 more lines below)\nok");
        assert_eq!(w, vec![("/r/a.py".to_string(), vec![(4, "x".to_string()), (5, String::new())])]);
        assert_eq!(header_total("[File: a b.py (12 lines total)]\n1:x"), Some(12));
        assert_eq!(shift_hunk("@@ -1,3 +1 @@", 9), "@@ -10,3 +10 @@");
        let d = hunk_diff("a.py", 5, &["c".into()], &["old".into()], &["new".into(), "more".into()], &["z".into()]);
        assert_eq!(d, "--- a/a.py\n+++ b/a.py\n@@ -4,3 +4,4 @@\n c\n-old\n+new\n+more\n z\n");
        let ins = hunk_diff("a.py", 3, &[], &[], &["x".into()], &[]);
        assert_eq!(ins, "--- a/a.py\n+++ b/a.py\n@@ -2,0 +3 @@\n+x\n");
    }
}
