//! The one way a user's SQL is planned, and the SQL-text helpers every module uses:
//! the read-only rule, the natural spelling of column names that are also keywords,
//! and identifier quoting.

use std::collections::HashMap;
use std::ops::ControlFlow;

use crate::sql_text::quote_ident;
use datafusion::dataframe::DataFrame;
use datafusion::execution::context::SQLOptions;
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::{CopyToSource, DFParser, Statement as DFStatement};
use datafusion::sql::sqlparser::ast::{Expr, Ident, ObjectName, Query, Select, Visit, Visitor};
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

/// Plans a user's statement read-only: [`prepare`]d, parsed, its tree
/// [`check_tree`]ed, then planned. (`SessionContext::sql_with_options` in phases, so
/// that nothing deeper or wider than [`LIMITS`] reaches the planner.)
pub async fn plan_read_only(ctx: &SessionContext, sql: &str) -> Result<DataFrame> {
    let sql = prepare(sql)?;
    let state = ctx.state();
    let dialect = state.config().options().sql_parser.dialect;
    let statement = state.sql_to_statement(&sql, &dialect)?;
    check_tree(&statement)?;
    let plan = state.statement_to_plan(statement).await?;
    read_only().verify_plan(&plan)?;
    Ok(ctx.execute_logical_plan(plan).await?)
}

/// [`plan_read_only`] on a thread of its own, given up at `deadline`: planning is CPU
/// work that no timer interrupts, so a caller with a deadline (`serve`) waits for it
/// here instead. Within [`LIMITS`] planning is bounded, so the abandoned thread ends.
pub async fn plan_read_only_until(
    ctx: &SessionContext,
    sql: &str,
    deadline: tokio::time::Instant,
) -> Result<DataFrame> {
    let (ctx, sql) = (ctx.clone(), sql.to_string());
    let handle = tokio::runtime::Handle::current();
    let planning = tokio::task::spawn_blocking(move || handle.block_on(plan_read_only(&ctx, &sql)));
    match tokio::time::timeout_at(deadline, planning).await {
        Ok(Ok(planned)) => planned,
        Ok(Err(join)) => Err(crate::Error::Usage(format!("planning failed: {join}"))),
        Err(_) => Err(crate::Error::Deadline("query planning exceeded the time limit".into())),
    }
}

/// Splits a script into its statements, each within [`LIMITS`], as SQL text.
pub fn split(script: &str) -> Result<Vec<String>> {
    let statements = DFParser::parse_sql(&prepare(script)?)?;
    statements
        .into_iter()
        .map(|statement| {
            check_tree(&statement)?;
            Ok(statement.to_string())
        })
        .collect()
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
/// (`1|1|...` with 10,000 terms did), and some of their passes take time and memory
/// that grow faster than the statement (a chain of 5,000 CTEs took 54 s and 7 GB; a
/// CTE that reads the one before it twice doubles the plan at every step). So a
/// statement is bounded twice, with what to change in the refusal:
///
/// - before parsing, on its tokens ([`prepare`]): its bytes, its operators (every
///   token and keyword that joins or wraps an expression: the tree the parser builds
///   can be no deeper) and its set operations, so that the parsed tree is small enough
///   to walk and drop;
/// - after parsing, on its tree ([`check_tree`]): the depth of every expression and of
///   nested queries, the CTEs, the tables one FROM joins, and the tables the whole
///   statement reads once every CTE is expanded where it is used.
///
/// The shipped views use at most 62 operators, 1 set operation, expressions 12 deep and
/// 8 tables; sessions run on 32 MiB stacks ([`runtime`]); a statement at these limits
/// plans in a debug build within seconds (tests in `tests/integration/sql_limits.rs`).
pub struct Limits {
    pub bytes: usize,
    /// UNION, EXCEPT and INTERSECT in one statement.
    pub set_operations: usize,
    /// Operators (arithmetic, comparison, bitwise, casts, AND, OR, NOT, IS, LIKE,
    /// BETWEEN, ...) in one statement.
    pub operators: usize,
    /// Parentheses open at once.
    pub nesting: usize,
    /// Depth of an expression tree (`a + b + c` is 3 deep: `+` nests left).
    pub expression_depth: usize,
    /// Queries nested in queries (subqueries, derived tables, CTE bodies).
    pub query_depth: usize,
    /// CTEs declared in one statement.
    pub ctes: usize,
    /// Tables (and subqueries) one FROM clause joins.
    pub join_width: usize,
    /// Tables the statement reads with every CTE expanded where it is used.
    pub tables: usize,
}

pub const LIMITS: Limits = Limits {
    bytes: 4 << 20,
    set_operations: 256,
    operators: 8192,
    nesting: 64,
    expression_depth: 512,
    query_depth: 64,
    ctes: 128,
    join_width: 64,
    tables: 1024,
};

/// The async runtime sessions run on. Its threads get 32 MiB stacks (tokio's default
/// is 2 MiB): a statement within [`LIMITS`] can need more than 2 MiB to plan in a debug
/// build, and the stack is address space, committed only as it is used.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().thread_stack_size(STACK_BYTES).build()
}

