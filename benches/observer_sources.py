#!/usr/bin/env python3
"""More sources for the observer-integrity bench (benches/observer_bench.py).

Each writer has the signature of `observer_bench.claude_code` / `codex`:
`writer(i, steps, end) -> (relative_path, text_or_bytes)`, and writes the abstract steps
of a scenario in the real shape of that tool's log (copied from the real logs under
tests/fixtures/real/ and from docs/importers.md §9). The run's task, as the store
derives it, is `session_id(i)`, except for Inspect, whose task is always
`{eval.task}/{sample id}` (here `observer/<session id>`): match episodes on
`task_key(task)`, which gives back the session id for every source.

    SOURCES  {format name: writer}
    ONLY     {hazard: every source that can express it}, for the hazards some source
             cannot (merge with the bench's ONLY by union; a hazard not listed runs
             everywhere)

Not written: aider. Its chat history shows an automatic test run only when it fails
(`Attempt to fix test errors?`), and never the output of a command the model ran, so
no aider log can show the passing test every scenario starts with.
"""
import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from observer_bench import OTHER, WS, revert_cmd, revert_output, session_id, test_output  # noqa: E402

TASK = "Fix the bug in src/app.py so that the tests pass."
CLAIM = "Done: the tests pass."


def task_key(task):
    """The session id in a derived task: the part after the format's prefix."""
    return task.rsplit("/", 1)[-1]


def script_output(s):
    return s[2] if len(s) > 2 else "updated 3 files"


def test_cmd(where):
    return "python3 -m pytest -q tests" if where == WS else f"cd {where} && python3 -m pytest -q tests"


def iso(seconds, zone="+00:00", frac=6):
    """The time `seconds` after 2026-12-01 10:00 UTC, as RFC 3339 with `frac` digits."""
    t = datetime(2026, 12, 1, 10, tzinfo=timezone.utc) + timedelta(microseconds=round(seconds * 1e6))
    text = t.strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        text += "." + f"{t.microsecond:06d}"[:frac]
    return text + zone


# --------------------------------------------------------------------------------------
# Inspect AI: a .json eval log (log version 2) with one sample; react() with bash(),
# text_editor() and the filesystem MCP server's tools, as inspect_ai 0.3.2xx writes it
# (shapes from tests/fixtures/real/inspect*: spans, tool spans with their sandbox execs,
# ToolEvent `timestamp` = start, `completed` = end).
# --------------------------------------------------------------------------------------

