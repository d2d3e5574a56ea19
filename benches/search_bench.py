#!/usr/bin/env python3
"""Full-text search (`epistore search`) against ripgrep, DuckDB ILIKE and SQLite FTS5; the store
growth and import cost of keeping every run's content.

    python3 benches/search_bench.py --sessions 2000 \
        --new /tmp/epistore-new --old /tmp/epistore-v3 [--work /tmp/epistore-search-bench]

What it does, in order (every timed command is a new process, wall clock, time.perf_counter):
  1. generate  a Claude Code projects tree with import_bench.py's gen_claude (the real transcripts
               under tests/fixtures/real/claude-code, fresh UUIDs per copy). --mix dense (default)
               reweights the templates to about 100 messages and 30 tool outputs per episode (the
               issue's density); --mix import keeps import_bench.py's weights (~33 / ~9). A rare
               phrase is planted into one tool_result of exactly --plant sessions.
  2. import    the tree into a fresh store with --old and --new, interleaved, --import-runs times
               each (best is reported); sizes of the last stores (du -sb, and disk blocks).
  3. text      the searchable text (messages.text, tools.output_text, actions.diff) as one
               Parquet file text.parquet (episode_id, kind, text) for DuckDB, and an FTS5 table
               built from it (build time reported apart). When `export` of `messages` fails,
               the message text comes from the packages `import --out` writes (the same records
               the store ingests), and the failure is recorded.
  4. queries   a rare phrase and a common word with each engine: cold (after
               `sync; echo 3 > /proc/sys/vm/drop_caches`, one run) and warm (one untimed run,
               then the median of --runs). Floors: `epistore sql "SELECT 1"`, `python3 -c
               "import duckdb"`, `sqlite3 :memory:` (process start included in every figure).

Prints a markdown table and writes --results (benches/search-results.json).
"""
from __future__ import annotations

import argparse, json, os, random, shutil, statistics, subprocess, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benches"))
import import_bench as ib  # noqa: E402  (gen_claude, measure, tree_bytes, warm)

T = {Path(t[0]).name: t for t in ib.CC_TEMPLATES}
SUB, GEN, BIG = "subagent.jsonl", "555cbe93-d68e-41b1-9012-c94ca9ff3588.jsonl", f"{ib.BIG}.jsonl"
# (76 messages, 25 tool outputs), (33, 5), (536, 183) per episode once imported: this mix
# averages ~100 messages and ~32 tool outputs (checked on the store, see "density").
DENSE = [(T[SUB][0], None, 75), (T[GEN][0], None, 18), (T[BIG][0], T[BIG][1], 7)]


def run(cmd, **kw) -> dict:
    r = ib.measure([str(c) for c in cmd], **kw)
    if r["rc"] != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))[:300]} exited {r['rc']}:\n{r['stderr'][-2000:]}")
    return r


def drop_caches() -> bool:
    try:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def du(p: Path) -> dict:
    if not p.exists():
        return {"apparent": 0, "blocks": 0}
    files = [p] if p.is_file() else [f for f in p.rglob("*") if f.is_file()]
    return {"apparent": sum(f.stat().st_size for f in files),
            "blocks": sum(f.stat().st_blocks * 512 for f in files)}


# ---------------------------------------------------------------- generate + plant
def plant(projects: Path, phrase: str, k: int) -> list[str]:
    """Prepend a line with `phrase` to the first tool_result of k sessions (and to its
    toolUseResult copy, which the importers may read instead). Returns their session ids."""
    done = []
    for f in sorted(projects.glob("*/*.jsonl")):
        if len(done) == k:
            break
        lines = f.read_bytes().split(b"\n")
        for i, line in enumerate(lines):
            if b'"tool_result"' not in line:
                continue
            d = json.loads(line)
            content = d.get("message", {}).get("content")
            block = next((c for c in content if isinstance(c, dict) and c.get("type") == "tool_result"
                          and isinstance(c.get("content"), str)), None) if isinstance(content, list) else None
            if block is None:
                continue
            note = f"WARN {phrase} in shard {len(done) + 1}; retrying\n"
            block["content"] = note + block["content"]
            tur = d.get("toolUseResult")
            if isinstance(tur, str):
                d["toolUseResult"] = note + tur
            elif isinstance(tur, dict) and isinstance(tur.get("stdout"), str):
                tur["stdout"] = note + tur["stdout"]
            lines[i] = json.dumps(d, ensure_ascii=False, separators=(",", ":")).encode()
            f.write_bytes(b"\n".join(lines))
            done.append(f.stem)
            break
    if len(done) != k:
        raise SystemExit(f"planted the phrase in {len(done)} sessions, wanted {k}")
    return done


