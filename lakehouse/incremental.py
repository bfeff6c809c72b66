"""Build the gold tables: in full, or by MERGEing only the keys that new silver rows touch.

State: per gold table, the silver version of each source it has consumed
(``checkpoints/gold/<table>.json``, written after the table's commit). The next build reads the
silver change data feed between that version and the current one, maps the inserted rows to the
keys they touch, recomputes those keys from the whole silver history (pinned at the current
version), and MERGEs the result: rows of a touched key that no longer exist are deleted, changed
rows updated, new rows inserted. A crash between the commit and the state file only makes the
next build recompute the same keys again, which gives the same rows (MERGE on the row id), so a
build can be killed at any point and rerun.

Falls back to a full rebuild of a table (overwrite, history kept for time travel) when it has no
state yet, its columns changed, or the change feed of the range is unavailable (a silver table
created before the feed was enabled, or vacuumed); and, as the cheaper way to the same rows, when a
table without a tail has every key it holds touched.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import reduce
from pathlib import Path
from typing import Any, Literal

from delta.tables import DeltaTable
from deltalake.exceptions import DeltaError
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from ingest.paths import LakehousePaths
from lakehouse.duck import delta
from lakehouse.duck.engine import ArrowChanges
from lakehouse.duck.engine import update_table as update_on_duckdb
from lakehouse.duck.tables import TWINS
from lakehouse.gold import LITERAL_KEYS, TAIL_FROM, GoldInputs, GoldTable, any_of, key_equals, key_filter
from lakehouse.gold_schedule import run_in_dependency_order
from lakehouse.gold_tables import GOLD_TABLES
from lakehouse.state_file import load_state, save_state
from replicator.config import MirrorlakeConfig
from replicator.events import registry

__all__ = ["GoldUpdate", "update_gold", "silver_versions", "merge_keys", "in_scope"]

_log = logging.getLogger(__name__)
# Gold tables built side by side: their time is mostly Delta log reads, small jobs and commits,
# which overlap on Spark's threads (2 cores).
_TABLES_AT_ONCE = 3


@dataclass(frozen=True)
class GoldUpdate:
    """What one build did to one gold table: ``full`` rebuild, ``merge`` of ``keys`` (recomputed
    whole), ``tail`` (``keys`` recomputed from their tails on, ``GoldTable.tail``), or ``unchanged``;
    ``engine`` did it (``duckdb``: the table's twin, ``lakehouse.duck``)."""

    table: str
    mode: Literal["full", "merge", "tail", "unchanged"]
    keys: int
    reason: str = ""
    seconds: float = field(default=0.0, compare=False)
    engine: Literal["spark", "duckdb"] = "spark"


def silver_versions(spark: SparkSession, paths: LakehousePaths) -> dict[str, int | None]:
    """The current version of every silver table (None where a type has no table yet).

    Read by delta-rs (a log read each): through Spark, a history job per type took about a second of
    every ``lakehouse serve`` refresh (py-spy over ``bench/freshness.py``). Spark answers for a table
    delta-rs cannot open (a reader feature it lacks)."""
    out: dict[str, int | None] = {}
    for event_type in registry().event_types():
        path = paths.silver(event_type)
        try:
            table = delta.existing_table(path)
        except DeltaError as exc:
            _log.info("silver %s: delta-rs cannot open it (%s); Spark reads its version", event_type, exc)
            out[event_type] = _spark_version(spark, str(path))
            continue
        out[event_type] = None if table is None else int(table.version())
    return out


def _spark_version(spark: SparkSession, path: str) -> int | None:
    if not DeltaTable.isDeltaTable(spark, path):
        return None
    return int(DeltaTable.forPath(spark, path).history(1).select("version").collect()[0][0])


def update_gold(
    spark: SparkSession,
    paths: LakehousePaths,
    *,
    config: MirrorlakeConfig | None = None,
    full: bool = False,
    tables: Sequence[GoldTable] = GOLD_TABLES,
    on_stage: Callable[[str], None] | None = None,
) -> list[GoldUpdate]:
    """Bring every gold table up to date with silver; ``full`` recomputes every table from scratch.

    Up to ``_TABLES_AT_ONCE`` tables run side by side, each after the tables it reads
    (``lakehouse.gold_schedule``). ``on_stage(f"gold {table}")`` is called as each table starts
    (a progress display's hook); each ``GoldUpdate`` says how long its table took."""
    versions = silver_versions(spark, paths)
    changes = _Changes(spark, paths)
    on_duckdb = ArrowChanges(paths) if config is None or config.lakehouse.incremental_engine == "duckdb" else None

    def run(spec: GoldTable) -> GoldUpdate:
        started = time.monotonic()
        update = _update_table(spark, paths, spec, versions, config, full, changes.inserted, on_duckdb)
        update = replace(update, seconds=time.monotonic() - started)
        _log.info(
            "gold %s: %s on %s (%d keys) %s in %.1f s",
            spec.name,
            update.mode,
            update.engine,
            update.keys,
            update.reason,
            update.seconds,
        )
        return update

    def started(spec: GoldTable) -> None:
        if on_stage is not None:
            on_stage(f"gold {spec.name}")

    try:
        return run_in_dependency_order(tables, run, workers=_TABLES_AT_ONCE, on_start=started)
    finally:
        changes.release()


def _update_table(
    spark: SparkSession,
    paths: LakehousePaths,
    spec: GoldTable,
    versions: Mapping[str, int | None],
    config: MirrorlakeConfig | None,
    full: bool,
    inserted: Callable[[str, int | None, int], DataFrame],
    on_duckdb: ArrowChanges | None,
) -> GoldUpdate:
    target = str(paths.gold(spec.name))
    consumed = {t: versions[t] for t in spec.sources}
    state = None
    if full:
        reason = "requested"
    else:
        state = _load_state(paths, spec.name)
        if state is None:
            reason = "no build state yet"
        elif not DeltaTable.isDeltaTable(spark, target):
            reason = "table missing"
        else:
            reason = ""
    if state is not None and not reason:
        changed = {t: v for t, v in consumed.items() if v is not None and v != state.get(t)}
        if not changed:
            return GoldUpdate(spec.name, "unchanged", 0)
        twin = TWINS.get(spec.name)
        if on_duckdb is not None and twin is not None and all(versions[t] is not None for t in twin.needs):
            recomputed = update_on_duckdb(paths, spec.name, twin, versions, state, changed, on_duckdb, config)
            if recomputed is not None:
                _save_state(paths, spec.name, consumed)
                return GoldUpdate(spec.name, "tail", recomputed, engine="duckdb")
        try:
            changes = {t: inserted(t, state.get(t), v) for t, v in changed.items()}
            keys = spec.touched(changes).localCheckpoint()
            values = _few_rows(keys, keys.columns)  # in the order ``restrict`` and ``merge_keys`` name them
            if spec.tail is None and values is not None and _holds_only(spark, target, keys.columns, values):
                reason = "every key touched"
            else:
                inputs = GoldInputs(spark, paths, versions, keys, config, changes, values)
                update = _merge_touched(spark, target, spec, inputs)
                if update is not None:
                    _save_state(paths, spec.name, consumed)
                    return update
                reason = "columns changed"
        except AnalysisException as exc:
            reason = f"change feed unavailable ({str(exc).splitlines()[0][:200]})"
    computed = spec.compute(GoldInputs(spark, paths, versions, None, config))
    computed.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(target)
    _save_state(paths, spec.name, consumed)
    return GoldUpdate(spec.name, "full", -1, reason)


def _merge_touched(spark: SparkSession, target: str, spec: GoldTable, inputs: GoldInputs) -> GoldUpdate | None:
    """Recompute the keys of ``inputs`` (their tails where ``spec`` has one) and MERGE them into
    ``target``; None, with nothing written, when the computed columns differ from the table's."""
    keys, values = inputs.keys, inputs.key_values
    assert keys is not None
    if spec.tail is not None:
        tail = spec.tail(inputs)
        computed, scope = tail.rows, tail.scope
    else:
        computed, scope = spec.compute(inputs), None
    existing = spark.read.format("delta").load(target)
    if existing.schema.simpleString() != computed.schema.simpleString():
        return None
    n = len(values) if values is not None else keys.count()
    if n:
        replaced, replaced_values = keys, values
        if scope is not None:
            # the tail's scope has a row per key: as values too when the keys were few
            scope_columns = (*spec.key, TAIL_FROM) if spec.tail_order else spec.key
            replaced_values = _few_rows(scope, scope_columns) if values is not None else None
            replaced = scope if replaced_values is not None else scope.localCheckpoint()
        # computed once: the MERGE reads it for tombstones, its join and its writes
        merge_keys(
            spark,
            target,
            computed.localCheckpoint(),
            replaced,
            spec.key,
            spec.row_id,
            tail_order=spec.tail_order if scope is not None else (),
            key_values=replaced_values,
        )
    return GoldUpdate(spec.name, "merge" if scope is None else "tail", n)


def _holds_only(spark: SparkSession, target: str, columns: Sequence[str], values: Sequence[tuple[Any, ...]]) -> bool:
    """Whether every key the table at ``target`` holds (``columns``) is among ``values``.

    Then recomputing the touched keys is recomputing the whole table, and a MERGE would only add
    its join and row-by-row comparison to that: an overwrite gives the same table for less (one
    flow's ``failovers``, whose key is the flow, is touched whole by any new checkpoint)."""
    held = _few_rows(spark.read.format("delta").load(target).select(*columns).distinct(), columns)
    return held is not None and set(held) <= set(values)


def _few_rows(df: DataFrame, columns: Sequence[str]) -> list[tuple[Any, ...]] | None:
    """``df``'s ``columns`` as tuples when it has at most ``LITERAL_KEYS`` rows, else None."""
    rows = df.select(*columns).limit(LITERAL_KEYS + 1).collect()
    return [tuple(r) for r in rows] if len(rows) <= LITERAL_KEYS else None


class _Changes:
    """The silver rows inserted between two versions, read once per build and shared by the gold
    tables that consumed the same versions (most tables read the ``offset_sync`` feed)."""

    def __init__(self, spark: SparkSession, paths: LakehousePaths) -> None:
        self._spark = spark
        self._paths = paths
        self._read: dict[tuple[str, int | None, int], DataFrame] = {}
        self._lock = threading.Lock()  # tables run on several threads

    def inserted(self, event_type: str, after: int | None, upto: int) -> DataFrame:
        """Rows inserted into a silver table after version ``after`` up to ``upto`` (all when None)."""
        key = (event_type, after, upto)
        with self._lock:
            if key not in self._read:
                rows = _inserted(self._spark, self._paths, event_type, after, upto)
                # kept while the build runs: each table reads it for its keys, its tail and its MERGE
                self._read[key] = rows if after is None else rows.persist()
            return self._read[key]

    def release(self) -> None:
        with self._lock:
            for rows in self._read.values():
                rows.unpersist()
            self._read.clear()


def _inserted(spark: SparkSession, paths: LakehousePaths, event_type: str, after: int | None, upto: int) -> DataFrame:
    """Rows inserted into a silver table after version ``after`` up to ``upto`` (all when None)."""
    path = str(paths.silver(event_type))
    if after is None:
        return spark.read.format("delta").option("versionAsOf", upto).load(path)
    return (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", after + 1)
        .option("endingVersion", upto)
        .load(path)
        .where(F.col("_change_type").isin("insert", "update_postimage"))
        .drop("_change_type", "_commit_version", "_commit_timestamp")
    )


def merge_keys(
    spark: SparkSession,
    target: str,
    computed: DataFrame,
    keys: DataFrame,
    key: Sequence[str],
    row_id: Sequence[str],
    *,
    tail_order: Sequence[str] = (),
    key_values: Sequence[tuple[Any, ...]] | None = None,
) -> None:
    """Make the rows of ``keys`` in the Delta table at ``target`` equal ``computed``, in one commit.

    ``computed`` holds the new rows of exactly those keys. Rows of those keys that ``computed``
    lacks are deleted (tombstones in the MERGE source), differing rows are updated, new inserted.
    With ``tail_order``, ``keys`` is a ``Tail.scope``: only rows at or after a key's ``TAIL_FROM``
    (by ``tail_order``, all rows where it is null) are replaced; earlier rows that ``computed``
    holds are updated, the others kept. ``key_values``, the rows of ``keys`` when they are few,
    select the table's rows by value instead of by a join (``in_scope``).
    """
    table = DeltaTable.forPath(spark, target)
    columns = computed.columns
    existing = in_scope(table.toDF(), keys, key, tail_order, key_values)
    id_cond = reduce(lambda a, b: a & b, [F.col(f"e.{c}").eqNullSafe(F.col(f"n.{c}")) for c in row_id])
    gone = existing.alias("e").join(computed.alias("n"), id_cond, "left_anti")
    tombstones = gone.select(*row_id).withColumn("_op", F.lit("d"))
    # checkpointed: Delta need not materialize it (``LOCAL_TUNING``), and it no longer refers to the
    # target, which a MERGE without that materialization cannot analyse
    source = computed.withColumn("_op", F.lit("u")).unionByName(tombstones, allowMissingColumns=True).localCheckpoint()
    on = " AND ".join(f"t.`{c}` <=> s.`{c}`" for c in row_id)
    same = " AND ".join(f"t.`{c}` <=> s.`{c}`" for c in columns if c not in row_id) or "true"
    (
        table.alias("t")
        .merge(source.alias("s"), on)
        .whenMatchedDelete(condition="s._op = 'd'")
        .whenMatchedUpdate(condition=f"s._op = 'u' AND NOT ({same})", set={f"`{c}`": f"s.`{c}`" for c in columns})
        .whenNotMatchedInsert(condition="s._op = 'u'", values={f"`{c}`": f"s.`{c}`" for c in columns})
        .execute()
    )


def in_scope(
    rows: DataFrame,
    keys: DataFrame,
    key: Sequence[str],
    tail_order: Sequence[str] = (),
    key_values: Sequence[tuple[Any, ...]] | None = None,
) -> DataFrame:
    """The rows of a gold table that ``merge_keys`` replaces: those of ``keys`` (a ``Tail.scope``
    with ``tail_order``: from each key's ``TAIL_FROM`` on), selected by the values of
    ``key_values`` when given, else by a join with ``keys``. ``key_values`` are in the order of
    ``keys.columns``; with ``tail_order``, ``key`` then ``TAIL_FROM``."""
    if key_values is not None and not tail_order:
        return rows.where(key_filter(keys.columns, key_values))
    if key_values is not None and all(_literal_tail(row[-1], tail_order) for row in key_values):
        whole = [row[:-1] for row in key_values if row[-1] is None]
        tails = [_in_tail(key, tail_order, row) for row in key_values if row[-1] is not None]
        return rows.where(any_of(([key_filter(key, whole)] if whole else []) + tails))
    key_cond = reduce(lambda a, b: a & b, [F.col(f"e.{c}").eqNullSafe(F.col(f"k.{c}")) for c in key])
    if tail_order:
        at = F.struct(*[F.col(f"e.{c}").alias(c) for c in tail_order])
        key_cond = key_cond & (F.col(f"k.{TAIL_FROM}").isNull() | (at >= F.col(f"k.{TAIL_FROM}")))
    return rows.alias("e").join(F.broadcast(keys.alias("k")), key_cond, "left_semi")


def _literal_tail(tail_from: Row | None, tail_order: Sequence[str]) -> bool:
    return tail_from is None or all(tail_from[c] is not None for c in tail_order)


def _in_tail(key: Sequence[str], tail_order: Sequence[str], scope_row: tuple[Any, ...]) -> Column:
    """A row of the scope's key at or after its ``TAIL_FROM`` (the last value of ``scope_row``, not
    null), by ``tail_order`` compared lexicographically, as comparisons with literals: what the
    join with the scope tests (a null in the table's columns is before any tail start in both)."""
    *value, tail_from = scope_row
    cols, vals = list(tail_order), [tail_from[c] for c in tail_order]
    after = F.col(cols[-1]) >= F.lit(vals[-1])
    for c, v in zip(reversed(cols[:-1]), reversed(vals[:-1]), strict=True):
        after = (F.col(c) > F.lit(v)) | ((F.col(c) == F.lit(v)) & after)
    return key_equals(key, value) & after


def _state_file(paths: LakehousePaths, table: str) -> Path:
    return paths.checkpoint("gold") / f"{table}.json"


def _load_state(paths: LakehousePaths, table: str) -> dict[str, int | None] | None:
    data = load_state(_state_file(paths, table))
    if data is None:
        return None
    return {str(k): (None if v is None else int(v)) for k, v in data["silver_versions"].items()}


def _save_state(paths: LakehousePaths, table: str, consumed: Mapping[str, int | None]) -> None:
    save_state(_state_file(paths, table), {"silver_versions": dict(consumed)})
