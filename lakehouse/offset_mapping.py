"""Gold ``offset_mapping``: one row per run of constant ``downstream - upstream`` per partition.

The Spark twin of ``replicator.client.mapping.build_segments`` (the reference the tests hold it to):
each offset sync proves one or two copied records (its own, and ``previous_*``); ordered by
downstream offset within (flow, source topic, partition), a point starts a new segment when its
delta differs from the previous point's, when the sync says the step from its predecessor was
not (+1, +1), or when it opens a producer session and is not adjacent to the previous point.
Overlapping upstream ranges are at-least-once replays; translation takes the latest copy.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from lakehouse.gold import TAIL_FROM, GoldInputs, GoldTable, Tail, touched_keys
from replicator.client.mapping import BOUNDARY, CONTINUES, SESSION_START
from replicator.events.model import SyncReason

__all__ = ["offset_mapping", "MAPPING_KEY", "TABLE"]

MAPPING_KEY = ("flow", "source_topic", "partition")
_NO_BOUND = -(2**63)  # a partition recomputed whole: no bound on the target offsets


def _points(syncs: DataFrame) -> DataFrame:
    base = [
        "flow",
        "source_cluster",
        "target_cluster",
        "source_topic",
        "target_topic",
        "partition",
        "emitted_at_ms",
    ]
    has_prev = F.col("previous_upstream_offset").isNotNull() & F.col("previous_downstream_offset").isNotNull()
    adjacent = ((F.col("upstream_offset") - F.col("previous_upstream_offset")) == 1) & (
        (F.col("downstream_offset") - F.col("previous_downstream_offset")) == 1
    )
    own_start = (
        F.when(has_prev, F.when(adjacent, F.lit(CONTINUES)).otherwise(F.lit(BOUNDARY)))
        .when(F.col("reason") == SyncReason.FIRST.value, F.lit(SESSION_START))
        .otherwise(F.lit(CONTINUES))
    )
    own = F.struct(F.col("upstream_offset").alias("u"), F.col("downstream_offset").alias("d"), own_start.alias("start"))
    prev = F.struct(
        F.col("previous_upstream_offset").alias("u"),
        F.col("previous_downstream_offset").alias("d"),
        F.lit(CONTINUES).alias("start"),
    )
    # one scan of silver: each sync gives its own point and, when it has one, its predecessor's
    both = F.when(has_prev, F.array(own, prev)).otherwise(F.array(own))
    points = syncs.select(*base, F.explode(both).alias("_p")).select(*base, "_p.u", "_p.d", "_p.start")
    return points.groupBy(*MAPPING_KEY, "d", "u").agg(
        F.max("start").alias("start"),
        F.first("source_cluster").alias("source_cluster"),
        F.first("target_cluster").alias("target_cluster"),
        F.first("target_topic").alias("target_topic"),
        F.min("emitted_at_ms").alias("emitted_at_ms"),
    )


def offset_mapping(syncs: DataFrame) -> DataFrame:
    """Segments from the silver ``offset_sync`` table (any number of flows and partitions)."""
    return _segments(_points(syncs))


def _segments(points: DataFrame) -> DataFrame:
    """Segments from ``_points``' rows: a new one wherever the step from the previous point breaks a run."""
    w = Window.partitionBy(*MAPPING_KEY).orderBy("d", "u")
    prev_u, prev_d = F.lag("u").over(w), F.lag("d").over(w)
    new_segment = (
        prev_u.isNull()
        | ((F.col("d") - F.col("u")) != (prev_d - prev_u))
        | (F.col("u") <= prev_u)
        | (F.col("start") == BOUNDARY)
        | ((F.col("start") == SESSION_START) & (F.col("u") != prev_u + 1))
    )
    flagged = points.withColumn("segment", F.sum(new_segment.cast("int")).over(w))
    return (
        flagged.groupBy(*MAPPING_KEY, "segment")
        .agg(
            F.first("source_cluster").alias("source_cluster"),
            F.first("target_cluster").alias("target_cluster"),
            F.first("target_topic").alias("target_topic"),
            F.min_by("u", "d").alias("upstream_start"),
            F.max_by("u", "d").alias("upstream_end"),
            F.min("d").alias("downstream_start"),
            F.max("d").alias("downstream_end"),
            F.count("*").alias("points"),
            F.min("emitted_at_ms").alias("first_synced_ms"),
            F.max("emitted_at_ms").alias("last_synced_ms"),
        )
        .withColumn("delta", F.col("downstream_start") - F.col("upstream_start"))
        .select(
            "flow",
            "source_cluster",
            "target_cluster",
            "source_topic",
            "target_topic",
            "partition",
            "upstream_start",
            "upstream_end",
            "downstream_start",
            "downstream_end",
            "delta",
            "points",
            "first_synced_ms",
            "last_synced_ms",
        )
    )


def _compute(inputs: GoldInputs) -> DataFrame:
    return offset_mapping(inputs.restrict(inputs.silver("offset_sync")))


def _tail(inputs: GoldInputs) -> Tail:
    """The segments of each touched partition from the one holding the last point before its new
    points on, from the silver syncs whose points lie there.

    Points are ordered by (d, u) and a segment is a run of consecutive points, so a new point at
    (d0, u0) can change only the segment holding the last existing point before it (its
    predecessor: the last segment starting before (d0, u0)) and what follows. That segment's start
    keeps its predecessor, so it still starts a segment, and recomputing the points from there on
    gives the rows a full build gives from there on. A partition whose new points come first is
    recomputed whole. Silver is read through a literal bound on the target offsets (the lowest tail
    start), which lets Delta skip the files of older syncs by their statistics.
    """
    key = list(MAPPING_KEY)
    at = F.struct(F.col("d").alias("downstream_start"), F.col("u").alias("upstream_start"))  # a point's place
    first_new = _points(inputs.changes["offset_sync"]).groupBy(*key).agg(F.min(at).alias("_first"))
    start = F.struct("downstream_start", "upstream_start")  # a segment's place
    before = (
        inputs.restrict(inputs.gold("offset_mapping"))
        .join(first_new, key)
        .where(start < F.col("_first"))
        .groupBy(*key)
        .agg(F.max(start).alias(TAIL_FROM))
    )
    scope = inputs.keys.join(before, key, "left") if inputs.keys is not None else before
    scope = scope.localCheckpoint()
    syncs = inputs.restrict(inputs.silver("offset_sync"))
    lowest = scope.agg(F.min(F.coalesce(F.col(f"{TAIL_FROM}.downstream_start"), F.lit(_NO_BOUND)))).first()
    if lowest is not None and lowest[0] is not None and lowest[0] != _NO_BOUND:
        bound = F.lit(lowest[0])
        syncs = syncs.where((F.col("downstream_offset") >= bound) | (F.col("previous_downstream_offset") >= bound))
    points = (
        _points(syncs)
        .join(F.broadcast(scope), key)
        .where(F.col(TAIL_FROM).isNull() | (at >= F.col(TAIL_FROM)))
        .drop(TAIL_FROM)
    )
    return Tail(_segments(points), scope.select(*key, TAIL_FROM))


TABLE = GoldTable(
    name="offset_mapping",
    key=MAPPING_KEY,
    row_id=(*MAPPING_KEY, "downstream_start", "upstream_start"),
    sources=("offset_sync",),
    touched=lambda changes: touched_keys(changes, {"offset_sync": MAPPING_KEY}),
    compute=_compute,
    tail=_tail,
    tail_order=("downstream_start", "upstream_start"),
)
