"""`epistore serve`: the read-only Arrow Flight SQL endpoint, through ADBC.

Starts `epistore serve --addr 127.0.0.1:0 --token secret` on the session
store, reads the port from its `listening on grpc://HOST:PORT` line and talks
to it with the ADBC Flight SQL driver. Skipped while `serve` is not built.
"""

from __future__ import annotations

import queue
import re
import subprocess
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from conftest import assert_cells_match, epistore_bin, serve_available

_SERVE_OK, _SERVE_WHY = serve_available()
pytestmark = pytest.mark.skipif(not _SERVE_OK, reason=_SERVE_WHY or "epistore serve unavailable")

flightsql = pytest.importorskip("adbc_driver_flightsql.dbapi")
adbc = pytest.importorskip("adbc_driver_manager")

TOKEN = "secret"
LISTENING = re.compile(r"listening on grpc://(?P<host>[^\s:]+):(?P<port>\d+)")
STARTUP_TIMEOUT = 60.0


class Server:
    """One `epistore serve` process; stdout read on a thread, stderr to a file."""

    def __init__(self, store: Path, addr: str, token: str | None, log: Path):
        argv = [epistore_bin(), "--store", str(store), "serve", "--addr", addr]
        if token is not None:
            argv += ["--token", token]
        self.argv = argv
        self.log = log
        self._stderr = open(log, "w")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stdout: list[str] = []
        self.pump = threading.Thread(target=self._pump, daemon=True)
        self.pump.start()

    def _pump(self):
        for line in self.proc.stdout:
            self.stdout.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def wait_listening(self, timeout: float = STARTUP_TIMEOUT) -> str:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no `listening on` line within {timeout}s: {self.output()}")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                self.proc.wait(timeout=10)
                raise AssertionError(f"serve exited {self.proc.returncode} before listening: {self.output()}")
            m = LISTENING.search(line)
            if m:
                return f"grpc://{m['host']}:{m['port']}"

    def output(self) -> str:
        self._stderr.flush()
        return f"argv={self.argv}\nstdout:\n{''.join(self.stdout)}\nstderr:\n{self.log.read_text()}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._stderr.close()


@pytest.fixture(scope="module")
def server(epi, tmp_path_factory):
    log = tmp_path_factory.mktemp("serve") / "serve.stderr"
    srv = Server(epi.store, "127.0.0.1:0", TOKEN, log)
    try:
        srv.uri = srv.wait_listening()
        port = int(srv.uri.rsplit(":", 1)[1])
        assert port != 0, "serve printed port 0 instead of the port it bound"
        yield srv
    finally:
        srv.stop()


def connect(uri: str, token: str | None = TOKEN):
    db_kwargs = {}
    if token is not None:
        db_kwargs["adbc.flight.sql.authorization_header"] = f"Bearer {token}"
    return flightsql.connect(uri, db_kwargs=db_kwargs, autocommit=True)


@pytest.fixture(scope="module")
def conn(server):
    c = connect(server.uri)
    yield c
    c.close()


def query(conn, sql: str) -> pa.Table:
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetch_arrow_table()


# ------------------------------------------------------------------ reads


def test_cell_metrics_same_rows_as_cli(epi, conn):
    sql = "SELECT * FROM cell_metrics ORDER BY model, harness_level, task"
    expected = epi.sql(sql)
    table = query(conn, sql)
    assert table.column_names == list(expected[0]), "column names/order differ"
    got = table.to_pylist()
    keys = ("model", "harness_level", "task")
    assert [tuple(r[k] for k in keys) for r in got] == [tuple(r[k] for k in keys) for r in expected]
    numeric = [c for c in expected[0] if c not in keys]
    assert_cells_match(got, expected, numeric, "flight sql cell_metrics")
    # Both sides NULL where the denominator is zero.
    assert any(r["selective_risk"] is None for r in got)


def test_same_snapshot_as_cli(epi, conn):
    sql = "SELECT value FROM epistore_info WHERE key = 'snapshot_seq'"
    assert query(conn, sql).to_pylist() == epi.sql(sql)


