//! Real indexes on disk, built from small episodes: two "segments" A and B, and C
//! holding the episodes of both (the reference for scores across segments).

use std::collections::{BTreeSet, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::slice::from_ref;

use epistore_package::{Action, Common, Derived, Episode, Manifest, Message, Outcome, Tool, FORMAT_V1_2};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use tempfile::TempDir;

use crate::*;

fn common(seq: u64) -> Common {
    Common { seq, line: seq as u32 + 1, ts: None, grade: "observed".into(), revision: 0, extra: None }
}

fn message(seq: u64, role: &str, text: Option<&str>, reasoning: Option<&str>) -> Message {
    Message {
        common: common(seq),
        role: role.into(),
        author: None,
        text: text.map(Into::into),
        reasoning: reasoning.map(Into::into),
        tool_call_id: None,
        tool: None,
        arguments: None,
        tool_seq: None,
        is_error: None,
        tokens_in: None,
        tokens_out: None,
        model: None,
    }
}

fn says(seq: u64, role: &str, text: &str) -> Message {
    message(seq, role, Some(text), None)
}

fn tool(seq: u64, name: &str, command: Option<&str>, output: Option<&str>) -> Tool {
    Tool {
        common: common(seq),
        tool: name.into(),
        command: command.map(Into::into),
        exit_code: Some(0),
        duration_ms: None,
        timed_out: false,
        recorded_failure_type: None,
        failure_type: "none".into(),
        recovered_by: None,
        output: output.map(|_| format!("artifacts/tool-output/{seq}.txt")),
        output_text: output.map(Into::into),
        output_bytes: output.map(|text| text.len() as u64),
    }
}

fn edit(seq: u64, paths: &[&str], diff: Option<&str>) -> Action {
    Action {
        common: common(seq),
        kind: Some("edit".into()),
        paths: paths.iter().map(|path| path.to_string()).collect(),
        summary: None,
        mutates: true,
        ok: true,
        tool_seq: None,
        diff: diff.map(Into::into),
    }
}

fn episode(messages: Option<Vec<Message>>, tools: Vec<Tool>, actions: Vec<Action>) -> Episode {
    Episode {
        manifest: Manifest {
            format: FORMAT_V1_2.into(),
            episode: "e".into(),
            model: "m".into(),
            model_version: None,
            model_provider: None,
            harness_name: None,
            harness_level: "h0".into(),
            harness_version: None,
            harness_components: None,
            task: "t".into(),
            task_family: None,
            cluster: "t".into(),
            repository_url: None,
            repository_commit: None,
            requirements: vec![],
            seed: None,
            attempt: 1,
            started_at: None,
            ended_at: None,
            trace_complete: true,
            tags: None,
            task_prompt: None,
            extra: None,
        },
        outcome: Outcome {
            label: Some("failed".into()),
            agent_reported_complete: None,
            stop_reason: "completed".into(),
            correct: None,
            start_state: None,
            admission: None,
            requirements: vec![],
            actions_used: None,
            actions_max: None,
            budget_exhausted: None,
            tokens_in: None,
            tokens_out: None,
            cost_usd: None,
            wall_ms: None,
            fault_locations: None,
            score: None,
            notes: None,
            recorded_posture: None,
            final_message: None,
            extra: None,
        },
        actions: Some(actions),
        tools: Some(tools),
        context: None,
        checks: None,
        attributions: None,
        interventions: None,
        entropy: None,
        messages,
        derived: Derived { final_revision: 1, posture: "unverified".into() },
    }
}

const LONG_DIFF_LINE: &str = "+# a comment line that goes on and on so that the diff is longer than a snippet ";

/// Segment A: two episodes.
fn segment_a() -> Vec<(&'static str, Episode)> {
    let mut tool_message = says(5, "tool", "1 passed in 0.2s");
    tool_message.tool = Some("Bash".into());
    let mut user = says(0, "user", "Fix the rate limit bug in the API client.");
    user.author = Some("human".into());
    let a1 = episode(
        Some(vec![
            user,
            message(
                1,
                "assistant",
                Some("I will look at how the client computes its rate."),
                Some("The rate limit is probably off by one."),
            ),
            says(4, "assistant", "Raised the limit; the tests pass now."),
            tool_message,
            // No text and no reasoning: no document.
            message(6, "assistant", None, Some("")),
        ]),
        vec![tool(
            2,
            "Bash",
            Some("pytest tests/test_client.py -x"),
            Some("E   AssertionError: rate limit exceeded\n1 failed"),
        )],
        vec![edit(
            3,
            &["src/app.py"],
            Some("--- a/src/app.py\n+++ b/src/app.py\n@@ -1 +1 @@\n-LIMIT = 10\n+LIMIT = 100\n"),
        )],
    );
    let long_diff =
        format!("--- a/src/utils.py\n+++ b/src/utils.py\n-def helper():\n+def assist():\n{}", LONG_DIFF_LINE.repeat(4));
    let a2 = episode(
        Some(vec![
            says(0, "system", "You are a careful coding agent."),
            says(1, "user", "Rename the helper in utils."),
        ]),
        vec![
            tool(2, "Read", Some("cat src/utils.py"), Some("def helper():\n    pass\n")),
            tool(3, "bash", Some("grep -r helper ."), None),
        ],
        vec![edit(4, &["src/utils.py", "src/main.py"], Some(&long_diff)), edit(5, &["notes.txt"], None)],
    );
    vec![("ep-a1", a1), ("ep-a2", a2)]
}

/// Segment B: one episode with content, one without any (a revision 1 package).
fn segment_b() -> Vec<(&'static str, Episode)> {
    let b1 = episode(
        Some(vec![
            says(0, "user", "The limit on the rate is wrong."),
            says(1, "assistant", "Checking the rate limit handling in the server."),
        ]),
        vec![tool(2, "Bash", Some("cargo test"), Some("test result: ok. 3 passed"))],
        vec![edit(3, &["server/main.rs"], Some("-const RATE: u32 = 5;\n+const RATE: u32 = 50;\n"))],
    );
    let b2 = episode(None, vec![], vec![]);
    vec![("ep-b1", b1), ("ep-b2", b2)]
}

struct Fixture {
    _tmp: TempDir,
    a: PathBuf,
    b: PathBuf,
    /// A and B in one index.
    c: PathBuf,
}

impl Fixture {
    fn ab(&self) -> Vec<PathBuf> {
        vec![self.a.clone(), self.b.clone()]
    }
}

fn build(dir: &Path, episodes: &[(&'static str, Episode)]) -> u64 {
    let refs: Vec<(&str, &Episode)> = episodes.iter().map(|(id, e)| (*id, e)).collect();
    write_index(dir, &refs).unwrap()
}

fn fixture() -> Fixture {
    let tmp = TempDir::new().unwrap();
    let (a, b, c) = (tmp.path().join("a"), tmp.path().join("b"), tmp.path().join("c"));
    assert_eq!(build(&a, &segment_a()), 13);
    assert_eq!(build(&b, &segment_b()), 5);
    let all: Vec<_> = segment_a().into_iter().chain(segment_b()).collect();
    assert_eq!(build(&c, &all), 18);
    Fixture { _tmp: tmp, a, b, c }
}

fn options(limit: usize) -> SearchOptions {
    SearchOptions { limit, episodes: None }
}

fn find(dirs: &[PathBuf], query: &str) -> Vec<Hit> {
    search(dirs, query, &options(100)).unwrap_or_else(|e| panic!("{query}: {e}"))
}

/// The hits as (episode, seq, kind), sorted.
fn keys(hits: &[Hit]) -> BTreeSet<(String, u64, Kind)> {
    hits.iter().map(|hit| (hit.episode_id.clone(), hit.seq, hit.kind)).collect()
}

fn set(items: &[(&str, u64, Kind)]) -> BTreeSet<(String, u64, Kind)> {
    items.iter().map(|(id, seq, kind)| (id.to_string(), *seq, *kind)).collect()
}

fn query_error(dirs: &[PathBuf], query: &str) -> String {
    match search(dirs, query, &options(10)) {
        Err(Error::Query { message }) => message,
        other => panic!("{query:?}: expected a query error, got {other:?}"),
    }
}

#[test]
fn writing_counts_documents_lists_files_and_leaves_no_lock() {
    let f = fixture();
    for dir in [&f.a, &f.b, &f.c] {
        let files = index_files(dir).unwrap();
        assert!(files.contains(&"meta.json".to_string()), "{files:?}");
        assert!(files.iter().any(|name| name.ends_with(".idx")), "{files:?}");
        let mut sorted = files.clone();
        sorted.sort();
        assert_eq!(files, sorted);
        // Every file of the directory is listed: no lock file was left.
        let on_disk = fs::read_dir(dir).unwrap().count();
        assert_eq!(files.len(), on_disk, "{files:?}");
        assert!(!files.iter().any(|name| name.ends_with(".lock")));
    }
    assert_eq!(check_index(&f.a, Some(13)), None);
    assert_eq!(check_index(&f.b, None), None);
    let wrong = check_index(&f.a, Some(14)).unwrap();
    assert!(wrong.contains("13 documents") && wrong.contains(&f.a.display().to_string()), "{wrong}");

    // Searching writes nothing in an index directory.
    let before = index_files(&f.a).unwrap();
    find(&f.ab(), "rate");
    assert_eq!(fs::read_dir(&f.a).unwrap().count(), before.len());

    // The directory must be new or empty.
    let e = write_index(&f.a, &[]).unwrap_err();
    assert!(matches!(&e, Error::Index { path, message } if path == &f.a && message.contains("not empty")), "{e}");
    // An empty directory, and no episodes, are fine.
    let empty = f._tmp.path().join("empty");
    fs::create_dir(&empty).unwrap();
    assert_eq!(write_index(&empty, &[]).unwrap(), 0);
    assert_eq!(check_index(&empty, Some(0)), None);
    assert_eq!(find(&[empty], "rate"), vec![]);
}

#[test]
fn documents_are_one_per_message_command_output_and_diff() {
    let f = fixture();
    let every = find(from_ref(&f.a), "*");
    assert_eq!(
        keys(&every),
        set(&[
            ("ep-a1", 0, Kind::User),
            ("ep-a1", 1, Kind::Assistant),
            ("ep-a1", 2, Kind::Command),
            ("ep-a1", 2, Kind::Output),
            ("ep-a1", 3, Kind::Diff),
            ("ep-a1", 4, Kind::Assistant),
            ("ep-a1", 5, Kind::Tool),
            ("ep-a2", 0, Kind::System),
            ("ep-a2", 1, Kind::User),
            ("ep-a2", 2, Kind::Command),
            ("ep-a2", 2, Kind::Output),
            ("ep-a2", 3, Kind::Command),
            ("ep-a2", 4, Kind::Diff),
        ])
    );
    let tools: Vec<_> = every.iter().map(|hit| (hit.kind, hit.tool.as_deref())).collect();
    assert!(tools.contains(&(Kind::Command, Some("Bash"))));
    assert!(tools.contains(&(Kind::Output, Some("Read"))));
    assert!(tools.contains(&(Kind::Tool, Some("Bash"))));
    assert!(tools.contains(&(Kind::Diff, None)));
    // The reasoning is searched with the text.
    assert_eq!(keys(&find(from_ref(&f.a), "probably")), set(&[("ep-a1", 1, Kind::Assistant)]));
    assert_eq!(keys(&find(from_ref(&f.a), "author:human")), set(&[("ep-a1", 0, Kind::User)]));
}

#[test]
fn a_phrase_finds_only_the_exact_phrase() {
    let f = fixture();
    let phrase = set(&[
        ("ep-a1", 0, Kind::User),
        ("ep-a1", 1, Kind::Assistant),
        ("ep-a1", 2, Kind::Output),
        ("ep-b1", 1, Kind::Assistant),
    ]);
    assert_eq!(keys(&find(&f.ab(), "\"rate limit\"")), phrase);
    // "limit on the rate" has both words, not the phrase; so has "Raised the limit".
    let words = keys(&find(&f.ab(), "rate limit"));
    assert!(words.contains(&("ep-b1".to_string(), 0, Kind::User)));
    assert!(words.is_superset(&phrase) && words.len() == phrase.len() + 1, "{words:?}");
    assert_eq!(keys(&find(&f.ab(), "\"limit rate\"")), set(&[]));
}

#[test]
fn boolean_operators() {
    let f = fixture();
    let dirs = f.ab();
    // Conjunction by default.
    assert_eq!(keys(&find(&dirs, "rate limit")), keys(&find(&dirs, "rate AND limit")));
    assert_eq!(
        keys(&find(&dirs, "helper OR server")),
        set(&[
            ("ep-a2", 1, Kind::User),
            ("ep-a2", 2, Kind::Output),
            ("ep-a2", 3, Kind::Command),
            ("ep-a2", 4, Kind::Diff),
            ("ep-b1", 1, Kind::Assistant),
        ])
    );
    let limit_not_rate = set(&[("ep-a1", 3, Kind::Diff), ("ep-a1", 4, Kind::Assistant)]);
    assert_eq!(keys(&find(&dirs, "limit NOT rate")), limit_not_rate);
    assert_eq!(keys(&find(&dirs, "limit -rate")), limit_not_rate);
    assert_eq!(keys(&find(&dirs, "+limit -rate")), limit_not_rate);
    assert_eq!(
        keys(&find(&dirs, "(helper OR server) AND (kind:diff OR role:assistant)")),
        set(&[("ep-a2", 4, Kind::Diff), ("ep-b1", 1, Kind::Assistant)])
    );
}

#[test]
fn field_filters_on_raw_fields() {
    let f = fixture();
    let dirs = f.ab();
    assert_eq!(
        keys(&find(&dirs, "limit role:assistant")),
        set(&[("ep-a1", 1, Kind::Assistant), ("ep-a1", 4, Kind::Assistant), ("ep-b1", 1, Kind::Assistant)])
    );
    // `tool:Bash` is the tool named exactly `Bash`: not `bash`.
    let bash = set(&[
        ("ep-a1", 2, Kind::Command),
        ("ep-a1", 2, Kind::Output),
        ("ep-a1", 5, Kind::Tool),
        ("ep-b1", 2, Kind::Command),
        ("ep-b1", 2, Kind::Output),
    ]);
    assert_eq!(keys(&find(&dirs, "tool:Bash")), bash);
    assert_eq!(keys(&find(&dirs, "tool:bash")), set(&[("ep-a2", 3, Kind::Command)]));
    assert_eq!(keys(&find(&dirs, "passed tool:Bash kind:output")), set(&[("ep-b1", 2, Kind::Output)]));
    assert_eq!(
        keys(&find(&dirs, "kind:diff")),
        set(&[("ep-a1", 3, Kind::Diff), ("ep-a2", 4, Kind::Diff), ("ep-b1", 3, Kind::Diff)])
    );
    assert_eq!(keys(&find(&dirs, "kind:tool")), set(&[("ep-a1", 5, Kind::Tool)]));
    // Paths with `/` and `.` parse unquoted; quoted they mean the same.
    let utils = set(&[("ep-a2", 4, Kind::Diff)]);
    assert_eq!(keys(&find(&dirs, "path:src/main.py")), utils);
    assert_eq!(keys(&find(&dirs, "path:\"src/main.py\"")), utils);
    assert_eq!(keys(&find(&dirs, "path:src/app.py")), set(&[("ep-a1", 3, Kind::Diff)]));
    assert_eq!(keys(&find(&dirs, "path:src")), set(&[]));
    assert_eq!(keys(&find(&dirs, "episode_id:ep-b1 kind:command")), set(&[("ep-b1", 2, Kind::Command)]));
    assert_eq!(keys(&find(&dirs, "seq:3 kind:diff")), set(&[("ep-a1", 3, Kind::Diff), ("ep-b1", 3, Kind::Diff)]));
    assert_eq!(keys(&find(&dirs, "body:careful")), set(&[("ep-a2", 0, Kind::System)]));
}

#[test]
fn the_episodes_filter_keeps_only_those_episodes_and_their_scores() {
    let f = fixture();
    let dirs = f.ab();
    let only = |ids: &[&str]| SearchOptions {
        limit: 100,
        episodes: Some(ids.iter().map(|id| id.to_string()).collect::<HashSet<_>>()),
    };
    let hits = search(&dirs, "rate", &only(&["ep-b1"])).unwrap();
    // (`RATE` in its diff is the word `rate` lowercased.)
    assert_eq!(keys(&hits), set(&[("ep-b1", 0, Kind::User), ("ep-b1", 1, Kind::Assistant), ("ep-b1", 3, Kind::Diff)]));
    // The filter does not change the scores of what it keeps.
    let all = find(&dirs, "rate");
    for hit in &hits {
        let same = all.iter().find(|h| (&h.episode_id, h.seq, h.kind) == (&hit.episode_id, hit.seq, hit.kind)).unwrap();
        assert_eq!(same.score, hit.score);
    }
    assert_eq!(search(&dirs, "rate", &only(&["ep-a2", "nope"])).unwrap(), vec![]);
    assert_eq!(search(&dirs, "rate", &only(&[])).unwrap(), vec![]);
    let two = search(&dirs, "rate", &only(&["ep-a1", "ep-b1"])).unwrap();
    assert_eq!(two.len(), all.len());
}

#[test]
fn no_hit_limit_and_order() {
    let f = fixture();
    let dirs = f.ab();
    assert_eq!(find(&dirs, "zebra"), vec![]);
    assert_eq!(search(&[], "rate", &options(10)).unwrap(), vec![]);
    let all = find(&dirs, "rate");
    assert_eq!(all.len(), 6);
    for pair in all.windows(2) {
        assert!(pair[0].score >= pair[1].score, "{all:?}");
    }
    let two = search(&dirs, "rate", &options(2)).unwrap();
    assert_eq!(two, all[..2].to_vec());
    assert_eq!(search(&dirs, "rate", &options(0)).unwrap(), vec![]);
    assert_eq!(search(&dirs, "rate", &options(usize::MAX)).unwrap(), all);
    // The order of the directories does not matter.
    assert_eq!(find(&[f.b.clone(), f.a.clone()], "rate"), all);
}

#[test]
fn scores_use_statistics_summed_over_every_segment() {
    let f = fixture();
    for query in ["rate", "limit", "\"rate limit\"", "passed OR helper", "tool:Bash", "rate -limit"] {
        let split = find(&f.ab(), query);
        let whole = find(from_ref(&f.c), query);
        assert_eq!(keys(&split), keys(&whole), "{query}");
        assert!(!split.is_empty(), "{query}");
        for hit in &split {
            let twin = whole.iter().find(|h| (&h.episode_id, h.seq, h.kind) == (&hit.episode_id, hit.seq, hit.kind));
            let twin = twin.unwrap();
            assert!((hit.score - twin.score).abs() < 1e-5, "{query}: {} vs {}", hit.score, twin.score);
            assert_eq!(hit.snippet, twin.snippet, "{query}");
        }
    }
    // Searched alone, segment B scores with its own statistics: "rate" is in 3 of its
    // 5 documents, against 6 of 18 over both, so the same document scores differently.
    let alone = find(from_ref(&f.b), "rate");
    let both = find(&f.ab(), "rate");
    let key = |hit: &Hit| (hit.episode_id.clone(), hit.seq);
    let alone_score = alone.iter().find(|h| key(h) == ("ep-b1".to_string(), 1)).unwrap().score;
    let both_score = both.iter().find(|h| key(h) == ("ep-b1".to_string(), 1)).unwrap().score;
    assert!((alone_score - both_score).abs() > 1e-3, "{alone_score} vs {both_score}");
    // The statistics are the sums over both indexes: "rate" is in 3 + 3 documents of
    // 13 + 5; every token of the body counts.
    let (_, fields) = crate::schema::schema();
    let searchers: Vec<_> = f.ab().iter().map(|dir| crate::search::open_searcher(dir).unwrap()).collect();
    let whole = crate::search::open_searcher(&f.c).unwrap();
    let global = crate::search::GlobalStatistics { searchers: &searchers };
    let rate = tantivy::Term::from_field_text(fields.body, "rate");
    use tantivy::query::Bm25StatisticsProvider;
    assert_eq!(searchers.iter().map(|s| s.doc_freq(&rate).unwrap()).collect::<Vec<_>>(), [3, 3]);
    assert_eq!(global.doc_freq(&rate).unwrap(), 6);
    assert_eq!(global.total_num_docs().unwrap(), 18);
    assert_eq!(global.total_num_tokens(fields.body).unwrap(), whole.total_num_tokens(fields.body).unwrap());
    assert!(global.total_num_tokens(fields.body).unwrap() > searchers[0].total_num_tokens(fields.body).unwrap());
}

#[test]
fn snippets_mark_the_matched_terms() {
    let f = fixture();
    let dirs = f.ab();
    let hits = find(&dirs, "exceeded");
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].snippet, "E   AssertionError: rate limit «exceeded» 1 failed");
    let phrase = find(&dirs, "\"rate limit\" role:user");
    assert_eq!(phrase[0].snippet, "Fix the «rate» «limit» bug in the API client.");
    // A filter alone matches no term of the body: the start of the body.
    let diffs = find(&dirs, "kind:diff path:src/utils.py");
    assert_eq!(diffs.len(), 1);
    let snippet = &diffs[0].snippet;
    assert!(snippet.starts_with("--- a/src/utils.py +++ b/src/utils.py -def helper():"), "{snippet}");
    assert!(snippet.ends_with('…') && snippet.chars().count() == SNIPPET_CHARS + 1, "{snippet}");
    // A match deep in a long body: a fragment around it, cut at both ends.
    let deep = find(&dirs, "comment kind:diff");
    assert!(deep[0].snippet.contains("«comment»"), "{}", deep[0].snippet);
    assert!(deep[0].snippet.chars().count() <= SNIPPET_CHARS + 2 + 2 * 4, "{}", deep[0].snippet);
    for hit in find(&dirs, "rate OR helper OR limit") {
        assert!(hit.snippet.contains('«') && hit.snippet.contains('»'), "{hit:?}");
        assert!(!hit.snippet.contains('\n'));
    }
}

fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = index_files(dir)
        .unwrap()
        .into_iter()
        .filter(|name| !name.ends_with(".json"))
        .map(|name| dir.join(name))
        .collect();
    files.sort_by_key(|path| std::cmp::Reverse(fs::metadata(path).unwrap().len()));
    files
}

