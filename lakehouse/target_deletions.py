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

from lakehouse.intervals import merged, size
from lakehouse.tables.offset_mapping import MAPPING_KEY

__all__ = ["segments_by_partition", "deleted_copies", "DELETED"]

DELETED = T.StructType(
    [T.StructField(n, T.LongType()) for n in ("records", "upstream_first", "upstream_last", "downstream_first")]
)


def segments_by_partition(mapping: DataFrame) -> DataFrame:
    """Gold ``offset_mapping`` as one row per partition: its segments in ``_segments`` and, in
    ``_first_copy``, the lowest target offset any of them starts at (``deleted_copies``' filter)."""
    return mapping.groupBy(*MAPPING_KEY).agg(
        F.collect_list(
            F.struct(
                F.col("upstream_start").alias("us"),
                F.col("upstream_end").alias("ue"),
                F.col("downstream_start").alias("ds"),
                F.col("downstream_end").alias("de"),
            )
        ).alias("_segments"),
        F.min("downstream_start").alias("_first_copy"),
    )


def _deleted_native(segments: Column, log_start: Column, since: Column) -> Column:
    """``deleted_on_target`` in Spark expressions, for ``log_start > 0``: the copied offsets
    (from ``since``) minus those with a copy at or above the log start, each as merged intervals;
    the live intervals lie inside the copied ones, so the count is the difference of their sizes."""

    def start(s: Column) -> Column:
        return F.greatest(s["us"], since)

    def delta(s: Column) -> Column:
        return s["ds"] - s["us"]

    copied = merged(segments, start)
    live = merged(segments, lambda s: F.greatest(start(s), log_start - delta(s)))
    records = size(copied) - size(live)

    def first_uncovered(c: Column) -> Column:  # from c.lo up, past every live interval covering it
        x = F.aggregate(live, c["lo"], lambda x, v: F.when((v["lo"] <= x) & (x <= v["hi"]), v["hi"] + 1).otherwise(x))
        return F.struct(x.alias("x"), c["hi"].alias("bound"))

    def last_uncovered(c: Column) -> Column:  # from c.hi down
        x = F.aggregate(
            F.reverse(live), c["hi"], lambda x, v: F.when((v["lo"] <= x) & (x <= v["hi"]), v["lo"] - 1).otherwise(x)
        )
        return F.struct(x.alias("x"), c["lo"].alias("bound"))

    firsts = F.filter(F.transform(copied, first_uncovered), lambda k: k["x"] <= k["bound"])
    lasts = F.filter(F.transform(copied, last_uncovered), lambda k: k["x"] >= k["bound"])
    below = F.filter(segments, lambda s: (start(s) <= s["ue"]) & (start(s) + delta(s) < log_start))
    first_d = F.array_min(F.transform(below, lambda s: start(s) + delta(s)))
    found = F.struct(
        records.alias("records"),
        F.array_min(F.transform(firsts, lambda k: k["x"])).alias("upstream_first"),
        F.array_max(F.transform(lasts, lambda k: k["x"])).alias("upstream_last"),
        first_d.alias("downstream_first"),
    )
    return F.when(records > 0, found).otherwise(_none())


def _none() -> Column:
    return F.struct(
        F.lit(0).cast("long").alias("records"), *[F.lit(None).cast("long").alias(n) for n in DELETED.names[1:]]
    )


def deleted_copies(segments: Column, first_copy: Column, log_start: Column, since: Column | None = None) -> Column:
    """struct(records, upstream_first, upstream_last, downstream_first) of the copies gone below
    ``log_start`` among upstream offsets ``>= since`` (all without it); null when ``log_start`` is.

    ``segments`` and ``first_copy`` are ``segments_by_partition``'s columns. The rule
    (``deleted_on_target``) is evaluated in Spark expressions, and only where ``first_copy <
    log_start``: a copy from ``since`` on lands at ``max(upstream_start, since) + delta >=
    downstream_start``, so where every segment starts at or above the log start nothing is gone.
    It was a Python UDF called for every watermark row (1e6 events, warm: gold ``rpo`` took 3.7 s
    with it and the mapping's join, 2.6 s without either).
    """
    since = since if since is not None else F.lit(0)
    needed = (log_start > 0) & F.coalesce(first_copy < log_start, F.lit(False))
    return (
        F.when(log_start.isNull(), F.lit(None).cast(DELETED))
        .when(
            needed,
            _deleted_native(
                F.coalesce(segments, F.array().cast(segments_type())), log_start, F.coalesce(since, F.lit(0))
            ).cast(DELETED),
        )
        .otherwise(_none().cast(DELETED))
    )


def segments_type() -> T.ArrayType:
    """The type of ``segments_by_partition``'s ``_segments``."""
    return T.ArrayType(T.StructType([T.StructField(n, T.LongType()) for n in ("us", "ue", "ds", "de")]))
