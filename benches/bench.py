#!/usr/bin/env python3
"""epistore benchmark (issue 4): ingest, cold start, metric suite and export against
an I/O floor and a hand-written DuckDB baseline over the raw package files.

One command:

    pip install duckdb            # the only dependency (DuckDB >= 1.3; tested with 2.0.1)
    python3 benches/bench.py --epistore /work/target-release/release/epistore \
        --sizes 10000,100000 [--sizes-large 1000000] --work /tmp/epistore-bench

For each population size N it

  a. generates a population with `EPISTORE synth --episodes N --out DIR --seed 1`
     (when the binary has no `synth` yet: copies of datasets/login-validation with the
     manifest `episode`/`seed` changed so every package is a distinct episode);
  b. measures an I/O floor: every package file read once (walk + open + read), twice:
     on --threads threads (one per core) and on --io-threads threads (default
     max(8, 4 x cores), what `epistore ingest` reads packages with: a deep queue of
     reads makes a cold virtual disk faster); the floor is the faster of the two.
     The page cache cannot be dropped without root, so by default (--cache cold)
     every file's pages are dropped with posix_fadvise(DONTNEED) before each floor,
     the ingest and each DuckDB load ("cold-ish": directory entries and inodes stay
     cached), and the floor is read once more warm; --cache warm leaves the cache alone;
  c. times `EPISTORE --store S ingest --quiet --format json DIR` into a fresh store:
     episodes/s, MB/s, store size (du of the store incl. columnar/) against raw bytes;
  d. times a cold start: `EPISTORE --store S sql "SELECT count(*) FROM episodes"`;
  e. times the metric suite: `EPISTORE --store S sql --format csv --file suite.sql`,
     suite.sql = `SELECT * FROM <view>;` for each view of docs/metrics.md §H, wall time
     with process start, run twice, best kept;
  f. times an export of the biggest table:
     `EPISTORE --store S sql --format csv "SELECT * FROM actions" > /dev/null` and
     `EPISTORE --store S export --table actions --format parquet --out WORK/actions.parquet --quiet`;
  g. DuckDB: load = glob the tree, read every manifest, outcome and trace file into
     tables of a fresh DuckDB database and derive revisions and posture
     (benches/duckdb_metrics.sql, sections list + reader + load + derive), then the
     same suite over the loaded tables (twice, best kept). Readers (--duckdb-readers),
     each in its own database: `read_text` + `from_json` on --threads threads (text),
     the same on --io-threads threads (text_io) and `read_json(..., filename = true)`
     on --threads threads (json); read_json pays a large per-file cost on small files;
  h. cross-checks every metric view of epistore against DuckDB's numerically (per
     view: rows missing on either side and cells that differ beyond 1e-9 relative);
  i. prints Markdown tables with times and ratios and writes them, with the machine
     description and the exact command, to benches/results.md (raw numbers in
     WORK/results.json).

Other options: --population DIR benchmarks an existing folder of packages instead of
generating one; --keep keeps stores and DuckDB databases; --duckdb-db memory;
--report-from WORK/results.json rewrites the report of an earlier or interrupted run.

Every step has a timeout (--timeout-base + --timeout-per-episode * N seconds); a step
that times out or fails is reported as such and the dependent steps are skipped.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import json
import math
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DUCKDB_SQL = HERE / "duckdb_metrics.sql"
DATASET = REPO / "datasets" / "login-validation"

# docs/metrics.md §H, in the contract's order, with the columns that identify a row.
VIEWS = {
    "cell_metrics": ["model", "harness_level", "task"],
    "label_shares": ["model", "harness_level", "task", "label"],
    "posture_shares": ["model", "harness_level", "task", "posture"],
    "revision_correctness": ["model", "harness_level", "task", "revision"],
    "revision_transitions": ["model", "harness_level", "task"],
    "verifier_stats": ["verifier"],
    "verifier_pairs": ["verifier_i", "verifier_j"],
    "localisation": ["model", "harness_level", "task"],
}
SUITE_SQL = "".join(f"SELECT * FROM {v};\n" for v in VIEWS)

T0 = time.monotonic()
CORES = os.cpu_count() or 1
# What `epistore ingest` reads and prepares packages on (EPISTORE_INGEST_THREADS overrides).
IO_THREADS = max(8, 4 * CORES)


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:8.1f}s] {msg}", flush=True)


class StepFailed(Exception):
    pass


# ------------------------------------------------------------------------------------
# helpers


def run(cmd: list[str], timeout: float, stdout=subprocess.DEVNULL, what: str = "") -> tuple[float, subprocess.CompletedProcess]:
    """Runs cmd, returns (wall seconds, completed process); raises StepFailed on timeout."""
    log(f"  $ {shlex.join(cmd)}" + (f"  > {what}" if what else ""))
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise StepFailed(f"timed out after {timeout:.0f} s")
    elapsed = time.perf_counter() - start
    return elapsed, proc


def check_rc(proc: subprocess.CompletedProcess, ok=(0,)) -> None:
    if proc.returncode not in ok:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        raise StepFailed(f"exit code {proc.returncode}: " + " | ".join(err[-5:]))


def du_bytes(path: Path) -> tuple[int, int]:
    """(apparent bytes, allocated bytes) of every file under path."""
    apparent = allocated = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            st = os.lstat(os.path.join(root, f))
            apparent += st.st_size
            allocated += st.st_blocks * 512
    return apparent, allocated


def package_dirs(root: Path) -> list[str]:
    """Package directories (holding manifest.json; the outermost wins), name order."""
    out = []

    def walk(d: str) -> None:
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            return
        if any(e.name == "manifest.json" and e.is_file(follow_symlinks=False) for e in entries):
            out.append(d)
            return
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                walk(e.path)

    walk(str(root))
    return out


def files_of(pkg: str) -> list[str]:
    out = []
    for root, _dirs, files in os.walk(pkg):
        out.extend(os.path.join(root, f) for f in files)
    return out


def evict(root: Path, threads: int) -> float:
    """Drops the page-cache pages of every file under root (sync, then
    posix_fadvise(DONTNEED) per file; the kernel honours it for clean pages of regular
    files). Directory entries and inodes stay cached. Returns the seconds it took."""
    start = time.perf_counter()
    os.sync()

    def one(d: str) -> None:
        for f in os.listdir(d):
            p = os.path.join(d, f)
            try:
                fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                continue
            try:
                if os.path.isfile(p):
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            except OSError:
                pass
            finally:
                os.close(fd)

    dirs = [r for r, _d, _f in os.walk(root)]
    with concurrent.futures.ThreadPoolExecutor(threads) as ex:
        list(ex.map(one, dirs, chunksize=256))
    return time.perf_counter() - start


def fmt_s(x) -> str:
    if x is None:
        return "–"
    if isinstance(x, str):
        return x
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def fmt_ratio(x) -> str:
    return "–" if x is None or isinstance(x, str) else f"{x:.2f}×"


def fmt_num(x, digits=0) -> str:
    if x is None:
        return "–"
    return f"{x:,.{digits}f}"


def mb(x) -> float | None:
    return None if x is None else x / 1e6


def div(a, b):
    if a is None or b is None or isinstance(a, str) or isinstance(b, str) or b == 0:
        return None
    return a / b


# ------------------------------------------------------------------------------------
# steps


def has_synth(epistore: str) -> bool:
    p = subprocess.run([epistore, "synth", "--help"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return p.returncode == 0


def has_export(epistore: str) -> bool:
    p = subprocess.run([epistore, "export", "--help"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return p.returncode == 0


def fallback_population(n: int, out: Path) -> None:
    """Copies of the bundled packages (H0..H3 in turn), each with its own episode label
    and seed in manifest.json, so every copy is a distinct episode."""
    levels = sorted(p.name for p in DATASET.iterdir() if (p / "manifest.json").is_file())
    templates = {}
    for lv in levels:
        files = {}
        for f in files_of(str(DATASET / lv)):
            rel = os.path.relpath(f, DATASET / lv)
            files[rel] = Path(f).read_bytes()
        templates[lv] = files
    for i in range(n):
        lv = levels[i % len(levels)]
        seed = i // len(levels) + 1
        dest = out / lv / f"s{seed}"
        for rel, data in templates[lv].items():
            p = dest / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            if rel == "manifest.json":
                m = json.loads(data)
                m["episode"] = f"{m['task']['id']}/{lv}/seed-{seed}"
                m["seed"] = seed
                data = (json.dumps(m, indent=2) + "\n").encode()
            p.write_bytes(data)


def generate(args, n: int, scale: float, pop: Path, timeout: float, res: dict) -> None:
    marker = pop / ".bench-population.json"
    synth = has_synth(args.epistore)
    want = {"episodes": n, "seed": 1, "generator": "synth" if synth else "fallback"}
    if synth:
        want["output_scale"] = scale
    if pop.exists() and marker.exists() and not args.regenerate:
        try:
            if json.loads(marker.read_text()) == want:
                log(f"  reusing the population in {pop} ({want['generator']}; --regenerate to rebuild)")
                res["generator"] = want["generator"] + (f" (output scale {scale:g})" if synth else "") + ", reused"
                return
        except ValueError:
            pass
    if pop.exists():
        shutil.rmtree(pop)
    res["generator"] = want["generator"] + (f" (output scale {scale:g})" if synth else "")
    if want["generator"] == "synth":
        cmd = [args.epistore, "synth", "--episodes", str(n), "--out", str(pop), "--seed", "1", "--quiet"]
        if scale != 1.0:
            cmd[-1:-1] = ["--output-scale", repr(scale)]
        secs, proc = run(cmd, timeout)
        check_rc(proc)
    else:
        log(f"  `{args.epistore} synth` is not available: copying datasets/login-validation {n} times")
        start = time.perf_counter()
        pop.mkdir(parents=True)
        fallback_population(n, pop)
        secs = time.perf_counter() - start
    res["generate_s"] = secs
    # The marker lies beside the packages (not in one): it is neither a package nor read.
    marker.write_text(json.dumps(want))


def io_floor(pop: Path, threads: int, timeout: float, res: dict, key: str = "io_floor_s") -> None:
    """Walk the population and read every file of every package once."""
    deadline = time.monotonic() + timeout
    start = time.perf_counter()
    pkgs = package_dirs(pop)

    def read_pkg(pkg: str) -> tuple[int, int]:
        if time.monotonic() > deadline:
            raise StepFailed("timed out")
        nbytes = nfiles = 0
        for f in files_of(pkg):
            with open(f, "rb", buffering=0) as fh:
                while True:
                    chunk = fh.read(1 << 20)
                    if not chunk:
                        break
                    nbytes += len(chunk)
            nfiles += 1
        return nbytes, nfiles

    total_bytes = total_files = 0
    with concurrent.futures.ThreadPoolExecutor(threads) as ex:
        for b, f in ex.map(read_pkg, pkgs, chunksize=64):
            total_bytes += b
            total_files += f
    res[key] = time.perf_counter() - start
    res["packages"] = len(pkgs)
    res["raw_bytes"] = total_bytes
    res["raw_files"] = total_files


def io_floors(args, pop: Path, timeout: float, res: dict, step) -> None:
    """The I/O floor on --threads (io_floor_per_core_s) and on --io-threads threads
    (io_floor_io_threads_s), the population's pages dropped before each when the cache
    is cold; io_floor_s is the faster (the fastest plain read is the floor). `step`
    runs one measurement and records a failure."""
    cold = args.cache == "cold"
    runs = (("io floor (per core)", args.threads, "io_floor_per_core_s", "io_floor_per_core_threads"),
            ("io floor (io threads)", args.io_threads, "io_floor_io_threads_s", "io_floor_io_threads"))
    for name, threads, key, threads_key in runs:
        if cold:
            log(f"  dropped the population's cached pages in {evict(pop, args.threads):.1f} s")
        res[threads_key] = threads
        if step(name, io_floor, pop, threads, timeout, res, key):
            log(f"  {res['packages']:,} packages, {res['raw_files']:,} files, {res['raw_bytes'] / 1e6:.1f} MB "
                f"read in {res[key]:.2f} s on {threads} threads ({args.cache} cache)")
    floors = [res[k] for k in ("io_floor_per_core_s", "io_floor_io_threads_s") if k in res]
    if floors:
        res["io_floor_s"] = min(floors)
        log(f"  I/O floor {res['io_floor_s']:.2f} s (per core {fmt_s(res.get('io_floor_per_core_s'))} s, "
            f"{args.io_threads} threads {fmt_s(res.get('io_floor_io_threads_s'))} s)")


def ingest(args, pop: Path, store: Path, work: Path, timeout: float, res: dict) -> None:
    if store.exists():
        shutil.rmtree(store)
    out = work / "ingest.json"
    with open(out, "wb") as fh:
        secs, proc = run([args.epistore, "--store", str(store), "ingest", "--quiet", "--format", "json", str(pop)],
                         timeout, stdout=fh, what=str(out))
    res["ingest_s"] = secs
    res.update((f"ingest_{k}", v) for k, v in ingest_totals(out).items())
    if res.get("ingest_already_present"):
        log(f"  WARNING: {res['ingest_already_present']} package(s) already present (duplicates): "
            "DuckDB keys by directory and will count them again")
    if proc.returncode == 1 and res.get("ingest_rejected"):
        reasons = []
        with open(out, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if '"reason"' in line and "null" not in line:
                    reasons.append(line.strip())
                    if len(reasons) == 3:
                        break
        log(f"  WARNING: {res['ingest_rejected']} package(s) rejected, e.g. {reasons}")
    else:
        check_rc(proc)
    res["store_bytes"], res["store_alloc_bytes"] = du_bytes(store)
    col = store / "columnar"
    res["columnar_bytes"] = du_bytes(col)[0] if col.exists() else 0


def ingest_totals(report: Path) -> dict:
    """The totals of an `ingest --format json` report. The report lists every package
    (hundreds of MB at 10^6 episodes): the totals are read from its head instead of
    parsing it whole."""
    with open(report, "rb") as fh:
        head = fh.read(1 << 16).decode(errors="replace")
    out = {}
    for k in ("added", "already_present", "rejected", "bytes_read", "seconds", "columnar_seconds"):
        m = re.search(rf'"{k}"\s*:\s*([0-9.eE+-]+)', head)
        if m:
            out[k] = float(m.group(1)) if any(c in m.group(1) for c in ".eE") else int(m.group(1))
    return out


def cold_start(args, store: Path, timeout: float, res: dict) -> None:
    times = []
    for _ in range(3):
        secs, proc = run([args.epistore, "--store", str(store), "sql", "--format", "csv",
                          "SELECT count(*) FROM episodes"], timeout, stdout=subprocess.PIPE)
        check_rc(proc)
        times.append(secs)
        res["episodes_in_store"] = int(proc.stdout.decode().strip().splitlines()[-1])
    res["cold_start_first_s"] = times[0]
    res["cold_start_best_s"] = min(times)


def epistore_suite(args, store: Path, work: Path, timeout: float, res: dict) -> None:
    suite = work / "suite.sql"
    suite.write_text(SUITE_SQL)
    times = []
    for i in range(2):
        with open(work / f"suite-{i + 1}.csv", "wb") as fh:
            secs, proc = run([args.epistore, "--store", str(store), "sql", "--format", "csv", "--file", str(suite)],
                             timeout, stdout=fh, what=str(work / f"suite-{i + 1}.csv"))
        check_rc(proc)
        times.append(secs)
    res["suite_first_s"] = times[0]
    res["suite_best_s"] = min(times)


def export_actions(args, store: Path, timeout: float, res: dict) -> None:
    secs, proc = run([args.epistore, "--store", str(store), "sql", "--format", "csv", "SELECT * FROM actions"],
                     timeout, what="/dev/null")
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip()
        log(f"  csv export failed ({err}); timing --format json instead")
        res["export_note"] = f"csv failed: {err}; timed `--format json` instead"
        secs, proc = run([args.epistore, "--store", str(store), "sql", "--format", "json", "SELECT * FROM actions"],
                         timeout, what="/dev/null")
        check_rc(proc)
        res["export_format"] = "json"
    else:
        res["export_format"] = "csv"
    res["export_actions_s"] = secs


def remove_path(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    elif p.exists() or p.is_symlink():
        p.unlink()


def export_actions_parquet(args, store: Path, work: Path, timeout: float, res: dict) -> None:
    """`epistore export --table actions --format parquet` into a fresh file (export never
    overwrites), deleted again afterwards. Key export_actions_parquet_s."""
    if not has_export(args.epistore):
        res["export_note"] = "no `export` command in this binary: parquet export not timed"
        log("  no `export` command in this binary: parquet export not timed")
        return
    out = work / "actions.parquet"
    remove_path(out)
    try:
        secs, proc = run([args.epistore, "--store", str(store), "export", "--table", "actions", "--format", "parquet",
                          "--out", str(out), "--quiet"], timeout)
        check_rc(proc)
        res["export_actions_parquet_s"] = secs
        res["export_actions_parquet_bytes"] = du_bytes(out)[0] if out.is_dir() else out.stat().st_size
    finally:
        remove_path(out)


def epistore_views_json(args, store: Path, work: Path, timeout: float) -> dict[str, list[dict]]:
    """Every view as a list of row objects (NULL stays None), from one json run."""
    suite = work / "suite.sql"
    out = work / "suite.json"
    with open(out, "wb") as fh:
        _secs, proc = run([args.epistore, "--store", str(store), "sql", "--format", "json", "--file", str(suite)],
                          timeout, stdout=fh, what=str(out))
    check_rc(proc)
    text = out.read_text()
    dec = json.JSONDecoder()
    arrays, pos = [], 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        value, pos = dec.raw_decode(text, pos)
        arrays.append(value)
    if len(arrays) != len(VIEWS):
        raise StepFailed(f"expected {len(VIEWS)} JSON arrays from the suite, got {len(arrays)}")
    return dict(zip(VIEWS, arrays))


# DuckDB readers by name (result keys duck_<name>_*, database WORK/<N>/duckdb-<name>.db):
# what it reads the files with, its duckdb_metrics.sql reader section, and the argument
# holding its `SET threads` (--threads, one per core, or --io-threads).
READERS = {"text": "read_text + from_json", "text_io": "read_text + from_json", "json": "read_json"}
READER_SECTION = {"text": "reader_text", "text_io": "reader_text", "json": "reader_json"}
READER_THREADS = {"text": "threads", "text_io": "io_threads", "json": "threads"}


def reader_threads(args, reader: str) -> int | None:
    """DuckDB's `SET threads` for a reader: --io-threads for text_io, --threads otherwise."""
    return getattr(args, READER_THREADS[reader], None)