def inspect_ai(i, steps, end):
    sid = session_id(i)
    events, n, t = [], [0], [1.0]

    def uid(prefix):
        n[0] += 1
        return f"{prefix}{i:08d}{n[0]:06d}"

    def ev(kind, span, at, **fields):
        e = {"uuid": uid("ev"), "span_id": span, "timestamp": iso(at), "working_start": round(at, 6), "event": kind}
        e.update(fields)
        events.append(e)
        return e

    def span_begin(span, parent, ty, name, at):
        fields = {"id": span, "type": ty, "name": name}
        if parent:
            fields["parent_id"] = parent
        ev("span_begin", span, at, **fields)

    def span_end(span, at):
        ev("span_end", span, at, id=span)

    agent = uid("sp")

    def model(calls, text):
        msg = {"id": uid("msg"), "content": text, "source": "generate", "role": "assistant", "model": "claude-bench"}
        if calls:
            msg["tool_calls"] = [{"id": cid, "function": fn, "arguments": args, "type": "function"} for cid, fn, args in calls]
        ev("model", agent, t[0], model="anthropic/claude-bench", input=[], tools=[], tool_choice="auto", config={},
           output={"model": "claude-bench", "choices": [{"message": msg, "stop_reason": "tool_calls" if calls else "stop"}],
                   "completion": text, "usage": {"input_tokens": 900, "output_tokens": 40, "total_tokens": 940}},
           completed=iso(t[0] + 0.5), working_time=0.5)
        t[0] += 1.0

    def tool_call(cid, fn, args, result, *, exec_=None, error=None, start=None, dur=1.0, pending=False):
        """A tool span with the ToolEvent and its sandbox exec(s). `exec_`: (cmd, exit, output)."""
        at = t[0] if start is None else start
        span = uid("sp")
        span_begin(span, agent, "tool", fn, at)
        e = ev("tool", agent, at, type="function", id=cid, function=fn, arguments=args, result="", events=[])
        if pending:
            # The log was written while the call ran: no result, no exec yet.
            e["pending"] = True
            span_end(span, at + 0.01)
            return
        if exec_:
            cmd, code, out = exec_
            ev("sandbox", span, at + 0.01, action="exec", cmd=cmd, options={"timeout": 180}, result=code, output=out,
               completed=iso(at + dur - 0.02))
        span_end(span, at + dur - 0.01)
        e["result"] = result
        if error:
            e["error"] = error
        e["completed"] = iso(at + dur)
        e["working_time"] = dur
        e["message_id"] = uid("msg")
        if start is None:
            t[0] += dur

    def bash_args(cmd):
        return {"cmd": cmd}

    def bash_exec(cmd, code, out):
        q = cmd.replace("'", "'\"'\"'")
        return (f"bash --login -c '{q}'", code, out)

    def editor(cid, path, ok, **kw):
        full = f"{WS}/{path}"
        if ok:
            args = {"command": "str_replace", "path": full, "old_str": "x - 1", "new_str": "x + 1"}
            res = (f"The file {full} has been edited. Here's the result of running `cat -n` on a snippet of {full}:\n"
                   "     1\tdef f(x):\n     2\t    return x + 1\n"
                   "Review the changes and make sure they are as expected. Edit the file again if necessary.")
            tool_call(cid, "text_editor", args, res, exec_=("inspect-tool-support exec", 0, ""), **kw)
        else:
            args = {"command": "str_replace", "path": full, "old_str": "y - 1", "new_str": "y + 1"}
            msg = f"No replacement was performed, old_str `y - 1` did not appear verbatim in {full}."
            tool_call(cid, "text_editor", args, "", exec_=("inspect-tool-support exec", 0, ""),
                      error={"type": "unknown", "message": msg}, **kw)
        return args

    init = uid("sp")
    span_begin(init, None, "init", "init", 0.0)
    ev("sample_init", init, 0.01, sample={"input": TASK, "id": sid, "metadata": {}},
       state={"messages": [{"id": uid("msg"), "content": TASK, "source": "input", "role": "user"}], "tools": [],
              "tool_choice": None, "store": {}, "output": {"model": "anthropic/claude-bench", "choices": [], "completion": ""},
              "completed": False, "metadata": {}})
    span_end(init, 0.5)
    solvers, solver = uid("sp"), uid("sp")
    span_begin(solvers, None, "solvers", "solvers", 0.6)
    span_begin(solver, solvers, "solver", "react", 0.7)
    span_begin(agent, solver, "agent", "react", 0.8)

    for k, s in enumerate(steps):
        kind, cid = s[0], f"toolu_{i:06d}_{k:03d}"
        if kind == "edit":
            args = {"command": "str_replace", "path": f"{WS}/{s[1]}", "old_str": "x - 1" if s[2] else "y - 1",
                    "new_str": "x + 1" if s[2] else "y + 1"}
            model([(cid, "text_editor", args)], "I'll fix the expression.")
            editor(cid, s[1], s[2])
        elif kind == "test":
            cmd = test_cmd(s[1])
            model([(cid, "bash", bash_args(cmd))], "Running the tests.")
            if s[2] is None:
                tool_call(cid, "bash", bash_args(cmd), "", pending=True)
                t[0] += 1.0
            else:
                out, code = test_output(s[2])
                tool_call(cid, "bash", bash_args(cmd), out + "\n", exec_=bash_exec(cmd, code, out + "\n"))
        elif kind == "revert":
            cmd = revert_cmd(s)
            model([(cid, "bash", bash_args(cmd))], "Reverting that file.")
            out = revert_output(s) + "\n"
            tool_call(cid, "bash", bash_args(cmd), out, exec_=bash_exec(cmd, 0, out))
        elif kind == "script":
            out = script_output(s) + "\n"
            model([(cid, "bash", bash_args(s[1]))], "Regenerating the fixtures.")
            tool_call(cid, "bash", bash_args(s[1]), out, exec_=bash_exec(s[1], 0, out))
        elif kind == "mcp_write":
            # mcp_server_stdio(@modelcontextprotocol/server-filesystem): Inspect names the
            # tools as the server does.
            full = f"{WS}/{s[1]}"
            args = {"path": full, "content": "X = 1\n"}
            model([(cid, "write_file", args)], "Writing the generated module.")
            tool_call(cid, "write_file", args, f"Successfully wrote to {full}")
        elif kind == "parallel":
            # One reply, two calls run together (call_tools gathers them): the edit starts
            # first and ends after the test, which started a moment later.
            cmd = "python3 -m pytest -q tests"
            eargs = {"command": "str_replace", "path": f"{WS}/{s[1]}", "old_str": "x - 1", "new_str": "x + 1"}
            model([(cid + "e", "text_editor", eargs), (cid + "t", "bash", bash_args(cmd))], "Fixing and testing.")
            t0 = t[0]
            out, code = test_output(s[2])
            span_e, span_t = uid("sp"), uid("sp")
            span_begin(span_e, agent, "tool", "text_editor", t0)
            e_edit = ev("tool", agent, t0, type="function", id=cid + "e", function="text_editor", arguments=eargs,
                        result="", events=[])
            span_begin(span_t, agent, "tool", "bash", t0 + 1.0)
            e_test = ev("tool", agent, t0 + 1.0, type="function", id=cid + "t", function="bash", arguments=bash_args(cmd),
                        result="", events=[])
            cmdx, _, _ = bash_exec(cmd, code, out)
            ev("sandbox", span_t, t0 + 1.01, action="exec", cmd=cmdx, options={"timeout": 180}, result=code,
               output=out + "\n", completed=iso(t0 + 2.9))
            span_end(span_t, t0 + 2.95)
            ev("sandbox", span_e, t0 + 0.01, action="exec", cmd="inspect-tool-support exec", options={}, result=0,
               output="", completed=iso(t0 + 3.9))
            span_end(span_e, t0 + 3.95)
            full = f"{WS}/{s[1]}"
            e_test.update(result=out + "\n", completed=iso(t0 + 3.0), working_time=2.0, message_id=uid("msg"))
            e_edit.update(result=f"The file {full} has been edited. Here's the result of running `cat -n` on a snippet of "
                                 f"{full}:\n     1\tdef f(x):\n     2\t    return x + 1\nReview the changes and make sure "
                                 "they are as expected. Edit the file again if necessary.",
                          completed=iso(t0 + 4.0), working_time=4.0, message_id=uid("msg"))
            t[0] = t0 + 5.0
    sample_extra = {}
    if end == "claim":
        cid = f"toolu_{i:06d}_end"
        model([(cid, "submit", {"answer": CLAIM})], "Submitting.")
        tool_call(cid, "submit", {"answer": CLAIM}, CLAIM, dur=0.1)
    elif end == "interrupt":
        # A person cancels the turn while the model is generating its next reply
        # (InterruptEvent, source user_cancel).
        ev("interrupt", agent, t[0], source="user_cancel", interrupted="generate", interrupted_tool_call_id=None,
           interrupted_model_event_id=None)
        t[0] += 0.5
    elif end == "cut":
        # The sample stops after its last tool call: the model provider failed on the
        # next generate (sample error), so no submission.
        sample_extra["error"] = {"message": "APIConnectionError('Connection error.')",
                                 "traceback": "Traceback (most recent call last):\n  ...\nAPIConnectionError: Connection error.\n",
                                 "traceback_ansi": ""}
        ev("error", agent, t[0], error=sample_extra["error"])
    span_end(agent, t[0] + 0.1)
    span_end(solver, t[0] + 0.2)
    span_end(solvers, t[0] + 0.3)
    completion = CLAIM if end == "claim" else ""
    sample = {"id": sid, "epoch": 1, "input": TASK, "target": "", "messages": [
        {"id": uid("msg"), "content": TASK, "source": "input", "role": "user"}],
        "output": {"model": "claude-bench", "choices": [], "completion": completion},
        "scores": {}, "metadata": {}, "store": {}, "events": events,
        "model_usage": {"anthropic/claude-bench": {"input_tokens": 9000, "output_tokens": 400, "total_tokens": 9400}},
        "total_time": round(t[0], 3), "working_time": round(t[0], 3), "uuid": uid("smp"), "error_retries": [],
        "attachments": {}}
    sample.update(sample_extra)
    log = {
        "version": 2, "status": "success",
        "eval": {"eval_id": f"ev{i:020d}", "run_id": f"run{i:019d}", "created": iso(0.0, frac=0),
                 "task": "observer", "task_id": f"tk{i:020d}", "task_version": 0, "task_file": "observer_task.py",
                 "task_registry_name": "observer", "task_attribs": {}, "task_args": {},
                 "dataset": {"samples": 1, "sample_ids": [sid], "shuffled": False},
                 "sandbox": {"type": "docker", "config": "compose.yaml"}, "model": "anthropic/claude-bench",
                 "model_generate_config": {}, "model_args": {},
                 "config": {"epochs": 1, "fail_on_error": False, "sandbox_cleanup": True, "log_samples": True,
                            "log_realtime": True, "log_images": True, "score_display": True},
                 "packages": {"inspect_ai": "0.3.285"}, "scorers": []},
        "plan": {"name": "plan", "steps": [{"solver": "react", "params": {
            "tools": [{"type": "tool", "name": "bash", "params": {"timeout": 180}},
                      {"type": "tool", "name": "text_editor", "params": {}}],
            "attempts": 1, "submit": None}}], "config": {}},
        "results": {"total_samples": 1, "completed_samples": 1, "scores": []},
        "stats": {"started_at": iso(0.0, frac=0), "completed_at": iso(t[0] + 1, frac=0),
                  "model_usage": {"anthropic/claude-bench": {"input_tokens": 9000, "output_tokens": 400, "total_tokens": 9400}}},
        "samples": [sample],
    }
    return f"inspect/logs/2026-12-01T10-00-00+00-00_observer_{i:08d}.json", json.dumps(log, indent=1)



# --------------------------------------------------------------------------------------
# Gemini CLI 0.56: chats/session-*.jsonl as ChatRecordingService appends it (header,
# the <session_context> checkpoint naming the workspace, each gemini message written
# once, then again with its toolCalls when they finish, the functionResponse user turn,
# `$set` lines). Shapes from tests/fixtures/real/gemini-cli and
# tests/fixtures/constructed/gemini-cli/constructed-jsonl-v0.56.
# --------------------------------------------------------------------------------------

GEMINI_MODEL = "gemini-3-flash-preview"