#[test]
fn check_index_catches_a_flipped_byte_and_a_missing_file() {
    let f = fixture();
    assert_eq!(check_index(&f.a, Some(13)), None);
    // A flipped byte in the middle of every segment file, one at a time.
    for file in segment_files(&f.a) {
        let bytes = fs::read(&file).unwrap();
        let mut flipped = bytes.clone();
        let middle = flipped.len() / 2;
        flipped[middle] ^= 0x5a;
        fs::write(&file, &flipped).unwrap();
        let problem = check_index(&f.a, Some(13));
        let problem = problem.unwrap_or_else(|| panic!("{} flipped, not caught", file.display()));
        assert!(problem.contains(&f.a.display().to_string()), "{problem}");
        fs::write(&file, &bytes).unwrap();
        assert_eq!(check_index(&f.a, Some(13)), None);
    }
    // A missing file: the check names it, and search refuses the index.
    let file = segment_files(&f.b).remove(0);
    fs::remove_file(&file).unwrap();
    let problem = check_index(&f.b, Some(5)).unwrap();
    assert!(problem.contains(&f.b.display().to_string()), "{problem}");
    match search(&f.ab(), "rate", &options(10)) {
        Err(Error::Index { path, .. }) => assert_eq!(path, f.b),
        other => panic!("{other:?}"),
    }
    // A damaged meta.json.
    fs::write(f.c.join("meta.json"), b"{ not json").unwrap();
    assert!(check_index(&f.c, None).unwrap().contains(&f.c.display().to_string()));
}

