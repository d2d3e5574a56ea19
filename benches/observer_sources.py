#!/usr/bin/env python3
"""More sources for the observer-integrity bench (benches/observer_bench.py).

Each writer has the signature of `observer_bench.claude_code` / `codex`:
`writer(i, steps, end) -> (relative_path, text_or_bytes)`, and writes the abstract steps
of a scenario in the real shape of that tool's log (copied from the real logs under
tests/fixtures/real/ and from docs/importers.md §9). The run's task, as the store
derives it, is `session_id(i)`, or `PREFIX/session_id(i)` where the format always
writes a prefix (Inspect `{eval.task}/{sample id}`, aider `aider/{TS}`): `task_key`
gives back the session id.

    SOURCES  {format name: writer}
    ONLY     {hazard: the sources that can express it} (merged with the bench's ONLY;
             a hazard not listed runs everywhere)
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from observer_bench import OTHER, WS, session_id, test_output  # noqa: E402

TASK = "Fix the bug in src/app.py so that the tests pass."
CLAIM = "Done: the tests pass."


def task_key(task):
    """The session id in a derived task: the part after the format's prefix."""
    return task.rsplit("/", 1)[-1]


def script_output(s):
    return s[2] if len(s) > 2 else "updated 3 files"


def test_cmd(where):
    return "python3 -m pytest -q tests" if where == WS else f"cd {where} && python3 -m pytest -q tests"


def iso(seconds, sep="T", zone="+00:00", frac=6):
    """2026-12-01T10:MM:SS.ffffff+00:00 from seconds since 10:00."""
    s = int(seconds)
    f = f"{seconds - s:.{frac}f}"[1:] if frac else ""
    return f"2026-12-01{sep}{10 + s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}{f}{zone}"


# --------------------------------------------------------------------------------------
# Inspect AI: a .json eval log (log version 2) with one sample; react() with bash(),
# text_editor() and the filesystem MCP server's tools, as inspect_ai 0.3.2xx writes it
# (shapes from tests/fixtures/real/inspect*: spans, tool spans with their sandbox execs,
# ToolEvent `timestamp` = start, `completed` = end).
# --------------------------------------------------------------------------------------

def inspect(i, steps, end):
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
            cmd = f"git checkout -- {s[1]}"
            model([(cid, "bash", bash_args(cmd))], "Reverting that file.")
            out = "Updated 1 path from the index\n"
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


SOURCES = {"inspect": inspect}

ONLY = {
    "mcp_write": {"inspect"},
    "parallel": {"inspect"},
}
