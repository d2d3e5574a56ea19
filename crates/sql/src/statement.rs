//! The one way a user's SQL is planned, and the SQL-text helpers every module uses:
//! the read-only rule, the natural spelling of column names that are also keywords,
//! and identifier quoting.

use crate::sql_text::quote_ident;
use datafusion::dataframe::DataFrame;
use datafusion::execution::context::SQLOptions;
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

use crate::Result;

/// Column names of the schema that the SQL parser takes for a keyword when written
/// bare. `cluster` is the key of every interval: in `SELECT task, cluster FROM ...` the
/// parser reads `, cluster` as a trailing comma before a `CLUSTER BY` clause. The test
/// `every_column_can_be_named_bare` tries every column of every table and view.
const KEYWORD_COLUMNS: &[Keyword] = &[Keyword::CLUSTER];

/// Statements users send may read, never write: no DDL (CREATE, DROP), no DML (INSERT,
/// COPY), no session statements (SET). Built here only.
pub fn read_only() -> SQLOptions {
    SQLOptions::new().with_allow_ddl(false).with_allow_dml(false).with_allow_statements(false)
}

/// Plans a user's statement read-only, after [`prepare`].
pub async fn plan_read_only(ctx: &SessionContext, sql: &str) -> Result<DataFrame> {
    Ok(ctx.sql_with_options(&prepare(sql)?, read_only()).await?)
}

/// A user's statement (or script) as DataFusion should read it: refused beyond
/// [`LIMITS`], then in its [`natural_spelling`]. The text is tokenized once for both.
/// A statement the tokenizer cannot read goes on unchanged, for the parser to report.
pub fn prepare(sql: &str) -> Result<String> {
    if sql.len() > LIMITS.bytes {
        return refuse(format!("{} bytes of SQL, more than the {} allowed", sql.len(), LIMITS.bytes));
    }
    match Tokenizer::new(&GenericDialect {}, sql).tokenize_with_location() {
        Ok(tokens) => {
            check_size(&tokens)?;
            Ok(rewrite(sql, &tokens))
        }
        Err(_) => Ok(sql.to_string()),
    }
}

fn refuse<T>(what: String) -> Result<T> {
    Err(crate::Error::Usage(format!("statement refused: {what}")))
}

/// How big a statement may be. The parser, planner and optimiser recurse over a
/// statement's tree, so a tree deep enough overflows the stack and aborts the process
/// (a 3,000-way `UNION ALL`, or `1+1+...` with 20,000 terms, did in a debug build on an
/// 8 MiB stack). Statements are refused, with what to change, well before that. The
/// shipped views use at most 62 operators, 1 set operation and parentheses 5 deep;
/// sessions run on 32 MiB stacks ([`runtime`]), where a statement at these limits
/// plans in a debug build (tested through the CLI and `serve`).
pub struct Limits {
    pub bytes: usize,
    /// UNION, EXCEPT and INTERSECT in one statement.
    pub set_operations: usize,
    /// Binary operators (arithmetic, comparison, AND, OR, ||) in one statement.
    pub operators: usize,
    /// Parentheses open at once.
    pub nesting: usize,
}

pub const LIMITS: Limits = Limits { bytes: 4 << 20, set_operations: 256, operators: 4096, nesting: 64 };

/// The async runtime sessions run on. Its threads get 32 MiB stacks (tokio's default
/// is 2 MiB): a statement within [`LIMITS`] can need more than 2 MiB to plan in a debug
/// build, and the stack is address space, committed only as it is used.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().thread_stack_size(32 << 20).build()
}

/// Refuses a statement beyond [`LIMITS`], naming the limit.
fn check_size(tokens: &[TokenWithSpan]) -> Result<()> {
    let (mut set_operations, mut operators, mut depth, mut deepest) = (0, 0, 0usize, 0usize);
    for token in tokens.iter().map(|t| &t.token) {
        match token {
            Token::Word(w) if w.quote_style.is_none() => match w.keyword {
                Keyword::UNION | Keyword::EXCEPT | Keyword::INTERSECT => set_operations += 1,
                Keyword::AND | Keyword::OR => operators += 1,
                _ => {}
            },
            Token::Plus
            | Token::Minus
            | Token::Mul
            | Token::Div
            | Token::Mod
            | Token::StringConcat
            | Token::Eq
            | Token::Neq
            | Token::Lt
            | Token::Gt
            | Token::LtEq
            | Token::GtEq => operators += 1,
            Token::LParen => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            Token::RParen => depth = depth.saturating_sub(1),
            Token::SemiColon => {
                // Limits are per statement.
                (set_operations, operators) = (0, 0);
            }
            _ => {}
        }
        if set_operations > LIMITS.set_operations {
            return refuse(format!(
                "more than {} UNION/EXCEPT/INTERSECT in one statement (write the parts to a table with \
                 `export`, or use fewer, larger SELECTs)",
                LIMITS.set_operations
            ));
        }
        if operators > LIMITS.operators {
            return refuse(format!(
                "more than {} operators in one statement (an expression this long is deeper than the planner can \
                 walk; use IN (...) lists or aggregate functions instead)",
                LIMITS.operators
            ));
        }
        if deepest > LIMITS.nesting {
            return refuse(format!("parentheses nested more than {} deep", LIMITS.nesting));
        }
    }
    Ok(())
}

