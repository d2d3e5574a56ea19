//! Revision 1.2 content (docs/format.md §9) from the OpenHands fixtures, read by hand:
//! event ids below are the logs' own `id` fields, call ids their `tool_call_id`s.

use epistore_package::Episode;
use serde_json::{json, Value};

use super::{one, JSONL};
use crate::testing::import_ok;
use crate::{Options, Run};

/// (role, author, text) of every message that has text, in order.
fn said(ep: &Episode) -> Vec<(String, Option<String>, String)> {
    ep.messages.iter().flatten().filter_map(|m| m.text.clone().map(|t| (m.role.clone(), m.author.clone(), t))).collect()
}

/// The `tools` record of the call the log names `id`, found through its call message.
fn tool_of<'a>(ep: &'a Episode, id: &str) -> &'a epistore_package::Tool {
    let call = ep
        .messages
        .iter()
        .flatten()
        .find(|m| m.role == "assistant" && m.tool_call_id.as_deref() == Some(id))
        .unwrap_or_else(|| panic!("no call {id}"));
    let seq = call.tool_seq.unwrap();
    ep.tools.iter().flatten().find(|t| t.common.seq == seq).unwrap()
}

/// The call's output path and the stored file's bytes.
fn output_of(run: &Run, id: &str) -> (String, Vec<u8>) {
    let t = tool_of(&run.package.episode, id);
    let path = t.output.clone().unwrap_or_else(|| panic!("call {id} has no output"));
    assert_eq!(path, format!("artifacts/tool-output/{}.txt", t.common.seq));
    let bytes = run.package.raw.file(&path).unwrap().to_vec();
    (path, bytes)
}

