"""The contract every gold table follows, so that one engine can build it in full or incrementally.

A gold table is a pure function of silver (and of gold tables built before it in the same
build). Its rows are grouped by a *key* (e.g. flow, source topic, partition): all rows of one key
depend only on the silver rows of that key, so when new silver rows arrive only the keys they
touch are recomputed, from the whole (pinned) silver history of those keys, and MERGEd in. That is
what makes an incremental build give exactly the table a full build gives.

A table may also say how to recompute only the *tail* of a touched key (``GoldTable.tail``): the
rows from some position on (``tail_order``, e.g. a segment's downstream start), from the gold rows
before that position and the silver rows after it, so that an incremental build reads neither a
key's whole history nor all of silver. Its contract: the rows it returns, with the rows the table
already holds before each key's tail start, are the rows a full build gives.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ingest.paths import LakehousePaths
from lakehouse.tables.spec import GoldSpec, HasSpec
from replicator.config import MirrorlakeConfig

__all__ = [
    "GoldTable",
    "GoldInputs",
    "Tail",
    "latest",
    "touched_keys",
    "key_filter",
    "key_equals",
    "any_of",
    "TAIL_FROM",
    "LITERAL_KEYS",
]

TAIL_FROM = "_tail_from"  # in ``Tail.scope``: a key's tail start, struct of ``tail_order`` (null: the whole key)
# Up to this many keys, ``GoldInputs.restrict`` filters by their values (``key_filter``) instead of
# joining a broadcast key table: each such join is a Spark job of its own, and a build's tables
# restrict a dozen or more inputs. Above it, the join stays: a plan of thousands of literals costs
# more to build and optimize than the job.
LITERAL_KEYS = 64


@dataclass(frozen=True)
class Tail:
    """A touched key's recomputed rows: ``rows`` replace the table's rows of each key of ``scope``
    at or after the key's ``TAIL_FROM`` (all its rows where that is null); ``rows`` may also hold
    earlier rows of the key whose values changed (they are updated, never deleted)."""

    rows: DataFrame
    scope: DataFrame


@dataclass(frozen=True)
class GoldTable(HasSpec):
    """One gold table on Spark: its contract (``spec``, shared with every engine) and its functions.

    ``touched(changes)`` maps the new silver rows of each source type (only types that changed are
    present) to the distinct keys they affect; ``compute(inputs)`` returns the table's rows for
    the keys of ``inputs`` (all keys when ``inputs.keys`` is None). ``tail(inputs)``, where given,
    does an incremental build's work instead of ``compute`` (``Tail``); it reads the new silver
    rows in ``inputs.changes`` and the table as it stands (``inputs.gold``). A tail of a spec
    without ``tail_order`` recomputes whole keys: its ``scope`` holds only the key columns.
    """

    spec: GoldSpec
    touched: Callable[[Mapping[str, DataFrame]], DataFrame]
    compute: Callable[[GoldInputs], DataFrame]
    tail: Callable[[GoldInputs], Tail] | None = None


@dataclass
class GoldInputs:
    """What ``compute`` reads: silver pinned at ``versions``, gold as built so far, the keys to do
    and, in an incremental build, the silver rows new since the table's last build (``changes``, by
    event type, only types that changed). ``key_values``, when given, are the rows of ``keys``
    (at most ``LITERAL_KEYS``), so that ``restrict`` can filter by value."""

    spark: SparkSession
    paths: LakehousePaths
    versions: Mapping[str, int | None]
    keys: DataFrame | None = None
    config: MirrorlakeConfig | None = None
    changes: Mapping[str, DataFrame] = field(default_factory=dict)
    key_values: Sequence[tuple[Any, ...]] | None = None

    def silver(self, event_type: str) -> DataFrame:
        """The silver table of ``event_type`` at the version this build pinned (empty if none yet)."""
        from lakehouse.silver import silver_schema

        version = self.versions.get(event_type)
        if version is None:
            return self.spark.createDataFrame([], silver_schema(event_type))
        return self.spark.read.format("delta").option("versionAsOf", version).load(str(self.paths.silver(event_type)))

    def gold(self, name: str) -> DataFrame:
        """A gold table as already updated by this build (tables are built in dependency order)."""
        return self.spark.read.format("delta").load(str(self.paths.gold(name)))

    def restrict(self, df: DataFrame, columns: Sequence[str] | None = None) -> DataFrame:
        """``df`` limited to the keys being recomputed; ``columns`` name ``df``'s key columns."""
        if self.keys is None:
            return df
        key_names = self.keys.columns
        cols = list(columns or key_names)
        if self.key_values is not None:
            return df.where(key_filter(cols, self.key_values))
        condition = [F.col(f"d.{c}").eqNullSafe(F.col(f"k.{k}")) for c, k in zip(cols, key_names, strict=True)]
        cond = reduce(lambda a, b: a & b, condition)
        return df.alias("d").join(F.broadcast(self.keys.alias("k")), cond, "left_semi")


def key_filter(columns: Sequence[str], values: Sequence[tuple[Any, ...]]) -> Column:
    """True for the rows whose ``columns`` equal one of ``values`` (a null equals a null), as
    comparisons with literals: no job, and Delta can skip files by their statistics.

    Keys that share all but their last column (the partitions of one topic) test that column
    against a set (``isin``, a hash lookup per row), so a row costs a test per distinct prefix
    rather than per key."""
    *prefix_columns, last = columns
    by_prefix: dict[tuple[Any, ...], list[Any]] = {}
    for value in values:
        by_prefix.setdefault(tuple(value[:-1]), []).append(value[-1])
    tests = []
    for prefix, lasts in by_prefix.items():
        present = [v for v in dict.fromkeys(lasts) if v is not None]
        last_test = any_of(
            ([F.col(last).isin(present)] if present else []) + ([F.col(last).isNull()] if None in lasts else [])
        )
        tests.append(key_equals(prefix_columns, prefix) & last_test if prefix_columns else last_test)
    return any_of(tests)


def key_equals(columns: Sequence[str], value: Sequence[Any]) -> Column:
    """``columns`` equal ``value``, null-safe, as comparisons with literals."""
    tests = [F.col(c).isNull() if v is None else F.col(c) == F.lit(v) for c, v in zip(columns, value, strict=True)]
    return reduce(lambda a, b: a & b, tests)


def any_of(conditions: Sequence[Column]) -> Column:
    """The disjunction of ``conditions`` (false when there are none)."""
    return reduce(lambda a, b: a | b, conditions) if conditions else F.lit(False)


def latest(df: DataFrame, partition_by: Sequence[str], order_by: Sequence[str]) -> DataFrame:
    """The last row (by ``order_by`` descending, then ``event_id``) of each ``partition_by`` group."""
    from pyspark.sql import Window

    w = Window.partitionBy(*partition_by).orderBy(*[F.col(c).desc() for c in (*order_by, "event_id")])
    return df.withColumn("_rank", F.row_number().over(w)).where("_rank = 1").drop("_rank")


def touched_keys(changes: Mapping[str, DataFrame], columns: Mapping[str, Sequence[Any]]) -> DataFrame:
    """Distinct keys of the new rows: ``columns[event_type]`` selects the key from that type's rows.

    Only the types present in ``changes`` contribute (the others had no new rows).
    """
    frames = [changes[t].select(*columns[t]) for t in columns if t in changes]
    if not frames:
        raise ValueError(f"no changes among {sorted(columns)}")
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out.distinct()
