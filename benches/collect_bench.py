#!/usr/bin/env python3
"""Throughput and memory of `epistore collect`: how many agent log events per second it
receives, and what committing them costs.

    python3 benches/collect_bench.py --bin target/release/epistore [--sessions 200] \
        [--requests 25] [--per-request 64] [--senders 8] [--gzip]

Senders (threads, one HTTP/1.1 connection per request, as OTLP exporters without
keep-alive do) post OTLP JSON logs requests built from the constructed Claude Code
payload (tests/fixtures/constructed/otlp): every record made unique (its session,
sequence number and time), `--per-request` records per request, `--requests` requests
per session, sessions spread over the senders. Reported:
  receive   events / s from the first request to the last answer (all must be 200)
  commit    seconds from SIGTERM to exit: every session imported into the store
  peak RSS  of the collector (VmHWM), and the spool's size on disk
Python's senders are part of what is measured: `--senders` above the core count only
adds contention on this 2-core machine.
"""
import argparse
import copy
import gzip
import http.client
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests/fixtures/constructed/otlp/claude-code/claude-code-logs.json"


def requests_for(base, session, n_requests, per_request):
    """The session's requests: `per_request` records each, all distinct."""
    records = base["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
    out = []
    seq = 0
    for r in range(n_requests):
        batch = []
        for k in range(per_request):
            rec = copy.deepcopy(records[(r * per_request + k) % len(records)])
            t = int(rec["timeUnixNano"]) + seq * 1_000_000
            rec["timeUnixNano"] = str(t)
            for kv in rec["attributes"]:
                if kv["key"] == "session.id":
                    kv["value"] = {"stringValue": session}
                elif kv["key"] == "event.sequence":
                    kv["value"] = {"intValue": str(seq)}
            seq += 1
            batch.append(rec)
        req = copy.deepcopy(base)
        req["resourceLogs"][0]["scopeLogs"][0]["logRecords"] = batch
        out.append(json.dumps(req, separators=(",", ":")).encode())
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(ROOT / "target/release/epistore"))
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--requests", type=int, default=25)
    ap.add_argument("--per-request", type=int, default=64)
    ap.add_argument("--senders", type=int, default=4)
    ap.add_argument("--gzip", action="store_true")
    args = ap.parse_args()

    base = json.loads(FIXTURE.read_text())
    bodies = []
    for s in range(args.sessions):
        bodies.extend(requests_for(base, f"bench-{s:05d}", args.requests, args.per_request))
    if args.gzip:
        bodies = [gzip.compress(b, 1) for b in bodies]
    events = args.sessions * args.requests * args.per_request
    sent_bytes = sum(len(b) for b in bodies)

    work = Path(tempfile.mkdtemp(prefix="collect-bench-"))
    store = work / "store"
    proc = subprocess.Popen(
        [args.bin, "--store", str(store), "collect", "--addr", "127.0.0.1:0", "--idle", "3600", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    addr = proc.stdout.readline().strip().removeprefix("listening on http://")
    host, port = addr.rsplit(":", 1)
    headers = {"Content-Type": "application/json"}
    if args.gzip:
        headers["Content-Encoding"] = "gzip"

    failures = []
    next_body = [0]
    lock = threading.Lock()

    def sender():
        while True:
            with lock:
                i = next_body[0]
                next_body[0] += 1
            if i >= len(bodies):
                return
            conn = http.client.HTTPConnection(host, int(port), timeout=120)
            conn.request("POST", "/v1/logs", body=bodies[i], headers=headers)
            r = conn.getresponse()
            r.read()
            conn.close()
            if r.status != 200:
                failures.append(r.status)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=sender) for _ in range(args.senders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    received = time.perf_counter() - t0
    rss = 0
    for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            rss = int(line.split()[1]) // 1024
    spool = sum(f.stat().st_size for f in (store / "collect").rglob("*.otlp.jsonl"))
    t1 = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=3600)
    committed = time.perf_counter() - t1
    out = subprocess.run([args.bin, "--store", str(store), "sql", "--format", "json",
                          "SELECT count(*) AS n, sum(n_tools) AS tools FROM episodes"],
                         capture_output=True, text=True, check=True)
    stored = json.loads(out.stdout)[0]
    result = {
        "events": events, "requests": len(bodies), "sessions": args.sessions, "senders": args.senders,
        "gzip": args.gzip, "sent_mib": round(sent_bytes / 2**20, 1), "failures": len(failures),
        "receive_s": round(received, 2), "events_per_s": round(events / received),
        "commit_s": round(committed, 2), "episodes": stored["n"], "tools": stored["tools"],
        "peak_rss_mib": rss, "spool_mib": round(spool / 2**20, 1),
    }
    print(json.dumps(result, indent=1))
    if failures or stored["n"] != args.sessions:
        raise SystemExit("lost requests or sessions")


if __name__ == "__main__":
    main()
