#!/usr/bin/env python3
"""Results into Python: the `epistore` package in-process vs Flight SQL vs files.

One command; prints a table and writes JSON:

    python3 benches/python_bench.py                      # 100,000 synthetic episodes
    python3 benches/python_bench.py --episodes 10000     # a quick run

On a synthetic population (`epistore synth --ingest`, made once and kept under
--workdir), each case is run --repeat times after one warm-up and timed end to end
(median and best):

  episodes     `db.sql("SELECT * FROM episodes")` -> pyarrow.Table, in-process;
               the same query through `epistore serve` + ADBC (adbc_driver_flightsql)
               -> fetch_arrow_table(); `epistore export --table episodes --format
               parquet` + pyarrow.parquet.read_table (export and read timed apart).
  cell_metrics `db.sql("SELECT * FROM cell_metrics")` vs DuckDB running
               queries/cell_metrics.sql over the exported episode_facts Parquet in
               this process (the export timed apart: it is paid once).
  large        a result of more than a million rows (`SELECT * FROM actions`, or
               --large QUERY): in-process (table, and streamed batch by batch with the
               peak RSS growth) vs Flight SQL.

Needs the epistore package (`pip install ./python`; a release build for figures
comparable with the release binary: `maturin build --release`), pyarrow, duckdb and
adbc-driver-flightsql. The binary (for synth, serve and export) is --epistore, by
default target/release/epistore, else target/debug/epistore.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import epistore
from epistore import _native

REPO = Path(__file__).resolve().parents[1]
CELL_METRICS_SQL = REPO / "queries" / "cell_metrics.sql"
TOKEN = "bench"


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def default_binary() -> Path:
    for profile in ("release", "debug"):
        p = REPO / "target" / profile / "epistore"
        if p.is_file():
            return p
    sys.exit("no epistore binary under target/: build one or pass --epistore")


def timed(fn, repeat: int):
    """One warm-up call, then `repeat` timed calls: (times, last result)."""
    result = fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return times, result


class Server:
    def __init__(self, binary: Path, store: Path):
        self.proc = subprocess.Popen(
            [str(binary), "--store", str(store), "serve", "--addr", "127.0.0.1:0", "--token", TOKEN,
             "--memory-limit-mib", "8192"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        deadline = time.monotonic() + 120
        for line in self.proc.stdout:
            m = re.search(r"listening on (grpc://\S+)", line)
            if m:
                self.uri = m.group(1)
                break
            if time.monotonic() > deadline:
                break
        else:
            raise SystemExit("epistore serve did not start")

    def connect(self):
        import adbc_driver_flightsql.dbapi as flight_sql
        return flight_sql.connect(self.uri, db_kwargs={"adbc.flight.sql.authorization_header": f"Bearer {TOKEN}"},
                                  autocommit=True)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=100_000)
    ap.add_argument("--output-scale", type=float, default=0.03)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--epistore", type=Path, default=None, help="the binary (synth, serve, export)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/epistore-pybench"))
    ap.add_argument("--large", default="SELECT * FROM actions", help="the >1M-row query")
    ap.add_argument("--json", type=Path, default=None, help="results file (default: WORKDIR/results-N.json)")
    args = ap.parse_args()
    binary = args.epistore or default_binary()
    work = args.workdir / str(args.episodes)
    store = work / "store"
    out_json = args.json or work / "results.json"
    work.mkdir(parents=True, exist_ok=True)
    results: dict = {
        "episodes": args.episodes, "output_scale": args.output_scale, "repeat": args.repeat,
        "binary": str(binary), "package_debug_build": bool(getattr(_native, "DEBUG_BUILD", False)),
        "python": platform.python_version(), "pyarrow": pa.__version__, "cpus": os.cpu_count(),
        "cases": {},
    }

    if not (store / "epistore.redb").exists():
        print(f"synth --ingest {args.episodes} episodes into {store} ...", flush=True)
        t = time.perf_counter()
        subprocess.run([str(binary), "--store", str(store), "synth", "--episodes", str(args.episodes), "--ingest",
                        "--output-scale", str(args.output_scale), "--quiet"], check=True, stdout=subprocess.DEVNULL)
        results["synth_ingest_s"] = time.perf_counter() - t

    cases = results["cases"]

    def record(name: str, times, rows: int, nbytes: int, **extra):
        cases[name] = {"median_s": statistics.median(times), "best_s": min(times), "times_s": times,
                       "rows": rows, "mb": nbytes / 1e6, **extra}
        print(f"  {name:<34} {statistics.median(times):8.3f} s  ({rows:,} rows)", flush=True)

    t = time.perf_counter()
    db = epistore.open(store)
    n_episodes = db.sql("SELECT count(*) AS n FROM episodes").column("n")[0].as_py()
    results["open_first_query_s"] = time.perf_counter() - t
    print(f"store: {n_episodes:,} episodes; package debug build: {results['package_debug_build']}", flush=True)

    server = Server(binary, store)
    conn = server.connect()

    def flight(sql: str) -> pa.Table:
        with conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetch_arrow_table()

    try:
        # ---------------------------------------------------------- episodes
        q = "SELECT * FROM episodes"
        times, t_in = timed(lambda: db.sql(q), args.repeat)
        record("episodes in-process", times, t_in.num_rows, t_in.nbytes)
        times, t_fl = timed(lambda: flight(q), args.repeat)
        record("episodes Flight SQL (ADBC)", times, t_fl.num_rows, t_fl.nbytes)
        assert t_fl.num_rows == t_in.num_rows

        export_times, read_times = [], []
        for i in range(args.repeat + 1):
            path = work / f"episodes-{time.time_ns()}.parquet"
            t0 = time.perf_counter()
            subprocess.run([str(binary), "--store", str(store), "export", "--quiet", "--table", "episodes",
                            "--format", "parquet", "--out", str(path)], check=True)
            t1 = time.perf_counter()
            t_pq = pq.read_table(path)
            t2 = time.perf_counter()
            path.unlink()
            if i:  # the first is the warm-up
                export_times.append(t1 - t0)
                read_times.append(t2 - t1)
        assert t_pq.num_rows == t_in.num_rows
        record("episodes export+read_table", [a + b for a, b in zip(export_times, read_times)],
               t_pq.num_rows, t_pq.nbytes,
               export_median_s=statistics.median(export_times), read_median_s=statistics.median(read_times))

        # ------------------------------------------------------ cell_metrics
        times, cm = timed(lambda: db.sql("SELECT * FROM cell_metrics"), args.repeat)
        record("cell_metrics in-process", times, cm.num_rows, cm.nbytes)
        facts = work / f"episode_facts-{time.time_ns()}.parquet"
        t0 = time.perf_counter()
        subprocess.run([str(binary), "--store", str(store), "export", "--quiet", "--table", "episode_facts",
                        "--format", "parquet", "--out", str(facts)], check=True)
        export_facts_s = time.perf_counter() - t0
        import duckdb

        con = duckdb.connect()
        con.execute(f"CREATE VIEW episode_facts AS SELECT * FROM read_parquet('{facts}')")
        text = CELL_METRICS_SQL.read_text()

        def duck():
            rel = con.sql(text)
            return (getattr(rel, "to_arrow_table", None) or rel.arrow)()

        times, dm = timed(duck, args.repeat)
        assert dm.num_rows == cm.num_rows
        record("cell_metrics DuckDB over Parquet", times, dm.num_rows, dm.nbytes, export_episode_facts_s=export_facts_s)
        facts.unlink()

        # ------------------------------------------------------- large result
        # Streamed first: the table's pages, freed, would still count in the RSS.
        q = args.large
        streamed_bytes = [0]

        def streamed():
            before, peak, n = rss_mb(), 0.0, 0
            streamed_bytes[0] = 0
            for i, batch in enumerate(db.sql(q, stream=True)):
                n += batch.num_rows
                streamed_bytes[0] += batch.nbytes
                if i % 20 == 0:
                    peak = max(peak, rss_mb())
            return n, max(peak, rss_mb()) - before

        times, (n, growth) = timed(streamed, args.repeat)
        rows, nbytes = n, streamed_bytes[0]
        record("large in-process streamed", times, n, nbytes, rss_growth_mb=growth)
        times, big = timed(lambda: db.sql(q), args.repeat)
        assert big.num_rows == rows
        del big
        record("large in-process table", times, rows, nbytes)

        times, big = timed(lambda: flight(q), args.repeat)
        assert big.num_rows == rows
        record("large Flight SQL (ADBC)", times, big.num_rows, big.nbytes)
        del big
        results["large_query"] = q
    finally:
        conn.close()
        server.stop()
        db.close()

    # -------------------------------------------------------------- report
    def speedup(a: str, b: str) -> float:
        return cases[b]["median_s"] / cases[a]["median_s"]

    results["speedups"] = {
        "episodes: in-process vs Flight SQL": speedup("episodes in-process", "episodes Flight SQL (ADBC)"),
        "episodes: in-process vs export+read": speedup("episodes in-process", "episodes export+read_table"),
        "cell_metrics: in-process vs DuckDB": speedup("cell_metrics in-process", "cell_metrics DuckDB over Parquet"),
        "large: in-process vs Flight SQL": speedup("large in-process table", "large Flight SQL (ADBC)"),
    }
    print()
    print(f"{'case':<34} {'rows':>11} {'MB':>8} {'median s':>9} {'best s':>8} {'Mrows/s':>8}")
    for name, c in cases.items():
        mrows = c["rows"] / c["median_s"] / 1e6
        print(f"{name:<34} {c['rows']:>11,} {c['mb']:>8.1f} {c['median_s']:>9.3f} {c['best_s']:>8.3f} {mrows:>8.2f}")
    print()
    for name, x in results["speedups"].items():
        print(f"{name:<40} {x:6.2f}x")
    extra = cases["episodes export+read_table"]
    print(f"(export {extra['export_median_s']:.3f} s + read_table {extra['read_median_s']:.3f} s; "
          f"episode_facts export {cases['cell_metrics DuckDB over Parquet']['export_episode_facts_s']:.3f} s, "
          f"not in DuckDB's time; streamed RSS growth {cases['large in-process streamed']['rss_growth_mb']:.0f} MB)")
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out_json}")


if __name__ == "__main__":
    main()
