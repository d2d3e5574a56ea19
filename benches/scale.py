#!/usr/bin/env python3
"""A million episodes on a disk that cannot hold their files (issue 4).

The raw files of a million realistic packages are 11 million files and 50-100 GB; this
machine has ~25 GB free, and creating a file costs it ~0.4 ms of kernel time. So the
population goes into one store in parts of --part episodes, part k being episodes
k*PART.. of `synth --seed 1` (parts equal one run of the whole population, a tested
property of synth), in one of two ways:

  --via memory (default): `epistore --store S synth --ingest --first k*PART --episodes
      PART`: each package is built in memory on the ingest threads and goes through the
      same ingest as packages read from files (parse, validate, hash, compress, dedupe,
      commit, columnar segments); no file is read, so there is no I/O floor.
  --via files: `synth --out DIR` writes the part, its I/O floor is measured (every file
      read once on --io-threads threads after dropping its cached pages, as
      benches/bench.py does), then `epistore ingest DIR` (pages dropped again), then
      DIR is deleted. Slow here: most of the time goes to creating and deleting files.

Per part it records the ingest's wall seconds, episodes/s, MB/s, peak RSS (getrusage
of that process) and the store's size after it: whether ingest slows down, or memory
grows, as the store grows from 0 to N episodes (each part is ~100 transactions of up
to 512 packages, so a part's episodes/s is the batch cost at that store size). Then over
the full store: cold start (open + first query, the store's pages dropped first), the
metric suite (`SELECT * FROM <view>` for each view of docs/metrics.md §H, best of 2, with
peak RSS), the row count of the biggest table and its Parquet export. DuckDB is not
run: it needs every raw file at once.

    python3 benches/scale.py --epistore target/release/epistore \\
        [--episodes 1000000 --part 50000 --output-scale 0.05 --work /tmp/epistore-scale]

Progress is saved after every part in WORK/scale.json; the same command run again
resumes after the last finished part (a part interrupted mid-ingest is ingested again;
the episodes it already stored are no-ops). The report goes to benches/scale-results.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402  (helpers: floor, cache eviction, du, machine description)

HERE = Path(__file__).resolve().parent
LAST_CPU_S = 0.0
LAST_IO: dict[str, int] = {}


def run_measured(cmd: list[str], stdout=subprocess.DEVNULL) -> tuple[float, int, int]:
    """Runs cmd; returns (wall seconds, exit code, peak RSS in bytes of that process).
    The process's CPU seconds (user + system) are in LAST_CPU_S: on a shared virtual
    machine they vary less than wall time."""
    global LAST_CPU_S
    bench.log(f"  $ {shlex.join(cmd)}")
    start = time.perf_counter()
    # stderr goes to a file: a pipe read only after the wait could fill and block.
    with tempfile.TemporaryFile() as errfile:
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=errfile)
        # wait4 reports the rusage of this child alone (RUSAGE_CHILDREN would be the
        # maximum over every child so far). Meanwhile /proc/<pid>/io is sampled: its
        # last sample (within 0.5 s of the end) says how many bytes the process read and
        # wrote through system calls.
        LAST_IO.clear()
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            try:
                with open(f"/proc/{proc.pid}/io") as fh:
                    LAST_IO.update((k, int(v)) for k, v in (line.split(": ") for line in fh))
            except OSError:
                pass
            time.sleep(0.5)
        secs = time.perf_counter() - start
        errfile.seek(0)
        err = errfile.read().decode(errors="replace")
    LAST_CPU_S = usage.ru_utime + usage.ru_stime
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{shlex.join(cmd)} failed ({code}): {err.strip()[-2000:]}")
    return secs, code, usage.ru_maxrss * 1024


def part_step(args, k: int, store: Path, work: Path) -> dict:
    first = k * args.part
    n = min(args.part, args.episodes - first)
    res: dict = {"part": k, "first": first, "episodes": n}
    synth = ["synth", "--episodes", str(n), "--first", str(first), "--seed", "1", "--output-scale", repr(args.output_scale)]
    report = work / "ingest.json"
    if args.via == "memory":
        with open(report, "wb") as fh:
            secs, _, rss = run_measured([args.epistore, "--store", str(store), *synth, "--ingest", "--quiet",
                                         "--format", "json"], stdout=fh)
    else:
        pop = work / "part"
        if pop.exists():
            shutil.rmtree(pop)
        res["synth_s"], _, _ = run_measured([args.epistore, *synth, "--out", str(pop), "--quiet"])
        bench.evict(pop, args.threads)
        bench.io_floor(pop, args.io_threads, 1e9, res, "io_floor_s")
        bench.evict(pop, args.threads)
        with open(report, "wb") as fh:
            secs, _, rss = run_measured([args.epistore, "--store", str(store), "ingest", "--quiet", "--format", "json",
                                         str(pop)], stdout=fh)
        shutil.rmtree(pop)
    res["ingest_cpu_s"] = LAST_CPU_S
    if LAST_IO:
        res["ingest_read_bytes"], res["ingest_written_bytes"] = LAST_IO.get("rchar"), LAST_IO.get("wchar")
    totals = bench.ingest_totals(report)
    if int(totals.get("rejected", 0)):
        raise SystemExit(f"part {k}: {int(totals['rejected'])} packages rejected (see {report})")
    res.update(ingest_s=secs, ingest_rss=rss, added=int(totals.get("added", 0)),
               already_present=int(totals.get("already_present", 0)), raw_bytes=int(totals.get("bytes_read", 0)),
               columnar_s=totals.get("columnar_seconds"))
    res["store_bytes"], res["store_alloc_bytes"] = bench.du_bytes(store)
    res["free_disk_bytes"] = shutil.disk_usage(work).free
    return res


def final_steps(args, store: Path, work: Path) -> dict:
    res: dict = {}
    bench.evict(store, args.threads)
    times = []
    for _ in range(3):
        secs, _, _ = run_measured([args.epistore, "--store", str(store), "sql", "--format", "csv",
                                   "SELECT count(*) FROM episodes"])
        times.append(secs)
    res["cold_start_first_s"], res["cold_start_best_s"] = times[0], min(times)
    suite = work / "suite.sql"
    suite.write_text(bench.SUITE_SQL)
    times, rss = [], []
    for i in range(2):
        with open(work / f"suite-{i + 1}.csv", "wb") as fh:
            secs, _, r = run_measured([args.epistore, "--store", str(store), "sql", "--format", "csv",
                                       "--file", str(suite)], stdout=fh)
        times.append(secs)
        rss.append(r)
    res["suite_first_s"], res["suite_best_s"], res["suite_rss"] = times[0], min(times), max(rss)
    res["suite_rows"] = sum(1 for _ in open(work / "suite-2.csv", "rb"))
    out = subprocess.run([args.epistore, "--store", str(store), "sql", "--format", "csv",
                          "SELECT (SELECT count(*) FROM episodes) AS e, (SELECT count(*) FROM actions) AS a"],
                         check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    res["episodes_in_store"], res["action_rows"] = (int(x) for x in out.split(","))
    parquet = work / "actions.parquet"
    secs, _, r = run_measured([args.epistore, "--store", str(store), "export", "--table", "actions",
                               "--format", "parquet", "--out", str(parquet), "--quiet"])
    res["export_parquet_s"], res["export_rss"], res["export_bytes"] = secs, r, parquet.stat().st_size
    parquet.unlink()
    res["store_bytes"], res["store_alloc_bytes"] = bench.du_bytes(store)
    return res


def cpu_ms(p: dict) -> str:
    return f"{1000 * p['ingest_cpu_s'] / p['episodes']:.2f}" if "ingest_cpu_s" in p else "–"


def written_kb(p: dict) -> str:
    """Bytes the ingest process wrote through system calls (redb's pages, Parquet
    segments), per episode: against the store's growth, the write amplification."""
    b = p.get("ingest_written_bytes")
    return f"{b / p['episodes'] / 1e3:,.0f}" if b else "–"


