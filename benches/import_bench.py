#!/usr/bin/env python3
"""Import throughput of `epistore import` against Inspect's dataframe readers and a JSON floor.

    python3 benches/import_bench.py generate          # the datasets (about 7 min + 5 s on 2 cores)
    python3 benches/import_bench.py inspect-readers   # samples_df + events_df on the .eval
    python3 benches/import_bench.py json-floor        # merely parsing the JSON (json, orjson)
    python3 benches/import_bench.py epistore --bin target/release/epistore
    python3 benches/import_bench.py all --bin target/release/epistore

Datasets (under --data, default ~/.cache/epistore-bench/data):
  inspect/bench.eval   a real Inspect AI log: benches/inspect_bench_task.py run by Inspect's own
                       eval() with `mockllm/model` and scripted bash tool calls in a `local`
                       sandbox, offline; --size-mb (default 300) or --samples.
  claude-code/projects a Claude Code projects tree: the real transcripts under
                       tests/fixtures/real/claude-code copied --sessions times (default 5,000),
                       every UUID (sessionId, uuid, parentUuid, ...) replaced per copy.
Python packages (pinned in PINS) go into a venv under ~/.cache/epistore-bench. Each phase runs
in its own process (this script with a hidden `_worker` command) so that its wall time and
peak RSS (wait4's ru_maxrss) are its own. MB = 10^6 bytes. Every phase merges its figures
into --results (benches/import-results.json) and prints the markdown table of all figures.
"""
from __future__ import annotations

import argparse, json, math, os, platform, random, re, shutil, subprocess, sys, time, uuid, zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("EPISTORE_BENCH_CACHE", Path.home() / ".cache/epistore-bench"))
VPY = CACHE / "venv/bin/python"
PINS = ["inspect-ai==0.3.285", "pandas==3.1.1", "pyarrow==26.0.1", "orjson==3.13.0", "zstandard==0.25.0"]
CC = ROOT / "tests/fixtures/real/claude-code"
BIG = "4d5611e5-241a-462a-8d15-5122611a9569"
# (transcript, its subagents/ folder, weight): real projects trees hold mostly short
# sessions and a few huge ones; these weights make the average copy ~120 KB.
CC_TEMPLATES = [(CC / "short.jsonl", None, 40), (CC / "tool_heavy.jsonl", None, 30),
                (CC / "subagent.jsonl", None, 15),
                (CC / "generated/projects/-srv-counter/555cbe93-d68e-41b1-9012-c94ca9ff3588.jsonl", None, 14),
                (CC / f"{BIG}.jsonl", CC / BIG / "subagents", 1)]
UUID_RE = re.compile(rb"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")


# ---------------------------------------------------------------- helpers
def ensure_venv() -> None:
    """Create the venv and install PINS once (a stamp file remembers what is installed)."""
    stamp = CACHE / "venv/.pins"
    if stamp.exists() and stamp.read_text() == "\n".join(PINS):
        return
    subprocess.run([sys.executable, "-m", "venv", str(CACHE / "venv")], check=True)
    subprocess.run([str(VPY), "-m", "pip", "install", "-q", *PINS], check=True)
    stamp.write_text("\n".join(PINS))


def measure(cmd: list[str], env: dict | None = None) -> dict:
    """Run cmd; wall seconds, peak RSS of the child (MB, from wait4) and its output."""
    import tempfile
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen([str(c) for c in cmd], stdout=out, stderr=err, env=env)
        _, status, ru = os.wait4(p.pid, 0)  # reap it ourselves: rusage of this child alone
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        return {"wall_s": round(wall, 3), "rc": p.returncode, "peak_rss_mb": round(ru.ru_maxrss / 1024, 1),
                "stdout": out.read().decode(errors="replace"), "stderr": err.read().decode(errors="replace")}


def worker(*args) -> dict:
    """Run one `_worker` phase in the venv's Python; its last stdout line is JSON."""
    r = measure([VPY, __file__, "_worker", *args])
    if r["rc"] != 0:
        raise SystemExit(f"worker {args} failed:\n{r['stderr'][-3000:]}")
    return {**json.loads(r["stdout"].strip().splitlines()[-1]), "process_wall_s": r["wall_s"], "peak_rss_mb": r["peak_rss_mb"]}


def tree_bytes(p: Path) -> tuple[int, int]:
    files = [p] if p.is_file() else [f for f in p.rglob("*") if f.is_file()]
    return sum(f.stat().st_size for f in files), len(files)


