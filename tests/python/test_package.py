"""The Python package `epistore` (python/): the store and its SQL engine in-process.

Every table and view gives the rows and types `epistore sql --format json` gives;
results cross as Arrow C streams (10 million rows stream in bounded memory, buffers
are not copied, an unread stream is released); ingest and import from Python, then
query; errors are `epistore.Error` with the command line's words; polars, DuckDB and
pandas read the results; DuckDB computing cell_metrics from the exported
episode_facts with queries/cell_metrics.sql agrees with `db.sql`.

Needs the package installed (`pip install ./python`, or `maturin build --profile dev`
and the wheel). Skipped when it is not, unless EPISTORE_REQUIRE_PYTHON is set (CI),
where that fails.
"""

from __future__ import annotations

import datetime as dt
import gc
import json
import math
import os
import pydoc
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

try:
    import epistore
except ImportError as exc:  # the package is not installed
    if os.environ.get("EPISTORE_REQUIRE_PYTHON"):
        raise ImportError(
            f"EPISTORE_REQUIRE_PYTHON is set but the epistore Python package does not import ({exc}); "
            "install it with `pip install ./python` (or `maturin build --profile dev` in python/ and the wheel)"
        ) from exc
    pytest.skip(
        f"the epistore Python package is not installed ({exc}): pip install ./python",
        allow_module_level=True,
    )

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc

from conftest import CELL_METRICS_SQL, DATASET, REPO, assert_cells_match, run_epistore, same_number
from test_exports import duck_rows, duckdb_source

AGENT_LOGS = REPO / "datasets" / "agent-logs"
MB = 1 << 20


@pytest.fixture(scope="module")
def db(epi):
    """The session store (dataset + synthetic population), opened read-only."""
    with epistore.open(epi.store) as d:
        yield d


# ------------------------------------------------------------ comparisons


def _cli_value(value, typ: pa.DataType):
    """A value of `epistore sql --format json` as the Python value pyarrow gives for
    a column of type `typ` (timestamps are RFC 3339 text there, datetimes here)."""
    if value is None:
        return None
    if pa.types.is_timestamp(typ):
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if pa.types.is_date(typ):
        return dt.date.fromisoformat(value)
    if pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
        return [_cli_value(v, typ.value_type) for v in value]
    if pa.types.is_struct(typ):
        return {typ.field(i).name: _cli_value(value.get(typ.field(i).name), typ.field(i).type)
                for i in range(typ.num_fields)}
    return value


def _python_type(typ: pa.DataType):
    if pa.types.is_boolean(typ):
        return bool
    if pa.types.is_integer(typ):
        return int
    if pa.types.is_floating(typ):
        return float
    if pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_string_view(typ):
        return str
    if pa.types.is_timestamp(typ):
        return dt.datetime
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return list
    if pa.types.is_struct(typ):
        return dict
    return object