def test_episodes_as_arrow_table(epi, conn):
    expected = epi.sql("SELECT * FROM episodes")
    table = query(conn, "SELECT * FROM episodes")
    assert isinstance(table, pa.Table)
    assert table.num_rows == len(expected)
    assert table.column_names == list(expected[0])


def test_episodes_types_match_arrow_export(epi, conn, tmp_path):
    """The wire schema is the export's schema (nested and typed columns intact)."""
    path = tmp_path / "episodes.arrow"
    epi.export("--table", "episodes", "--format", "arrow", "--out", path)
    with ipc.open_file(path) as reader:
        exported = reader.schema
    served = query(conn, "SELECT * FROM episodes").schema
    assert [(f.name, f.type) for f in served] == [(f.name, f.type) for f in exported]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT upper('x') AS t",
        "SELECT repeat('x', 3) || task AS t, 1 + 1 AS two FROM episodes",
        "SELECT count(*) AS n FROM episodes",
    ],
)
def test_computed_columns_keep_the_announced_schema(conn, sql):
    """The physical plan knows a constant is never null; the schema the statement
    announced (FlightInfo, prepared statement) says nullable. Batches are sent under the
    announced one: ADBC refused the result ("endpoint 0 returned inconsistent schema")."""
    table = query(conn, sql)
    assert table.num_rows >= 1
    with conn.cursor() as cur:
        cur.adbc_prepare(sql)
        cur.execute(sql)
        assert cur.fetch_arrow_table().num_rows == table.num_rows


def test_pandas_and_polars_frames(conn):
    sql = "SELECT model, harness_level, avs_rate FROM cell_metrics"
    with conn.cursor() as cur:
        df = cur.execute(sql).fetch_df()
    assert list(df.columns) == ["model", "harness_level", "avs_rate"]
    assert len(df) > 0
    with conn.cursor() as cur:
        frame = cur.execute(sql).fetch_polars()
    assert frame.columns == ["model", "harness_level", "avs_rate"]
    assert frame.height == len(df)


# ------------------------------------------------------- refused statements


def _run_all_paths(conn, sql: str, path: str):
    """Run sql through one client path to completion (fetching any result)."""
    with conn.cursor() as cur:
        if path == "query":
            cur.execute(sql)
            cur.fetch_arrow_table()
        elif path == "update":
            stmt = cur.adbc_statement
            stmt.set_sql_query(sql)
            stmt.execute_update()
        elif path == "prepared":
            cur.adbc_prepare(sql)
            cur.execute(sql)
            cur.fetch_arrow_table()
        else:
            raise ValueError(path)


WRITES = [
    "CREATE TABLE x AS SELECT 1 AS a",
    "CREATE TABLE y (a INT)",
    "CREATE VIEW v AS SELECT 1 AS a",
    "INSERT INTO epistore_info VALUES ('k', 'v')",
    "DELETE FROM episodes",
    "DROP VIEW cell_metrics",
    "DROP TABLE episodes",
]


@pytest.mark.parametrize("path", ["query", "update", "prepared"])
@pytest.mark.parametrize("sql", WRITES)
def test_write_statements_are_refused(epi, conn, sql, path):
    before = epi.info()
    with pytest.raises(adbc.Error):
        _run_all_paths(conn, sql, path)
    # Nothing changed, for the server's own later queries or the store.
    assert query(conn, "SELECT count(*) AS n FROM cell_metrics").column("n")[0].as_py() > 0
    assert query(conn, "SELECT count(*) AS n FROM episodes").column("n")[0].as_py() == len(
        epi.sql("SELECT episode_id FROM episodes"))
    assert epi.info() == before
    for created in ("x", "y", "v"):
        with pytest.raises(adbc.Error):
            query(conn, f"SELECT * FROM {created}")


