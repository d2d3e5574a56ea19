"""`epistore export` read back by pyarrow, polars and DuckDB.

Every export format of `episode_facts` (Arrow IPC, Parquet, CSV, JSON Lines and
the hive-partitioned Parquet dataset of `export --all`) must let each engine
reproduce the `cell_metrics` view exactly: pooled sums of per-episode
numerators over pooled sums of denominators, NULL for a zero denominator.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.dataset as ds
import pyarrow.ipc as ipc
import pyarrow.json as pa_json
import pyarrow.parquet as pq
import pytest

from conftest import KEYS, assert_cells_match

FORMATS = ("arrow", "parquet", "csv", "jsonl", "hive")
ENGINES = ("pyarrow", "polars", "duckdb")
FILE_FORMATS = ("arrow", "parquet", "csv", "jsonl")
# Ratios that must be among the ones checked (selective_risk has NULL cells).
REQUIRED = {"avs_rate", "coverage", "selective_risk", "sound_completion",
            "verification_autonomy", "stale_check_rate"}


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("exports")


@pytest.fixture(scope="module")
def exported(epi, out) -> dict[str, Path]:
    """episode_facts and checks in every single-file format, plus `--all`."""
    paths = {}
    for table in ("episode_facts", "checks", "cell_metrics"):
        for fmt in FILE_FORMATS:
            path = out / f"{table}.{fmt}"
            epi.export("--table", table, "--format", fmt, "--out", path)
            paths[(table, fmt)] = path
    epi.export("--all", "--out", out / "all")
    for table in ("episode_facts", "checks", "cell_metrics"):
        paths[(table, "hive")] = out / "all" / table
    return paths


@pytest.fixture(scope="module")
def manifest(exported, out) -> dict:
    return json.loads((out / "all" / "manifest.json").read_text())


def test_specs_cover_required_metrics(metric_specs, expected_cell_metrics):
    names = {name for name, _, _ in metric_specs}
    assert REQUIRED <= names, f"cell_metrics.sql lost {REQUIRED - names}"
    # Every floating column of the view is one of the parsed ratios.
    floats = {k for row in expected_cell_metrics for k, v in row.items() if isinstance(v, float)}
    assert floats <= names, f"ratio columns not understood by the test: {floats - names}"
    # The data is non-trivial: selective_risk has NULL and non-NULL cells.
    risk = [row["selective_risk"] for row in expected_cell_metrics]
    assert any(v is None for v in risk) and any(v is not None for v in risk)
    assert len({(r["model"], r["harness_level"]) for r in expected_cell_metrics}) >= 8


# ------------------------------------------------------------- the readers


def read_pyarrow(fmt: str, path: Path) -> pa.Table:
    if fmt == "arrow":
        with ipc.open_file(path) as reader:
            return reader.read_all()
    if fmt == "parquet":
        return pq.read_table(path)
    if fmt == "csv":
        return pa_csv.read_csv(path)
    if fmt == "jsonl":
        return pa_json.read_json(path)
    if fmt == "hive":
        return ds.dataset(path, format="parquet", partitioning="hive").to_table()
    raise ValueError(fmt)


def read_polars(fmt: str, path: Path) -> pl.DataFrame:
    if fmt == "arrow":
        return pl.read_ipc(path)
    if fmt == "parquet":
        return pl.read_parquet(path)
    if fmt == "csv":
        return pl.read_csv(path, infer_schema_length=None)
    if fmt == "jsonl":
        return pl.read_ndjson(path, infer_schema_length=None)
    if fmt == "hive":
        return pl.read_parquet(str(path / "**" / "*.parquet"), hive_partitioning=True)
    raise ValueError(fmt)


def duckdb_source(con: duckdb.DuckDBPyConnection, fmt: str, path: Path, name: str) -> None:
    """Make `name` a DuckDB view over the exported file(s)."""
    p = str(path).replace("'", "''")
    if fmt == "arrow":
        # DuckDB has no built-in Arrow IPC file reader (the `arrow` extension
        # needs a download): scan the IPC file's record batches zero-copy.
        with ipc.open_file(path) as reader:
            con.register(f"{name}_ipc", reader.read_all())
        src = f"{name}_ipc"
    elif fmt == "parquet":
        src = f"read_parquet('{p}')"
    elif fmt == "csv":
        src = f"read_csv('{p}', header = true)"
    elif fmt == "jsonl":
        src = f"read_json('{p}', format = 'newline_delimited')"
    elif fmt == "hive":
        src = f"read_parquet('{p}/**/*.parquet', hive_partitioning = true)"
    else:
        raise ValueError(fmt)
    con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM {src}")


# ------------------------------------------------- the metric, per engine


def sum_columns(specs) -> list[str]:
    return sorted({"episodes"} | {c for _, num, den in specs for c in (num, den)})


def cells_pyarrow(table: pa.Table, specs) -> list[dict]:
    g = table.group_by(list(KEYS)).aggregate([(c, "sum") for c in sum_columns(specs)])
    cols = {k: g[k] for k in KEYS}
    cols["episodes"] = g["episodes_sum"]
    for name, num, den in specs:
        n = pc.cast(g[f"{num}_sum"], pa.float64())
        d = pc.cast(g[f"{den}_sum"], pa.float64())
        cols[name] = pc.if_else(pc.equal(d, 0.0), pa.scalar(None, pa.float64()), pc.divide(n, d))
    return pa.table(cols).to_pylist()


def cells_polars(df: pl.DataFrame, specs) -> list[dict]:
    g = df.group_by(list(KEYS)).agg([pl.col(c).sum() for c in sum_columns(specs)])
    ratios = [
        pl.when(pl.col(den) == 0)
        .then(None)
        .otherwise(pl.col(num).cast(pl.Float64) / pl.col(den).cast(pl.Float64))
        .alias(name)
        for name, num, den in specs
    ]
    return g.select(*KEYS, "episodes", *ratios).to_dicts()


def cells_duckdb(con: duckdb.DuckDBPyConnection, view: str, specs) -> list[dict]:
    ratios = ",\n".join(
        f"CAST(sum({num}) AS DOUBLE) / nullif(sum({den}), 0) AS {name}" for name, num, den in specs
    )
    sql = f"""
        SELECT model, harness_level, task, CAST(sum(episodes) AS BIGINT) AS episodes,
               {ratios}
        FROM {view} GROUP BY model, harness_level, task
    """
    return duck_rows(con, sql)


def duck_rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict]:
    """A DuckDB result as a list of dicts (through Arrow, so NULL stays None)."""
    rel = con.sql(sql)
    to_arrow = getattr(rel, "to_arrow_table", None) or rel.arrow
    return to_arrow().to_pylist()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("engine", ENGINES)
def test_episode_facts_reproduce_cell_metrics(engine, fmt, exported, metric_specs, expected_cell_metrics):
    path = exported[("episode_facts", fmt)]
    if engine == "pyarrow":
        rows = cells_pyarrow(read_pyarrow(fmt, path), metric_specs)
    elif engine == "polars":
        rows = cells_polars(read_polars(fmt, path), metric_specs)
    else:
        con = duckdb.connect()
        duckdb_source(con, fmt, path, "episode_facts")
        rows = cells_duckdb(con, "episode_facts", metric_specs)
    columns = ["episodes"] + [name for name, _, _ in metric_specs]
    assert_cells_match(rows, expected_cell_metrics, columns, f"{engine}/{fmt}")


def test_row_counts_and_columns_agree_across_formats(epi, exported):
    expected = epi.sql("SELECT count(*) AS n FROM episode_facts")[0]["n"]
    names = None
    for fmt in FORMATS:
        t = read_pyarrow(fmt, exported[("episode_facts", fmt)])
        assert t.num_rows == expected, fmt
        cols = sorted(t.column_names)
        names = names or cols
        assert cols == names, f"{fmt}: columns differ"


# ---------------------------------------------- nested and typed columns


def _checks_sorted(table: pa.Table) -> pa.Table:
    return table.sort_by([("episode_id", "ascending"), ("seq", "ascending")])


@pytest.mark.parametrize("fmt", ("parquet", "arrow", "jsonl", "hive"))
def test_nested_columns_stay_nested(fmt, exported):
    path = exported[("checks", fmt)]
    t = read_pyarrow(fmt, path)
    assert pa.types.is_list(t.schema.field("requirements").type), t.schema.field("requirements").type
    assert pa.types.is_string(t.schema.field("requirements").type.value_type)

    df = read_polars(fmt, path)
    assert df.schema["requirements"] == pl.List(pl.String)

    con = duckdb.connect()
    duckdb_source(con, fmt, path, "checks")
    (dtype,) = con.execute("SELECT typeof(requirements) FROM checks LIMIT 1").fetchone()
    assert dtype == "VARCHAR[]", dtype

    # Same lists as the Parquet export, row by row.
    ref = _checks_sorted(read_pyarrow("parquet", exported[("checks", "parquet")]))
    got = _checks_sorted(t)
    assert got["requirements"].to_pylist() == ref["requirements"].to_pylist()
    assert any(len(v or []) > 1 for v in ref["requirements"].to_pylist())


def test_csv_carries_nested_values_as_json_text(exported):
    ref = _checks_sorted(read_pyarrow("parquet", exported[("checks", "parquet")]))
    got = _checks_sorted(pa_csv.read_csv(exported[("checks", "csv")]))
    decoded = [None if v is None else json.loads(v) for v in got["requirements"].to_pylist()]
    assert decoded == ref["requirements"].to_pylist()


@pytest.mark.parametrize("fmt", ("parquet", "arrow", "hive"))
def test_timestamps_are_timestamps(fmt, exported):
    path = exported[("checks", fmt)]
    t = read_pyarrow(fmt, path)
    ts = t.schema.field("ts").type
    assert pa.types.is_timestamp(ts), ts
    assert ts.tz in ("UTC", "+00:00"), ts.tz

    assert isinstance(read_polars(fmt, path).schema["ts"], pl.Datetime)

    con = duckdb.connect()
    duckdb_source(con, fmt, path, "checks")
    (dtype,) = con.execute("SELECT typeof(ts) FROM checks LIMIT 1").fetchone()
    assert dtype.startswith("TIMESTAMP"), dtype


def test_jsonl_timestamps_are_the_same_instants(exported):
    ref = _checks_sorted(read_pyarrow("parquet", exported[("checks", "parquet")]))
    got = _checks_sorted(pa_json.read_json(exported[("checks", "jsonl")]))
    ts = got["ts"]
    if not pa.types.is_timestamp(ts.type):
        ts = pc.cast(ts, pa.timestamp("us", tz="UTC"))
    assert pc.cast(ts, pa.timestamp("us", tz="UTC")).to_pylist() == ref["ts"].to_pylist()


# ---------------------------------------------------------------- metadata


def _kv(meta: dict | None) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in (meta or {}).items()}


def test_metadata_records_schema_version_and_snapshot(epi, exported, manifest):
    info = epi.info()
    seq, version = info["snapshot_seq"], info["schema_version"]
    assert version == "epistore-sql/1"
    assert seq == "2", "two ingests should give snapshot 2"

    def check(meta: dict, where: str):
        assert meta.get("epistore.schema_version") == version, (where, meta)
        assert meta.get("epistore.snapshot_seq") == seq, (where, meta)
        assert meta.get("epistore.store_format") == info["store_format"], (where, meta)
        assert "episode_facts" in meta.get("epistore.source", ""), (where, meta)

    with ipc.open_file(exported[("episode_facts", "arrow")]) as reader:
        check(_kv(reader.schema.metadata), "arrow schema")
    pfile = pq.ParquetFile(exported[("episode_facts", "parquet")])
    check(_kv(pfile.schema_arrow.metadata), "parquet arrow schema")
    check(_kv(pfile.metadata.metadata), "parquet key-value metadata")
    for fmt in ("csv", "jsonl"):
        path = exported[("episode_facts", fmt)]
        sidecar = json.loads(Path(f"{path}.epistore.json").read_text())
        check(sidecar["metadata"], f"{fmt} sidecar")
        assert sidecar["rows"] == epi.sql("SELECT count(*) AS n FROM episode_facts")[0]["n"]

    hive = exported[("episode_facts", "hive")]
    # A table of --all is described by the dataset's manifest, not by a file inside
    # its directory (readers such as polars would take that for data).
    assert not [p for p in hive.rglob("*") if p.is_file() and p.suffix != ".parquet"], hive
    for part in sorted(hive.rglob("*.parquet")):
        check(_kv(pq.ParquetFile(part).metadata.metadata), str(part))

    assert manifest["format"] == "epistore-export/1"
    assert manifest["schema_version"] == version
    assert str(manifest["snapshot_seq"]) == seq


# ---------------------------------------------------------------- manifest


def test_manifest_lists_every_table_with_row_counts(epi, exported, manifest, out):
    tables = epi.sql(
        "SELECT table_name, table_type FROM information_schema.tables "
        "WHERE table_schema = 'public' ORDER BY table_name"
    )
    kinds = {r["table_name"]: ("view" if r["table_type"] == "VIEW" else "table") for r in tables}
    listed = {t["name"]: t for t in manifest["tables"]}
    assert set(listed) == set(kinds), (
        f"missing {sorted(set(kinds) - set(listed))}, extra {sorted(set(listed) - set(kinds))}"
    )

    # Row counts from the rows themselves: `SELECT count(*)` is not trusted
    # here (see test_count_star_matches_rows).
    counts = {n: len(epi.sql(f'SELECT * FROM "{n}"')) for n in sorted(kinds)}
    columns: dict[str, list[str]] = {}
    for r in epi.sql(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = 'public' ORDER BY table_name, ordinal_position"
    ):
        columns.setdefault(r["table_name"], []).append(r["column_name"])

    root = out / "all"
    for name, entry in listed.items():
        assert entry["kind"] == kinds[name], name
        assert entry["rows"] == counts[name], f"{name}: manifest {entry['rows']} rows, store {counts[name]}"
        assert [c["name"] for c in entry["columns"]] == columns[name], name
        # Partitioned by the keys the table has (`model_prices` has `model` only); an
        # empty table is written unpartitioned (one empty file with every column).
        keys = [k for k in ("model", "harness_level") if k in columns[name]]
        assert entry["partition_by"] == (keys if counts[name] else []), name

        path = root / entry["path"]
        assert path.exists(), f"{name}: {path} missing"
        if path.is_dir():
            files = sorted(path.rglob("*.parquet"))
            table = ds.dataset(path, format="parquet", partitioning="hive").to_table()
        else:
            files = [path]
            table = pq.read_table(path)
        assert entry["files"] == len(files), f"{name}: manifest {entry['files']} files, found {len(files)}"
        assert table.num_rows == counts[name], f"{name}: read {table.num_rows} rows, store {counts[name]}"
        assert sorted(table.column_names) == sorted(columns[name]), name


# ------------------------------------------------- the view itself exported


@pytest.mark.parametrize("fmt", FORMATS)
def test_cell_metrics_view_export_matches(fmt, exported, metric_specs, expected_cell_metrics):
    rows = read_pyarrow(fmt, exported[("cell_metrics", fmt)]).to_pylist()
    columns = ["episodes"] + [name for name, _, _ in metric_specs]
    assert_cells_match(rows, expected_cell_metrics, columns, f"cell_metrics/{fmt}")


def test_cell_metrics_view_export_polars_duckdb(exported, metric_specs, expected_cell_metrics):
    columns = ["episodes"] + [name for name, _, _ in metric_specs]
    assert_cells_match(read_polars("parquet", exported[("cell_metrics", "parquet")]).to_dicts(),
                       expected_cell_metrics, columns, "polars")
    con = duckdb.connect()
    duckdb_source(con, "hive", exported[("cell_metrics", "hive")], "cm")
    assert_cells_match(duck_rows(con, "SELECT * FROM cm"),
                       expected_cell_metrics, columns, "duckdb hive")


# ------------------------------------------------------------ never overwrite


def _snapshot(path: Path) -> dict[str, tuple]:
    """Every file under path (or path itself) with its size, mtime and hash."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*"))
    snap = {}
    for p in files:
        st = p.stat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        snap[str(p)] = (st.st_size if p.is_file() else 0, st.st_mtime_ns, digest)
    return snap