def reader_label(args, reader: str) -> str:
    n = reader_threads(args, reader)
    if n:
        return f"{READERS[reader]}, {n} threads"
    return READERS[reader] + (", --io-threads threads" if READER_THREADS[reader] == "io_threads" else "")


class DuckRunner:
    """Runs benches/duckdb_metrics.sql section by section in one DuckDB database."""

    def __init__(self, db_path: str, threads: int):
        import duckdb  # noqa: PLC0415 (imported here so --help works without it)

        self.duckdb = duckdb
        self.con = duckdb.connect(db_path)
        self.con.execute(f"SET threads = {threads}")
        text = DUCKDB_SQL.read_text()
        parts = re.split(r"^-- @section (\w+)\s*$", text, flags=re.M)
        self.sections = {name: body for name, body in zip(parts[1::2], parts[2::2])}
        for s in ("list", "reader_text", "reader_json", "load", "derive", "views", "suite"):
            if s not in self.sections:
                raise StepFailed(f"{DUCKDB_SQL} has no `-- @section {s}`")

    def _guard(self, timeout: float):
        timer = threading.Timer(timeout, self.con.interrupt)
        timer.daemon = True
        timer.start()
        return timer

    def run_section(self, name: str, timeout: float) -> float:
        timer = self._guard(timeout)
        start = time.perf_counter()
        try:
            for stmt in self.duckdb.extract_statements(self.sections[name]):
                self.con.execute(stmt).fetchall()
        except self.duckdb.InterruptException:
            raise StepFailed(f"timed out after {timeout:.0f} s")
        finally:
            timer.cancel()
        return time.perf_counter() - start

    def suite(self, timeout: float) -> tuple[float, dict[str, list[dict]]]:
        timer = self._guard(timeout)
        out = {}
        start = time.perf_counter()
        try:
            stmts = self.duckdb.extract_statements(self.sections["suite"])
            for view, stmt in zip(VIEWS, stmts):
                cur = self.con.execute(stmt)
                cols = [d[0] for d in cur.description]
                out[view] = [dict(zip(cols, row)) for row in cur.fetchall()]
        except self.duckdb.InterruptException:
            raise StepFailed(f"timed out after {timeout:.0f} s")
        finally:
            timer.cancel()
        return time.perf_counter() - start, out

    def close(self) -> None:
        self.con.close()


