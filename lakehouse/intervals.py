"""Interval arithmetic over a partition's mapping segments, in Spark expressions.

A partition's segments (``target_deletions.segments_by_partition``: an array of struct ``us``,
``ue``, ``ds``, ``de``) become upstream intervals ``[low(s), s.ue]``, inclusive, where ``low`` says
from which upstream offset a segment counts (e.g. from a committed offset on). The Python rules in
``replicator.client.failover_cost`` are the reference these follow; here they run inside the JVM,
so a gold table does not ship every row's segment list to a Python worker and back.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

__all__ = ["INTERVALS", "merged", "size", "union_size", "clipped_total", "Low"]

INTERVALS = T.ArrayType(T.StructType([T.StructField("lo", T.LongType()), T.StructField("hi", T.LongType())]))

Low = Callable[[Column], Column]  # a segment -> the first upstream offset of it that counts


def _spans(segments: Column, low: Low) -> Column:
    """``[low(s), s.ue]`` of every segment, empty ones (low above the end) dropped, sorted by lo then hi."""
    spans = F.transform(segments, lambda s: F.struct(low(s).alias("lo"), s["ue"].alias("hi")))
    return F.array_sort(F.filter(spans, lambda i: i["lo"] <= i["hi"]))


def merged(segments: Column, low: Low) -> Column:
    """``interval_union`` of ``[low(s), s.ue]`` over the segments: sorted, disjoint, adjacent ones joined."""

    def add(acc: Column, i: Column) -> Column:
        last = F.try_element_at(acc, F.lit(-1))
        joined = F.struct(last["lo"].alias("lo"), F.greatest(last["hi"], i["hi"]).alias("hi"))
        touches = (F.size(acc) > 0) & (i["lo"] <= last["hi"] + 1)
        return F.when(touches, F.concat(F.slice(acc, 1, F.size(acc) - 1), F.array(joined))).otherwise(
            F.concat(acc, F.array(i))
        )

    return F.aggregate(_spans(segments, low), F.array().cast(INTERVALS), add)


def size(intervals: Column) -> Column:
    """Offsets in disjoint ``intervals`` (``merged``'s result)."""
    return F.aggregate(intervals, F.lit(0).cast("long"), lambda n, i: n + i["hi"] - i["lo"] + 1)


def union_size(segments: Column, low: Low) -> Column:
    """``union_size`` of ``[low(s), s.ue]``: distinct upstream offsets the segments cover from their
    low on. One pass over the sorted spans, keeping only the end so far (``merged`` builds arrays)."""
    start = F.struct(F.lit(None).cast("long").alias("end"), F.lit(0).cast("long").alias("total"))

    def add(acc: Column, i: Column) -> Column:
        end = acc["end"]
        gained = (
            F.when(end.isNull() | (i["lo"] > end), i["hi"] - i["lo"] + 1)
            .when(i["hi"] > end, i["hi"] - end)
            .otherwise(F.lit(0).cast("long"))
        )
        return F.struct(F.greatest(end, i["hi"]).alias("end"), (acc["total"] + gained).alias("total"))

    return F.aggregate(_spans(segments, low), start, add, lambda acc: acc["total"])


def clipped_total(segments: Column, low: Low, high: Low) -> Column:
    """Sum over the segments of ``max(0, high(s) - low(s) + 1)``: offsets counted once per copy."""
    return F.aggregate(
        segments, F.lit(0).cast("long"), lambda n, s: n + F.greatest(F.lit(0).cast("long"), high(s) - low(s) + 1)
    )