def gemini_cli(i, steps, end):
    import hashlib
    sid = session_id(i)
    lines, n, t = [], [0], [0.0]
    hh, mm = 10 + i // 60 % 14, i % 60  # the file name's minute: one name per run

    def at(dt=0.0):
        t[0] += dt
        return iso(t[0] + 60 * (i % 1440), zone="Z", frac=3)

    def put(rec):
        lines.append(json.dumps(rec, separators=(",", ":"), ensure_ascii=False))

    def uid():
        n[0] += 1
        return f"{i:08x}-{n[0]:04x}-4{n[0]:03x}-8000-{i:012x}"

    def shell_out(out, code):
        # v0.49+: <untrusted_context>; v0.27+: `Exit Code:` only when not 0.
        body = f"Output: {out if out else '(empty)'}"
        if code:
            body += f"\nExit Code: {code}"
        body += f"\nProcess Group PGID: {48000 + n[0]}"
        return f"<untrusted_context>\n{body}\n</untrusted_context>"

    project_hash = hashlib.sha256(WS.encode()).hexdigest()
    put({"sessionId": sid, "projectHash": project_hash, "startTime": at(), "lastUpdated": at(), "kind": "main"})
    env_id = hashlib.sha256(b"environment-context").hexdigest()[:32]
    ctx = ("<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n"
           "Today's date is Tuesday, December 1, 2026 (formatted according to the user's locale).\n"
           "My operating system is: linux\nThe project's temporary directory is: /root/.gemini/tmp/app\n"
           f"- **Workspace Directories:**\n  - {WS}\n- **Directory Structure:**\n\n"
           f"Showing up to 200 items (files + folders).\n\n{WS}/\n├───src/\n│   └───app.py\n└───tests/\n"
           "    └───test_app.py\n\n\n</session_context>")
    put({"$set": {"messages": [{"id": env_id, "timestamp": at(0.006), "type": "user", "content": [{"text": ctx}]}],
                  "lastUpdated": at(0.001)}})
    put({"id": uid(), "timestamp": at(19.0), "type": "user", "content": [{"text": TASK}]})
    put({"$set": {"lastUpdated": at(0.001)}})

    def turn(calls, text=""):
        """One model response: the message, then (tools finished) again with toolCalls,
        then the functionResponse parts as a user turn. `calls`: (name, args, status,
        output|None, error|None, display)."""
        mid = uid()
        msg = {"id": mid, "timestamp": at(2.5), "type": "gemini", "content": text,
               "thoughts": [{"subject": "Next step", "description": "Checking the change against the tests.",
                             "timestamp": at(-0.4)}],
               "tokens": {"input": 9800 + 40 * n[0], "output": 40, "cached": 0, "thoughts": 120, "tool": 0,
                          "total": 9960 + 40 * n[0]},
               "model": GEMINI_MODEL}
        at(0.4)
        put(msg)
        put({"$set": {"lastUpdated": at(0.001)}})
        if not calls:
            return
        records, parts = [], []
        for k, (name, args, status, output, error, display) in enumerate(calls):
            cid = f"{name}__{name}_{1796118000000 + i * 1000 + n[0]}_{k}"
            response = {"output": output} if error is None else {"error": error}
            fr = {"functionResponse": {"id": cid, "name": name, "response": response}}
            rec = {"id": cid, "name": name, "args": args, "result": [fr], "status": status, "timestamp": at(1.5)}
            if display is not None:
                rec["resultDisplay"] = display
            rec.update({"description": args.get("description", ""), "displayName": {
                "run_shell_command": "Shell", "replace": "Edit"}.get(name, name), "renderOutputAsMarkdown": False})
            records.append(rec)
            parts.append(fr)
        put({**msg, "toolCalls": records})
        put({"id": uid(), "timestamp": at(0.006), "type": "user", "content": parts})
        put({"$set": {"lastUpdated": at(0.001)}})

    def shell(cmd, out, code, desc):
        return ("run_shell_command", {"command": cmd, "description": desc}, "success", shell_out(out, code), None,
                out)

    for s in steps:
        kind = s[0]
        if kind == "edit":
            path = f"{WS}/{s[1]}"
            if s[2]:
                old, new = "def f(x):\n    return x - 1\n", "def f(x):\n    return x + 1\n"
                display = {"fileDiff": f"Index: {s[1].split('/')[-1]}\n===================================================================\n"
                                       f"--- {s[1].split('/')[-1]}\tCurrent\n+++ {s[1].split('/')[-1]}\tProposed\n"
                                       "@@ -1,2 +1,2 @@\n def f(x):\n-    return x - 1\n+    return x + 1\n",
                           "fileName": s[1].split("/")[-1], "filePath": path, "originalContent": old,
                           "newContent": new, "diffStat": {"model_added_lines": 1, "model_removed_lines": 1,
                                                           "model_added_chars": 16, "model_removed_chars": 16,
                                                           "user_added_lines": 0, "user_removed_lines": 0,
                                                           "user_added_chars": 0, "user_removed_chars": 0},
                           "isNewFile": False}
                turn([("replace", {"file_path": path, "old_string": "    return x - 1", "new_string": "    return x + 1",
                                   "instruction": "Fix the off-by-one."}, "success",
                       f"Successfully modified file: {path} (1 replacements).", None, display)])
            else:
                err = (f"Failed to edit, 0 occurrences found for old_string (    return y - 1). Original old_string was "
                       f"(    return y - 1) in {path}. No edits made. The exact text in old_string was not found. "
                       "Ensure you're not escaping content incorrectly and check whitespace, indentation, and context. "
                       "Use read_file tool to verify.")
                turn([("replace", {"file_path": path, "old_string": "    return y - 1", "new_string": "    return y + 1",
                                   "instruction": "Fix the off-by-one."}, "error", None, err,
                       "Error: Failed to edit, could not find the string to replace.")])
        elif kind == "test":
            cmd = test_cmd(s[1])
            if s[2] is None:
                # The command went to the background (Ctrl+B): the log shows no result.
                pid = 48100 + n[0]
                turn([("run_shell_command", {"command": cmd, "description": "Run the test suite."}, "success",
                       f"<untrusted_context>\nCommand moved to background (PID: {pid}). Output hidden. Press Ctrl+B to view.\n</untrusted_context>",
                       None, f"Command moved to background (PID: {pid}). Output hidden. Press Ctrl+B to view.")])
            else:
                out, code = test_output(s[2])
                turn([shell(cmd, out, code, "Run the test suite.")])
        elif kind == "revert":
            turn([shell(revert_cmd(s), revert_output(s), 0, "Restore the file from git.")])
        elif kind == "script":
            turn([shell(s[1], script_output(s), 0, "Regenerate the fixtures.")])
        elif kind == "mcp_write":
            # The filesystem MCP server's write_file: gemini-cli names an MCP tool that
            # clashes with a built-in one `server__tool`.
            path = f"{WS}/{s[1]}"
            turn([("filesystem__write_file", {"path": path, "content": "X = 1\n"}, "success",
                   f"Successfully wrote to {path}", None, f"Successfully wrote to {path}")])
    if end == "claim":
        turn([], CLAIM)
    elif end == "interrupt":
        # Esc while the model answers: the partial reply is not recorded, the CLI's
        # `Request cancelled.` info item is.
        put({"id": uid(), "timestamp": at(2.0), "type": "info", "content": "Request cancelled."})
        put({"$set": {"lastUpdated": at(0.001)}})
    return f"gemini/tmp/app/chats/session-2026-12-01T{hh:02d}-{mm:02d}-{sid[:8]}.jsonl", "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------
# OpenHands (CodeActAgent, V0 event stream): a trajectory as `save_trajectory_path` and
# the GUI's export write it (a JSON list of actions and observations linked by `cause`,
# zoneless timestamps, `tool_call_metadata` with the model response), named by the
# session: the importer takes the file name as the run and its task. Shapes from
# tests/fixtures/real/openhands/trajs_*.json and multi_swe_bench_output.jsonl.
# --------------------------------------------------------------------------------------