def store_vs_columnar(p: dict) -> str:
    """The ingest's time outside the columnar step over the columnar step's time. The
    columnar step does the same work in every part (one Parquet segment per 8,192 new
    episodes, whatever the store holds), so it measures the machine's speed during the
    part: this ratio stays flat when the store's cost per episode does, even while a
    shared machine speeds up or slows down."""
    if not p.get("columnar_s"):
        return "–"
    return f"{(p['ingest_s'] - p['columnar_s']) / p['columnar_s']:.2f}"


def fmt_mb(b) -> str:
    return f"{b / 1e6:,.0f}"


def store_format(args, store: Path) -> str:
    out = subprocess.run([args.epistore, "--store", str(store), "sql", "--format", "csv",
                          "SELECT value FROM epistore_info WHERE key = 'store_format'"],
                         check=True, capture_output=True, text=True).stdout.strip().splitlines()
    return out[-1]


def load_baseline(path: str | None) -> dict | None:
    """An earlier run's scale.json (another build or store format), shown beside this one."""
    if not path:
        return None
    base = json.loads(Path(path).read_text())
    base.setdefault("store_format", "epistore-store/1")  # runs made before it was recorded
    base["label"] = f"{base['store_format']}, {base.get('started', '?')}"
    return base


def report(args, state: dict) -> str:
    parts = state["parts"]
    base = load_baseline(args.baseline)
    if not parts:
        return "# epistore scale run\n\nNo part finished yet.\n"
    fin = state.get("final", {})
    files = args.via == "files"
    raw = sum(p["raw_bytes"] for p in parts)
    ing = sum(p["ingest_s"] for p in parts)
    eps = sum(p["episodes"] for p in parts)
    m = state["machine"]
    how = ("written to files, ingested from them and deleted" if files else
           "built in memory by `synth --ingest` and ingested as if read from files (no file is read)")
    lines = [
        f"# epistore at {sum(p['episodes'] for p in parts):,} episodes (planned: {args.episodes:,})",
        "",
        f"Written by `benches/scale.py` on {state['started']} (UTC), release build. Machine: {m.get('cpu', '?')}, "
        f"{m.get('nproc')} cores, {m.get('memory_gib')} GiB RAM, Linux {m.get('kernel')}.",
        "",
        f"Command: `{state['command']}`",
        "",
        f"Population: {args.episodes:,} episodes of `synth --seed 1 --output-scale {args.output_scale:g}`, "
        f"{how}, in parts of {args.part:,} into one store. Store format: {state.get('store_format', '?')}.",
        "",
        "## Totals",
        "",
        "| | value |",
        "|---|---|",
        f"| episodes ingested | {eps:,} in {len(parts)} parts"
        + (f" (stopped early with `--finish`: {args.episodes:,} were planned)" if state.get("finished_early") else "")
        + " |",
        f"| raw package bytes | {fmt_mb(raw)} MB |",
        f"| ingest, sum of parts | {ing:,.1f} s ({eps / ing:,.0f} episodes/s, {raw / 1e6 / ing:,.0f} MB/s) |",
    ]
    if files:
        floor = sum(p["io_floor_s"] for p in parts)
        lines += [f"| I/O floor, sum of parts (cold) | {floor:,.1f} s |",
                  f"| ingest / I/O floor (target <= 4) | {ing / floor:.2f}x |"]
    lines.append(f"| peak RSS of an ingest, largest over the parts | {max(p['ingest_rss'] for p in parts) / 2**20:,.0f} MiB |")
    if fin:
        alloc = fin.get("store_alloc_bytes")
        lines += [
            f"| store (redb file + columnar segments), file sizes | {fmt_mb(fin['store_bytes'])} MB, "
            f"{fin['store_bytes'] / raw:.3f} of raw (target <= 0.35) |",
        ]
        if alloc:
            lines.append(f"| store, disk blocks in use (redb grows its file ahead of use) | {fmt_mb(alloc)} MB, "
                         f"{alloc / raw:.3f} of raw |")
        lines += [
            f"| cold start, first / best of 3 | {fin['cold_start_first_s']:.3f} / {fin['cold_start_best_s']:.3f} s |",
        ]
        crash = state.get("final_after_crash_repair")
        if crash:  # recorded by hand when an interrupted part left the file to repair
            lines.append(f"| first open after an interrupted ingest (redb repairs the whole file) | "
                         f"{crash['cold_start_first_s']:.1f} s |")
        lines += [
            f"| metric suite, first / best of 2 | {fin['suite_first_s']:.2f} / {fin['suite_best_s']:.2f} s "
            f"({fin['suite_rows']:,} CSV lines) |",
            f"| peak RSS of the suite | {fin['suite_rss'] / 2**20:,.0f} MiB |",
            f"| export of `actions` ({fin['action_rows']:,} rows) to Parquet | {fin['export_parquet_s']:.1f} s, "
            f"{fmt_mb(fin['export_bytes'])} MB, peak RSS {fin['export_rss'] / 2**20:,.0f} MiB |",
        ]
    lines += [
        "",
        "## Per part: does ingest slow down, or memory grow, as the store grows?",
        "",
        "Wall time on a shared virtual machine varies from part to part; the CPU time of the ingest process "
        "(user + system, over all its threads) per episode varies less. *store / columnar* is the ingest's time "
        "outside its columnar step over the columnar step's time: the columnar step does the same work in every "
        "part whatever the store holds, so the ratio follows the store's own cost even while the machine's "
        "speed drifts.",
        "",
        "| part | store before (episodes) | ingest s | episodes/s | MB/s | CPU ms / episode | "
        "KB written / episode | store / columnar | "
        + ("I/O floor s | ingest / floor | " if files else "") + "peak RSS MiB | store file size after, MB |"
        + (" baseline episodes/s | baseline CPU ms / episode |" if base else ""),
        "|---|---|---|---|---|---|---|---|" + ("---|---|" if files else "") + "---|---|" + ("---|---|" if base else ""),
    ]
    base_parts = {bp["first"]: bp for bp in base["parts"]} if base else {}
    rerun = False
    for p in parts:
        mark = ""
        if p.get("already_present"):
            # A part run again after an interruption: some of its episodes were no-ops.
            mark, rerun = "*", True
        floor_cells = f"{p['io_floor_s']:.1f} | {p['ingest_s'] / p['io_floor_s']:.2f} | " if files else ""
        lines.append(f"| {p['part'] + 1}{mark} | {p['first']:,} | {p['ingest_s']:.1f} | {p['episodes'] / p['ingest_s']:,.0f} | "
                     f"{p['raw_bytes'] / 1e6 / p['ingest_s']:,.0f} | {cpu_ms(p)} | {written_kb(p)} | {store_vs_columnar(p)} | {floor_cells}{p['ingest_rss'] / 2**20:,.0f} | "
                     f"{fmt_mb(p['store_bytes'])} |" + (baseline_cells(base_parts.get(p["first"])) if base else ""))
    sampled = [str(p["part"] + 1) for p in parts if "io_sampled_by" in p]
    if sampled:  # recorded by hand for runs made before scale.py sampled /proc itself
        lines += ["", f"Bytes written by parts {', '.join(sampled)}: from "
                  f"{parts[int(sampled[0]) - 1]['io_sampled_by']}."]
    if rerun:
        lines += ["", "\\* run again after an interruption: some of its episodes were already stored (no-ops), "
                  "so its figures understate the cost of a part."]
    if base:
        lines += ["", f"Baseline columns and the grey dashed lines of the chart: the same parts of an earlier run "
                  f"({base['label']}; `{args.baseline}`)."]
    lines += ["", "![ingest speed and memory per part](scale-ingest.svg)", "", "Raw numbers: `WORK/scale.json`.", ""]
    return "\n".join(lines)