@pytest.mark.parametrize("path", ["query", "update", "prepared"])
def test_copy_to_is_refused(conn, tmp_path, path):
    target = tmp_path / "x.csv"
    with pytest.raises(adbc.Error):
        _run_all_paths(conn, f"COPY (SELECT 1 AS a) TO '{target}'", path)
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []
    assert_alive(conn)


def assert_alive(conn):
    """The refusal came from the server, which still answers."""
    assert query(conn, "SELECT 1 AS a").to_pylist() == [{"a": 1}]


def test_bulk_ingest_is_refused(conn):
    data = pa.table({"a": [1]})
    for table, mode in (("x_ingest", "create"), ("epistore_info", "append")):
        with conn.cursor() as cur, pytest.raises(adbc.Error):
            cur.adbc_ingest(table, data, mode=mode)
    assert_alive(conn)
    with pytest.raises(adbc.Error):
        query(conn, "SELECT * FROM x_ingest")


FILE_READS = [
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM '/etc/passwd'",
    "SELECT * FROM read_parquet('/etc/passwd')",
    "SELECT * FROM read_json('/etc/passwd')",
    "CREATE EXTERNAL TABLE pw (line VARCHAR) STORED AS CSV LOCATION '/etc/passwd'",
]


@pytest.mark.parametrize("path", ["query", "update", "prepared"])
@pytest.mark.parametrize("sql", FILE_READS)
def test_file_reading_statements_are_refused(conn, sql, path):
    with pytest.raises(adbc.Error) as err:
        _run_all_paths(conn, sql, path)
    assert "root:" not in str(err.value), "file content leaked into the error message"
    with pytest.raises(adbc.Error):
        query(conn, "SELECT * FROM pw")
    assert_alive(conn)


# ----------------------------------------------------------------- auth


def assert_unauthenticated(err: BaseException):
    """Refused for the credentials, not for being unreachable."""
    code = getattr(err, "status_code", None)
    text = str(err).lower()
    assert code != adbc.AdbcStatusCode.IO and "connection refused" not in text, f"server unreachable: {err}"
    assert code == adbc.AdbcStatusCode.UNAUTHENTICATED or "unauthenticated" in text or "wrong token" in text, (
        f"expected an authentication error, got {type(err).__name__} {code}: {err}"
    )


def test_wrong_token_is_refused(server):
    with pytest.raises(adbc.Error) as err:
        with connect(server.uri, token="not-the-secret") as c:
            query(c, "SELECT 1 AS a")
    assert_unauthenticated(err.value)


def test_missing_token_is_refused(server):
    with pytest.raises(adbc.Error) as err:
        with connect(server.uri, token=None) as c:
            query(c, "SELECT 1 AS a")
    assert_unauthenticated(err.value)


def test_wrong_token_via_basic_auth_is_refused(server):
    with pytest.raises(adbc.Error) as err:
        c = flightsql.connect(server.uri, db_kwargs={"username": "analyst", "password": "not-the-secret"},
                              autocommit=True)
        try:
            query(c, "SELECT 1 AS a")
        finally:
            c.close()
    assert_unauthenticated(err.value)


def test_right_token_still_works(server):
    with connect(server.uri) as c:
        assert query(c, "SELECT 1 AS a").to_pylist() == [{"a": 1}]


def test_public_address_without_token_refuses_to_start(epi, tmp_path):
    srv = Server(epi.store, "0.0.0.0:0", None, tmp_path / "public.stderr")
    try:
        try:
            srv.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"serve on 0.0.0.0 without --token kept running: {srv.output()}")
        srv.pump.join(timeout=5)  # all of stdout read
        out = srv.output()
        assert srv.proc.returncode != 0, out
        assert not any(LISTENING.search(line) for line in srv.stdout), out
        assert "--token" in out, out
    finally:
        srv.stop()


# ------------------------------------------------- the catalog, as a BI tool browses it