def duckdb_steps(args, reader: str, pop: Path, work: Path, timeout: float, res: dict, threads: int) -> dict:
    """Load with one reader into a fresh database on `threads` threads, then the suite
    twice. Keys duck_<reader>_*."""
    db = ":memory:"
    if args.duckdb_db == "file":
        dbfile = work / f"duckdb-{reader}.db"
        for p in (dbfile, Path(str(dbfile) + ".wal")):
            if p.exists():
                p.unlink()
        db = str(dbfile)
    k = f"duck_{reader}_"
    res[k + "threads"] = threads
    runner = DuckRunner(db, threads)
    try:
        quoted = str(pop).replace("'", "''")
        runner.con.execute(f"SET VARIABLE root = '{quoted}'").fetchall()
        res[k + "list_s"] = runner.run_section("list", timeout)
        runner.run_section(READER_SECTION[reader], timeout)
        log(f"  duckdb/{reader}: listed the tree in {res[k + 'list_s']:.2f} s; load ({reader_label(args, reader)})")
        res[k + "read_s"] = runner.run_section("load", timeout)
        log(f"  duckdb/{reader}: read {res[k + 'read_s']:.2f} s; derive (revisions, posture)")
        res[k + "derive_s"] = runner.run_section("derive", timeout)
        if args.duckdb_db == "file":
            runner.con.execute("CHECKPOINT").fetchall()
        res[k + "load_s"] = res[k + "list_s"] + res[k + "read_s"] + res[k + "derive_s"]
        res[k + "episodes"] = runner.con.execute("SELECT count(*) FROM episodes").fetchone()[0]
        if args.duckdb_db == "file":
            res[k + "db_bytes"] = os.path.getsize(db)
        runner.run_section("views", timeout)
        times, results = [], {}
        for i in range(2):
            secs, results = runner.suite(timeout)
            times.append(secs)
        res[k + "suite_first_s"] = times[0]
        res[k + "suite_best_s"] = min(times)
        log(f"  duckdb/{reader}: load {res[k + 'load_s']:.2f} s ({res[k + 'episodes']:,} episodes), "
            f"suite {times[0]:.2f} s, best {min(times):.2f} s")
        return results
    finally:
        runner.close()


