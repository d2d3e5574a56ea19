//! Revision 1.2 content (docs/format.md §9) from the aider fixture, read by hand: line
//! numbers below are the fixture's (`tests/fixtures/real/aider/`).

use epistore_package::Episode;

use super::{fixture, history, import_fixture, import_paths, session, write, FIXTURE};
use crate::{Options, Run};

/// (role, author, text) of every message that has text, in order.
fn said(ep: &Episode) -> Vec<(String, Option<String>, String)> {
    ep.messages.iter().flatten().filter_map(|m| m.text.clone().map(|t| (m.role.clone(), m.author.clone(), t))).collect()
}

fn run_of<'a>(runs: &'a [Result<Run, crate::Refusal>], ts: &str) -> &'a Run {
    let label = format!("aider/{ts}");
    runs.iter().flatten().find(|r| r.package.episode.manifest.episode == label).unwrap()
}

/// The fixture's lines `from..=to` (1-based), joined as the file has them.
fn lines(from: usize, to: usize) -> String {
    let text = std::fs::read_to_string(fixture(FIXTURE)).unwrap();
    let all: Vec<&str> = text.split('\n').collect();
    all[from - 1..to].join("\n")
}

/// 2024-08-05 19:33:32 (lines 103-217): one message, one reply, one edit.
#[test]
fn a_one_edit_session_read_by_hand() {
    let (_, runs) = import_fixture(&Options::default());
    let ep = session(&runs, "2024-08-05 19:33:32");
    // 113 `#### Use the Spinner ...`: the person's message, the task.
    assert_eq!(ep.manifest.task_prompt.as_deref(), Some("Use the Spinner instead of the inlined custom spinner"));
    let msgs = said(ep);
    assert_eq!(msgs.len(), 2, "214 `/diff` and 216 `/ex` are commands, not messages: {msgs:?}");
    assert_eq!(
        (msgs[0].0.as_str(), msgs[0].1.as_deref(), msgs[0].2.as_str()),
        ("user", Some("human"), "Use the Spinner instead of the inlined custom spinner")
    );
    // 115-207: the reply, whole (its SEARCH/REPLACE block included), up to the blank
    // line before 209's `> Tokens:`.
    assert_eq!((msgs[1].0.as_str(), msgs[1].1.as_deref()), ("assistant", None));
    assert_eq!(msgs[1].2, lines(115, 207));
    assert!(msgs[1].2.starts_with("Certainly! I'll modify the `run_install` function in the `aider/utils.py` file"));
    let reply = ep.messages.iter().flatten().find(|m| m.role == "assistant" && m.text.is_some()).unwrap();
    // 209 `Tokens: 5,244 sent, 604 received.`; 107 `Models: claude-3-5-sonnet-20240620 ...`.
    assert_eq!((reply.tokens_in, reply.tokens_out), (Some(5244), Some(604)));
    assert_eq!(reply.model.as_deref(), Some("claude-3-5-sonnet-20240620"));
    // The last reply is the final message.
    assert_eq!(ep.outcome.final_message.as_deref(), Some(lines(115, 207).as_str()));

    // 210 `Applied edit to aider/utils.py`: the diff of the block at 117-204, numbered
    // within its SEARCH text (the log has no file line numbers).
    let edit = ep.actions.iter().flatten().find(|a| a.kind.as_deref() == Some("edit")).unwrap();
    let diff = edit.diff.as_deref().unwrap();
    assert!(diff.starts_with("--- a/aider/utils.py\n+++ b/aider/utils.py\n@@ -12,9 +12,7 @@\n"), "{diff}");
    assert!(diff.contains("\n+        spinner = Spinner(\"Installing...\")\n"), "{diff}");
    let notes = ep.manifest.provenance().unwrap()["notes"].to_string();
    assert!(notes.contains("numbered within the replaced text"), "{notes}");
    assert!(notes.contains("patch.diff is derived"), "{notes}");
    // aider ran no tool whose output it logs: the edit has no output file.
    assert!(ep.tools.iter().flatten().all(|t| t.output.is_none()));
}