#[test]
fn a_directory_that_is_not_an_index_is_an_index_error_naming_it() {
    let f = fixture();
    let nowhere = f._tmp.path().join("nowhere");
    let plain = f._tmp.path().join("plain");
    fs::create_dir(&plain).unwrap();
    fs::write(plain.join("notes.txt"), "hello").unwrap();
    for dir in [&nowhere, &plain] {
        match search(&[f.a.clone(), dir.clone()], "rate", &options(10)) {
            Err(e @ Error::Index { .. }) => {
                assert!(e.to_string().contains(&dir.display().to_string()), "{e}");
                assert!(matches!(&e, Error::Index { path, .. } if path == dir));
            }
            other => panic!("{other:?}"),
        }
        assert!(check_index(dir, None).unwrap().contains(&dir.display().to_string()));
    }
    assert!(index_files(&nowhere).is_err());
    // Nothing was written in the directory that is not an index.
    assert_eq!(fs::read_dir(&plain).unwrap().count(), 1);
    assert!(!nowhere.exists());
}

#[test]
fn hostile_queries_are_refused_or_answered_never_a_panic() {
    let f = fixture();
    let dirs = f.ab();
    let long = "a".repeat(MAX_QUERY_BYTES + 1);
    assert!(query_error(&dirs, &long).contains("4096"));
    let ten_kb = "rate ".repeat(2048);
    assert!(query_error(&dirs, &ten_kb).contains("limit is 4096"));
    // Up to 4096 bytes is fine.
    let words = "rate ".repeat(MAX_QUERY_BYTES / 5);
    assert_eq!(keys(&find(&dirs, &words)), keys(&find(&dirs, "rate")));
    let deep = format!("{}rate{}", "(".repeat(17), ")".repeat(17));
    assert!(query_error(&dirs, &deep).contains("17 deep"));
    let ok = format!("{}rate{}", "(".repeat(16), ")".repeat(16));
    assert_eq!(keys(&find(&dirs, &ok)), keys(&find(&dirs, "rate")));
    assert!(query_error(&dirs, &"(".repeat(3000)).contains("limit is 16"));
    // Chained NOTs nest as deep as parentheses do in tantivy's parser.
    assert!(query_error(&dirs, &format!("{}rate", "NOT ".repeat(1000))).contains("1000 deep"));
    assert!(query_error(&dirs, &format!("{}rate{}", "NOT (".repeat(9), ")".repeat(9))).contains("18 deep"));
    for query in [format!("{}rate", "NOT ".repeat(16)), format!("{}rate{}", "NOT (".repeat(8), ")".repeat(8))] {
        match search(&dirs, &query, &options(5)) {
            Ok(_) | Err(Error::Query { .. }) => {}
            Err(e) => panic!("{query:?}: {e}"),
        }
    }
    // NOTs that are not chained do not add up.
    let many = format!("rate {}", "NOT zebra ".repeat(40));
    assert_eq!(keys(&find(&dirs, &many)), keys(&find(&dirs, "rate")));
    // Fields that do not exist.
    assert!(query_error(&dirs, "nosuch:rate").contains("nosuch"));
    assert!(query_error(&dirs, "http://example.com").contains("http"));
    assert!(query_error(&dirs, "kind:*").contains("not supported"));
    assert!(query_error(&[], "body:*").contains("not supported"));
    assert!(!find(&dirs, "\"http://example.com\" OR rate").is_empty());
    let hostile = [
        "",
        " ",
        "\"",
        "\"rate",
        "rate\"",
        "\"\"",
        "'",
        "'rate limit'",
        "(",
        ")",
        "(rate",
        "rate)",
        "((rate)",
        "AND",
        "OR",
        "NOT",
        "AND rate",
        "rate AND",
        "rate OR OR limit",
        "-",
        "+",
        "--rate",
        "+-rate",
        "-rate",
        "NOT rate",
        ":",
        "::",
        "rate:",
        ":rate",
        "*",
        "**",
        "rate*",
        "\"rate li\"*",
        "kind:",
        "kind:\"\"",
        "seq:abc",
        "seq:-1",
        "seq:99999999999999999999999",
        "seq:[1 TO 3]",
        "seq:[",
        "path:/etc/hosts",
        "path:/[/",
        "rate^",
        "rate^x",
        "rate^1e40",
        "rate~",
        "\"rate limit\"~3",
        "\"rate limit\"~99999999999",
        "[",
        "]",
        "{",
        "}",
        "body IN [rate limit]",
        "kind: IN [diff output]",
        "\\",
        "rate\\",
        "\\\"",
        "\u{0}",
        "rate\u{0}limit",
        "\u{7}\u{1b}[31m",
        "\r\n\t",
        "\u{feff}rate",
        "日本語 AND テスト",
        "🦀",
        "body:",
        "body:*",
        "nosuch:*",
        "!",
        "`",
        "rate && limit || helper",
        "a:b:c:d",
        "_exists_:rate",
        "kind:diff^0",
        "*:*",
    ];
    for query in hostile {
        match search(&dirs, query, &options(5)) {
            Ok(_) | Err(Error::Query { .. }) => {}
            Err(e) => panic!("{query:?}: {e}"),
        }
    }
    let long_operators = [
        "AND ".repeat(1000),
        "NOT ".repeat(1000),
        "-".repeat(4000),
        "+-".repeat(2000),
        "\"".repeat(4000),
        ":".repeat(4000),
        "*".repeat(4000),
        "a:".repeat(2000),
        "x^".repeat(2000),
        "(a) ".repeat(1000),
        format!("{}{}", "(".repeat(16), ")".repeat(3000)),
        "\u{0}".repeat(4096),
        "é".repeat(2048),
    ];
    for query in &long_operators {
        match search(&dirs, query, &options(5)) {
            Ok(_) | Err(Error::Query { .. }) => {}
            Err(e) => panic!("{query:?}: {e}"),
        }
    }
}

