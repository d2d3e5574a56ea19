"""Shared fixtures for the Python interoperability tests of epistore.

The tests drive the already-built CLI (never cargo): the binary comes from
$EPISTORE_BIN, else <repo>/target/debug/epistore.  One session-wide store is
built in a temporary directory from the bundled dataset plus a small
deterministic synthetic population, so every module sees the same numbers.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("EPISTORE_BIN", REPO / "target" / "debug" / "epistore"))
DATASET = REPO / "datasets" / "login-validation"
CELL_METRICS_SQL = REPO / "queries" / "cell_metrics.sql"

# The synthetic population: big enough that every model x harness level cell
# has several tasks and some ratios are NULL (zero denominators).
SYNTH_EPISODES = 120
SYNTH_SEED = 5
SYNTH_OUTPUT_SCALE = 0.05

KEYS = ("model", "harness_level", "task")
TOLERANCE = 1e-12


def epistore_bin(wait: float = 180.0) -> str:
    """The binary's path; waits while it is (briefly) missing during a rebuild."""
    deadline = time.monotonic() + wait
    while not (BIN.is_file() and os.access(BIN, os.X_OK)):
        if time.monotonic() > deadline:
            pytest.fail(f"epistore binary not found at {BIN} (set EPISTORE_BIN)")
        time.sleep(0.5)
    return str(BIN)


def run_epistore(*args, check: bool = True, timeout: float = 300.0, **kwargs):
    """Run the CLI; retries a few times if the binary is being replaced."""
    argv = [epistore_bin(), *map(str, args)]
    for attempt in range(20):
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kwargs)
            break
        except OSError:  # ENOENT / ETXTBSY while the binary is rewritten
            if attempt == 19:
                raise
            time.sleep(0.5)
            argv[0] = epistore_bin()
    if check and proc.returncode != 0:
        raise AssertionError(
            f"`{' '.join(argv)}` exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        )
    return proc


_SERVE_STATUS: tuple[bool, str] | None = None


def serve_available() -> tuple[bool, str]:
    """(True, '') when `epistore serve --help` works, else (False, why)."""
    global _SERVE_STATUS
    if _SERVE_STATUS is None:
        try:
            proc = run_epistore("serve", "--help", check=False, timeout=60)
            if proc.returncode == 0:
                _SERVE_STATUS = (True, "")
            else:
                first = (proc.stderr.strip().splitlines() or ["?"])[0]
                _SERVE_STATUS = (False, f"`epistore serve` is not built yet ({first})")
        except Exception as exc:  # binary missing entirely, ...
            _SERVE_STATUS = (False, f"`epistore serve --help` failed: {exc}")
    return _SERVE_STATUS


class Epistore:
    """The CLI bound to one store directory."""

    def __init__(self, store: Path):
        self.store = Path(store)

    def run(self, *args, check: bool = True, **kwargs):
        return run_epistore("--store", self.store, *args, check=check, **kwargs)

    def sql(self, query: str) -> list[dict]:
        return json.loads(self.run("sql", "--format", "json", query).stdout)

    def export(self, *args, check: bool = True):
        return self.run("export", "--quiet", *args, check=check)

    def info(self) -> dict[str, str]:
        return {r["key"]: r["value"] for r in self.sql("SELECT key, value FROM epistore_info")}


def cell_metric_specs() -> list[tuple[str, str, str]]:
    """(metric, numerator column, denominator column) for every ratio of the
    cell_metrics view, read from queries/cell_metrics.sql (the definition)."""
    text = CELL_METRICS_SQL.read_text()
    pattern = re.compile(
        r"(?:CAST\(\s*)?sum\((\w+)\)(?:\s+AS\s+DOUBLE\s*\))?\s*/\s*nullif\(\s*sum\((\w+)\)\s*,\s*0\s*\)\s+AS\s+(\w+)",
        re.IGNORECASE,
    )
    specs = [(name, num, den) for num, den, name in pattern.findall(text)]
    assert specs, f"no ratio found in {CELL_METRICS_SQL}"
    return specs


def rows_by_cell(rows, keys=KEYS) -> dict[tuple, dict]:
    out = {}
    for row in rows:
        key = tuple(row[k] for k in keys)
        assert key not in out, f"duplicate cell {key}"
        out[key] = row
    return out


def same_number(a, b, tol: float = TOLERANCE) -> bool:
    """NULL == NULL; numbers equal within tol (absolute or relative)."""
    if a is None or b is None:
        return a is None and b is None
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=tol, abs_tol=tol)


def assert_cells_match(actual_rows, expected_rows, columns, label: str, keys=KEYS):
    """Every cell present on both sides, and every listed column equal."""
    actual = rows_by_cell(actual_rows, keys)
    expected = rows_by_cell(expected_rows, keys)
    missing = sorted(set(expected) - set(actual), key=str)
    extra = sorted(set(actual) - set(expected), key=str)
    assert not missing and not extra, f"{label}: cells missing {missing[:5]} extra {extra[:5]}"
    diffs = []
    for key, exp in expected.items():
        act = actual[key]
        for col in columns:
            if not same_number(act.get(col), exp.get(col)):
                diffs.append(f"{key} {col}: got {act.get(col)!r}, epistore {exp.get(col)!r}")
    assert not diffs, f"{label}: {len(diffs)} differences, e.g.\n" + "\n".join(diffs[:10])


@pytest.fixture(scope="session")
def epi(tmp_path_factory) -> Epistore:
    """A store with the bundled dataset and a small synthetic population,
    ingested in two steps (so the snapshot sequence is 2, not the default 1)."""
    root = tmp_path_factory.mktemp("epistore")
    pop = root / "pop"
    run_epistore(
        "synth",
        "--episodes", SYNTH_EPISODES,
        "--out", pop,
        "--seed", SYNTH_SEED,
        "--output-scale", SYNTH_OUTPUT_SCALE,
        "--quiet",
    )
    store = Epistore(root / "store")
    store.run("ingest", "--quiet", DATASET)
    store.run("ingest", "--quiet", pop)
    return store


@pytest.fixture(scope="session")
def metric_specs():
    return cell_metric_specs()


@pytest.fixture(scope="session")
def expected_cell_metrics(epi) -> list[dict]:
    """`epistore sql --format json "SELECT * FROM cell_metrics"`: the reference."""
    rows = epi.sql("SELECT * FROM cell_metrics")
    assert rows, "cell_metrics is empty"
    return rows
