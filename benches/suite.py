#!/usr/bin/env python3
"""The 8-view metric suite (docs/metrics.md §H) on an existing store, one new process
per run: --runs warm runs, then one with the page cache dropped (needs root; skipped
with a note otherwise). The suite text is bench.py's SUITE_SQL, as scale.py runs it.

Usage: python3 benches/suite.py --epistore target/release/epistore --store STORE [--runs 3]
"""
import argparse, json, os, subprocess, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402


def timed(cmd):
    started = time.time()
    with open(os.devnull, "wb") as sink:
        proc = subprocess.Popen(cmd, stdout=sink)
        _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return time.time() - started, usage.ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epistore", required=True)
    ap.add_argument("--store", required=True)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(bench.SUITE_SQL)
    cmd = [a.epistore, "--store", a.store, "sql", "--format", "csv", "--file", f.name]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)  # segments built, cache warm
    warm = [timed(cmd) for _ in range(a.runs)]
    try:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        cold = timed(cmd)
    except OSError:
        cold = None
    print(json.dumps({"warm_s": [round(s, 3) for s, _ in warm], "warm_peak_rss_mb": round(max(r for _, r in warm)),
                      "cold_s": cold and round(cold[0], 3), "cold_peak_rss_mb": cold and round(cold[1])}))


if __name__ == "__main__":
    sys.exit(main())