def openhands(i, steps, end):
    sid = session_id(i)
    events, t, shell_dir = [], [0.0], [WS]

    def at(dt=0.0):
        t[0] += dt
        return iso(t[0], zone="", frac=6)

    def add(e):
        e = {"id": len(events), **e}
        events.append(e)
        return e["id"]

    def meta(fn, tid, thought, args):
        return {"function_name": fn, "tool_call_id": tid, "model_response": {
            "id": f"chatcmpl-{i:08d}{len(events):04d}", "created": 1796112000 + len(events), "model": "claude-bench",
            "object": "chat.completion", "system_fingerprint": None,
            "choices": [{"finish_reason": "tool_calls", "index": 0, "message": {
                "content": thought, "role": "assistant",
                "tool_calls": [{"index": 1, "function": {"arguments": json.dumps(args), "name": fn}, "id": tid,
                                "type": "function"}]}}],
            "usage": {"completion_tokens": 60, "prompt_tokens": 9000, "total_tokens": 9060}},
            "total_calls_in_response": 1}

    def call(action, fn, args, thought, message, observation=None, dt=2.0, run_for=0.6):
        """An agent action and (unless None) its observation: (kind, content, extras, message)."""
        tid = f"toolu_{i:06d}{len(events):04d}"
        m = meta(fn, tid, thought, args)
        a = add({"timestamp": at(dt), "source": "agent", "message": message, "action": action,
                 "tool_call_metadata": m, "args": {**args_of[action](args), "thought": thought}, "timeout": 120})
        if observation is None:
            return
        kind, content, extras, omsg = observation
        add({"timestamp": at(run_for), "source": "agent", "message": omsg, "cause": a, "observation": kind,
             "tool_call_metadata": m, "content": content, "extras": extras})

    args_of = {
        "run": lambda a: {"command": a["command"], "is_input": False, "blocking": False, "hidden": False,
                          "confirmation_state": "confirmed"},
        "edit": lambda a: {"path": a["path"], "command": a["command"], "file_text": None, "old_str": a["old_str"],
                           "new_str": a["new_str"], "insert_line": None, "content": "", "start": 1, "end": -1,
                           "impl_source": "oh_aci"},
        "call_tool_mcp": lambda a: {"name": "write_file", "arguments": a},
        "finish": lambda a: {"final_thought": a["message"], "task_completed": "true", "outputs": {}},
    }

    def run(command, out, code, thought, where=None, timeout=False):
        """A bash command; the persistent shell stays where the command's `cd` left it."""
        if shell_dir[0] != WS and where is None:
            command = f"cd {WS} && {command}"
            shell_dir[0] = WS
        if where:
            shell_dir[0] = where
        suffix = (f"\n[The command has no new output after 30 seconds. You may wait longer to see additional output "
                  f"by sending empty command '', send other commands to interact with the current process, or send "
                  f"keys to interrupt/kill the command.]" if timeout else f"\n[The command completed with exit code {code}.]")
        exit_code = -1 if timeout else code
        extras = {"command": command, "metadata": {
            "exit_code": exit_code, "pid": -1, "username": "openhands", "hostname": "4c1e2f9a7b3d",
            "working_dir": shell_dir[0], "py_interpreter_path": "/usr/bin/python", "prefix": "", "suffix": suffix},
            "hidden": False}
        call("run", "execute_bash", {"command": command}, thought, f"Running command: {command}",
             ("run", out + suffix, extras, f"Command `{command}` executed with exit code {exit_code}."))

    add({"timestamp": at(), "source": "agent", "message": "You are OpenHands agent, a helpful AI assistant that can "
         "interact with a computer to solve tasks.", "action": "system", "args": {
             "content": "You are OpenHands agent, a helpful AI assistant that can interact with a computer to solve tasks.",
             "tools": [], "openhands_version": "0.39.0", "agent_class": "CodeActAgent"}})
    prompt = f"<uploaded_files>\n{WS}\n</uploaded_files>\nI've uploaded a python code repository in the directory {WS}. {TASK}"
    add({"timestamp": at(0.001), "source": "user", "message": prompt, "action": "message",
         "args": {"content": prompt, "image_urls": None, "wait_for_response": False}})
    for s in steps:
        kind = s[0]
        if kind == "edit":
            path = f"{WS}/{s[1]}"
            old, new = ("    return x - 1", "    return x + 1") if s[2] else ("    return y - 1", "    return y + 1")
            args = {"command": "str_replace", "path": path, "old_str": old, "new_str": new}
            if s[2]:
                obs = ("edit", f"The file {path} has been edited. Here's the result of running `cat -n` on a snippet of "
                               f"{path}:\n     1\tdef f(x):\n     2\t    return x + 1\nReview the changes and make sure "
                               "they are as expected. Edit the file again if necessary.",
                       {"path": path, "prev_exist": False, "old_content": old, "new_content": new, "impl_source": "oh_aci",
                        "diff": f"--- {path}\n+++ {path}\n@@ -2 +2 @@\n-{old}\n+{new}", "_diff_cache": None},
                       f"I edited the file {path}.")
            else:
                obs = ("edit", f"ERROR:\nNo replacement was performed, old_str `{old}` did not appear verbatim in {path}.",
                       {"path": path, "prev_exist": False, "old_content": old, "new_content": new, "impl_source": "oh_aci",
                        "diff": "", "_diff_cache": None}, f"I edited the file {path}.")
            call("edit", "str_replace_editor", args, "Let me fix the expression.", "", obs)
        elif kind == "test":
            cmd = test_cmd(s[1])
            where = s[1] if s[1] != WS else None
            if s[2] is None:
                # Still running when OpenHands stopped waiting (exit code -1): no result.
                run(cmd, "============================= test session starts ==============================\n"
                         "collecting ... ", -1, "Let me run the tests.", where, timeout=True)
            else:
                out, code = test_output(s[2])
                run(cmd, out, code, "Let me run the tests.", where)
        elif kind == "revert":
            run(revert_cmd(s), revert_output(s), 0, "Let me restore that file.")
        elif kind == "script":
            run(s[1], script_output(s), 0, "Let me regenerate the fixtures.")
        elif kind == "mcp_write":
            # A tool of an MCP server (the filesystem server's write_file): CodeActAgent
            # turns it into an MCPAction, answered by an `mcp` observation.
            path = f"{WS}/{s[1]}"
            args = {"path": path, "content": "X = 1\n"}
            result = json.dumps({"meta": None, "content": [{"type": "text", "text": f"Successfully wrote to {path}",
                                                            "annotations": None}], "isError": False})
            call("call_tool_mcp", "write_file", args, "Let me write the generated module.", "", (
                "mcp", result, {"name": "write_file", "arguments": args}, result))
    if end == "claim":
        call("finish", "finish", {"message": CLAIM}, CLAIM, CLAIM)
        add({"timestamp": at(0.01), "source": "environment", "message": "", "observation": "agent_state_changed",
             "content": "", "extras": {"agent_state": "finished", "reason": ""}})
    elif end == "interrupt":
        # The person presses stop in the GUI while the agent is thinking.
        a = add({"timestamp": at(3.0), "source": "user", "message": "Agent state changed to stopped",
                 "action": "change_agent_state", "args": {"agent_state": "stopped", "thought": ""}})
        add({"timestamp": at(0.01), "source": "environment", "message": "", "observation": "agent_state_changed",
             "content": "", "extras": {"agent_state": "stopped", "reason": ""}})
    return f"openhands/trajectories/{sid}.json", json.dumps(events, indent=2)


