//! Goose sessions read by hand (tests/fixtures/constructed/goose/README.md): the 1.0-era
//! JSON Lines, a newer export, and the SQLite store built from the export.

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use serde_json::Value;

use crate::testing::{fixtures, import_all, import_paths};
use crate::Options;

fn fixture(rel: &str) -> PathBuf {
    fixtures(&format!("constructed/goose/{rel}"))
}

fn calls(e: &epistore_package::Episode) -> Vec<(String, Option<i64>, String)> {
    e.tools.iter().flatten().map(|t| (t.tool.clone(), t.exit_code, t.failure_type.clone())).collect()
}

#[test]
fn a_legacy_session_file_with_a_cut_last_line() {
    // The header names no model: --model does.
    let options = Options { model: Some("claude-3-7-sonnet".into()), ..Options::default() };
    let runs = import_all(&fixture("sessions"), &options);
    assert_eq!(runs.len(), 1);
    let e = &runs[0].package.episode;
    assert_eq!(e.manifest.episode, "20250320_153000");
    assert_eq!(
        e.manifest.task_prompt.as_deref(),
        Some("The greeting says Helo. Fix it in src/greet.js and run the tests.")
    );
    // view (a read), str_replace (an edit of src/greet.js), npm test (no exit code).
    let c = calls(e);
    assert_eq!(
        c.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(),
        ["developer__text_editor", "developer__text_editor", "developer__shell"]
    );
    assert_eq!(c[2].1, None, "the old shell reports no exit code");
    let edit = e.actions.iter().flatten().find(|a| a.mutates).expect("str_replace");
    assert_eq!(edit.paths, ["src/greet.js"]);
    assert!(edit.diff.as_deref().unwrap().contains("+'Hello'"));
    // The model's half of each result, not the screen's.
    let edited = e.tools.iter().flatten().nth(1).and_then(|t| t.output.clone()).expect("an output file");
    assert_eq!(runs[0].package.raw.file(&edited).unwrap(), b"The file /Users/dev/webapp/src/greet.js has been edited.");
    // The header's totals; the cut last line left out and said.
    assert_eq!((e.outcome.tokens_in, e.outcome.tokens_out), (Some(14500), Some(1300)));
    assert!(e.manifest.provenance().unwrap()["notes"].to_string().contains("cut short"));
    assert_eq!(e.interventions.iter().flatten().count(), 0);
}

fn assert_parser_session(e: &epistore_package::Episode) {
    assert_eq!(e.manifest.episode, "20251229_3");
    // metadata.inference.resolvedModel (twice) over model_config's name (once).
    assert_eq!(e.manifest.model, "gpt-5.1-2025-11-13");
    let c = calls(e);
    assert_eq!(c.len(), 4, "{c:?}");
    assert_eq!((c[0].0.as_str(), c[0].1), ("shell", Some(2)));
    assert_eq!(c[1].0, "edit");
    assert_eq!(c[2].2, "permission_denied");
    assert_eq!((c[3].0.as_str(), c[3].1), ("shell", Some(0)));
    let edit = e.actions.iter().flatten().find(|a| a.mutates).expect("edit");
    assert_eq!(edit.paths, ["parse.go"]);
    assert!(edit.diff.as_deref().unwrap().contains("+return n"));
    let checks: Vec<(String, bool)> =
        e.checks.iter().flatten().map(|c| (c.result.clone().unwrap_or_default(), c.fresh)).collect();
    assert_eq!(checks, [("fail".into(), false), ("pass".into(), true)]);
    assert_eq!(e.interventions.iter().flatten().count(), 1, "the declined push");
    assert_eq!(e.outcome.tokens_out, Some(400));
    assert!(e.messages.iter().flatten().any(|m| m.reasoning.as_deref() == Some("Run the tests first.")));
}

#[test]
fn an_export_of_a_newer_session() {
    let runs = import_all(&fixture("session-export.json"), &Options::default());
    assert_parser_session(&runs[0].package.episode);
}

/// Goose 1.10's tables (the columns the importer reads and a few more), filled from the
/// export.
fn database_from_export(dir: &Path) -> PathBuf {
    let path = dir.join("sessions.db");
    let db = Connection::open(&path).unwrap();
    db.execute_batch(
        "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP);
         CREATE TABLE sessions (id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '', description TEXT NOT NULL DEFAULT '', working_dir TEXT NOT NULL, created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, extension_data TEXT DEFAULT '{}', accumulated_input_tokens INTEGER, accumulated_output_tokens INTEGER, accumulated_cost REAL, provider_name TEXT, model_config_json TEXT);
         CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT, session_id TEXT NOT NULL REFERENCES sessions(id), role TEXT NOT NULL, content_json TEXT NOT NULL, created_timestamp INTEGER NOT NULL, timestamp TIMESTAMP DEFAULT CURRENT_TIMESTAMP, tokens INTEGER, metadata_json TEXT);",
    )
    .unwrap();
    let export: Value = serde_json::from_slice(&std::fs::read(fixture("session-export.json")).unwrap()).unwrap();
    db.execute(
        "INSERT INTO sessions (id, name, working_dir, created_at, accumulated_input_tokens, accumulated_output_tokens, accumulated_cost, provider_name, model_config_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        rusqlite::params![
            export["id"].as_str(), export["name"].as_str(), export["working_dir"].as_str(), export["created_at"].as_str(),
            export["accumulated_input_tokens"].as_i64(), export["accumulated_output_tokens"].as_i64(),
            export["accumulated_cost"].as_f64(), export["provider_name"].as_str(), export["model_config"].to_string()
        ],
    )
    .unwrap();
    for m in export["conversation"].as_array().unwrap() {
        db.execute(
            "INSERT INTO messages (message_id, session_id, role, content_json, created_timestamp, metadata_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            rusqlite::params![m["id"].as_str(), export["id"].as_str(), m["role"].as_str(), m["content"].to_string(), m["created"].as_i64(), m["metadata"].to_string()],
        )
        .unwrap();
    }
    path
}

#[test]
fn the_sqlite_store_reads_as_the_export_does() {
    let dir = tempfile::tempdir().unwrap();
    let db = database_from_export(dir.path());
    let runs = import_all(&db, &Options::default());
    assert_eq!(runs.len(), 1);
    assert_parser_session(&runs[0].package.episode);
    let provenance = runs[0].package.episode.manifest.provenance().unwrap();
    assert_eq!(provenance["source_files"][0]["part"], "session 20251229_3");
    // A JSON Lines file of a session the store holds is read from the store.
    let lines = dir.path().join("20251229_3.jsonl");
    std::fs::write(&lines, "{\"working_dir\":\"/srv/parser\",\"description\":\"x\",\"message_count\":0}\n").unwrap();
    let (plan, runs) = import_paths(&[dir.path().to_path_buf()], &Options::default());
    assert_eq!(runs.len(), 1);
    assert!(plan.covered.iter().any(|(_, _, why)| why.contains("also in sessions.db")), "{:?}", plan.covered);
}
