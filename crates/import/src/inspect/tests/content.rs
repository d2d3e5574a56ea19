//! The run's content (docs/format.md §9): the messages trace, each call's output file,
//! the text editor's diffs, the task prompt and the final message. On the real logs
//! (read by hand, cited by event index in the sample's `events` and by message index
//! in its `messages` or message pool), then on small logs in the real shape for what
//! the fixtures lack (the text editor, thinking, subagents, the chunked pool).

use epistore_package::{Episode, Message, Tool};
use serde_json::{json, Value};
use zip::CompressionMethod;

use super::written::{header, sample, span, tool_event, write_eval, write_zip};
use super::{file, BROWSER, DEDUP, INPUT_TASK, TITLECASE};
use crate::testing::{import_ok, import_paths};
use crate::{Options, Run};

fn run(rel: &str) -> Run {
    let mut runs = import_ok(&[rel], &Options::default());
    assert_eq!(runs.len(), 1, "{rel}");
    runs.remove(0)
}

fn messages(ep: &Episode) -> &[Message] {
    ep.messages.as_deref().expect("the messages trace is recorded")
}

fn tools_of(ep: &Episode) -> &[Tool] {
    ep.tools.as_deref().unwrap()
}

/// Role, author and text of every message, in `seq` order.
fn said(ep: &Episode) -> Vec<(String, Option<String>, Option<String>)> {
    messages(ep).iter().map(|m| (m.role.clone(), m.author.clone(), m.text.clone())).collect()
}

/// A tool call's output file, read through its `tools.output`.
fn output(run: &Run, tool: &Tool) -> Vec<u8> {
    let path = tool.output.as_deref().expect("the call's output is named");
    assert_eq!(path, format!("artifacts/tool-output/{}.txt", tool.common.seq));
    file(run, path)
}

/// The zstd log, sample member `samples/title-case_epoch_1.json`: its ModelEvents keep
/// their input in the pool `events_data.messages` (`input_refs`), long texts in
/// `attachments`.
#[test]
fn titlecase_messages_outputs_prompt_and_final_message() {
    let run = run(TITLECASE);
    let ep = &run.package.episode;
    let m = messages(ep);
    // 1 system + 1 user, then 5 replies, each followed by its call and result.
    assert_eq!(m.len(), 17);
    // events_data.messages[0]: the react() system prompt, `attachment://15d1d938...`.
    assert_eq!(m[0].role, "system");
    let system = m[0].text.as_deref().unwrap();
    assert!(system.starts_with("\nYou are a helpful assistant attempting to submit the best possible answer."));
    // events_data.messages[1]: the sample's input (`source: input`), no author.
    let task = "title() must capitalise each word. Fix text.py so that `python3 test_title.py` passes, then submit.";
    assert_eq!((m[1].role.as_str(), m[1].author.as_deref(), m[1].text.as_deref()), ("user", None, Some(task)));
    // events[9], the first ModelEvent: output choices[0].message and usage 150 / 25.
    assert_eq!((m[2].role.as_str(), m[2].text.as_deref()), ("assistant", Some("Look and run the test.")));
    assert_eq!(m[2].model.as_deref(), Some("mockllm/model"));
    assert_eq!((m[2].tokens_in, m[2].tokens_out), (Some(150), Some(25)));
    assert_eq!(m[2].common.ts.as_deref(), Some("2026-12-01T09:16:58.234991+00:00")); // its `completed`
                                                                                     // events[11], the ToolEvent of that reply's call: the call, then its result.
    let t = tools_of(ep);
    let call_id = "for_tool_call_36d4ab1d-c3c4-4b60-84f7-cbdcfc9e19f2";
    assert_eq!((m[3].role.as_str(), m[3].tool.as_deref()), ("assistant", Some("bash")));
    assert_eq!(m[3].tool_call_id.as_deref(), Some(call_id));
    let args: Value = serde_json::from_str(m[3].arguments.as_deref().unwrap()).unwrap();
    assert_eq!(args, json!({"command": "cat text.py && python3 test_title.py"}));
    assert_eq!(m[3].tool_seq, Some(t[0].common.seq));
    assert_eq!((m[4].role.as_str(), m[4].tool_call_id.as_deref()), ("tool", Some(call_id)));
    assert_eq!((m[4].tool_seq, m[4].is_error, m[4].text.as_deref()), (Some(t[0].common.seq), Some(false), None));
    // The replies of events 14, 19, 24, 29, in order.
    let replies: Vec<&str> =
        m.iter().filter(|m| m.role == "assistant" && m.tool.is_none()).map(|m| m.text.as_deref().unwrap()).collect();
    assert_eq!(replies, ["Look and run the test.", "Use str.title.", "Re-run.", "Try pytest too.", "Submitting."]);

    // events[11].result (attachment 44e351bc...): the traceback, then `cat text.py`.
    let traceback = "Traceback (most recent call last):\n  File \"/tmp/tmp9h3mc0n2/test_title.py\", line 2, in <module>\n    assert title('hello world') == 'Hello World', title('hello world')\n           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\nAssertionError: HELLO WORLD\n\ndef title(s):\n    return s.upper()\n";
    assert_eq!(output(&run, &t[0]), traceback.as_bytes());
    assert_eq!(t[0].output_text.as_deref(), Some(traceback));
    // events[16].result is "": the call printed nothing, a 0-byte file.
    assert_eq!(output(&run, &t[1]), b"");
    assert_eq!(t[1].output_bytes, Some(0));
    // events[21].result; events[31], the submit call: its result is the answer.
    assert_eq!(output(&run, &t[2]), b"title ok\ndone\n");
    assert_eq!(output(&run, &t[4]), b"title() now uses str.title(); test_title.py passes.");

    assert_eq!(ep.manifest.task_prompt.as_deref(), Some(task)); // the sample's `input`
                                                                // The agent submitted: the sample's output.completion, react()'s last reply with the
                                                                // answer appended (also scores.tests_pass.answer), not the bare "Submitting.".
    assert_eq!(
        ep.outcome.final_message.as_deref(),
        Some("Submitting.\n\ntitle() now uses str.title(); test_title.py passes.")
    );
}

