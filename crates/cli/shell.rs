//! The SQL shell (`epistore sql` on a terminal) and its backslash commands, which
//! `epistore sql '\d episodes'` also takes: `\d` lists tables and views, `\d NAME` a
//! table's columns, `\x` switches the expanded (one field per line) display, `\?` and
//! `help` list the commands, `\q` quits. Tab completes table, view and column names.

use std::borrow::Cow;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use epistore_sql::Engine;
use rustyline::completion::{Completer, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::{Context, Helper};

use crate::commands::{describe, print_expanded, print_result, Session};
use crate::OutputFormat;

pub(crate) const HELP: &str = "\
Statements end with `;` (several may share a line). Commands:
  \\d            tables and views
  \\d NAME       the columns of a table or view
  \\x            expanded display on/off (one field per line: for wide rows)
  \\? or help    this list
  \\q            quit (also Ctrl-D)
Tab completes table, view and column names. docs/sql-schema.md describes every table.";

/// A backslash command (or a habit from another shell), parsed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Meta {
    Tables,
    Columns(String),
    Expanded,
    Help,
    Quit,
    Unknown(String),
}

impl Meta {
    /// The command `line` is, or None for SQL.
    pub(crate) fn parse(line: &str) -> Option<Meta> {
        let line = line.trim().trim_end_matches(';').trim();
        let (head, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let rest = rest.trim();
        Some(match head {
            "\\d" | "\\dt" | "\\dv" | ".tables" if rest.is_empty() => Meta::Tables,
            "\\d" | "\\d+" | ".schema" | "describe" | "DESCRIBE" if !rest.is_empty() => {
                Meta::Columns(rest.trim_matches('"').to_string())
            }
            "\\x" => Meta::Expanded,
            "\\?" | "\\h" | "help" | "HELP" | ".help" if rest.is_empty() => Meta::Help,
            "\\q" | "quit" | "exit" | ".quit" | ".exit" if rest.is_empty() => Meta::Quit,
            h if h.starts_with('\\') || (h.starts_with('.') && !h.contains(char::is_numeric)) => {
                Meta::Unknown(head.to_string())
            }
            _ => return None,
        })
    }
}

/// Runs a command that lists something; `expanded` is the display switch.
pub(crate) fn run_meta(session: &Session, meta: &Meta, format: OutputFormat, expanded: &mut bool) -> Result<()> {
    match meta {
        Meta::Tables => {
            let sql = "SELECT table_name AS name, lower(table_type) AS kind FROM information_schema.tables \
                       WHERE table_schema = 'public' ORDER BY table_type, table_name";
            print_result(&session.block_on(session.engine.query(sql))?, format)?;
        }
        Meta::Columns(name) => {
            let sql = format!(
                "SELECT column_name AS column, data_type AS type, is_nullable AS nullable \
                 FROM information_schema.columns WHERE table_schema = 'public' AND table_name = {} \
                 ORDER BY ordinal_position",
                epistore_sql::sql_text::quote_literal(name)
            );
            let batches = session.block_on(session.engine.query(&sql))?;
            if batches.iter().all(|b| b.num_rows() == 0) {
                anyhow::bail!("no table or view named `{name}`: \\d lists them");
            }
            print_result(&batches, format)?;
        }
        Meta::Expanded => {
            *expanded = !*expanded;
            eprintln!("expanded display is {}", if *expanded { "on" } else { "off" });
        }
        Meta::Help => eprintln!("{HELP}"),
        Meta::Quit => {}
        Meta::Unknown(head) => anyhow::bail!("unknown command {head}: \\? lists the commands"),
    }
    Ok(())
}

/// Table, view and column names, for completion.
fn names(session: &Session) -> Vec<String> {
    let sql = "SELECT DISTINCT table_name AS n FROM information_schema.tables WHERE table_schema = 'public' \
               UNION SELECT DISTINCT column_name AS n FROM information_schema.columns WHERE table_schema = 'public'";
    let mut names: Vec<String> = session
        .block_on(session.engine.query(sql))
        .map(|batches| {
            batches
                .iter()
                .flat_map(|b| {
                    use datafusion::arrow::array::AsArray;
                    b.column(0).as_string::<i32>().iter().flatten().map(str::to_string).collect::<Vec<_>>()
                })
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names.dedup();
    names
}

/// Completes the word before the cursor from the store's names.
struct Names(Vec<String>);

impl Completer for Names {
    type Candidate = Pair;

    fn complete(&self, line: &str, pos: usize, _: &Context<'_>) -> rustyline::Result<(usize, Vec<Pair>)> {
        let start = line[..pos].rfind(|c: char| !(c.is_alphanumeric() || c == '_')).map_or(0, |i| i + 1);
        let word = &line[start..pos];
        if word.is_empty() {
            return Ok((pos, Vec::new()));
        }
        let found = self
            .0
            .iter()
            .filter(|n| n.starts_with(word))
            .map(|n| Pair { display: n.clone(), replacement: n.clone() })
            .collect();
        Ok((start, found))
    }
}

impl Hinter for Names {
    type Hint = String;
}
impl Highlighter for Names {
    fn highlight_hint<'h>(&self, hint: &'h str) -> Cow<'h, str> {
        Cow::Borrowed(hint)
    }
}
impl Validator for Names {}
impl Helper for Names {}

/// The interactive shell: statements end with `;`; errors are printed, not fatal.
pub(crate) fn repl(session: &Session, format: OutputFormat) -> Result<ExitCode> {
    let mut editor = rustyline::Editor::<Names, rustyline::history::DefaultHistory>::new()?;
    editor.set_helper(Some(Names(names(session))));
    let history = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".epistore_history"));
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    eprintln!(
        "epistore SQL shell (snapshot {}). End statements with `;`. \\? lists the commands, \\q quits.",
        session.engine.snapshot_seq
    );
    let mut buffer = String::new();
    let mut expanded = false;
    loop {
        let prompt = if buffer.is_empty() { "epistore> " } else { "      ..> " };
        let line = match editor.readline(prompt) {
            Ok(line) => line,
            Err(rustyline::error::ReadlineError::Interrupted) => {
                buffer.clear();
                continue;
            }
            Err(rustyline::error::ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        };
        if buffer.is_empty() {
            if let Some(meta) = Meta::parse(&line) {
                let _ = editor.add_history_entry(line.trim());
                if meta == Meta::Quit {
                    break;
                }
                if let Err(e) = run_meta(session, &meta, format, &mut expanded) {
                    eprintln!("error: {}", describe(&e));
                }
                continue;
            }
        }
        buffer.push_str(&line);
        buffer.push('\n');
        if !line.trim_end().ends_with(';') {
            continue;
        }
        let _ = editor.add_history_entry(buffer.trim_end());
        let script = std::mem::take(&mut buffer);
        let run = || -> Result<()> {
            for statement in Engine::split_statements(&script)? {
                let started = std::time::Instant::now();
                let batches = session.block_on(session.engine.query(&statement))?;
                if expanded {
                    print_expanded(&batches)?;
                } else {
                    print_result(&batches, format)?;
                }
                let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
                eprintln!("{rows} rows in {:.3} s", started.elapsed().as_secs_f64());
            }
            Ok(())
        };
        if let Err(e) = run() {
            eprintln!("error: {}", describe(&e));
        }
    }
    if let Some(h) = &history {
        let _ = editor.save_history(h);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::Meta;

    #[test]
    fn backslash_commands_and_other_shells_habits_are_commands_not_sql() {
        assert_eq!(Meta::parse("\\d"), Some(Meta::Tables));
        assert_eq!(Meta::parse(".tables"), Some(Meta::Tables));
        assert_eq!(Meta::parse("\\d episodes;"), Some(Meta::Columns("episodes".into())));
        assert_eq!(Meta::parse(".schema \"checks\""), Some(Meta::Columns("checks".into())));
        assert_eq!(Meta::parse("help"), Some(Meta::Help));
        assert_eq!(Meta::parse(" \\x "), Some(Meta::Expanded));
        assert_eq!(Meta::parse("\\q"), Some(Meta::Quit));
        assert_eq!(Meta::parse("\\z"), Some(Meta::Unknown("\\z".into())));
        assert_eq!(Meta::parse("SELECT 1;"), None);
        assert_eq!(Meta::parse("select .5"), None);
    }
}
