#!/usr/bin/env python3
"""Observer integrity: how often the derived posture, check freshness and completion
claim are right, on transcripts with known truth and injected hazards.

Each scenario is a short run written as abstract steps (edit, test, revert, an opaque
write, ...), its truth computed from those steps by the contract's rules
(docs/format.md §6: revisions, bound revisions, freshness, posture; importers-v1: a
claim only where the log shows one), and the same steps written in the real shape of
a source's log (Claude Code session JSONL, Codex rollout JSONL; shapes as in
tests/fixtures/real/). Every scenario is imported with `epistore import` and what the
store derives is compared with the truth.

Hazards, one at a time and in pairs (deterministic from --seed):

  verify_then_edit  a passing test, then an edit
  final_fail        the last test fails
  failed_edit       an edit the tool refused (no change: the test stays current)
  missing_output    the last test's result is missing from the log
  rejected_edit     the person rejects an edit after the test (Claude Code's permission
                    prompt): nothing was written, so the test stays current
  revert            `git checkout -- FILE` or `git stash` after the test
  mcp_write         an MCP tool writes a workspace file after the test (Claude Code)
  script_write      an opaque script writes after the test (`python3 scripts/...`) and
                    says so in its output (`Wrote src/generated.py`, `updated 3 files`)
  silent_script     the same script printing nothing: no log shows the write (a known
                    blind spot, reported apart: see the README)
  suite_edit        the test file itself edited after the test
  elsewhere         the only test runs in another repository (`cd /srv/other && ...`)
  container         the only test runs in a container (`docker compose exec -T web
                    python -m pytest`, `docker run ... pytest`, `kubectl exec`): whether
                    the container sees this workspace is not in the log
  cut               the log stops after a tool call, mid-turn (no claim)
  interrupt         a person interrupts the last turn (no claim)
  parallel          a patch and a test issued together, the patch ending after the
                    test started (Codex)
  background        a test started in the background, an edit while it runs (or
                    none), its output read afterwards (Claude Code
                    `run_in_background`, `BashOutput`): bound to the revision it
                    started on, its result from the output read
  subagent          a subagent (Claude Code `Task`) edits the workspace while the
                    parent's test, issued in the same reply, runs: the test may have
                    run on the old code (the subagent's own transcript under
                    `<session>/subagents/`)
  compact           a compaction boundary mid-run (Claude Code's `compact_boundary`
                    with its summary, whose `parentUuid` is null; Codex's `compacted`):
                    nothing before it may be lost
  rewind            a branch (a prompt, an edit, a passing test) the person rewinds
                    (Claude Code `/rewind`: no record, the next prompt forks from the
                    branch's parent), with the code restored or the conversation only;
                    the log does not say which, so a restore is possible

Reported per source: the posture confusion matrix (truth x derived), abstention
(derived `unknown`), over-claims (derived `current` where the truth is not: the error
that matters most), freshness of every matched check, and completion claims derived
where the log shows none. With --check, exits 1 on any over-claim (posture, freshness
or claim) and when a score falls below --baseline.

    python3 benches/observer_bench.py --bin target/debug/epistore --per-hazard 4 --pairs 40
"""
import argparse
import json
import random
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

WS = "/srv/app"
OTHER = "/srv/other"
POSTURES = ["current", "stale", "failure", "gap", "unknown"]
HAZARDS = ["verify_then_edit", "final_fail", "failed_edit", "missing_output", "revert", "mcp_write",
           "script_write", "silent_script", "suite_edit", "elsewhere", "cut", "parallel", "interrupt",
           "background", "compact", "subagent", "container", "rejected_edit", "rewind"]
# What scripts that write print, as real generators, fixers and formatters do.
SCRIPT_REPORTS = ["updated 3 files", "Wrote src/generated.py", "Generated src/api/schema.json (3 ms)",
                  "Saved fixtures to tests/fixtures/data.json", "2 files reformatted, 1 file left unchanged",
                  "Regenerated 4 files", "Updated file: src/version.py"]
# Tests run inside a container: the words before the test command.
CONTAINERS = ["docker compose exec -T web", "docker exec app", "docker run --rm app-test",
              "kubectl exec deploy/app --", "podman exec app"]