def close(a, b, rel=1e-9, abs_=1e-12) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, float) and math.isnan(a) or isinstance(b, float) and math.isnan(b):
            return False
        return abs(a - b) <= max(abs_, rel * max(abs(a), abs(b)))
    return str(a) == str(b)


def cross_check(ep: dict[str, list[dict]], dk: dict[str, list[dict]], res: dict, work: Path, reader: str) -> None:
    """Per view: rows on one side only, and cells that differ (beyond the tolerance)."""
    summary = {}
    lines = []
    for view, keys in VIEWS.items():
        a = {tuple(r.get(k) for k in keys): r for r in ep.get(view, [])}
        b = {tuple(r.get(k) for k in keys): r for r in dk.get(view, [])}
        only_ep = sorted(set(a) - set(b), key=str)
        only_dk = sorted(set(b) - set(a), key=str)
        bad_cells = 0
        cols = list(dk[view][0].keys()) if dk.get(view) else list(ep[view][0].keys()) if ep.get(view) else []
        if ep.get(view) and dk.get(view) and list(ep[view][0].keys()) != cols:
            bad_cells += 1
            lines.append(f"{view}: columns differ: epistore {list(ep[view][0].keys())} duckdb {cols}")
        # Informational: are epistore's rows in key order (the views end in ORDER BY)?
        ordered = [tuple(r.get(k) for k in keys) for r in ep.get(view, [])] == [k for k in b if k in a]
        for k in sorted(set(a) & set(b), key=str):
            for c in cols:
                if c in keys:
                    continue
                if c not in a[k]:
                    bad_cells += 1
                    lines.append(f"{view} {k}: column {c} missing in epistore")
                    continue
                if not close(a[k][c], b[k].get(c)):
                    bad_cells += 1
                    lines.append(f"{view} {k}: {c}: epistore {a[k][c]!r} duckdb {b[k].get(c)!r}")
        for k in only_ep:
            lines.append(f"{view} {k}: row only in epistore")
        for k in only_dk:
            lines.append(f"{view} {k}: row only in duckdb")
        summary[view] = {"rows_epistore": len(a), "rows_duckdb": len(b), "only_epistore": len(only_ep),
                         "only_duckdb": len(only_dk), "cells_differ": bad_cells,
                         "epistore_rows_in_duckdb_order": ordered}
    res["cross_check"] = summary
    res["mismatches"] = sum(v["only_epistore"] + v["only_duckdb"] + v["cells_differ"] for v in summary.values())
    path = work / f"cross-check-{reader}.txt"
    path.write_text("\n".join(lines) + ("\n" if lines else ""))
    for view, s in summary.items():
        flag = "ok" if s["only_epistore"] + s["only_duckdb"] + s["cells_differ"] == 0 else "MISMATCH"
        log(f"  cross-check {view:21s} rows {s['rows_epistore']:>6} / {s['rows_duckdb']:>6}  "
            f"only-epistore {s['only_epistore']}  only-duckdb {s['only_duckdb']}  cells differ {s['cells_differ']}  {flag}"
            + ("" if s["epistore_rows_in_duckdb_order"] else "  (epistore rows not in key order)"))
    if lines:
        log(f"  first differences (all in {path}):")
        for line in lines[:10]:
            log(f"    {line}")