def warm(p: Path) -> None:
    """Read every file once, untimed: every figure is then taken with a warm page cache
    (the data was just generated; dropping the cache needs root and is not the point)."""
    for f in [p] if p.is_file() else p.rglob("*"):
        if f.is_file():
            with open(f, "rb") as fh:
                while fh.read(1 << 24):
                    pass


def mb(n: float) -> float:
    return round(n / 1e6, 1)


def eval_members(path: Path, pick=lambda i: True):
    """Yield (name, bytes) of every member of an .eval ZIP. Inspect 0.3.285 compresses them
    with zstd (ZIP method 93), which zipfile before Python 3.14 cannot read, so read the
    raw member and decompress it with `zstandard` (deflate and stored go through zlib / as is)."""
    import zlib, zstandard
    dctx = zstandard.ZstdDecompressor()
    with open(path, "rb") as f, zipfile.ZipFile(f) as z:
        for i, info in enumerate(z.infolist()):
            if not pick(i):
                continue
            f.seek(info.header_offset)
            head = f.read(30)
            f.seek(info.header_offset + 30 + int.from_bytes(head[26:28], "little") + int.from_bytes(head[28:30], "little"))
            raw = f.read(info.compress_size)
            if info.compress_type == 93:
                data = dctx.decompress(raw, max_output_size=info.file_size)
            elif info.compress_type == zipfile.ZIP_DEFLATED:
                data = zlib.decompress(raw, -15)
            else:
                data = raw
            yield info.filename, data


# ---------------------------------------------------------------- generate
def gen_inspect(a) -> dict:
    out = Path(a.data) / "inspect"
    out.mkdir(parents=True, exist_ok=True)
    # The bash tool runs `bash --login`: a HOME without the user's shell rc (pyenv init
    # there costs ~0.3 s a call) and the venv's python3 first on PATH keep tool calls fast.
    home = CACHE / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("INSPECT_")}  # no telemetry hooks
    env.update(HOME=str(home), PATH=f"{VPY.parent}:/usr/local/bin:/usr/bin:/bin")

    def run(samples: int, log_dir: Path) -> tuple[dict, Path]:
        shutil.rmtree(log_dir, ignore_errors=True)
        r = measure([VPY, ROOT / "benches/inspect_bench_task.py", "--samples", samples, "--log-dir", log_dir,
                     "--payload-kb", a.payload_kb], env=env)
        logs = list(log_dir.glob("*.eval"))
        status = [l.split()[2] for l in r["stdout"].splitlines() if l.startswith("LOG ")]  # the task prints it
        if r["rc"] != 0 or len(logs) != 1 or status != ["success"]:
            raise SystemExit(f"inspect eval failed ({status}):\n{r['stderr'][-3000:]}")
        return r, logs[0]

    samples = a.samples
    if not samples:  # calibrate: bytes per sample from a 20-sample run, then scale to --size-mb
        _, log = run(20, out / "calibrate")
        samples = max(20, math.ceil(a.size_mb * 1e6 / (log.stat().st_size / 20)))
        shutil.rmtree(out / "calibrate")
    print(f"inspect: eval() of {samples} samples ...", file=sys.stderr, flush=True)
    r, log = run(samples, out / "logs")
    dest = out / "bench.eval"
    log.replace(dest)
    shutil.rmtree(out / "logs")
    meta = {"path": str(dest), "samples": samples, "payload_kb": a.payload_kb, "bytes": dest.stat().st_size,
            "generate_wall_s": r["wall_s"], "generate_peak_rss_mb": r.get("peak_rss_mb"),
            "inspect_ai": worker("version")["inspect_ai"]}
    st = worker("eval-stats", dest)
    meta.update(members=st["members"], uncompressed_bytes=st["uncompressed_bytes"])
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    return meta


