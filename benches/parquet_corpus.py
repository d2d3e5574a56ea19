#!/usr/bin/env python3
"""Trajectory corpora as Parquet: `epistore import` against merely decoding the file
with pyarrow, and the import's peak memory.

    python3 benches/parquet_corpus.py [--rows 100000] [--kib 50] [--group 1000]
                                      [--bin target/debug/epistore] [--keep DIR]

1. Writes a corpus of ROWS trajectories of about KIB KiB each, shaped as the public
   corpora publish them (SWE-smith / nebius SWE-agent: `instance_id`, `traj_id`,
   `model`, `resolved`, `patch`, and `messages` as a list of OpenAI-style chat messages
   with `tool_calls`), in row groups of GROUP rows, zstd-compressed. The text is drawn
   from a pool of paragraphs with the row's id mixed in, so it compresses about as
   real transcripts do (3-4x), not as random bytes or as one repeated string.
2. Decodes it with pyarrow twice: to Arrow only (`iter_batches`), and to Python rows
   (`iter_batches` then `to_pylist`, what a notebook that reads the rows does).
3. Imports it with `epistore import FILE --quiet` into a new store: wall time, and
   the child's peak resident memory (getrusage).

Prints one JSON object: sizes, seconds, MB/s of the Parquet file, and the ratios.
"""
import argparse, json, os, random, resource, shutil, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def paragraphs(n=4000, seed=7):
    rnd = random.Random(seed)
    words = ("def class return import self value test assert error file path line "
             "function module config result check patch diff repo issue fix run "
             "python pytest failed passed traceback expected actual none true false "
             "the a of to in is for with on that this it as be by are".split())
    out = []
    for _ in range(n):
        k = rnd.randint(20, 120)
        out.append(" ".join(rnd.choice(words) + (str(rnd.randint(0, 999)) if rnd.random() < 0.2 else "")
                            for _ in range(k)))
    return out


def trajectory(i, rnd, pool, kib):
    """One row of about `kib` KiB."""
    def text(nbytes):
        parts, size = [], 0
        while size < nbytes:
            p = pool[rnd.randrange(len(pool))]
            parts.append(p)
            size += len(p) + 1
        parts.insert(rnd.randrange(len(parts) + 1), f"[{i}]")
        return "\n".join(parts)

    repo = f"org{i % 97}__proj{i % 13}"
    msgs = [
        {"role": "system", "content": text(3000), "tool_calls": None, "tool_call_id": None},
        {"role": "user", "content": "<pr_description>\n" + text(1500) + "\n</pr_description>",
         "tool_calls": None, "tool_call_id": None},
    ]
    budget = kib * 1024 - 4500
    turn = 0
    while budget > 0:
        call = f"call_{i}_{turn}"
        if turn % 4 == 3:
            fn = {"name": "str_replace_editor", "arguments": json.dumps(
                {"command": "str_replace", "path": f"/testbed/{repo}/mod{turn}.py",
                 "old_str": text(150), "new_str": text(150)})}
        else:
            fn = {"name": "bash", "arguments": json.dumps({"command": f"cd /testbed && python -m pytest tests/test_{turn}.py -q"})}
        thought = text(400)
        output = text(900) + f"\n[Command finished with exit code {turn % 2}]"
        msgs.append({"role": "assistant", "content": thought,
                     "tool_calls": [{"id": call, "type": "function", "function": fn}], "tool_call_id": None})
        msgs.append({"role": "tool", "content": output, "tool_calls": None, "tool_call_id": call})
        budget -= len(thought) + len(output) + len(fn["arguments"]) + 120
        turn += 1
    msgs.append({"role": "assistant", "content": "Done: " + text(200), "tool_calls": None, "tool_call_id": None})
    return {
        "instance_id": f"{repo}.{i:07d}",
        "traj_id": f"{repo}.{i:07d}.t{i % 5}",
        "model": ["claude-3-7-sonnet-20250219", "gpt-4o-2024-08-06", "qwen-2.5-coder-32b"][i % 3],
        "resolved": bool(rnd.random() < 0.4),
        "patch": f"diff --git a/mod.py b/mod.py\n--- a/mod.py\n+++ b/mod.py\n@@ -1 +1 @@\n-{text(300)}\n+{text(300)}\n",
        "messages": msgs,
    }


def write_corpus(path, rows, kib, group):
    import pyarrow as pa, pyarrow.parquet as pq
    pool = paragraphs()
    rnd = random.Random(42)
    writer, written = None, 0
    while written < rows:
        n = min(group, rows - written)
        table = pa.Table.from_pylist([trajectory(written + k, rnd, pool, kib) for k in range(n)])
        if writer is None:
            writer = pq.ParquetWriter(path, table.schema, compression="zstd")
        writer.write_table(table, row_group_size=group)
        written += n
        print(f"\rwrote {written}/{rows} rows", end="", file=sys.stderr, flush=True)
    writer.close()
    print(file=sys.stderr)


def decode(path, python_rows):
    import pyarrow.parquet as pq
    start = time.perf_counter()
    n = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=256):
        if python_rows:
            n += len(batch.to_pylist())
        else:
            n += batch.num_rows
    return time.perf_counter() - start, n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--kib", type=int, default=50)
    ap.add_argument("--group", type=int, default=1000)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/debug/epistore"))
    ap.add_argument("--keep", help="a folder to write the corpus and store into, kept afterwards")
    a = ap.parse_args()
    work = a.keep or tempfile.mkdtemp(prefix="epistore-parquet-")
    os.makedirs(work, exist_ok=True)
    corpus = os.path.join(work, f"corpus-{a.rows}x{a.kib}k.parquet")
    if not os.path.exists(corpus):
        write_corpus(corpus, a.rows, a.kib, a.group)
    size = os.path.getsize(corpus)
    arrow_s, n = decode(corpus, False)
    python_s, _ = decode(corpus, True)
    store = os.path.join(work, "store")
    shutil.rmtree(store, ignore_errors=True)
    start = time.perf_counter()
    out = subprocess.run([a.bin, "--store", store, "import", corpus, "--quiet", "--summary-format", "json"],
                         capture_output=True, text=True)
    import_s = time.perf_counter() - start
    if out.returncode != 0:
        sys.exit(f"import failed ({out.returncode}): {out.stderr[-2000:]}")
    summary = json.loads(out.stdout)
    imported = sum(f["imported"] for f in summary["formats"])
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    mb = size / 1e6
    print(json.dumps({
        "rows": n, "imported": imported, "parquet_mb": round(mb, 1),
        "pyarrow_arrow_s": round(arrow_s, 2), "pyarrow_python_rows_s": round(python_s, 2),
        "import_s": round(import_s, 2), "import_mb_per_s": round(mb / import_s, 1),
        "pyarrow_arrow_mb_per_s": round(mb / arrow_s, 1), "pyarrow_python_mb_per_s": round(mb / python_s, 1),
        "import_vs_python_rows": round(python_s / import_s, 2), "import_vs_arrow": round(arrow_s / import_s, 3),
        "import_peak_mib": round(peak_mib), "binary": a.bin,
    }, indent=1))
    if not a.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
