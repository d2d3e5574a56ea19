//! The SEARCH/REPLACE blocks of a reply in aider's `diff` edit format, found as aider
//! finds them (aider/coders/editblock_coder.py): a `<<<<<<< SEARCH` line, the text to
//! find, `=======`, its replacement, `>>>>>>> REPLACE`; the file named on the line
//! before the block's opening fence, else the previous block's file.

/// One block: the file it names, the text searched for and its replacement (whole
/// lines, each ending in a newline; empty for an empty side).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Block {
    pub path: String,
    pub search: String,
    pub replace: String,
}

/// `<` (or `=`, `>`) 5 to 9 times, then `word` (none for the divider), as aider's
/// patterns allow (`HEAD`, `DIVIDER`, `UPDATED`).
fn marker(line: &str, c: char, word: &str) -> bool {
    let l = line.trim_end();
    let n = l.chars().take_while(|&x| x == c).count();
    if !(5..=9).contains(&n) {
        return false;
    }
    let rest = &l[n..];
    match word {
        "" => rest.is_empty(),
        "SEARCH" => rest == " SEARCH" || rest == " SEARCH>",
        w => rest.strip_prefix(' ') == Some(w),
    }
}

/// aider's `strip_filename`: a file name alone on a line, maybe in backticks, bold or a
/// heading, or after a fence's backticks (```` ```path/to/file ````).
fn file_name(line: &str) -> Option<String> {
    let l = line.trim();
    if l == "..." {
        return None;
    }
    if let Some(rest) = l.strip_prefix("```") {
        return (!rest.is_empty() && (rest.contains('.') || rest.contains('/'))).then(|| rest.to_string());
    }
    let name = l.trim_end_matches(':').trim_start_matches('#').trim().trim_matches('`').trim_matches('*');
    (!name.is_empty()).then(|| name.to_string())
}

/// The blocks of a reply, in order; a block the reply does not finish is left out.
pub(super) fn blocks(reply: &str) -> Vec<Block> {
    let lines: Vec<&str> = reply.split('\n').collect();
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    let mut i = 0;
    while i < lines.len() {
        if !marker(lines[i], '<', "SEARCH") {
            i += 1;
            continue;
        }
        // The file name: the nearest of up to three lines before, looking past fences.
        let mut named = None;
        for prev in lines[..i].iter().rev().take(3) {
            if let Some(n) = file_name(prev) {
                named = Some(n);
                break;
            }
            if !prev.trim().starts_with("```") {
                break;
            }
        }
        if named.is_some() {
            current = named;
        }
        let mut j = i + 1;
        let mut search = String::new();
        while j < lines.len() && !marker(lines[j], '=', "") {
            search.push_str(lines[j]);
            search.push('\n');
            j += 1;
        }
        let mut k = j + 1;
        let mut replace = String::new();
        while k < lines.len() && !marker(lines[k], '>', "REPLACE") {
            replace.push_str(lines[k]);
            replace.push('\n');
            k += 1;
        }
        if k >= lines.len() {
            break;
        }
        if let Some(path) = &current {
            out.push(Block { path: path.clone(), search, replace });
        }
        i = k + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_under_a_file_name_a_fence_and_none() {
        let reply = "Here:\n\ncalc.py\n```python\n<<<<<<< SEARCH\n    return a + b\n=======\n    return str(a)\n>>>>>>> REPLACE\n```\n\n```python\n<<<<<<< SEARCH\n=======\nx = 1\n>>>>>>> REPLACE\n```\n\n**new.py**\n```\n<<<<<<< SEARCH\n=======\ny\n>>>>>>> REPLACE\n```\n\ncut.py\n```\n<<<<<<< SEARCH\na\n=======\n";
        let b = blocks(reply);
        let block = |p: &str, s: &str, r: &str| Block { path: p.into(), search: s.into(), replace: r.into() };
        assert_eq!(
            b,
            [
                block("calc.py", "    return a + b\n", "    return str(a)\n"),
                // No name before its fence: the previous block's file.
                block("calc.py", "", "x = 1\n"),
                block("new.py", "", "y\n"),
            ]
        );
    }
}
