//! SQL text that the crate writes for itself: quoted names, the `--where` filter and
//! the check of grouping keys. One place for each rule, so a name with a quote in it,
//! a filter, or a key outside the allowed set is handled the same way everywhere.

use crate::{Error, Result};

/// `"name"`, with inner quotes doubled: safe for any column or table name, and needed
/// for `cluster`, a keyword to the SQL parser.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
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
        None => String::new(),
        Some(f) if table == "episode_facts" => format!(" WHERE {f}"),
        Some(f) => format!(" WHERE episode_id IN (SELECT episode_id FROM episode_facts WHERE {f})"),
    }
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