#[test]
fn any_string_is_answered_or_refused_as_a_query_error() {
    let f = fixture();
    let dirs = f.ab();
    let mut runner = TestRunner::new(Config { cases: 512, failure_persistence: None, ..Config::default() });
    let arbitrary = prop_oneof![
        any::<String>(),
        "[a-z\"'():*+\\-\\\\^~\\[\\]{}!/ ]{0,40}",
        "((AND|OR|NOT|kind:|tool:|path:|body:|seq:|rate|limit|\"|\\(|\\)|-|\\+|\\*|:|~|\\^|IN \\[|\\]) ?){0,30}",
    ];
    runner
        .run(&arbitrary, |query| {
            match search(&dirs, &query, &options(5)) {
                Ok(_) | Err(Error::Query { .. }) => {}
                Err(e) => prop_assert!(false, "{query:?}: {e}"),
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn kinds_have_names_and_parse() {
    for kind in Kind::ALL {
        assert_eq!(kind.name().parse::<Kind>().unwrap(), kind);
        assert_eq!(kind.to_string(), kind.name());
    }
    assert!(matches!("robot".parse::<Kind>(), Err(Error::Query { .. })));
    let names: Vec<_> = Kind::ALL.iter().map(|kind| kind.name()).collect();
    assert_eq!(names, ["system", "user", "assistant", "tool", "output", "command", "diff"]);
}

#[test]
fn errors_display_plainly() {
    let e = Error::Index { path: PathBuf::from("/s/seg-1/search"), message: "damaged".into() };
    assert_eq!(e.to_string(), "search index /s/seg-1/search: damaged");
    let e = Error::Query { message: "the query is 5000 bytes long; the limit is 4096 bytes".into() };
    assert_eq!(e.to_string(), "search query refused: the query is 5000 bytes long; the limit is 4096 bytes");
}