/// The statement as DataFusion should read it: every bare column name of
/// [`KEYWORD_COLUMNS`] quoted, unless it starts its clause (`CLUSTER BY`), and every
/// `?` parameter (the spelling of JDBC, ODBC and ADBC clients) numbered `$1`, `$2`, ...
/// in order. Strings, comments and quoted names are left as they are (the tokenizer
/// tells them apart); a statement the tokenizer cannot read is returned unchanged, for
/// the parser to report.
pub fn natural_spelling(sql: &str) -> String {
    match Tokenizer::new(&GenericDialect {}, sql).tokenize_with_location() {
        Ok(tokens) => rewrite(sql, &tokens),
        Err(_) => sql.to_string(),
    }
}

/// [`natural_spelling`] over the statement's tokens.
fn rewrite(sql: &str, tokens: &[TokenWithSpan]) -> String {
    let significant: Vec<usize> =
        (0..tokens.len()).filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_))).collect();
    let mut spans = Vec::new();
    let mut parameters = 0;
    for (k, &i) in significant.iter().enumerate() {
        if matches!(&tokens[i].token, Token::Placeholder(p) if p == "?") {
            parameters += 1;
            spans.push((tokens[i].span.start, tokens[i].span.end, Some(format!("${parameters}"))));
            continue;
        }
        let Token::Word(word) = &tokens[i].token else { continue };
        if word.quote_style.is_some() || !KEYWORD_COLUMNS.contains(&word.keyword) {
            continue;
        }
        let next = significant.get(k + 1).map(|&j| &tokens[j].token);
        if matches!(next, Some(Token::Word(w)) if w.keyword == Keyword::BY) {
            continue;
        }
        spans.push((tokens[i].span.start, tokens[i].span.end, None));
    }
    if spans.is_empty() {
        return sql.to_string();
    }
    let offsets = LineOffsets::new(sql);
    let mut out = String::with_capacity(sql.len() + 2 * spans.len());
    let mut at = 0;
    for (start, end, replacement) in spans {
        let (start, end) = (offsets.byte(sql, start.line, start.column), offsets.byte(sql, end.line, end.column));
        out.push_str(&sql[at..start]);
        match replacement {
            Some(text) => out.push_str(&text),
            // Bare names are folded to lower case; the quoted name must be the folded one.
            None => out.push_str(&quote_ident(&sql[start..end].to_lowercase())),
        }
        at = end;
    }
    out.push_str(&sql[at..]);
    out
}

/// Byte offsets of (line, column) locations, both 1-based, columns in characters.
struct LineOffsets(Vec<usize>);

impl LineOffsets {
    fn new(text: &str) -> Self {
        LineOffsets(std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect())
    }

    fn byte(&self, text: &str, line: u64, column: u64) -> usize {
        let start = self.0[(line as usize).saturating_sub(1).min(self.0.len() - 1)];
        text[start..].char_indices().nth(column as usize - 1).map_or(text.len(), |(i, _)| start + i)
    }
}

#[cfg(test)]
mod tests {
    use super::natural_spelling;

    #[test]
    fn bare_cluster_is_quoted_where_it_names_a_column() {
        assert_eq!(natural_spelling("select task, cluster from episodes"), "select task, \"cluster\" from episodes");
        assert_eq!(
            natural_spelling("SELECT e.Cluster, count(*)\nFROM episodes e\nGROUP BY cluster ORDER BY cluster"),
            "SELECT e.\"cluster\", count(*)\nFROM episodes e\nGROUP BY \"cluster\" ORDER BY \"cluster\""
        );
        assert_eq!(
            natural_spelling("select * from t where cluster = 'cluster'"),
            "select * from t where \"cluster\" = 'cluster'"
        );
    }

    #[test]
    fn quoted_names_strings_comments_and_clauses_stay() {
        for sql in [
            "select \"cluster\" from episodes",
            "select 'a, cluster' from episodes -- cluster\n",
            "select /* cluster */ 1",
            "select a from t cluster by a",
            "select 'unterminated",
        ] {
            assert_eq!(natural_spelling(sql), sql);
        }
        assert_eq!(natural_spelling("select 'é', cluster from t"), "select 'é', \"cluster\" from t");
    }

    #[test]
    fn question_marks_become_numbered_parameters() {
        assert_eq!(
            natural_spelling("select * from t where a = ? and b > ? and c = '?'"),
            "select * from t where a = $1 and b > $2 and c = '?'"
        );
        assert_eq!(natural_spelling("select $1"), "select $1");
    }
}
