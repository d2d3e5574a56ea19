//! Full-text search over what happened in episodes: the messages of the run, the
//! commands its tools ran and their output, and the diffs of its edits (package
//! revision 1.2, `docs/format.md` §9).
//!
//! The store keeps episodes in immutable segments. Beside the Parquet files of a
//! segment, [`write_index`] builds a [tantivy] index of that segment's content in a
//! directory of its own; [`search`] searches the indexes of any number of segments as
//! one collection; [`check_index`] is what `verify` asks of one.
//!
//! # What is indexed
//!
//! One document for each of:
//!
//! | document | kind | body | other fields |
//! | --- | --- | --- | --- |
//! | a message with text or reasoning | its role: `system`, `user`, `assistant`, `tool` | the text, then the reasoning | `role`, `tool` (when set), `author` (when set) |
//! | a tools record with a command | `command` | the command | `tool` (the tool's name) |
//! | a tools record with output text | `output` | the output text (capped at 16 KiB by the package crate) | `tool` |
//! | an action with a diff | `diff` | the unified diff | `path`, once for each of its paths |
//!
//! Every document stores `episode_id` and `seq` (unique within an episode's records of
//! one trace), its `kind` and its `tool`, so that a [`Hit`] joins back to the SQL tables
//! (`messages`, `tools`, `actions`) on `(episode_id, seq)`.
//!
//! `body` is tokenized by tantivy's default tokenizer: split on anything that is not a
//! letter or digit, lowercased, tokens longer than 40 bytes dropped; there is no
//! stemming (code and logs are searched for the words as written). Positions are kept,
//! for phrases. `kind`, `role`, `tool`, `author`, `path` and `episode_id` are raw: one
//! token, the value exactly as written (`tool:Bash` does not match the tool `bash`).
//! `seq` is an indexed number.
//!
//! # Query language
//!
//! tantivy's query parser, default field `body`, with words joined by AND unless told:
//!
//! * `rate limit`: both words, anywhere in the body (the same as `rate AND limit`);
//! * `"rate limit"`: the phrase, words adjacent and in order;
//! * `timeout OR deadline`, `limit NOT rate`, `+limit -rate`, `(a OR b) AND c`;
//! * field filters on the raw fields: `role:assistant`, `kind:output`, `kind:diff`,
//!   `tool:Bash`, `author:human`, `path:src/app.py`, `episode_id:<id>`, and `seq:3`;
//!   `body:word` names the default field explicitly. A filter alone is a query
//!   (`kind:diff` finds every diff); `*` finds every document;
//! * also from tantivy: `'single-quoted phrases'`, a phrase with slop (`"rate limit"~2`),
//!   a phrase whose last word is a prefix (`"rate li"*`, two words at least), sets
//!   (`kind: IN [diff output]`), ranges (`seq:[1 TO 5]`) and boosts (`tool:Bash^2`).
//!
//! There is no prefix search on one word (`lim*` searches `lim`), no fuzzy search and
//! no regular expression. A query of exclusions only (`-rate`, `NOT rate`) is refused
//! by tantivy: write `* -rate`. `field:*` (the field exists) is refused too (it needs
//! fast fields, which this schema does not keep).
//!
//! A raw value is one unbroken word: letters, digits, `/`, `.`, `_`, `-` (not first)
//! and the like parse as written, so `path:src/app.py` and `tool:read_file` need no
//! quotes. Quote the value (`path:"docs/my notes.md"`) when it holds a space, a colon,
//! a quote, a bracket, parentheses, `^`, `*`, `+`, `!` or a backslash, or when it
//! starts with `-` or `/` (an unquoted `path:/etc/hosts` is read as a regular
//! expression, which this crate does not allow). The same holds in the body: a
//! word with a colon (`http://host`) is read as a field filter and refused as an
//! unknown field unless quoted (`"http://host"`).
//!
//! A field that does not exist, a syntax error, or any query tantivy refuses, is an
//! [`Error::Query`] carrying tantivy's message.
//!
//! # Scores across segments
//!
//! BM25 depends on collection statistics: the number of documents, the number of
//! tokens of the field, and each term's document frequency. Searched one by one, each
//! segment's index would score with its own statistics and the scores of different
//! segments would not compare. [`search`] sums those statistics over every index it
//! searches and scores every index with the sums
//! (`tantivy::query::Bm25StatisticsProvider`), so a document scores exactly as it
//! would in one index holding all of the segments' documents. Each index returns its
//! top `limit` hits; they are merged by score, ties broken by episode id, then seq,
//! then kind.
//!
//! # Snippets
//!
//! A hit's snippet is the best fragment of its body (at most about
//! [`SNIPPET_CHARS`] characters) with each matched term wrapped as `«term»` (plain
//! text, not HTML), `…` marking text cut off at either end, and control characters
//! (newlines, tabs) shown as spaces. A hit matched by filters alone (no term of the
//! body) shows the start of its body.
//!
//! # Limits
//!
//! * A query longer than [`MAX_QUERY_BYTES`] bytes, or nesting deeper than
//!   [`MAX_QUERY_DEPTH`], is refused before it is parsed (tantivy's parser recurses
//!   and a deep enough query overflows the stack). Nesting counts each `(` and each
//!   `NOT` of a chain (`NOT NOT a` is 2 deep, `NOT (a)` too); it is counted on the
//!   raw text, so parentheses in quotes or escaped count as well.
//! * [`write_index`] indexes with up to two threads sharing a budget of [`WRITER_MEMORY_BYTES`].
//! * Indexes are opened read-only: searching writes nothing (no lock files) in a
//!   segment's directory.
//! * A panic inside tantivy while reading an index (possible on damaged data) is caught
//!   and reported as an [`Error::Index`] (by [`check_index`], as its problem).

