#!/usr/bin/env python3
"""Reopen after a SIGKILL during ingest, cold cache.

Builds (or reuses) a store of --episodes synthetic episodes (`synth --ingest`,
--output-scale 0.03), starts an ingest of 20,000 more, kills it with SIGKILL after
--kill-after seconds (mid-transaction), drops the page cache (needs root; skipped with
a note otherwise) and times the first command of a new process: `ls` (a reader),
`sql "select count(*) from episodes"`, and an ingest of nothing new. Each is timed on
its own kill. Peak RSS comes from wait4. For comparison it also times `sql` cold on the
same store without a kill. `sql` after a kill also builds the columnar segments of the
batches the killed ingest had committed (with `--kill-after 0.3` it usually committed
none); `ls` and `ingest` do no such work, so they time the recovery itself.

Usage: python3 benches/crash_reopen.py --epistore target/release/epistore --episodes 100000
"""
import argparse, json, os, shutil, signal, subprocess, sys, time


def drop_caches():
    try:
        subprocess.run(["sync"], check=True)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def timed(cmd):
    started = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode()
    return time.time() - started, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status), err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epistore", required=True)
    ap.add_argument("--episodes", type=int, default=100000)
    ap.add_argument("--store", default=None, help="reuse this store (it must hold --episodes episodes)")
    ap.add_argument("--kill-after", type=float, default=6.0)
    a = ap.parse_args()
    store = a.store or f"/tmp/epistore-crash-{a.episodes}"
    if a.store is None and not os.path.exists(os.path.join(store, "epistore.redb")):
        subprocess.run([a.epistore, "--store", store, "synth", "--ingest", "--quiet", "--episodes", str(a.episodes),
                        "--output-scale", "0.03"], check=True, stdout=subprocess.DEVNULL)
    empty = os.path.join(store + "-nothing")
    os.makedirs(empty, exist_ok=True)
    commands = {
        "ls": [a.epistore, "--store", store, "ls", "--format", "csv"],
        "sql": [a.epistore, "--store", store, "sql", "select count(*) from episodes"],
        "ingest": [a.epistore, "--store", store, "ingest", "--quiet", empty],
    }
    first = a.episodes + 10_000_000  # episodes nobody has ingested: the kill lands mid-write
    for name, cmd in commands.items():
        child = subprocess.Popen([a.epistore, "--store", store, "synth", "--ingest", "--quiet", "--first",
                                  str(first), "--episodes", "20000", "--output-scale", "0.03"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        first += 20000
        time.sleep(a.kill_after)
        child.send_signal(signal.SIGKILL)
        child.wait()
        cold = drop_caches()
        seconds, rss, code, err = timed(cmd)
        print(json.dumps({"command": name, "episodes_before": a.episodes, "seconds": round(seconds, 3),
                          "peak_rss_mb": round(rss), "exit": code, "cold_cache": cold,
                          "walked_whole_file": "walked the whole file" in err}), flush=True)
    subprocess.run(commands["sql"], check=True, stdout=subprocess.DEVNULL)  # segments current
    cold = drop_caches()
    seconds, rss, code, _ = timed(commands["sql"])
    print(json.dumps({"command": "sql, no kill", "seconds": round(seconds, 3), "peak_rss_mb": round(rss),
                      "exit": code, "cold_cache": cold}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
