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

from functools import reduce

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from lakehouse.gold import TAIL_FROM, GoldInputs, GoldTable, Tail, touched_keys
from lakehouse.tables.offset_mapping import MAPPING_KEY
from lakehouse.tables.offset_mapping.spark import current_mapping, recreated_key
from lakehouse.tables.rpo import SPEC
from lakehouse.target_deletions import deleted_copies, segments_by_partition

__all__ = ["rpo", "TABLE", "last_replicated"]

_NO_BOUND = -(2**63)  # a partition recomputed whole: no bound on the times


def last_replicated(
    syncs: DataFrame, observations: DataFrame, time_col: str, carry: DataFrame | None = None
) -> DataFrame:
    """``observations`` plus the last copy (``_last``: struct u, ts) proven by syncs emitted by ``time_col``.

    ``observations`` needs the mapping key columns and ``time_col``; a sync at the same
    millisecond counts (it is ordered before the observation). ``carry`` (key, ``_t``, ``_last``)
    stands for the syncs emitted by ``_t`` that ``syncs`` leaves out (a tail's start).
    """
    points = syncs.select(
        *MAPPING_KEY,
        F.col("emitted_at_ms").alias("_t"),
        F.lit(0).alias("_kind"),
        F.struct(F.col("upstream_offset").alias("u"), F.col("upstream_timestamp_ms").alias("ts")).alias("_point"),
    )
    if carry is not None:
        points = points.unionByName(
            carry.select(*MAPPING_KEY, "_t", F.lit(0).alias("_kind"), F.col("_last").alias("_point"))
        )
    no_point = F.lit(None).cast(points.schema["_point"].dataType)
    obs = observations.select("*", F.col(time_col).alias("_t"), F.lit(1).alias("_kind"), no_point.alias("_point"))
    w = Window.partitionBy(*MAPPING_KEY).orderBy("_t", "_kind").rowsBetween(Window.unboundedPreceding, 0)
    both = obs.unionByName(points, allowMissingColumns=True).withColumn("_last", F.max("_point").over(w))
    return both.where("_kind = 1").drop("_t", "_kind", "_point")


def _with_target_mark(observations: DataFrame, watermarks: DataFrame, carry: DataFrame | None = None) -> DataFrame:
    """``observations`` plus ``_tmark`` (struct t, log_start): the latest target watermark at or before each
    (``carry``: key, ``_t``, ``_tmark`` for the watermarks by ``_t`` that ``watermarks`` leaves out)."""
    marks = watermarks.where(F.col("side") == "target").select(
        *MAPPING_KEY,
        F.col("observed_at_ms").alias("_t"),
        F.lit(0).alias("_kind"),
        F.struct(F.col("observed_at_ms").alias("t"), F.col("log_start_offset").alias("log_start")).alias("_point"),
    )
    if carry is not None:
        marks = marks.unionByName(
            carry.select(*MAPPING_KEY, "_t", F.lit(0).alias("_kind"), F.col("_tmark").alias("_point"))
        )
    no_point = F.lit(None).cast(marks.schema["_point"].dataType)
    obs = observations.select(
        "*", F.col("observed_at_ms").alias("_t"), F.lit(1).alias("_kind"), no_point.alias("_point")
    )
    w = Window.partitionBy(*MAPPING_KEY).orderBy("_t", "_kind").rowsBetween(Window.unboundedPreceding, 0)
    both = obs.unionByName(marks, allowMissingColumns=True).withColumn("_tmark", F.max("_point").over(w))
    return both.where("_kind = 1").drop("_t", "_kind", "_point")


