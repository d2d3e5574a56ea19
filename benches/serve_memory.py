#!/usr/bin/env python3
"""Peak memory of `epistore serve` while clients pull results larger than its pool.

    python3 benches/serve_memory.py --bin target/debug/epistore [--clients 10] [--limit-mib 2048]

Starts `serve` (defaults: 2 GiB pool, 4 queries at once) over a store of
datasets/login-validation, then --clients threads each run, through the ADBC Flight SQL
driver, a statement whose result batches are about --batch-mib MiB apiece (built by
`concat` of two `repeat`s over 8192 rows: within the 256 MiB a bounded function may build
per call, so only the result accounting stands between the pool and the batches).
Reports the server's peak RSS (VmHWM) and how each client's query ended: rows received,
or the error (ResourceExhausted when a batch and its encoding do not fit in the pool).
"""
import argparse
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import adbc_driver_flightsql.dbapi as flightsql

ROOT = Path(__file__).resolve().parent.parent


def peak_rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(ROOT / "target/debug/epistore"))
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--limit-mib", type=int, default=2048)
    ap.add_argument("--batch-mib", type=int, default=400)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="serve-memory-"))
    store = work / "store"
    subprocess.run([args.bin, "--store", str(store), "ingest", str(ROOT / "datasets/login-validation")],
                   check=True, stdout=subprocess.DEVNULL)
    server = subprocess.Popen(
        [args.bin, "--store", str(store), "serve", "--addr", "127.0.0.1:0",
         "--memory-limit-mib", str(args.limit_mib)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    addr = server.stdout.readline().strip().removeprefix("listening on ")
    idle = peak_rss_mib(server.pid)

    # Two halves per row, 8192 rows per batch: batch_mib MiB of text per batch.
    half = (args.batch_mib << 20) // 8192 // 2
    sql = f"SELECT repeat('x', {half}) || repeat('y', {half}) AS t FROM range(16384)"
    outcomes = [None] * args.clients

    def client(i: int) -> None:
        try:
            with flightsql.connect(addr) as conn, conn.cursor() as cur:
                cur.execute(sql)
                rows = 0
                for batch in cur.fetch_record_batch():
                    rows += batch.num_rows
                outcomes[i] = f"{rows} rows"
        except Exception as e:  # the error is the measurement
            outcomes[i] = "ResourceExhausted" if "RESOURCE_EXHAUSTED" in str(e).upper().replace(" ", "_") \
                or "does not fit" in str(e) else f"error: {str(e)[:600]}"

    started = time.time()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - started
    peak = peak_rss_mib(server.pid)
    alive = server.poll() is None
    server.kill()
    server.wait()
    counts = {}
    for o in outcomes:
        counts[o] = counts.get(o, 0) + 1
    print(f"clients {args.clients}, pool {args.limit_mib} MiB, batches of ~{args.batch_mib} MiB, {wall:.1f} s")
    print(f"server peak RSS {peak:.0f} MiB (idle {idle:.0f} MiB), alive after: {alive}")
    for outcome, n in sorted(counts.items(), key=lambda kv: str(kv[0])):
        print(f"  {n:3d} x {outcome}")
    sys.exit(0 if alive else 1)


if __name__ == "__main__":
    main()
