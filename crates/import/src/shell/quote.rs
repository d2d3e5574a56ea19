//! Byte scanners the lexer steps over quoted and bracketed text with: each finds where a
//! quote, a command substitution or a `{ ...; }` group ends, so the joiners inside it are not
//! taken for the command's.

/// Index of the closing `'` of the quote opening at `i` (or the end).
pub(super) fn find_sq_close(b: &[u8], i: usize) -> usize {
    let mut j = i + 1;
    while j < b.len() && b[j] != b'\'' {
        j += 1;
    }
    j
}

pub(super) fn find_bt_close(b: &[u8], i: usize) -> usize {
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'`' => return j,
            _ => j += 1,
        }
    }
    b.len()
}

fn find_dq_close(b: &[u8], i: usize) -> usize {
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'"' => return j,
            b'$' if b.get(j + 1) == Some(&b'(') => j = skip_balanced(b, j + 1, b'(', b')'),
            b'`' => j = find_bt_close(b, j) + 1,
            _ => j += 1,
        }
    }
    b.len()
}

/// `b[i]` is `open`; returns the index just after its matching `close` (or the end),
/// stepping over quotes so a `)` inside `$(echo ")")` does not close it.
pub(super) fn skip_balanced(b: &[u8], i: usize, open: u8, close: u8) -> usize {
    let mut depth = 0usize;
    let mut j = i;
    while j < b.len() {
        let c = b[j];
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
            if depth == 0 {
                return j + 1;
            }
        } else {
            match c {
                b'\'' => j = find_sq_close(b, j),
                b'"' => j = find_dq_close(b, j),
                b'`' => j = find_bt_close(b, j),
                b'\\' => j += 1,
                _ => {}
            }
        }
        j += 1;
    }
    b.len()
}

pub(super) fn skip_parens(b: &[u8], i: usize) -> usize {
    skip_balanced(b, i, b'(', b')')
}

fn is_delim(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | b';' | b'&' | b'|' | b'<' | b'>' | b')')
}

/// The `}` closing a `{ ...; }` group opening at `i`: `{` and `}` are reserved words, so only
/// ones standing as words count (`${x}` and `{a,b}` do not).
pub(super) fn find_brace_group_close(b: &[u8], i: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut j = i;
    let mut at_start = true;
    while j < b.len() {
        let c = b[j];
        match c {
            b'{' if at_start && b.get(j + 1).is_none_or(|d| d.is_ascii_whitespace()) => {
                depth += 1;
                at_start = false;
            }
            b'}' if at_start && b.get(j + 1).is_none_or(|d| is_delim(*d)) => {
                depth -= 1;
                if depth == 0 {
                    return Some(j);
                }
                at_start = false;
            }
            b' ' | b'\t' | b'\n' | b'\r' | b';' | b'&' | b'|' => at_start = true,
            b'\'' => {
                j = find_sq_close(b, j);
                at_start = false;
            }
            b'"' => {
                j = find_dq_close(b, j);
                at_start = false;
            }
            b'`' => {
                j = find_bt_close(b, j);
                at_start = false;
            }
            b'$' if b.get(j + 1) == Some(&b'(') => {
                j = skip_parens(b, j + 1) - 1;
                at_start = false;
            }
            b'\\' => {
                j += 1;
                at_start = false;
            }
            _ => at_start = false,
        }
        j += 1;
    }
    None
}
