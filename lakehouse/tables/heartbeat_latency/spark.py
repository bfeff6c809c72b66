"""Gold ``heartbeat_latency``: one row per observed heartbeat (a heartbeat read after >= 1 hop).

``latency_ms`` = ``received_at_ms - origin_timestamp_ms`` along ``hop_path`` (origin first,
observing cluster last). ``hop_latency_ms`` is the last hop's share: the latency minus that of the
same origin heartbeat (origin cluster + origin timestamp) observed one hop earlier (the path
without its last cluster; 0 when that is the origin itself); null when that earlier observation
is not in the log (yet). Heartbeats as emitted at their origin (no ``received_at_ms``) are not
observations and do not appear.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse.gold import GoldInputs, GoldTable, touched_keys
from lakehouse.tables.heartbeat_latency import HEARTBEAT_KEY, SPEC

__all__ = ["heartbeat_latency", "observations", "TABLE"]


def observations(heartbeats: DataFrame) -> DataFrame:
    """Observed heartbeats with their path as text, observing cluster, hop count and latency."""
    return heartbeats.where(F.col("received_at_ms").isNotNull() & (F.size("hop_path") >= 2)).select(
        "flow",
        *HEARTBEAT_KEY,
        "hop_path",
        F.array_join("hop_path", "->").alias("path"),
        F.element_at("hop_path", -1).alias("cluster"),
        F.element_at("hop_path", -2).alias("previous_cluster"),
        (F.size("hop_path") - 1).alias("hops"),
        "received_at_ms",
        (F.col("received_at_ms") - F.col("origin_timestamp_ms")).alias("latency_ms"),
        "topic",
        "event_id",
    )


def heartbeat_latency(heartbeats: DataFrame) -> DataFrame:
    """The table from silver ``heartbeat`` rows (all observations of the same origin heartbeats)."""
    obs = observations(heartbeats)
    earlier = obs.groupBy(*HEARTBEAT_KEY, "path").agg(F.min("latency_ms").alias("_prev_latency"))
    prefix = F.array_join(F.slice("hop_path", 1, F.size("hop_path") - 1), "->")
    joined = obs.withColumn("_prefix", prefix).join(
        earlier.withColumnRenamed("path", "_prefix"), [*HEARTBEAT_KEY, "_prefix"], "left"
    )
    hop = F.when(F.col("hops") == 1, F.col("latency_ms")).otherwise(F.col("latency_ms") - F.col("_prev_latency"))
    return joined.select(
        "flow",
        *HEARTBEAT_KEY,
        "hop_path",
        "path",
        "cluster",
        "previous_cluster",
        "hops",
        "received_at_ms",
        "latency_ms",
        hop.alias("hop_latency_ms"),
        "topic",
        "event_id",
    )


def _compute(inputs: GoldInputs) -> DataFrame:
    return heartbeat_latency(inputs.restrict(inputs.silver("heartbeat")))


TABLE = GoldTable(
    SPEC,
    touched=lambda changes: touched_keys(changes, {"heartbeat": HEARTBEAT_KEY}),
    compute=_compute,
)
