//! Detection against every real log the repository holds.

use std::path::{Path, PathBuf};

use super::*;

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// The source each fixture folder holds, and the files in them that are no log.
const FOLDERS: [(&str, &str); 30] = [
    ("tests/fixtures/constructed/otlp/claude-code", "claude-code-otel"),
    ("tests/fixtures/constructed/otlp/codex", "codex-otel"),
    ("tests/fixtures/constructed/otlp/gemini-cli", "gemini-cli-otel"),
    ("tests/fixtures/real/trajectories", "trajectories"),
    ("tests/fixtures/constructed/opencode", "opencode"),
    ("tests/fixtures/real/cline", "cline"),
    ("tests/fixtures/constructed/cline", "cline"),
    ("tests/fixtures/constructed/goose", "goose"),
    ("tests/fixtures/constructed/terminal-bench", "terminal-bench"),
    ("tests/fixtures/real/copilot-cli", "copilot-cli"),
    ("tests/fixtures/constructed/copilot-cli", "copilot-cli"),
    ("tests/fixtures/real/pi", "pi"),
    ("tests/fixtures/constructed/pi", "pi"),
    ("tests/fixtures/real/gemini-cli", "gemini-cli"),
    ("tests/fixtures/constructed/gemini-cli", "gemini-cli"),
    ("tests/fixtures/real/atif", "atif"),
    ("tests/fixtures/real/aider", "aider"),
    ("tests/fixtures/real/claude-code", "claude-code"),
    ("tests/fixtures/real/codex", "codex"),
    ("tests/fixtures/real/inspect", "inspect"),
    ("tests/fixtures/real/inspect-zstd", "inspect"),
    ("tests/fixtures/real/mini-swe-agent", "mini-swe-agent"),
    ("tests/fixtures/real/openhands", "openhands"),
    ("tests/fixtures/real/swe-agent", "swe-agent"),
    ("tests/fixtures/real/swebench-eval", "swe-bench"),
    ("datasets/agent-logs/claude-code", "claude-code"),
    ("datasets/agent-logs/codex", "codex"),
    ("datasets/agent-logs/inspect", "inspect"),
    ("datasets/agent-logs/mini-swe-agent", "mini-swe-agent"),
    ("datasets/agent-logs/swe-agent", "swe-agent"),
];

/// Files among the fixtures that are no log: provenance notes, the scripts the
/// generated logs were made with, and the parts of an evaluation folder no importer
/// reads (its metadata, the agent-side runtime log, the markdown summary).
fn not_a_log(rel: &str) -> bool {
    rel.ends_with(".md") && !rel.contains("chat-history")
        || rel.ends_with("mock_script.json")
        || rel.ends_with(".py")
        || rel.contains("/LICENSE")
        || rel.ends_with("gen_constructed.py")
        || rel.ends_with("outputs_slug.yaml")
        || rel.ends_with("/metadata.json")
        || rel.contains("/infer_logs/")
        || rel.contains("/terminal-bench/") && (rel.contains("/agent-logs/") || rel.contains("/panes/"))
}

fn claims(path: &Path) -> Vec<(Format, Confidence)> {
    use std::io::Read;
    let mut head = Vec::new();
    std::fs::File::open(path).unwrap().take(SNIFF_BYTES as u64).read_to_end(&mut head).unwrap();
    let sniff = Sniff::new(path, &head);
    IMPORTERS.iter().filter_map(|i| i.detect(&sniff).map(|c| (i.format(), c))).collect()
}

/// Every fixture of every source is claimed by its own importer and by no other;
/// every file that is no log is claimed by none and says why.
#[test]
fn every_fixture_is_claimed_by_exactly_its_own_importer() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut seen = std::collections::BTreeSet::new();
    for (folder, name) in FOLDERS {
        let own = Format::from_name(name).unwrap();
        let mut all = Vec::new();
        files(&root.join(folder), &mut all);
        assert!(!all.is_empty(), "{folder}");
        for f in all {
            let rel = f.strip_prefix(&root).unwrap().display().to_string();
            if rel.ends_with("/auth.json") {
                assert_eq!(classify(&f), Detection::Unknown(crate::registry::CREDENTIALS.into()), "{rel}");
                continue;
            }
            let claimed = claims(&f);
            if not_a_log(&rel) {
                assert!(claimed.is_empty(), "{rel}: {claimed:?}");
                let Detection::Unknown(why) = classify(&f) else { panic!("{rel}: {:?}", classify(&f)) };
                assert!(why.starts_with("not a log of any format"), "{rel}: {why}");
            } else {
                assert_eq!(claimed.iter().map(|c| c.0).collect::<Vec<_>>(), [own], "{rel}: {claimed:?}");
                assert_eq!(classify(&f), Detection::Found(own), "{rel}");
                seen.insert(own);
            }
        }
    }
    // Every registered source that has real fixtures is in the table above.
    assert_eq!(seen.len(), IMPORTERS.len(), "{seen:?}");
}

/// Files of sources this build does not read are skipped with the source they look
/// like. (The sessions of Pi, Gemini CLI and Copilot CLI, which also carry a session
/// id and are never Claude Code's, are in the fixture table above.)
#[test]
fn other_agents_sessions_are_never_taken_for_claude_code() {
    let cases: [(&str, &str, Detection); 2] = [
        (
            "storage/session/info/ses_1.json",
            r#"{"id":"ses_1","version":"0.3.0","projectID":"p","directory":"/w","title":"t","time":{"created":1}}"#,
            Detection::Found(Format::from_name("opencode").unwrap()),
        ),
        (
            "tasks/1740000000000/ui_messages.json",
            r#"[{"ts":1740000000000,"type":"say","say":"text","text":"fix it"}]"#,
            Detection::Found(Format::from_name("cline").unwrap()),
        ),
    ];
    for (name, text, want) in cases {
        assert_eq!(classify_bytes(Path::new(name), text.as_bytes()), want, "{name}");
    }
}

/// Two importers as sure as each other is a tie, reported with both names; the
/// list's order never decides.
#[test]
fn a_tie_names_both_sources() {
    // A SWE-agent trajectory's keys beside a SWE-bench report's: both by shape only.
    let text = r#"{"trajectory": [], "info": {}, "resolved_ids": ["a"]}"#;
    let detection = classify_bytes(Path::new("x.json"), text.as_bytes());
    assert_eq!(
        detection,
        Detection::Tie(vec![Format::from_name("swe-bench").unwrap(), Format::from_name("swe-agent").unwrap()])
    );
    let why = detection.reason().unwrap();
    assert!(why.contains("swe-bench") && why.contains("swe-agent") && why.contains("--format"), "{why}");
}

/// Every registered source has its row in docs/importers.md §9's table and a section
/// of its own, and names the files it reads (for the fuzz target's cases).
#[test]
fn every_importer_is_documented() {
    let docs =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/importers.md")).unwrap();
    for importer in IMPORTERS {
        let name = importer.format().name();
        assert!(docs.contains(&format!("| `{name}` |")), "docs/importers.md §9 has no row for {name}");
        assert!(docs.contains(&format!("(`{name}`")), "docs/importers.md has no section for {name}");
        assert!(!importer.file_names().is_empty() && !importer.about().is_empty(), "{name}");
    }
}