# ------------------------------------------------------------------------------------
# report


def machine() -> dict:
    info = {"nproc": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version()}
    try:
        info["nproc"] = int(subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip())
    except (OSError, ValueError):
        pass
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                info["memory_gib"] = round(int(line.split()[1]) / 1024 / 1024, 1)
                break
    except OSError:
        pass
    try:
        import duckdb  # noqa: PLC0415

        info["duckdb"] = duckdb.__version__
    except ImportError:
        info["duckdb"] = "not installed"
    return info


def floor_per_core(r: dict):
    """The per-core I/O floor; results of runs before the --io-threads floor have only
    io_floor_s, which was measured per core."""
    if "io_floor_per_core_s" in r or "io_floor_io_threads_s" in r:
        return r.get("io_floor_per_core_s")
    return r.get("io_floor_s")


def fastest_duck_load(r: dict) -> tuple[str, float] | None:
    """(reader, load seconds) of the DuckDB reader that loaded fastest, if any did."""
    loads = [(r[f"duck_{x}_load_s"], x) for x in READERS if isinstance(r.get(f"duck_{x}_load_s"), (int, float))]
    if not loads:
        return None
    secs, reader = min(loads)
    return reader, secs


def duck_from_raw(r: dict) -> tuple[str, float] | None:
    """(reader, load + best suite seconds) of the fastest-loading DuckDB reader among
    those that also ran the suite: DuckDB answering the metrics from the raw files."""
    both = [(r[f"duck_{x}_load_s"], r[f"duck_{x}_load_s"] + r[f"duck_{x}_suite_best_s"], x) for x in READERS
            if isinstance(r.get(f"duck_{x}_load_s"), (int, float))
            and isinstance(r.get(f"duck_{x}_suite_best_s"), (int, float))]
    if not both:
        return None
    _load, secs, reader = min(both)
    return reader, secs


def fmt_ratio_of(x, reader: str | None) -> str:
    return fmt_ratio(x) + (f" ({reader})" if x is not None and reader else "")


SUITE_TARGET_N = 100_000


def targets(r: dict) -> list[tuple[str, str, str]]:
    """(target, measured, holds) for one size; 'not measured' when a figure is missing."""
    def holds(x, ok) -> str:
        return "not measured" if x is None else ("yes" if ok(x) else "no")

    out = []
    x = div(r.get("ingest_s"), r.get("io_floor_s"))
    out.append(("ingest ≤ 4× I/O floor (ingest / I/O floor)",
                "not measured" if x is None else f"{fmt_ratio(x)} ({fmt_s(r['ingest_s'])} s / {fmt_s(r['io_floor_s'])} s)",
                holds(x, lambda v: v <= 4)))
    fast = fastest_duck_load(r)
    x = div(fast[1], r.get("ingest_s")) if fast else None
    out.append(("ingest ≥ 4× faster than DuckDB loading the same files (DuckDB fastest load / ingest)",
                "not measured" if x is None else f"{fmt_ratio(x)} ({fast[0]}: {fmt_s(fast[1])} s / {fmt_s(r['ingest_s'])} s)",
                holds(x, lambda v: v >= 4)))
    x = r.get("suite_best_s")
    if not isinstance(x, (int, float)):
        x = None
    if r["n"] != SUITE_TARGET_N:
        out.append((f"metric suite at N = {SUITE_TARGET_N:,} < 1 s (epistore suite, best of 2)",
                    "not measured" if x is None else f"{fmt_s(x)} s at N = {r['n']:,}",
                    f"n/a (target at N = {SUITE_TARGET_N:,})"))
    else:
        out.append((f"metric suite at N = {SUITE_TARGET_N:,} < 1 s (epistore suite, best of 2)",
                    "not measured" if x is None else f"{fmt_s(x)} s (first {fmt_s(r.get('suite_first_s'))} s)",
                    holds(x, lambda v: v < 1)))
    raw = duck_from_raw(r)
    x = div(raw[1], r.get("suite_best_s")) if raw else None
    out.append(("suite ≥ 20× faster than DuckDB from the raw files "
                "(DuckDB fastest load + its best suite / epistore suite best)",
                "not measured" if x is None else f"{fmt_ratio(x)} ({raw[0]}: {fmt_s(raw[1])} s / {fmt_s(r['suite_best_s'])} s)",
                holds(x, lambda v: v >= 20)))
    x = div(r.get("store_bytes"), r.get("raw_bytes"))
    out.append(("store size ≤ 0.35× raw bytes (store size / raw bytes)",
                "not measured" if x is None else f"{x:.3f}× ({fmt_num(mb(r['store_bytes']), 1)} MB / "
                                                 f"{fmt_num(mb(r['raw_bytes']), 1)} MB)",
                holds(x, lambda v: v <= 0.35)))
    return out


