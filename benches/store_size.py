#!/usr/bin/env python3
"""Store size (disk blocks, as `du` counts them) over raw package bytes (apparent sizes),
straight after one ingest (no `compact`).

Three synthetic populations (`epistore synth --seed 1`):
  small    --output-scale 0.03 with every `artifacts/` folder removed: the manifest,
           outcome, traces, patch and report of each episode (about 13 KB per episode)
  scale03  --output-scale 0.03 as written (artifacts shared between episodes)
  default  the default output scale (tool logs of 10-200 KB)

Usage: python3 benches/store_size.py --epistore target/release/epistore [--episodes 5000]
Prints one JSON line per population and a Markdown table.
"""
import argparse, json, os, shutil, subprocess, sys, time


def tree_bytes(path, allocated=False):
    """Bytes of the files under `path`: apparent sizes, or the disk blocks they take
    (`du`): redb grows a young file by doubling it, sparsely, so its length overstates
    what it takes on disk."""
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            st = os.stat(os.path.join(root, f))
            total += st.st_blocks * 512 if allocated else st.st_size
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epistore", required=True)
    ap.add_argument("--episodes", type=int, default=5000)
    ap.add_argument("--work", default="/tmp/epistore-size")
    ap.add_argument("--only", default="small,scale03,default")
    a = ap.parse_args()
    rows = []
    for name in a.only.split(","):
        work = os.path.join(a.work, name)
        shutil.rmtree(work, ignore_errors=True)
        packages, store = os.path.join(work, "packages"), os.path.join(work, "store")
        scale = {"small": "0.03", "scale03": "0.03", "default": "1"}[name]
        subprocess.run([a.epistore, "synth", "--episodes", str(a.episodes), "--output-scale", scale,
                        "--out", packages], check=True, stdout=subprocess.DEVNULL)
        if name == "small":
            for root, dirs, _ in os.walk(packages):
                if "artifacts" in dirs:
                    shutil.rmtree(os.path.join(root, "artifacts"))
                    dirs.remove("artifacts")
        raw = tree_bytes(packages)
        started = time.time()
        out = subprocess.run([a.epistore, "--store", store, "ingest", "--quiet", "--format", "json", packages],
                             check=True, capture_output=True, text=True)
        seconds = time.time() - started
        summary = json.loads(out.stdout)
        redb_file = os.path.join(store, "epistore.redb")
        redb, redb_length = os.stat(redb_file).st_blocks * 512, os.path.getsize(redb_file)
        columnar = tree_bytes(os.path.join(store, "columnar"), allocated=True)
        row = {"population": name, "episodes": summary["added"], "raw_bytes": raw, "redb_bytes": redb,
               "redb_length": redb_length, "columnar_bytes": columnar, "ratio": round((redb + columnar) / raw, 3),
               "ingest_seconds": round(seconds, 2), "episodes_per_s": round(summary["added"] / seconds)}
        print(json.dumps(row), flush=True)
        rows.append(row)
        shutil.rmtree(packages)
    print("\n| population | episodes | raw MB | redb MB | columnar MB | store / raw | ingest episodes/s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['population']} | {r['episodes']} | {r['raw_bytes']/1e6:.1f} | {r['redb_bytes']/1e6:.1f} | "
              f"{r['columnar_bytes']/1e6:.1f} | {r['ratio']} | {r['episodes_per_s']} |")


if __name__ == "__main__":
    sys.exit(main())
