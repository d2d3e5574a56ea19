//! Searching the indexes of many segments as one collection.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

use tantivy::collector::TopDocs;
use tantivy::query::{
    Bm25StatisticsProvider, BooleanQuery, ConstScoreQuery, EnableScoring, Occur, Query, QueryParser, TermSetQuery,
};
use tantivy::schema::{Field, Schema, Value};
use tantivy::snippet::{collapse_overlapped_ranges, Snippet, SnippetGenerator};
use tantivy::tokenizer::TokenizerManager;
use tantivy::{DocAddress, Searcher, TantivyDocument, TantivyError, Term};

use crate::check::{guarded, open_index, open_reader};
use crate::schema::{schema, Fields};
use crate::{Error, Kind, Result, DEFAULT_LIMIT, MAX_QUERY_BYTES, MAX_QUERY_DEPTH, SNIPPET_CHARS};

/// How to search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchOptions {
    /// The most hits to return.
    pub limit: usize,
    /// Only documents of these episode ids (`None`: every episode).
    pub episodes: Option<HashSet<String>>,
}

impl Default for SearchOptions {
    fn default() -> SearchOptions {
        SearchOptions { limit: DEFAULT_LIMIT, episodes: None }
    }
}

/// One document found: which record of which episode, what it is, and why it matched.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub episode_id: String,
    /// The record's `seq`, within its trace (messages, tools or actions).
    pub seq: u64,
    pub kind: Kind,
    /// The tool's name (command and output hits; messages naming a tool).
    pub tool: Option<String>,
    /// The best fragment of the body, matched terms wrapped as `«term»`.
    pub snippet: String,
    /// BM25, with statistics summed over every index searched.
    pub score: f32,
}

/// Searches the indexes in `dirs` (one per segment) as one collection; best first.
///
/// Refuses a hostile or malformed query with [`Error::Query`] (before opening any
/// index); an index that is missing, not an index, or damaged is an [`Error::Index`]
/// naming its directory. No directories: no hits.
pub fn search(dirs: &[PathBuf], query: &str, options: &SearchOptions) -> Result<Vec<Hit>> {
    let (schema, fields) = schema();
    let parsed = parse(&schema, &fields, query)?;
    let query: Box<dyn Query> = match &options.episodes {
        None => parsed,
        Some(episodes) => {
            let terms = episodes.iter().map(|id| Term::from_field_text(fields.episode_id, id));
            // Scores nothing: a filter must not change the scores of what it keeps.
            let filter = ConstScoreQuery::new(Box::new(TermSetQuery::new(terms)), 0.0);
            Box::new(BooleanQuery::new(vec![(Occur::Must, parsed), (Occur::Must, Box::new(filter))]))
        }
    };
    if dirs.is_empty() || options.limit == 0 || options.episodes.as_ref().is_some_and(HashSet::is_empty) {
        return Ok(Vec::new());
    }
    let searchers = dirs.iter().map(|dir| open_searcher(dir)).collect::<Result<Vec<_>>>()?;
    let statistics = GlobalStatistics { searchers: &searchers };
    let total_docs: u64 = searchers.iter().map(Searcher::num_docs).sum();
    let limit = options.limit.min(usize::try_from(total_docs).unwrap_or(usize::MAX));
    if limit == 0 {
        return Ok(Vec::new());
    }
    let collector = TopDocs::with_limit(limit).order_by_score();
    let mut found = Vec::new();
    for (ord, (dir, searcher)) in dirs.iter().zip(&searchers).enumerate() {
        let top = guarded(dir, || {
            searcher
                .search_with_statistics_provider(&*query, &collector, &statistics)
                .map_err(|e| refused(&e).unwrap_or_else(|| Error::index(dir, format!("search failed: {e}"))))
        })?;
        for (score, address) in top {
            found.push(guarded(dir, || Found::load(dir, searcher, &fields, ord, score, address))?);
        }
    }
    found.sort_by(Found::best_first);
    found.truncate(limit);
    let mut generators: Vec<Option<SnippetGenerator>> = searchers.iter().map(|_| None).collect();
    let mut hits = Vec::with_capacity(found.len());
    for found in found {
        let dir = &dirs[found.ord];
        let generator = match &mut generators[found.ord] {
            Some(generator) => generator,
            slot => slot.insert(guarded(dir, || {
                let mut generator = SnippetGenerator::create(&searchers[found.ord], &*query, fields.body)
                    .map_err(|e| Error::index(dir, format!("snippets failed: {e}")))?;
                generator.set_max_num_chars(SNIPPET_CHARS);
                Ok(generator)
            })?),
        };
        let snippet = guarded(dir, || Ok(render(&generator.snippet(&found.body), &found.body)))?;
        hits.push(Hit {
            episode_id: found.episode_id,
            seq: found.seq,
            kind: found.kind,
            tool: found.tool,
            snippet,
            score: found.score,
        });
    }
    Ok(hits)
}

