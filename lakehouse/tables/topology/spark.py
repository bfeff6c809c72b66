"""Gold ``topology``: per (origin cluster, cluster a heartbeat from it reached): how and how fast.

From ``heartbeat_latency``: ``hops`` and ``path`` of the latest observation (latest
``received_at_ms``, ties by event id), ``last_seen_ms``, ``latest_latency_ms`` and
``latest_hop_latency_ms`` of that observation, ``paths`` (distinct paths seen, e.g. A->C directly
and A->B->C) and ``observations``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse.gold import GoldInputs, GoldTable, latest, touched_keys
from lakehouse.tables.heartbeat_latency.spark import observations
from lakehouse.tables.topology import KEY, ORIGIN, SPEC

__all__ = ["topology", "TABLE"]


def topology(latencies: DataFrame) -> DataFrame:
    """The table from gold ``heartbeat_latency`` rows."""
    stats = latencies.groupBy(*KEY).agg(F.count("*").alias("observations"), F.count_distinct("path").alias("paths"))
    last = latest(latencies, KEY, ["received_at_ms"]).select(
        *KEY,
        "hops",
        "path",
        F.col("received_at_ms").alias("last_seen_ms"),
        F.col("latency_ms").alias("latest_latency_ms"),
        F.col("hop_latency_ms").alias("latest_hop_latency_ms"),
    )
    return last.join(stats, list(KEY), "inner")


def _compute(inputs: GoldInputs) -> DataFrame:
    return topology(inputs.restrict(inputs.gold("heartbeat_latency")))


TABLE = GoldTable(
    SPEC,
    touched=lambda changes: touched_keys({t: observations(df) for t, df in changes.items()}, {"heartbeat": ORIGIN}),
    compute=_compute,
)