/// 2024-08-06 08:47:10 (lines 1680-2705): messages, a `/test` and its output, a
/// reply cut off by an error, a `/model` change, and the edit that fixed the test.
#[test]
fn a_session_with_a_test_run_read_by_hand() {
    let (_, runs) = import_fixture(&Options::default());
    let run = run_of(&runs, "2024-08-06 08:47:10");
    let ep = &run.package.episode;
    assert_eq!(ep.manifest.task_prompt.as_deref(), Some("Add tests for `subtree_only`.")); // 1691
    let msgs = said(ep);
    let head: Vec<_> =
        msgs.iter().map(|(r, a, t)| (r.as_str(), a.as_deref(), t.chars().take(40).collect::<String>())).collect();
    let s = |r: &'static str, a: Option<&'static str>, t: &str| (r, a, t.to_string());
    assert_eq!(
        head[..6],
        [
            s("user", Some("human"), "Add tests for `subtree_only`."), // 1691
            s("assistant", None, "Certainly! I'll add tests for the `subtr"), // 1693
            // 1807 `/add ...` is a command; 1810 the next message.
            s("user", Some("human"), "also build a repomap from within a subdi"), // 1810
            s("assistant", None, "Certainly! I'll add a new test case to c"),     // 1812
            // 2130, after 2128 `Attempt to fix lint errors? y`: cut off at 2132 by
            // `Unexpected error`, so no `Tokens:` line.
            s("assistant", None, "To fix the error, we need to import the "),
            // 2232, the reply to 2144's `/test` output: the model `/model` chose at 2134.
            s("assistant", None, "To fix the error, we need to import the "),
        ]
    );
    let m: Vec<_> = ep.messages.iter().flatten().filter(|m| m.role == "assistant" && m.text.is_some()).collect();
    assert_eq!(m[2].text.as_deref(), Some("To fix the error, we need to import the `GitRepo` class at"));
    assert_eq!((m[2].tokens_in, m[2].model.as_deref()), (None, Some("claude-3-5-sonnet-20240620")));
    // 2260 `Tokens: 17,121 sent, 188 received.`; 2136 `Models: openrouter/anthropic/claude-3.5-sonnet ...`.
    assert_eq!((m[3].tokens_in, m[3].tokens_out), (Some(17121), Some(188)));
    assert_eq!(m[3].model.as_deref(), Some("openrouter/anthropic/claude-3.5-sonnet"));

    // 2144 `/test pytest tests/basic/test_repomap.py`: aider 0.47 logged the output
    // once as one message (2145-2187: `> ` on its first line, two spaces ending its
    // last), then line by line (2188-2229) as it added it to the chat. The first is the
    // output, kept with its own indentation.
    let tests: Vec<_> = ep
        .tools
        .iter()
        .flatten()
        .filter(|t| t.command.as_deref() == Some("pytest tests/basic/test_repomap.py"))
        .collect();
    assert_eq!(tests.len(), 2); // 2144 and 2407
    let path = tests[0].output.as_deref().unwrap();
    assert_eq!(path, format!("artifacts/tool-output/{}.txt", tests[0].common.seq));
    let printed = lines(2145, 2187);
    let printed = printed.strip_prefix("> ").unwrap().strip_suffix("  ").unwrap();
    assert_eq!(run.package.raw.file(path).unwrap(), printed.as_bytes());
    assert!(printed.starts_with("============================= test session starts ======"));
    assert!(printed.contains("\n    def test_get_repo_map_subtree_only(self):\n"));
    assert!(printed.ends_with("========================= 1 failed, 6 passed in 3.28s =========================="));
    assert_eq!(tests[0].output_text.as_deref(), Some(printed));
    // 2408-2451, the second `/test` (2407).
    let second = lines(2408, 2451);
    let second = second.strip_prefix("> ").unwrap().strip_suffix("  ").unwrap();
    assert_eq!(run.package.raw.file(tests[1].output.as_deref().unwrap()).unwrap(), second.as_bytes());
    assert!(second.contains("TypeError: RepoMap.__init__() got an unexpected keyword argument 'repo'"));
    // The lint runs aider reports (`## Running: ...`) show no output of their own.
    assert!(ep
        .tools
        .iter()
        .flatten()
        .filter(|t| t.command.as_deref().is_some_and(|c| c.contains("tmp.lint.sh")))
        .all(|t| t.output.is_none()));

    // 2261 `Applied edit to tests/basic/test_repomap.py`: the block at 2234-2255.
    let edits: Vec<_> =
        ep.actions.iter().flatten().filter(|a| a.kind.as_deref() == Some("edit") && a.diff.is_some()).collect();
    assert_eq!(
        edits[2].diff.as_deref(),
        Some(
            "--- a/tests/basic/test_repomap.py\n+++ b/tests/basic/test_repomap.py\n@@ -5,4 +5,5 @@\n \
             from aider.io import InputOutput\n from aider.models import Model\n from aider.repomap import RepoMap\n\
             +from aider.repo import GitRepo\n from aider.utils import IgnorantTemporaryDirectory\n"
        )
    );
    // 2328, from the block at 2314-2322 (2272's reply, cut off at 2303, was not applied).
    assert_eq!(
        edits[3].diff.as_deref(),
        Some(
            "--- a/tests/basic/test_repomap.py\n+++ b/tests/basic/test_repomap.py\n@@ -1,2 +1,2 @@\n     \
             def test_get_repo_map_subtree_only(self):\n-        with IgnorantTemporaryDirectory() as temp_dir:\n\
             +        with GitTemporaryDirectory() as temp_dir:\n"
        )
    );
    // Every applied edit (1803, 2061, 2261, 2328, 2401, 2517, 2593, 2660) has its diff;
    // the ten `/undo`s have none.
    assert_eq!(edits.len(), 8);
    // 2641-2657: the last reply, before the `/undo`s.
    assert!(ep
        .outcome
        .final_message
        .as_deref()
        .unwrap()
        .starts_with("To fix the flake8 error, we need to remove the unused import of `GitRepo`. Here's the change:"));
}