def rpo(
    watermarks: DataFrame, syncs: DataFrame, mapping: DataFrame | None = None, carry: DataFrame | None = None
) -> DataFrame:
    """The table from silver ``watermark`` and ``offset_sync`` rows and gold ``offset_mapping`` (same keys).

    Without ``mapping`` no deletion on the target is counted (``records_deleted_on_target`` null).
    ``carry`` (key, ``_t``, ``_last``, ``_tmark``) stands for the syncs and target watermarks up to
    ``_t`` when ``watermarks`` and ``syncs`` hold only what came after (``_tail``).
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
    joined = _with_target_mark(last_replicated(syncs, source, "observed_at_ms", carry), watermarks, carry)
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
        current_mapping(inputs),
    )


def _tail(inputs: GoldInputs) -> Tail:
    """The touched partitions' rows observed after their last row before the first new event.

    A row depends on the syncs and target watermarks up to its observation (running maxima) and
    on the mapping. For a partition whose new syncs and watermarks are all later than its row at
    ``B`` (the last one before them), that row's last copy and target log start stand for
    everything up to ``B`` (``carry``), so the rows after ``B`` come from the silver rows after
    ``B`` alone (a literal time bound lets Delta skip older files). Rows up to ``B`` keep their
    values, except the copies deleted on the target, which follow the mapping as it is now: the
    rows whose target log start lies above the partition's first copy get them again.
    """
    key = list(MAPPING_KEY)
    new_times = [
        inputs.changes["offset_sync"].select(*key, F.col("emitted_at_ms").alias("_t"))
        if "offset_sync" in inputs.changes
        else None,
        inputs.changes["watermark"].select(*key, F.col("observed_at_ms").alias("_t"))
        if "watermark" in inputs.changes
        else None,
        # a re-creation: the mapping's current life changes from then on
        inputs.changes["topic_recreated"].select(*recreated_key(), F.col("emitted_at_ms").alias("_t"))
        if "topic_recreated" in inputs.changes
        else None,
    ]
    times = reduce(DataFrame.unionByName, [t for t in new_times if t is not None])
    first_new = times.groupBy(*key).agg(F.min("_t").alias("_first"))
    held = inputs.restrict(inputs.gold("rpo"))
    last = F.struct(F.col("last_replicated_offset").alias("u"), F.col("last_replicated_timestamp_ms").alias("ts"))
    tmark = F.struct(F.col("observed_at_ms").alias("t"), F.col("target_log_start_offset").alias("log_start"))
    before = (
        held.join(first_new, key)
        .where(F.col("observed_at_ms") < F.col("_first"))
        .groupBy(*key)
        .agg(
            F.max("observed_at_ms").alias("_t"),
            F.max_by(F.when(F.col("last_replicated_offset").isNotNull(), last), "observed_at_ms").alias("_last"),
            F.max_by(F.when(F.col("target_log_start_offset").isNotNull(), tmark), "observed_at_ms").alias("_tmark"),
        )
    )
    assert inputs.keys is not None
    scope = inputs.keys.join(before, key, "left").localCheckpoint()
    lowest = scope.agg(F.min(F.coalesce(F.col("_t"), F.lit(_NO_BOUND)))).first()
    syncs = inputs.restrict(inputs.silver("offset_sync"))
    watermarks = inputs.restrict(inputs.silver("watermark"))
    if lowest is not None and lowest[0] is not None and lowest[0] != _NO_BOUND:
        syncs = syncs.where(F.col("emitted_at_ms") > F.lit(lowest[0]))
        watermarks = watermarks.where(F.col("observed_at_ms") > F.lit(lowest[0]))
    after = F.col("_t").isNull()
    syncs = syncs.join(F.broadcast(scope.select(*key, "_t")), key).where(after | (F.col("emitted_at_ms") > F.col("_t")))
    watermarks = watermarks.join(F.broadcast(scope.select(*key, "_t")), key).where(
        after | (F.col("observed_at_ms") > F.col("_t"))
    )
    mapping = current_mapping(inputs)
    carry = scope.where(F.col("_t").isNotNull())
    rows = rpo(watermarks.drop("_t"), syncs.drop("_t"), mapping, carry)
    rows = rows.unionByName(_deleted_again(held.join(F.broadcast(scope.select(*key, "_t")), key), mapping))
    tail_from = F.when(after, F.lit(None)).otherwise(F.struct((F.col("_t") + 1).alias("observed_at_ms")))
    return Tail(rows, scope.select(*key, tail_from.alias(TAIL_FROM)))


def _deleted_again(held: DataFrame, mapping: DataFrame) -> DataFrame:
    """Rows up to the tail's start (``_t``) whose deleted copies the mapping as it is now may change:
    where the target log start lies above the partition's first copy (elsewhere the count is 0)."""
    segments = segments_by_partition(mapping)
    log_start = F.col("target_log_start_offset")
    old = held.where(F.col("observed_at_ms") <= F.col("_t")).drop("_t").join(segments, list(MAPPING_KEY))
    old = old.where((log_start > 0) & (F.col("_first_copy") < log_start))
    deleted = deleted_copies(F.col("_segments"), F.col("_first_copy"), log_start)["records"]
    columns = [c for c in held.columns if c != "_t"]
    return (
        old.withColumn("records_deleted_on_target", deleted)
        .withColumn("records_at_risk", (F.col("records_unreplicated") + F.coalesce(deleted, F.lit(0))).cast("long"))
        .select(*columns)
    )


TABLE = GoldTable(
    SPEC,
    touched=lambda changes: touched_keys(
        changes, {"watermark": MAPPING_KEY, "offset_sync": MAPPING_KEY, "topic_recreated": recreated_key()}
    ),
    compute=_compute,
    tail=_tail,
)
