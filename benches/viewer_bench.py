#!/usr/bin/env python3
"""The viewer's speed targets, measured (figures in the README and benches/README.md).

1. `epistore ui`'s index over a store of --episodes synthetic episodes in
   --models x 4 levels x --tasks cells: time to answer and bytes (median of 5, warm).
2. `/episodes?limit=N`: a list page of N episodes in headless Chromium, navigation start
   to rendered with its first rows drawn.
3. An episode page of --steps steps (a generated Claude Code session of that many tool
   calls and messages, imported): rendered, and the step list scrolled to its end one
   screen per frame (frame times, fps).
4. A published folder of --pages episode pages: bytes per 1,000 pages with the shared
   assets, against the same episodes as self-contained pages (`show --format html`,
   which embeds the template, as every published page did before).

Needs Chromium and playwright-core (as the browser tests: CHROMIUM, PLAYWRIGHT_CORE).

    python3 benches/viewer_bench.py --bin target/debug/epistore --work /tmp/viewer-bench
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], check=True, capture_output=True, text=True, **kw)


def build_population(a, store: Path):
    if any(store.glob("*.redb")):
        print(f"reusing {store}", file=sys.stderr)
        return
    t = time.perf_counter()
    run([a.bin, "--store", store, "synth", "--episodes", a.episodes, "--models", a.models, "--tasks", a.tasks,
         "--output-scale", "0.03", "--ingest"])
    print(f"synth --ingest {a.episodes}: {time.perf_counter() - t:.0f} s", file=sys.stderr)


def long_session(path: Path, steps: int):
    """A Claude Code session of about `steps` steps: a prompt, then turns of a sentence
    and a Bash call with a few lines of output (every tenth failing)."""
    sid = "00000000-0000-4000-8000-00000000beef"
    lines, parent, n = [], None, 0

    def add(kind, message, **extra):
        nonlocal parent, n
        n += 1
        uid = f"00000000-0000-4000-8000-{n:012d}"
        rec = {"parentUuid": parent, "isSidechain": False, "type": kind, "message": message, "uuid": uid,
               "timestamp": f"2026-12-01T09:{(n // 3600) % 60:02d}:{(n // 60) % 60:02d}.{n % 1000:03d}Z",
               "sessionId": sid, "cwd": "/srv/bench", "version": "2.1.0"}
        rec.update(extra)
        lines.append(json.dumps(rec))
        parent = uid

    add("user", {"role": "user", "content": "Make the bench suite pass."})
    # Three steps a turn: the sentence, the call (with its output), the check it is.
    for i in range(steps // 3):
        tid = f"toolu_{i:020d}"
        fail = i % 10 == 9
        add("assistant", {"role": "assistant", "model": "claude-bench", "id": f"msg_{i}", "type": "message",
                          "content": [{"type": "text", "text": f"Step {i}: running the tests for module {i % 97}."},
                                      {"type": "tool_use", "id": tid, "name": "Bash",
                                       "input": {"command": f"python3 -m pytest tests/test_{i % 97}.py -q"}}],
                          "usage": {"input_tokens": 100, "output_tokens": 20}})
        out = "\n".join([f"tests/test_{i % 97}.py::test_case_{k} {'FAILED' if fail and k == 3 else 'PASSED'}" for k in range(6)])
        add("user", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": out, "is_error": fail}]})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def get(url):
    t = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as r:
        body = r.read()
    return time.perf_counter() - t, len(body)


def node(mode, url):
    out = run(["node", HERE / "viewer_timing.mjs", mode, url])
    return json.loads(out.stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default="target/debug/epistore")
    p.add_argument("--work", default="/tmp/viewer-bench")
    p.add_argument("--episodes", type=int, default=100_000)
    p.add_argument("--models", type=int, default=5)
    p.add_argument("--tasks", type=int, default=250)
    p.add_argument("--list-rows", type=int, default=20_000)
    p.add_argument("--steps", type=int, default=10_000)
    p.add_argument("--pages", type=int, default=1_000)
    p.add_argument("--port", type=int, default=8790)
    a = p.parse_args()
    a.bin = Path(a.bin).resolve()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    store = work / "store"
    build_population(a, store)
    res = {"episodes": a.episodes, "cells": a.models * 4 * a.tasks}

    ui = subprocess.Popen([a.bin, "--store", store, "ui", "--addr", f"127.0.0.1:{a.port}"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{a.port}"
    try:
        for _ in range(600):
            try:
                get(base + "/api/snapshot")
                break
            except OSError:
                time.sleep(0.5)
        get(base + "/")
        times, size = [], 0
        for _ in range(5):
            t, size = get(base + "/")
            times.append(t)
        res["index"] = {"median_ms": round(statistics.median(times) * 1000), "bytes": size}
        print(f"index: {res['index']}", file=sys.stderr)
        get(base + f"/episodes?limit={a.list_rows}")
        t, size = get(base + f"/episodes?limit={a.list_rows}")
        res["list"] = {"server_ms": round(t * 1000), "bytes": size, **node("list", base + f"/episodes?limit={a.list_rows}")}
        print(f"list: {res['list']}", file=sys.stderr)
    finally:
        ui.terminate()
        ui.wait()

    session = work / "long" / "projects" / "-srv-bench" / "00000000-0000-4000-8000-00000000beef.jsonl"
    long_session(session, a.steps)
    long_store = work / "long-store"
    if not long_store.exists():
        run([a.bin, "--store", long_store, "import", "--quiet", session.parent.parent])
    ep = run([a.bin, "--store", long_store, "sql", "SELECT episode_id FROM episodes", "--format", "csv"]).stdout.split()[-1]
    page = work / "long.html"
    run([a.bin, "--store", long_store, "show", ep, "--format", "html", "--out", page])
    res["episode"] = {"page_bytes": page.stat().st_size, **node("episode", page.as_uri())}
    print(f"episode: {res['episode']}", file=sys.stderr)

    site = work / "site"
    run([a.bin, "--store", store, "leaderboard", "--metric", "sound_completion", "--format", "html", "--out", site,
         "--with-episodes", "--max-episodes", a.pages, "--replicates", "100"])
    pages = sorted((site / "episodes").glob("*.html"))
    shared = sum(f.stat().st_size for f in pages)
    assets = sum(f.stat().st_size for f in (site / "assets").iterdir())
    inline_dir = work / "inline"
    inline_dir.mkdir(exist_ok=True)
    inline = 0
    for f in pages:
        out = inline_dir / f.name
        run([a.bin, "--store", store, "show", f.stem, "--format", "html", "--out", out])
        inline += out.stat().st_size
    k = 1000 / max(1, len(pages))
    res["site"] = {"pages": len(pages), "shared_mb_per_1000": round((shared + assets) * k / 1e6, 1),
                   "assets_bytes": assets, "inline_mb_per_1000": round(inline * k / 1e6, 1)}
    print(f"site: {res['site']}", file=sys.stderr)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