# --------------------------------------------------------------------------------------
# SWE-agent 1.x: <instance>/<instance>.traj (trajectory steps with action, observation,
# thought, execution_time and state; the history with function calls; info; the run's
# replay_config naming the problem statement's id, which the importer takes as the
# task). SWE-agent logs no exit codes: a test's result is its runner's summary line.
# Shapes from tests/fixtures/real/swe-agent/marshmallow-1867.function_calling_replace.traj.
# --------------------------------------------------------------------------------------

def swe_agent(i, steps, end):
    sid = session_id(i)
    traj, history, shell_dir = [], [], [WS]
    history.append({"message_type": "system_prompt", "role": "system", "agent": "main",
                    "content": "You are a helpful assistant that can interact with a computer to solve tasks."})
    history.append({"message_type": "observation", "role": "user", "agent": "main", "content":
                    f"<uploaded_files>\n{WS}\n</uploaded_files>\nI've uploaded a python code repository in the directory "
                    f"{WS}. Consider the following PR description:\n\n<pr_description>\n{TASK}\n</pr_description>"})

    def step(tool, args, action, observation, thought, secs=0.4):
        cid = f"call_{i:06d}{len(traj):04d}"
        history.append({"message_type": "action", "role": "assistant", "content": thought, "thought": thought,
                        "action": action, "agent": "main", "tool_calls": [
                            {"function": {"arguments": json.dumps(args), "name": tool}, "id": cid, "type": "function"}]})
        history.append({"message_type": "observation", "role": "tool", "agent": "main", "tool_call_ids": [cid],
                        "content": [{"type": "text", "text": f"OBSERVATION:\n{observation}"}]})
        traj.append({"action": action, "observation": observation, "response": thought, "thought": thought,
                     "execution_time": secs, "state": {"working_dir": shell_dir[0]}, "query": [], "extra_info": {}})

    def bash(command, out, thought, where=None, secs=0.4):
        # One shell for the whole run: it stays where a `cd` left it.
        if shell_dir[0] != WS and where is None:
            command = f"cd {WS} && {command}"
        shell_dir[0] = where or WS
        step("bash", {"command": command}, command, out, thought, secs)

    def q(text):
        return "'" + text.replace("'", "'\"'\"'") + "'"

    for s in steps:
        kind = s[0]
        if kind == "edit":
            path = f"{WS}/{s[1]}"
            old, new = ("    return x - 1", "    return x + 1") if s[2] else ("    return y - 1", "    return y + 1")
            args = {"command": "str_replace", "path": path, "old_str": old, "new_str": new}
            action = f"str_replace_editor str_replace {path}   --old_str {q(old)} --new_str {q(new)}"
            if s[2]:
                obs = (f"The file {path} has been edited. Here's the result of running `cat -n` on a snippet of {path}:\n"
                       f"     1\tdef f(x):\n     2\t    return x + 1\nReview the changes and make sure they are as "
                       "expected. Edit the file again if necessary.")
            else:
                obs = f"No replacement was performed, old_str `{old}` did not appear verbatim in {path}."
            step("str_replace_editor", args, action, obs, "Let me fix the expression.")
        elif kind == "test":
            cmd = test_cmd(s[1])
            where = s[1] if s[1] != WS else None
            if s[2] is None:
                # The harness killed the command at its timeout: no result.
                bash(cmd, f"The command '{cmd}' was cancelled because it took more than 300 seconds. Please try a "
                          "different command that completes more quickly. Note: A common source of this error is if "
                          "the command is interactive or requires user input (it is impossible to receive user input "
                          "in the current environment, so the command will never complete).",
                     "Let me run the tests.", where, secs=300.0)
            else:
                bash(cmd, test_output(s[2])[0], "Let me run the tests.", where, secs=1.2)
        elif kind == "revert":
            bash(revert_cmd(s), revert_output(s), "Let me restore that file.")
        elif kind == "script":
            bash(s[1], script_output(s) or "Your command ran successfully and did not produce any output.",
                 "Let me regenerate the fixtures.")
    diff = ("diff --git a/src/app.py b/src/app.py\nindex 3b18e51..9c1f7a2 100644\n--- a/src/app.py\n+++ b/src/app.py\n"
            "@@ -1,2 +1,2 @@\n def f(x):\n-    return x - 1\n+    return x + 1\n")
    info = {"swe_agent_version": "1.1.0", "swe_rex_version": "1.2.1"}
    if end == "claim":
        step("submit", {}, "submit", diff, CLAIM)
        info.update({"submission": diff, "exit_status": "submitted"})
    # "cut": SWE-agent saves the trajectory after every step; a run stopped mid-way
    # leaves one without exit status or submission.
    info["model_stats"] = {"instance_cost": 0.12, "tokens_sent": 90000, "tokens_received": 2400,
                           "api_calls": len(traj)}
    config = {
        "env": {"deployment": {"image": "python:3.11", "type": "docker"},
                "repo": {"path": WS, "base_commit": "HEAD", "type": "local"}, "post_startup_commands": [],
                "name": "main"},
        "agent": {"name": "main", "model": {"name": "claude-bench", "per_instance_cost_limit": 3.0,
                                             "temperature": 0.0, "top_p": 1.0},
                  "tools": {"filter": {"blocklist": ["vim", "vi", "emacs", "nano", "nohup", "gdb", "less", "tail -f",
                                                     "python -m venv", "make"]},
                            "bundles": [{"path": "tools/registry"}, {"path": "tools/edit_anthropic"},
                                        {"path": "tools/review_on_submit_m"}],
                            "enable_bash_tool": True, "parse_function": {"type": "function_calling"}},
                  "type": "default"},
        "problem_statement": {"text": TASK, "extra_fields": {}, "type": "text", "id": sid},
        "output_dir": "trajectories/bench", "actions": {"open_pr": False, "apply_patch_locally": False},
        "env_var_path": None,
    }
    doc = {"environment": "main", "trajectory": traj, "history": history, "info": info,
           "replay_config": json.dumps(config)}
    return f"swe-agent/trajectories/bench/{sid}/{sid}.traj", json.dumps(doc, indent=2)


# --------------------------------------------------------------------------------------
# mini-SWE-agent 2.x: <instance>/<instance>.traj.json ({info, messages,
# trajectory_format}), text-based actions (```mswea_bash_command blocks), each command in
# a new subshell of `environment.cwd`, observations with `extra.raw_output` and
# `returncode`. Everything goes through bash: edits are `sed -i` (and a `git apply` that
# does not apply, for an edit refused). Shapes from
# tests/fixtures/real/mini-swe-agent/generated/slugify.success.traj.json.
# --------------------------------------------------------------------------------------