def generate(a, work: Path) -> dict:
    if a.mix == "dense":
        ib.CC_TEMPLATES = DENSE
    data = work / f"data-{a.mix}-{a.sessions}"
    meta_f = data / "claude-code/meta.json"
    if meta_f.exists() and (data / "planted.json").exists():  # reuse: generation is deterministic
        meta = json.loads(meta_f.read_text())
        meta["planted"] = json.loads((data / "planted.json").read_text())
    else:
        meta = ib.gen_claude(argparse.Namespace(data=str(data), sessions=a.sessions))
        meta["planted"] = plant(Path(meta["path"]), a.phrase, a.plant)
        (data / "planted.json").write_text(json.dumps(meta["planted"]))
    meta["bytes"], meta["files"] = ib.tree_bytes(Path(meta["path"]))
    meta["mix"] = a.mix
    return meta


# ---------------------------------------------------------------- import + size
def imports(a, work: Path, tree: Path) -> dict:
    res = {"old": {"runs_s": []}, "new": {"runs_s": []}}
    ib.warm(tree)
    for _ in range(a.import_runs):
        for which in ("old", "new"):
            store = work / f"store-{which}"
            shutil.rmtree(store, ignore_errors=True)
            r = run([getattr(a, which), "--store", store, "import", "-q", tree])
            res[which]["runs_s"].append(r["wall_s"])
            res[which]["peak_rss_mb"] = r["peak_rss_mb"]
            res[which]["summary"] = r["stdout"].strip().splitlines()[-2:]
            print(f"import {which}: {r['wall_s']} s", file=sys.stderr, flush=True)
    for which in ("old", "new"):
        store = work / f"store-{which}"
        res[which]["best_s"] = min(res[which]["runs_s"])
        res[which]["redb"] = du(store / "epistore.redb")
        res[which]["columnar"] = du(store / "columnar")
    return res


def sql(bin_, store, q) -> list[dict]:
    r = run([bin_, "--store", store, "sql", "--format", "json", q])
    out = r["stdout"].strip()
    try:
        return json.loads(out)
    except json.JSONDecodeError:
        return [json.loads(l) for l in out.splitlines() if l.strip()]


# ---------------------------------------------------------------- the same text for DuckDB and FTS5
def export_text(a, work: Path, store: Path, tree: Path) -> dict:
    import duckdb
    out = work / "text.parquet"
    info: dict = {}
    for f in (out, work / "content.parquet", work / "messages.parquet"):
        f.unlink(missing_ok=True)
    rest = ("SELECT episode_id, 'output' AS kind, output_text AS text FROM tools WHERE output_text IS NOT NULL "
            "UNION ALL SELECT episode_id, 'diff', diff FROM actions WHERE diff IS NOT NULL")
    union = f"SELECT episode_id, 'message' AS kind, text FROM messages WHERE text IS NOT NULL UNION ALL {rest}"
    t0 = time.perf_counter()
    try:
        run([a.new, "--store", store, "export", "-q", "--query", union, "--format", "parquet", "--out", out])
        info["messages_from"] = "export --query (messages UNION tools UNION actions)"
    except RuntimeError as e:
        info["messages_export_error"] = str(e).strip().splitlines()[-1]
        print(f"export of messages failed ({info['messages_export_error']}); messages from packages",
              file=sys.stderr, flush=True)
        content = work / "content.parquet"
        run([a.new, "--store", store, "export", "-q", "--query", rest,
             "--format", "parquet", "--out", content])
        pk = work / "packages"
        shutil.rmtree(pk, ignore_errors=True)
        run([a.new, "import", "-q", "--out", pk, tree])
        con = duckdb.connect()
        con.execute(f"""COPY (
            SELECT regexp_extract(filename, '/([^/]+)/traces/messages.jsonl$', 1) AS episode_id,
                   'message' AS kind, text
            FROM read_json('{pk}/*/*/traces/messages.jsonl', format='newline_delimited',
                           columns={{'text': 'VARCHAR'}}, filename=true)
            WHERE text IS NOT NULL) TO '{work / 'messages.parquet'}' (FORMAT parquet)""")
        con.execute(f"""COPY (SELECT * FROM '{work / 'messages.parquet'}' UNION ALL
            SELECT episode_id, kind, text FROM '{content}') TO '{out}' (FORMAT parquet)""")
        info["messages_from"] = "packages of `import --out` (traces/messages.jsonl); tools and actions via export --query"
        info["message_counts"] = con.execute(f"""
            SELECT avg(n), count(*) FROM (SELECT regexp_extract(filename, '/([^/]+)/traces/', 1) e, count(*) n
            FROM read_json('{pk}/*/*/traces/messages.jsonl', format='newline_delimited',
                           columns={{'role': 'VARCHAR'}}, filename=true) GROUP BY 1)""").fetchone()
        shutil.rmtree(pk)
    info["seconds"] = round(time.perf_counter() - t0, 2)
    con = duckdb.connect()
    rows = con.execute(f"SELECT kind, count(*), sum(length(text)) FROM '{out}' GROUP BY 1 ORDER BY 1").fetchall()
    info["rows"] = {k: {"rows": n, "chars": c} for k, n, c in rows}
    info["parquet_bytes"] = out.stat().st_size
    return info


