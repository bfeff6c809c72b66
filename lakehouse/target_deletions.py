"""Copies deleted from the target after they were replicated: per partition, from the mapping and
the target's log start (``replicator.client.failover_cost.deleted_on_target``, the plan's rule).

A replicated record whose every copy lies below the target partition's log start (time retention
of old CreateTime timestamps, ``delete-records``, size retention) is gone for any consumer of the
target, whatever the audits said when they compared it: gold ``rpo`` counts them at risk, gold
``rpo_groups`` counts those a group has not read yet as lost (``lost_cause``), and gold
``divergence`` reports them (kind ``target_records_deleted``).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse.offset_mapping import MAPPING_KEY
from replicator.client.failover_cost import deleted_on_target
from replicator.client.mapping import Segment

__all__ = ["segments_by_partition", "deleted_copies", "may_be_deleted", "DELETED"]

DELETED = T.StructType(
    [T.StructField(n, T.LongType()) for n in ("records", "upstream_first", "upstream_last", "downstream_first")]
)


def segments_by_partition(mapping: DataFrame) -> DataFrame:
    """Gold ``offset_mapping`` as one row per partition with its segments in ``_segments``."""
    return mapping.groupBy(*MAPPING_KEY).agg(
        F.collect_list(
            F.struct(
                F.col("upstream_start").alias("us"),
                F.col("upstream_end").alias("ue"),
                F.col("downstream_start").alias("ds"),
                F.col("downstream_end").alias("de"),
            )
        ).alias("_segments")
    )


@F.udf(returnType=DELETED)
def _deleted(segments, log_start, since):  # no type hints: pyspark would take it for an Arrow UDF
    if log_start is None:
        return None
    segs = [Segment(s["ds"], s["us"], s["ue"], s["de"]) for s in segments or []]
    gone = deleted_on_target(segs, log_start, since or 0)
    return (gone.records, gone.upstream_first, gone.upstream_last, gone.downstream_first)


def may_be_deleted(segments: Column, log_start: Column, since: Column) -> Column:
    """True where some segment holds a copy ``>= since`` below ``log_start`` (Spark-native).

    Copies can only be gone where this holds (``deleted_on_target``: a segment's first copy from
    ``since`` on lands at ``max(upstream_start, since) + delta``), so elsewhere the answer is 0.
    """

    def low_copy_below(s: Column) -> Column:
        lo = F.greatest(s["us"], since)
        return (lo <= s["ue"]) & (lo + (s["ds"] - s["us"]) < log_start)

    return (log_start > 0) & F.coalesce(F.exists(segments, low_copy_below), F.lit(False))


def deleted_copies(segments: Column, log_start: Column, since: Column | None = None) -> Column:
    """struct(records, upstream_first, upstream_last, downstream_first) of the copies gone below
    ``log_start`` among upstream offsets ``>= since`` (all without it); null when ``log_start`` is.

    The Python UDF gets the segments only where ``may_be_deleted`` holds (elsewhere null, which
    gives the same 0): shipping every partition's segments to Python for every watermark row was
    most of gold ``rpo``'s time.
    """
    since = since if since is not None else F.lit(0)
    needed = may_be_deleted(segments, log_start, F.coalesce(since, F.lit(0)))
    return _deleted(F.when(needed, segments), log_start, since)