/// Whether `query` would be run: the checks [`search`] makes before it opens any index
/// (length, nesting, tantivy's parser), for a caller that wants to say what is wrong
/// with a query before it builds anything on it.
pub fn check_query(query: &str) -> Result<()> {
    let (schema, fields) = schema();
    parse(&schema, &fields, query).map(|_| ())
}

/// A searcher of the index in `dir`, opened read-only.
pub(crate) fn open_searcher(dir: &Path) -> Result<Searcher> {
    let index = open_index(dir)?;
    Ok(open_reader(dir, &index)?.searcher())
}

/// Checks the query against this crate's limits, then parses it with tantivy.
fn parse(schema: &Schema, fields: &Fields, query: &str) -> Result<Box<dyn Query>> {
    if query.len() > MAX_QUERY_BYTES {
        return Err(Error::query(format!(
            "the query is {} bytes long; the limit is {MAX_QUERY_BYTES} bytes",
            query.len()
        )));
    }
    let deepest = nesting(query);
    if deepest > MAX_QUERY_DEPTH {
        return Err(Error::query(format!(
            "the query nests parentheses and NOTs {deepest} deep; the limit is {MAX_QUERY_DEPTH}"
        )));
    }
    let mut parser = QueryParser::new(schema.clone(), vec![fields.body], TokenizerManager::default());
    parser.set_conjunction_by_default();
    let parsed = parser.parse_query(query).map_err(|e| Error::query(e.to_string()))?;
    // Some queries parse but cannot run on this schema (`kind:*` asks whether the field
    // exists, which needs a fast field): building their weight says so, without an index.
    if let Err(e) = parsed.weight(EnableScoring::disabled_from_schema(schema)) {
        if let Some(refused) = refused(&e) {
            return Err(refused);
        }
    }
    Ok(parsed)
}

/// How deep the query nests, as tantivy's parser recurses: into each `(`, and into
/// each `NOT` of a chain (`NOT NOT NOT a`). Counted on the raw text, quotes and escapes
/// not understood, so it can only count too deep, never too shallow.
fn nesting(query: &str) -> usize {
    // For each open parenthesis, the NOTs chained before it.
    let mut open: Vec<usize> = Vec::new();
    let mut nots = 0usize;
    let mut deepest = 0usize;
    let level = |open: &[usize], nots: usize| open.iter().map(|n| n + 1).sum::<usize>() + nots;
    for token in tokens(query) {
        match token {
            "(" => {
                open.push(nots);
                nots = 0;
                deepest = deepest.max(level(&open, nots));
            }
            ")" => {
                open.pop();
                nots = 0;
            }
            "NOT" => {
                nots += 1;
                deepest = deepest.max(level(&open, nots));
            }
            "AND" | "OR" => {}
            // A leaf: it ends the chain of NOTs before it.
            _ => nots = 0,
        }
    }
    deepest
}

/// The query split at white space, each parenthesis a token of its own.
fn tokens(query: &str) -> Vec<&str> {
    let mut tokens = Vec::new();
    for piece in query.split(char::is_whitespace) {
        let mut start = 0;
        for (at, c) in piece.char_indices() {
            if c == '(' || c == ')' {
                if start < at {
                    tokens.push(&piece[start..at]);
                }
                tokens.push(&piece[at..at + 1]);
                start = at + 1;
            }
        }
        if start < piece.len() {
            tokens.push(&piece[start..]);
        }
    }
    tokens
}

/// A tantivy error that is the query's fault, as a query error.
fn refused(e: &TantivyError) -> Option<Error> {
    match e {
        TantivyError::SchemaError(message) if message.contains("is not a fast field") => Some(Error::query(format!(
            "`field:*` (the field exists) is not supported ({message}); `*` alone matches every document"
        ))),
        TantivyError::SchemaError(_) | TantivyError::FieldNotFound(_) | TantivyError::InvalidArgument(_) => {
            Some(Error::query(e.to_string()))
        }
        _ => None,
    }
}