@pytest.mark.parametrize(
    "target, args",
    [
        (("episode_facts", "parquet"), ("--table", "episodes", "--format", "parquet")),
        (("episode_facts", "csv"), ("--table", "episodes", "--format", "csv")),
        (("episode_facts", "arrow"), ("--query", "SELECT 1 AS x", "--format", "arrow")),
        (("episode_facts", "hive"), ("--table", "episodes", "--partition-by", "model")),
        ("all", ("--all",)),
    ],
    ids=["file-parquet", "file-csv", "file-arrow-query", "partitioned-dir", "all-dir"],
)
def test_existing_out_is_refused(epi, exported, out, target, args):
    path = out / "all" if target == "all" else exported[target]
    before = _snapshot(path)
    sidecar = Path(f"{path}.epistore.json")
    sidecar_before = sidecar.read_bytes() if sidecar.exists() else None
    listing_before = sorted(p.name for p in out.iterdir())

    proc = epi.export(*args, "--out", path, check=False)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "exists" in proc.stderr, proc.stderr
    assert _snapshot(path) == before, "the existing output changed"
    assert (sidecar.read_bytes() if sidecar.exists() else None) == sidecar_before
    assert sorted(p.name for p in out.iterdir()) == listing_before, "stray files left beside --out"


def test_existing_empty_directory_is_refused(epi, tmp_path):
    target = tmp_path / "empty"
    target.mkdir()
    proc = epi.export("--all", "--out", target, check=False)
    assert proc.returncode == 2, proc.stderr
    assert list(target.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]


