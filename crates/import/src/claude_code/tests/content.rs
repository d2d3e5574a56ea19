//! The run's content (docs/format.md §9): messages, tool output files, edit diffs, the
//! task prompt and final message, read by hand from the fixtures (each expected value
//! names its log line) and from logs written here for what the fixtures lack.

use epistore_package::{Episode, Message, Tool};
use serde_json::{json, Value};

use super::{notes, one, tools, write_temp, BIG, BIG_COMPACT, BIG_SUB, GENERATED, STREAM};
use crate::testing::import_paths;
use crate::{Options, Run};

fn messages(e: &Episode) -> &[Message] {
    e.messages.as_deref().expect("the messages trace is recorded")
}

/// The parts the importer said itself (not a tool call's call or result record, not a
/// reply's usage alone), as (role, author, text or reasoning).
fn said(e: &Episode) -> Vec<(&str, Option<&str>, &str)> {
    messages(e)
        .iter()
        .filter(|m| m.tool.is_none())
        .filter_map(|m| Some((m.role.as_str(), m.author.as_deref(), m.text.as_deref().or(m.reasoning.as_deref())?)))
        .collect()
}

/// Each said part begins as expected, in this order.
fn assert_said(got: &[(&str, Option<&str>, &str)], want: &[(&str, Option<&str>, &str)]) {
    let show: Vec<_> = got.iter().map(|(r, a, t)| (*r, *a, t.chars().take(50).collect::<String>())).collect();
    assert_eq!(got.len(), want.len(), "{show:#?}");
    for (g, w) in got.iter().zip(want) {
        assert!(g.0 == w.0 && g.1 == w.1 && g.2.starts_with(w.2), "{g:?} is not {w:?}");
    }
}

/// The first message part whose text or reasoning begins with `prefix`.
fn part<'e>(e: &'e Episode, prefix: &str) -> &'e Message {
    messages(e)
        .iter()
        .find(|m| m.text.as_deref().or(m.reasoning.as_deref()).is_some_and(|t| t.starts_with(prefix)))
        .unwrap_or_else(|| panic!("no message part begins {prefix:?}"))
}

/// The tools record of the call with this `tool_use` id, by its messages.
fn call<'e>(e: &'e Episode, id: &str) -> &'e Tool {
    let m = messages(e).iter().find(|m| m.tool_call_id.as_deref() == Some(id) && m.role == "assistant").unwrap();
    tools(e).iter().find(|t| Some(t.common.seq) == m.tool_seq).unwrap()
}

/// The bytes of a call's output file, checked to be the one `tools.output` names.
fn output<'r>(run: &'r Run, t: &Tool) -> &'r str {
    let path = format!("artifacts/tool-output/{}.txt", t.common.seq);
    assert_eq!(t.output.as_deref(), Some(path.as_str()));
    std::str::from_utf8(run.package.raw.file(&path).expect("the output file")).unwrap()
}

/// The call and result records around a tools record.
fn call_and_result<'e>(e: &'e Episode, t: &Tool) -> (&'e Message, &'e Message) {
    let around: Vec<&Message> = messages(e).iter().filter(|m| m.tool_seq == Some(t.common.seq)).collect();
    assert_eq!(around.len(), 2);
    assert!(around[0].common.seq < t.common.seq && t.common.seq < around[1].common.seq);
    (around[0], around[1])
}

fn diffs(e: &Episode) -> Vec<&str> {
    e.actions.as_deref().unwrap().iter().filter_map(|a| a.diff.as_deref()).collect()
}

/// tool_heavy.jsonl: people, the harness's words, thinking, and what the tools printed.
#[test]
fn tool_heavy_content_by_hand() {
    let run = one(&["claude-code/tool_heavy.jsonl"]);
    let e = &run.package.episode;
    assert_said(
        &said(e),
        &[
            ("user", Some("human"), "start phoenix in background"), // line 4
            ("assistant", None, "Phoenix server is starting in the background."), // line 12
            ("user", Some("harness"), "[Request interrupted by user]"), // line 18
            ("user", Some("harness"), "<local-command-caveat>Caveat: The messages below"), // line 20, isMeta
            ("user", Some("human"), "<command-name>/mcp</command-name>"), // line 21
            ("user", Some("harness"), "<local-command-stdout>Reconnected to tidewave."), // line 22
            ("user", Some("human"), "<command-name>/mcp</command-name>"), // line 23, system local_command
            ("user", Some("harness"), "<local-command-stdout>MCP dialog dismissed"), // line 24
            ("user", Some("human"), "scrolling back in xterm.js still does not work"), // line 26
            ("assistant", None, "The user wants me to research why scrolling"), // line 28, thinking
            ("user", Some("harness"), "[Request interrupted by user]"), // line 39
        ],
    );
    // Line 12: message msg_01NUX..., usage 1 + 208 + 25798 in; line 13 (its last line) 1 out.
    let m = part(e, "Phoenix server is starting");
    assert_eq!(
        m.text.as_deref(),
        Some("Phoenix server is starting in the background.\n\nLet me check the MCP servers status.")
    );
    assert_eq!((m.model.as_deref(), m.tokens_in, m.tokens_out), (Some("claude-opus-4-6"), Some(26007), Some(1)));
    // Line 28: the thinking block of msg_01Lbyj... (3 + 8490 + 18014 in, 11 out); the
    // blank text block of line 27 says nothing.
    let m = part(e, "The user wants me to research");
    assert_eq!(
        m.reasoning.as_deref(),
        Some("The user wants me to research why scrolling in xterm.js doesn't work, possibly because the outer webpage is catching scroll events. Let me search for this.")
    );
    assert_eq!((m.role.as_str(), m.text.as_deref()), ("assistant", None));
    assert_eq!((m.model.as_deref(), m.tokens_in, m.tokens_out), (Some("claude-opus-4-6"), Some(26507), Some(11)));

    // Line 5: the backgrounded `mix phx.server`; line 11 its tool_result.
    let t = call(e, "toolu_018GZVh9ymkrdx1TnR8reg5Y");
    let printed = "Command running in background with ID: bae407b. Output is being written to: /tmp/claude-1000/-home-marco-projects-spotter/tasks/bae407b.output";
    assert_eq!(output(&run, t), printed);
    assert_eq!(t.output_text.as_deref(), Some(printed));
    assert_eq!(t.output_bytes, Some(142));
    let (c, r) = call_and_result(e, t);
    assert_eq!((c.role.as_str(), c.tool.as_deref()), ("assistant", Some("Bash")));
    let args: Value = serde_json::from_str(c.arguments.as_deref().unwrap()).unwrap();
    assert_eq!(
        args,
        json!({"command": "mix phx.server", "description": "Start Phoenix server in background", "run_in_background": true})
    );
    assert_eq!((r.role.as_str(), r.tool_call_id.as_deref()), ("tool", Some("toolu_018GZVh9ymkrdx1TnR8reg5Y")));
    assert_eq!((r.is_error, r.text.as_deref()), (Some(false), None)); // the output is the file
                                                                      // Line 30: Glob; line 32 its result.
    let t = call(e, "toolu_01JJds55jYrYwd9TktNGndRY");
    assert_eq!(output(&run, t), "/home/marco/projects/spotter/assets/js/app.js");
    // Line 13: `tail -5 ...`; line 17 what it printed.
    let t = call(e, "toolu_01FZ9TWbiy1LPzHm1AAyUazo");
    assert_eq!(
        output(&run, t),
        "  Serializer: Phoenix.Socket.V2.JSONSerializer\n  Parameters: %{\"vsn\" => \"2.0.0\"}\n\n23:58:02.670 [info] REFUSED JOIN terminal:%%2702 in 5ms\n  Parameters: %{}"
    );
    // Every call has its result in the log: every one has its file.
    assert!(tools(e).iter().all(|t| t.output.is_some()));

    // Line 4 is the task; line 12 the agent's last words (line 27's are blank).
    assert_eq!(e.manifest.task_prompt.as_deref(), Some("start phoenix in background"));
    assert_eq!(
        e.outcome.final_message.as_deref(),
        Some("Phoenix server is starting in the background.\n\nLet me check the MCP servers status.")
    );
    // No edits: no diff, no derived patch.
    assert!(diffs(e).is_empty());
    assert!(run.package.raw.file("patch.diff").is_none());
}

