"""Gold ``rpo``: records at risk per flow, source partition and observation (source watermark).

Watermark v2 (source side) carries the flow's replicated position ``read_position`` (everything
before it is on the target, or is a transaction marker or aborted record) and the tail after it
*measured by reading it* (``replicator.tasks.tails``): then

* ``records_unreplicated`` = ``unreplicated_records``: records a consumer would see in
  ``[max(read_position, log-start), log-end)``, exact: a caught-up flow has 0, whatever order the
  final syncs and watermarks were emitted in (the position travels in the watermark itself);
* ``bytes_unreplicated`` = their key + value bytes; ``seconds_unreplicated`` = age of the oldest
  of them at the observation (0 when none);
* ``records_behind`` = log-end - read position (offsets, markers included);
* ``records_expired_unreplicated`` = log-start - read position when the source deleted records
  (retention, deletion) before they were copied: lost, not pending.

A v1 watermark (or a v2 one whose tail was too long to read at once: nulls) falls back to the
offsets: ``last_replicated_offset`` is the largest upstream offset an offset sync emitted at or
before the observation proves copied, ``records_behind`` = log-end - (last + 1) and
``records_unreplicated`` = log-end - max(last + 1, log-start), an upper bound (markers and aborted
records count); ``bytes_unreplicated`` null (unknown, never 0); ``seconds_unreplicated`` at most
``observed_at - upstream timestamp of the last copy``, at least ``observed_at - max_timestamp``
(``seconds_unreplicated_min``).

Records deleted from the target after they were copied (``lakehouse.target_deletions``): with the
latest target watermark observed at or before the source observation (the watermark task observes
the target first), ``records_deleted_on_target`` counts the replicated records whose every copy
lies below the target's log start (``target_log_start_offset``): no failover finds them. Null
without a target watermark. ``records_at_risk`` = ``records_unreplicated`` + that count.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from lakehouse.gold import GoldInputs, GoldTable, touched_keys
from lakehouse.offset_mapping import MAPPING_KEY
from lakehouse.target_deletions import deleted_copies, segments_by_partition

__all__ = ["rpo", "TABLE", "last_replicated"]


def last_replicated(syncs: DataFrame, observations: DataFrame, time_col: str) -> DataFrame:
    """``observations`` plus the last copy (``_last``: struct u, ts) proven by syncs emitted by ``time_col``.

    ``observations`` needs the mapping key columns and ``time_col``; a sync at the same
    millisecond counts (it is ordered before the observation).
    """
    points = syncs.select(
        *MAPPING_KEY,
        F.col("emitted_at_ms").alias("_t"),
        F.lit(0).alias("_kind"),
        F.struct(F.col("upstream_offset").alias("u"), F.col("upstream_timestamp_ms").alias("ts")).alias("_point"),
    )
    no_point = F.lit(None).cast(points.schema["_point"].dataType)
    obs = observations.select("*", F.col(time_col).alias("_t"), F.lit(1).alias("_kind"), no_point.alias("_point"))
    w = Window.partitionBy(*MAPPING_KEY).orderBy("_t", "_kind").rowsBetween(Window.unboundedPreceding, 0)
    both = obs.unionByName(points, allowMissingColumns=True).withColumn("_last", F.max("_point").over(w))
    return both.where("_kind = 1").drop("_t", "_kind", "_point")


def _with_target_mark(observations: DataFrame, watermarks: DataFrame) -> DataFrame:
    """``observations`` plus ``_tmark`` (struct t, log_start): the latest target watermark at or before each."""
    marks = watermarks.where(F.col("side") == "target").select(
        *MAPPING_KEY,
        F.col("observed_at_ms").alias("_t"),
        F.lit(0).alias("_kind"),
        F.struct(F.col("observed_at_ms").alias("t"), F.col("log_start_offset").alias("log_start")).alias("_point"),
    )
    no_point = F.lit(None).cast(marks.schema["_point"].dataType)
    obs = observations.select(
        "*", F.col("observed_at_ms").alias("_t"), F.lit(1).alias("_kind"), no_point.alias("_point")
    )
    w = Window.partitionBy(*MAPPING_KEY).orderBy("_t", "_kind").rowsBetween(Window.unboundedPreceding, 0)
    both = obs.unionByName(marks, allowMissingColumns=True).withColumn("_tmark", F.max("_point").over(w))
    return both.where("_kind = 1").drop("_t", "_kind", "_point")


def rpo(watermarks: DataFrame, syncs: DataFrame, mapping: DataFrame | None = None) -> DataFrame:
    """The table from silver ``watermark`` and ``offset_sync`` rows and gold ``offset_mapping`` (same keys).

    Without ``mapping`` no deletion on the target is counted (``records_deleted_on_target`` null).
    """
    source = watermarks.where(F.col("side") == "source").select(
        *MAPPING_KEY,
        "cluster",
        "topic",
        "observed_at_ms",
        "log_start_offset",
        "log_end_offset",
        "max_timestamp_ms",
        "read_position",
        "position_source",
        "unreplicated_records",
        "unreplicated_bytes",
        "oldest_unreplicated_timestamp_ms",
        F.col("event_id").alias("watermark_event_id"),
    )
    joined = _with_target_mark(last_replicated(syncs, source, "observed_at_ms"), watermarks)
    if mapping is not None:
        joined = joined.join(segments_by_partition(mapping), list(MAPPING_KEY), "left")
        deleted = deleted_copies(F.col("_segments"), F.col("_first_copy"), F.col("_tmark.log_start"))["records"]
    else:
        deleted = F.lit(None).cast("long")
    last = F.col("_last.u")
    pos = F.col("read_position")
    measured = F.col("unreplicated_records")
    next_needed = F.coalesce(pos, last + 1, F.col("log_start_offset"))
    behind = F.greatest(F.lit(0), F.col("log_end_offset") - next_needed)
    bound = F.greatest(F.lit(0), F.col("log_end_offset") - F.greatest(next_needed, F.col("log_start_offset")))
    unreplicated = F.coalesce(measured, bound)
    known_next = F.coalesce(pos, last + 1)
    expired = F.coalesce(F.greatest(F.lit(0), F.col("log_start_offset") - known_next), F.lit(0))
    age = (F.col("observed_at_ms") - F.coalesce(F.col("oldest_unreplicated_timestamp_ms"), F.col("_last.ts"))) / 1000.0
    age_min = (F.col("observed_at_ms") - F.col("max_timestamp_ms")) / 1000.0
    return joined.select(
        *MAPPING_KEY,
        F.col("cluster").alias("source_cluster"),
        "observed_at_ms",
        "log_start_offset",
        "log_end_offset",
        "read_position",
        "position_source",
        last.alias("last_replicated_offset"),
        F.col("_last.ts").alias("last_replicated_timestamp_ms"),
        behind.cast("long").alias("records_behind"),
        unreplicated.cast("long").alias("records_unreplicated"),
        expired.cast("long").alias("records_expired_unreplicated"),
        F.col("_tmark.log_start").alias("target_log_start_offset"),
        deleted.alias("records_deleted_on_target"),
        (unreplicated + F.coalesce(deleted, F.lit(0))).cast("long").alias("records_at_risk"),
        F.when(measured.isNotNull(), F.col("unreplicated_bytes")).cast("long").alias("bytes_unreplicated"),
        F.when(unreplicated == 0, F.lit(0.0))
        .otherwise(F.when(measured.isNotNull() | last.isNotNull(), F.greatest(F.lit(0.0), age)))
        .alias("seconds_unreplicated"),
        F.when(unreplicated == 0, F.lit(0.0))
        .otherwise(F.greatest(F.lit(0.0), age_min))
        .alias("seconds_unreplicated_min"),
        "watermark_event_id",
    )


def _compute(inputs: GoldInputs) -> DataFrame:
    return rpo(
        inputs.restrict(inputs.silver("watermark")),
        inputs.restrict(inputs.silver("offset_sync")),
        inputs.restrict(inputs.gold("offset_mapping")),
    )


TABLE = GoldTable(
    name="rpo",
    key=MAPPING_KEY,
    row_id=(*MAPPING_KEY, "watermark_event_id"),
    sources=("watermark", "offset_sync"),
    touched=lambda changes: touched_keys(changes, {"watermark": MAPPING_KEY, "offset_sync": MAPPING_KEY}),
    compute=_compute,
    depends_on=("offset_mapping",),
)
