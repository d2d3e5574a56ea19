//! What each table and view holds, in the words of docs/sql-schema.md (compiled in, so
//! the server says what the schema page says, and a new table documented there is
//! described here without a second copy).

use std::collections::BTreeMap;

const SCHEMA_PAGE: &str = include_str!("../../../docs/sql-schema.md");
/// Longest description given per table, in characters (the columns come apart).
const MAX_CHARS: usize = 600;

/// Table or view name -> its description: the first paragraph under a `### name`
/// heading, or the text of a numbered `N. **`name`**: ...` item of the views list.
pub fn descriptions() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let lines: Vec<&str> = SCHEMA_PAGE.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if let Some(name) = line.strip_prefix("### ").filter(|n| is_name(n)) {
            // The first paragraph after the heading (tables start with text, not a table).
            let text: Vec<&str> = lines[i + 1..]
                .iter()
                .skip_while(|l| l.trim().is_empty())
                .take_while(|l| !l.trim().is_empty() && !l.starts_with('|') && !l.starts_with('#'))
                .copied()
                .collect();
            out.insert(name.to_string(), cut(&text.join(" ")));
        } else if let Some((name, first)) = numbered_item(line) {
            let rest: Vec<&str> = lines[i + 1..]
                .iter()
                .take_while(|l| l.starts_with("   ") && !l.trim().is_empty())
                .map(|l| l.trim())
                .collect();
            let text = std::iter::once(first).chain(rest).collect::<Vec<_>>().join(" ");
            out.insert(name.to_string(), cut(&text));
        }
    }
    out
}

fn is_name(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// `12. **`name`**: text` -> (name, text).
fn numbered_item(line: &str) -> Option<(&str, &str)> {
    let (number, rest) = line.split_once(". **`")?;
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (name, text) = rest.split_once("`**")?;
    let text = text.trim_start_matches(':').trim();
    is_name(name).then_some((name, text))
}

fn cut(text: &str) -> String {
    let text = text.replace("**", "");
    if text.chars().count() <= MAX_CHARS {
        return text;
    }
    let mut out: String = text.chars().take(MAX_CHARS).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn tables_and_views_are_described_from_the_schema_page() {
        let d = super::descriptions();
        assert!(d["messages"].contains("the conversation"), "{}", d["messages"]);
        assert!(d["annotations"].contains("judgements"), "{}", d["annotations"]);
        assert!(d["episode_facts"].starts_with("one row per episode"), "{}", d["episode_facts"]);
        assert!(d.values().all(|t| t.chars().count() <= super::MAX_CHARS + 1));
    }
}
