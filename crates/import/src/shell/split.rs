//! Top-level segments: the tokens of a command grouped into pipelines of commands, each with
//! the joiner before it.

use super::lex::{lex, Redir, Tk};
use super::Joiner;

#[derive(Debug, Default)]
pub(super) struct RawCmd {
    pub(super) words: Vec<String>,
    pub(super) group: Option<String>,
    pub(super) redirs: Vec<Redir>,
}

#[derive(Debug)]
pub(super) struct RawSeg {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) cmds: Vec<RawCmd>,
    pub(super) before: Option<Joiner>,
}

/// Top-level segments of `src`, each a pipeline of commands.
pub(super) fn raw_segments(src: &str) -> Vec<RawSeg> {
    let mut segs: Vec<RawSeg> = Vec::new();
    let mut cur: Option<RawSeg> = None;
    let mut pending: Option<Joiner> = None;
    for t in lex(src) {
        match t.tk {
            Tk::Sep(j) => {
                if let Some(s) = cur.take() {
                    segs.push(s);
                    pending = Some(j);
                } else if pending.is_some() && j != Joiner::Seq {
                    pending = Some(j);
                }
            }
            Tk::Body(_) if cur.is_none() => {
                // a body read after the line's last joiner still belongs to the command before it
                if let Some(last) = segs.last_mut() {
                    last.end = last.end.max(t.end);
                }
            }
            tk => {
                let s = cur.get_or_insert_with(|| RawSeg {
                    start: t.start,
                    end: t.end,
                    cmds: vec![RawCmd::default()],
                    before: if segs.is_empty() { None } else { Some(pending.unwrap_or(Joiner::Seq)) },
                });
                s.end = s.end.max(t.end);
                if let Tk::Pipe = tk {
                    s.cmds.push(RawCmd::default());
                    continue;
                }
                let cmd = s.cmds.last_mut().expect("a segment has a command");
                match tk {
                    Tk::Word(w) => cmd.words.push(w),
                    Tk::Group(g) => {
                        if cmd.group.is_none() && cmd.words.is_empty() {
                            cmd.group = Some(g);
                        } else {
                            cmd.words.push(format!("({g})"));
                        }
                    }
                    Tk::Redir(r) => cmd.redirs.push(r),
                    _ => {}
                }
            }
        }
    }
    if let Some(s) = cur {
        segs.push(s);
    }
    segs
}