/// Inspect's `log_message_deduplication.eval`, member `samples/0_epoch_1.json`: the
/// inputs in the sample's `message_pool`, each ModelEvent naming a prefix of it.
#[test]
fn message_pool_is_read_once_per_message() {
    let run = run(DEDUP);
    let ep = &run.package.episode;
    let s = said(ep);
    let ls = "Executing bash with args: {'cmd': 'ls'}";
    // message_pool[0], the input; then events 8, 13, 18, 23, 28 reply `ls` and call bash
    // (events 10 ... 30); event 33 replies "done". Each pool message once.
    assert_eq!(s.len(), 17);
    assert_eq!(s[0], ("user".into(), None, Some("Guess the number".into())));
    for turn in 0..5 {
        assert_eq!(s[1 + 3 * turn], ("assistant".into(), None, Some(ls.into())), "turn {turn}");
        assert_eq!((s[2 + 3 * turn].0.as_str(), s[3 + 3 * turn].0.as_str()), ("assistant", "tool"));
    }
    assert_eq!(s[16], ("assistant".into(), None, Some("done".into())));
    let m = messages(ep);
    assert_eq!(m[1].model.as_deref(), Some("hardcoded/hardcoded")); // events[8].model
    assert_eq!((m[1].tokens_in, m[1].tokens_out), (None, None)); // the outputs carry no usage
    assert_eq!(m[2].tool_call_id.as_deref(), Some("hardcoded_0")); // events[10].id
                                                                   // events[10].result, the same listing each time.
    let listing =
        "bin\nboot\ndev\netc\nhome\nlib\nlib64\nmedia\nmnt\nopt\nproc\nroot\nrun\nsbin\nsrv\nsys\ntmp\nusr\nvar\n";
    for t in tools_of(ep) {
        assert_eq!(output(&run, t), listing.as_bytes());
    }
    assert_eq!(ep.manifest.task_prompt.as_deref(), Some("Guess the number"));
    assert_eq!(ep.outcome.final_message.as_deref(), Some("done")); // no submit: the last reply
}

/// The oldest log (0.3.43), member `samples/1_epoch_1.json`: no message ids, inputs
/// inline in the ModelEvent; a person typed the second user message (line 99, the
/// InputEvent); the scorer's own model call (line 280) is not the agent's.
#[test]
fn first_logs_people_and_scorers() {
    let run = run(INPUT_TASK);
    let ep = &run.package.episode;
    let hipster =
        "Hey there, hipster! Please answer any questions that I answer using the type of lingo that Gen Z would use.";
    let question = "What is the average temperature in International Falls, MN during the month of February?";
    let s = said(ep);
    assert_eq!(s.len(), 3, "{s:?}");
    assert_eq!(s[0], ("user".into(), None, Some(hipster.into()))); // the sample input
    assert_eq!(s[1], ("user".into(), Some("human".into()), Some(question.into()))); // typed
    let reply = &messages(ep)[2];
    assert_eq!(reply.role, "assistant");
    assert!(reply.text.as_deref().unwrap().starts_with("Yo, fam! So, in February, International Falls"));
    assert_eq!(reply.model.as_deref(), Some("openai/gpt-4o-mini")); // the event's model (line 133)
    assert_eq!((reply.tokens_in, reply.tokens_out), (Some(52), Some(61))); // output.usage
    assert_eq!(ep.manifest.task_prompt.as_deref(), Some(hipster));
    assert_eq!(ep.outcome.final_message, reply.text);
}

