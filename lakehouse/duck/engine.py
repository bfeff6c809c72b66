"""One gold table's incremental update on DuckDB and delta-rs, for a table with a twin.

``update_table`` is what ``lakehouse.incremental`` calls instead of its Spark tail when the build
is incremental and the table has a twin: it reads the new silver rows (change data feed), asks the
twin for the touched keys' rows, and commits them in one delta-rs commit (a MERGE on the row id for a
twin with a ``tail_order``, a replaceWhere of the touched keys otherwise). It returns None, with
nothing written, when the Spark path should decide instead (a change feed delta-rs cannot read, more
new rows than ``MOST_NEW_ROWS``, columns that differ from the table's): that path then falls back as
it always has.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa
from deltalake.exceptions import DeltaError

from ingest.paths import LakehousePaths
from lakehouse.duck import delta
from lakehouse.sql_quote import duck_ident, duck_value
from lakehouse.store_access import reach_from_duckdb
from lakehouse.tables.offset_mapping import MAPPING_KEY
from lakehouse.tables.offset_mapping.lives import EACH_PARTITION_SQL, current_life_sql, said_lives_sql
from lakehouse.tables.spec import GoldSpec, HasSpec
from replicator.client.mapping import Segment
from replicator.config import MirrorlakeConfig

__all__ = [
    "MOST_NEW_ROWS",
    "DuckInputs",
    "DuckTail",
    "Twin",
    "ArrowChanges",
    "update_table",
    "as_segments",
    "keys_filter",
    "in_keys",
]

_log = logging.getLogger(__name__)
# New silver rows per type an incremental build holds in memory (about 150 bytes each in Arrow); a
# build with more (a catch-up after a long pause) runs on Spark, which spills
MOST_NEW_ROWS = 2_000_000


@dataclass(frozen=True)
class DuckTail:
    """A twin's result: ``rows`` replace the table's rows of each key of ``scope``, from the key's
    tail start on (``_tail_<column>`` in ``scope``; ``lakehouse.duck.delta.replace_scope``) or all of
    them (a twin without ``tail_order``; ``replace_keys``)."""

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
    config: MirrorlakeConfig | None = None
    _views: set[str] = field(default_factory=set)

    def silver(self, event_type: str) -> str:
        """A view of the silver table of ``event_type`` at the pinned version."""
        version = self.versions[event_type]
        assert version is not None, f"no silver {event_type} table"
        return self._table(f"silver_{event_type}", self.paths.silver(event_type), version)

    def gold(self, name: str) -> str:
        """A view of a gold table as this build has left it so far."""
        return self._table(f"gold_{name}", self.paths.gold(name), None)

    def new(self, event_type: str) -> str:
        """A view of the silver rows of ``event_type`` new in this build (empty if none)."""
        name = f"new_{event_type}"
        if name not in self._views:
            self.con.register(name, self.changes[event_type])
            self._views.add(name)
        return name

    def _table(self, name: str, path: Path, version: int | None) -> str:
        if name not in self._views:
            delta.register(self.con, name, path, version)
            self._views.add(name)
        return name

    def mapping(self, where: str) -> str:
        """SQL: gold ``offset_mapping`` of the partitions ``where`` selects, current lives only
        (``lakehouse.tables.offset_mapping.lives``): what translates or counts copies reads."""
        said = None
        if self.versions.get("topic_recreated") is not None:
            said = said_lives_sql(self.silver("topic_recreated"))
        return current_life_sql(f"SELECT * FROM {self.gold('offset_mapping')} WHERE {where}", said)

    def segments(self, where: str) -> str:
        """SQL: gold ``offset_mapping`` of the partitions ``where`` selects, one row per partition:
        ``segs`` (list of struct ``us, ue, ds, de``) and ``first_copy`` (its lowest downstream start),
        as ``lakehouse.target_deletions.segments_by_partition``; ``as_segments`` makes them ``Segment``s."""
        key = ", ".join(MAPPING_KEY)
        return (
            f"SELECT {key}, list(struct_pack(us := upstream_start, ue := upstream_end, ds := downstream_start, "
            f"de := downstream_end)) AS segs, min(downstream_start) AS first_copy "
            f"FROM ({self.mapping(where)}) GROUP BY {key}"
        )

    def touched(self, columns: Mapping[str, Sequence[str]]) -> pa.Table:
        """Distinct keys of the new rows: ``columns[event_type]`` names the key in that type's rows
        (as ``lakehouse.gold.touched_keys``); only types with new rows contribute."""
        parts = [
            f"SELECT {', '.join(_key_column(t, c) for c in cols)} FROM {self.new(t)}"
            for t, cols in columns.items()
            if t in self.changes
        ]
        # distinct also when a single type changed: a key listed twice doubled each of its rows
        return self.con.sql(f"SELECT DISTINCT * FROM ({' UNION ALL '.join(parts)})").to_arrow_table()


def _key_column(event_type: str, column: str) -> str:
    """A key column of an event type's rows; a ``topic_recreated`` row names every partition of its topic."""
    if event_type == "topic_recreated" and column == "partition":
        return EACH_PARTITION_SQL
    return duck_ident(column)


