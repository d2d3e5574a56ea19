#!/usr/bin/env python3
"""Peak memory of `import` and `ingest` on oversized inputs, at the default thread count.

    python3 benches/import_memory.py --bin target/debug/epistore [--member-mib 150] [--old /tmp/epistore-old]

Inputs (written to --work, deterministic):
  eval-bomb   an Inspect .eval holding one real sample (tests/fixtures/real/inspect) four
              times over, each copy padded with --member-mib MiB of words (deflated about
              6:1, so the ZIP-bomb ratio check passes): four large members, each one unit.
  cc-line     a Claude Code session with one line of --member-mib MiB (a tool result).
Each is imported into a fresh store with the default memory budget and with
`--memory-budget-mib 256`; peak RSS from /usr/bin/time -v. With --old, the same with an
older binary (which has no budget flag: default run only).
"""
import argparse
import json
import random
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EVAL = ROOT / "tests/fixtures/real/inspect/2024-11-05T13-32-37-05-00_input-task_hxs4q9azL3ySGkjJirypKZ.eval"


def words(n_bytes: int, seed: int) -> str:
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))) for _ in range(5000)]
    out, size = [], 0
    while size < n_bytes:
        w = rng.choice(vocab)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


def eval_bomb(work: Path, mib: int) -> Path:
    path = work / f"bomb-{mib}.eval"
    if path.exists():
        return path
    src = zipfile.ZipFile(EVAL)
    sample = json.loads(src.read("samples/1_epoch_1.json"))
    pad = words(mib << 20, 1)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as out:
        for info in src.infolist():
            if not info.filename.startswith("samples/"):
                out.writestr(info.filename, src.read(info.filename))
        for k in range(4):
            s = dict(sample, id=f"{sample['id']}-{k}")
            s["metadata"] = dict(s.get("metadata") or {}, pad=pad)
            out.writestr(f"samples/{s['id']}_epoch_1.json", json.dumps(s))
    return path


def cc_line(work: Path, mib: int) -> Path:
    d = work / "cc" / "projects" / "-w"
    d.mkdir(parents=True, exist_ok=True)
    path = d / "0b5e0000-0000-4000-8000-00000000beef.jsonl"
    if path.exists():
        return path
    sid = path.stem
    lines = [
        {"type": "user", "sessionId": sid, "uuid": "u0", "timestamp": "2026-01-01T00:00:00Z", "cwd": "/w",
         "message": {"role": "user", "content": "go"}},
        {"type": "assistant", "sessionId": sid, "uuid": "a0", "timestamp": "2026-01-01T00:00:01Z", "cwd": "/w",
         "message": {"id": "m0", "model": "claude-sonnet-4-5", "role": "assistant",
                     "content": [{"type": "tool_use", "id": "t0", "name": "Bash", "input": {"command": "cat big"}}]}},
        {"type": "user", "sessionId": sid, "uuid": "r0", "timestamp": "2026-01-01T00:00:02Z", "cwd": "/w",
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t0", "content": words(mib << 20, 2)}]}},
    ]
    path.write_text("".join(json.dumps(l) + "\n" for l in lines))
    return path


def peak(cmd: list) -> dict:
    r = subprocess.run(["/usr/bin/time", "-v", *map(str, cmd)], capture_output=True, text=True)
    rss = next((int(l.split()[-1]) for l in r.stderr.splitlines() if "Maximum resident" in l), 0)
    wall = next((l.split()[-1] for l in r.stderr.splitlines() if "Elapsed (wall" in l), "?")
    return {"exit": r.returncode, "peak_mib": round(rss / 1024), "wall": wall}


def main() -> None:
    a = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("--bin", default=str(ROOT / "target/debug/epistore"))
    a.add_argument("--old")
    a.add_argument("--member-mib", type=int, default=150)
    a.add_argument("--work", default="/tmp/epistore-import-memory")
    args = a.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    inputs = {"eval-bomb": eval_bomb(work, args.member_mib), "cc-line": cc_line(work, args.member_mib)}
    rows = []
    runs = [("new", args.bin, [])]
    runs.append(("new, budget 256 MiB", args.bin, ["--memory-budget-mib", "256"]))
    if args.old:
        runs.append(("old", args.old, []))
    for name, path in inputs.items():
        for label, binary, extra in runs:
            store = work / "store"
            subprocess.run(["rm", "-rf", str(store)])
            r = peak([binary, "--store", store, "import", "-q", *extra, path])
            rows.append({"input": name, "binary": label, **r})
            print(json.dumps(rows[-1]), flush=True)
    print("\n| input | build | peak RSS | wall | exit |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['input']} | {r['binary']} | {r['peak_mib']} MiB | {r['wall']} | {r['exit']} |")


if __name__ == "__main__":
    sys.exit(main())
