"""Gold ``offset_mapping``: one row per run of constant ``downstream - upstream`` per partition.

The Spark twin of ``replicator.client.mapping.build_segments`` (the reference the tests hold it to):
each offset sync proves one or two copied records (its own, and ``previous_*``); ordered by
downstream offset within (flow, source topic, partition), a point starts a new segment when its
delta differs from the previous point's, when the sync says the step from its predecessor was
not (+1, +1), or when it opens a producer session and is not adjacent to the previous point.
Overlapping upstream ranges are at-least-once replays; translation takes the latest copy. A
segment never spans two lives (a source or remote topic deleted and created again): a point whose
``source_topic_id`` differs from its predecessor's (both known) starts a segment, and each remote
topic (``target_topic_id``, whose offsets start again at 0 when it is created again; null before
offset_sync v3) has segments of its own. Each row names its life.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse.gold import TAIL_FROM, GoldInputs, GoldTable, Tail, touched_keys
from lakehouse.tables.offset_mapping import MAPPING_KEY, SPEC
from replicator.client.mapping import BOUNDARY, CONTINUES, SESSION_START
from replicator.events.model import SyncReason

__all__ = ["offset_mapping", "current_life", "current_mapping", "said_lives", "recreated_key", "TABLE"]

_NAMES = ("flow", "source_topic", "source_cluster", "target_cluster", "target_topic")
_KEY = ("_topic", "partition")  # MAPPING_KEY with (flow, source topic) as an id (``_named``)
_NO_BOUND = -(2**63)  # a partition recomputed whole: no bound on the target offsets


def _named(syncs: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(``syncs`` with ids instead of their five name columns, the ids): ``_topic`` per (flow,
    source topic), ``_names`` per distinct (flow, source topic, clusters, target topic).

    The points are sorted and aggregated by numbers only: a sort on string keys compares the
    strings row by row, and an aggregate with a string result (the clusters, the target topic)
    cannot be a hash aggregate, so it sorted all the points a second time.
    """
    names = [tuple(r) for r in syncs.select(*_NAMES).distinct().collect()]  # a handful of rows
    topics: dict[tuple[object, object], int] = {}
    rows = [(*n, topics.setdefault((n[0], n[1]), len(topics)), i) for i, n in enumerate(names)]
    schema = T.StructType(
        [T.StructField(c, T.StringType()) for c in _NAMES]
        + [T.StructField("_topic", T.LongType()), T.StructField("_names", T.LongType())]
    )
    ids = syncs.sparkSession.createDataFrame(rows, schema)
    same = reduce(lambda a, b: a & b, [F.col(f"s.{c}").eqNullSafe(F.col(f"i.{c}")) for c in _NAMES])
    tagged = syncs.alias("s").join(F.broadcast(ids.alias("i")), same).select("s.*", "i._topic", "i._names")
    return tagged.drop(*_NAMES), ids


def _points(tagged: DataFrame) -> DataFrame:
    """Each sync's point and, when it has one, its predecessor's, one row per (partition, d, u)."""
    base = ["_topic", "partition", "_names", "emitted_at_ms", "source_topic_id", "target_topic_id"]
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
    points = tagged.select(*base, F.explode(both).alias("_p")).select(*base, "_p.u", "_p.d", "_p.start")
    # a point per remote topic life: a re-created remote topic's offsets start again at 0
    return points.groupBy(*_KEY, "target_topic_id", "d", "u").agg(
        F.max("start").alias("start"),
        F.min("_names").alias("_names"),  # the names of a partition's syncs are one row (any one, as first())
        F.min("emitted_at_ms").alias("emitted_at_ms"),
        F.max("source_topic_id").alias("source_topic_id"),  # one per point: its copy's life
    )


def offset_mapping(syncs: DataFrame) -> DataFrame:
    """Segments from the silver ``offset_sync`` table (any number of flows and partitions)."""
    tagged, ids = _named(syncs)
    return _segments(_points(tagged), ids)