/// aider 0.86 prints what `/run` runs to the terminal only: the log shows no output,
/// so the call has no output file (not an empty one). A block with an empty SEARCH on
/// a file aider created is the file's whole text.
#[test]
fn output_aider_did_not_log_is_not_invented() {
    let text = history(&[
        "",
        "# aider chat started at 2026-12-01 09:30:00",
        "",
        "> aider calc.py",
        "> Aider v0.86.2",
        "> Main model: anthropic/claude-sonnet-4-20250514 with diff edit format, infinite output",
        "",
        "#### /run python3 -c 'print(3)'",
        "> Add 0.0k tokens of command output to the chat? (Y)es/(N)o [Yes]: n",
        "",
        "#### /ask what is calc?",
        "",
        "#### what is calc?",
        "",
        "A calculator.",
        "",
        "> Tokens: 1.0k sent, 4 received. Cost: $0.0030 message, $0.0030 session.",
        "",
        "#### add a README",
        "",
        "README.md",
        "```",
        "<<<<<<< SEARCH",
        "=======",
        "# calc",
        ">>>>>>> REPLACE",
        "```",
        "",
        "> Tokens: 2.5k sent, 60 received. Cost: $0.0084 message, $0.02 session.",
        "> README.md",
        "> Create new file? (Y)es/(N)o [Yes]: y",
        "> Applied edit to README.md",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "h.md", &text);
    let (_, runs) = import_paths(&[path], &Options::default());
    let ep = &runs[0].as_ref().unwrap().package.episode;
    let run = ep.tools.iter().flatten().find(|t| t.command.as_deref() == Some("python3 -c 'print(3)'")).unwrap();
    assert_eq!(run.output, None);
    let msgs: Vec<_> = said(ep).into_iter().map(|(r, a, t)| (r, a.unwrap_or_default(), t)).collect();
    let s = |r: &str, a: &str, t: &str| (r.to_string(), a.to_string(), t.to_string());
    assert_eq!(
        msgs,
        [
            s("user", "human", "/ask what is calc?"), // its echo is not said twice
            s("assistant", "", "A calculator."),
            s("user", "human", "add a README"),
            s("assistant", "", "README.md\n```\n<<<<<<< SEARCH\n=======\n# calc\n>>>>>>> REPLACE\n```"),
        ]
    );
    assert_eq!(ep.manifest.task_prompt.as_deref(), Some("/ask what is calc?"));
    let create = ep.actions.iter().flatten().find(|a| a.kind.as_deref() == Some("create")).unwrap();
    assert_eq!(create.diff.as_deref(), Some("--- /dev/null\n+++ b/README.md\n@@ -0,0 +1 @@\n+# calc\n"));
}