/// The stack every thread that plans SQL gets: the runtime's, and the command line's
/// own thread, since `block_on` runs its future on the calling thread.
pub const STACK_BYTES: usize = 32 << 20;

/// Refuses a statement beyond [`LIMITS`], naming the limit.
fn check_size(tokens: &[TokenWithSpan]) -> Result<()> {
    let (mut set_operations, mut operators, mut depth, mut deepest) = (0, 0, 0usize, 0usize);
    for token in tokens.iter().map(|t| &t.token) {
        match token {
            Token::Word(w) if w.quote_style.is_none() => match w.keyword {
                Keyword::UNION | Keyword::EXCEPT | Keyword::INTERSECT => set_operations += 1,
                k if OPERATOR_KEYWORDS.contains(&k) => operators += 1,
                _ => {}
            },
            // Names, literals and list punctuation make lists, not depth; every other
            // symbol (`+`, `||`, `|`, `<<`, `::`, `[`, `->`, `@>`, ...) can join or wrap
            // an expression.
            Token::Word(_)
            | Token::Number(..)
            | Token::Char(_)
            | Token::SingleQuotedString(_)
            | Token::DoubleQuotedString(_)
            | Token::NationalStringLiteral(_)
            | Token::EscapedStringLiteral(_)
            | Token::HexStringLiteral(_)
            | Token::UnicodeStringLiteral(_)
            | Token::DollarQuotedString(_)
            | Token::SingleQuotedByteStringLiteral(_)
            | Token::DoubleQuotedByteStringLiteral(_)
            | Token::Placeholder(_)
            | Token::RBracket
            | Token::RBrace
            | Token::Comma
            | Token::Period
            | Token::Whitespace(_)
            | Token::EOF => {}
            Token::LParen => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            Token::RParen => depth = depth.saturating_sub(1),
            Token::SemiColon => {
                // Limits are per statement.
                (set_operations, operators) = (0, 0);
            }
            _ => operators += 1,
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
                 walk; use IN (...) lists, CASE or aggregate functions instead)",
                LIMITS.operators
            ));
        }
        if deepest > LIMITS.nesting {
            return refuse(format!("parentheses nested more than {} deep", LIMITS.nesting));
        }
    }
    Ok(())
}

/// Keywords that join or wrap expressions (the symbols are told apart by kind).
const OPERATOR_KEYWORDS: &[Keyword] = &[
    Keyword::AND,
    Keyword::OR,
    Keyword::NOT,
    Keyword::XOR,
    Keyword::IS,
    Keyword::IN,
    Keyword::LIKE,
    Keyword::ILIKE,
    Keyword::SIMILAR,
    Keyword::REGEXP,
    Keyword::RLIKE,
    Keyword::BETWEEN,
    Keyword::COLLATE,
    Keyword::AT,
    Keyword::DIV,
    Keyword::OVERLAPS,
    Keyword::ESCAPE,
    Keyword::CASE,
    Keyword::CAST,
    Keyword::TRY_CAST,
    Keyword::EXISTS,
    Keyword::INTERVAL,
];

