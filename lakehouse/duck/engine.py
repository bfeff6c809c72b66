"""One gold table's incremental update on DuckDB and delta-rs, for a table with a twin.

``update_table`` is what ``lakehouse.incremental`` calls instead of its Spark tail when the build
is incremental and the table has a twin: it reads the new silver rows (change data feed), asks the
twin for the touched keys' tails, and commits them with one delta-rs MERGE. It returns None, with
nothing written, when the Spark path should decide instead (a change feed delta-rs cannot read,
columns that differ from the table's): that path then falls back as it always has.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa
from deltalake.exceptions import DeltaError

from ingest.paths import LakehousePaths
from lakehouse.duck import delta

__all__ = ["DuckInputs", "DuckTail", "Twin", "ArrowChanges", "update_table"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DuckTail:
    """A twin's result: ``rows`` replace the table's rows of each key of ``scope`` from the key's
    tail start on (``lakehouse.duck.delta.replace_scope``)."""

    rows: pa.Table
    scope: pa.Table


@dataclass
class DuckInputs:
    """What a twin reads: silver pinned at ``versions``, gold as built so far, and the silver rows
    new since the table's last build (``changes``, by event type, only types that changed), each
    registered on ``con`` under the name the accessor returns."""

    con: duckdb.DuckDBPyConnection
    paths: LakehousePaths
    versions: Mapping[str, int | None]
    changes: Mapping[str, pa.Table]
    _views: dict[str, str] = field(default_factory=dict)

    def silver(self, event_type: str) -> str:
        """A view of the silver table of ``event_type`` at the pinned version."""
        version = self.versions[event_type]
        assert version is not None, f"no silver {event_type} table"
        return self._view(f"silver_{event_type}", lambda: delta.dataset(self.paths.silver(event_type), version))

    def gold(self, name: str) -> str:
        """A view of a gold table as this build has left it so far."""
        return self._view(f"gold_{name}", lambda: delta.dataset(self.paths.gold(name)))

    def new(self, event_type: str) -> str:
        """A view of the silver rows of ``event_type`` new in this build (empty if none)."""
        return self._view(f"new_{event_type}", lambda: self.changes[event_type])

    def _view(self, name: str, source: Callable[[], object]) -> str:
        if name not in self._views:
            self.con.register(name, source())
            self._views[name] = name
        return name


@dataclass(frozen=True)
class Twin:
    """A gold table's DuckDB twin: ``tail(inputs)`` for the keys its new rows touch, and how its
    rows are matched (the Spark table's ``key``, ``row_id``, ``tail_order``)."""

    key: tuple[str, ...]
    row_id: tuple[str, ...]
    tail_order: tuple[str, ...]
    tail: Callable[[DuckInputs], DuckTail]


class ArrowChanges:
    """The silver rows inserted between two versions, read once per build and shared by the twins
    that consumed the same versions (as ``lakehouse.incremental``'s Spark ``_Changes``)."""

    def __init__(self, paths: LakehousePaths) -> None:
        self._paths = paths
        self._read: dict[tuple[str, int | None, int], pa.Table] = {}
        self._lock = threading.Lock()  # tables run on several threads

    def inserted(self, event_type: str, after: int | None, upto: int) -> pa.Table:
        """Rows inserted into a silver table after version ``after`` up to ``upto`` (all when None)."""
        key = (event_type, after, upto)
        with self._lock:
            if key not in self._read:
                path = self._paths.silver(event_type)
                rows = delta.dataset(path, upto).to_table() if after is None else delta.inserted(path, after, upto)
                self._read[key] = rows
            return self._read[key]


def update_table(
    paths: LakehousePaths,
    name: str,
    twin: Twin,
    versions: Mapping[str, int | None],
    consumed: Mapping[str, int | None],
    changed: Mapping[str, int],
    changes: ArrowChanges,
) -> int | None:
    """Update gold ``name`` with the silver rows new since ``consumed`` (the versions its last build
    read) up to ``changed`` (the new versions of the sources that moved); the number of keys it
    recomputed, or None with nothing written when the Spark path should do it instead."""
    try:
        new = {t: changes.inserted(t, consumed.get(t), v) for t, v in changed.items()}
    except DeltaError as exc:
        _log.info("gold %s: delta-rs cannot read the change feed (%s); Spark decides", name, exc)
        return None
    con = duckdb.connect()
    try:
        result = twin.tail(DuckInputs(con, paths, versions, new))
    finally:
        con.close()
    target = paths.gold(name)
    held = delta.table_schema(target)
    if sorted(result.rows.column_names) != sorted(held.names):
        _log.info("gold %s: the twin's columns differ from the table's; Spark decides", name)
        return None
    if result.scope.num_rows:
        delta.replace_scope(target, result.rows, result.scope, twin.key, twin.row_id, twin.tail_order)
    return result.scope.num_rows