def report(args, results: list[dict], mach: dict, command: str) -> str:
    threads = getattr(args, "threads", None)
    io_threads = getattr(args, "io_threads", None)
    t_label = f"{threads} threads" if threads else "`--threads` threads"
    io_label = f"{io_threads} threads" if io_threads else "`--io-threads` threads"
    t_long = f"{threads} threads (`--threads`, one per core)" if threads else "`--threads` threads (one per core)"
    io_long = (f"{io_threads} threads (`--io-threads`, default" if io_threads
               else "`--io-threads` threads (default")
    out = []
    out.append("# epistore benchmark results\n")
    out.append(f"Generated {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} by `benches/bench.py`.\n")
    out.append("Command:\n")
    out.append(f"```sh\n{command}\n```\n")
    out.append("Machine: "
               f"{mach.get('nproc')} CPUs (`nproc`), {mach.get('memory_gib')} GiB memory, "
               f"CPU `{mach.get('cpu', '?')}`, Linux {mach.get('kernel')}, Python {mach.get('python')}, "
               f"DuckDB {mach.get('duckdb')}, epistore `{mach.get('epistore_version', '?')}` "
               f"(`{args.epistore}`). Work directory `{args.work}`.\n")
    out.append("## epistore (seconds, wall clock, including process start)\n")
    head = ["N", "generator", "packages", "raw MB", "files", "I/O floor",
            f"I/O floor ({t_label} / {io_label})", "ingest", "episodes/s", "MB/s",
            "of which columnar", "store MB", "cold start (first / best of 3)", "suite (first / best of 2)",
            "export actions (csv / parquet)"]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---|" * len(head))
    for r in results:
        row = [fmt_num(r["n"]), r.get("generator", "–"), fmt_num(r.get("packages")), fmt_num(mb(r.get("raw_bytes")), 1),
               fmt_num(r.get("raw_files")), fmt_s(r.get("io_floor_s")),
               f"{fmt_s(floor_per_core(r))} / {fmt_s(r.get('io_floor_io_threads_s'))}",
               fmt_s(r.get("ingest_s")),
               fmt_num(div(r.get("ingest_added", r.get("packages")), r.get("ingest_s"))),
               fmt_num(div(mb(r.get("raw_bytes")), r.get("ingest_s")), 1),
               fmt_s(r.get("ingest_columnar_seconds")),
               fmt_num(mb(r.get("store_bytes")), 1),
               f"{fmt_s(r.get('cold_start_first_s'))} / {fmt_s(r.get('cold_start_best_s'))}",
               f"{fmt_s(r.get('suite_first_s'))} / {fmt_s(r.get('suite_best_s'))}",
               fmt_s(r.get("export_actions_s")) + (" (json)" if r.get("export_format") == "json" else "")
               + f" / {fmt_s(r.get('export_actions_parquet_s'))}"]
        out.append("| " + " | ".join(row) + " |")
    out.append("")
    out.append("## DuckDB over the raw files (seconds)\n")
    head = ["N", "reader", "threads", "list (glob)", "read", "derive", "load total", "db MB", "suite (first / best of 2)",
            "mismatches vs epistore (8 views)"]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---|" * len(head))
    for r in results:
        for reader in READERS:
            k = f"duck_{reader}_"
            if k + "list_s" not in r and f"duckdb {reader}" not in r.get("errors", {}):
                continue
            mism = r.get(k + "mismatches")
            row = [fmt_num(r["n"]), f"{reader}: {READERS[reader]}", fmt_num(r.get(k + "threads", reader_threads(args, reader))),
                   fmt_s(r.get(k + "list_s")), fmt_s(r.get(k + "read_s")),
                   fmt_s(r.get(k + "derive_s")), fmt_s(r.get(k + "load_s")), fmt_num(mb(r.get(k + "db_bytes")), 1),
                   f"{fmt_s(r.get(k + 'suite_first_s'))} / {fmt_s(r.get(k + 'suite_best_s'))}",
                   "–" if mism is None else str(mism)]
            out.append("| " + " | ".join(row) + " |")
    out.append("")
    out.append("## Ratios\n")
    head = ["N", "ingest / I/O floor", "store size / raw bytes", "columnar / raw bytes"]
    for reader in READERS:
        label = reader_label(args, reader)
        head += [f"DuckDB load / ingest ({label})", f"DuckDB suite / epistore suite, best ({label})"]
    head += ["DuckDB load / ingest (fastest DuckDB reader)",
             "DuckDB from raw (fastest load + its best suite) / epistore suite best"]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---|" * len(head))
    for r in results:
        row = [fmt_num(r["n"]), fmt_ratio(div(r.get("ingest_s"), r.get("io_floor_s"))),
               fmt_ratio(div(r.get("store_bytes"), r.get("raw_bytes"))),
               fmt_ratio(div(r.get("columnar_bytes"), r.get("raw_bytes")))]
        for reader in READERS:
            k = f"duck_{reader}_"
            row += [fmt_ratio(div(r.get(k + "load_s"), r.get("ingest_s"))),
                    fmt_ratio(div(r.get(k + "suite_best_s"), r.get("suite_best_s")))]
        fast, raw = fastest_duck_load(r), duck_from_raw(r)
        row += [fmt_ratio_of(div(fast[1], r.get("ingest_s")) if fast else None, fast and fast[0]),
                fmt_ratio_of(div(raw[1], r.get("suite_best_s")) if raw else None, raw and raw[0])]
        out.append("| " + " | ".join(row) + " |")
    out.append("")
    out.append("## Targets\n")
    for r in results:
        out.append(f"N = {fmt_num(r['n'])}:\n")
        out.append("| target | measured | holds |")
        out.append("|---|---|---|")
        for target, measured, ok in targets(r):
            out.append(f"| {target} | {measured} | {ok} |")
        out.append("")
    failures = [(r["n"], k, v) for r in results for k, v in r.get("errors", {}).items()]
    if failures:
        out.append("## Steps that failed or timed out\n")
        for n, k, v in failures:
            out.append(f"- N = {n:,}: {k}: {v}")
        out.append("")
    out.append("## Notes\n")
    floor_note = f"""every package file walked and read once by Python (walk + open +
  read), measured twice: on {t_long} and on {io_long}
  max(8, 4 × cores): what `epistore ingest` reads and prepares
  packages on, since many reads in flight make a cold virtual disk faster;
  `EPISTORE_INGEST_THREADS` overrides epistore's). "I/O floor" is the faster of the two
  (the fastest plain read of the files)"""
    old_floor = "" if any("io_floor_per_core_s" in r or "io_floor_io_threads_s" in r for r in results) else """
  This run predates the second measurement: its I/O floor was read on `--threads`
  threads (one per core) only."""
    if args.cache == "cold":
        out.append(f"""- **Cache**: cold. Before each I/O floor, the ingest and each DuckDB load the
  population's pages are dropped from the page cache (`sync`, then
  `posix_fadvise(DONTNEED)` on every file; the whole cache cannot be dropped without
  root, and directory entries and inodes stay cached, so this is "cold-ish"; a host
  cache below a virtual disk is out of reach); the store's pages are dropped before the
  first cold-start query and before the first suite run. "first" runs are cold, "best"
  runs warm.
- **I/O floor**: {floor_note}, each on the cold-ish cache; the warm re-read (on
  `--threads`) is in results.json (`io_floor_warm_s`; the two cold floors are
  `io_floor_per_core_s` and `io_floor_io_threads_s`).{old_floor}
""")
    else:
        out.append(f"""- **Cache**: warm. Nothing is evicted: the files were just generated or read, so
  the I/O floor and every step run on a warm page cache.
- **I/O floor**: {floor_note}; both on the warm cache.{old_floor}
""")
    out.append("""- **ingest**: `epistore ingest --quiet --format json` into a fresh store; episodes/s and
  MB/s are over the wall time ("of which columnar": the `columnar_seconds` the ingest
  reports for building the Parquet segments), raw MB over every file of every package. Store size is
  the apparent size of every file under the store directory, `columnar/` included.
- **cold start**: `epistore sql "SELECT count(*) FROM episodes"` after ingest, first run
  and best of 3 (a new process each time: open the store, register tables and views,
  answer).
- **suite**: `epistore sql --format csv --file suite.sql` with `SELECT * FROM <view>;`
  for the 8 views of metrics-v1 H; wall time including process start; first and best of 2.
- **export actions**: csv: `epistore sql --format csv "SELECT * FROM actions" > /dev/null`
  (when csv fails, e.g. a List column refused by the CSV writer, the same query with
  `--format json` is timed and marked (json)); parquet: `epistore export --table actions
  --format parquet --out WORK/<N>/actions.parquet --quiet` into a fresh file, deleted
  afterwards (size in results.json, `export_actions_parquet_bytes`). Both right after the
  suite, on whatever of the store the page cache holds then.
- **DuckDB load**: `benches/duckdb_metrics.sql` sections `list` (glob the tree),
  `load` (manifest, outcome and the seven traces into typed tables, only the fields the
  metrics need; no validation, no hashing, no content store) and `derive`
  (observed/bound/final revisions, posture), into a fresh """ + ("file database" if args.duckdb_db == "file" else "in-memory database") + f"""
  per reader{', each load after the population' + chr(39) + 's pages were dropped (cold cache)' if args.cache == 'cold' else ''}. Readers:
  `text`: `read_text` + `from_json` with `SET threads` = {t_label} (one per core);
  `text_io`: the same SQL with `SET threads` = {io_label} (`--io-threads`, as many as
  epistore's ingest reads with, in case more threads load a cold cache faster for DuckDB
  too); `json`: `read_json(..., filename = true)` (what the issue asked for) on
  {t_label}. DuckDB's read_json pays a large per-file cost on many small files, so the
  read_text readers are the stronger baseline; the "fastest DuckDB reader" columns take,
  per size, whichever loaded fastest.
  **DuckDB suite**: the same 8 views over those tables in the open session, results
  fetched into Python, first and best of 2 (no process start, tables already in memory
  or in the database's buffer pool). **DuckDB from raw** = the fastest reader's load
  plus its best suite: the time DuckDB needs to answer the metrics starting from the
  package files.
- **mismatches**: rows present on one side only plus cells that differ beyond 1e-9
  relative, over all 8 views (epistore `--format json` vs DuckDB); details in
  `WORK/<N>/cross-check-<reader>.txt`.
- **Targets** (issue 4; the Targets tables above check them per size, "not measured"
  where a figure is missing):
  - ingest within 4× of the I/O floor: ingest / I/O floor ≤ 4;
  - ingest at least 4× faster than DuckDB loading the same files: DuckDB fastest load /
    ingest ≥ 4;
  - the metric suite at N = 100,000 in under 1 s: epistore suite, best of 2 (process
    start included), < 1 s;
  - the metric suite at least 20× faster than DuckDB answering the same metrics from the
    raw files: DuckDB from raw (fastest load + its best suite) / epistore suite best ≥ 20;
  - store size at most 0.35× the raw bytes: store size / raw bytes ≤ 0.35.
""")
    return "\n".join(out)


