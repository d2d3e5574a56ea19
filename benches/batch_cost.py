#!/usr/bin/env python3
"""Does the cost of one ingest batch grow with the store? (issue 4)

For each base size B (default 0, 20000, 60000 episodes) it builds a base store once
from `epistore synth --episodes B --seed 2 --output-scale 0.05` (small tool outputs, so
the setup stays quick; what grows is the number of keys in every B-tree), then, for
each run, copies that store (the redb file without sparse holes, and its columnar
segments) and times `epistore ingest` of the same batch of new episodes into the copy
(`synth --episodes 500 --seed 9`, full-size tool outputs; seed 9 shares no episode with
the bases). Runs go round-robin over the sizes so a drift in the machine's speed hits
every size alike. Reports the ingest's own `seconds` and `columnar_seconds` (min /
median / max) and the wall time of a no-op re-ingest of the same batch.

    python3 benches/batch_cost.py --epistore target/release/epistore

The bases are built with `synth --ingest` (no package files written). Needs about 1.2 GB
of disk per 20,000 base episodes, twice while a base is copied.

A store too big to copy (the million-episode store of benches/scale.py) is measured with
`--into STORE`: each run ingests a batch of different new episodes (`synth --episodes
500 --seed 100+run`) straight into that store, and the same batch into an empty store
right after, so both see the machine in the same minutes. The store grows by the
batches (a few MB each); nothing else in it changes.

    python3 benches/batch_cost.py --epistore target/release/epistore --into /tmp/epistore-scale/store
"""

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def run_json(cmd: list[str]) -> dict:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def synth(epistore: str, episodes: int, seed: int, scale: float, out: Path) -> None:
    subprocess.run([epistore, "synth", "--episodes", str(episodes), "--seed", str(seed), "--output-scale", str(scale),
                    "--out", str(out), "--quiet"], check=True)


def copy_store(base: Path | None, to: Path) -> None:
    if to.exists():
        shutil.rmtree(to)
    to.mkdir(parents=True)
    if base is None:
        return
    # --sparse=never: the copy is written out like the original, not full of holes
    # that the next commit would have to allocate.
    subprocess.run(["cp", "--sparse=never", str(base / "epistore.redb"), str(to / "epistore.redb")], check=True)
    if (base / "columnar").is_dir():
        shutil.copytree(base / "columnar", to / "columnar")
    subprocess.run(["sync"], check=True)


def summary(xs: list[float]) -> str:
    return f"{min(xs):.3f} / {statistics.median(xs):.3f} / {max(xs):.3f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epistore", required=True, help="the epistore binary (release build)")
    ap.add_argument("--sizes", default="0,20000,60000", help="base store sizes in episodes, comma separated")
    ap.add_argument("--batch", type=int, default=500, help="episodes in the timed batch")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", default="/tmp/epistore-batch-cost")
    ap.add_argument("--into", help="an existing store too big to copy: time new batches straight into it, each "
                    "against the same batch into an empty store")
    args = ap.parse_args()
    if args.runs < 1 or args.batch < 1:
        ap.error("--runs and --batch must be at least 1")
    epistore = str(Path(args.epistore).resolve())
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.into:
        return into_existing(args, epistore, work)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    batch = work / f"batch-{args.batch}"
    if not batch.is_dir():
        synth(epistore, args.batch, 9, 1.0, batch)
    bases: dict[int, Path | None] = {}
    for n in sizes:
        if n == 0:
            bases[n] = None
            continue
        store = work / f"base-{n}"
        if not (store / "epistore.redb").is_file():
            # Straight into the store (`synth --ingest`): the same episodes as writing
            # the files and ingesting them, without the files.
            report = run_json([epistore, "--store", str(store), "synth", "--ingest", "--episodes", str(n), "--seed", "2",
                               "--output-scale", "0.05", "--quiet", "--format", "json"])
            print(f"base of {n:,} episodes built in {report['seconds']:.1f} s", file=sys.stderr)
        bases[n] = store

    seconds: dict[int, list[float]] = {n: [] for n in sizes}
    columnar: dict[int, list[float]] = {n: [] for n in sizes}
    noop: dict[int, list[float]] = {n: [] for n in sizes}
    target = work / "store"
    for _ in range(args.runs):
        for n in sizes:
            copy_store(bases[n], target)
            cmd = [epistore, "--store", str(target), "ingest", "--quiet", "--format", "json", str(batch)]
            report = run_json(cmd)
            if report["added"] != args.batch:
                print(f"error: the batch added {report['added']} episodes to the base of {n}, not {args.batch}",
                      file=sys.stderr)
                return 1
            seconds[n].append(report["seconds"])
            columnar[n].append(report["columnar_seconds"])
            start = time.perf_counter()
            run_json(cmd)
            noop[n].append(time.perf_counter() - start)
    shutil.rmtree(target)

    print(f"| episodes already stored | ingest of {args.batch} new (min / median / max s) | "
          f"of which columnar | re-ingest, all present (wall s) |")
    print("|---|---|---|---|")
    for n in sizes:
        print(f"| {n:,} | {summary(seconds[n])} | {summary(columnar[n])} | {summary(noop[n])} |")
    return 0


def into_existing(args, epistore: str, work: Path) -> int:
    big = Path(args.into)
    if not (big / "epistore.redb").is_file():
        print(f"error: no store at {big}", file=sys.stderr)
        return 1
    count = subprocess.run([epistore, "--store", str(big), "sql", "--format", "csv", "SELECT count(*) FROM episodes"],
                           check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    timings: dict[str, list[float]] = {"big": [], "empty": [], "big_columnar": [], "empty_columnar": []}
    empty = work / "empty"
    for run in range(args.runs):
        batch = work / f"batch-{args.batch}-seed{100 + run}"
        if not batch.is_dir():
            synth(epistore, args.batch, 100 + run, 1.0, batch)
        for name, store in (("big", big), ("empty", empty)):
            if name == "empty" and empty.exists():
                shutil.rmtree(empty)
            report = run_json([epistore, "--store", str(store), "ingest", "--quiet", "--format", "json", str(batch)])
            if report["added"] != args.batch:
                print(f"error: batch seed {100 + run} added {report['added']} episodes to {store}, not {args.batch} "
                      "(already ingested by an earlier run?)", file=sys.stderr)
                return 1
            timings[name].append(report["seconds"])
            timings[f"{name}_columnar"].append(report["columnar_seconds"])
    shutil.rmtree(empty)
    print(f"| store | ingest of {args.batch} new (min / median / max s) | of which columnar |")
    print("|---|---|---|")
    print(f"| {big} ({int(count):,} episodes before) | {summary(timings['big'])} | {summary(timings['big_columnar'])} |")
    print(f"| empty | {summary(timings['empty'])} | {summary(timings['empty_columnar'])} |")
    print(f"\nratio of medians: {statistics.median(timings['big']) / statistics.median(timings['empty']):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