def gen_claude(a) -> dict:
    root = Path(a.data) / "claude-code"
    shutil.rmtree(root, ignore_errors=True)
    t0 = time.perf_counter()
    # Split each template once at its UUIDs; a copy joins the parts with fresh UUIDs, so the
    # sessionId is new and the same in every line, and uuid/parentUuid links stay intact.
    tpl = []
    for main, sub, w in CC_TEMPLATES:
        files = [(None, main.read_bytes())] + [(f.name, f.read_bytes()) for f in (sorted(sub.glob("*.jsonl")) if sub else [])]
        sid = json.loads(next(l for l in files[0][1].splitlines() if b'"sessionId"' in l))["sessionId"].encode()
        tpl.append((sid, [(name, UUID_RE.split(data)) for name, data in files], w))
    rng = random.Random(1)
    picks = rng.choices(range(len(tpl)), weights=[t[2] for t in tpl], k=a.sessions)
    for i, k in enumerate(picks):
        sid, files, _ = tpl[k]
        fresh: dict[bytes, bytes] = {}
        new = lambda u: fresh.setdefault(u, str(uuid.UUID(int=rng.getrandbits(128), version=4)).encode())
        new_sid = new(sid).decode()
        proj = root / "projects" / f"-home-bench-repo{i % 40:02d}"
        for name, parts in files:
            body = b"".join(p if j % 2 == 0 else new(p) for j, p in enumerate(parts))
            dest = proj / f"{new_sid}.jsonl" if name is None else proj / new_sid / "subagents" / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(body)
    size, nfiles = tree_bytes(root / "projects")
    meta = {"path": str(root / "projects"), "sessions": a.sessions, "files": nfiles, "bytes": size,
            "generate_wall_s": round(time.perf_counter() - t0, 2),
            "templates": {t[0].name: sum(1 for p in picks if p == i) for i, t in enumerate(CC_TEMPLATES)}}
    (root / "meta.json").write_text(json.dumps(meta, indent=1))
    return meta


def cmd_generate(a) -> dict:
    res = {}
    if a.which in ("both", "claude-code"):
        res["claude_code"] = gen_claude(a)
        print(f"claude-code: {res['claude_code']}", file=sys.stderr)
    if a.which in ("both", "inspect"):
        res["inspect"] = gen_inspect(a)
    return {"datasets": res}


def datasets(a) -> dict:
    d = {}
    for key, sub in (("inspect", "inspect"), ("claude_code", "claude-code")):
        m = Path(a.data) / sub / "meta.json"
        if m.exists():
            d[key] = json.loads(m.read_text())
    if not d:
        raise SystemExit(f"no datasets under {a.data}: run `generate` first")
    return d


# ---------------------------------------------------------------- workers (in the venv)
def run_worker(argv: list[str]) -> None:
    what, rest = argv[0], argv[1:]
    t0 = time.perf_counter()
    if what == "version":
        import inspect_ai
        res = {"inspect_ai": inspect_ai.__version__}
    elif what == "eval-stats":
        n, raw = 0, 0
        for name, data in eval_members(Path(rest[0])):
            n += 1
            raw += len(data)
        res = {"members": n, "uncompressed_bytes": raw}
    elif what == "inspect-readers":
        # What an Inspect user does today: the samples table and the events table.
        from inspect_ai.analysis import events_df, samples_df
        t1 = time.perf_counter()
        s = samples_df(rest[0], quiet=True)
        t2 = time.perf_counter()
        e = events_df(rest[0], quiet=True)
        t3 = time.perf_counter()
        res = {"called": "inspect_ai.analysis.samples_df(path, quiet=True); events_df(path, quiet=True)",
               "import_s": round(t1 - t0, 3), "samples_df_s": round(t2 - t1, 3), "events_df_s": round(t3 - t2, 3),
               "samples_shape": list(s.shape), "events_shape": list(e.shape)}
        t0 = t1  # the work, without importing inspect_ai
    elif what in ("floor-eval", "floor-cc"):
        lib, jobs = rest[1], int(rest[2])
        if what == "floor-eval":
            units = [Path(rest[0])]
        else:
            units = sorted(Path(rest[0]).rglob("*.jsonl"))
        parts = [units[i::jobs] for i in range(jobs)] if what == "floor-cc" else [[(units[0], i, jobs)] for i in range(jobs)]
        if jobs == 1:
            docs = floor_part(what, lib, parts[0])
        else:
            from concurrent.futures import ProcessPoolExecutor
            with ProcessPoolExecutor(jobs) as ex:
                docs = sum(ex.map(floor_part, [what] * jobs, [lib] * jobs, parts))
        res = {"parser": lib, "jobs": jobs, "documents": docs}
    else:
        raise SystemExit(f"unknown worker {what}")
    print(json.dumps({**res, "work_s": round(time.perf_counter() - t0, 3)}))


def floor_part(what: str, lib: str, units: list) -> int:
    """Parse one share of the documents; returns how many. lib 'none' only reads (and
    for the .eval decompresses), the floor below the floor."""
    import orjson
    loads = {"json": json.loads, "orjson": orjson.loads, "none": len}[lib]
    n = 0
    if what == "floor-eval":
        path, k, jobs = units[0]
        for name, data in eval_members(path, lambda i: i % jobs == k):  # a member is one JSON document
            loads(data)
            n += 1
    else:
        for f in units:  # every line of a transcript is one JSON document
            for line in f.read_bytes().splitlines():
                if line.strip():
                    loads(line)
                    n += 1
    return n


