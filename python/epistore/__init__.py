"""epistore: coding-agent episodes in an embedded store, queried with SQL in-process.

The store and its SQL engine (DataFusion) run inside this Python process; results
come back as Arrow data without copies, through the Arrow C stream interface, so
pyarrow, polars, DuckDB and pandas read them directly.

Quick start::

    import epistore

    db = epistore.open(".epistore")                    # read-only, as `epistore sql`
    t = db.sql("SELECT * FROM cell_metrics")           # a pyarrow.Table
    r = db.sql("SELECT * FROM actions", stream=True)   # a pyarrow.RecordBatchReader
    for batch in r:                                    # batches computed as you read
        ...

    db.metrics(by=["model"])                           # `epistore metrics --by model`
    db.metrics(by=["model"], ci=True)                  # ... --ci: bootstrap intervals
    print(db.leaderboard("sound_completion", by="model", format="md"))
    db.tables()                                        # every table and view
    db.schema("episodes")                              # a pyarrow.Schema

    w = epistore.open("store", write=True)             # created on first use
    w.ingest("runs/")                                  # episode packages -> summary dict
    w.import_logs("~/.claude/projects")                # agent logs -> summary dict

    import polars as pl, duckdb
    pl.from_arrow(t)                                   # no copy
    duckdb.sql("SELECT model, avg(sound_completion) FROM t GROUP BY model")

Errors raise :class:`epistore.Error`; its message is what the ``epistore`` command
line prints after ``error:`` (bad SQL, a refused write, an unknown metric, no store).

Tables: episodes, actions, tools, context, checks, attributions, interventions,
entropy, requirements, fault_locations, epistore_info. Views: cell_metrics,
label_shares, posture_shares, revision_correctness, revision_transitions,
verifier_stats, verifier_pairs, localisation, label_audit, latest_attempts,
episode_facts; table function verifier_pairs_at(c). SQL is DataFusion's dialect and
read-only: COPY, CREATE, INSERT, DROP and SET are refused.

The package also installs the ``epistore`` command (the whole command line of the
binary): run ``epistore --help``.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any, Dict, Iterable, List, Sequence, Union

import pyarrow as pa

from . import _native
from ._native import HEADLINE, METRIC_KEYS, SCHEMA_VERSION, Error

__version__: str = _native.__version__

__all__ = [
    "open",
    "Database",
    "Error",
    "metrics_sql",
    "HEADLINE",
    "METRIC_KEYS",
    "SCHEMA_VERSION",
    "__version__",
]

PathLike = Union[str, "os.PathLike[str]"]
Keys = Union[str, Sequence[str], None]

#: Where the store is when ``open`` is given no path: as the command line, the
#: ``EPISTORE_STORE`` environment variable, else ``.epistore``.
DEFAULT_STORE = ".epistore"


def open(path: PathLike | None = None, write: bool = False) -> "Database":  # noqa: A001
    """Open the store in directory ``path`` and return a :class:`Database`.

    ``path`` defaults to ``$EPISTORE_STORE``, else ``.epistore`` (as the command
    line's ``--store``). Read-only by default, as ``epistore sql`` opens it: any
    number of readers may run while one process writes, and each query sees the
    latest committed snapshot. ``write=True`` opens it for :meth:`Database.ingest`
    and :meth:`Database.import_logs`, creating an empty store on first use; one
    process (one ``Database``) writes at a time.

    Raises :class:`Error` when there is no store at ``path`` (read-only) or it
    cannot be opened::

        >>> epistore.open("/nowhere")
        epistore.Error: opening the store at /nowhere: no store at /nowhere (run `epistore ingest` to create one)
    """
    if path is None:
        path = os.environ.get("EPISTORE_STORE") or DEFAULT_STORE
    return Database(_native.open(_path(path), write))


def metrics_sql(by: Keys = ("model", "harness_level"), where: str | None = None, all: bool = False) -> str:
    """The SQL :meth:`Database.metrics` runs for these arguments (as
    ``epistore metrics --show-sql``): ``queries/cell_metrics.sql`` regrouped by ``by``.
    """
    return _native.metrics_query(_keys(by), where, all)


def _path(p: PathLike) -> str:
    return os.path.expanduser(os.fspath(p))


def _paths(paths: PathLike | Iterable[PathLike]) -> List[str]:
    if isinstance(paths, (str, os.PathLike)):
        return [_path(paths)]
    return [_path(p) for p in paths]


def _keys(by: Keys) -> List[str]:
    """``"model,harness_level"``, ``["model", "harness_level"]``, ``""`` or None."""
    if by is None:
        return []
    if isinstance(by, str):
        return [k.strip() for k in by.split(",") if k.strip()]
    return [str(k) for k in by]


def _reader(stream: Any) -> pa.RecordBatchReader:
    """A pyarrow reader over an object of the Arrow PyCapsule stream interface."""
    from_stream = getattr(pa.RecordBatchReader, "from_stream", None)
    if from_stream is not None:  # pyarrow >= 15
        return from_stream(stream)
    return pa.RecordBatchReader._import_from_c_capsule(stream.__arrow_c_stream__())


def _table(stream: Any) -> pa.Table:
    """Reads a native stream whole; an error met while computing it is an ``Error``."""
    try:
        return _reader(stream).read_all()
    except pa.ArrowException as e:
        message = stream.error()
        if message is None:
            raise
        raise Error(message) from e


def _summary(text: str) -> Dict[str, Any]:
    summary = json.loads(text)
    for warning in summary.get("warnings", []):
        warnings.warn(warning, RuntimeWarning, stacklevel=3)
    return summary


class Database:
    """An open store: SQL over its latest snapshot, metrics, leaderboards, ingest.

    Made by :func:`epistore.open`. Every query runs on the latest committed snapshot:
    after an ingest (by this process or another) the next query sees it. Methods
    release the GIL while they work, so other Python threads run meanwhile. Use it
    as a context manager (or call :meth:`close`) to let go of the store.
    """

    def __init__(self, native: "_native.Database"):
        self._db = native

    # ------------------------------------------------------------------ facts

    @property
    def path(self) -> Path:
        """The store directory."""
        return Path(self._db.path)

    @property
    def writable(self) -> bool:
        """Whether the store was opened with ``write=True``."""
        return self._db.writable

    @property
    def snapshot_seq(self) -> int:
        """The ingest sequence of the latest committed snapshot (``epistore_info``)."""
        return self._db.snapshot_seq

    def __repr__(self) -> str:
        mode = "closed" if self._db.closed else ("write" if self.writable else "read-only")
        return f"<epistore.Database {str(self.path)!r} ({mode})>"

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Let go of the store (a writer lets other processes write again). Results
        already returned stay readable; any further call raises :class:`Error`."""
        self._db.close()

    # -------------------------------------------------------------------- SQL

    def sql(self, query: str, stream: bool = False) -> Union[pa.Table, pa.RecordBatchReader]:
        """Run one read-only SQL statement (DataFusion's dialect).

        Returns a ``pyarrow.Table``, or with ``stream=True`` a
        ``pyarrow.RecordBatchReader`` whose batches DataFusion computes only as you
        read them, so memory stays bounded however large the result::

            t = db.sql("SELECT model, count(*) AS n FROM episodes GROUP BY model")
            for batch in db.sql("SELECT * FROM actions", stream=True):
                ...

        The rows and types are those of ``epistore sql --format json QUERY``; NULL is
        None. Writes (COPY, CREATE, INSERT, DROP, SET) are refused. Raises
        :class:`Error` with the command line's message for bad SQL; an error met while
        streaming raises ``pyarrow.ArrowInvalid`` from the reader with the same text.
        """
        native = self._db.sql(query)
        return _reader(native) if stream else _table(native)

    def search(self, query: str, where: str | None = None, limit: int = 20) -> pa.Table:
        """Full-text search over what happened in the runs, as ``epistore search``:
        messages, tool output, commands and edit diffs.

        ``query`` takes words (all must match), ``"a phrase"``, AND / OR / NOT and
        field filters (``role:assistant``, ``tool:Bash``, ``kind:output``);
        ``where`` keeps the episodes matching a SQL condition on ``episode_facts``.
        Returns the columns episode_id, seq, kind, tool, snippet (matches in «»)
        and score, best first: the same rows as
        ``db.sql("SELECT * FROM search('QUERY', LIMIT)")``, so hits join with
        ``episodes`` on ``episode_id`` and with the trace tables on ``seq``::

            db.search('"rate limit"', where="model = 'gpt-5'").to_pandas()
        """
        return _table(self._db.search(query, where, limit))

    def tables(self) -> List[str]:
        """The names of every table and view (``information_schema.tables``), sorted."""
        return self._db.tables()

    def schema(self, name: str) -> pa.Schema:
        """The schema of a table or view, e.g. ``db.schema("episodes")``."""
        native = self._db.schema(name)
        if hasattr(pa.Schema, "_import_from_c_capsule"):
            return pa.Schema._import_from_c_capsule(native.__arrow_c_schema__())
        return pa.schema(native)

    # ------------------------------------------------------- metrics, boards

    def metrics(
        self,
        by: Keys = ("model", "harness_level"),
        where: str | None = None,
        all: bool = False,
        ci: bool = False,
        replicates: int | None = None,
        seed: int | None = None,
    ) -> pa.Table:
        """The population metrics, as ``epistore metrics``: pooled over ``by`` (any of
        model, harness_level, task, cluster, source_format; ``[]`` pools everything),
        over the episodes matching ``where`` (a SQL condition on ``episode_facts``).

        Every ratio is a sum of numerators over a sum of denominators; a zero
        denominator is NULL. ``all=True``: every metric column, not only the headline
        ones. ``ci=True``: 95% task-cluster bootstrap intervals (``metrics --ci``), one
        row per entry and metric: the keys, metric, value, lo, hi, n, clusters,
        replicates_used, replicates_dropped, seed (``replicates`` defaults to 2000,
        ``seed`` to the command line's)::

            db.metrics(by="model", ci=True).to_pandas()
        """
        return _table(self._db.metrics(_keys(by), where, all, ci, replicates, seed))

    def leaderboard(
        self,
        metric: str,
        by: Keys = "model",
        where: str | None = None,
        format: str = "md",
        out: PathLike | None = None,
        better: str | None = None,
        alpha: float = 0.05,
        replicates: int | None = None,
        seed: int | None = None,
        errors: str | None = None,
    ) -> Union[str, pa.Table]:
        """A leaderboard on ``metric``, as ``epistore leaderboard``: entries ranked with
        task-cluster bootstrap intervals, paired sign-flip tests against the entry
        above (Holm-adjusted), tie groups and the episode ids behind each score.

        ``format``: ``"md"``, ``"html"`` (one self-contained page), ``"json"``,
        ``"csv"`` return the text (and with ``out`` also write it there, atomically);
        ``"table"`` returns the entries as a ``pyarrow.Table``. ``metric`` is a column
        of cell_metrics, ``label_share:LABEL``, ``posture_share:POSTURE``,
        repair_rate, verifier_accuracy, phi, top1_all, ...; an unknown one raises
        :class:`Error`. ``better``: ``"higher"`` or ``"lower"`` overrides which way the
        metric ranks; ``alpha`` is the tie-group threshold; ``errors`` (``"fail"``, the
        default, or ``"exclude"``) says how an attempt that errored before it was
        judged counts in a pass rate (``pass_rate``, ``resolve_rate``)::

            html = db.leaderboard("sound_completion", by="model", format="html", out="board.html")
        """
        result = self._db.leaderboard(metric, _keys(by), where, format, better, alpha, replicates, seed, errors)
        if format == "table":
            if out is not None:
                raise Error("format='table' returns a pyarrow.Table; out= is for the text formats")
            return _table(result)
        if out is not None:
            target = Path(_path(out))
            tmp = target.with_name(target.name + ".epistore-tmp")
            tmp.write_text(result, encoding="utf-8")
            os.replace(tmp, target)
        return result

    # ----------------------------------------------------------------- writes

    def ingest(self, paths: PathLike | Iterable[PathLike], chunk: int = 512) -> Dict[str, Any]:
        """Add episode packages, as ``epistore ingest``: package directories,
        ``.tar``/``.tar.gz``/``.tar.zst`` archives, or folders searched for both.
        Needs ``epistore.open(path, write=True)``.

        Valid packages go in even when others are rejected. Returns the summary of
        ``epistore ingest --format json``: ``added``, ``already_present``,
        ``rejected``, ``bytes_read``, ``blobs_added``, ``batches``, ``seconds``,
        ``columnar_seconds`` and ``packages`` (each ``package``, ``episode_id``,
        ``status``, and for a rejection the ``reason`` naming file, line and field)::

            s = db.ingest("runs/")
            bad = [p["reason"] for p in s["packages"] if p["status"] == "rejected"]
        """
        return _summary(self._db.ingest(_paths(paths), chunk))

    def annotate(
        self, episode: str, label: str, note: str | None = None, author: str | None = None
    ) -> Dict[str, Any]:
        """Record a person's judgement of an episode, as ``epistore annotate``:
        ``episode`` is an id or a unique prefix, ``label`` the judgement ("reward
        hacking", "flaky test", ...). Append-only beside the data: no package,
        derived field or metric changes. Needs ``write=True``.

        Returns the stored record with its ``id`` and ``added`` (false when the same
        record was already stored). Select by it in SQL or ``where=`` with
        ``annotated(episode_id, 'LABEL')``; list with ``db.sql("SELECT * FROM
        annotations")``::

            a = db.annotate("3f2a9c", "env failure", note="docker pull timed out")
            db.metrics(by="model", where="NOT annotated(episode_id, 'env failure')")
        """
        return _summary(self._db.annotate(episode, label, note, author))

    def retract(self, annotation: str, note: str | None = None, author: str | None = None) -> Dict[str, Any]:
        """Withdraw a label annotation (an id or a unique prefix), as ``epistore
        annotate --retract``: a new record naming it; the label stays listed with
        ``active`` false. A label is withdrawn once; to restore it, annotate again.
        Returns the retraction record."""
        return _summary(self._db.retract(annotation, note, author))

    def import_logs(
        self,
        paths: PathLike | Iterable[PathLike],
        format: str | None = None,
        model: str | None = None,
        harness_level: str | None = None,
        task: str | None = None,
        cluster: str | None = None,
        scorer: str | None = None,
        git_log: PathLike | None = None,
        out: PathLike | None = None,
        reimport: bool = False,
        redact: bool = False,
        mapping: PathLike | None = None,
    ) -> Dict[str, Any]:
        """Import the logs agent tools write, as ``epistore import``: Inspect AI,
        Claude Code (``~/.claude/projects``), Codex, SWE-agent, mini-SWE-agent,
        OpenHands, aider, SWE-bench reports, Harbor / ATIF, Gemini CLI, Pi, Copilot
        CLI, OpenCode, Cline / Roo / Kilo, Goose, Terminal-Bench 1.x runs and
        trajectory datasets (JSON Lines or Parquet; ``mapping`` names their
        columns); formats detected by content, folders walked, ``~`` expanded. Each run becomes an episode package committed through
        the normal ingest (needs ``write=True``), or with ``out`` a package directory
        written there. Importing the same files again adds nothing.

        ``format`` forces the log format (its name as ``epistore formats`` lists it); ``model``, ``harness_level``,
        ``task``, ``cluster`` override what the logs say; ``scorer`` picks the Inspect
        scorer; ``git_log`` is aider's ``git log -p`` file; ``redact`` replaces what
        looks like secrets. Returns the summary of ``epistore import
        --summary-format json``: ``formats`` (per source format: found, imported,
        already_present, covered, refused, ...), ``refused`` (file, place, reason),
        ``covered``, ``unmatched_reports``, ``secrets``, ``runs_with_secrets``::

            db.import_logs("~/.claude/projects", model="claude-sonnet-4")
            db.sql("SELECT source_format, count(*) FROM episode_facts GROUP BY 1")
        """
        return _summary(
            self._db.import_logs(
                _paths(paths),
                format,
                model,
                harness_level,
                task,
                cluster,
                scorer,
                None if git_log is None else _path(git_log),
                None if out is None else _path(out),
                reimport,
                redact,
                None if mapping is None else _path(mapping),
            )
        )