/// The 4d5611e5 session with its subagent files: thinking, usage, edit diffs from
/// `structuredPatch`, a created file, a failing push and the Task's report.
#[test]
fn big_session_content_by_hand() {
    let run = one(&[BIG, BIG_SUB, BIG_COMPACT]);
    let e = &run.package.episode;
    // Line 7: the person's first prompt, whole.
    let prompt = "Work on bead spotter-dov. Run bd show spotter-dov to see the issue details and bd ready to find available subtasks. Start with the first ready task.";
    assert_eq!(e.manifest.task_prompt.as_deref(), Some(prompt));
    assert_eq!(said(e)[0], ("user", Some("human"), prompt));
    // Line 9: thinking of msg_01PdWv... (lines 8-15: 3 + 15005 + 11442 in, 9 out); the
    // text block of line 8 is blank.
    let m = &messages(e)[1];
    assert_eq!(
        m.reasoning.as_deref(),
        Some("Let me start by checking the issue details and finding available subtasks.")
    );
    assert_eq!((m.role.as_str(), m.author.as_deref(), m.text.as_deref()), ("assistant", None, None));
    assert_eq!((m.model.as_deref(), m.tokens_in, m.tokens_out), (Some("claude-opus-4-6"), Some(26450), Some(9)));
    // Line 10's Bash call comes next, then its result record.
    assert_eq!(messages(e)[2].tool_call_id.as_deref(), Some("toolu_01UwLnYYWGBvukzh1QE6JpfM"));
    // Line 280: the person's "continue"; line 1502: the harness's task notification.
    assert_eq!(part(e, "continue").author.as_deref(), Some("human"));
    assert_eq!(part(e, "<task-notification>").author.as_deref(), Some("harness"));
    // Line 755: the compaction summary (isCompactSummary) is the harness's.
    assert_eq!(part(e, "This session is being continued").author.as_deref(), Some("harness"));

    // Line 202: Edit of session_live.ex adding TranscriptRenderer to the alias list; line
    // 212's structuredPatch: one hunk, oldStart 9, 6 lines -> newStart 9, 7 lines.
    let edit = e
        .actions
        .as_deref()
        .unwrap()
        .iter()
        .find(|a| a.tool_seq == Some(call(e, "toolu_01BwTVqrWowVGPrqDmgkN1S9").common.seq))
        .unwrap();
    assert_eq!(edit.paths, vec!["lib/spotter_web/live/session_live.ex".to_string()]);
    assert_eq!(
        edit.diff.as_deref(),
        Some(concat!(
            "--- a/lib/spotter_web/live/session_live.ex\n",
            "+++ b/lib/spotter_web/live/session_live.ex\n",
            "@@ -9,6 +9,7 @@\n",
            "     ReviewUpdates,\n",
            "     SessionRegistry,\n",
            "     Tmux,\n",
            "+    TranscriptRenderer,\n",
            "     TranscriptSync\n",
            "   }\n",
            " \n",
        ))
    );
    // Line 1198: the Edit in subagent_live.ex; line 1208: hunk 22,7 -> 22,7.
    let edit = e
        .actions
        .as_deref()
        .unwrap()
        .iter()
        .find(|a| a.tool_seq == Some(call(e, "toolu_01USjupwZL9hfrN5ZR63xiE5").common.seq));
    assert_eq!(
        edit.unwrap().diff.as_deref(),
        Some(concat!(
            "--- a/lib/spotter_web/live/subagent_live.ex\n",
            "+++ b/lib/spotter_web/live/subagent_live.ex\n",
            "@@ -22,7 +22,7 @@\n",
            "   def mount(%{\"session_id\" => session_id, \"agent_id\" => agent_id}, _session, socket) do\n",
            "     case load_subagent_data(session_id, agent_id) do\n",
            "       {:ok, session_record, subagent, messages, annotations} ->\n",
            "-        session_cwd = if session_record, do: session_record.cwd, else: nil\n",
            "+        session_cwd = session_record.cwd\n",
            " \n",
            "         socket =\n",
            "           socket\n",
        ))
    );
    // Line 152: Write of a new file (line 163: type create, structuredPatch []): the
    // whole content, 42 lines, against /dev/null.
    let created = e.actions.as_deref().unwrap().iter().find(|a| a.kind.as_deref() == Some("create")).unwrap();
    let d = created.diff.as_deref().unwrap();
    assert!(d.starts_with(concat!(
        "--- /dev/null\n",
        "+++ b/lib/spotter_web/live/transcript_computers.ex\n",
        "@@ -0,0 +1,42 @@\n",
        "+defmodule SpotterWeb.Live.TranscriptComputers do\n",
        "+  use AshComputer\n",
    )));
    assert!(d.ends_with("+    end\n+  end\n+end\n"));
    // 32 Edit and 7 Write calls, all applied, all with structuredPatch or a creation.
    assert_eq!(diffs(e).len(), 39);
    let patch = std::str::from_utf8(run.package.raw.file("patch.diff").unwrap()).unwrap();
    assert_eq!(patch, diffs(e).concat());
    assert!(notes(e).iter().any(|n| n.starts_with("patch.diff is derived: the diffs of the 39 edits")));
    assert!(!notes(e).iter().any(|n| n.contains("numbered within the replaced text")));

    // Line 1470: `git push 2>&1`; line 1477: its error text.
    let t = call(e, "toolu_011PBtiDwwmP44wZUbt17q6v");
    assert_eq!(
        output(&run, t),
        "Exit code 128\nfatal: The current branch spotter-dov has no upstream branch.\nTo push the current branch and set the remote as upstream, use\n\n    git push --set-upstream origin spotter-dov\n\nTo have this happen automatically for branches without a tracking\nupstream, see 'push.autoSetupRemote' in 'git help config'."
    );
    assert_eq!(t.output_bytes, Some(312));
    assert_eq!(call_and_result(e, t).1.is_error, Some(true));
    // Line 44: the Task call; line 113: its result, two text blocks, joined by a newline.
    let t = call(e, "toolu_017pLRuPHYTX5t99EnLyV53m");
    let report = output(&run, t);
    assert!(
        report.starts_with("Perfect! Now I have all the information needed. Let me create a comprehensive report.\n")
    );
    assert!(report.contains("(transcript classes at lines 969-1168)\nagentId: a2898e3 (for resuming"));
    assert!(report.ends_with("tool_uses: 33\nduration_ms: 141871</usage>"));
    assert_eq!(t.output_bytes, Some(16041));
    assert_eq!(t.output_text.as_deref(), Some(report)); // under 16384 bytes: whole
    assert!(tools(e).iter().all(|t| t.output.is_some()));

    // Line 1507: the last words of the session's own (msg_01Lv5C...: 1 + 7330 + 98729 in).
    let last = "Background task completed successfully — all 15 SessionLive tests pass. This was from a previous run before the commit. Everything is clean and pushed.";
    assert_eq!(e.outcome.final_message.as_deref(), Some(last));
    let m = part(e, "Background task completed");
    assert_eq!((m.tokens_in, m.tokens_out), (Some(106060), Some(1)));
}

