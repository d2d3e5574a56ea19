//! The lexer: a command's text made tokens (words shell-unquoted, groups, redirections,
//! here-document bodies, pipes and joiners).

// ---------------------------------------------------------------------------------------
// Lexing: one pass over the command gives words, redirections, pipes and joiners, with the
// byte span of each so a segment's text can be cut from the command as written.

use super::quote::{find_brace_group_close, find_bt_close, find_sq_close, skip_balanced, skip_parens};
use super::Joiner;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RedirOp {
    /// `>`, `>>`, `>|`, `&>`, `&>>`, `N>`, `>&FILE`
    Write,
    Input,
    HereDoc,
    HereString,
    /// `N>&M`, `>&-`, `<&N`: names a descriptor, not a file
    Dup,
}

#[derive(Debug, Clone)]
pub(super) struct Redir {
    pub(super) op: RedirOp,
    pub(super) target: String,
    /// a here-document's body
    body: Option<String>,
}

#[derive(Debug, Clone)]
pub(super) enum Tk {
    Word(String),
    /// `( ... )` or `{ ...; }`: the inner text
    Group(String),
    Redir(Redir),
    Body(String),
    Pipe,
    Sep(Joiner),
}

#[derive(Debug, Clone)]
pub(super) struct Tok {
    pub(super) tk: Tk,
    pub(super) start: usize,
    pub(super) end: usize,
}

struct Lexer<'a> {
    src: &'a str,
    b: &'a [u8],
    i: usize,
    toks: Vec<Tok>,
    /// here-documents opened on the current line: (delimiter, `<<-`)
    pending: Vec<(String, bool)>,
}

