//! A command flattened into segments: each top-level segment unwrapped and classified, the
//! commands of shells and groups spliced in with their own joiners, the SWE-agent edit block
//! kept whole, and the harness's declared commands made checks.

// ---------------------------------------------------------------------------------------
// Segments: flattening, workspace paths, the declared commands

use super::classify::{classify_cmd, mutation, Class};
use super::lex::{heredoc_body, RedirOp};
use super::paths::{Ctx, Cwd};
use super::split::{raw_segments, RawSeg};
use super::unwrap::{unwrap, ShellRun};
use super::{normalise_ws, Declared, Joiner, Segment, SegmentKind};

/// Shells inside shells (`bash -c "bash -c '...'"`) are unwrapped this deep; past it a
/// segment is opaque rather than a recursion the input controls.
const MAX_DEPTH: usize = 8;

fn check_id(method: &str, head: &[String], text: &str) -> String {
    let shown = if head.is_empty() { text.to_string() } else { head.join(" ") };
    // Reading: the head's words as the shell passes them (quotes removed), wrappers gone but
    // `python -m MODULE` kept as written from the python word on, then whitespace
    // runs made one space.
    format!("{method}:{}", normalise_ws(&shown))
}

/// What a segment's commands and redirections do to files, gathered over its pipeline.
#[derive(Default)]
struct Effects {
    kind: Option<&'static str>,
    paths: Vec<String>,
    decide: Vec<String>,
    /// some mutation names no path, so it may change anything in the workspace
    unknown: bool,
    opaque: bool,
}

impl Effects {
    fn take(&mut self, c: Class) {
        match c {
            Class::Mut { kind, paths, decide } => {
                self.kind.get_or_insert(kind);
                if decide.is_empty() {
                    self.unknown = true;
                }
                self.paths.extend(paths);
                self.decide.extend(decide);
            }
            Class::Opaque => self.opaque = true,
            _ => {}
        }
    }
}

fn classify_segment(raw: &RawSeg, start: usize, text: &str, ctx: &Ctx) -> SegmentKind {
    let cmd0 = &raw.cmds[0];
    let words = &cmd0.words[start..];
    let head = classify_cmd(words, &cmd0.redirs, text);
    // Reading: a check stays a check even when its output is redirected to a file or piped
    // to `tee`: the API gives a segment one kind, and the file written is the check's log.
    if let Class::Check(m) = head {
        return SegmentKind::Check { method: m, check_id: check_id(m, words, text) };
    }
    let head_view = match &head {
        Class::Read(k, p) => Some(SegmentKind::Read { kind: k, paths: p.clone() }),
        Class::Inert => Some(SegmentKind::Inert),
        _ => None,
    };
    let mut eff = Effects::default();
    eff.take(head);
    // Reading: the head decides checks (§ 4), but later commands of a pipe still act on
    // files: `| tee F` and `| xargs rm` mutate, `| sh` is opaque.
    for cmd in &raw.cmds[1..] {
        let (s, shell) = unwrap(&cmd.words);
        if shell.is_some() {
            eff.opaque = true;
            continue;
        }
        match classify_cmd(&cmd.words[s..], &cmd.redirs, text) {
            Class::Check(_) => {}
            c => eff.take(c),
        }
    }
    for cmd in &raw.cmds {
        // `[[ a > b ]]` compares strings; it redirects nothing
        if cmd.words.first().map(String::as_str) == Some("[[") {
            continue;
        }
        for r in &cmd.redirs {
            if r.op == RedirOp::Write && !r.target.is_empty() && r.target != "/dev/null" {
                eff.take(mutation("edit", vec![r.target.clone()]));
            }
        }
    }
    if let Some(kind) = eff.kind {
        let inside = eff.unknown || eff.decide.iter().any(|p| ctx.inside(p));
        // Reading: an opaque program whose output goes to a file outside the workspace is
        // still opaque: recording it as a mutation that changes nothing would hide it.
        if eff.opaque && !inside {
            return SegmentKind::Opaque;
        }
        return SegmentKind::Mutation { kind, paths: eff.paths, inside };
    }
    if eff.opaque {
        return SegmentKind::Opaque;
    }
    head_view.unwrap_or(SegmentKind::Opaque)
}