/// Subagents speak under their names: the Explore agent (its own file, and the
/// session's progress copies of it), the compaction agent by its id, the Plan agent.
#[test]
fn subagent_messages_carry_their_author() {
    let run = one(&[BIG, BIG_SUB, BIG_COMPACT]);
    let e = &run.package.episode;
    // agent-a2898e3.jsonl line 1: the prompt of the Task call of line 44 (subagent_type
    // Explore; line 113's toolUseResult.agentId a2898e3).
    let prompt = part(e, "Very thorough exploration. I need to understand:");
    assert_eq!((prompt.role.as_str(), prompt.author.as_deref()), ("user", Some("Explore")));
    let task = call_and_result(e, call(e, "toolu_017pLRuPHYTX5t99EnLyV53m")).0;
    let args: Value = serde_json::from_str(task.arguments.as_deref().unwrap()).unwrap();
    assert_eq!(args["subagent_type"], "Explore");
    assert_eq!(prompt.text.as_deref(), args["prompt"].as_str());
    // The Task call is the session's own; the subagent's calls and their results (the
    // recorder's call and result records) carry its name.
    assert_eq!(task.author, None);
    let explore_calls: Vec<&str> = messages(e)
        .iter()
        .filter(|m| m.author.as_deref() == Some("Explore") && m.tool_call_id.is_some())
        .map(|m| m.role.as_str())
        .collect();
    assert!(!explore_calls.is_empty());
    assert_eq!(
        explore_calls.iter().filter(|r| **r == "assistant").count(),
        explore_calls.iter().filter(|r| **r == "tool").count()
    );
    // Its line 2: its first words, on Sonnet (msg_016xc...: 3 + 13522 + 0 in, 3 out).
    let m = part(e, "I'll conduct a thorough exploration of the transcript rendering system.");
    assert_eq!((m.role.as_str(), m.author.as_deref()), ("assistant", Some("Explore")));
    assert_eq!(
        (m.model.as_deref(), m.tokens_in, m.tokens_out),
        (Some("claude-sonnet-4-5-20250929"), Some(13525), Some(3))
    );
    // The prompt and its seven text blocks (lines 2, 23, 56, 81, 94, 103, 144), each
    // once though the session file copies them (agent_progress).
    let explore = |e: &Episode| said(e).iter().filter(|m| m.1 == Some("Explore")).count();
    assert_eq!(explore(e), 8);
    // Its twelve replies (msg ids) each give their usage once: seven on their text, five
    // that only call tools in a record of their own, all under its name.
    let usage = |e: &Episode| {
        messages(e)
            .iter()
            .filter(|m| m.author.as_deref() == Some("Explore") && m.tokens_in.is_some())
            .map(|m| (m.text.is_some(), m.model.as_deref() == Some("claude-sonnet-4-5-20250929")))
            .collect::<Vec<_>>()
    };
    assert_eq!(usage(e).len(), 12);
    assert_eq!(usage(e).iter().filter(|(text, _)| *text).count(), 7);
    assert!(usage(e).iter().all(|(_, sonnet)| *sonnet));
    // agent-acompact-e1f845.jsonl: no Task call names it; line 4 its prompt, line 5 the
    // summary it wrote; lines 1-3 (isMeta hook context) are the harness's.
    let m = part(e, "Your task is to create a detailed summary of the conversation so far");
    assert_eq!((m.role.as_str(), m.author.as_deref()), ("user", Some("acompact-e1f845")));
    let m = part(e, "\n\n<analysis>\nLet me chronologically analyze the conversation");
    assert_eq!((m.role.as_str(), m.author.as_deref()), ("assistant", Some("acompact-e1f845")));
    assert_eq!(
        part(e, "<system-reminder>\nPostToolUse:Edit hook additional context").author.as_deref(),
        Some("harness")
    );
    // The subagents' words are neither the task nor the final message.
    assert!(e.manifest.task_prompt.as_deref().unwrap().starts_with("Work on bead spotter-dov."));
    assert!(e.outcome.final_message.as_deref().unwrap().starts_with("Background task completed successfully"));

    // The session file alone: its progress copies (lines 45-111) carry the prompt, the
    // calls and the results, not the subagent's words.
    let alone = one(&[BIG]);
    let e1 = &alone.package.episode;
    assert_eq!(explore(e1), 1);
    // The replies with calls still give their usage: all but the last (line 144, text only).
    assert_eq!(usage(e1).len(), 11);
    assert_eq!(part(e1, "Very thorough exploration.").author.as_deref(), Some("Explore"));

    // subagent.jsonl: the Plan agent (Task call of line 36) exists only as progress
    // copies; line 37 carries its prompt.
    let run = one(&["claude-code/subagent.jsonl"]);
    let e = &run.package.episode;
    let m = part(e, "Draft bead content for setting up Credo, Dialyxir, and mix_audit");
    assert_eq!((m.role.as_str(), m.author.as_deref()), ("user", Some("Plan")));
    // Line 4: the slash command and its arguments the person typed is the task; line 5
    // (isMeta: the skill's text) is the harness's.
    let task = e.manifest.task_prompt.as_deref().unwrap();
    assert!(task.starts_with("<command-message>handgemacht:create-beads</command-message>\n<command-name>/handgemacht:create-beads</command-name>\n<command-args>websearch to learn how to fastest setup credo"));
    assert_eq!(part(e, "Create beads (epic + tasks + dependencies)").author.as_deref(), Some("harness"));
    // Line 92: the last words.
    assert!(e.outcome.final_message.as_deref().unwrap().starts_with("## Beads Created\n\nEpic `spotter-0p7`"));
    // Line 33: AskUserQuestion; line 34: the person's answers, as the tool gave them back.
    let t = call(e, "toolu_01RsKEmE8Mc3wD8Vex5b6Zne");
    assert_eq!(
        output(&run, t),
        "User has answered your questions: \"Which rig do these beads belong to? (This is a single-app project — should I use 'spotter'?)\"=\"No rig\", \"Which tools should we set up?\"=\"Credo + Dialyxir + mix_audit\". You can now continue with the user's answers in mind."
    );
}