# The names a query can use: every table and view of the session (internal `__all_*`
# tables left out), as `information_schema` lists them.
def _session_tables(epi) -> dict[str, str]:
    rows = epi.sql(
        "SELECT table_name, table_type FROM information_schema.tables "
        "WHERE table_schema = 'public' AND table_name NOT LIKE '\\_\\_%'"
    )
    return {r["table_name"]: ("VIEW" if r["table_type"] == "VIEW" else "TABLE") for r in rows}


def epi_version() -> str:
    out = subprocess.run([epistore_bin(), "--version"], capture_output=True, text=True, check=True).stdout
    return out.split()[-1]


def test_get_info_names_the_server(conn):
    info = conn.adbc_get_info()
    assert info["vendor_name"] == "epistore"
    assert info["vendor_version"] == epi_version()


def test_get_table_types(conn):
    assert sorted(conn.adbc_get_table_types()) == ["TABLE", "VIEW"]


@pytest.mark.parametrize("depth", ["catalogs", "db_schemas", "tables", "all"])
def test_get_objects_at_every_depth(epi, conn, depth):
    objects = conn.adbc_get_objects(depth=depth).read_all().to_pylist()
    assert [c["catalog_name"] for c in objects] == ["epistore"]
    schemas = objects[0]["catalog_db_schemas"]
    if depth == "catalogs":
        assert not schemas
        return
    assert [s["db_schema_name"] for s in schemas] == ["public"]
    tables = schemas[0]["db_schema_tables"]
    if depth == "db_schemas":
        assert not tables
        return
    listed = {t["table_name"]: t["table_type"] for t in tables}
    assert listed == _session_tables(epi)
    assert listed["episodes"] == "TABLE" and listed["cell_metrics"] == "VIEW"
    if depth == "all":
        columns = {t["table_name"]: [c["column_name"] for c in t["table_columns"]] for t in tables}
        assert columns["episodes"] == list(epi.sql("SELECT * FROM episodes LIMIT 1")[0])
        assert "sound_completion" in columns["cell_metrics"]


def test_get_objects_filters(epi, conn):
    objects = conn.adbc_get_objects(depth="tables", table_name_filter="cell\\_%").read_all().to_pylist()
    names = [t["table_name"] for t in objects[0]["catalog_db_schemas"][0]["db_schema_tables"]]
    assert names == ["cell_metrics"]
    objects = conn.adbc_get_objects(depth="tables", table_types_filter=["VIEW"]).read_all().to_pylist()
    views = {t["table_name"] for t in objects[0]["catalog_db_schemas"][0]["db_schema_tables"]}
    assert views == {n for n, kind in _session_tables(epi).items() if kind == "VIEW"}
    objects = conn.adbc_get_objects(depth="tables", db_schema_filter="nope").read_all().to_pylist()
    assert not objects[0]["catalog_db_schemas"]


@pytest.mark.parametrize("name", ["episodes", "checks", "cell_metrics", "verifier_pairs", "episode_facts"])
def test_get_table_schema_of_tables_and_views(conn, name):
    schema = conn.adbc_get_table_schema(name)
    served = query(conn, f"SELECT * FROM {name} LIMIT 0").schema
    assert [(f.name, f.type) for f in schema] == [(f.name, f.type) for f in served]


# ------------------------------------------------- parameters and prepared statements


@pytest.mark.parametrize(
    "sql, params",
    [
        ("SELECT count(*) AS n FROM episodes WHERE harness_level = ?", ("H3",)),
        ("SELECT count(*) AS n FROM episodes WHERE final_revision >= ?", (1,)),
        ("SELECT count(*) AS n FROM episodes WHERE harness_level = $1 AND final_revision >= $2", ("H3", 0)),
        ("SELECT count(*) AS n FROM cell_metrics WHERE coalesce(sound_completion, 0) >= ?", (0.5,)),
        ("SELECT count(*) AS n FROM episodes WHERE has_patch = ?", (True,)),
    ],
)
def test_parameterised_queries(epi, conn, sql, params):
    """A string, an integer, a float and a boolean parameter, `?` and `$n` spellings:
    each answers what the statement with the values written in answers."""
    with conn.cursor() as cur:
        cur.execute(sql, params)
        got = cur.fetchall()[0][0]
    # The same statement with the values written in, through the CLI.
    literal = sql
    for i, value in reversed(list(enumerate(params, 1))):
        text = f"'{value}'" if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)
        literal = literal.replace(f"${i}", text)
    for value in params:
        text = f"'{value}'" if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)
        literal = literal.replace("?", text, 1)
    assert got == epi.sql(literal)[0]["n"]
    assert got > 0, "a parameter that matches nothing proves little"