/// Refuses a parsed statement beyond the tree limits of [`LIMITS`]. The walk stops at
/// the first limit passed, so it never goes deeper than the limits themselves.
pub fn check_tree(statement: &DFStatement) -> Result<()> {
    let mut shape = Shape::default();
    if let ControlFlow::Break(refusal) = visit_statement(statement, &mut shape) {
        return refuse(refusal);
    }
    let mut tables = ExpandedTables::default();
    match visit_statement(statement, &mut tables) {
        ControlFlow::Break(refusal) => refuse(refusal),
        ControlFlow::Continue(()) if tables.expanded() > LIMITS.tables => refuse(tables_refusal()),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// Walks a DataFusion statement: its SQL statement, or the query inside its own forms.
fn visit_statement<V: Visitor<Break = String>>(statement: &DFStatement, visitor: &mut V) -> ControlFlow<String> {
    match statement {
        DFStatement::Statement(inner) => inner.visit(visitor),
        DFStatement::Explain(explain) => visit_statement(&explain.statement, visitor),
        DFStatement::CopyTo(copy) => match &copy.source {
            CopyToSource::Query(query) => query.visit(visitor),
            CopyToSource::Relation(_) => ControlFlow::Continue(()),
        },
        DFStatement::CreateExternalTable(_) | DFStatement::Reset(_) => ControlFlow::Continue(()),
    }
}

/// Depths and counts of one statement, as the walk goes.
#[derive(Default)]
struct Shape {
    expression_depth: usize,
    query_depth: usize,
    ctes: usize,
}

impl Visitor for Shape {
    type Break = String;

    fn pre_visit_expr(&mut self, _: &Expr) -> ControlFlow<String> {
        self.expression_depth += 1;
        if self.expression_depth > LIMITS.expression_depth {
            return ControlFlow::Break(format!(
                "an expression nested more than {} deep (a long chain of operators nests one level per \
                 operator; use IN (...) lists, CASE or aggregate functions instead)",
                LIMITS.expression_depth
            ));
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, _: &Expr) -> ControlFlow<String> {
        self.expression_depth -= 1;
        ControlFlow::Continue(())
    }

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<String> {
        self.query_depth += 1;
        if self.query_depth > LIMITS.query_depth {
            return ControlFlow::Break(format!("queries nested more than {} deep", LIMITS.query_depth));
        }
        self.ctes += query.with.as_ref().map_or(0, |with| with.cte_tables.len());
        if self.ctes > LIMITS.ctes {
            return ControlFlow::Break(format!(
                "more than {} CTEs in one statement (write intermediate results to a table with `export`)",
                LIMITS.ctes
            ));
        }
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _: &Query) -> ControlFlow<String> {
        self.query_depth -= 1;
        ControlFlow::Continue(())
    }

    fn pre_visit_select(&mut self, select: &Select) -> ControlFlow<String> {
        let width: usize = select.from.iter().map(|from| 1 + from.joins.len()).sum();
        if width > LIMITS.join_width {
            return ControlFlow::Break(format!("more than {} tables joined in one FROM clause", LIMITS.join_width));
        }
        ControlFlow::Continue(())
    }
}

fn tables_refusal() -> String {
    format!(
        "the statement reads more than {} tables once its CTEs are expanded where they are used (a CTE \
         read twice is planned twice)",
        LIMITS.tables
    )
}

/// The tables a statement reads with every CTE expanded where it is used: a CTE counts
/// what its body reads each time its name is read. (The planner shares a CTE's plan
/// between its uses; the optimiser's rewrites copy it into each.) Run after [`Shape`],
/// so the tree it walks is within the depth limits.
#[derive(Default)]
struct ExpandedTables {
    /// What each CTE declared so far reads, by (folded) name.
    ctes: HashMap<String, usize>,
    /// Every table name the walk met, weighted; CTE bodies included.
    read: usize,
    /// What the walk counts in CTE bodies, which are read where they are used instead.
    declared: usize,
}

impl ExpandedTables {
    fn weight(&self, name: &ObjectName) -> usize {
        let last = name.0.last().and_then(|part| part.as_ident()).map(folded);
        last.and_then(|name| self.ctes.get(&name).copied()).unwrap_or(1)
    }

    /// What the walk counted outside CTE bodies.
    fn expanded(&self) -> usize {
        self.read.saturating_sub(self.declared)
    }
}

/// A name as SQL resolves it: unquoted names fold to lower case.
fn folded(ident: &Ident) -> String {
    match ident.quote_style {
        Some(_) => ident.value.clone(),
        None => ident.value.to_lowercase(),
    }
}

impl Visitor for ExpandedTables {
    type Break = String;

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<String> {
        for cte in query.with.iter().flat_map(|with| &with.cte_tables) {
            let mut body = ExpandedTables { ctes: self.ctes.clone(), read: 0, declared: 0 };
            cte.query.visit(&mut body)?;
            if body.expanded() > LIMITS.tables {
                return ControlFlow::Break(tables_refusal());
            }
            self.declared = self.declared.saturating_add(body.read);
            self.ctes.insert(folded(&cte.alias.name), body.expanded().max(1));
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_relation(&mut self, relation: &ObjectName) -> ControlFlow<String> {
        self.read = self.read.saturating_add(self.weight(relation));
        ControlFlow::Continue(())
    }
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
