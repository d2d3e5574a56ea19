"""Type stubs of ``epistore._native``, the compiled half of the package.

Use the ``epistore`` package rather than this module: it wraps these objects in
pyarrow types and documents them.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

__version__: str
SCHEMA_VERSION: str
METRIC_KEYS: List[str]
HEADLINE: List[str]
DEBUG_BUILD: bool

class Error(Exception):
    """An epistore error; the message is what the command line prints after ``error:``."""

class ArrowStream:
    """An unread result: an object of the Arrow PyCapsule stream interface."""

    @property
    def consumed(self) -> bool: ...
    def __arrow_c_stream__(self, requested_schema: Optional[object] = None) -> object: ...
    def __arrow_c_schema__(self) -> object: ...
    def error(self) -> Optional[str]: ...

class ArrowSchema:
    """A schema: an object of the Arrow PyCapsule schema interface."""

    def __arrow_c_schema__(self) -> object: ...

class Database:
    @property
    def path(self) -> str: ...
    @property
    def writable(self) -> bool: ...
    @property
    def snapshot_seq(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    def sql(self, query: str) -> ArrowStream: ...
    def search(self, query: str, filter: Optional[str] = None, limit: int = 20) -> ArrowStream: ...
    def metrics(
        self,
        by: Sequence[str],
        filter: Optional[str] = None,
        all: bool = False,
        ci: bool = False,
        replicates: Optional[int] = None,
        seed: Optional[int] = None,
    ) -> ArrowStream: ...
    def leaderboard(
        self,
        metric: str,
        by: Sequence[str],
        filter: Optional[str] = None,
        format: str = "md",
        better: Optional[str] = None,
        alpha: float = 0.05,
        replicates: Optional[int] = None,
        seed: Optional[int] = None,
    ) -> Any: ...
    def tables(self) -> List[str]: ...
    def schema(self, name: str) -> ArrowSchema: ...
    def ingest(self, paths: Sequence[str], chunk: int = 512) -> str: ...
    def import_logs(
        self,
        paths: Sequence[str],
        source_format: Optional[str] = None,
        model: Optional[str] = None,
        harness_level: Optional[str] = None,
        task: Optional[str] = None,
        cluster: Optional[str] = None,
        scorer: Optional[str] = None,
        git_log: Optional[str] = None,
        out: Optional[str] = None,
        reimport: bool = False,
        redact: bool = False,
    ) -> str: ...
    def annotate(self, episode: str, label: str, note: Optional[str] = None, author: Optional[str] = None) -> str: ...
    def retract(self, annotation: str, note: Optional[str] = None, author: Optional[str] = None) -> str: ...
    def close(self) -> None: ...

def open(path: str, write: bool = False) -> Database: ...
def metrics_query(by: Sequence[str], filter: Optional[str] = None, all: bool = False) -> str: ...
def run_cli(argv: Sequence[str]) -> int: ...
