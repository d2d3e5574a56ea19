//! aider: `.aider.chat.history.md` (docs/importers.md §6a).
//!
//! aider appends every session to one history file, each opening with
//! `# aider chat started at TS`, so a unit is one session: `Part::Line(n)` with `n` its
//! header's line, and the session's text (header up to the next header) as its source
//! copy. aider writes no tool calls and no per-event times: [`parse`] reads a session
//! into turns of events ([`lines`]: what one of aider's lines says), [`record`] tells
//! them to the recorder ([`input`]: the command line and a person's inputs; [`blocks`]:
//! a reply's SEARCH/REPLACE blocks, the diffs of its edits), and [`gitlog`] reads a
//! `--git-log` file for the files an `/undo` rolled back.

mod blocks;
mod gitlog;
mod input;
mod lines;
mod parse;
mod record;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use crate::{Context, Format, Input, Part, Plan, Recorder, Refusal, Unit};

const HEADER: &str = "# aider chat started at";

pub(crate) fn plan(inputs: Vec<Arc<Input>>, plan: &mut Plan) {
    for input in inputs {
        let index = match index(&input) {
            Ok(i) => i,
            Err(r) => {
                plan.refuse(Format::Aider, r);
                continue;
            }
        };
        if index.sessions.is_empty() {
            plan.refuse(
                Format::Aider,
                Refusal::at_line(input.display(), 1, format!("expected a `{HEADER} TS` line: none in the file")),
            );
            continue;
        }
        if index.preamble {
            plan.refuse(
                Format::Aider,
                Refusal::at_line(
                    input.display(),
                    1,
                    format!(
                        "text before the first `{HEADER}` line (line {}): the rest of a session whose start is \
                         not in this file",
                        index.sessions[0].line
                    ),
                ),
            );
        }
        for s in &index.sessions {
            plan.units.push(Unit { format: Format::Aider, files: vec![input.clone()], part: Part::Line(s.line) });
        }
    }
}

pub(crate) fn read(unit: &Unit, ctx: &Context) -> Vec<Result<Recorder, Refusal>> {
    let input = &unit.files[0];
    let Part::Line(line) = unit.part else {
        return vec![Err(input.refuse(None, "an aider history is read one session (line) at a time"))];
    };
    vec![read_session(input, line, ctx)]
}

fn read_session(input: &Input, line: usize, ctx: &Context) -> Result<Recorder, Refusal> {
    let index = index(input)?;
    let Some(span) = index.sessions.iter().find(|s| s.line == line) else {
        return Err(Refusal::at_line(input.display(), line, format!("expected a `{HEADER}` line here")));
    };
    let mut bytes = vec![0; (span.end - span.start) as usize];
    let mut file = std::fs::File::open(&input.path).map_err(|e| input.io(e))?;
    file.seek(SeekFrom::Start(span.start)).and_then(|_| file.read_exact(&mut bytes)).map_err(|e| input.io(e))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let at = line + e.as_bytes()[..e.utf8_error().valid_up_to()].iter().filter(|&&b| b == b'\n').count();
        Refusal::at_line(input.display(), at, "not valid UTF-8")
    })?;
    let first = text.lines().next().map(|l| l.trim_start_matches('\u{feff}'));
    let Some(ts) = first.and_then(|l| l.strip_prefix(HEADER)) else {
        return Err(Refusal::at_line(input.display(), line, format!("expected a `{HEADER}` line here")));
    };
    let ts = ts.trim().to_string();
    let session = parse::session(&text, line);
    if !session.has_content {
        return Err(Refusal::at_line(
            input.display(),
            line,
            "empty session: aider wrote its start line and nothing else (no command line, model or input)",
        ));
    }
    if session.models.is_empty() && ctx.options.model.is_none() {
        return Err(Refusal::at_line(
            input.display(),
            line,
            "the session names no model (no `Model: X with ... edit format` line: aider exited before \
             announcing one, as a version check does); give one with --model",
        ));
    }
    let mut rec = Recorder::new(Format::Aider, format!("aider/{ts}"));
    rec.source(&input.file_name(), &input.blake3()?, Part::Line(line), text.clone().into_bytes())?;
    record::session(&mut rec, &session, &ts, ctx)?;
    Ok(rec)
}

/// Where each session of a history file starts and ends (bytes), found by one
/// streaming pass and kept for the file's other sessions.
#[derive(Debug)]
struct Index {
    sessions: Vec<Span>,
    /// Lines other than blank ones and an editor mode line come before the first header.
    preamble: bool,
}

#[derive(Debug, Clone, Copy)]
struct Span {
    line: usize,
    start: u64,
    end: u64,
}

type IndexCache = Mutex<HashMap<(PathBuf, u64, Option<SystemTime>), Arc<Index>>>;

fn index(input: &Input) -> Result<Arc<Index>, Refusal> {
    static CACHE: OnceLock<IndexCache> = OnceLock::new();
    let meta = std::fs::metadata(&input.path).map_err(|e| input.io(e))?;
    let key = (input.path.clone(), meta.len(), meta.modified().ok());
    let cache = CACHE.get_or_init(Default::default);
    if let Some(i) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(i.clone());
    }
    let built = Arc::new(scan(input)?);
    cache.lock().unwrap_or_else(|e| e.into_inner()).insert(key, built.clone());
    Ok(built)
}

fn scan(input: &Input) -> Result<Index, Refusal> {
    let file = std::fs::File::open(&input.path).map_err(|e| input.io(e))?;
    let mut reader = BufReader::new(file);
    let mut sessions: Vec<Span> = Vec::new();
    let mut preamble = false;
    let mut buf = Vec::new();
    let (mut offset, mut n) = (0u64, 0usize);
    loop {
        buf.clear();
        let read = reader.read_until(b'\n', &mut buf).map_err(|e| input.io(e))?;
        if read == 0 {
            break;
        }
        n += 1;
        // A byte order mark may open the file (an editor's): the header follows it.
        let line = if n == 1 { buf.strip_prefix(b"\xef\xbb\xbf".as_slice()).unwrap_or(&buf) } else { &buf };
        if line.starts_with(HEADER.as_bytes()) {
            if let Some(last) = sessions.last_mut() {
                last.end = offset;
            }
            sessions.push(Span { line: n, start: offset, end: offset });
        } else if sessions.is_empty() {
            let l = String::from_utf8_lossy(&buf);
            let l = l.trim().trim_start_matches('\u{feff}');
            preamble |= !(l.is_empty() || l.starts_with("-*-") && l.ends_with("-*-"));
        }
        offset += read as u64;
    }
    if let Some(last) = sessions.last_mut() {
        last.end = offset;
    }
    Ok(Index { sessions, preamble })
}