ONLY = {"mcp_write": {"claude-code"}, "parallel": {"codex"}, "background": {"claude-code"},
        "compact": {"claude-code", "codex"}, "subagent": {"claude-code"}, "container": {"claude-code", "codex"},
        "rejected_edit": {"claude-code"}, "rewind": {"claude-code"}}


# --------------------------------------------------------------------------------------
# scenarios and their truth
# --------------------------------------------------------------------------------------

def scenario(hazards, rng):
    """Abstract steps: a fix and a passing test, then each hazard's steps, then the end."""
    src = rng.choice(["src/app.py", "src/util.py"])
    core = [("edit", src, True), ("test", WS, "pass")]
    steps = list(core)
    end = "claim"
    for h in hazards:
        if h == "verify_then_edit":
            steps.append(("edit", src, True))
        elif h == "final_fail":
            steps.append(("test", WS, "fail"))
        elif h == "failed_edit":
            steps.append(("edit", src, False))
        elif h == "missing_output":
            steps += [("edit", src, True), ("test", WS, None)]
        elif h == "revert":
            steps.append(("revert", src, rng.choice(["checkout", "stash"])))
        elif h == "mcp_write":
            steps.append(("mcp_write", "src/generated.py"))
        elif h == "script_write":
            steps.append(("script", "python3 scripts/update_fixtures.py", rng.choice(SCRIPT_REPORTS)))
        elif h == "silent_script":
            steps.append(("script", "python3 scripts/update_fixtures.py", ""))
        elif h == "suite_edit":
            steps.append(("edit", "tests/test_app.py", True))
        elif h == "elsewhere":
            steps = [s if s[0] != "test" else ("test", OTHER, s[2]) for s in steps]
        elif h == "container":
            box = rng.choice(CONTAINERS)
            steps = [s if s[0] != "test" else ("test", box, s[2]) for s in steps]
        elif h == "cut":
            end = "cut"
        elif h == "interrupt":
            end = "interrupt"
        elif h == "parallel":
            steps.append(("parallel", src, "pass"))
        elif h == "background":
            # The test left running; an edit lands while it runs, or nothing does.
            between = [("edit", src, True)] if rng.random() < 0.5 else []
            steps += [("bg_test", WS, "pass")] + between + [("bg_read",)]
        elif h == "compact":
            steps.append(("compact",))
        elif h == "subagent":
            steps.append(("subagent", src, "pass"))
        elif h == "rejected_edit":
            steps.append(("rejected", src))
        elif h == "rewind":
            # A branch (a prompt, an edit, a passing test) the person rewinds; with the
            # code restored from the checkpoints, or the conversation only.
            steps.append(("rewind", src, rng.random() < 0.5))
    return steps, end


def revert_cmd(s):
    """The command of a revert step: `git checkout -- FILE` or `git stash`."""
    return "git stash" if len(s) > 2 and s[2] == "stash" else f"git checkout -- {s[1]}"


def revert_output(s):
    """What git prints for it."""
    if len(s) > 2 and s[2] == "stash":
        return "Saved working directory and index state WIP on main: 1a2b3c4 Initial commit"
    return "Updated 1 path from the index"


def truth(steps, end):
    """The contract's derivation over what happened (not over what a log shows)."""
    rev, checks = 0, []
    for s in steps:
        kind = s[0]
        if kind == "edit" and s[2]:
            rev += 1
        elif kind in ("revert", "mcp_write", "script"):
            rev += 1
        elif kind in ("test", "bg_test"):
            # A test in another tree says nothing about this workspace's revisions; one
            # in the background is bound to the revision it started on.
            checks.append({"bound": rev, "result": s[2], "elsewhere": s[1] != WS})
        elif kind == "rewind":
            # The abandoned branch's edit and test happened; a restore changes the files
            # back (a change like any revert), a conversation-only rewind changes none.
            rev += 1
            checks.append({"bound": rev, "result": "pass", "elsewhere": False})
            if s[2]:
                rev += 1
        elif kind in ("parallel", "subagent"):
            # The test started before the patch ended: it may have run on the old code.
            checks.append({"bound": rev, "result": s[2], "elsewhere": False})
            rev += 1
    final = rev
    agent = [c for c in checks if not c["elsewhere"]]
    on_final = [c for c in agent if c["bound"] == final]
    if any(c["result"] == "fail" for c in on_final):
        posture = "failure"
    elif final > 0 and not any(c["result"] == "pass" for c in on_final) and any(c["bound"] < final for c in agent):
        posture = "stale"
    elif not agent:
        posture = "gap"
    elif any(c["result"] == "pass" for c in on_final):
        posture = "current"
    else:
        posture = "unknown"
    fresh = ["current" if c["bound"] == final else "stale" for c in agent]
    return {"posture": posture, "final": final, "freshness": fresh, "claim": end == "claim"}