/// The generated run (Claude Code 2.1.332): the system prompt it sent, the context it
/// added, and the two edits' diffs.
#[test]
fn generated_transcript_content_by_hand() {
    let run = one(&[GENERATED]);
    let e = &run.package.episode;
    let s = said(e);
    // Line 3: the prompt; lines 4-13: attachments rendered as system reminders; line
    // 15 (api-request-shape): the system prompt, two blocks.
    assert_eq!(
        s[0],
        (
            "user",
            Some("human"),
            "count_up_to(n) should include n. Fix counter.py so that python3 test_counter.py passes."
        )
    );
    assert!(s[1]
        .2
        .starts_with("<system-reminder>\n# Environment\nYou have been invoked in the following environment:"));
    assert!(s[1..10].iter().all(|m| m.0 == "user" && m.1 == Some("harness")));
    assert_eq!(s[10], ("system", None, "You are a Claude agent, built on Anthropic's Claude Agent SDK."));
    assert!(s[11].0 == "system" && s[11].2.starts_with("\nYou are an agent working with the user toward their goals"));
    assert_eq!(s.iter().filter(|m| m.0 == "system").count(), 2); // one shape line
                                                                 // Line 19: the first words (msg_c1ff...: 1500 in, 50 out).
    let m = part(e, "Let me run the test first.");
    assert_eq!((m.model.as_deref(), m.tokens_in, m.tokens_out), (Some("claude-sonnet-4-5"), Some(1500), Some(50)));
    // Each message's usage once (lines 19-54: six message ids, 1500..1750 in, 50 out):
    // the replies that only call tools (lines 29, 43, 49) give theirs in a record of
    // their own, before the call; together they are the outcome's totals.
    let usage_only: Vec<(Option<i64>, Option<i64>)> = messages(e)
        .iter()
        .filter(|m| m.tool.is_none() && m.text.is_none() && m.reasoning.is_none())
        .map(|m| (m.tokens_in, m.tokens_out))
        .collect();
    assert_eq!(usage_only, vec![(Some(1550), Some(50)), (Some(1650), Some(50)), (Some(1700), Some(50))]);
    let sum = |f: fn(&Message) -> Option<i64>| messages(e).iter().filter_map(f).sum::<i64>();
    assert_eq!((Some(sum(|m| m.tokens_in)), Some(sum(|m| m.tokens_out))), (e.outcome.tokens_in, e.outcome.tokens_out));
    let read = messages(e).iter().position(|m| m.tokens_in == Some(1550)).unwrap();
    assert_eq!(messages(e)[read + 1].tool_call_id.as_deref(), Some("toolu_506cb5f8250948519880"));
    // Line 20: the failing test; line 23 what it printed.
    let t = call(e, "toolu_1655c6f93a1541809f14");
    assert_eq!(
        output(&run, t),
        "Exit code 1\nTraceback (most recent call last):\n  File \"/srv/counter/test_counter.py\", line 2, in <module>\n    assert count_up_to(3) == [1, 2, 3], count_up_to(3)\n           ^^^^^^^^^^^^^^^^^^^^^^^^^^^\nAssertionError: [1, 2]"
    );
    assert_eq!(call_and_result(e, t).1.is_error, Some(true));
    // Line 36: the Edit; line 39: structuredPatch 1,2 -> 1,2. Line 49: the Write; line 50:
    // type create.
    let edit = "--- a/counter.py\n+++ b/counter.py\n@@ -1,2 +1,2 @@\n def count_up_to(n):\n-    return list(range(1, n))\n+    return list(range(1, n + 1))\n";
    let create = "--- /dev/null\n+++ b/CHANGELOG.md\n@@ -0,0 +1 @@\n+- count_up_to includes n\n";
    assert_eq!(diffs(e), vec![edit, create]);
    assert_eq!(run.package.raw.file("patch.diff").unwrap(), format!("{edit}{create}").as_bytes());
    assert_eq!(e.manifest.task_prompt.as_deref(), Some(s[0].2));
    assert!(e.outcome.final_message.as_deref().unwrap().starts_with("Fixed: count_up_to(n) now includes n;"));
}