def _segments(points: DataFrame, ids: DataFrame) -> DataFrame:
    """Segments from ``_points``' rows: a new one wherever the step from the previous point breaks a run."""
    w = Window.partitionBy(*_KEY, "target_topic_id").orderBy("d", "u")  # each remote topic life apart
    prev_u, prev_d, prev_id = F.lag("u").over(w), F.lag("d").over(w), F.lag("source_topic_id").over(w)
    new_segment = (
        prev_u.isNull()
        | (F.col("source_topic_id") != prev_id)  # another life (null when either id is unknown)
        | ((F.col("d") - F.col("u")) != (prev_d - prev_u))
        | (F.col("u") <= prev_u)
        | (F.col("start") == BOUNDARY)
        | ((F.col("start") == SESSION_START) & (F.col("u") != prev_u + 1))
    )
    flagged = points.withColumn("segment", F.sum(new_segment.cast("int")).over(w))
    segments = flagged.groupBy(*_KEY, "target_topic_id", "segment").agg(
        F.min("_names").alias("_names"),
        F.min_by("u", "d").alias("upstream_start"),
        F.max_by("u", "d").alias("upstream_end"),
        F.min("d").alias("downstream_start"),
        F.max("d").alias("downstream_end"),
        F.count("*").alias("points"),
        F.min("emitted_at_ms").alias("first_synced_ms"),
        F.max("emitted_at_ms").alias("last_synced_ms"),
        F.max("source_topic_id").alias("source_topic_id"),
    )
    return (
        segments.join(F.broadcast(ids.drop("_topic")), "_names")
        .withColumn("delta", F.col("downstream_start") - F.col("upstream_start"))
        .select(
            "flow",
            "source_cluster",
            "target_cluster",
            "source_topic",
            "target_topic",
            "partition",
            "source_topic_id",
            "target_topic_id",
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


def _each_partition() -> Column:
    """A ``topic_recreated`` row's partitions, one row each (as ``lives.said_lives_sql``)."""
    return F.explode(F.sequence(F.lit(0), F.greatest(F.col("partitions"), F.lit(1)) - 1)).alias("partition")


def recreated_key() -> tuple[Column, ...]:
    """The mapping keys a ``topic_recreated`` row touches (for ``touched_keys``): every partition of its topic."""
    return F.col("flow"), F.col("source_topic"), _each_partition()


def said_lives(recreated: DataFrame) -> DataFrame:
    """Silver ``topic_recreated`` as the lives it starts: (mapping key, ``side``, ``topic_id``,
    ``said_ms``), one row per partition, at its earliest saying (as ``lives.said_lives_sql``)."""
    return (
        recreated.select(
            "flow", "source_topic", _each_partition(), "side", "topic_id", F.col("emitted_at_ms").alias("said_ms")
        )
        .groupBy(*MAPPING_KEY, "side", "topic_id")
        .agg(F.min("said_ms").alias("said_ms"))
    )


def current_life(mapping: DataFrame, said: DataFrame | None = None) -> DataFrame:
    """The rows of each partition's current life, as ``MappingIndex`` elects it (the rule, step by step,
    is ``lives.current_life_sql``'s): a life is a pair (source topic id, remote topic id) and starts at
    its earliest sync, or earlier where a ``topic_recreated`` event said it (``said_lives``); the one
    that started last is current. Rows with no id take the partition's first (an upgrade is not a new
    life), except a remote id first seen by a re-creation. A life said but not copied yet keeps no
    row: nothing is translated through another life's copies."""
    key = list(MAPPING_KEY)
    part = Window.partitionBy(*key)

    def first(column: str) -> Column:
        return F.min(F.when(F.col(column).isNotNull(), F.struct("first_synced_ms", column))).over(part)[column]

    rows = mapping.withColumn("_life_s", F.coalesce("source_topic_id", first("source_topic_id")))
    rows = rows.withColumn("_first_t", first("target_topic_id"))
    adopt = F.lit(True)
    if said is not None:  # a remote id first seen by a re-creation: the id-less rows are an older life
        target = said.where(F.col("side") == "target")
        said_first = target.select(*key, F.col("topic_id").alias("_first_t"), F.lit(True).alias("_said_first"))
        rows = rows.join(F.broadcast(said_first.distinct()), [*key, "_first_t"], "left")
        adopt = F.col("_said_first").isNull()
    rows = rows.withColumn("_life_t", F.coalesce("target_topic_id", F.when(adopt, F.col("_first_t"))))
    rows = rows.withColumn("_start", F.min("first_synced_ms").over(Window.partitionBy(*key, "_life_s", "_life_t")))
    if said is None:
        rows = rows.withColumn("_newest", F.max("_start").over(part))
        return rows.where(F.col("_start") >= F.col("_newest")).select(*mapping.columns)
    rows = rows.withColumns(
        {
            "_first_s_start": F.min("_start").over(Window.partitionBy(*key, "_life_s")),
            "_first_t_start": F.min("_start").over(Window.partitionBy(*key, "_life_t")),
        }
    )
    for side, life in (("source", "_life_s"), ("target", "_life_t")):
        one = said.where(F.col("side") == side).select(
            *key, F.col("topic_id").alias(life), F.col("said_ms").alias(f"_said{life}")
        )
        rows = rows.join(F.broadcast(one), [*key, life], "left")
    started = F.least(
        "_start",
        F.when(F.col("_start") == F.col("_first_s_start"), F.col("_said_life_s")),
        F.when(F.col("_start") == F.col("_first_t_start"), F.col("_said_life_t")),
    )
    newest_said = said.groupBy(*key).agg(F.max("said_ms").alias("_said_newest"))
    rows = rows.withColumn("_started", started).join(F.broadcast(newest_said), key, "left")
    newest = F.greatest(F.max("_started").over(part), F.col("_said_newest"))
    return rows.withColumn("_newest", newest).where(F.col("_started") >= F.col("_newest")).select(*mapping.columns)


def current_mapping(inputs: GoldInputs) -> DataFrame:
    """Gold ``offset_mapping`` of the keys being recomputed, current lives only: what the tables that
    translate or count copies read (a re-created topic's offsets never go through the old one's copies)."""
    said = said_lives(inputs.silver("topic_recreated"))  # a handful of rows: joined, not restricted
    return current_life(inputs.restrict(inputs.gold("offset_mapping")), said)


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
    changes = inputs.changes["offset_sync"]
    own = F.struct(
        F.col("downstream_offset").alias("downstream_start"), F.col("upstream_offset").alias("upstream_start")
    )
    prev = F.when(
        F.col("previous_upstream_offset").isNotNull() & F.col("previous_downstream_offset").isNotNull(),
        F.struct(
            F.col("previous_downstream_offset").alias("downstream_start"),
            F.col("previous_upstream_offset").alias("upstream_start"),
        ),
    )
    first_new = changes.groupBy(*key).agg(F.least(F.min(own), F.min(prev)).alias("_first"))
    start = F.struct("downstream_start", "upstream_start")  # a segment's place
    gold = inputs.restrict(inputs.gold("offset_mapping"))
    before = gold.join(first_new, key).where(start < F.col("_first")).groupBy(*key).agg(F.max(start).alias(TAIL_FROM))
    # a partition whose copies went into several remote topic lives is recomputed whole: their
    # downstream offsets overlap, so "the segment before the first new point" is no single place
    lives = (
        changes.select(*key, "target_topic_id")
        .unionByName(gold.select(*key, "target_topic_id"))
        .groupBy(*key)
        .agg(F.countDistinct("target_topic_id").alias("_lives"))
        .where(F.col("_lives") > 1)
    )
    before = before.join(lives, key, "left_anti")
    scope = inputs.keys.join(before, key, "left") if inputs.keys is not None else before
    scope = scope.localCheckpoint()
    syncs = inputs.restrict(inputs.silver("offset_sync"))
    lowest = scope.agg(F.min(F.coalesce(F.col(f"{TAIL_FROM}.downstream_start"), F.lit(_NO_BOUND)))).first()
    if lowest is not None and lowest[0] is not None and lowest[0] != _NO_BOUND:
        bound = F.lit(lowest[0])
        syncs = syncs.where((F.col("downstream_offset") >= bound) | (F.col("previous_downstream_offset") >= bound))
    tagged, ids = _named(syncs)
    tails = scope.join(F.broadcast(ids.select("flow", "source_topic", "_topic").distinct()), ["flow", "source_topic"])
    points = (
        _points(tagged)
        .join(F.broadcast(tails.select(*_KEY, TAIL_FROM)), list(_KEY))
        .where(F.col(TAIL_FROM).isNull() | (at >= F.col(TAIL_FROM)))
        .drop(TAIL_FROM)
    )
    return Tail(_segments(points, ids), scope.select(*key, TAIL_FROM))


TABLE = GoldTable(
    SPEC,
    touched=lambda changes: touched_keys(changes, {"offset_sync": MAPPING_KEY}),
    compute=_compute,
    tail=_tail,
)