/// multi_swe_bench_output.jsonl line 1 (ponylang__ponyc-4595): an evaluation output.
#[test]
fn an_evaluation_outputs_conversation_outputs_and_edit_diff() {
    let run = &import_ok(&[JSONL], &Options::default())[0];
    let ep = &run.package.episode;
    let line: Value = serde_json::from_str(&super::fixture_lines()[0]).unwrap();

    // The output's `instruction` is the task as given (event 1 repeats it, whole).
    let instruction = line["instruction"].as_str().unwrap();
    assert!(instruction.starts_with("<uploaded_files>\n/workspace/ponylang__ponyc__0.1\n</uploaded_files>\n"));
    assert_eq!(ep.manifest.task_prompt.as_deref(), Some(instruction));

    let msgs = said(ep);
    // Event 0: the SystemMessageAction.
    assert_eq!((msgs[0].0.as_str(), msgs[0].1.as_deref()), ("system", None));
    assert!(msgs[0].2.starts_with("You are OpenHands agent, a helpful AI assistant that can interact with a computer"));
    // Event 1: the MessageAction from `user`, the instruction.
    assert_eq!((msgs[1].0.as_str(), msgs[1].1.as_deref(), msgs[1].2.as_str()), ("user", Some("human"), instruction));
    // Event 5: the text of the LLM response that ran `ls -l` (its `thought`), said
    // before the call, with that response's usage (5920 prompt, 128 completion tokens)
    // and the model the response names.
    let m = ep.messages.as_ref().unwrap();
    assert_eq!(m[2].role, "assistant");
    let text = m[2].text.as_deref().unwrap();
    assert!(text.starts_with("The task involves fixing an issue in the `ponylang__ponyc__0.1` repository"), "{text}");
    assert_eq!((m[2].tokens_in, m[2].tokens_out), (Some(5920), Some(128)));
    assert_eq!(m[2].model.as_deref(), Some("meta-llama/llama-4-maverick"));
    // Then the call (toolu_01, execute_bash), its tools record, and its result.
    assert_eq!((m[3].role.as_str(), m[3].tool_call_id.as_deref()), ("assistant", Some("toolu_01")));
    assert_eq!(m[3].tool.as_deref(), Some("execute_bash"));
    let args: Value = serde_json::from_str(m[3].arguments.as_deref().unwrap()).unwrap();
    assert_eq!(args, json!({"command": "ls -l /workspace/ponylang__ponyc__0.1"})); // the function arguments
    let result = m.iter().find(|r| r.role == "tool" && r.tool_call_id.as_deref() == Some("toolu_01")).unwrap();
    assert_eq!((result.tool_seq, result.is_error, result.text.as_deref()), (m[3].tool_seq, Some(false), None));
    // Event 47 (think): the response's own text, not the think argument the action's
    // `thought` appends to it; the argument is the call's.
    let think =
        "It seems that the `ponyc` compiler is not available in the `/workspace/ponylang__ponyc__0.1/build/bin` \
                 directory.\n\nLet's try to verify if the issue is fixed by checking the conversation history and the \
                 changes made.";
    assert!(msgs.iter().any(|(r, a, t)| r == "assistant" && a.is_none() && t == think));
    let think_call = m.iter().find(|r| r.role == "assistant" && r.tool_call_id.as_deref() == Some("toolu_22")).unwrap();
    assert!(think_call.arguments.as_deref().unwrap().starts_with(r#"{"thought":"Re-read the problem description"#));

    // Event 16 answers event 15 `grep -n "DECL(pattern);" ...` (toolu_06).
    let (path, bytes) = output_of(run, "toolu_06");
    assert_eq!(bytes, b"29:DECL(pattern);");
    let t = tool_of(ep, "toolu_06");
    assert_eq!((t.output_text.as_deref(), t.output_bytes), (Some("29:DECL(pattern);"), Some(17)));
    assert!(path.ends_with(".txt"));
    // Event 36 answers event 35 (toolu_16): exit code 127, an error result.
    assert_eq!(output_of(run, "toolu_16").1, b"bash: ponyc: command not found");
    let failed = m.iter().find(|r| r.role == "tool" && r.tool_call_id.as_deref() == Some("toolu_16")).unwrap();
    assert_eq!(failed.is_error, Some(true));
    // Event 28 answers the str_replace of event 27 (toolu_12) with the editor's `ERROR:`.
    let (_, bytes) = output_of(run, "toolu_12");
    assert!(bytes.starts_with(b"ERROR:\nNo replacement was performed, old_str `DEF(idseqsingle);"));
    // Event 49's `finish` (toolu_23) has no observation: no output file.
    assert_eq!(tool_of(ep, "toolu_23").output, None);

    // The str_replace_editor edit of event 31 (toolu_14): event 32's `extras.diff`, on the
    // file's own lines (695/696), headers made relative to the working directory
    // /workspace/ponylang__ponyc__0.1. The failed edit of event 27 has no diff.
    let edits: Vec<_> =
        ep.actions.iter().flatten().filter(|a| a.kind.as_deref() == Some("edit") && a.mutates).collect();
    assert_eq!(edits[0].diff, None); // 27: "No replacement was performed"
    assert_eq!(
        edits[1].diff.as_deref(),
        Some(
            "--- a/src/libponyc/ast/parser.c\n+++ b/src/libponyc/ast/parser.c\n@@ -695,0 +696 @@\n\
             +  SET_FLAG(AST_FLAG_IN_PARENS);\n"
        )
    );
    assert_eq!(edits[1].common.seq, tool_of(ep, "toolu_14").common.seq + 1);
    // A file-numbered diff: nothing to note; the log's own git_patch stays patch.diff.
    let notes = ep.manifest.provenance().unwrap()["notes"].to_string();
    assert!(!notes.contains("numbered within"), "{notes}");
    assert!(!notes.contains("patch.diff is derived"), "{notes}");

    // Event 49's `final_thought` is the last word, not the response text before it.
    assert_eq!(
        ep.outcome.final_message.as_deref(),
        Some(
            "The issue with the `ponyc` compiler segfaulting when using a single-element tuple in a `match` \
             statement has been addressed by modifying the `idseqsingle` rule in `parser.c`. However, the `ponyc` \
             compiler was not built successfully, so the fix could not be verified."
        )
    );
}

/// trajs_wrong_initial_state.json: "Please rename game_2048.py to 2048.py".
#[test]
fn a_trajectorys_conversation_and_outputs() {
    let run = one("openhands/trajs_wrong_initial_state.json");
    let ep = &run.package.episode;
    // Event 0: the person's message is the task.
    assert_eq!(ep.manifest.task_prompt.as_deref(), Some("Please rename game_2048.py to 2048.py"));
    let msgs = said(ep);
    let s = |r: &str, a: Option<&str>, t: &str| (r.to_string(), a.map(str::to_string), t.to_string());
    assert_eq!(
        msgs,
        [
            s("user", Some("human"), "Please rename game_2048.py to 2048.py"), // 0
            // 3, 5, 7, 9: each response's text before its call.
            s(
                "assistant",
                None,
                "I'll help you rename the file. First, let me check if the file exists and its location."
            ),
            s("assistant", None, "Great, I found the file. Now I'll use the bash command `mv` to rename it."),
            s("assistant", None, "Let me verify that the file was renamed successfully:"),
            s(
                "assistant",
                None,
                "The file has been successfully renamed from `game_2048.py` to `2048.py`. Is there anything else you \
                 need help with?"
            ),
        ]
    );
    // Event 3's response usage: 3475 prompt, 95 completion tokens.
    let first = ep.messages.iter().flatten().find(|m| m.role == "assistant").unwrap();
    assert_eq!((first.tokens_in, first.tokens_out), (Some(3475), Some(95)));
    assert_eq!(first.model.as_deref(), Some("claude-3-5-sonnet-20241022"));
    // Event 4 answers the view of event 3 (toolu_01USom24cuiyvAembLhEryrn).
    assert_eq!(
        output_of(&run, "toolu_01USom24cuiyvAembLhEryrn").1,
        b"Here's the files and directories up to 2 levels deep in /workspace, excluding hidden items:\n/workspace/\n\
          /workspace/game_2048.py"
    );
    // Event 6: `mv` printed nothing (content "", exit 0): a 0-byte file, not none.
    let (_, bytes) = output_of(&run, "toolu_01PuY3mXrE6fm3j52GscR4rj");
    assert!(bytes.is_empty());
    let mv = tool_of(ep, "toolu_01PuY3mXrE6fm3j52GscR4rj");
    assert_eq!((mv.output_text.as_deref(), mv.output_bytes), (Some(""), Some(0)));
    // Its arguments as the response gives them (`is_input` a string there).
    let call = ep.messages.iter().flatten().find(|m| m.tool_seq == Some(mv.common.seq)).unwrap();
    let args: Value = serde_json::from_str(call.arguments.as_deref().unwrap()).unwrap();
    assert_eq!(args, json!({"command": "mv /workspace/game_2048.py /workspace/2048.py", "is_input": "false"}));
    // Event 9's finish has no final_thought (this version's finish takes no message):
    // the response's text said before it is the last word.
    assert_eq!(
        ep.outcome.final_message.as_deref(),
        Some("The file has been successfully renamed from `game_2048.py` to `2048.py`. Is there anything else you need help with?")
    );
}

/// trajs_basic.json: one str_replace_editor `create` (event 3), answered by event 4.
#[test]
fn a_created_files_diff_is_its_text() {
    let run = one("openhands/trajs_basic.json");
    let ep = &run.package.episode;
    let text: Value =
        serde_json::from_str(&std::fs::read_to_string(crate::testing::fixture("openhands/trajs_basic.json")).unwrap())
            .unwrap();
    // Event 4's `extras.new_content`: the file as created (117 lines, no final newline).
    let created = text[2]["extras"]["new_content"].as_str().unwrap();
    assert!(created.starts_with("import random\nimport keyboard\n"));
    let create = ep.actions.iter().flatten().find(|a| a.kind.as_deref() == Some("create")).unwrap();
    let diff = create.diff.as_deref().unwrap();
    // No working directory is known (no command ran): the path stays as the log has it.
    assert!(
        diff.starts_with("--- /dev/null\n+++ b/workspace/game_2048.py\n@@ -0,0 +1,117 @@\n+import random\n"),
        "{diff}"
    );
    assert!(diff.ends_with("+    main()\n\\ No newline at end of file\n"), "{diff}");
    // Event 4's content (OpenHands' own rendering of the change) is the call's output.
    let (_, bytes) = output_of(&run, "toolu_017nBp7UfiGqyrA7j77HgtFP");
    assert!(bytes.starts_with(b"--- /workspace/game_2048.py\n+++ /workspace/game_2048.py\n@@ -0,0 +1,2 @@\n"));
    // The log has no patch: patch.diff is the edit's diff, noted as derived.
    assert_eq!(run.package.raw.file("patch.diff").unwrap(), diff.as_bytes());
    let notes = ep.manifest.provenance().unwrap()["notes"].to_string();
    assert!(notes.contains("patch.diff is derived"), "{notes}");
    // Event 0 the task; event 5's finish (no final_thought): its response text last.
    assert_eq!(
        ep.manifest.task_prompt.as_deref(),
        Some("Please create a simple 2048 game. No need to run it. Please finish the interaction after your finish coding.")
    );
    assert!(ep
        .outcome
        .final_message
        .as_deref()
        .unwrap()
        .starts_with("I've created a simple implementation of the 2048 game"));
}

/// trajs_basic_interactions.json: a person answers twice after the prompt (events 6, 12).
#[test]
fn a_persons_later_messages_are_human_messages() {
    let run = one("openhands/trajs_basic_interactions.json");
    let ep = &run.package.episode;
    let msgs: Vec<_> = said(ep).into_iter().map(|(r, a, t)| (r, a, t.chars().take(40).collect::<String>())).collect();
    let s = |r: &str, a: Option<&str>, t: &str| (r.to_string(), a.map(str::to_string), t.to_string());
    assert_eq!(
        msgs,
        [
            s("user", Some("human"), "what's 1+1?"),                          // 0
            s("assistant", None, "1 + 1 equals 2."),                          // 3
            s("user", Some("human"), "No, I mean by Goldbach's conjecture!"), // 6
            s("assistant", None, "Goldbach's conjecture is an unsolved pro"), // 9
            s("user", Some("human"), "Finish please"),                        // 12
        ]
    );
    assert_eq!(ep.manifest.task_prompt.as_deref(), Some("what's 1+1?"));
    // Event 15's finish says nothing (thought ""): event 9 is the agent's last word.
    assert!(ep.outcome.final_message.as_deref().unwrap().starts_with("Goldbach's conjecture is an unsolved problem"));
}

/// Line 2 (ponylang__ponyc-4593): event 29 is an error no action caused (a malformed
/// call); OpenHands puts it to the agent as a user message the harness wrote.
#[test]
fn an_unanswered_error_is_the_harness_speaking() {
    let runs = import_ok(&[JSONL], &Options::default());
    let msgs = said(&runs[1].package.episode);
    let harness: Vec<_> = msgs.iter().filter(|(_, a, _)| a.as_deref() == Some("harness")).collect();
    assert_eq!(harness.len(), 1);
    assert_eq!(harness[0].0, "user");
    assert!(harness[0].2.starts_with("Parameter 'command' is expected to be one of ['view', 'create'"));
}
