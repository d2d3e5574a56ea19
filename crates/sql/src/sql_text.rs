//! SQL text that the crate writes for itself: quoted names, the `--where` filter and
//! the check of grouping keys. One place for each rule, so a name with a quote in it,
//! a filter, or a key outside the allowed set is handled the same way everywhere.

use crate::{Error, Result};

/// `"name"`, with inner quotes doubled: safe for any column or table name, and needed
/// for `cluster`, a keyword to the SQL parser.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `'text'`, with inner quotes doubled: a value as an SQL string literal.
pub fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Names quoted and joined with `, `, as a select list or GROUP BY wants them.
pub fn quote_list<S: AsRef<str>>(names: &[S]) -> String {
    names.iter().map(|n| quote_ident(n.as_ref())).collect::<Vec<_>>().join(", ")
}

/// The `WHERE` clause that keeps the rows of `table` (a row source with `episode_id`)
/// whose episode matches `filter`, a condition on `episode_facts` columns (what
/// `--where` takes); empty without a filter. On `episode_facts` itself the condition is
/// applied as written; on anything else through the episode's id.
pub fn episode_filter(table: &str, filter: Option<&str>) -> String {
    match filter {
        Some(f) if table == "episode_facts" => format!(" WHERE {f}"),
        _ => episode_filter_on("episode_id", filter),
    }
}

/// [`episode_filter`] through the id column `id` (qualified where a join makes
/// `episode_id` ambiguous).
pub fn episode_filter_on(id: &str, filter: Option<&str>) -> String {
    match filter {
        None => String::new(),
        Some(f) => format!(" WHERE {id} IN (SELECT episode_id FROM episode_facts WHERE {f})"),
    }
}

/// Checks a `--where` condition on its own, before it is embedded in SQL the user never
/// sees: a condition that does not parse is refused with the parser's words, a position
/// in the user's own text and that text with a caret under it (embedded, the same
/// mistake was reported at "Line: 11, Column: 12" of the generated statement). A
/// statement smuggled in (`1=1) UNION ...`) does not parse as one condition either.
pub fn check_filter(filter: &str) -> Result<()> {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;
    use datafusion::sql::sqlparser::tokenizer::Token;
    let refuse = |message: String| Err(Error::Usage(message));
    if filter.trim().is_empty() {
        return refuse("the condition is empty".into());
    }
    crate::statement::prepare(filter)?;
    let dialect = GenericDialect {};
    let parsed = Parser::new(&dialect).try_with_sql(filter).and_then(|mut p| {
        p.parse_expr()?;
        match p.peek_token().token {
            Token::EOF => Ok(()),
            _ => p.expected("the end of the condition", p.peek_token()),
        }
    });
    let Err(e) = parsed else { return Ok(()) };
    let message = e.to_string();
    let message = message.strip_prefix("sql parser error: ").unwrap_or(&message);
    // "... at Line: 1, Column: 9": the position is in the condition as written.
    let position = message
        .rsplit_once("at Line: ")
        .and_then(|(_, at)| at.split_once(", Column: "))
        .and_then(|(line, column)| Some((line.trim().parse::<usize>().ok()?, column.trim().parse::<usize>().ok()?)));
    let mut out = format!("the condition does not parse: {message}");
    if let Some((line, column)) = position {
        if let Some(text) = filter.lines().nth(line.saturating_sub(1)) {
            let text = crate::printable(text);
            out.push_str(&format!("\n  {text}\n  {}^", " ".repeat(column.saturating_sub(1))));
        }
    }
    refuse(out)
}

/// Refuses a grouping key outside `allowed`, naming what cannot be grouped (`metrics`,
/// `metric intervals`), the allowed keys, and `hint` when given.
pub fn check_keys(
    keys: &[&str],
    allowed: &[&str],
    what: &str,
    hint: impl Fn(&str) -> Option<&'static str>,
) -> Result<()> {
    match keys.iter().find(|k| !allowed.contains(k)) {
        None => Ok(()),
        Some(key) => {
            let hint = hint(key).map(|h| format!(" ({h})")).unwrap_or_default();
            Err(Error::Usage(format!("cannot group {what} by `{key}`{hint}; use any of {}", allowed.join(", "))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_quoted_with_inner_quotes_doubled() {
        assert_eq!(quote_ident("cluster"), "\"cluster\"");
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(quote_list(&["model", "cluster"]), "\"model\", \"cluster\"");
        assert_eq!(quote_list::<&str>(&[]), "");
    }

    #[test]
    fn a_filter_applies_directly_to_episode_facts_and_by_id_elsewhere() {
        assert_eq!(episode_filter("episode_facts", None), "");
        assert_eq!(episode_filter("episode_facts", Some("model = 'm'")), " WHERE model = 'm'");
        assert_eq!(
            episode_filter("rows", Some("model = 'm'")),
            " WHERE episode_id IN (SELECT episode_id FROM episode_facts WHERE model = 'm')"
        );
    }

    #[test]
    fn a_key_outside_the_allowed_set_is_named() {
        assert!(check_keys(&["model"], &["model", "task"], "metrics", |_| None).is_ok());
        let e = check_keys(&["model", "colour"], &["model", "task"], "metrics", |_| Some("a hint")).unwrap_err();
        assert_eq!(e.to_string(), "cannot group metrics by `colour` (a hint); use any of model, task");
    }
}