def build_fts(work: Path) -> dict:
    import duckdb, sqlite3
    db = work / "fts.sqlite"
    db.unlink(missing_ok=True)
    t0 = time.perf_counter()
    lite = sqlite3.connect(db)
    lite.execute("CREATE VIRTUAL TABLE fts USING fts5(episode_id UNINDEXED, kind UNINDEXED, text)")
    cur = duckdb.connect().execute(f"SELECT episode_id, kind, text FROM '{work / 'text.parquet'}'")
    while batch := cur.fetchmany(10000):
        lite.executemany("INSERT INTO fts VALUES (?, ?, ?)", batch)
    lite.commit()
    lite.close()
    return {"build_s": round(time.perf_counter() - t0, 2), "bytes": db.stat().st_size}


# ---------------------------------------------------------------- queries
def timed(cmd, runs: int, cold: bool) -> dict:
    res: dict = {"cmd": " ".join(map(str, cmd))}
    if cold:
        if drop_caches():
            r = ib.measure(cmd)
            res["cold_s"] = r["wall_s"]
        else:
            res["cold_s"] = None
    first = ib.measure(cmd)  # warm-up, untimed
    if first["rc"] not in (0, 1):  # rg exits 1 when nothing matched
        raise RuntimeError(f"{res['cmd'][:300]} exited {first['rc']}: {first['stderr'][-1000:]}")
    walls = [ib.measure(cmd)["wall_s"] for _ in range(runs)]
    res["warm_s"] = statistics.median(walls)
    res["warm_runs_s"] = walls
    res["stdout"] = first["stdout"]
    return res


def queries(a, work: Path, tree: Path) -> dict:
    store, pq, db = work / "store-new", work / "text.parquet", work / "fts.sqlite"
    phrase, word = a.phrase, a.word
    ddb = lambda q: [sys.executable, "-c", f"import duckdb; print(duckdb.sql({q!r}).fetchall())"]
    lite = lambda q: ["sqlite3", db, q]
    plan = {
        "floor": {
            "epistore": [a.new, "--store", store, "sql", "SELECT 1"],
            "duckdb": ddb("SELECT 1"),
            "fts5": lite("SELECT 1"),
        },
        "rare": {
            "epistore": [a.new, "--store", store, "search", f'"{phrase}"', "--limit", "20", "--format", "csv"],
            "rg": ["rg", "-l", "-F", phrase, tree],
            "duckdb": ddb(f"SELECT count(*) FROM '{pq}' WHERE text ILIKE '%{phrase}%'"),
            "fts5": lite(f"SELECT count(*) FROM fts WHERE fts MATCH '\"{phrase}\"'"),
            "fts5_top20": lite(f"SELECT episode_id, kind FROM fts WHERE fts MATCH '\"{phrase}\"' ORDER BY rank LIMIT 20"),
        },
        "common": {
            "epistore": [a.new, "--store", store, "search", word, "--limit", "20", "--format", "csv"],
            "rg": ["rg", "-c", "-i", "-w", word, tree],
            "duckdb": ddb(f"SELECT count(*) FROM '{pq}' WHERE text ILIKE '%{word}%'"),
            "fts5": lite(f"SELECT count(*) FROM fts WHERE fts MATCH '{word}'"),
            "fts5_top20": lite(f"SELECT episode_id, kind FROM fts WHERE fts MATCH '{word}' ORDER BY rank LIMIT 20"),
        },
    }
    res: dict = {}
    for q, engines in plan.items():
        for eng, cmd in engines.items():
            r = timed([str(c) for c in cmd], a.runs, cold=not a.no_cold)
            out = r.pop("stdout")
            lines = [l for l in out.splitlines() if l.strip()]
            if eng == "epistore" and q != "floor":
                r["hits"] = max(0, len(lines) - 1)  # csv header
                r["episodes"] = len({l.split(",")[0] for l in lines[1:]})
            elif eng == "rg":
                r["files"] = len(lines)
                if q == "common":
                    r["matching_lines"] = sum(int(l.rsplit(":", 1)[1]) for l in lines)
            elif eng == "fts5_top20":
                r["hits"] = len(lines)
            elif q != "floor":
                r["count"] = out.strip()
            res.setdefault(q, {})[eng] = r
            print(f"{q:6} {eng:10} cold {r.get('cold_s')} warm {r['warm_s']} "
                  f"{ {k: v for k, v in r.items() if k in ('hits', 'episodes', 'files', 'count')} }",
                  file=sys.stderr, flush=True)
    return res