# --------------------------------------------------------------------------------------
# logs in the sources' shapes
# --------------------------------------------------------------------------------------

def test_command(where, cmd):
    """The test command run in the workspace, in another tree (`cd OTHER && ...`), or in
    a container (its `docker ... exec` words first)."""
    if where == WS:
        return cmd
    if where == OTHER:
        return f"cd {OTHER} && {cmd}"
    return f"{where} {cmd}"


def session_id(i):
    return f"00000000-0000-4000-8000-{i:012d}"


def test_output(result):
    return ("3 passed in 0.04s", 0) if result == "pass" else ("1 failed, 2 passed in 0.05s", 1)


def claude_code(i, steps, end):
    sid, lines, n, parent = session_id(i), [], [0], [None]

    def add(kind, message, **extra):
        n[0] += 1
        uid = f"10000000-0000-4000-8000-{i:06d}{n[0]:06d}"
        rec = {"parentUuid": parent[0], "isSidechain": False, "type": kind, "message": message, "uuid": uid,
               "timestamp": f"2026-12-01T10:{n[0] // 60 % 60:02d}:{n[0] % 60:02d}.000Z", "sessionId": sid,
               "cwd": WS, "version": "2.1.0", "userType": "external"}
        rec.update(extra)
        lines.append(json.dumps(rec))
        parent[0] = uid

    def call(name, args, result, is_error=False, **extra):
        tid = f"toolu_{i:08d}{n[0]:08d}"
        add("assistant", {"id": f"msg_{i}_{n[0]}", "type": "message", "role": "assistant", "model": "claude-bench",
                          "content": [{"type": "tool_use", "id": tid, "name": name, "input": args}],
                          "stop_reason": "tool_use"})
        if result is not None:
            add("user", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": result,
                                                      "is_error": is_error}]}, **extra)

    subagents = []

    def subagent(path, result):
        # One reply calls a subagent and the test at once; the subagent's edit lands
        # while the test runs, its transcript in the session's subagents/ folder.
        agent = f"a{i:06d}{n[0]:04d}"
        task, test = f"toolu_{i:08d}{n[0]:08d}t", f"toolu_{i:08d}{n[0]:08d}b"
        cmd = "python3 -m pytest -q tests"
        add("assistant", {"id": f"msg_{i}_{n[0]}", "type": "message", "role": "assistant", "model": "claude-bench",
                          "content": [{"type": "tool_use", "id": task, "name": "Task",
                                       "input": {"description": "Tidy the helper", "subagent_type": "general-purpose",
                                                 "prompt": f"Simplify the helper in {path}."}},
                                      {"type": "tool_use", "id": test, "name": "Bash", "input": {"command": cmd}}],
                          "stop_reason": "tool_use"})
        t0 = n[0]
        sub, sub_parent = [], [None]

        def sub_add(k, kind, message, **extra):
            uid = f"20000000-0000-4000-8000-{i:06d}{t0:03d}{k:03d}"
            rec = {"parentUuid": sub_parent[0], "isSidechain": True, "userType": "external", "cwd": WS,
                   "sessionId": sid, "version": "2.1.39", "agentId": agent, "type": kind, "message": message,
                   "uuid": uid, "timestamp": f"2026-12-01T10:{t0 // 60 % 60:02d}:{t0 % 60:02d}.{k * 200:03d}Z"}
            rec.update(extra)
            sub.append(json.dumps(rec))
            sub_parent[0] = uid

        sid_edit = f"toolu_{i:08d}{t0:08d}e"
        sub_add(1, "user", {"role": "user", "content": f"Simplify the helper in {path}."})
        sub_add(2, "assistant", {"id": f"msg_{i}_{t0}_s", "type": "message", "role": "assistant",
                                 "model": "claude-bench", "content": [{"type": "tool_use", "id": sid_edit, "name": "Edit",
                                 "input": {"file_path": f"{WS}/{path}", "old_string": "x + 1", "new_string": "1 + x"}}],
                                 "stop_reason": "tool_use"})
        sub_add(3, "user", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": sid_edit,
                            "content": f"The file {WS}/{path} has been updated successfully."}]})
        sub_add(4, "assistant", {"id": f"msg_{i}_{t0}_d", "type": "message", "role": "assistant",
                                 "model": "claude-bench", "content": [{"type": "text", "text": "Simplified."}],
                                 "stop_reason": "end_turn"})
        subagents.append((f"projects/-srv-app/{sid}/subagents/agent-{agent}.jsonl", "\n".join(sub) + "\n"))
        out, code = test_output(result)
        add("user", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": test,
                     "content": out if code == 0 else f"Exit code {code}\n{out}", "is_error": code != 0}]})
        add("user", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": task,
                     "content": [{"type": "text", "text": "Simplified."}]}]},
            toolUseResult={"status": "completed", "agentId": agent, "content": [{"type": "text", "text": "Simplified."}]})

    add("user", {"role": "user", "content": "Fix the bug in src/app.py so that the tests pass."})
    for s in steps:
        kind = s[0]
        if kind == "edit":
            path = f"{WS}/{s[1]}"
            if s[2]:
                call("Edit", {"file_path": path, "old_string": "x - 1", "new_string": "x + 1"},
                     f"The file {path} has been updated successfully.")
            else:
                call("Edit", {"file_path": path, "old_string": "y - 1", "new_string": "y + 1"},
                     "<tool_use_error>String to replace not found in file.</tool_use_error>", True)
        elif kind == "test":
            cmd = test_command(s[1], "python3 -m pytest -q tests")
            if s[2] is None:
                call("Bash", {"command": cmd}, None)
            else:
                out, code = test_output(s[2])
                call("Bash", {"command": cmd}, out if code == 0 else f"Exit code {code}\n{out}", code != 0)
        elif kind == "revert":
            call("Bash", {"command": revert_cmd(s)}, revert_output(s))
        elif kind == "mcp_write":
            path = f"{WS}/{s[1]}"
            call("mcp__filesystem__write_file", {"path": path, "content": "X = 1\n"}, f"Successfully wrote to {path}")
        elif kind == "script":
            call("Bash", {"command": s[1]}, s[2])
        elif kind == "bg_test":
            call("Bash", {"command": "python3 -m pytest -q tests", "run_in_background": True},
                 "Command running in background with ID: bash_1",
                 toolUseResult={"stdout": "", "stderr": "", "interrupted": False, "isImage": False,
                                "backgroundTaskId": "bash_1"})
        elif kind == "bg_read":
            out, code = test_output("pass")
            call("BashOutput", {"bash_id": "bash_1"},
                 f"<status>completed</status>\n\n<exit_code>{code}</exit_code>\n\n<stdout>\n{out}\n</stdout>")
        elif kind == "compact":
            # As Claude Code writes it: the boundary starts a new chain (parentUuid null,
            # logicalParentUuid the last line before it), then the summary as a user line.
            n[0] += 1
            uid = f"10000000-0000-4000-8000-{i:06d}{n[0]:06d}"
            lines.append(json.dumps({
                "parentUuid": None, "logicalParentUuid": parent[0], "isSidechain": False, "userType": "external",
                "cwd": WS, "sessionId": sid, "version": "2.1.39", "type": "system", "subtype": "compact_boundary",
                "content": "Conversation compacted", "isMeta": False, "uuid": uid, "level": "info",
                "timestamp": f"2026-12-01T10:{n[0] // 60 % 60:02d}:{n[0] % 60:02d}.000Z",
                "compactMetadata": {"trigger": "auto", "preTokens": 170251}}))
            parent[0] = uid
            add("user", {"role": "user", "content": "This session is being continued from a previous conversation "
                         "that ran out of context. The summary below covers the earlier portion of the conversation."},
                isCompactSummary=True, isVisibleInTranscriptOnly=True)
        elif kind == "subagent":
            subagent(s[1], s[2])
        elif kind == "rewind":
            # No record of the rewind: the next prompt takes the parent the branch's
            # prompt had, and the branch stays in the file.
            fork = parent[0]
            add("user", {"role": "user", "content": "Also rename the helper, then run the tests."})
            path = f"{WS}/{s[1]}"
            call("Edit", {"file_path": path, "old_string": "def helper", "new_string": "def add_one"},
                 f"The file {path} has been updated successfully.")
            out, _ = test_output("pass")
            call("Bash", {"command": "python3 -m pytest -q tests"}, out)
            add("assistant", {"id": f"msg_{i}_{n[0]}", "type": "message", "role": "assistant",
                              "model": "claude-bench", "content": [{"type": "text", "text": "Renamed; the tests pass."}],
                              "stop_reason": "end_turn"})
            parent[0] = fork
            add("user", {"role": "user", "content": "Keep the old name; just check the fix is complete."})
        elif kind == "rejected":
            path = f"{WS}/{s[1]}"
            call("Edit", {"file_path": path, "old_string": "x + 1", "new_string": "x + 2"},
                 "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a "
                 "file edit, the new_string was NOT written to the file). STOP what you are doing and wait for the "
                 "user to tell you how to proceed.", True)
    if end == "claim":
        add("assistant", {"id": f"msg_{i}_end", "type": "message", "role": "assistant", "model": "claude-bench",
                          "content": [{"type": "text", "text": "Done: the tests pass."}], "stop_reason": "end_turn"})
    elif end == "interrupt":
        # The agent starts its summary; the person stops the turn.
        add("assistant", {"id": f"msg_{i}_end", "type": "message", "role": "assistant", "model": "claude-bench",
                          "content": [{"type": "text", "text": "The tests pass, so now"}], "stop_reason": None})
        add("user", {"role": "user", "content": [{"type": "text", "text": "[Request interrupted by user]"}]})
    return [(f"projects/-srv-app/{sid}.jsonl", "\n".join(lines) + "\n")] + subagents