mod check;
mod readonly;
mod schema;
mod search;
mod write;

#[cfg(test)]
mod tests;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

pub use check::{check_index, index_files};
pub use search::{check_query, search, Hit, SearchOptions};
pub use write::write_index;

/// The longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 4096;
/// The deepest nesting of parentheses accepted in a query.
pub const MAX_QUERY_DEPTH: usize = 16;
/// About how many characters a snippet shows.
pub const SNIPPET_CHARS: usize = 160;
/// The memory budget of the index writer.
pub const WRITER_MEMORY_BYTES: usize = 50_000_000;
/// The number of hits [`SearchOptions::default`] asks for.
pub const DEFAULT_LIMIT: usize = 20;

/// What went wrong: the query, or an index (named by its directory).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The query is refused: too long, nested too deep, or not parsed by tantivy.
    #[error("search query refused: {message}")]
    Query { message: String },
    /// An index cannot be written, opened or read.
    #[error("search index {}: {message}", path.display())]
    Index { path: PathBuf, message: String },
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn query(message: impl Into<String>) -> Error {
        Error::Query { message: message.into() }
    }

    pub(crate) fn index(path: &std::path::Path, message: impl fmt::Display) -> Error {
        Error::Index { path: path.to_path_buf(), message: message.to_string() }
    }
}

/// What a hit is: a message (by role), a tool's output, a command, an edit's diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    System,
    User,
    Assistant,
    Tool,
    Output,
    Command,
    Diff,
}

impl Kind {
    /// Every kind, in the order of the enum.
    pub const ALL: [Kind; 7] =
        [Kind::System, Kind::User, Kind::Assistant, Kind::Tool, Kind::Output, Kind::Command, Kind::Diff];

    /// The name stored in the `kind` field (and written in `kind:` filters).
    pub fn name(self) -> &'static str {
        match self {
            Kind::System => "system",
            Kind::User => "user",
            Kind::Assistant => "assistant",
            Kind::Tool => "tool",
            Kind::Output => "output",
            Kind::Command => "command",
            Kind::Diff => "diff",
        }
    }

    /// Whether the hit is a message (its kind is its role).
    pub fn is_message(self) -> bool {
        matches!(self, Kind::System | Kind::User | Kind::Assistant | Kind::Tool)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Kind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Kind> {
        Kind::ALL.into_iter().find(|kind| kind.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Kind::ALL.iter().map(|kind| kind.name()).collect();
            Error::query(format!("unknown kind {s:?} (kinds: {})", names.join(", ")))
        })
    }
}