/// The `.json` log `..._browser.json`, samples[0]: replies that only call tools have
/// no text, only their usage (a record of its own before the call, which is the
/// recorder's message); the last one summarises.
#[test]
fn json_log_tool_only_replies_and_outputs() {
    let run = run(BROWSER);
    let ep = &run.package.episode;
    let m = messages(ep);
    let roles: Vec<&str> = m.iter().map(|m| m.role.as_str()).collect();
    let turn = ["assistant", "assistant", "tool"];
    let expected: Vec<&str> = std::iter::once("user").chain(turn.repeat(4)).chain(["assistant"]).collect();
    assert_eq!(roles, expected);
    for usage in [&m[1], &m[4], &m[7], &m[10]] {
        assert_eq!((usage.text.as_deref(), usage.tool_call_id.as_deref()), (None, None));
        assert!(usage.tokens_in.is_some() && usage.tokens_out.is_some(), "{usage:?}");
    }
    // events[36]: the summary, attachment 707c70d5..., usage 5915 / 207.
    let last = m.last().unwrap();
    assert!(last.text.as_deref().unwrap().starts_with("The AI Security Institute (AISI) is the premier governmental"));
    assert_eq!((last.tokens_in, last.tokens_out), (Some(5915), Some(207)));
    assert_eq!(ep.outcome.final_message, last.text);
    // events[9].result: the page's accessibility tree.
    let t = tools_of(ep);
    assert!(output(&run, &t[0]).starts_with(b"[132] link \"We are now the AI Security Institute\""));
    assert_eq!(m[2].tool_call_id.as_deref(), Some("call_35FTpd6shR9efioDgeEBZ33s"));
}

fn model_event(span_id: &str, input: Value, reply: Value, usage: Option<(i64, i64)>) -> Value {
    let mut output = json!({"model": "claude-x", "choices": [{"message": reply, "stop_reason": "stop"}]});
    if let Some((i, o)) = usage {
        output["usage"] = json!({"input_tokens": i, "output_tokens": o, "total_tokens": i + o});
    }
    json!({"event": "model", "model": "anthropic/claude-x", "span_id": span_id, "input": input, "output": output,
           "timestamp": "2026-01-01T00:00:01+00:00", "completed": "2026-01-01T00:00:02+00:00"})
}

fn editor(id: &str, span_id: &str, args: Value, result: &str, error: Option<Value>) -> Value {
    let mut e = tool_event(id, "text_editor", args, span_id, error);
    e["result"] = json!(result);
    e
}

/// What Inspect's editor answers a `str_replace` or `insert` (inspect_tool_support
/// `_text_editor/text_editor.py`: `_make_output` of the snippet).
fn edited(path: &str, first: usize, lines: &[&str]) -> String {
    let rows: Vec<String> = lines.iter().enumerate().map(|(i, l)| format!("{:6}\t{l}", first + i)).collect();
    format!(
        "The file {path} has been edited. Here's the result of running `cat -n` on a snippet of {path}:\n{}\nReview the changes and make sure they are as expected. Edit the file again if necessary.",
        rows.join("\n")
    )
}