impl Lexer<'_> {
    fn peek(&self, k: usize) -> Option<u8> {
        self.b.get(self.i + k).copied()
    }

    fn push(&mut self, tk: Tk, start: usize) {
        let end = self.i;
        self.toks.push(Tok { tk, start, end });
    }

    fn sep(&mut self, j: Joiner, start: usize, newline: bool) {
        // A newline after `&&`, `||` or `|` continues the command, and repeated separators
        // (blank lines, `;` then a newline) are one.
        let last = self.toks.iter().rev().find(|t| !matches!(t.tk, Tk::Body(_))).map(|t| &t.tk);
        match last {
            None => return,
            Some(Tk::Sep(_)) if newline || j == Joiner::Seq => return,
            Some(Tk::Pipe) if newline => return,
            _ => {}
        }
        self.push(Tk::Sep(j), start);
    }

    fn run(&mut self) {
        let n = self.b.len();
        while self.i < n {
            let start = self.i;
            match self.b[self.i] {
                b' ' | b'\t' | b'\r' => self.i += 1,
                b'\\' if self.peek(1) == Some(b'\n') => self.i += 2,
                b'\n' => {
                    self.i += 1;
                    self.read_bodies();
                    self.sep(Joiner::Seq, start, true);
                }
                b'#' => {
                    while self.i < n && self.b[self.i] != b'\n' {
                        self.i += 1;
                    }
                }
                b';' => {
                    self.i += 1;
                    if matches!(self.peek(0), Some(b';' | b'&')) {
                        self.i += 1;
                    }
                    self.sep(Joiner::Seq, start, false);
                }
                b'&' => match self.peek(1) {
                    Some(b'&') => {
                        self.i += 2;
                        self.sep(Joiner::And, start, false);
                    }
                    Some(b'>') => self.redirect(start),
                    _ => {
                        self.i += 1;
                        self.sep(Joiner::Seq, start, false);
                    }
                },
                b'|' => match self.peek(1) {
                    Some(b'|') => {
                        self.i += 2;
                        self.sep(Joiner::Or, start, false);
                    }
                    Some(b'&') => {
                        self.i += 2;
                        self.push(Tk::Pipe, start);
                    }
                    _ => {
                        self.i += 1;
                        self.push(Tk::Pipe, start);
                    }
                },
                b'<' | b'>' if self.peek(1) != Some(b'(') => self.redirect(start),
                b'(' => {
                    let end = skip_parens(self.b, self.i).min(n);
                    let inner_end = if end > self.i + 1 && self.b[end - 1] == b')' { end - 1 } else { end };
                    let inner = self.src[self.i + 1..inner_end.max(self.i + 1)].to_string();
                    self.i = end;
                    self.push(Tk::Group(inner), start);
                }
                b'{' if matches!(self.peek(1), Some(b' ' | b'\t' | b'\n')) => {
                    match find_brace_group_close(self.b, self.i) {
                        Some(close) => {
                            let inner = self.src[self.i + 1..close].to_string();
                            self.i = close + 1;
                            self.push(Tk::Group(inner), start);
                        }
                        None => self.word(start),
                    }
                }
                _ => self.word(start),
            }
        }
        if !self.pending.is_empty() {
            self.read_bodies();
        }
    }

    /// After a newline: the bodies of the here-documents opened on the line just ended.
    fn read_bodies(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        let n = self.b.len();
        for (delim, strip_tabs) in pending {
            let body_start = self.i;
            let (mut body_end, mut tok_end, mut next) = (n, n, n);
            let mut j = self.i;
            while j < n {
                let line_end = self.src[j..].find('\n').map_or(n, |k| j + k);
                let line = &self.src[j..line_end];
                let line = if strip_tabs { line.trim_start_matches('\t') } else { line };
                // Reading: a terminator line may carry trailing blanks (or a CR); agents'
                // commands often do, and missing it would swallow the rest of the command.
                if line.trim_end() == delim {
                    body_end = j;
                    tok_end = line_end;
                    next = (line_end + 1).min(n);
                    break;
                }
                j = line_end + 1;
            }
            let body = self.src[body_start..body_end.max(body_start)].to_string();
            self.i = next;
            self.toks.push(Tok { tk: Tk::Body(body), start: body_start, end: tok_end });
        }
    }

    fn word(&mut self, start: usize) {
        let (w, quoted) = self.read_word();
        if !quoted
            && !w.is_empty()
            && w.bytes().all(|c| c.is_ascii_digit())
            && matches!(self.peek(0), Some(b'<' | b'>'))
            && self.peek(1) != Some(b'(')
        {
            self.redirect(start);
            return;
        }
        if self.i == start {
            // never loop without progress, whatever the input
            self.i += 1;
            return;
        }
        self.push(Tk::Word(w), start);
    }

    /// One shell word, unquoted; `$(...)`, `${...}` and backticks are kept as written.
    fn read_word(&mut self) -> (String, bool) {
        let b = self.b;
        let n = b.len();
        let mut out: Vec<u8> = Vec::new();
        let mut quoted = false;
        while self.i < n {
            let c = b[self.i];
            match c {
                b' ' | b'\t' | b'\n' | b'\r' | b';' | b'&' | b'|' => break,
                b'<' | b'>' => {
                    if b.get(self.i + 1) == Some(&b'(') {
                        let e = skip_parens(b, self.i + 1).min(n);
                        out.extend_from_slice(&b[self.i..e]);
                        self.i = e;
                    } else {
                        break;
                    }
                }
                b'\\' => match b.get(self.i + 1) {
                    Some(b'\n') => self.i += 2,
                    Some(&d) => {
                        out.push(d);
                        self.i += 2;
                        quoted = true;
                    }
                    None => self.i += 1,
                },
                b'\'' => {
                    let close = find_sq_close(b, self.i).min(n);
                    out.extend_from_slice(&b[self.i + 1..close]);
                    self.i = (close + 1).min(n);
                    quoted = true;
                }
                b'"' => {
                    quoted = true;
                    self.read_dq(&mut out);
                }
                b'$' => match b.get(self.i + 1) {
                    Some(b'\'') => {
                        quoted = true;
                        self.read_ansi_c(&mut out);
                    }
                    Some(b'"') => self.i += 1,
                    Some(b'(') => {
                        let e = skip_parens(b, self.i + 1).min(n);
                        out.extend_from_slice(&b[self.i..e]);
                        self.i = e;
                    }
                    Some(b'{') => {
                        let e = skip_balanced(b, self.i + 1, b'{', b'}').min(n);
                        out.extend_from_slice(&b[self.i..e]);
                        self.i = e;
                    }
                    _ => {
                        out.push(c);
                        self.i += 1;
                    }
                },
                b'`' => {
                    let e = (find_bt_close(b, self.i) + 1).min(n);
                    out.extend_from_slice(&b[self.i..e]);
                    self.i = e;
                }
                b'(' => {
                    let e = skip_parens(b, self.i).min(n);
                    out.extend_from_slice(&b[self.i..e]);
                    self.i = e;
                }
                _ => {
                    out.push(c);
                    self.i += 1;
                }
            }
        }
        (String::from_utf8_lossy(&out).into_owned(), quoted)
    }

    fn read_dq(&mut self, out: &mut Vec<u8>) {
        let b = self.b;
        let n = b.len();
        self.i += 1;
        while self.i < n {
            let c = b[self.i];
            match c {
                b'"' => {
                    self.i += 1;
                    return;
                }
                b'\\' => match b.get(self.i + 1) {
                    Some(&d @ (b'$' | b'`' | b'"' | b'\\')) => {
                        out.push(d);
                        self.i += 2;
                    }
                    Some(b'\n') => self.i += 2,
                    _ => {
                        out.push(c);
                        self.i += 1;
                    }
                },
                b'$' if b.get(self.i + 1) == Some(&b'(') => {
                    let e = skip_parens(b, self.i + 1).min(n);
                    out.extend_from_slice(&b[self.i..e]);
                    self.i = e;
                }
                b'$' if b.get(self.i + 1) == Some(&b'{') => {
                    let e = skip_balanced(b, self.i + 1, b'{', b'}').min(n);
                    out.extend_from_slice(&b[self.i..e]);
                    self.i = e;
                }
                b'`' => {
                    let e = (find_bt_close(b, self.i) + 1).min(n);
                    out.extend_from_slice(&b[self.i..e]);
                    self.i = e;
                }
                _ => {
                    out.push(c);
                    self.i += 1;
                }
            }
        }
    }

    /// `$'...'`
    fn read_ansi_c(&mut self, out: &mut Vec<u8>) {
        let b = self.b;
        let n = b.len();
        self.i += 2;
        while self.i < n {
            let c = b[self.i];
            match c {
                b'\'' => {
                    self.i += 1;
                    return;
                }
                b'\\' => {
                    let d = b.get(self.i + 1).copied();
                    self.i += 2;
                    match d {
                        Some(b'n') => out.push(b'\n'),
                        Some(b't') => out.push(b'\t'),
                        Some(b'r') => out.push(b'\r'),
                        Some(d) => out.push(d),
                        None => {}
                    }
                }
                _ => {
                    out.push(c);
                    self.i += 1;
                }
            }
        }
    }

    /// At `<`, `>` or `&>` (any descriptor number already read).
    fn redirect(&mut self, start: usize) {
        let mut op;
        let mut maybe_dup = false;
        let mut strip_tabs = false;
        match self.b[self.i] {
            b'&' => {
                self.i += 2;
                if self.peek(0) == Some(b'>') {
                    self.i += 1;
                }
                op = RedirOp::Write;
            }
            b'>' => {
                self.i += 1;
                op = RedirOp::Write;
                match self.peek(0) {
                    Some(b'>' | b'|') => self.i += 1,
                    Some(b'&') => {
                        self.i += 1;
                        maybe_dup = true;
                    }
                    _ => {}
                }
            }
            _ => {
                self.i += 1;
                op = RedirOp::Input;
                match self.peek(0) {
                    Some(b'<') => {
                        self.i += 1;
                        if self.peek(0) == Some(b'<') {
                            self.i += 1;
                            op = RedirOp::HereString;
                        } else {
                            op = RedirOp::HereDoc;
                            if self.peek(0) == Some(b'-') {
                                self.i += 1;
                                strip_tabs = true;
                            }
                        }
                    }
                    Some(b'&') => {
                        self.i += 1;
                        op = RedirOp::Dup;
                    }
                    Some(b'>') => self.i += 1,
                    _ => {}
                }
            }
        }
        while matches!(self.peek(0), Some(b' ' | b'\t')) {
            self.i += 1;
        }
        let target = match self.peek(0) {
            None | Some(b'\n' | b';' | b'&' | b'|' | b'<' | b'>') => String::new(),
            _ => self.read_word().0,
        };
        if maybe_dup && (target == "-" || target.trim_end_matches('-').bytes().all(|c| c.is_ascii_digit())) {
            op = RedirOp::Dup;
        }
        if op == RedirOp::HereDoc {
            self.pending.push((target.clone(), strip_tabs));
        }
        self.push(Tk::Redir(Redir { op, target, body: None }), start);
    }
}

pub(super) fn lex(src: &str) -> Vec<Tok> {
    let mut lx = Lexer { src, b: src.as_bytes(), i: 0, toks: Vec::new(), pending: Vec::new() };
    lx.run();
    let bodies: Vec<String> = lx
        .toks
        .iter()
        .filter_map(|t| match &t.tk {
            Tk::Body(s) => Some(s.clone()),
            _ => None,
        })
        .collect();
    // Bodies follow in the order their here-documents were opened.
    let mut bodies = bodies.into_iter();
    for t in &mut lx.toks {
        if let Tk::Redir(r) = &mut t.tk {
            if r.op == RedirOp::HereDoc {
                r.body = bodies.next();
            }
        }
    }
    lx.toks
}

pub(super) fn heredoc_body(redirs: &[Redir]) -> Option<&str> {
    redirs.iter().find(|r| r.op == RedirOp::HereDoc).and_then(|r| r.body.as_deref())
}