def codex(i, steps, end):
    sid, lines, ms = session_id(i), [], [0]

    def at():
        ms[0] += 1000
        t = ms[0]
        return f"2026-12-01T10:{t // 60000 % 60:02d}:{t // 1000 % 60:02d}.{t % 1000:03d}Z"

    def line(ty, payload, ts=None):
        lines.append(json.dumps({"timestamp": ts or at(), "type": ty, "payload": payload}))

    def shell(cid, cmd, workdir, result, ts_call=None, ts_end=None):
        line("response_item", {"type": "function_call", "name": "shell_command", "call_id": cid,
                               "arguments": json.dumps({"command": cmd, "workdir": workdir})}, ts_call)
        if result is None:
            return
        out, code = result
        end_ts = ts_end or at()
        line("event_msg", {"type": "exec_command_end", "call_id": cid, "exit_code": code, "stdout": "", "stderr": "",
                           "aggregated_output": out, "formatted_output": "", "duration": {"secs": 1, "nanos": 0}}, end_ts)
        line("response_item", {"type": "function_call_output", "call_id": cid,
                               "output": f"Exit code: {code}\nOutput:\n{out}"}, end_ts)

    def patch(cid, path, ok, ts_call=None, ts_end=None):
        body = f"*** Begin Patch\n*** Update File: {path}\n@@\n-return x - 1\n+return x + 1\n*** End Patch"
        line("response_item", {"type": "function_call", "name": "apply_patch", "call_id": cid,
                               "arguments": json.dumps({"input": body})}, ts_call)
        end_ts = ts_end or at()
        if ok:
            line("event_msg", {"type": "patch_apply_end", "call_id": cid, "stdout": f"Success. Updated the following files:\nM {path}\n",
                               "stderr": "", "success": True}, end_ts)
            line("response_item", {"type": "function_call_output", "call_id": cid, "output": "Success."}, end_ts)
        else:
            line("event_msg", {"type": "patch_apply_end", "call_id": cid, "stdout": "",
                               "stderr": "Failed to find expected lines", "success": False}, end_ts)
            line("response_item", {"type": "function_call_output", "call_id": cid,
                                   "output": "apply_patch verification failed: Failed to find expected lines"}, end_ts)

    line("session_meta", {"id": sid, "timestamp": at(), "cwd": WS, "originator": "codex_cli_rs", "cli_version": "0.98.0",
                          "source": "cli", "model_provider": "openai"})
    line("turn_context", {"cwd": WS, "approval_policy": "never", "sandbox_policy": {"type": "workspace-write"},
                          "model": "gpt-bench-codex"})
    line("event_msg", {"type": "task_started"})
    line("event_msg", {"type": "user_message", "message": "Fix the bug in src/app.py so that the tests pass.", "images": []})
    for k, s in enumerate(steps):
        kind, cid = s[0], f"call_{k}"
        if kind == "edit":
            patch(cid, s[1], s[2])
        elif kind == "test":
            # Codex gives each call its working directory; a container test runs from the
            # workspace.
            workdir = s[1] if s[1] in (WS, OTHER) else WS
            shell(cid, test_command(s[1], "pytest -q") if workdir == WS else "pytest -q", workdir,
                  None if s[2] is None else test_output(s[2]))
        elif kind == "revert":
            shell(cid, revert_cmd(s), WS, (revert_output(s), 0))
        elif kind == "script":
            shell(cid, s[1], WS, (s[2], 0))
        elif kind == "mcp_write":
            shell(cid, "python3 scripts/update_fixtures.py", WS, ("Wrote " + s[1], 0))
        elif kind == "parallel":
            # The patch issued first, the test a second later; the test ends, then the patch.
            t0 = ms[0]
            ts = lambda d: f"2026-12-01T10:{(t0 + d) // 60000 % 60:02d}:{(t0 + d) // 1000 % 60:02d}.{(t0 + d) % 1000:03d}Z"
            body = f"*** Begin Patch\n*** Update File: {s[1]}\n@@\n-return x - 1\n+return x + 1\n*** End Patch"
            line("response_item", {"type": "function_call", "name": "apply_patch", "call_id": cid + "p",
                                   "arguments": json.dumps({"input": body})}, ts(1000))
            shell(cid + "t", "pytest -q", WS, test_output(s[2]), ts_call=ts(2000), ts_end=ts(4000))
            line("event_msg", {"type": "patch_apply_end", "call_id": cid + "p", "stdout": f"Success. Updated the following files:\nM {s[1]}\n",
                               "stderr": "", "success": True}, ts(5000))
            line("response_item", {"type": "function_call_output", "call_id": cid + "p", "output": "Success."}, ts(5000))
            ms[0] = t0 + 5000
        elif kind == "compact":
            # Codex replaces the history with a summary; the rollout keeps every line.
            line("compacted", {"message": "Summary of the conversation so far: the bug is fixed and tested."})
            line("event_msg", {"type": "context_compacted"})
    if end == "interrupt":
        line("event_msg", {"type": "agent_message", "message": "The tests pass, so now"})
        line("event_msg", {"type": "turn_aborted", "reason": "interrupted"})
    if end == "claim":
        line("event_msg", {"type": "agent_message", "message": "Done: the tests pass."})
        line("response_item", {"type": "message", "role": "assistant",
                               "content": [{"type": "output_text", "text": "Done: the tests pass."}]})
        line("event_msg", {"type": "task_complete", "last_agent_message": "Done: the tests pass."})
    return f"sessions/2026/12/01/rollout-2026-12-01T10-00-00-{sid}.jsonl", "\n".join(lines) + "\n"


