"""Gold ``rpo``: records at risk per flow, source partition and observation (source watermark).

For each source-side ``watermark`` event, ``last_replicated_offset`` is the largest upstream
offset an offset sync emitted at or before the observation proves copied (the replicator flushes
a sync for its last copy every ``sync_interval_seconds``, so this lags by at most that). Then:

* ``records_behind`` = log-end - (last replicated + 1): offsets not yet replicated (an upper
  bound on records: transaction markers and aborted records after the last copy count too).
* ``records_unreplicated`` = log-end - max(last replicated + 1, log-start): the same, adjusted
  for the known gap at the head of the log: records the source deleted (retention, deletion)
  before they were copied are not pending, they are ``records_expired_unreplicated`` (lost).
* ``bytes_unreplicated``: always null for now, meaning *unknown*, never 0: no event carries
  record sizes yet (watermark v1 has offsets and timestamps only).
* ``seconds_unreplicated``: age of the oldest un-replicated record at the observation, bounded
  by what the events give: it came after the last copied record, so its age is at most
  ``observed_at - upstream timestamp of the last copy`` (reported; exact when record timestamps
  grow with offsets) and at least ``observed_at - max_timestamp`` of the watermark
  (``seconds_unreplicated_min``). 0 when nothing is behind; null when nothing was ever copied.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from lakehouse.gold import GoldInputs, GoldTable, touched_keys
from lakehouse.offset_mapping import MAPPING_KEY

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


def rpo(watermarks: DataFrame, syncs: DataFrame) -> DataFrame:
    """The table from silver ``watermark`` and ``offset_sync`` rows (same keys)."""
    source = watermarks.where(F.col("side") == "source").select(
        *MAPPING_KEY,
        "cluster",
        "topic",
        "observed_at_ms",
        "log_start_offset",
        "log_end_offset",
        "max_timestamp_ms",
        F.col("event_id").alias("watermark_event_id"),
    )
    joined = last_replicated(syncs, source, "observed_at_ms")
    last = F.col("_last.u")
    next_needed = F.coalesce(last + 1, F.col("log_start_offset"))
    behind = F.greatest(F.lit(0), F.col("log_end_offset") - next_needed)
    unreplicated = F.greatest(F.lit(0), F.col("log_end_offset") - F.greatest(next_needed, F.col("log_start_offset")))
    expired = F.when(last.isNotNull(), F.greatest(F.lit(0), F.col("log_start_offset") - (last + 1))).otherwise(0)
    age = (F.col("observed_at_ms") - F.col("_last.ts")) / 1000.0
    age_min = (F.col("observed_at_ms") - F.col("max_timestamp_ms")) / 1000.0
    return joined.select(
        *MAPPING_KEY,
        F.col("cluster").alias("source_cluster"),
        "observed_at_ms",
        "log_start_offset",
        "log_end_offset",
        last.alias("last_replicated_offset"),
        F.col("_last.ts").alias("last_replicated_timestamp_ms"),
        behind.cast("long").alias("records_behind"),
        unreplicated.cast("long").alias("records_unreplicated"),
        expired.cast("long").alias("records_expired_unreplicated"),
        F.lit(None).cast("long").alias("bytes_unreplicated"),
        F.when(unreplicated == 0, F.lit(0.0))
        .otherwise(F.when(last.isNotNull(), F.greatest(F.lit(0.0), age)))
        .alias("seconds_unreplicated"),
        F.when(unreplicated == 0, F.lit(0.0))
        .otherwise(F.greatest(F.lit(0.0), age_min))
        .alias("seconds_unreplicated_min"),
        "watermark_event_id",
    )


def _compute(inputs: GoldInputs) -> DataFrame:
    return rpo(inputs.restrict(inputs.silver("watermark")), inputs.restrict(inputs.silver("offset_sync")))


TABLE = GoldTable(
    name="rpo",
    key=MAPPING_KEY,
    row_id=(*MAPPING_KEY, "watermark_event_id"),
    sources=("watermark", "offset_sync"),
    touched=lambda changes: touched_keys(changes, {"watermark": MAPPING_KEY, "offset_sync": MAPPING_KEY}),
    compute=_compute,
)