def test_existing_sidecar_is_not_overwritten(epi, tmp_path):
    out = tmp_path / "facts.csv"
    sidecar = tmp_path / "facts.csv.epistore.json"
    sidecar.write_text("mine\n")
    proc = epi.export("--table", "episode_facts", "--format", "csv", "--out", out, check=False)
    assert sidecar.read_text() == "mine\n"
    assert proc.returncode == 2


def test_null_partition_does_not_collide_with_literal(epi, tmp_path):
    query = ("SELECT * FROM (VALUES (CAST(NULL AS VARCHAR), 1), ('__HIVE_DEFAULT_PARTITION__', 2), "
             "('a/b', 3), ('', 4)) AS t(model, v)")
    out = tmp_path / "p"
    epi.export("--query", query, "--partition-by", "model", "--out", out)
    table = ds.dataset(out, format="parquet", partitioning="hive").to_table()
    assert sorted(table["v"].to_pylist()) == [1, 2, 3, 4]


def test_count_star_matches_rows(epi):
    names = [r["table_name"] for r in epi.sql(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")]
    counts_sql = " UNION ALL ".join(f"SELECT '{n}' AS name, count(*) AS n FROM \"{n}\"" for n in names)
    counts = {r["name"]: r["n"] for r in epi.sql(counts_sql)}
    wrong = {n: (counts[n], len(epi.sql(f'SELECT * FROM "{n}"'))) for n in names}
    wrong = {n: v for n, v in wrong.items() if v[0] != v[1]}
    assert not wrong, f"count(*) vs rows: {wrong}"