/// BM25 statistics summed over the indexes of every segment searched, so that scores
/// compare across segments.
pub(crate) struct GlobalStatistics<'a> {
    pub searchers: &'a [Searcher],
}

impl Bm25StatisticsProvider for GlobalStatistics<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        self.searchers.iter().map(|searcher| searcher.total_num_tokens(field)).sum()
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        self.searchers.iter().map(Bm25StatisticsProvider::total_num_docs).sum()
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        self.searchers.iter().map(|searcher| Bm25StatisticsProvider::doc_freq(searcher, term)).sum()
    }
}

/// A hit before its snippet: what its stored fields say, and which index holds it.
struct Found {
    ord: usize,
    score: f32,
    episode_id: String,
    seq: u64,
    kind: Kind,
    tool: Option<String>,
    body: String,
}

impl Found {
    fn load(
        dir: &Path,
        searcher: &Searcher,
        fields: &Fields,
        ord: usize,
        score: f32,
        address: DocAddress,
    ) -> Result<Found> {
        let document: TantivyDocument =
            searcher.doc(address).map_err(|e| Error::index(dir, format!("cannot read a document: {e}")))?;
        let text = |field: Field| document.get_first(field).and_then(|value| value.as_str()).map(str::to_string);
        let missing = |name: &str| Error::index(dir, format!("a document has no {name}"));
        let kind = text(fields.kind).ok_or_else(|| missing("kind"))?;
        Ok(Found {
            ord,
            score,
            episode_id: text(fields.episode_id).ok_or_else(|| missing("episode_id"))?,
            seq: document.get_first(fields.seq).and_then(|value| value.as_u64()).ok_or_else(|| missing("seq"))?,
            kind: kind.parse().map_err(|_| Error::index(dir, format!("a document has the unknown kind {kind:?}")))?,
            tool: text(fields.tool),
            body: text(fields.body).unwrap_or_default(),
        })
    }

    /// Higher score first; ties by episode id, then seq, then kind.
    fn best_first(a: &Found, b: &Found) -> Ordering {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.episode_id.cmp(&b.episode_id))
            .then_with(|| a.seq.cmp(&b.seq))
            .then_with(|| a.kind.cmp(&b.kind))
    }
}

/// The snippet as plain text: matched terms wrapped as `«term»`, `…` where the body
/// goes on, control characters as spaces. Without a matched term, the start of the body.
pub(crate) fn render(snippet: &Snippet, body: &str) -> String {
    let fragment = snippet.fragment();
    let ranges: Vec<_> = collapse_overlapped_ranges(snippet.highlighted())
        .into_iter()
        .filter(|range| {
            range.start < range.end
                && range.end <= fragment.len()
                && fragment.is_char_boundary(range.start)
                && fragment.is_char_boundary(range.end)
        })
        .collect();
    let whole = snippet.fragment_range();
    if fragment.is_empty() || ranges.is_empty() || body.get(whole.clone()) != Some(fragment) {
        return lead(body);
    }
    let mut out = String::with_capacity(fragment.len() + 8 * ranges.len() + 8);
    let (before, after) = (&body[..whole.start], &body[whole.end..]);
    out.push_str(&edge(before, true));
    let mut at = 0;
    for range in ranges {
        out.push_str(&fragment[at..range.start]);
        out.push('«');
        out.push_str(&fragment[range.clone()]);
        out.push('»');
        at = range.end;
    }
    out.push_str(&fragment[at..]);
    out.push_str(&edge(after, false));
    plain(out.trim())
}

/// What stands for the body's text before (or after) the fragment: nothing when there
/// is none, a little punctuation as it is (the `.` ending a sentence), else `…`.
fn edge(text: &str, before: bool) -> String {
    let trimmed = if before { text.trim_start() } else { text.trim_end() };
    if trimmed.is_empty() {
        String::new()
    } else if trimmed.chars().count() <= 4 && !trimmed.chars().any(|c| c.is_alphanumeric() || c.is_whitespace()) {
        trimmed.to_string()
    } else {
        "…".to_string()
    }
}

/// The first [`SNIPPET_CHARS`] characters of the body.
fn lead(body: &str) -> String {
    let body = body.trim();
    match body.char_indices().nth(SNIPPET_CHARS) {
        None => plain(body),
        Some((end, _)) => format!("{}…", plain(&body[..end])),
    }
}

fn plain(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}