/// The same run's stream-json: no prompt shown; the `result` line's text is the final
/// message.
#[test]
fn stream_json_content_by_hand() {
    let run = one(&[STREAM]);
    let e = &run.package.episode;
    assert_eq!(e.manifest.task_prompt, None);
    // Line 15: `result`.
    assert_eq!(
        e.outcome.final_message.as_deref(),
        Some("Fixed: count_up_to(n) now includes n; python3 test_counter.py passes. I also added a CHANGELOG entry.")
    );
    // Line 2: usage as the stream shows it (the message's start: 1 output token).
    let m = part(e, "Let me run the test first.");
    assert_eq!((m.tokens_in, m.tokens_out, m.author.as_deref()), (Some(1500), Some(1), None));
    // Line 9: tool_use_result.structuredPatch.
    assert_eq!(diffs(e)[0], "--- a/counter.py\n+++ b/counter.py\n@@ -1,2 +1,2 @@\n def count_up_to(n):\n-    return list(range(1, n))\n+    return list(range(1, n + 1))\n");
    let t = call(e, "toolu_81a4290c74564728a028"); // line 10; line 11 its result
    assert_eq!(output(&run, t), "counter ok\n counter.py | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)");
}

/// What the fixtures do not show: edits without `structuredPatch`, a hunk with an empty
/// side, an image in a result, a subagent speaking in stream-json before any person, an
/// API error the tool wrote, and a result line's final text.
#[test]
fn diffs_without_structured_patch_and_other_content() {
    let dir = tempfile::tempdir().unwrap();
    let sid = "12121212-2222-3333-4444-555555555555";
    let line = |v: Value| serde_json::to_string(&v).unwrap();
    let asst = |ts: &str, id: &str, parent: Value, content: Value| {
        line(
            json!({"type": "assistant", "session_id": sid, "timestamp": ts, "parent_tool_use_id": parent, "uuid": format!("u-{ts}"),
            "message": {"id": id, "model": "claude-sonnet-4-5", "role": "assistant", "content": content, "usage": {"input_tokens": 10, "output_tokens": 5}}}),
        )
    };
    let tool_use = |ts: &str, id: &str, name: &str, input: Value| {
        asst(ts, &format!("m-{id}"), Value::Null, json!([{"type": "tool_use", "id": id, "name": name, "input": input}]))
    };
    let result = |ts: &str, id: &str, content: Value, err: bool, structured: Value| {
        line(
            json!({"type": "user", "session_id": sid, "timestamp": ts, "parent_tool_use_id": null, "uuid": format!("u-{ts}"),
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": content, "is_error": err}]},
            "tool_use_result": structured}),
        )
    };
    let lines = [
        line(
            json!({"type": "system", "subtype": "init", "session_id": sid, "cwd": "/w", "model": "claude-sonnet-4-5", "claude_code_version": "2.0.1"}),
        ),
        asst(
            "2026-01-01T10:00:00Z",
            "m1",
            Value::Null,
            json!([{"type": "thinking", "thinking": "Plan: delegate."}, {"type": "text", "text": "Delegating."}]),
        ),
        tool_use(
            "2026-01-01T10:00:01Z",
            "task1",
            "Task",
            json!({"subagent_type": "Explore", "prompt": "Look around."}),
        ),
        // The subagent's prompt, before any person spoke: not the run's task.
        line(
            json!({"type": "user", "session_id": sid, "timestamp": "2026-01-01T10:00:02Z", "parent_tool_use_id": "task1", "uuid": "u-sub",
            "message": {"role": "user", "content": [{"type": "text", "text": "Look around."}]}}),
        ),
        asst("2026-01-01T10:00:03Z", "m2", json!("task1"), json!([{"type": "text", "text": "Found it."}])),
        result("2026-01-01T10:00:04Z", "task1", json!([{"type": "text", "text": "Found it."}]), false, Value::Null),
        // An Edit with no structuredPatch: the replaced text against its replacement.
        tool_use(
            "2026-01-01T10:00:05Z",
            "e1",
            "Edit",
            json!({"file_path": "/w/a.py", "old_string": "x = 1\ny = 2\n", "new_string": "x = 1\ny = 3\n"}),
        ),
        result("2026-01-01T10:00:06Z", "e1", json!("The file /w/a.py has been updated."), false, Value::Null),
        // A MultiEdit the same way: one diff per replacement.
        tool_use(
            "2026-01-01T10:00:07Z",
            "e2",
            "MultiEdit",
            json!({"file_path": "/w/b.py", "edits": [{"old_string": "a\n", "new_string": "b\n"}, {"old_string": "c\n", "new_string": "d\n"}]}),
        ),
        result("2026-01-01T10:00:08Z", "e2", json!("Applied 2 edits to /w/b.py"), false, Value::Null),
        // An Edit that failed: nothing changed, no diff.
        tool_use(
            "2026-01-01T10:00:09Z",
            "e3",
            "Edit",
            json!({"file_path": "/w/a.py", "old_string": "zzz", "new_string": "q"}),
        ),
        result(
            "2026-01-01T10:00:10Z",
            "e3",
            json!("<tool_use_error>String to replace not found in file.</tool_use_error>"),
            true,
            Value::Null,
        ),
        // A Write over a file: originalFile against the new content.
        tool_use("2026-01-01T10:00:11Z", "w1", "Write", json!({"file_path": "/w/c.txt", "content": "one\ntwo\n"})),
        result(
            "2026-01-01T10:00:12Z",
            "w1",
            json!("The file /w/c.txt has been updated."),
            false,
            json!({"type": "update", "filePath": "/w/c.txt", "content": "one\ntwo\n", "originalFile": "one\n"}),
        ),
        // A structuredPatch whose hunk deletes lines: jsdiff's newStart is the line after.
        tool_use(
            "2026-01-01T10:00:13Z",
            "e4",
            "Edit",
            json!({"file_path": "/w/d.txt", "old_string": "b\nc\n", "new_string": ""}),
        ),
        result(
            "2026-01-01T10:00:14Z",
            "e4",
            json!("The file /w/d.txt has been updated."),
            false,
            json!({"filePath": "/w/d.txt", "structuredPatch": [{"oldStart": 2, "oldLines": 2, "newStart": 2, "newLines": 0, "lines": ["-b", "-c"]}]}),
        ),
        // A screenshot in a result.
        tool_use("2026-01-01T10:00:15Z", "r1", "Read", json!({"file_path": "/w/shot.png"})),
        result(
            "2026-01-01T10:00:16Z",
            "r1",
            json!([{"type": "text", "text": "The screenshot:"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]),
            false,
            Value::Null,
        ),
        line(
            json!({"type": "assistant", "session_id": sid, "timestamp": "2026-01-01T10:00:17Z", "parent_tool_use_id": null,
            "message": {"id": "e", "model": "<synthetic>", "role": "assistant", "content": [{"type": "text", "text": "API Error: Request timed out"}]}}),
        ),
        asst("2026-01-01T10:00:18Z", "m9", Value::Null, json!([{"type": "text", "text": "All done."}])),
        line(
            json!({"type": "result", "subtype": "success", "is_error": false, "session_id": sid, "result": "All done, really.", "total_cost_usd": 0.1,
            "usage": {"input_tokens": 100, "output_tokens": 10}}),
        ),
    ];
    let p = write_temp(&dir, "run.jsonl", &lines.join("\n"));
    let (_, runs) = import_paths(&[p], &Options::default());
    let run = runs.into_iter().next().unwrap().unwrap();
    let e = &run.package.episode;
    assert_said(
        &said(e),
        &[
            ("assistant", None, "Plan: delegate."),
            ("assistant", None, "Delegating."),
            ("user", Some("harness"), "Look around."),
            ("assistant", Some("Explore"), "Found it."),
            ("assistant", Some("harness"), "API Error: Request timed out"),
            ("assistant", None, "All done."),
        ],
    );
    // One message id: its usage on its first part only.
    let thinking = part(e, "Plan: delegate.");
    assert_eq!((thinking.reasoning.as_deref(), thinking.text.as_deref()), (Some("Plan: delegate."), None));
    assert_eq!((thinking.tokens_in, thinking.tokens_out), (Some(10), Some(5)));
    assert_eq!((part(e, "Delegating.").tokens_in, part(e, "Delegating.").tokens_out), (None, None));
    assert_eq!(e.manifest.task_prompt, None);
    assert_eq!(e.outcome.final_message.as_deref(), Some("All done, really."));

    assert_eq!(
        diffs(e),
        vec![
            "--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n+y = 3\n",
            "--- a/b.py\n+++ b/b.py\n@@ -1 +1 @@\n-a\n+b\n--- a/b.py\n+++ b/b.py\n@@ -1 +1 @@\n-c\n+d\n",
            "--- a/c.txt\n+++ b/c.txt\n@@ -1 +1,2 @@\n one\n+two\n",
            "--- a/d.txt\n+++ b/d.txt\n@@ -2,2 +1,0 @@\n-b\n-c\n",
        ]
    );
    let failed = e.actions.as_deref().unwrap().iter().find(|a| !a.ok && a.kind.as_deref() == Some("edit")).unwrap();
    assert_eq!(failed.diff, None);
    assert!(notes(e).iter().any(|n| n.starts_with("some edit diffs are numbered within the replaced text")));
    let t = call(e, "r1");
    assert_eq!(output(&run, t), "The screenshot:\n[image]");
    let t = call(e, "e3");
    assert_eq!(output(&run, t), "<tool_use_error>String to replace not found in file.</tool_use_error>");
    assert_eq!(call_and_result(e, t).1.is_error, Some(true));
}

/// A transcript opening with a bare slash command: the prompt after it is the task; a
/// person's `!` command and what it printed are the person's and the harness's words.
#[test]
fn a_bare_command_is_not_the_task() {
    let dir = tempfile::tempdir().unwrap();
    let sid = "34343434-2222-3333-4444-555555555555";
    let user = |ts: &str, t: &str| {
        serde_json::to_string(
            &json!({"type": "user", "sessionId": sid, "timestamp": ts, "cwd": "/w", "uuid": format!("u-{ts}"),
            "message": {"role": "user", "content": t}}),
        )
        .unwrap()
    };
    let lines = [
        user("2026-01-01T10:00:00Z", "<command-name>/model</command-name>\n<command-message>model</command-message>\n<command-args></command-args>"),
        user("2026-01-01T10:00:01Z", "<local-command-stdout>Kept model as Default</local-command-stdout>"),
        user("2026-01-01T10:00:02Z", "fix the flaky test"),
        serde_json::to_string(&json!({"type": "assistant", "sessionId": sid, "timestamp": "2026-01-01T10:00:03Z", "uuid": "a1",
            "message": {"id": "m1", "model": "claude-opus-4-1", "role": "assistant", "content": [{"type": "text", "text": "Which one?"}]}}))
        .unwrap(),
        user("2026-01-01T10:00:04Z", "<bash-input>make test</bash-input>"),
        user("2026-01-01T10:00:05Z", "<bash-stdout>1 failed</bash-stdout><bash-stderr></bash-stderr>"),
    ];
    let p = write_temp(&dir, &format!("{sid}.jsonl"), &lines.join("\n"));
    let (_, runs) = import_paths(&[p], &Options::default());
    let run = runs.into_iter().next().unwrap().unwrap();
    let e = &run.package.episode;
    assert_said(
        &said(e),
        &[
            ("user", Some("human"), "<command-name>/model</command-name>"),
            ("user", Some("harness"), "<local-command-stdout>Kept model as Default"),
            ("user", Some("human"), "fix the flaky test"),
            ("assistant", None, "Which one?"),
            ("user", Some("human"), "<bash-input>make test</bash-input>"),
            ("user", Some("harness"), "<bash-stdout>1 failed</bash-stdout>"),
        ],
    );
    assert_eq!(e.manifest.task_prompt.as_deref(), Some("fix the flaky test"));
    assert_eq!(e.outcome.final_message.as_deref(), Some("Which one?"));
    // The person's command: its output file is what the log showed it print; no call or
    // result messages (not the agent's).
    let t = &tools(e)[0];
    assert_eq!(output(&run, t), "1 failed");
    assert!(messages(e).iter().all(|m| m.tool_seq.is_none()));
}

/// Observer integrity: an MCP tool named like `write_file`, given a path in
/// the workspace, reports success after the passing test; epistore kept the test
/// `current`. docs/importers.md §10: an opaque tool that plainly reports a workspace
/// write is an `inferred` possible mutation, so no check before it is `current`. Reads,
/// writes outside the workspace and failed writes stay opaque.
#[test]
fn an_mcp_write_after_the_test_makes_it_stale() {
    let sid = "13131313-2222-3333-4444-555555555555";
    let line = |v: Value| serde_json::to_string(&v).unwrap();
    let tool_use = |ts: &str, id: &str, name: &str, input: Value| {
        line(
            json!({"type": "assistant", "session_id": sid, "timestamp": ts, "parent_tool_use_id": null, "uuid": format!("u-{id}"),
            "message": {"id": format!("m-{id}"), "model": "claude-sonnet-4-5", "role": "assistant",
                        "content": [{"type": "tool_use", "id": id, "name": name, "input": input}]}}),
        )
    };
    let result = |ts: &str, id: &str, text: &str, err: bool| {
        line(
            json!({"type": "user", "session_id": sid, "timestamp": ts, "parent_tool_use_id": null, "uuid": format!("r-{id}"),
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": text, "is_error": err}]}}),
        )
    };
    let session = |after_test: &[String]| {
        let mut lines = vec![
            line(
                json!({"type": "system", "subtype": "init", "session_id": sid, "cwd": "/w", "model": "claude-sonnet-4-5", "claude_code_version": "2.1.0"}),
            ),
            line(
                json!({"type": "user", "session_id": sid, "timestamp": "2026-01-01T10:00:00Z", "parent_tool_use_id": null, "uuid": "p",
                "message": {"role": "user", "content": "Fix the test"}}),
            ),
            tool_use("2026-01-01T10:00:01Z", "t1", "Bash", json!({"command": "pytest -q"})),
            result("2026-01-01T10:00:02Z", "t1", "3 passed in 0.10s", false),
        ];
        lines.extend(after_test.iter().cloned());
        lines.join("\n")
    };
    let import = |text: String| {
        let dir = tempfile::tempdir().unwrap();
        let p = write_temp(&dir, "run.jsonl", &text);
        let (_, runs) = import_paths(&[p], &Options::default());
        runs.into_iter().next().unwrap().unwrap()
    };
    let write = vec![
        tool_use(
            "2026-01-01T10:00:03Z",
            "w1",
            "mcp__filesystem__write_file",
            json!({"path": "/w/src/app.py", "content": "x = 2\n"}),
        ),
        result("2026-01-01T10:00:04Z", "w1", "Successfully wrote to /w/src/app.py", false),
    ];
    let run = import(session(&write));
    let e = &run.package.episode;
    assert_ne!(e.derived.posture, "current", "a test before a reported write stayed current");
    let inferred: Vec<_> = e.actions.as_ref().unwrap().iter().filter(|a| a.common.grade == "inferred").collect();
    assert_eq!(inferred.len(), 1);
    assert!(inferred[0].mutates && inferred[0].paths == ["src/app.py"], "{:?}", inferred[0]);

    for (name, input, err) in [
        ("mcp__filesystem__read_file", json!({"path": "/w/src/app.py"}), false),
        ("mcp__filesystem__write_file", json!({"path": "/tmp/scratch.txt", "content": "x"}), false),
        ("mcp__filesystem__write_file", json!({"path": "/w/src/app.py", "content": "x"}), true),
    ] {
        let calls = vec![
            tool_use("2026-01-01T10:00:03Z", "w1", name, input.clone()),
            result("2026-01-01T10:00:04Z", "w1", "done", err),
        ];
        let e = import(session(&calls)).package.episode;
        assert_eq!(e.derived.posture, "current", "{name} {input} error {err}");
        assert!(e.actions.as_ref().unwrap().iter().all(|a| a.common.grade != "inferred"));
    }
}

/// Observer integrity: a script run after the passing test prints that it wrote a
/// workspace file (`Wrote src/generated.py`); epistore kept the test `current`.
/// docs/importers.md §10: an opaque command whose own output names a file it wrote in
/// the workspace, or counts the files it wrote, is an `inferred` possible mutation, so no
/// check before it is `current`. A script that reports nothing, or a write outside the
/// workspace, stays an opaque `run`.
#[test]
fn a_script_that_reports_a_write_after_the_test_makes_it_stale() {
    let sid = "14141414-2222-3333-4444-555555555555";
    let line = |v: Value| serde_json::to_string(&v).unwrap();
    let bash = |id: &str, command: &str, output: &str| {
        [
            line(json!({"type": "assistant", "sessionId": sid, "timestamp": "2026-01-01T10:00:01Z", "cwd": "/w",
                "uuid": format!("u-{id}"), "message": {"id": format!("m-{id}"), "model": "claude-sonnet-4-5",
                "role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Bash", "input": {"command": command}}]}})),
            line(json!({"type": "user", "sessionId": sid, "timestamp": "2026-01-01T10:00:02Z", "cwd": "/w",
                "uuid": format!("r-{id}"), "message": {"role": "user",
                "content": [{"type": "tool_result", "tool_use_id": id, "content": output, "is_error": false}]}})),
        ]
    };
    let import = |script_output: &str| {
        let mut lines = vec![line(json!({"type": "user", "sessionId": sid, "timestamp": "2026-01-01T10:00:00Z",
            "cwd": "/w", "uuid": "p", "message": {"role": "user", "content": "Fix the test"}}))];
        lines.extend(bash("t1", "pytest -q", "3 passed in 0.10s"));
        lines.extend(bash("s1", "python3 scripts/update_fixtures.py", script_output));
        let dir = tempfile::tempdir().unwrap();
        let p = write_temp(&dir, &format!("{sid}.jsonl"), &lines.join("\n"));
        let (_, runs) = import_paths(&[p], &Options::default());
        runs.into_iter().next().unwrap().unwrap().package.episode
    };
    for (output, paths) in [("Wrote src/generated.py", vec!["src/generated.py"]), ("updated 3 files", vec![])] {
        let e = import(output);
        assert_eq!(e.derived.posture, "stale", "after a script printing {output:?}");
        let inferred: Vec<_> = e.actions.as_ref().unwrap().iter().filter(|a| a.common.grade == "inferred").collect();
        assert_eq!(inferred.len(), 1, "{output}");
        assert!(inferred[0].mutates && inferred[0].paths == paths, "{:?}", inferred[0]);
    }
    for output in ["", "done", "Wrote /tmp/scratch.json", "Created test database"] {
        let e = import(output);
        assert_eq!(e.derived.posture, "current", "after a script printing {output:?}");
        assert!(e.actions.as_ref().unwrap().iter().all(|a| a.common.grade != "inferred"), "{output}");
    }
}

/// Observer integrity: `git stash` after the passing test put the working tree back to
/// HEAD; epistore called the test `current`, because importers-v1 §4 lists `git stash`
/// among the commands that change no file. docs/importers.md §10 departs from it: a
/// stash is a mutation (the files the test ran on are gone), and one that printed `No
/// local changes to save` changed nothing.
#[test]
fn git_stash_after_the_test_makes_it_stale() {
    let sid = "15151515-2222-3333-4444-555555555555";
    let line = |v: Value| serde_json::to_string(&v).unwrap();
    // One call after another, each ending before the next starts.
    let bash = |id: &str, second: u32, command: &str, output: &str| {
        [
            line(
                json!({"type": "assistant", "sessionId": sid, "timestamp": format!("2026-01-01T10:00:{second:02}Z"), "cwd": "/w",
                "uuid": format!("u-{id}"), "message": {"id": format!("m-{id}"), "model": "claude-sonnet-4-5",
                "role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Bash", "input": {"command": command}}]}}),
            ),
            line(
                json!({"type": "user", "sessionId": sid, "timestamp": format!("2026-01-01T10:00:{:02}Z", second + 1), "cwd": "/w",
                "uuid": format!("r-{id}"), "message": {"role": "user",
                "content": [{"type": "tool_result", "tool_use_id": id, "content": output, "is_error": false}]}}),
            ),
        ]
    };
    let import = |stash_output: &str| {
        let mut lines = vec![line(json!({"type": "user", "sessionId": sid, "timestamp": "2026-01-01T10:00:00Z",
            "cwd": "/w", "uuid": "p", "message": {"role": "user", "content": "Fix the test"}}))];
        lines.extend(bash("e1", 1, "sed -i 's/a - b/a + b/' calc.py", ""));
        lines.extend(bash("t1", 3, "pytest -q", "3 passed in 0.10s"));
        lines.extend(bash("s1", 5, "git stash", stash_output));
        let dir = tempfile::tempdir().unwrap();
        let p = write_temp(&dir, &format!("{sid}.jsonl"), &lines.join("\n"));
        let (_, runs) = import_paths(&[p], &Options::default());
        runs.into_iter().next().unwrap().unwrap().package.episode
    };
    let e = import("Saved working directory and index state WIP on main: 1a2b3c4 Initial commit");
    assert_eq!((e.derived.final_revision, e.derived.posture.as_str()), (2, "stale"));
    let e = import("No local changes to save");
    assert_eq!((e.derived.final_revision, e.derived.posture.as_str()), (1, "current"));
}