def mini_swe_agent(i, steps, end):
    sid = session_id(i)
    t0 = 1796115600.0 + i * 600
    clock = [t0]
    system = ("You are a helpful assistant that can interact with a computer.\n\nYour response must contain exactly ONE "
              "bash code block with ONE command (or commands connected with && or ||).")
    template = "Please solve this issue: {{task}}\n\nYou can execute bash commands and edit files to implement the necessary changes."
    messages = [{"role": "system", "content": system},
                {"role": "user", "content": template.replace("{{task}}", TASK)}]

    def act(command, thought, out, code, exception=None):
        clock[0] += 3.0
        messages.append({"role": "assistant", "content": f"THOUGHT: {thought}\n\n```mswea_bash_command\n{command}\n```",
                         "extra": {"actions": [{"command": command}], "cost": 0.01}})
        if out is None:
            return
        clock[0] += 1.0
        extra = {"raw_output": out, "returncode": code, "timestamp": round(clock[0], 6), "exception_info": ""}
        head = ""
        if exception:
            extra.update(exception)
            head = f"<exception>{exception['exception_info']}</exception>\n"
        messages.append({"role": "user", "content": f"{head}<returncode>{code}</returncode>\n<output>\n{out}</output>",
                         "extra": extra})

    for s in steps:
        kind = s[0]
        if kind == "edit":
            if s[2]:
                act(f"sed -i 's/return x - 1/return x + 1/' {s[1]}", "Fix the off-by-one.", "", 0)
            else:
                patch = (f"git apply <<'EOF'\n--- a/{s[1]}\n+++ b/{s[1]}\n@@ -1,2 +1,2 @@\n def f(y):\n"
                         "-    return y - 1\n+    return y + 1\nEOF")
                act(patch, "Apply the fix as a patch.",
                    f"error: patch failed: {s[1]}:1\nerror: {s[1]}: patch does not apply\n", 1)
        elif kind == "test":
            cmd = test_cmd(s[1])
            if s[2] is None:
                # Killed at the environment's timeout: no result.
                act(cmd, "Run the tests.", "", -1, {
                    "exception_info": f"An error occurred while executing the command: Command '{cmd}' timed out after 30 seconds",
                    "exception_type": "TimeoutExpired", "exception": f"Command '{cmd}' timed out after 30 seconds"})
            else:
                out, code = test_output(s[2])
                act(cmd, "Run the tests.", out + "\n", code)
        elif kind == "revert":
            act(revert_cmd(s), "Restore the file.", revert_output(s) + "\n", 0)
        elif kind == "script":
            out = script_output(s)
            act(s[1], "Regenerate the fixtures.", out + "\n" if out else "", 0)
    info = {"model_stats": {"instance_cost": 0.01 * len(messages), "api_calls": len(messages) // 2},
            "mini_version": "2.4.6"}
    diff = ("diff --git a/src/app.py b/src/app.py\nindex 3b18e51..9c1f7a2 100644\n--- a/src/app.py\n+++ b/src/app.py\n"
            "@@ -1,2 +1,2 @@\n def f(x):\n-    return x - 1\n+    return x + 1\n")
    if end == "claim":
        act("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff", CLAIM, None, None)
        messages.append({"role": "exit", "content": diff, "extra": {"exit_status": "Submitted", "submission": diff}})
        info.update({"exit_status": "Submitted", "submission": diff})
    elif end == "cut":
        # The step limit stops the run right after a command.
        messages.append({"role": "exit", "content": "LimitsExceeded",
                         "extra": {"exit_status": "LimitsExceeded", "submission": ""}})
        info.update({"exit_status": "LimitsExceeded", "submission": ""})
    elif end == "interrupt":
        # Ctrl+C: the interactive agent asks for a comment and records it; the person
        # then quits the run.
        messages.append({"role": "user", "content": "Interrupted by user: stop here, I'll take it from here",
                         "extra": {"interrupt_type": "UserInterruption"}})
        info.update({"exit_status": "KeyboardInterrupt", "submission": ""})
    info["config"] = {
        "agent": {"system_template": system, "instance_template": template, "step_limit": 0, "cost_limit": 3.0,
                  "mode": "yolo", "whitelist_actions": [], "confirm_exit": False},
        "agent_type": "minisweagent.agents.interactive.InteractiveAgent",
        "model": {"model_name": "anthropic/claude-bench", "model_kwargs": {}},
        "model_type": "minisweagent.models.litellm_textbased_model.LitellmTextbasedModel",
        "environment": {"cwd": WS, "env": {"PAGER": "cat"}, "timeout": 30},
        "environment_type": "minisweagent.environments.local.LocalEnvironment"}
    doc = {"info": info, "messages": messages, "trajectory_format": "mini-swe-agent-1.1", "instance_id": sid}
    return f"mini-swe-agent/{sid}/{sid}.traj.json", json.dumps(doc, indent=2)


# --------------------------------------------------------------------------------------
# ATIF (Harbor's trajectory format, here as Harbor's OpenHands converter writes it,
# ATIF-v1.5): one JSON object {schema_version, session_id, agent, steps,
# final_metrics}; agent steps carry `tool_calls` (function_name, arguments) and an
# `observation` whose results name their call. ATIF records no exit codes and no working
# directory. Shapes from tests/fixtures/real/atif/harbor-openhands-hello-world.
# --------------------------------------------------------------------------------------

def atif(i, steps, end):
    sid = session_id(i)
    out, t = [], [0.0]

    def at(dt=1.5):
        t[0] += dt
        return iso(t[0], zone="Z", frac=3)

    def step(**kw):
        out.append({"step_id": len(out) + 1, "timestamp": at(), **kw})

    def call(fn, args, message, result, name=None):
        cid = f"toolu_{i:06d}{len(out):04d}"
        st = {"source": "agent", "model_name": "claude-bench", "message": message,
              "tool_calls": [{"tool_call_id": cid, "function_name": fn, "arguments": {**args, "security_risk": "LOW"}}],
              "metrics": {"prompt_tokens": 9000 + 100 * len(out), "completion_tokens": 60, "cost_usd": 0.0279}}
        if result is not None:
            st["observation"] = {"results": [{"source_call_id": cid, "content": result}]}
        step(**st)

    step(source="system", message="You are OpenHands agent, a helpful AI assistant that can interact with a computer to solve tasks.")
    step(source="user", message=TASK + "\n")
    for s in steps:
        kind = s[0]
        if kind == "edit":
            path = f"{WS}/{s[1]}"
            old, new = ("    return x - 1", "    return x + 1") if s[2] else ("    return y - 1", "    return y + 1")
            args = {"command": "str_replace", "path": path, "old_str": old, "new_str": new}
            if s[2]:
                res = (f"The file {path} has been edited. Here's the result of running `cat -n` on a snippet of {path}:\n"
                       f"     1\tdef f(x):\n     2\t    return x + 1\nReview the changes and make sure they are as "
                       "expected. Edit the file again if necessary.")
            else:
                res = f"ERROR:\nNo replacement was performed, old_str `{old}` did not appear verbatim in {path}."
            call("str_replace_editor", args, f"I edited the file {path}.", res)
        elif kind == "test":
            cmd = test_cmd(s[1])
            if s[2] is None:
                # The converted run shows the call, not its result.
                call("execute_bash", {"command": cmd}, f"Running command: {cmd}", None)
            else:
                o, code = test_output(s[2])
                call("execute_bash", {"command": cmd}, f"Command `{cmd}` executed with exit code {code}.", o)
        elif kind == "revert":
            cmd = revert_cmd(s)
            call("execute_bash", {"command": cmd}, f"Command `{cmd}` executed with exit code 0.",
                 revert_output(s))
        elif kind == "script":
            call("execute_bash", {"command": s[1]}, f"Command `{s[1]}` executed with exit code 0.", script_output(s))
        elif kind == "mcp_write":
            # An MCP server's tool, as OpenHands exposes it to the model (its own name).
            path = f"{WS}/{s[1]}"
            call("write_file", {"path": path, "content": "X = 1\n"}, "",
                 json.dumps({"meta": None, "content": [{"type": "text", "text": f"Successfully wrote to {path}"}],
                             "isError": False}))
    if end == "claim":
        cid = f"toolu_{i:06d}end"
        step(source="agent", model_name="claude-bench", message=CLAIM,
             tool_calls=[{"tool_call_id": cid, "function_name": "finish", "arguments": {"message": CLAIM}}],
             metrics={"prompt_tokens": 9900, "completion_tokens": 30, "cost_usd": 0.0302})
    doc = {"schema_version": "ATIF-v1.5", "session_id": sid,
           "agent": {"name": "openhands", "version": "1.1.0", "model_name": "claude-bench",
                     "extra": {"agent_class": "CodeActAgent"}},
           "steps": out,
           "final_metrics": {"total_prompt_tokens": sum(s.get("metrics", {}).get("prompt_tokens", 0) for s in out),
                             "total_completion_tokens": sum(s.get("metrics", {}).get("completion_tokens", 0) for s in out),
                             "total_steps": len(out)}}
    return f"atif/{sid}/agent/trajectory.json", json.dumps(doc, indent=2)


# --------------------------------------------------------------------------------------
# Pi (pi-mono coding agent), session format v3: ~/.pi/agent/sessions/--CWD--/TS_ID.jsonl,
# a header {type: session, version, id, timestamp, cwd}, then entries linked by
# parentId; assistant messages carry `toolCall` blocks, each answered by a `toolResult`
# message (`isError`; a failed bash result ends "Command exited with code N"). Shapes from
# tests/fixtures/constructed/pi/trajectory-v3-tool-calls and pi-mono's agent loop and
# tools (bash.ts, edit.ts, agent-loop.ts).
# --------------------------------------------------------------------------------------

def pi(i, steps, end):
    sid = session_id(i)
    lines, t, parent, n = [], [0.0], [None], [0]

    def at(dt=0.05):
        t[0] += dt
        return iso(t[0], zone="Z", frac=3)

    def ms():
        return 1796119200000 + int(t[0] * 1000)

    def entry(kind, **kw):
        n[0] += 1
        eid = f"{i % 0xffff:04x}{n[0]:04x}"
        lines.append(json.dumps({"type": kind, "id": eid, "parentId": parent[0], "timestamp": at(), **kw},
                                separators=(",", ":")))
        parent[0] = eid

    def assistant(content, stop="toolUse", **extra):
        t[0] += 2.0
        entry("message", message={"role": "assistant", "content": content, "api": "anthropic-messages",
                                  "provider": "anthropic", "model": "claude-bench",
                                  "usage": {"input": 9000, "output": 60, "cacheRead": 0, "cacheWrite": 0,
                                            "totalTokens": 9060, "cost": {"input": 0.027, "output": 0.0009,
                                                                          "cacheRead": 0, "cacheWrite": 0,
                                                                          "total": 0.0279}},
                                  "stopReason": stop, "timestamp": ms(), "responseId": f"msg_{i:06d}{n[0]:04d}",
                                  **extra})

    def result(cid, tool, text, is_error, dt=0.6, details=None):
        t[0] += dt
        msg = {"role": "toolResult", "toolCallId": cid, "toolName": tool, "content": [{"type": "text", "text": text}],
               "isError": is_error, "timestamp": ms()}
        if details:
            msg["details"] = details
        entry("message", message=msg)

    def edit_call(cid, path, ok):
        old, new = ("    return x - 1", "    return x + 1") if ok else ("    return y - 1", "    return y + 1")
        return {"type": "toolCall", "id": cid, "name": "edit", "arguments": {"path": path, "oldText": old, "newText": new}}

    def edit_result(cid, path, ok, dt=0.6):
        if ok:
            result(cid, "edit", f"Successfully replaced text in {path}.", False, dt,
                   {"diff": "   1 def f(x):\n-  2     return x - 1\n+  2     return x + 1", "firstChangedLine": 2})
        else:
            result(cid, "edit", f"Could not find the exact text in {path}. The old text must match exactly including "
                                "all whitespace and newlines.", True, dt)

    def bash(cid, command, out, code, timeout=None):
        args = {"command": command}
        if timeout:
            args["timeout"] = timeout
        assistant([{"type": "toolCall", "id": cid, "name": "bash", "arguments": args}])
        if timeout:
            result(cid, "bash", f"{out}\n\nCommand timed out after {timeout} seconds", True, dt=timeout)
        elif code:
            result(cid, "bash", f"{out}\n\nCommand exited with code {code}", True)
        else:
            result(cid, "bash", out or "(no output)", False)

    lines.append(json.dumps({"type": "session", "version": 3, "id": sid, "timestamp": at(0), "cwd": WS},
                            separators=(",", ":")))
    entry("model_change", provider="anthropic", modelId="claude-bench")
    entry("thinking_level_change", thinkingLevel="off")
    entry("message", message={"role": "user", "content": [{"type": "text", "text": TASK}], "timestamp": ms()})
    for k, s in enumerate(steps):
        kind, cid = s[0], f"toolu_{i:06d}_{k:03d}"
        if kind == "edit":
            assistant([edit_call(cid, s[1], s[2])])
            edit_result(cid, s[1], s[2])
        elif kind == "test":
            cmd = test_cmd(s[1])
            if s[2] is None:
                # Killed at the timeout the agent gave: no result.
                bash(cid, cmd, "...", None, timeout=120)
            else:
                out, code = test_output(s[2])
                bash(cid, cmd, out, code)
        elif kind == "revert":
            bash(cid, revert_cmd(s), revert_output(s), 0)
        elif kind == "script":
            bash(cid, s[1], script_output(s), 0)
        elif kind == "parallel":
            # One reply, two calls: pi runs them in parallel and writes both results once
            # all have finished, in the order of the calls.
            cmd = "python3 -m pytest -q tests"
            out, code = test_output(s[2])
            assistant([edit_call(cid + "e", s[1], True),
                       {"type": "toolCall", "id": cid + "t", "name": "bash", "arguments": {"command": cmd}}])
            edit_result(cid + "e", s[1], True, dt=4.0)
            if code:
                result(cid + "t", "bash", f"{out}\n\nCommand exited with code {code}", True, dt=0.001)
            else:
                result(cid + "t", "bash", out, False, dt=0.001)
    if end == "claim":
        assistant([{"type": "text", "text": CLAIM}], stop="stop")
    elif end == "interrupt":
        # Escape while the reply streams: pi keeps the partial reply, stopped.
        assistant([{"type": "text", "text": "The tests pass, so now"}], stop="aborted",
                  errorMessage="Request was aborted.")
    return f"pi/agent/sessions/--srv-app--/2026-12-01T10-00-00-000Z_{sid}.jsonl", "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------
# OpenCode 1.1: `opencode export ID` output, {info, messages: [{info, parts}]}: each
# assistant message is one step (step-start with its snapshot, text, `tool` parts with
# `state` {status, input, output | error, metadata, time {start, end}}, step-finish);
# bash's exit code is `metadata.exit` (null when it was killed). OpenCode has no
# completion claim (a step ending `finish: stop` ends a turn). Shapes from
# tests/fixtures/constructed/opencode (session-export.json and storage/).
# --------------------------------------------------------------------------------------

def opencode(i, steps, end):
    sid = session_id(i)
    t0 = 1796119200000 + i * 600000
    clock, messages, n = [t0], [], [0]

    def now(dms=0):
        clock[0] += dms
        return clock[0]

    def ident(prefix):
        n[0] += 1
        return f"{prefix}_{i:08x}{n[0]:04x}Bench{'x' * 8}"

    def tokens():
        return {"input": 9000, "output": 60, "reasoning": 0, "cache": {"read": 0, "write": 0}}

    # The worktree, as OpenCode's snapshots see it: a content version per file (every
    # write new content; a revert back to the committed one, version 0). A snapshot is
    # `git write-tree` of the worktree, so equal contents give the same tree id.
    files, written = {}, [0]

    def tree():
        import hashlib
        return hashlib.sha1(json.dumps(sorted(files.items())).encode()).hexdigest()

    def change(path, version=None):
        written[0] += 1
        files[path] = written[0] if version is None else version

    def message(parts_of, finish="tool-calls", error=None, changes=()):
        """One assistant step: `parts_of(mid)` gives its text and tool parts; `changes`
        what its calls did to the worktree."""
        mid = ident("msg")
        created = now(2000)
        parts = [{"id": ident("prt"), "sessionID": sid, "messageID": mid, "type": "step-start", "snapshot": tree()}]
        parts += parts_of(mid)
        for c in changes:
            change(*c)
        snap = tree()
        info = {"id": mid, "sessionID": sid, "role": "assistant", "time": {"created": created},
                "parentID": messages[0]["info"]["id"], "modelID": "claude-bench", "providerID": "anthropic",
                "mode": "build", "agent": "build", "path": {"cwd": WS, "root": WS}, "cost": 0.028,
                "tokens": tokens(), "finish": finish}
        if error:
            info["error"] = error
        else:
            parts.append({"id": ident("prt"), "sessionID": sid, "messageID": mid, "type": "step-finish",
                          "reason": finish, "snapshot": snap, "cost": 0.028, "tokens": tokens()})
            info["time"]["completed"] = now(200)
        messages.append({"info": info, "parts": parts})

    def tool(mid, name, inp, output=None, meta=None, error=None, start=None, dur=500):
        st = now(100) if start is None else start
        state = {"status": "error" if error else "completed", "input": inp}
        if error:
            state.update({"error": error, "metadata": {}})
        else:
            state.update({"output": output, "title": inp.get("description") or inp.get("filePath") or name,
                          "metadata": meta or {}})
        state["time"] = {"start": st, "end": st + dur}
        if start is None:
            now(dur)
        return {"id": ident("prt"), "sessionID": sid, "messageID": mid, "type": "tool", "callID": f"toolu_{ident('c')}",
                "tool": name, "state": state}

    def bash(mid, command, out, code, desc, killed=False, **kw):
        meta = {"output": out, "exit": None if killed else code, "description": desc, "truncated": False}
        if killed:
            out = out + "\n\n<bash_metadata>\nbash tool terminated command after exceeding timeout 120000 ms\n</bash_metadata>"
        return tool(mid, "bash", {"command": command, "description": desc}, out, meta, **kw)

    def edit(mid, path, ok, **kw):
        full = f"{WS}/{path}"
        old, new = ("    return x - 1", "    return x + 1") if ok else ("    return y - 1", "    return y + 1")
        inp = {"filePath": full, "oldString": old, "newString": new}
        if not ok:
            return tool(mid, "edit", inp, error="Error: oldString not found in content", **kw)
        before, after = "def f(x):\n    return x - 1\n", "def f(x):\n    return x + 1\n"
        diff = (f"Index: {full}\n===================================================================\n--- {full}\n+++ {full}\n"
                "@@ -1,2 +1,2 @@\n def f(x):\n-    return x - 1\n+    return x + 1\n")
        return tool(mid, "edit", inp, "Edit applied successfully.",
                    {"diff": diff, "filediff": {"file": full, "before": before, "after": after, "additions": 1,
                                                "deletions": 1}, "diagnostics": {}}, **kw)

    uid = ident("msg")
    messages.append({"info": {"id": uid, "sessionID": sid, "role": "user", "time": {"created": now()},
                              "agent": "build", "model": {"providerID": "anthropic", "modelID": "claude-bench"}},
                     "parts": [{"id": ident("prt"), "sessionID": sid, "messageID": uid, "type": "text", "text": TASK}]})
    for s in steps:
        kind = s[0]
        if kind == "edit":
            message(lambda mid: [edit(mid, s[1], s[2])], changes=[(s[1],)] if s[2] else [])
        elif kind == "test":
            cmd = test_cmd(s[1])
            if s[2] is None:
                # Killed at bash's timeout: exit null, no summary line.
                message(lambda mid: [bash(mid, cmd, "....", None, "Run the tests", killed=True, dur=120000)])
            else:
                out, code = test_output(s[2])
                message(lambda mid: [bash(mid, cmd, out + "\n", code, "Run the tests")])
        elif kind == "revert":
            message(lambda mid: [bash(mid, revert_cmd(s), revert_output(s) + "\n", 0,
                                      "Restore the file")], changes=[(s[1], 0)])
        elif kind == "script":
            out = script_output(s)
            message(lambda mid: [bash(mid, s[1], out + "\n" if out else "", 0, "Regenerate fixtures")],
                    changes=[("tests/fixtures",)])
        elif kind == "mcp_write":
            # An MCP server's tool: OpenCode names it `<server>_<tool>`.
            full = f"{WS}/{s[1]}"
            message(lambda mid: [tool(mid, "filesystem_write_file", {"path": full, "content": "X = 1\n"},
                                      f"Successfully wrote to {full}")], changes=[(s[1],)])
        elif kind == "parallel":
            # One step, two calls the model streamed together: the AI SDK runs each
            # tool as its call arrives, so the test starts before the edit has ended.
            def both(mid):
                st = now(100)
                out, code = test_output(s[2])
                parts = [edit(mid, s[1], True, start=st, dur=5000),
                         bash(mid, "python3 -m pytest -q tests", out + "\n", code, "Run the tests", start=st + 1000,
                              dur=2000)]
                now(5000)
                return parts
            message(both, changes=[(s[1],)])
    if end == "claim":
        message(lambda mid: [{"id": ident("prt"), "sessionID": sid, "messageID": mid, "type": "text", "text": CLAIM}],
                finish="stop")
    elif end == "interrupt":
        # The person presses Escape while the reply streams.
        message(lambda mid: [{"id": ident("prt"), "sessionID": sid, "messageID": mid, "type": "text",
                              "text": "The tests pass, so now"}], finish=None,
                error={"name": "MessageAbortedError", "data": {"message": "The operation was aborted."}})
    info = {"id": sid, "slug": "bench-run", "version": "1.1.60", "projectID": f"{i:040x}", "directory": WS,
            "title": "Fix the bug in src/app.py", "time": {"created": t0, "updated": clock[0]}}
    return f"opencode/export/{sid}.json", json.dumps({"info": info, "messages": messages}, indent=2)


SOURCES = {"inspect": inspect_ai, "gemini-cli": gemini_cli, "openhands": openhands,
           "swe-agent": swe_agent, "mini-swe-agent": mini_swe_agent,
           "atif": atif, "pi": pi, "opencode": opencode}

ONLY = {
    # An MCP tool call. SWE-agent and mini-SWE-agent have no MCP client (tools are
    # shell bundles / bash only); pi has no MCP support by design.
    "mcp_write": {"inspect", "gemini-cli", "openhands", "atif", "opencode"},
    # Two calls of one reply running at once, and a log that shows it. Inspect (its
    # call_tools gathers them; ToolEvent start and end), pi (parallel by default; results
    # written once all have finished) and OpenCode (tool parts with time.start / end)
    # can. Gemini CLI records one timestamp per call; OpenHands, SWE-agent and
    # mini-SWE-agent run the calls of a reply one after another; ATIF records no call
    # times.
    "parallel": {"inspect", "pi", "opencode"},
    # A person stopping the run. SWE-agent runs unattended (no exit status or event
    # for a person's interrupt); ATIF does not say who wrote a user step.
    "interrupt": {"claude-code", "codex", "inspect", "gemini-cli", "openhands", "mini-swe-agent", "pi", "opencode"},
}