# ---------------------------------------------------------------- phases
def cmd_inspect_readers(a) -> dict:
    d = datasets(a)["inspect"]
    warm(Path(d["path"]))
    r = worker("inspect-readers", d["path"])
    r["mb_per_s"] = round(d["bytes"] / 1e6 / r["work_s"], 2)
    r["samples_per_s"] = round(d["samples"] / r["work_s"], 2)
    return {"inspect_readers": r}


def cmd_json_floor(a) -> dict:
    res = {}
    for key, what in (("inspect", "floor-eval"), ("claude_code", "floor-cc")):
        d = datasets(a).get(key)
        if not d:
            continue
        warm(Path(d["path"]))
        runs = [("none", 1), ("json", 1), ("orjson", 1), ("orjson", os.cpu_count() or 1)]
        for lib, jobs in runs:
            r = worker(what, d["path"], lib, str(jobs))
            r["mb_per_s"] = round(d["bytes"] / 1e6 / r["work_s"], 2)
            res.setdefault(key, []).append(r)
            print(f"floor {key} {lib} x{jobs}: {r['work_s']} s", file=sys.stderr, flush=True)
    return {"json_floor": res}


def cmd_epistore(a) -> dict:
    bin_ = Path(a.bin).resolve()
    if not bin_.exists():
        raise SystemExit(f"no epistore binary at {bin_} (build it, or pass --bin)")
    res = {"bin": str(bin_), "version": measure([bin_, "--version"])["stdout"].strip()}
    work = CACHE / "work"
    for key, d in datasets(a).items():
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        store = work / "store"
        warm(Path(d["path"]))
        runs = {"store_fresh": [bin_, "--store", store, "import", "--quiet", "--summary-format", "json", d["path"]],
                "store_reimport": [bin_, "--store", store, "import", "--quiet", "--summary-format", "json", d["path"]],
                "out": [bin_, "--store", work / "unused", "import", "--out", work / "out", "--quiet",
                        "--summary-format", "json", d["path"]]}
        for name, cmd in runs.items():
            r = measure(cmd)
            row = {"wall_s": r["wall_s"], "peak_rss_mb": r.get("peak_rss_mb"), "rc": r["rc"]}
            try:
                s = json.loads(r["stdout"])
                row.update({k: sum(f[k] for f in s["formats"]) for k in ("found", "imported", "already_present", "refused")})
            except (ValueError, KeyError):
                row["error"] = (r["stderr"] or r["stdout"])[-2000:]
            row["mb_per_s"] = round(d["bytes"] / 1e6 / r["wall_s"], 2)
            row["episodes_per_s"] = round(row.get("imported", 0) / r["wall_s"], 1)
            row["found_per_s"] = round(row.get("found", 0) / r["wall_s"], 1)
            if name == "store_reimport":
                row["store_mb"] = mb(tree_bytes(store)[0])
            res.setdefault(key, {})[name] = row
            print(f"epistore {key} {name}: {row}", file=sys.stderr, flush=True)
        shutil.rmtree(work, ignore_errors=True)
    return {"epistore": res}


def machine() -> dict:
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
    git = lambda *c: subprocess.run(["git", "-C", ROOT, *c], capture_output=True, text=True).stdout.strip()
    return {"nproc": os.cpu_count(), "cpu": cpu, "mem_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "kernel": platform.release(), "python": platform.python_version(), "pins": PINS,
            "commit": git("rev-parse", "--short", "HEAD") + ("+dirty" if git("status", "--porcelain") else "")}