# ------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Needs `pip install duckdb` (DuckDB >= 1.3).")
    ap.add_argument("--epistore", help="the epistore binary (required)")
    ap.add_argument("--sizes", default="10000,100000", help="population sizes, comma separated")
    ap.add_argument("--sizes-large", default="", help="more sizes, run after --sizes (e.g. 1000000)")
    ap.add_argument("--output-scale", type=float, default=1.0,
                    help="synth --output-scale for --sizes (1: tool logs of 10-200 KB as in real runs)")
    ap.add_argument("--output-scale-large", type=float, default=0.05,
                    help="synth --output-scale for --sizes-large (default 0.05, as synth suggests for 10^6 episodes)")
    ap.add_argument("--work", default="/tmp/epistore-bench", help="work directory (populations, stores, DuckDB db)")
    ap.add_argument("--results", default=str(HERE / "results.md"), help="Markdown report (default benches/results.md)")
    ap.add_argument("--duckdb-db", choices=["file", "memory"], default="file",
                    help="DuckDB database: a file in the work directory (default) or in memory")
    ap.add_argument("--threads", type=int, default=CORES,
                    help=f"threads for the per-core I/O floor and DuckDB (readers text, json; default {CORES}, one per core)")
    ap.add_argument("--io-threads", type=int, default=IO_THREADS,
                    help=f"threads for the second I/O floor and DuckDB reader text_io (default max(8, 4 x cores) = "
                         f"{IO_THREADS}, what `epistore ingest` reads packages on; EPISTORE_INGEST_THREADS changes "
                         "epistore's, not this)")
    ap.add_argument("--timeout-base", type=float, default=300.0, help="seconds every step may take, plus ...")
    ap.add_argument("--timeout-per-episode", type=float, default=0.01, help="... this many seconds per episode")
    ap.add_argument("--population", default="",
                    help="benchmark this existing folder of packages instead of generating (--sizes ignored)")
    ap.add_argument("--regenerate", action="store_true", help="regenerate populations even when one of that size exists")
    ap.add_argument("--cache", choices=["cold", "warm"], default="cold",
                    help="cold (default): drop the files' cached pages (sync + posix_fadvise DONTNEED) before the "
                         "I/O floor, the ingest, the DuckDB loads and before epistore's first query and suite run; "
                         "warm: leave the cache alone (files were just written or read)")
    ap.add_argument("--duckdb-readers", default="text,text_io,json",
                    help="DuckDB readers to time, comma separated: text (read_text + from_json, --threads threads), "
                         "text_io (the same on --io-threads threads; text-io is accepted too), json (read_json, "
                         "--threads threads); '' for none")
    ap.add_argument("--keep", action="store_true", help="keep the stores and DuckDB databases (default: delete after each size)")
    ap.add_argument("--report-from", default="",
                    help="only rewrite the Markdown report from a WORK/results.json of an earlier (possibly "
                         "interrupted) run; --epistore is then not needed")
    args = ap.parse_args()

    if args.report_from:
        saved = json.loads(Path(args.report_from).read_text())
        settings = saved.get("settings", {})
        args.epistore = settings.get("epistore", args.epistore or "?")
        args.work = settings.get("work", str(Path(args.report_from).resolve().parent))
        args.cache = settings.get("cache", args.cache)
        args.duckdb_db = settings.get("duckdb_db", args.duckdb_db)
        # Thread counts of the run, when it recorded them (older results.json did not).
        args.threads = settings.get("threads")
        args.io_threads = settings.get("io_threads")
        text = report(args, saved["results"], saved["machine"], saved["command"])
        print(text)
        Path(args.results).write_text(text)
        return 0
    if not args.epistore:
        ap.error("--epistore is required")

    args.epistore = str(Path(args.epistore).resolve())
    if not os.access(args.epistore, os.X_OK):
        print(f"error: {args.epistore} is not an executable", file=sys.stderr)
        return 2
    if args.threads < 1 or args.io_threads < 1:
        ap.error("--threads and --io-threads must be at least 1")
    readers = [r.strip().replace("-", "_") for r in args.duckdb_readers.split(",") if r.strip()]
    for r in readers:
        if r not in READERS:
            print(f"error: unknown DuckDB reader {r!r} ({', '.join(READERS)})", file=sys.stderr)
            return 2
    if readers:
        try:
            import duckdb  # noqa: F401, PLC0415
        except ImportError:
            print("error: the `duckdb` Python package is missing: pip install duckdb", file=sys.stderr)
            return 2
    sizes = [(int(s.replace("_", "")), args.output_scale) for s in args.sizes.split(",") if s.strip()]
    sizes += [(int(s.replace("_", "")), args.output_scale_large) for s in args.sizes_large.split(",") if s.strip()]
    given = Path(args.population).resolve() if args.population else None
    if given is not None:
        if not given.is_dir():
            print(f"error: {given} is not a directory", file=sys.stderr)
            return 2
        sizes = [(len(package_dirs(given)), 1.0)]
    work_root = Path(args.work).resolve()
    work_root.mkdir(parents=True, exist_ok=True)
    command = shlex.join([Path(sys.executable).name, os.path.relpath(__file__, Path.cwd())] + sys.argv[1:])
    mach = machine()
    mach["epistore_version"] = subprocess.run([args.epistore, "--version"], capture_output=True,
                                              text=True).stdout.strip()
    log(f"machine: {mach}")
    log(f"sizes (episodes, synth output scale): {sizes}; work: {work_root}")
    free = shutil.disk_usage(work_root).free
    log(f"free space in the work directory: {free / 1e9:.1f} GB")

    results = []
    for n, scale in sizes:
        timeout = args.timeout_base + args.timeout_per_episode * n
        work = work_root / str(n)
        work.mkdir(parents=True, exist_ok=True)
        pop, store = (given or work / "population"), work / "store"
        res: dict = {"n": n, "errors": {}}
        results.append(res)
        log(f"== N = {n:,} (timeout per step {timeout:.0f} s)")

        def step(name: str, fn, *a) -> bool:
            log(f"-- {name}")
            try:
                fn(*a)
                return True
            except StepFailed as e:
                log(f"  {name} FAILED: {e}")
                res["errors"][name] = str(e)
                return False

        if given is not None:
            res["generator"] = f"given ({given})"
        elif not step("generate", generate, args, n, scale, pop, timeout, res):
            continue
        cold = args.cache == "cold"
        io_floors(args, pop, timeout, res, step)
        if cold and step("io floor (warm)", io_floor, pop, args.threads, timeout, res, "io_floor_warm_s"):
            log(f"  read again (warm cache, {args.threads} threads) in {res['io_floor_warm_s']:.2f} s")
        if cold:
            evict(pop, args.threads)
        free = shutil.disk_usage(work).free
        if res.get("raw_bytes") and free < 2 * res["raw_bytes"]:
            log(f"  WARNING: {free / 1e9:.1f} GB free for a store of a {res['raw_bytes'] / 1e9:.1f} GB population "
                "(plus the DuckDB databases): the steps below may run out of space")
        ok = step("ingest", ingest, args, pop, store, work, timeout, res)
        if ok:
            log(f"  ingest {res['ingest_s']:.2f} s: added {res.get('ingest_added')}, rejected {res.get('ingest_rejected')}; "
                f"store {res['store_bytes'] / 1e6:.1f} MB (columnar {res['columnar_bytes'] / 1e6:.1f} MB)")
            if cold:
                evict(store, args.threads)
            if step("cold start", cold_start, args, store, timeout, res):
                log(f"  cold start {res['cold_start_first_s']:.3f} s (best of 3: {res['cold_start_best_s']:.3f} s)")
            if cold:
                evict(store, args.threads)
            if step("suite", epistore_suite, args, store, work, timeout, res):
                log(f"  suite {res['suite_first_s']:.2f} s, best {res['suite_best_s']:.2f} s")
            if step("export actions", export_actions, args, store, timeout, res):
                log(f"  export actions ({res['export_format']}) {res['export_actions_s']:.2f} s")
            if step("export actions parquet", export_actions_parquet, args, store, work, timeout, res) \
                    and "export_actions_parquet_s" in res:
                log(f"  export actions (parquet) {res['export_actions_parquet_s']:.2f} s, "
                    f"{res['export_actions_parquet_bytes'] / 1e6:.1f} MB")
        ep_views = None
        if ok:
            log("-- epistore views as JSON (cross-check input, not timed)")
            try:
                ep_views = epistore_views_json(args, store, work, timeout)
            except StepFailed as e:
                res["errors"]["views json"] = str(e)
                log(f"  FAILED: {e}")
        for reader in readers:
            if cold:
                evict(pop, args.threads)
            log(f"-- duckdb ({reader_label(args, reader)})")
            dk_views = None
            try:
                dk_views = duckdb_steps(args, reader, pop, work, timeout, res, reader_threads(args, reader))
            except StepFailed as e:
                res["errors"][f"duckdb {reader}"] = str(e)
                log(f"  duckdb FAILED: {e}")
            except Exception as e:  # a DuckDB error: report it and go on
                res["errors"][f"duckdb {reader}"] = f"{type(e).__name__}: {e}"
                log(f"  duckdb FAILED: {type(e).__name__}: {e}")
            if ep_views is not None and dk_views is not None:
                log(f"-- cross-check epistore vs duckdb ({reader_label(args, reader)})")
                check = {}
                cross_check(ep_views, dk_views, check, work, reader)
                res[f"duck_{reader}_cross_check"] = check["cross_check"]
                res[f"duck_{reader}_mismatches"] = check["mismatches"]
                res["mismatches"] = res.get("mismatches", 0) + check["mismatches"]
                cm = check["cross_check"]["cell_metrics"]
                log(f"  cell_metrics mismatches: {cm['only_epistore'] + cm['only_duckdb'] + cm['cells_differ']}; "
                    f"all views: {check['mismatches']}")
        if not args.keep:
            for p in [store] + [work / f"duckdb-{r}.db{w}" for r in READERS for w in ("", ".wal")]:
                if p.is_dir():
                    shutil.rmtree(p)
                elif p.exists():
                    p.unlink()
        settings = {"epistore": args.epistore, "work": str(work_root), "cache": args.cache,
                    "duckdb_db": args.duckdb_db, "threads": args.threads, "io_threads": args.io_threads}
        (work_root / "results.json").write_text(json.dumps({"machine": mach, "command": command, "settings": settings,
                                                            "results": results}, indent=2, default=str))

    text = report(args, results, mach, command)
    print()
    print(text)
    Path(args.results).write_text(text)
    log(f"wrote {args.results} and {work_root / 'results.json'}")
    return 0 if all(not r["errors"] and not r.get("mismatches") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