def test_prepared_statement_executed_twice_with_different_parameters(epi, conn):
    sql = "SELECT episode FROM episodes WHERE harness_level = ? ORDER BY episode"
    with conn.cursor() as cur:
        cur.adbc_prepare(sql)
        cur.execute(sql, ("H0",))
        h0 = [r[0] for r in cur.fetchall()]
        cur.execute(sql, ("H2",))
        h2 = [r[0] for r in cur.fetchall()]
    assert h0 == [r["episode"] for r in epi.sql("SELECT episode FROM episodes WHERE harness_level = 'H0' ORDER BY episode")]
    assert h2 == [r["episode"] for r in epi.sql("SELECT episode FROM episodes WHERE harness_level = 'H2' ORDER BY episode")]
    assert h0 and h2 and h0 != h2


def test_prepared_statement_parameter_schema(conn):
    with conn.cursor() as cur:
        cur.adbc_prepare("SELECT episode FROM episodes WHERE harness_level = $1 AND final_revision > $2")
        schema = pa.Schema._import_from_c_capsule(cur.adbc_statement.get_parameter_schema().__arrow_c_schema__())
    assert schema.names == ["$1", "$2"]
    assert schema.field("$1").type == pa.string() and schema.field("$2").type == pa.int64()


def test_polars_read_database(epi, conn):
    pl = pytest.importorskip("polars")
    frame = pl.read_database("SELECT harness_level, posture FROM episodes ORDER BY harness_level, posture", connection=conn)
    expected = epi.sql("SELECT harness_level, posture FROM episodes ORDER BY harness_level, posture")
    assert frame.to_dicts() == expected


def test_catalog_calls_need_the_token(server):
    with connect(server.uri, token="wrong") as c, pytest.raises(adbc.Error) as err:
        c.adbc_get_objects(depth="tables").read_all()
    assert_unauthenticated(err.value)


def test_sqlalchemy_lists_the_tables(epi, server):
    """A catalog-browsing client beyond ADBC: SQLAlchemy with the Flight SQL dialect of
    `flightsql-dbapi` (what Superset and notebooks' %sql use)."""
    sqlalchemy = pytest.importorskip("sqlalchemy")
    pytest.importorskip("flightsql")
    host_port = server.uri.removeprefix("grpc://")
    engine = sqlalchemy.create_engine(f"datafusion://{host_port}?insecure=true&token={TOKEN}")
    inspector = sqlalchemy.inspect(engine)
    assert inspector.get_schema_names() == ["public"]
    assert set(inspector.get_table_names()) | set(inspector.get_view_names()) >= {"episodes", "cell_metrics"}
    columns = [c["name"] for c in inspector.get_columns("episodes")]
    assert columns == list(epi.sql("SELECT * FROM episodes LIMIT 1")[0])
    with engine.connect() as c:
        n = c.execute(sqlalchemy.text("SELECT count(*) FROM episodes")).scalar()
    assert n == len(epi.sql("SELECT episode_id FROM episodes"))


def test_a_statement_too_deep_is_refused_and_the_server_lives(conn):
    """A 3,000-way UNION ALL once overflowed the server's stack and killed it for every
    client; now it is refused with the limit it broke."""
    deep = " UNION ALL ".join(f"SELECT {i} AS a" for i in range(3000))
    for path in ("query", "prepared"):
        with pytest.raises(adbc.Error) as err:
            _run_all_paths(conn, deep, path)
        assert "statement refused" in str(err.value)
    assert_alive(conn)
