"""Gold ``rpo_groups``: per group and partition, what a failover *now* would lose and re-read.

Per (flow, group, source topic, partition) of ``group_offsets``: the group committed ``c`` on the
source; a failover resumes it at the checkpoint's ``translated_offset`` (what the replicator or
MM2 wrote to the target). With the mapping and the latest source watermark (DESIGN.md,
Definitions; ``replicator.client.failover_cost``):

* ``records_unreplicated``: source records ``>= c`` not copied yet: the tail the latest source
  watermark measured when ``c`` is at or before the flow's read position (exact), else its log-end
  minus max(c, read position or last copy + 1, log-start); null without a watermark: the RPO;
* ``records_lost``: replicated records ``>= c`` with no copy at or after the resume offset;
* ``records_reread`` / ``records_duplicated``: copies at or after it of records ``< c`` / extra
  copies of records ``>= c``;
* the same two at the exact translation (``*_at_exact``) for comparison (0 by construction unless
  replays left several copies);
* ``records_lost_total`` = unreplicated + lost.

Records deleted from the target after they were copied (``lakehouse.target_deletions``, the
plan's rule): with the latest target watermark's log start ``target_log_start_offset``, a resume
offset below it becomes the log start (``method`` ``log_start``: where a consumer would be reset
to), so ``records_lost`` (and ``*_at_exact``, at the exact translation raised the same way)
include the records ``>= c`` whose every copy is gone; ``records_deleted_on_target`` counts those
and ``lost_cause`` names the cause when they make the group lose records (null otherwise, and
without a target watermark).

``last_replicated_offset`` is the largest upstream offset a sync of the partition's current life
proves copied (the current mapping's largest ``upstream_end``, now, not as of the watermark): after
a source topic was re-created, the old topic's copies say nothing of the new one's offsets, and
the fallback of the replicated position (no read position in the watermark) must not use them.
``as_of_ms`` is the later of the checkpoint and the watermark.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse.gold import GoldInputs, GoldTable, Tail, latest, touched_keys
from lakehouse.intervals import clipped_total, union_size
from lakehouse.tables.group_offsets import GROUP_KEY
from lakehouse.tables.offset_mapping import MAPPING_KEY
from lakehouse.tables.offset_mapping.spark import current_mapping, recreated_key
from lakehouse.tables.rpo_groups import SPEC
from lakehouse.target_deletions import deleted_copies, segments_by_partition, segments_type
from replicator.client.failover_cost import DELETED_ON_TARGET

__all__ = ["rpo_groups", "failover_cost_column", "TABLE"]

_COST = T.StructType([T.StructField(n, T.LongType()) for n in ("lost", "reread", "duplicated")])


def failover_cost_column(segments: Column, committed: Column, resume_at: Column) -> Column:
    """struct(lost, reread, duplicated) of resuming at ``resume_at`` after committing ``committed``:
    ``failover_cost`` in Spark expressions (null when either offset is).

    It was a Python UDF that built a ``Segment`` for every segment of the partition, twice a row:
    with 2,000 segments per partition (the 1e7 bench's mapping) and 100 groups, 102 s.
    """
    c, t = committed, resume_at
    segs = _near(segments, c, t)

    def after_t(s: Column) -> Column:  # a segment's first upstream offset with a copy at or after t
        return F.greatest(s["us"], t - (s["ds"] - s["us"]))

    def after_t_ge_c(s: Column) -> Column:
        return F.greatest(after_t(s), c)

    distinct_after = union_size(segs, after_t_ge_c)
    cost = F.struct(
        (union_size(segs, lambda s: F.greatest(s["us"], c)) - distinct_after).alias("lost"),
        clipped_total(segs, after_t, lambda s: F.least(s["ue"], c - 1)).alias("reread"),
        (clipped_total(segs, after_t_ge_c, lambda s: s["ue"]) - distinct_after).alias("duplicated"),
    )
    return F.when(c.isNull() | t.isNull(), F.lit(None).cast(_COST)).otherwise(cost)


def _near(segments: Column, committed: Column, resume_at: Column) -> Column:
    """The segments ``failover_cost`` can count from ``committed`` and ``resume_at``: those with
    records at or after the committed offset or copies at or after the resume offset. A segment's
    delta is constant, so one ending below ``resume_at`` has all its copies below it, and one
    ending below ``committed`` no record at or after it. A group near the head keeps a few of
    thousands, before the sorts."""
    empty = F.array().cast(segments_type())
    return F.filter(F.coalesce(segments, empty), lambda s: (s["ue"] >= committed) | (s["de"] >= resume_at))


def rpo_groups(groups: DataFrame, mapping: DataFrame, watermarks: DataFrame) -> DataFrame:
    """The table from gold ``group_offsets``, the current life's ``offset_mapping`` and silver ``watermark``."""
    segments = segments_by_partition(mapping).withColumn(
        "last_replicated_offset", F.array_max(F.transform("_segments", lambda s: s["ue"]))
    )
    mark = latest(watermarks.where(F.col("side") == "source"), MAPPING_KEY, ["observed_at_ms"]).select(
        *MAPPING_KEY,
        F.col("log_start_offset").alias("source_log_start_offset"),
        F.col("log_end_offset").alias("source_log_end_offset"),
        F.col("observed_at_ms").alias("watermark_observed_at_ms"),
        F.col("read_position").alias("source_read_position"),
        F.col("unreplicated_records").alias("source_unreplicated_records"),
    )
    target_mark = latest(watermarks.where(F.col("side") == "target"), MAPPING_KEY, ["observed_at_ms"]).select(
        *MAPPING_KEY, F.col("log_start_offset").alias("target_log_start_offset")
    )
    base = (
        groups.select(*GROUP_KEY, "committed_offset", "translated_offset", "method", "exact_offset", "as_of_ms")
        .join(segments, list(MAPPING_KEY), "left")
        .join(mark, list(MAPPING_KEY), "left")
        .join(target_mark, list(MAPPING_KEY), "left")
    )
    c = F.col("committed_offset")
    log_start = F.col("target_log_start_offset")

    def below_log_start(offset: Column) -> Column:
        return log_start.isNotNull() & offset.isNotNull() & (offset < log_start)

    def resumable(offset: Column) -> Column:  # what a consumer would be reset to: the log start
        return F.when(below_log_start(offset), log_start).otherwise(offset)

    replicated_to = F.coalesce(F.col("source_read_position"), F.col("last_replicated_offset") + 1, c)
    next_needed = F.greatest(c, replicated_to, F.col("source_log_start_offset"))
    bound = F.greatest(F.lit(0), F.col("source_log_end_offset") - next_needed)
    measured = F.col("source_unreplicated_records")
    # the measured tail is exact when the group committed inside what was replicated
    unreplicated = F.when(measured.isNotNull() & (c <= F.col("source_read_position")), measured).otherwise(bound)
    unreplicated = unreplicated.cast("long")
    resume = resumable(F.col("translated_offset"))
    exact = resumable(F.col("exact_offset"))
    # the segments either cost reads, filtered once per row (a column of its own: Spark does not
    # inline it into its several uses), then each cost computed once
    costs = (
        base.withColumn("_near", _near(F.col("_segments"), c, F.least(resume, exact)))
        .withColumn("_at_resume", failover_cost_column(F.col("_near"), c, resume))
        .withColumn("_at_exact", failover_cost_column(F.col("_near"), c, exact))
    )
    at_resume, at_exact = F.col("_at_resume"), F.col("_at_exact")
    deleted = deleted_copies(F.col("_segments"), F.col("_first_copy"), log_start, c)["records"]
    cause = F.when((deleted > 0) & (at_resume["lost"] > 0), F.lit(DELETED_ON_TARGET))
    return costs.select(
        *GROUP_KEY,
        "committed_offset",
        resume.alias("resume_offset"),
        F.when(below_log_start(F.col("translated_offset")), F.lit("log_start"))
        .otherwise(F.col("method"))
        .alias("method"),
        "exact_offset",
        "last_replicated_offset",
        "source_log_start_offset",
        "source_log_end_offset",
        "watermark_observed_at_ms",
        unreplicated.alias("records_unreplicated"),
        at_resume["lost"].alias("records_lost"),
        at_resume["reread"].alias("records_reread"),
        at_resume["duplicated"].alias("records_duplicated"),
        at_exact["lost"].alias("records_lost_at_exact"),
        at_exact["reread"].alias("records_reread_at_exact"),
        (F.coalesce(unreplicated, F.lit(0)) + F.coalesce(at_resume["lost"], F.lit(0))).alias("records_lost_total"),
        log_start.alias("target_log_start_offset"),
        deleted.alias("records_deleted_on_target"),
        cause.cast("string").alias("lost_cause"),
        F.greatest("as_of_ms", "watermark_observed_at_ms").alias("as_of_ms"),
    )


def _compute(inputs: GoldInputs) -> DataFrame:
    return rpo_groups(
        inputs.restrict(inputs.gold("group_offsets")),
        current_mapping(inputs),
        inputs.restrict(inputs.silver("watermark")),
    )


def _tail(inputs: GoldInputs) -> Tail:
    """The touched partitions' rows, whole (the spec has no tail order)."""
    assert inputs.keys is not None
    return Tail(_compute(inputs), inputs.keys)


TABLE = GoldTable(
    SPEC,
    touched=lambda changes: touched_keys(
        changes,
        {
            "checkpoint": MAPPING_KEY,
            "offset_sync": MAPPING_KEY,
            "watermark": MAPPING_KEY,
            "topic_recreated": recreated_key(),
        },
    ),
    compute=_compute,
    tail=_tail,
)