/// A react() agent with the text editor: create, a replacement and an insert placed in
/// the file by their snippets, a failed replacement, one whose result shows no snippet
/// (a fragment), an undo; thinking, the harness's continue prompt, a subagent.
#[test]
fn text_editor_diffs_and_the_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let a = "agent";
    let path = "/repo/app.py";
    let system = json!({"id": "s", "role": "system", "content": "You edit files."});
    let task = json!({"id": "u", "role": "user", "content": "fix it", "source": "input"});
    let r1 = json!({"id": "r1", "role": "assistant", "content": [
        {"type": "reasoning", "reasoning": "Plan: create, then edit."},
        {"type": "text", "text": "Creating the file."}],
        "tool_calls": [{"id": "c1", "function": "text_editor", "arguments": {}}]});
    let proceed =
        json!({"id": "h1", "role": "user", "content": "Please proceed to the next step using your best judgement."});
    let r2 = json!({"id": "r2", "role": "assistant", "content": "Editing.", "tool_calls": [{"id": "c2"}]});
    let tool_msg = json!({"id": "tm1", "role": "tool", "tool_call_id": "c1", "content": "File created"});
    let done = json!({"id": "r9", "role": "assistant", "content": "Done: b is 20 and d is 40."});
    let events = vec![
        span(a, "", "agent", "react"),
        model_event(a, json!([system, task]), r1.clone(), Some((100, 20))),
        span("t1", a, "tool", "text_editor"),
        editor(
            "c1",
            a,
            json!({"command": "create", "path": path, "file_text": "a = 1\nb = 2\nc = 3\n"}),
            "File created successfully at: /repo/app.py",
            None,
        ),
        model_event(a, json!([system, task, r1, tool_msg, proceed]), r2.clone(), Some((300, 10))),
        span("t2", a, "tool", "text_editor"),
        editor(
            "c2",
            a,
            json!({"command": "str_replace", "path": path, "old_str": "b = 2", "new_str": "b = 20"}),
            &edited(path, 1, &["a = 1", "b = 20", "c = 3", ""]),
            None,
        ),
        span("t3", a, "tool", "text_editor"),
        editor(
            "c3",
            a,
            json!({"command": "insert", "path": path, "insert_line": 3, "new_str": "d = 4"}),
            &edited(path, 1, &["a = 1", "b = 20", "c = 3", "d = 4", ""]),
            None,
        ),
        span("t4", a, "tool", "text_editor"),
        editor(
            "c4",
            a,
            json!({"command": "str_replace", "path": path, "old_str": "zzz", "new_str": "y"}),
            "",
            Some(
                json!({"type": "unknown", "message": "No replacement was performed, old_str `zzz` did not appear verbatim in /repo/app.py."}),
            ),
        ),
        span("t5", a, "tool", "text_editor"),
        editor(
            "c5",
            a,
            json!({"command": "str_replace", "path": path, "old_str": "d = 4", "new_str": "d = 40"}),
            "OK",
            None,
        ),
        span("t6", a, "tool", "text_editor"),
        editor(
            "c6",
            a,
            json!({"command": "undo_edit", "path": path}),
            "Last edit to /repo/app.py undone successfully.",
            None,
        ),
        // An agent run as a tool: its spans nest in the agent's.
        span("t7", a, "tool", "researcher"),
        span("sub", "t7", "agent", "researcher"),
        model_event(
            "sub",
            json!([{"id": "su", "role": "user", "content": "look up x"}]),
            json!({"id": "sr", "role": "assistant", "content": "x is 1"}),
            None,
        ),
        model_event(a, json!([system, task, r1, tool_msg, proceed, r2]), done, Some((400, 12))),
    ];
    let log = write_eval(dir.path(), "editor.eval", &[sample("e1", events)], CompressionMethod::Zstd);
    let (plan, runs) = import_paths(&[log], &Options::default());
    assert!(plan.refused.is_empty());
    let run = runs.into_iter().next().unwrap().unwrap();
    let ep = &run.package.episode;

    let created = "--- /dev/null\n+++ b/repo/app.py\n@@ -0,0 +1,3 @@\n+a = 1\n+b = 2\n+c = 3\n";
    // Line 2 of the file, as the snippet numbers it (replacement line 1, 0-based).
    let replaced = "--- a/repo/app.py\n+++ b/repo/app.py\n@@ -1,3 +1,3 @@\n a = 1\n-b = 2\n+b = 20\n c = 3\n";
    let inserted = "--- a/repo/app.py\n+++ b/repo/app.py\n@@ -1,3 +1,4 @@\n a = 1\n b = 20\n c = 3\n+d = 4\n";
    // No snippet in the result: numbered within the replaced text.
    let fragment = "--- a/repo/app.py\n+++ b/repo/app.py\n@@ -1 +1 @@\n-d = 4\n\\ No newline at end of file\n+d = 40\n\\ No newline at end of file\n";
    let edits: Vec<(bool, Option<&str>)> =
        ep.actions.as_ref().unwrap().iter().filter(|a| a.mutates).map(|a| (a.ok, a.diff.as_deref())).collect();
    assert_eq!(
        edits,
        [
            (true, Some(created)),
            (true, Some(replaced)),
            (true, Some(inserted)),
            (false, None), // failed: changed nothing
            (true, Some(fragment)),
            (true, None), // undo_edit: the log shows the file after, not before
        ]
    );
    assert_eq!(file(&run, "patch.diff"), format!("{created}{replaced}{inserted}{fragment}").into_bytes());
    let notes = ep.manifest.provenance().unwrap()["notes"].to_string();
    assert!(notes.contains("numbered within the replaced text"), "{notes}");
    assert!(notes.contains("patch.diff is derived"), "{notes}");
    // The failed call's output is the error it reported; its result message says so.
    let t = tools_of(ep);
    assert!(output(&run, &t[3]).starts_with(b"No replacement was performed"));
    let result = messages(ep).iter().find(|m| m.role == "tool" && m.tool_call_id.as_deref() == Some("c4")).unwrap();
    assert_eq!(result.is_error, Some(true));

    let said: Vec<(&str, Option<&str>, Option<&str>)> = messages(ep)
        .iter()
        .filter(|m| m.tool.is_none())
        .map(|m| (m.role.as_str(), m.author.as_deref(), m.text.as_deref()))
        .collect();
    assert_eq!(
        said,
        [
            ("system", None, Some("You edit files.")),
            ("user", None, Some("fix it")),
            ("assistant", None, Some("Creating the file.")),
            ("user", Some("harness"), Some("Please proceed to the next step using your best judgement.")),
            ("assistant", None, Some("Editing.")),
            ("user", Some("harness"), Some("look up x")), // what the agent asked its subagent
            ("assistant", Some("researcher"), Some("x is 1")),
            ("assistant", None, Some("Done: b is 20 and d is 40.")),
        ]
    );
    let first = messages(ep).iter().find(|m| m.text.as_deref() == Some("Creating the file.")).unwrap();
    assert_eq!(first.reasoning.as_deref(), Some("Plan: create, then edit."));
    assert_eq!(
        (first.tokens_in, first.tokens_out, first.model.as_deref()),
        (Some(100), Some(20), Some("anthropic/claude-x"))
    );
    assert_eq!(ep.manifest.task_prompt.as_deref(), Some("fix it"));
    // No submission: the agent's last reply (the subagent's does not count).
    assert_eq!(ep.outcome.final_message.as_deref(), Some("Done: b is 20 and d is 40."));
}