def _same(a, b) -> bool:
    """Equal values of the same JSON kind; floats within 1e-12 (relative)."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        if type(a) is bool or type(b) is bool:
            return False
        if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
            return True
        return isinstance(a, float) and isinstance(b, (float, int)) and same_number(a, b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _sort_key(row: dict) -> str:
    def plain(v):
        if isinstance(v, float):
            return f"{v:.6g}"
        if isinstance(v, list):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v if v is None or isinstance(v, (bool, int, str)) else str(v)
    return json.dumps({k: plain(v) for k, v in row.items()}, sort_keys=True)


def _assert_same_rows(got: pa.Table, expected_json: list[dict], label: str):
    schema = got.schema
    assert got.num_rows == len(expected_json), f"{label}: {got.num_rows} rows, CLI {len(expected_json)}"
    if expected_json:
        assert got.column_names == list(expected_json[0]), f"{label}: columns differ"
    expected = [{f.name: _cli_value(r[f.name], f.type) for f in schema} for r in expected_json]
    rows = got.to_pylist()
    # SELECT * has no order: compare as sorted multisets.
    rows.sort(key=_sort_key)
    expected.sort(key=_sort_key)
    for field in schema:
        kind = _python_type(field.type)
        for row in rows:
            v = row[field.name]
            assert v is None or isinstance(v, kind), f"{label}.{field.name}: {v!r} is not {kind}"
    diffs = [
        f"row {i} {k}: got {r[k]!r}, CLI {e[k]!r}"
        for i, (r, e) in enumerate(zip(rows, expected))
        for k in r
        if not _same(r[k], e[k])
    ]
    assert not diffs, f"{label}: {len(diffs)} differences, e.g.\n" + "\n".join(diffs[:10])


def _types(schema: pa.Schema) -> list[tuple[str, pa.DataType]]:
    return [(f.name, f.type) for f in schema]


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


# ------------------------------------------------------------------- help


def test_help_teaches_open_and_sql():
    text = pydoc.render_doc(epistore, renderer=pydoc.plaintext)
    for word in ("epistore.open(", "db.sql(", "stream=True", "Database", "Error", "metrics", "leaderboard",
                 "ingest", "import_logs", "polars", "duckdb"):
        assert word in text, f"help(epistore) does not mention {word}"
    for method in ("sql", "metrics", "leaderboard", "ingest", "import_logs", "tables", "schema", "close"):
        assert getattr(epistore.Database, method).__doc__, f"Database.{method} has no docstring"
    assert epistore.open.__doc__ and epistore.Error.__doc__
    stubs = Path(epistore.__file__).with_name("_native.pyi")
    assert stubs.is_file() and stubs.with_name("py.typed").is_file(), "typed stubs missing"


# -------------------------------------------------- same rows as the CLI


def test_tables_are_the_information_schema(epi, db):
    names = [r["table_name"] for r in epi.sql(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name")]
    assert db.tables() == names
    assert {"episodes", "actions", "checks", "cell_metrics", "episode_facts", "epistore_info"} <= set(names)


def test_every_table_and_view_same_rows_and_types_as_cli_json(epi, db, tmp_path):
    names = db.tables()
    for name in names:
        query = f'SELECT * FROM "{name}"'
        got = db.sql(query)
        assert isinstance(got, pa.Table)
        got.validate(full=True)
        _assert_same_rows(got, epi.sql(query), name)
        # Types: exactly those of the table's Arrow IPC export and of db.schema().
        out = tmp_path / f"{name}.arrow"
        epi.export("--table", name, "--format", "arrow", "--out", out)
        with ipc.open_file(out) as reader:
            exported = reader.schema
        # (Nullability aside: the export declares the logical plan's, a stream the
        # physical plan's, and DataFusion may know more in one than in the other.)
        assert _types(got.schema) == _types(exported), (
            f"{name}: types differ from the Arrow export\n{got.schema}\nvs\n{exported}")
        assert db.schema(name).remove_metadata().equals(got.schema.remove_metadata()), name


def test_cell_metrics_with_nulls(db, expected_cell_metrics, metric_specs):
    rows = db.sql("SELECT * FROM cell_metrics").to_pylist()
    columns = ["episodes"] + [name for name, _, _ in metric_specs]
    assert_cells_match(rows, expected_cell_metrics, columns, "db.sql cell_metrics")
    assert any(r["selective_risk"] is None for r in rows), "NULL ratios must stay None"


def test_snapshot_is_the_clis(epi, db):
    assert str(db.snapshot_seq) == epi.info()["snapshot_seq"] == "2"
    assert db.sql("SELECT key, value FROM epistore_info ORDER BY key").to_pylist() == epi.sql(
        "SELECT key, value FROM epistore_info ORDER BY key")


# ------------------------------------------------------------- streaming


def test_ten_million_rows_stream_in_bounded_memory(db):
    query = "SELECT value, value * 2 AS doubled, CAST(value AS VARCHAR) AS text FROM range(10000000)"
    gc.collect()
    before = _rss_mb()
    reader = db.sql(query, stream=True)
    assert isinstance(reader, pa.RecordBatchReader)
    assert reader.schema.names == ["value", "doubled", "text"]
    rows = batches = streamed = 0
    peak = before
    total = 0
    for batch in reader:
        rows += batch.num_rows
        batches += 1
        streamed += batch.nbytes
        total += batch.column(0)[batch.num_rows - 1].as_py() if batch.num_rows else 0
        if batches % 50 == 0:
            peak = max(peak, _rss_mb())
    peak = max(peak, _rss_mb())
    assert rows == 10_000_000 and batches > 100
    assert streamed > 250 * MB, streamed  # what materialising it would have cost
    growth = peak - before
    assert growth < 150, f"RSS grew {growth:.0f} MB while streaming {streamed / MB:.0f} MB"


def test_stream_is_lazy_and_released_when_dropped(db):
    # Half read, then dropped: the plan is released; the database goes on.
    reader = db.sql("SELECT * FROM range(100000000)", stream=True)
    first = reader.read_next_batch()
    assert first.num_rows > 0
    del reader
    gc.collect()
    # Capsules taken and never consumed are released by their destructor.
    before = _rss_mb()
    for _ in range(200):
        native = db._db.sql("SELECT value, CAST(value AS VARCHAR) AS s FROM range(1000000)")
        capsule = native.__arrow_c_stream__()
        assert native.consumed
        del capsule, native
    gc.collect()
    assert _rss_mb() - before < 100
    native = db._db.sql("SELECT 1 AS one")
    pa.RecordBatchReader.from_stream(native).read_all()
    with pytest.raises(epistore.Error, match="already read"):
        native.__arrow_c_stream__()
    assert db.sql("SELECT count(*) AS n FROM episodes").column("n")[0].as_py() > 0


def test_results_are_not_copied(db):
    # The buffers pyarrow holds are the ones Rust allocated: pyarrow's pool does not
    # grow by the size of the result.
    gc.collect()
    allocated = pa.total_allocated_bytes()
    t = db.sql("SELECT value, CAST(value AS VARCHAR) AS s FROM range(2000000)")
    assert t.nbytes > 20 * MB
    assert pa.total_allocated_bytes() - allocated < t.nbytes / 100

    # Consumers of the table's own stream see the same buffers (same addresses).
    def addresses(table: pa.Table) -> list[int]:
        return [b.address for col in table.columns for chunk in col.chunks for b in chunk.buffers() if b]

    again = pa.RecordBatchReader.from_stream(t).read_all()
    assert addresses(again) == addresses(t)
    # polars takes them as they are too (and hands the same ones back).
    frame = pl.from_arrow(t, rechunk=False)
    assert [c.buffers()[1].address for c in frame.to_arrow().column("value").chunks] == [
        c.buffers()[1].address for c in t.column("value").chunks]


def test_stream_error_is_an_epistore_error(epi, db):
    query = "SELECT CAST(s AS INT) FROM (SELECT CASE WHEN value < 100000 THEN '1' ELSE 'x' END AS s FROM range(200000))"
    cli = epi.run("sql", query, check=False)
    assert cli.returncode == 2
    with pytest.raises(epistore.Error) as err:
        db.sql(query)
    assert str(err.value) == cli.stderr.strip().removeprefix("error: ")
    with pytest.raises(pa.ArrowInvalid, match="Cannot cast string 'x'"):
        db.sql(query, stream=True).read_all()


def test_queries_release_the_gil(db):
    done = threading.Event()
    result = {}

    def work():
        result["n"] = db.sql("SELECT count(DISTINCT value % 1000003) AS n FROM range(20000000)").to_pylist()
        done.set()

    thread = threading.Thread(target=work)
    spins = 0
    thread.start()
    while not done.is_set():
        spins += 1
        time.sleep(0.001)
    thread.join()
    assert result["n"] == [{"n": 1000003}]
    assert spins > 10, "the main thread did not run while the query ran"


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("args, call", [
    (("sql", "SELEC 1"), lambda d: d.sql("SELEC 1")),
    (("sql", "CREATE TABLE t AS SELECT 1"), lambda d: d.sql("CREATE TABLE t AS SELECT 1")),
    (("sql", "COPY (SELECT 1) TO '/tmp/epistore-x.csv'"), lambda d: d.sql("COPY (SELECT 1) TO '/tmp/epistore-x.csv'")),
    (("sql", "INSERT INTO episodes SELECT * FROM episodes"),
     lambda d: d.sql("INSERT INTO episodes SELECT * FROM episodes")),
    (("sql", "SET datafusion.execution.batch_size = 1"), lambda d: d.sql("SET datafusion.execution.batch_size = 1")),
    (("sql", "SELECT * FROM no_such_table"), lambda d: d.sql("SELECT * FROM no_such_table")),
    (("leaderboard", "--metric", "no_such_metric"), lambda d: d.leaderboard("no_such_metric")),
    (("metrics", "--by", "colour"), lambda d: d.metrics(by="colour")),
    (("metrics", "--where", "no_such_column = 1"), lambda d: d.metrics(where="no_such_column = 1")),
], ids=["bad-sql", "create", "copy", "insert", "set", "no-table", "unknown-metric", "bad-key", "bad-where"])
def test_errors_have_the_cli_message(epi, db, args, call):
    cli = epi.run(*args, check=False)
    assert cli.returncode == 2, cli
    expected = cli.stderr.strip()
    assert expected.startswith("error: ")
    with pytest.raises(epistore.Error) as err:
        call(db)
    assert str(err.value) == expected.removeprefix("error: ")


def test_no_store_is_an_error(tmp_path):
    missing = tmp_path / "nowhere"
    cli = run_epistore("--store", missing, "sql", "SELECT 1", check=False)
    with pytest.raises(epistore.Error) as err:
        epistore.open(missing)
    assert str(err.value) == cli.stderr.strip().removeprefix("error: ")
    assert not missing.exists()


def test_writes_need_write_true(db):
    with pytest.raises(epistore.Error, match="read-only"):
        db.ingest(DATASET)
    with pytest.raises(epistore.Error, match="read-only"):
        db.import_logs(AGENT_LOGS)


# ------------------------------------------------------ ingest and import


def test_ingest_from_python_then_query(tmp_path):
    store = tmp_path / "store"
    with epistore.open(store, write=True) as w:
        assert w.writable and w.snapshot_seq == 0
        summary = w.ingest(DATASET)
        assert summary["added"] == len(summary["packages"]) > 0
        assert summary["rejected"] == 0 and summary["already_present"] == 0
        assert {p["status"] for p in summary["packages"]} == {"added"}
        assert w.sql("SELECT count(*) AS n FROM episodes").column("n")[0].as_py() == summary["added"]
        again = w.ingest([DATASET])
        assert again["added"] == 0 and again["already_present"] == summary["added"]

        # A broken package is rejected with its file and line; the rest still go in.
        bad = tmp_path / "bad" / "pkg"
        first = next(p.parent for p in sorted(DATASET.rglob("manifest.json")))
        shutil.copytree(first, bad)
        (bad / "manifest.json").write_text('{"episode": \n  oops\n}')
        rejected = w.ingest(tmp_path / "bad")
        assert rejected["rejected"] == 1
        reason = rejected["packages"][0]["reason"]
        assert "manifest.json" in reason and "line" in reason, reason
    # The CLI reads what Python wrote.
    assert json.loads(run_epistore("--store", store, "sql", "--format", "json",
                                   "SELECT count(*) AS n FROM episodes").stdout) == [{"n": summary["added"]}]


def test_annotate_and_retract_from_python_as_the_cli_sees_them(tmp_path):
    store = tmp_path / "store"
    run_epistore("--store", store, "ingest", "--quiet", DATASET)
    with epistore.open(store, write=True) as w:
        ids = [r["episode_id"] for r in w.sql("SELECT episode_id FROM episodes ORDER BY harness_level").to_pylist()]
        before = w.sql("SELECT * FROM cell_metrics ORDER BY harness_level").to_pylist()
        a = w.annotate(ids[0][:10], "env failure", note="docker pull timed out", author="ana")
        assert a["added"] and a["episode"] == ids[0] and a["kind"] == "label"
        # The open session sees it at once (annotations do not move the ingest log).
        assert w.sql("SELECT count(*) AS n FROM episode_facts WHERE annotated(episode_id, 'env failure')") \
            .column("n")[0].as_py() == 1
        r = w.retract(a["id"][:8], note="it was the test", author="bo")
        assert r["kind"] == "retraction" and r["retracts"] == a["id"]
        with pytest.raises(epistore.Error, match="already retracted"):
            w.retract(a["id"])
        with pytest.raises(epistore.Error, match="label is empty"):
            w.annotate(ids[1], "  ")
        rows = w.sql("SELECT label, active, retracted_by FROM annotations ORDER BY created").to_pylist()
        assert [(x["label"], x["active"]) for x in rows] == [("env failure", False), ("env failure", False)]
        assert rows[0]["retracted_by"] == r["id"]
        assert w.sql("SELECT * FROM cell_metrics ORDER BY harness_level").to_pylist() == before
    with epistore.open(store) as reader:
        with pytest.raises(epistore.Error, match="read-only"):
            reader.annotate(ids[0], "x")
    listed = json.loads(run_epistore("--store", store, "annotations", "--all", "--format", "json").stdout)
    assert [x["id"] for x in listed] == [a["id"], r["id"]]


def test_a_reader_sees_ingests_by_another_process(epi, tmp_path):
    store = tmp_path / "store"
    run_epistore("--store", store, "ingest", "--quiet", DATASET)
    with epistore.open(store) as reader:
        n = reader.sql("SELECT count(*) AS n FROM episodes").column("n")[0].as_py()
        seq = reader.snapshot_seq
        run_epistore("--store", store, "import", "--quiet", AGENT_LOGS)
        assert reader.snapshot_seq == seq + 1
        assert reader.sql("SELECT count(*) AS n FROM episodes").column("n")[0].as_py() > n


def test_import_logs_then_query_source_format(tmp_path):
    with epistore.open(tmp_path / "py", write=True) as w:
        summary = w.import_logs(str(AGENT_LOGS))
        imported = {f["source_format"]: f["imported"] for f in summary["formats"]}
        assert len(imported) >= 5 and all(n >= 1 for n in imported.values()), summary
        assert summary["refused"] == []
        rows = w.sql("SELECT source_format, count(*) AS n FROM episode_facts GROUP BY source_format").to_pylist()
        assert {r["source_format"]: r["n"] for r in rows} == imported
        by_format = w.metrics(by="source_format")
        assert sorted(by_format.column("source_format").to_pylist()) == sorted(imported)
        again = w.import_logs(AGENT_LOGS)
        assert sum(f["imported"] for f in again["formats"]) == 0

    # The same summary as `epistore import --summary-format json` (timing aside).
    cli = json.loads(run_epistore("--store", tmp_path / "cli", "import", "--summary-format", "json",
                                  "--quiet", AGENT_LOGS).stdout)
    for s in (summary, cli):
        s.pop("seconds"), s.pop("warnings", None)
    assert summary == cli


def test_search_and_messages_same_rows_as_cli(tmp_path):
    """`db.search` gives the rows `epistore search --format json` gives, `messages` reads
    through `db.sql`, and hits join with the trace tables."""
    store = tmp_path / "content"
    with epistore.open(store, write=True) as w:
        w.import_logs(AGENT_LOGS)
        for query, where in [('"No module named pytest"', None), ("test", "source_format = 'codex'"),
                             ("test AND kind:output", None)]:
            hits = w.search(query, where=where, limit=50)
            args = ["--store", store, "search", "--format", "json", "--limit", "50", query]
            if where:
                args += ["--where", where]
            out = run_epistore(*args).stdout
            cli = json.loads(out) if out.strip() else []
            assert hits.column_names == ["episode_id", "seq", "kind", "tool", "snippet", "score"]
            assert hits.to_pylist() == cli, query
        why = w.search('"No module named pytest"').to_pylist()
        assert len(why) == 1 and why[0]["kind"] == "output" and "«pytest»" in why[0]["snippet"]
        row = w.sql(
            "SELECT t.tool, t.output_text FROM tools t WHERE t.episode_id = '%s' AND t.seq = %d"
            % (why[0]["episode_id"], why[0]["seq"])
        ).to_pylist()
        assert "No module named pytest" in row[0]["output_text"]
        said = w.sql("SELECT role, count(*) AS n FROM messages GROUP BY role").to_pylist()
        assert {r["role"] for r in said} >= {"user", "assistant", "tool"}
        with pytest.raises(epistore.Error, match="search"):
            w.search("x" * 5000)


def test_import_logs_out_writes_packages(tmp_path, db):
    out = tmp_path / "packages"
    summary = db.import_logs(AGENT_LOGS, out=out, model="m-test")
    assert sum(f["imported"] for f in summary["formats"]) >= 5
    assert len(list(out.rglob("manifest.json"))) == sum(f["imported"] for f in summary["formats"])


# ------------------------------------------------- metrics and leaderboards


@pytest.mark.parametrize("args, kwargs", [
    ((), {}),
    (("--by", "model"), {"by": ["model"]}),
    (("--by", "model,harness_level", "--all"), {"by": "model,harness_level", "all": True}),
    (("--by", "", "--where", "harness_level = 'H2'"), {"by": [], "where": "harness_level = 'H2'"}),
    (("--by", "model", "--ci"), {"by": "model", "ci": True}),
    (("--by", "harness_level", "--ci", "--all", "--replicates", "200", "--seed", "7"),
     {"by": "harness_level", "ci": True, "all": True, "replicates": 200, "seed": 7}),
], ids=["default", "model", "all", "where", "ci", "ci-all"])
def test_metrics_same_rows_as_cli(epi, db, args, kwargs):
    expected = json.loads(epi.run("metrics", *args, "--format", "json").stdout)
    got = db.metrics(**kwargs)
    assert got.num_rows == len(expected) > 0
    assert got.column_names == list(expected[0])
    rows = got.to_pylist()
    for i, (r, e) in enumerate(zip(rows, expected)):
        for k in e:
            ok = same_number(r[k], e[k]) if isinstance(e[k], (int, float)) and not isinstance(e[k], bool) else r[k] == e[k]
            assert ok, f"row {i} {k}: got {r[k]!r}, CLI {e[k]!r}"


def test_metrics_sql_is_the_clis(epi):
    assert epistore.metrics_sql("model") == epi.run("metrics", "--by", "model", "--show-sql").stdout.rstrip("\n")


@pytest.mark.parametrize("fmt", ["md", "html", "json", "csv"])
def test_leaderboard_same_text_as_cli(epi, db, fmt, tmp_path):
    args = ("--metric", "sound_completion", "--by", "model", "--format", fmt)
    expected = epi.run("leaderboard", *args).stdout
    got = db.leaderboard("sound_completion", by="model", format=fmt)
    assert got == expected
    out = tmp_path / f"board.{fmt}"
    assert db.leaderboard("sound_completion", by="model", format=fmt, out=out) == expected
    assert out.read_text() == expected


@pytest.mark.parametrize("errors", ["fail", "exclude"])
def test_leaderboard_errors_rule_is_the_clis(epi, db, errors):
    expected = epi.run("leaderboard", "--metric", "resolve_rate", "--errors", errors, "--format", "json").stdout
    got = db.leaderboard("resolve_rate", format="json", errors=errors)
    assert got == expected
    board = json.loads(got)
    assert board["errors"]["rule"] == errors and board["errors"]["chosen"] == "given"
    assert board["metric"] == ("pass_rate_all" if errors == "fail" else "pass_rate")
    with pytest.raises(epistore.Error, match="errors must be"):
        db.leaderboard("pass_rate", errors="sometimes")


def test_leaderboard_table_is_the_boards_entries(epi, db):
    board = json.loads(epi.run("leaderboard", "--metric", "avs_rate", "--by", "model,harness_level",
                               "--format", "json").stdout)
    table = db.leaderboard("avs_rate", by=["model", "harness_level"], format="table")
    rows = table.to_pylist()
    assert len(rows) == len(board["entries"]) > 1
    for row, entry in zip(rows, board["entries"]):
        assert row["entry"] == entry["label"] and row["rank"] == entry["rank"]
        assert row["model"] == entry["key"]["model"] and row["harness_level"] == entry["key"]["harness_level"]
        for k in ("value", "lo", "hi", "n"):
            assert same_number(row[k], entry[k]), (k, row[k], entry[k])
        assert row["episode_ids"] == entry["episode_ids"]
        assert row["tie_group"] == entry["tie_group"]


# ------------------------------------------------------- other engines


def test_polars_duckdb_pandas_read_results(db, expected_cell_metrics, metric_specs):
    columns = ["episodes"] + [name for name, _, _ in metric_specs]
    t = db.sql("SELECT * FROM cell_metrics")
    assert_cells_match(pl.from_arrow(t).to_dicts(), expected_cell_metrics, columns, "polars")
    con = duckdb.connect()
    con.register("t", t)
    assert_cells_match(duck_rows(con, "SELECT * FROM t"), expected_cell_metrics, columns, "duckdb")
    frame = t.to_pandas()
    assert len(frame) == len(expected_cell_metrics) and list(frame.columns) == t.column_names
    # A stream, read by DuckDB batch by batch.
    r = db.sql("SELECT * FROM episodes", stream=True)
    [(n,)] = duckdb.sql("SELECT count(*) FROM r").fetchall()
    assert n == db.sql("SELECT count(*) AS n FROM episodes").column("n")[0].as_py()
    # The native result object itself speaks the PyCapsule interface.
    assert pl.DataFrame(db._db.sql("SELECT * FROM checks")).height == db.sql("SELECT * FROM checks").num_rows
    nested = pl.from_arrow(db.sql("SELECT requirements, ts FROM checks"))
    assert nested.schema["requirements"] == pl.List(pl.String)
    assert isinstance(nested.schema["ts"], pl.Datetime)


def test_duckdb_computes_cell_metrics_from_the_parquet_export(epi, db, tmp_path, metric_specs):
    """DuckDB runs the text of queries/cell_metrics.sql over the exported episode_facts
    Parquet and gets what `db.sql("SELECT * FROM cell_metrics")` gives."""
    path = tmp_path / "episode_facts.parquet"
    epi.export("--table", "episode_facts", "--format", "parquet", "--out", path)
    con = duckdb.connect()
    duckdb_source(con, "parquet", path, "episode_facts")
    theirs = duck_rows(con, CELL_METRICS_SQL.read_text())
    ours = db.sql("SELECT * FROM cell_metrics")
    assert [k for k in theirs[0]] == ours.column_names
    columns = [c for c in ours.column_names if c not in ("model", "harness_level", "task")]
    assert_cells_match(theirs, ours.to_pylist(), columns, "duckdb cell_metrics.sql")
    assert any(r["selective_risk"] is None for r in theirs)


# ------------------------------------------------------------- the command


def test_the_command_line_is_in_the_package(epi):
    run = lambda *args: subprocess.run([sys.executable, "-m", "epistore._cli", *map(str, args)],
                                       capture_output=True, text=True, timeout=300)
    help_ = run("--help")
    assert help_.returncode == 0 and "Usage: epistore" in help_.stdout, help_
    query = "SELECT model, count(*) AS n FROM episodes GROUP BY model ORDER BY model"
    out = run("--store", epi.store, "sql", "--format", "json", query)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == epi.sql(query)
    bad = run("--store", epi.store, "sql", "SELEC 1")
    assert bad.returncode == 2 and bad.stderr.startswith("error: ")
    script = shutil.which("epistore", path=str(Path(sys.executable).parent))
    if script:  # installed with pip: the console script
        assert subprocess.run([script, "--version"], capture_output=True, text=True).stdout.startswith("epistore")


def test_ten_thousand_units_in_one_session_keep_memory_flat(tmp_path):
    """No planning state outlives its import (issue 26: the importers kept Inspect's
    archives, OpenHands' spans and aider's index in process-wide caches, so a long
    Python session grew with every file it ever read). Ten rounds of about 1,000 units,
    each round new files (a trajectory corpus of 1,000 rows, an Inspect archive, an
    OpenHands output, an aider history), written as packages and removed: memory after
    the tenth round is where it was after the second."""
    real = REPO / "tests" / "fixtures" / "real"
    row = json.loads((real / "trajectories" / "mini-coder-trajs-400k" / "sample.trajectories.jsonl")
                     .read_text().splitlines()[0])
    others = [real / "inspect" / "log_streaming.eval", real / "openhands" / "multi_swe_bench_output.jsonl",
              real / "aider" / "chat-history.first-sessions.md"]
    db = epistore.open(tmp_path / "unused", write=True)
    rss, units = [], 0
    for r in range(10):
        logs = tmp_path / f"logs-{r}"
        logs.mkdir()
        with open(logs / "corpus.trajectories.jsonl", "w") as f:
            for i in range(1000):
                row["instance_id"] = f"round{r}__task-{i}"
                f.write(json.dumps(row) + "\n")
        for o in others:
            shutil.copy(o, logs / (f"r{r}-" + o.name if o.suffix != ".md" else ".aider.chat.history.md"))
        out = tmp_path / f"out-{r}"
        summary = db.import_logs(logs, out=out, model="m-test")
        found = sum(f["found"] for f in summary["formats"])
        imported = {f["source_format"]: f["imported"] for f in summary["formats"]}
        assert imported["trajectories"] == 1000 and imported["inspect"] >= 1 and imported["aider"] >= 1, imported
        units += found
        shutil.rmtree(out)
        shutil.rmtree(logs)
        gc.collect()
        rss.append(_rss_mb())
    db.close()
    assert units >= 10_000, units
    growth = max(rss[2:]) - rss[1]
    assert growth < 64, f"RSS grew {growth:.0f} MB over rounds 3-10: {[round(x) for x in rss]}"


def test_import_logs_reads_a_parquet_corpus_with_a_mapping(tmp_path):
    """A trajectory corpus as its publisher ships it (Parquet, its own column names),
    imported from Python with a mapping file naming the columns."""
    import pyarrow.parquet as pq
    rows = [json.loads(l) for l in (REPO / "tests" / "fixtures" / "real" / "trajectories" / "swe-smith-trajectories"
                                     / "sample.trajectories.jsonl").read_text().splitlines() if l.strip()]
    renamed = [{"conv": r["messages"], "task": r["instance_id"], "run": r["traj_id"], "ok": r["resolved"],
                "model_name": r["model"]} for r in rows]
    pq.write_table(pa.Table.from_pylist(renamed), tmp_path / "train-00000-of-00001.parquet")
    mapping = tmp_path / "mapping.json"
    mapping.write_text(json.dumps({"messages": "conv", "instance_id": "task", "run_id": "run", "outcome": "ok"}))
    with epistore.open(tmp_path / "store", write=True) as w:
        without = w.import_logs(tmp_path / "train-00000-of-00001.parquet")
        assert "no messages column" in without["refused"][0]["reason"], without
        summary = w.import_logs(tmp_path / "train-00000-of-00001.parquet", mapping=mapping)
        assert summary["refused"] == [], summary["refused"]
        got = w.sql("SELECT episode, task, correct FROM episodes ORDER BY episode").to_pylist()
    assert [(g["episode"], g["task"], g["correct"]) for g in got] == sorted(
        (r["traj_id"], r["instance_id"], bool(r["resolved"])) for r in rows)