# ---------------------------------------------------------------- report
def ms(s):
    return "n/a" if s is None else f"{s * 1000:,.0f} ms"


def report(R: dict) -> str:
    q, g, im, d = R["queries"], R["dataset"], R["import"], R["density"]
    fl = q["floor"]
    out = [f"Scale: {g['sessions']:,} sessions ({R['episodes']:,} episodes), {g['bytes'] / 1e6:,.1f} MB raw logs, "
           f"mix `{g['mix']}`: {d['messages_per_episode']} messages and {d['tool_outputs_per_episode']} tool "
           f"outputs per episode (issue: 100 / 30). Debug builds: compare the two epistore builds with each "
           f"other only.", "",
           "| query | engine | cold | warm (median of %d) | result |" % R["args"]["runs"], "|---|---|---|---|---|"]
    names = {"epistore": "`epistore search` (CLI)", "rg": "ripgrep over the raw logs",
             "duckdb": "DuckDB `ILIKE` over text.parquet", "fts5": "SQLite FTS5 `MATCH`, count(*)",
             "fts5_top20": "SQLite FTS5 `MATCH`, top 20 by rank"}
    for qq, label in (("rare", f'rare phrase "{R["args"]["phrase"]}"'), ("common", f'common word `{R["args"]["word"]}`')):
        for eng, r in q[qq].items():
            res = ", ".join(f"{k} {v}" for k, v in r.items() if k in ("hits", "episodes", "files", "count", "matching_lines"))
            out.append(f"| {label} | {names[eng]} | {ms(r.get('cold_s'))} | {ms(r['warm_s'])} | {res} |")
    for eng, r in fl.items():
        out.append(f"| floor (process start, trivial query) | {eng} | {ms(r.get('cold_s'))} | {ms(r['warm_s'])} | |")
    raw = g["bytes"]
    on, nn = im["old"], im["new"]
    out += ["", "| store | epistore.redb | columnar/ | total | / raw | import, best of %d |" % R["args"]["import_runs"],
            "|---|---|---|---|---|---|"]
    for k, lab in (("old", "previous (v3)"), ("new", "this version")):
        s = im[k]
        tot = s["redb"]["apparent"] + s["columnar"]["apparent"]
        out.append(f"| {lab} | {s['redb']['apparent'] / 1e6:,.1f} MB | {s['columnar']['apparent'] / 1e6:,.1f} MB | "
                   f"{tot / 1e6:,.1f} MB | {tot / raw:.3f} | {s['best_s']} s ({R['episodes'] / s['best_s']:,.0f} episodes/s, "
                   f"{raw / 1e6 / s['best_s']:,.1f} MB/s) |")
    out += ["", "Targets at this scale:", ""]
    for t in R["targets"]:
        out.append(f"- {t['target']}: {t['measured']}: **{'met' if t['met'] else 'not met'}**")
    return "\n".join(out)