def baseline_cells(bp: dict | None) -> str:
    if not bp:
        return " | |"
    return f" {bp['episodes'] / bp['ingest_s']:,.0f} | {cpu_ms(bp)} |"


def chart_svg(parts: list[dict], base: dict | None = None) -> str:
    """Small line charts side by side (no plotting library needed): ingest episodes/s,
    CPU per episode and peak RSS, each against the store's size before the part; an
    earlier run (`base`), when given, in grey dashes behind."""
    w, h, pad = 330, 220, 46
    panels = [("ingest, episodes/s (wall)", lambda p: p["episodes"] / p["ingest_s"], "#2b6cb0"),
              ("ingest CPU ms per episode", lambda p: 1000 * p["ingest_cpu_s"] / p["episodes"], "#2f855a"),
              ("ingest peak RSS, MiB", lambda p: p["ingest_rss"] / 2**20, "#c05621")]
    base_parts = base["parts"] if base else []
    xmax = max(p["first"] + p["episodes"] for p in [*parts, *base_parts])
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{len(panels) * w}" height="{h}" '
           'font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/>']
    def series(runs: list[dict], value) -> list[tuple[float, float]]:
        points = []
        for p in runs:
            try:
                points.append((p["first"], value(p)))
            except KeyError:  # parts measured before CPU time was recorded
                pass
        return points

    for i, (title, value, colour) in enumerate(panels):
        points, base_points = series(parts, value), series(base_parts, value)
        if not points:
            continue
        xs, ys = [x for x, _ in points], [y for _, y in points]
        x0 = i * w
        ymax = max(ys + [y for _, y in base_points]) * 1.15 or 1

        def px(x: float) -> float:
            return x0 + pad + (x / xmax) * (w - pad - 12)

        def py(y: float) -> float:
            return h - pad + 12 - (y / ymax) * (h - pad - 24)

        out.append(f'<text x="{x0 + w / 2}" y="14" text-anchor="middle" font-weight="bold">{title}</text>')
        out.append(f'<line x1="{px(0)}" y1="{py(0)}" x2="{px(xmax)}" y2="{py(0)}" stroke="#888"/>')
        out.append(f'<line x1="{px(0)}" y1="{py(0)}" x2="{px(0)}" y2="{py(ymax)}" stroke="#888"/>')
        for frac in (0, 0.5, 1):
            yv = ymax / 1.15 * frac
            out.append(f'<text x="{px(0) - 4}" y="{py(yv) + 4}" text-anchor="end">{yv:,.0f}</text>')
            xv = xmax * frac
            out.append(f'<text x="{px(xv)}" y="{py(0) + 14}" text-anchor="middle">{xv / 1000:,.0f}k</text>')
        out.append(f'<text x="{x0 + w / 2}" y="{h - 6}" text-anchor="middle">episodes in the store before the part</text>')
        if base_points:
            pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in base_points)
            out.append(f'<polyline points="{pts}" fill="none" stroke="#999" stroke-width="1.5" stroke-dasharray="4 3"/>')
            if i == 0:
                out.append(f'<text x="{px(xmax)}" y="28" text-anchor="end" fill="#777">dashed: {base["label"]}</text>')
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, ys))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2"/>')
        out.extend(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="{colour}"/>' for x, y in zip(xs, ys))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epistore", required=True, help="the epistore binary (release build)")
    ap.add_argument("--episodes", type=int, default=1_000_000)
    ap.add_argument("--part", type=int, default=50_000, help="episodes written, ingested and deleted at a time")
    ap.add_argument("--via", choices=["memory", "files"], default="memory",
                    help="build packages in memory (synth --ingest) or write, read and delete their files")
    ap.add_argument("--output-scale", type=float, default=0.05,
                    help="synth --output-scale (0.05, as synth suggests for a million episodes)")
    ap.add_argument("--work", default="/tmp/epistore-scale")
    ap.add_argument("--threads", type=int, default=bench.CORES, help="threads for dropping cached pages")
    ap.add_argument("--io-threads", type=int, default=bench.IO_THREADS, help="threads the I/O floor reads on")
    ap.add_argument("--results", default=str(HERE / "scale-results.md"))
    ap.add_argument("--chart", default=str(HERE / "scale-ingest.svg"), help="per-part chart (SVG)")
    ap.add_argument("--baseline", help="scale.json of an earlier run (another build or store format, e.g. "
                    "benches/scale-format1.json) to show beside this one, part by part")
    ap.add_argument("--fresh", action="store_true", help="delete WORK first instead of resuming")
    ap.add_argument("--finish", action="store_true",
                    help="ingest no more parts: run the full-store steps on the parts done so far (for a run that "
                         "cannot finish in the time there is; the report says how far it got)")
    args = ap.parse_args()
    args.epistore = str(Path(args.epistore).resolve())
    work = Path(args.work)
    if args.fresh and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    store = work / "store"
    state_file = work / "scale.json"
    params = {"episodes": args.episodes, "part": args.part, "output_scale": args.output_scale, "via": args.via}
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    if state.get("params") != params:
        if store.exists():
            raise SystemExit(f"{work} holds a run with other parameters {state.get('params')}; use --fresh")
        state = {"params": params, "parts": [], "started": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
                 "machine": bench.machine(), "command": shlex.join(["python3", "benches/scale.py", *sys.argv[1:]])}

    def save() -> None:
        tmp = state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        tmp.replace(state_file)

    if args.episodes < 1 or args.part < 1:
        raise SystemExit("--episodes and --part must be at least 1")
    n_parts = -(-args.episodes // args.part)
    if args.finish and state["parts"]:
        n_parts = len(state["parts"])
        state["finished_early"] = True
    for k in range(len(state["parts"]), n_parts):
        bench.log(f"part {k + 1}/{n_parts}")
        p = part_step(args, k, store, work)
        floor = f"floor {p['io_floor_s']:.1f} s, " if "io_floor_s" in p else ""
        bench.log(f"  {p['episodes']:,} episodes: {floor}ingest {p['ingest_s']:.1f} s "
                  f"({p['episodes'] / p['ingest_s']:,.0f}/s), RSS {p['ingest_rss'] / 2**20:,.0f} MiB, "
                  f"store {p['store_bytes'] / 1e9:.2f} GB, free {p['free_disk_bytes'] / 1e9:.1f} GB")
        state["parts"].append(p)
        if "store_format" not in state:
            state["store_format"] = store_format(args, store)
        state.pop("final", None)
        save()
        Path(args.results).write_text(report(args, state))
        Path(args.chart).write_text(chart_svg(state["parts"], load_baseline(args.baseline)))
    if "final" not in state:
        bench.log("full store: cold start, suite, export")
        state["final"] = final_steps(args, store, work)
        save()
    if "store_alloc_bytes" not in state["final"]:  # runs before it was recorded
        state["final"]["store_alloc_bytes"] = bench.du_bytes(store)[1]
        save()
    Path(args.results).write_text(report(args, state))
    bench.log(f"report: {args.results}")
    print(report(args, state))
    return 0


if __name__ == "__main__":
    sys.exit(main())