# ---------------------------------------------------------------- report
def markdown(R: dict) -> str:
    ds, L = R.get("datasets", {}), []
    m = R.get("machine", {})
    L.append(f"Machine: {m.get('nproc')} CPUs, {m.get('cpu')}, {m.get('mem_gib')} GiB, Python {m.get('python')}, "
             f"inspect_ai {ds.get('inspect', {}).get('inspect_ai', '?')}, epistore `{R.get('epistore', {}).get('version', 'not run')}`, commit {m.get('commit')}.\n")
    L.append("| dataset | size | episodes | files / members | generated in |\n|---|---|---|---|---|")
    for k, d in ds.items():
        eps = d.get("samples", d.get("sessions"))
        extra = f", {mb(d['uncompressed_bytes'])} MB unzipped" if "uncompressed_bytes" in d else ""
        L.append(f"| {k} | {mb(d['bytes'])} MB{extra} | {eps} | {d.get('files', d.get('members'))} | {d['generate_wall_s']} s |")
    L.append("\n| dataset | what | seconds | MB/s | episodes/s | peak RSS MB |\n|---|---|---|---|---|---|")
    for k, d in ds.items():
        eps = d.get("samples", d.get("sessions"))
        for r in R.get("json_floor", {}).get(k, []):
            what = "read+unzip only" if r["parser"] == "none" else f"parse floor: {r['parser']} x{r['jobs']}"
            L.append(f"| {k} | {what} | {r['work_s']} | {r['mb_per_s']} | {eps / r['work_s']:.1f} | {r['peak_rss_mb']} |")
        if k == "inspect" and "inspect_readers" in R:
            r = R["inspect_readers"]
            L.append(f"| {k} | Inspect samples_df ({r['samples_df_s']} s) + events_df ({r['events_df_s']} s) | {r['work_s']} | "
                     f"{r['mb_per_s']} | {r['samples_per_s']} | {r['peak_rss_mb']} |")
        for name, r in R.get("epistore", {}).get(k, {}).items():
            L.append(f"| {k} | epistore import {name} (imported {r.get('imported')}, already {r.get('already_present')}) | "
                     f"{r['wall_s']} | {r['mb_per_s']} | {r['episodes_per_s'] or str(r['found_per_s']) + ' found'} | {r['peak_rss_mb']} |")
    ep = R.get("epistore", {})
    if ep:  # the targets
        L.append("")
        ir, fl = R.get("inspect_readers"), R.get("json_floor", {})
        if ir and "inspect" in ep:
            L.append(f"- Inspect readers / epistore (fresh store) on the same .eval: {ir['work_s'] / ep['inspect']['store_fresh']['wall_s']:.1f}x (target >= 10x)")
        for k in ep:
            best = min((r["work_s"] for r in fl.get(k, []) if r["parser"] == "orjson"), default=None)
            if best:
                L.append(f"- {k}: epistore (fresh store) / fastest parse floor: {ep[k]['store_fresh']['wall_s'] / best:.2f}x (target <= 3x)")
            if k in ds:
                L.append(f"- {k}: peak RSS {ep[k]['store_fresh']['peak_rss_mb']} MB for a {mb(ds[k]['bytes'])} MB input (target < 1 GB per GB)")
    L.append(f"\nReproduce: `{R.get('command', 'python3 benches/import_bench.py all --bin target/release/epistore')}`")
    return "\n".join(L)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_worker":
        return run_worker(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("phase", choices=["generate", "inspect-readers", "json-floor", "epistore", "all", "report"])
    ap.add_argument("--data", default=str(CACHE / "data"), help="datasets folder")
    ap.add_argument("--bin", default=str(ROOT / "target/release/epistore"), help="the epistore binary")
    ap.add_argument("--results", default=str(ROOT / "benches/import-results.json"))
    ap.add_argument("--which", choices=["both", "inspect", "claude-code"], default="both", help="generate: which dataset")
    ap.add_argument("--size-mb", type=float, default=300, help="generate: target .eval size (calibrated)")
    ap.add_argument("--samples", type=int, help="generate: Inspect samples (overrides --size-mb)")
    ap.add_argument("--payload-kb", type=int, default=512, help="generate: build-log tool output per sample")
    ap.add_argument("--sessions", type=int, default=5000, help="generate: Claude Code sessions")
    a = ap.parse_args()
    if a.phase != "epistore":
        ensure_venv()
    results = json.loads(Path(a.results).read_text()) if Path(a.results).exists() else {}
    phases = {"generate": [cmd_generate], "inspect-readers": [cmd_inspect_readers], "json-floor": [cmd_json_floor],
              "epistore": [cmd_epistore], "report": [],
              "all": [cmd_generate, cmd_inspect_readers, cmd_json_floor, cmd_epistore]}[a.phase]
    for phase in phases:
        results.update(phase(a))
        results["datasets"] = datasets(a)  # what the figures were measured on
        results.update(machine=machine(), command="python3 benches/import_bench.py " + " ".join(sys.argv[1:]))
        Path(a.results).write_text(json.dumps(results, indent=1) + "\n")  # after every phase: partial runs count
    print(markdown(results))


if __name__ == "__main__":
    main()