SOURCES = {"claude-code": claude_code, "codex": codex}


def all_sources():
    """These two and the writers of benches/observer_sources.py (every other source
    whose log can show the scenarios), with the hazards each can express."""
    import observer_sources as more  # imports this module's helpers: loaded late
    sources = dict(SOURCES)
    sources.update(more.SOURCES)
    only = {h: set(v) for h, v in ONLY.items()}
    for h, v in more.ONLY.items():
        only[h] = only.get(h, set()) | set(v)
    return sources, only, more.task_key


# --------------------------------------------------------------------------------------
# run and score
# --------------------------------------------------------------------------------------

def plan(source, per_hazard, pairs, seed, only):
    rng = random.Random(f"{seed}-{source}")
    usable = [h for h in HAZARDS if source in only.get(h, {source})]
    out = [[] for _ in range(per_hazard)]
    for h in usable:
        out += [[h] for _ in range(per_hazard)]
    for _ in range(pairs):
        out.append(rng.sample(usable, 2))
    return [(hs, *scenario(hs, rng)) for hs in out]


def sql(bin_, store, query):
    out = subprocess.run([bin_, "--store", store, "sql", query, "--format", "json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def run(a):
    results = {}
    sources, only, task_key = all_sources()
    if a.sources:
        wanted = a.sources.split(",")
        unknown = [x for x in wanted if x not in sources]
        if unknown:
            sys.exit(f"unknown source(s) {unknown}; sources: {', '.join(sources)}")
        sources = {k: v for k, v in sources.items() if k in wanted}
    with tempfile.TemporaryDirectory(prefix="observer-bench-") as tmp:
        tmp = Path(tmp)
        store = tmp / "store"
        known = {}
        offset = 0
        for source, write in sources.items():
            root = tmp / source
            for k, (hazards, steps, end) in enumerate(plan(source, a.per_hazard, a.pairs, a.seed, only)):
                i = offset + k
                written = write(i, steps, end)
                # A writer gives (path, text), or a list of them (a session and its
                # subagents' transcripts).
                for rel, text in written if isinstance(written, list) else [written]:
                    path = root / rel
                    path.parent.mkdir(parents=True, exist_ok=True)
                    if isinstance(text, bytes):
                        path.write_bytes(text)
                    else:
                        path.write_text(text)
                known[session_id(i)] = (source, hazards, truth(steps, end))
            offset += 100000
            done = subprocess.run([a.bin, "--store", store, "import", "--quiet", "--format", source, root],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"import of {source} failed: {done.stderr}")
        episodes = sql(a.bin, store, "SELECT episode_id, task, posture, agent_reported_complete AS claim, final_revision FROM episodes")
        checks = sql(a.bin, store, "SELECT episode_id, seq, freshness FROM checks ORDER BY episode_id, seq")
    by_episode = defaultdict(list)
    for c in checks:
        by_episode[c["episode_id"]].append(c["freshness"])
    seen = set()
    for e in episodes:
        # Inspect names a sample's task `{eval task}/{sample id}`.
        task = task_key(e["task"]) if e["task"] else e["task"]
        if task not in known:
            continue
        seen.add(task)
        source, hazards, t = known[task]
        r = results.setdefault(source, {"n": 0, "posture": Counter(), "freshness": Counter(), "claims": Counter(),
                                        "over": [], "claim_over": [], "fresh_over": [], "unmatched_checks": 0})
        r["n"] += 1
        r["posture"][(t["posture"], e["posture"])] += 1
        label = "+".join(hazards) or "baseline"
        r.setdefault("labels", []).append((label, t["posture"] == e["posture"]))
        if e["posture"] == "current" and t["posture"] != "current":
            r["over"].append(f"{label}: truth {t['posture']}")
        r["claims"][(t["claim"], e["claim"])] += 1
        if e["claim"] is True and not t["claim"]:
            r["claim_over"].append(label)
        derived = by_episode.get(e["episode_id"], [])
        if len(derived) != len(t["freshness"]):
            r["unmatched_checks"] += 1
            r.setdefault("unmatched", []).append(f"{label}: truth {t['freshness']}, derived {derived}")
            # A derived current check the truth does not have (a check in another tree).
            extra = derived.count("current") - t["freshness"].count("current")
            if extra > 0:
                r["fresh_over"].append(f"{label}: {extra} current check(s) not in the truth")
            continue
        for want, got in zip(t["freshness"], derived):
            r["freshness"][(want, got)] += 1
            if got == "current" and want != "current":
                r["fresh_over"].append(f"{label}: a stale check derived current")
    missing = [k for k in known if k not in seen]
    if missing:
        sys.exit(f"{len(missing)} scenarios were not imported (first: {missing[0]} {known[missing[0]][:2]})")
    return results


def by_hazard(r):
    """Per single hazard (and baseline): scenarios and posture right, over all scenarios
    that include it."""
    out = {}
    for label, ok in r["labels"]:
        for h in label.split("+"):
            c = out.setdefault(h, [0, 0])
            c[0] += 1
            c[1] += ok
    return {h: {"scenarios": n, "posture_right": right} for h, (n, right) in sorted(out.items())}


def summary(results):
    out = {}
    for source, r in results.items():
        n = r["n"]
        right = sum(v for (t, d), v in r["posture"].items() if t == d)
        fresh_n = sum(r["freshness"].values())
        fresh_right = sum(v for (t, d), v in r["freshness"].items() if t == d)
        out[source] = {
            "scenarios": n,
            "posture_accuracy": round(right / n, 4) if n else None,
            "abstention": round(sum(v for (t, d), v in r["posture"].items() if d == "unknown") / n, 4) if n else None,
            "over_claims": len(r["over"]),
            "freshness_accuracy": round(fresh_right / fresh_n, 4) if fresh_n else None,
            "freshness_over_claims": len(r["fresh_over"]),
            "claim_over_claims": len(r["claim_over"]),
            "unmatched_check_lists": r["unmatched_checks"],
            "posture_matrix": {t: {d: r["posture"].get((t, d), 0) for d in POSTURES} for t in POSTURES},
            "examples": {"over": sorted(set(r["over"]))[:8], "freshness": sorted(set(r["fresh_over"]))[:8],
                         "claim": sorted(set(r["claim_over"]))[:8]},
            "unmatched": sorted(set(r.get("unmatched", [])))[:8],
            "all_over": r["over"], "all_freshness": r["fresh_over"], "all_claim": r["claim_over"],
            "by_hazard": by_hazard(r),
        }
    return out


def table(s):
    lines = []
    for source, r in s.items():
        lines.append(f"\n{source}: {r['scenarios']} scenarios; posture right {r['posture_accuracy']:.1%}, "
                     f"abstained {r['abstention']:.1%}, over-claims {r['over_claims']}; freshness right "
                     f"{(r['freshness_accuracy'] or 0):.1%} (over-claims {r['freshness_over_claims']}, "
                     f"check lists not matched {r['unmatched_check_lists']}); claims invented {r['claim_over_claims']}")
        lines.append("| truth \\ derived | " + " | ".join(POSTURES) + " |")
        lines.append("|---|" + "---|" * len(POSTURES))
        for t in POSTURES:
            row = r["posture_matrix"][t]
            if sum(row.values()):
                lines.append(f"| {t} | " + " | ".join(str(row[d]) for d in POSTURES) + " |")
        for kind, ex in r["examples"].items():
            if ex:
                lines.append(f"  {kind} over-claims: {'; '.join(ex)}")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default="target/debug/epistore")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--per-hazard", type=int, default=2, help="scenarios per single hazard (and baselines)")
    p.add_argument("--pairs", type=int, default=20, help="scenarios with two hazards, per source")
    p.add_argument("--check", action="store_true", help="exit 1 on any over-claim or a score below --baseline")
    p.add_argument("--baseline", help="a JSON file of minimum scores per source (posture_accuracy, freshness_accuracy)")
    p.add_argument("--allow", action="append", default=[],
                   help="HAZARD or SOURCE:HAZARD whose over-claims are reported but do not fail --check (a known "
                        "gap, said in the README)")
    p.add_argument("--sources", help="comma-separated sources to run (default: every one)")
    p.add_argument("--json", help="write the summary here")
    a = p.parse_args()
    s = summary(run(a))
    print(table(s))
    if a.json:
        Path(a.json).write_text(json.dumps(s, indent=1) + "\n")
    if a.check:
        bad = []
        def allowed(source, label):
            hazards = label.split(":")[0].split("+")
            for rule in a.allow:
                where, _, hazard = rule.rpartition(":")
                if hazard in hazards and where in ("", source):
                    return True
            return False
        for source, r in s.items():
            for k, ex in (("over_claims", "over"), ("freshness_over_claims", "freshness"), ("claim_over_claims", "claim")):
                left = [x for x in r["all_" + ex] if not allowed(source, x)]
                if left:
                    bad.append(f"{source}: {len(left)} {k.replace('_', ' ')} ({'; '.join(sorted(set(left))[:4])})")
        if a.baseline:
            floor = json.loads(Path(a.baseline).read_text())
            for source, mins in floor.items():
                for k, v in mins.items():
                    got = s.get(source, {}).get(k)
                    if got is None or got < v:
                        bad.append(f"{source}: {k} {got} below {v}")
        if bad:
            print("\nFAIL: " + "; ".join(bad), file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