def targets(R: dict) -> list[dict]:
    q, im, raw = R["queries"], R["import"], R["dataset"]["bytes"]
    e, rg, fts = q["rare"]["epistore"]["warm_s"], q["rare"]["rg"]["warm_s"], q["rare"]["fts5_top20"]["warm_s"]
    floor = q["floor"]["epistore"]["warm_s"]
    grow = sum(im["new"][k]["apparent"] - im["old"][k]["apparent"] for k in ("redb", "columnar")) / raw
    growb = sum(im["new"][k]["blocks"] - im["old"][k]["blocks"] for k in ("redb", "columnar")) / raw
    ratio = im["old"]["best_s"] / im["new"]["best_s"]
    ec, fc = q["common"]["epistore"]["warm_s"], q["common"]["fts5_top20"]["warm_s"]
    return [
        {"target": "rare phrase under 100 ms warm", "met": e < 0.1,
         "measured": f"{e * 1000:.0f} ms ({(e - floor) * 1000:.0f} ms above the `sql \"SELECT 1\"` floor of {floor * 1000:.0f} ms)"},
        {"target": "at least 10x faster than ripgrep over the raw logs (rare phrase, warm)", "met": rg / e >= 10,
         "measured": f"{rg / e:.1f}x ({rg * 1000:.0f} ms against {e * 1000:.0f} ms)"},
        {"target": "no slower than SQLite FTS5 (warm, top 20, both queries)", "met": e <= fts and ec <= fc,
         "measured": f"rare {e * 1000:.0f} vs {fts * 1000:.0f} ms, common {ec * 1000:.0f} vs {fc * 1000:.0f} ms"},
        {"target": "store growth from the content at most 0.5x the raw log bytes", "met": grow <= 0.5,
         "measured": f"{grow:.3f}x (du -sb, redb + columnar, new - old over raw; in disk blocks {growb:.3f}x)"},
        {"target": "import throughput no more than 20% below the previous version", "met": ratio >= 0.8,
         "measured": f"{ratio:.2f} of the previous ({im['new']['best_s']} s against {im['old']['best_s']} s)"},
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sessions", type=int, default=2000)
    p.add_argument("--new", default="/tmp/epistore-new")
    p.add_argument("--old", default="/tmp/epistore-v3")
    p.add_argument("--work", default="/tmp/epistore-search-bench")
    p.add_argument("--mix", choices=["dense", "import"], default="dense")
    p.add_argument("--phrase", default="quasar lattice overflow")
    p.add_argument("--plant", type=int, default=3)
    p.add_argument("--word", default="the")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--import-runs", type=int, default=2)
    p.add_argument("--no-cold", action="store_true")
    p.add_argument("--results", default=str(ROOT / "benches/search-results.json"))
    a = p.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()
    R: dict = {"args": vars(a), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
               "machine": {"cpus": os.cpu_count(), "platform": os.uname().release},
               "versions": {b: subprocess.run([getattr(a, b), "--version"], capture_output=True, text=True).stdout.strip()
                            for b in ("new", "old")},
               "rg": subprocess.run(["rg", "--version"], capture_output=True, text=True).stdout.splitlines()[0]}
    import duckdb, sqlite3
    R["duckdb"], R["sqlite"] = duckdb.__version__, sqlite3.sqlite_version
    R["dataset"] = g = generate(a, work)
    tree = Path(g["path"])
    print(f"dataset: {g['sessions']} sessions, {g['bytes'] / 1e6:.1f} MB", file=sys.stderr, flush=True)
    R["import"] = imports(a, work, tree)
    store = work / "store-new"
    R["episodes"] = sql(a.new, store, "SELECT count(*) AS n FROM episodes")[0]["n"]
    R["text"] = export_text(a, work, store, tree)
    tools = sql(a.new, store, "SELECT avg(n) AS avg FROM (SELECT episode_id, count(*) n FROM tools GROUP BY 1)")[0]["avg"]
    outs = sql(a.new, store, "SELECT count(output_text) AS n FROM tools")[0]["n"]
    try:
        msgs = sql(a.new, store, "SELECT avg(n) AS avg FROM (SELECT episode_id, count(*) n FROM messages GROUP BY 1)")[0]["avg"]
        src = "SQL over messages"
    except RuntimeError:
        msgs = R["text"]["message_counts"][0]
        src = "packages' traces/messages.jsonl (the SQL table failed)"
    R["density"] = {"messages_per_episode": round(msgs, 1), "tool_outputs_per_episode": round(tools, 1),
                    "tools_with_output_text": outs, "messages_counted_from": src}
    R["fts5"] = build_fts(work)
    print(f"fts5 built in {R['fts5']['build_s']} s", file=sys.stderr, flush=True)
    R["queries"] = queries(a, work, tree)
    R["targets"] = targets(R)
    R["total_s"] = round(time.perf_counter() - t_all, 1)
    R["table"] = report(R)
    print(R["table"])
    print(f"\n(total {R['total_s']} s)")
    res = Path(a.results)  # one entry per scale and mix: runs at other scales are kept
    allr = json.loads(res.read_text()) if res.exists() else {}
    allr[f"{a.mix}-{a.sessions}"] = R
    res.write_text(json.dumps(allr, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