pub(super) fn flatten(
    src: &str,
    depth: usize,
    before: Option<Joiner>,
    piped: bool,
    ctx: &mut Ctx,
    out: &mut Vec<Segment>,
) {
    for (k, raw) in raw_segments(src).into_iter().enumerate() {
        let seg_before = if k == 0 { before } else { raw.before };
        let seg_piped = piped || raw.cmds.len() > 1;
        let text = src[raw.start..raw.end].trim().to_string();
        let cmd0 = &raw.cmds[0];
        if cmd0.words.is_empty() {
            if let Some(inner) = &cmd0.group {
                // Reading: a subshell or `{ ...; }` group is split like a shell's -c string;
                // a redirection of the whole group's output is not kept.
                if depth < MAX_DEPTH {
                    flatten(inner, depth + 1, seg_before, seg_piped, ctx, out);
                } else {
                    out.push(Segment {
                        text,
                        head: Vec::new(),
                        piped: seg_piped,
                        before: seg_before,
                        kind: SegmentKind::Opaque,
                        elsewhere: ctx.cwd_outside(),
                    });
                }
                continue;
            }
        }
        let (start, shell) = unwrap(&cmd0.words);
        let kind = match shell {
            Some(run) => {
                let inner = match &run {
                    ShellRun::Command(Some(x)) => Some(x.as_str()),
                    // Reading: a shell reading a here-document runs it like a -c string;
                    // one reading a pipe or a script file is opaque.
                    ShellRun::Stdin => heredoc_body(&cmd0.redirs),
                    _ => None,
                };
                match inner {
                    Some(x) if depth < MAX_DEPTH => {
                        flatten(x, depth + 1, seg_before, seg_piped, ctx, out);
                        continue;
                    }
                    _ => SegmentKind::Opaque,
                }
            }
            None => classify_segment(&raw, start, &text, ctx),
        };
        let head = cmd0.words[start..].to_vec();
        // Where this segment runs: before its own `cd` takes effect.
        let elsewhere = ctx.cwd_outside();
        if kind == SegmentKind::Inert {
            match head.first().map(String::as_str) {
                Some("cd" | "pushd") => ctx.cd(&head[1..]),
                Some("popd") => ctx.cwd = Cwd::Unknown,
                _ => {}
            }
        }
        out.push(Segment { text, head, piped: seg_piped, before: seg_before, kind, elsewhere });
    }
}

/// SWE-agent's multi-line edit commands (`edit 5:7` / new text / `end_of_edit`) are one
/// command, whatever their text looks like to a shell.
pub(super) fn split_editor_block(command: &str) -> (Option<Segment>, &str) {
    let t = command.trim_start();
    let first = t.split_whitespace().next().unwrap_or("");
    if !matches!(first, "edit" | "append" | "insert") || !t.trim_end().contains('\n') {
        return (None, command);
    }
    let mut end = t.len();
    let mut off = 0;
    for (idx, line) in t.split_inclusive('\n').enumerate() {
        off += line.len();
        let l = line.trim();
        let terminator = l
            .strip_prefix("end_of_")
            .is_some_and(|s| !s.is_empty() && s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_'));
        if idx > 0 && terminator {
            end = off;
            break;
        }
    }
    let block = t[..end].trim();
    let first_line = block.lines().next().unwrap_or("");
    let head = raw_segments(first_line)
        .into_iter()
        .next()
        .map(|s| s.cmds.into_iter().next().unwrap_or_default().words)
        .unwrap_or_default();
    let seg = Segment {
        text: block.to_string(),
        head,
        piped: false,
        before: None,
        kind: SegmentKind::Mutation { kind: "edit", paths: Vec::new(), inside: true },
        elsewhere: false,
    };
    (Some(seg), &t[end..])
}

pub(super) fn apply_declared(command: &str, segs: &mut [Segment], d: &Declared) {
    let whole = normalise_ws(command);
    let n = segs.len();
    let mut done = vec![false; n];
    for (cmd, method) in [(&d.test_cmd, "registered_test"), (&d.lint_cmd, "lint")] {
        let Some(cmd) = cmd else { continue };
        let want = normalise_ws(cmd);
        if want.is_empty() {
            continue;
        }
        // Reading: when the whole command is the declared one but splits into several
        // segments (`cd app && ./test.sh`), its checks and opaque segments are the declared
        // check; its cd, reads and edits keep their kinds.
        let whole_match = whole == want;
        for (k, seg) in segs.iter_mut().enumerate() {
            if done[k] {
                continue;
            }
            let hit = if whole_match {
                n == 1 || matches!(seg.kind, SegmentKind::Check { .. } | SegmentKind::Opaque)
            } else {
                normalise_ws(&seg.text) == want
            };
            if hit {
                seg.kind = SegmentKind::Check { method, check_id: check_id(method, &seg.head, &seg.text) };
                done[k] = true;
            }
        }
    }
}