/// A chunked sample keeps the model inputs in `messages/N.json` chunks, their long
/// texts as `attachment://N`; a sample with no model call keeps only its `messages`.
#[test]
fn chunked_pool_and_a_sample_without_model_calls() {
    let dir = tempfile::tempdir().unwrap();
    let shell = json!({"id": 1, "epoch": 1, "input": "attachment://0", "scores": {}});
    let event = json!({"event": "model", "model": "openai/gpt-5", "input": [], "input_refs": [[0, 2]],
        "timestamp": "2026-01-01T00:00:01+00:00",
        "output": {"choices": [{"message": {"id": "r", "role": "assistant", "content": "ok"}}],
                   "usage": {"input_tokens": 7, "output_tokens": 1}}});
    let pool = json!([{"id": "s", "role": "system", "content": "be brief"}, {"id": "u", "role": "user", "content": "attachment://0", "source": "input"}]);
    let members: Vec<(String, Vec<u8>)> = vec![
        ("header.json".into(), header().to_string().into_bytes()),
        ("samples/1_epoch_1/sample.json".into(), shell.to_string().into_bytes()),
        ("samples/1_epoch_1/events/0.json".into(), json!([event]).to_string().into_bytes()),
        ("samples/1_epoch_1/messages/0.json".into(), pool.to_string().into_bytes()),
        ("samples/1_epoch_1/attachments/0.json".into(), json!(["a long task"]).to_string().into_bytes()),
    ];
    let log = write_zip(dir.path(), "chunked.eval", &members, CompressionMethod::Deflated);
    let (_, runs) = import_paths(&[log], &Options::default());
    let ep = runs.into_iter().next().unwrap().unwrap().package.episode;
    assert_eq!(
        said(&ep),
        [
            ("system".into(), None, Some("be brief".into())),
            ("user".into(), None, Some("a long task".into())),
            ("assistant".into(), None, Some("ok".into())),
        ]
    );
    assert_eq!(ep.manifest.task_prompt.as_deref(), Some("a long task"));

    // No ModelEvent at all (a run stopped before its first call): the sample's messages.
    let mut s = sample("n", vec![]);
    s["messages"] =
        json!([{"role": "system", "content": "sys"}, {"role": "user", "content": "fix it", "source": "input"}]);
    let log = write_eval(dir.path(), "none.eval", &[s], CompressionMethod::Deflated);
    let (_, runs) = import_paths(&[log], &Options::default());
    let ep = runs.into_iter().next().unwrap().unwrap().package.episode;
    assert_eq!(said(&ep), [("system".into(), None, Some("sys".into())), ("user".into(), None, Some("fix it".into()))]);
    assert_eq!(ep.outcome.final_message, None);
}