@dataclass(frozen=True)
class Twin(HasSpec):
    """A gold table's DuckDB twin: its contract (``spec``, the one the Spark table has) and
    ``tail(inputs)`` for the keys its new rows touch. ``needs``: the silver tables it cannot do
    without (until they exist, Spark builds the table)."""

    spec: GoldSpec
    tail: Callable[[DuckInputs], DuckTail]
    needs: tuple[str, ...] = ()


class ArrowChanges:
    """The silver rows inserted between two versions, read once per build and shared by the twins
    that consumed the same versions (as ``lakehouse.incremental``'s Spark ``_Changes``)."""

    def __init__(self, paths: LakehousePaths, most: int = MOST_NEW_ROWS) -> None:
        self._paths = paths
        self._most = most
        self._read: dict[tuple[str, int | None, int], pa.Table] = {}
        self._lock = threading.Lock()  # tables run on several threads

    def inserted(self, event_type: str, after: int | None, upto: int) -> pa.Table:
        """Rows inserted into a silver table after version ``after`` up to ``upto`` (all when None)."""
        key = (event_type, after, upto)
        with self._lock:
            if key not in self._read:
                self._read[key] = delta.inserted(self._paths.silver(event_type), after, upto, self._most)
            return self._read[key]


def update_table(
    paths: LakehousePaths,
    name: str,
    twin: Twin,
    versions: Mapping[str, int | None],
    consumed: Mapping[str, int | None],
    changed: Mapping[str, int],
    changes: ArrowChanges,
    config: MirrorlakeConfig | None = None,
) -> int | None:
    """Update gold ``name`` with the silver rows new since ``consumed`` (the versions its last build
    read) up to ``changed`` (the new versions of the sources that moved); the number of keys it
    recomputed, or None with nothing written when the Spark path should do it instead."""
    try:
        new = {t: changes.inserted(t, consumed.get(t), v) for t, v in changed.items()}
    except DeltaError as exc:
        _log.info("gold %s: delta-rs cannot read the change feed (%s); Spark decides", name, exc)
        return None
    except delta.TooManyRows as exc:
        _log.info("gold %s: %s, more than an increment held in memory; Spark builds it", name, exc)
        return None
    con = duckdb.connect()
    reach_from_duckdb(con, paths.root)  # the views read a table's parquet files where they are
    try:
        result = twin.tail(DuckInputs(con, paths, versions, new, config))
    finally:
        con.close()
    target = paths.gold(name)
    held = delta.table_schema(target)
    if sorted(result.rows.column_names) != sorted(held.names):
        _log.info("gold %s: the twin's columns differ from the table's; Spark decides", name)
        return None
    if not result.scope.num_rows:
        return 0
    if twin.tail_order:
        delta.replace_scope(target, result.rows, result.scope, twin.key, twin.row_id, twin.tail_order)
    else:  # whole keys
        delta.replace_keys(target, result.rows, keys_filter(result.scope.select(list(twin.key))))
    return result.scope.num_rows


def as_segments(segs: Sequence[Mapping[str, int]] | None) -> list[Segment]:
    """``DuckInputs.segments``' ``segs`` of one partition, as the reference rules take them."""
    return [Segment(s["ds"], s["us"], s["ue"], s["de"]) for s in segs or ()]


def keys_filter(keys: pa.Table) -> str:
    """SQL true for the rows whose ``keys.column_names`` equal one of ``keys``' rows, as comparisons
    with literals (pushed into the scan, which skips files by their statistics); keys that share all
    but their last column test it against a list. Key values are never null in these tables.

    Each key is named once, and the alternatives nest as a balanced tree: delta-rs parses and
    simplifies the predicate recursively, and a scope of one row per new event (``failovers``, keyed
    by flow alone, at 10,000 events/s: a 1.76 MB ``IN`` list of one flow repeated) overflowed a
    thread's 8 MB stack and killed the process (``bench.freshness``)."""
    *prefix, last = keys.column_names
    by_prefix: dict[tuple[object, ...], dict[object, None]] = {}
    for row in keys.to_pylist():
        by_prefix.setdefault(tuple(row[c] for c in prefix), {})[row[last]] = None
    tests = []
    for values, lasts in by_prefix.items():
        same = [f"{duck_ident(c)} = {duck_value(v)}" for c, v in zip(prefix, values, strict=True)]
        tests.append(
            "(" + " AND ".join([*same, f"{duck_ident(last)} IN ({', '.join(duck_value(v) for v in lasts)})"]) + ")"
        )
    return "(" + (_any_of(tests) or "false") + ")"


def _any_of(tests: list[str]) -> str:
    """``tests`` joined by OR, nested in halves (depth log2 of their number, not their number)."""
    if len(tests) <= 2:
        return " OR ".join(tests)
    half = len(tests) // 2
    return f"({_any_of(tests[:half])}) OR ({_any_of(tests[half:])})"


def in_keys(keys: str, columns: tuple[str, ...]) -> str:
    """SQL: the row's ``columns`` are among the rows of the view ``keys``."""
    cols = ", ".join(columns)
    return f"({cols}) IN (SELECT ({cols}) FROM {keys})"
