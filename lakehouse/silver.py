"""Bronze -> one typed, deduplicated Delta table per event type, plus the quarantine table.

A Delta streaming read of bronze (``availableNow``, checkpointed) feeds ``foreachBatch``: each
batch is classified by schema fingerprint, decoded per type, and MERGEd into ``silver/<type>``
on ``event_id`` (insert if absent), so replays, at-least-once duplicates in the state topic and a
batch re-run after a crash all leave one row per event. Records that are not events, or whose
body does not decode, are MERGEd into ``quarantine`` on their state-topic coordinates with the
reason: reported, never dropped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.window import Window

from ingest.paths import LakehousePaths
from lakehouse.avro_types import all_nullable, event_spark_schema
from lakehouse.decode import (
    INVALID,
    LINEAGE_COLUMNS,
    UNKNOWN_TYPE,
    VOUCHED,
    classify,
    decode_events,
    decode_in_python,
)
from lakehouse.duck.delta import version as bronze_version
from lakehouse.silver_progress import SilverProgress, read_progress, spark_checkpoint, write_progress
from lakehouse.silver_rows import NOT_AN_EVENT
from lakehouse.sql_quote import spark_path_ident
from replicator.events import registry
from replicator.events.validity import INVALID_PREFIX

__all__ = ["update_silver", "QUARANTINE_SCHEMA", "silver_schema"]

_log = logging.getLogger(__name__)

QUARANTINE_SCHEMA = T.StructType(
    [
        T.StructField("state_cluster", T.StringType(), False),
        T.StructField("state_topic", T.StringType(), False),
        T.StructField("state_partition", T.IntegerType(), False),
        T.StructField("state_offset", T.LongType(), False),
        T.StructField("value", T.BinaryType(), True),
        T.StructField("reason", T.StringType(), False),
        T.StructField("quarantined_at", T.TimestampType(), False),
    ]
)
_MAX_BATCH_BYTES = "128m"  # of bronze files per silver micro-batch (a soft limit, whole files)
_LINEAGE_TYPES = {
    "state_cluster": T.StringType(),
    "state_topic": T.StringType(),
    "state_partition": T.IntegerType(),
    "state_offset": T.LongType(),
}


def silver_schema(event_type: str) -> T.StructType:
    """Event columns (nullable, as decoded) plus where each event sits in the state topic."""
    fields = [T.StructField(f.name, all_nullable(f.dataType), True) for f in event_spark_schema(event_type).fields]
    fields += [T.StructField(name, dtype, False) for name, dtype in _LINEAGE_TYPES.items()]
    return T.StructType(fields)


def _ensure_table(
    spark: SparkSession, path: str, schema: T.StructType, *, change_feed: bool = False
) -> tuple[DeltaTable, bool]:
    """The Delta table at ``path`` and whether this call created it; silver tables keep a change
    data feed (gold reads it).

    A table made before its event type gained (nullable, defaulted) fields gets the new columns.
    """
    if DeltaTable.isDeltaTable(spark, path):
        table = DeltaTable.forPath(spark, path)
        have = set(table.toDF().columns)
        missing = [f for f in schema.fields if f.name not in have]
        if missing:
            cols = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in missing)
            spark.sql(f"ALTER TABLE {spark_path_ident(path)} ADD COLUMNS ({cols})")
        return table, False
    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema)
    if change_feed:
        builder = builder.property("delta.enableChangeDataFeed", "true")
    return builder.execute(), True


def _enable_change_feed(spark: SparkSession, paths: LakehousePaths) -> None:
    """Silver tables made before they kept a change feed get one (once per build, not per batch)."""
    for event_type in registry().event_types():
        path = str(paths.silver(event_type))
        if not DeltaTable.isDeltaTable(spark, path):
            continue
        row = DeltaTable.forPath(spark, path).detail().select("properties").first()
        if row is not None and row[0].get("delta.enableChangeDataFeed") != "true":
            spark.sql(f"ALTER TABLE {spark_path_ident(path)} SET TBLPROPERTIES (delta.enableChangeDataFeed = true)")


def _merge_batch(spark: SparkSession, paths: LakehousePaths, batch: DataFrame, batch_id: int) -> None:
    classified = classify(batch).persist()
    try:
        bad: list[DataFrame] = [
            classified.where(F.col("event_type") == UNKNOWN_TYPE).select(
                *[
                    F.col(o).alias(n)
                    for o, n in zip(("cluster", "topic", "partition", "offset"), LINEAGE_COLUMNS, strict=True)
                ],
                "value",
                F.lit(NOT_AN_EVENT).alias("reason"),
            )
        ]
        present = {r[0] for r in classified.select("event_type").distinct().collect()}
        for event_type in registry().event_types():
            if event_type not in present:
                continue  # no table is created for a type until its first event arrives
            decoded = decode_events(classified, event_type).persist()
            try:
                good, span = _vouched_rows(decoded, event_type, bad)
                path = str(paths.silver(event_type))
                table, created = _ensure_table(spark, path, silver_schema(event_type), change_feed=True)
                _insert_new(table, path, good, span, created=created)
            finally:
                decoded.unpersist()
        _quarantine(spark, paths, bad)
    finally:
        classified.unpersist()
    _log.info("silver batch %d merged", batch_id)


@dataclass(frozen=True)
class _Span:
    """The emission times of a batch's rows of one type: ``None`` bounds when a row lacks one."""

    low: int | None
    high: int | None


def _vouched_rows(decoded: DataFrame, event_type: str, bad: list[DataFrame]) -> tuple[DataFrame, _Span]:
    """The decoded rows of one type to insert (one per event id) and their emission span.

    One aggregate job answers the four questions a batch asks of its rows: are any not vouched
    for by the JVM decode, do any break a validity rule (``replicator.events.validity``: those go
    to quarantine), do event ids repeat, what span of emission times do they cover. Each
    was a job of its own, and a small build's silver stage was mostly such jobs. Rows the JVM
    could not vouch for (rare) are decoded with fastavro: the good ones join the rest, the
    failures are appended to ``bad`` (quarantine), and the rows are asked again.
    """
    valid = F.col(VOUCHED) & F.col(INVALID).isNull()
    stats = decoded.agg(
        F.count(F.when(~F.col(VOUCHED), 1)).alias("unvouched"),
        F.count(F.when(F.col(INVALID).isNotNull(), 1)).alias("invalid"),
        *_row_stats(valid),
    ).first()
    assert stats is not None  # an aggregate without grouping has one row
    good = decoded.where(valid).drop("value", VOUCHED, INVALID)
    if stats["invalid"]:  # forged or damaged events that decode: quarantined with the rule they break
        reason = F.concat(F.lit(INVALID_PREFIX), F.col(INVALID))
        bad.append(decoded.where(F.col(INVALID).isNotNull()).select(*LINEAGE_COLUMNS, "value", reason.alias("reason")))
    if stats["unvouched"]:  # rare: bodies the JVM could not decode canonically
        retried = decode_in_python(decoded.where(~F.col(VOUCHED)), event_type).localCheckpoint()
        good = good.unionByName(retried.where(F.col("decode_error").isNull()).drop("value", "decode_error"))
        bad.append(
            retried.where(F.col("decode_error").isNotNull()).select(
                *LINEAGE_COLUMNS, "value", F.col("decode_error").alias("reason")
            )
        )
        stats = good.agg(*_row_stats(F.lit(True))).first()
        assert stats is not None
    if stats["ids"] < stats["rows"]:
        # a replayed state topic repeated events within the batch (or two ids share a hash: the
        # exact deduplication below is then a no-op); the first copy in state-topic order stays,
        # as delta-rs's silver keeps it (``lakehouse.duck.silver``)
        first = Window.partitionBy("event_id").orderBy(*LINEAGE_COLUMNS)
        good = good.withColumn("_copy", F.row_number().over(first)).where(F.col("_copy") == 1).drop("_copy")
    timeless = stats["timeless"] or stats["low"] is None
    return good, _Span(None, None) if timeless else _Span(int(stats["low"]), int(stats["high"]))


def _row_stats(counted: Column) -> list[Column]:
    """Aggregates over the rows where ``counted`` holds: rows, distinct id hashes, emission span.

    Distinct hashes of the ids (8-byte values) rather than the ids: cheaper, and a collision
    only costs an exact deduplication that finds nothing. Rows keep their bronze (state-topic)
    order when nothing repeats, so each silver file holds events of a stretch of time, which the
    statistics of its columns (target offsets, times) let an incremental gold build skip.
    """

    def where_counted(value: Column) -> Column:
        return F.when(counted, value)

    return [
        F.count(where_counted(F.lit(1))).alias("rows"),
        F.countDistinct(where_counted(F.xxhash64("event_id"))).alias("ids"),
        F.min(where_counted(F.col("emitted_at_ms"))).alias("low"),
        F.max(where_counted(F.col("emitted_at_ms"))).alias("high"),
        F.count(F.when(counted & F.col("emitted_at_ms").isNull(), 1)).alias("timeless"),
    ]


def _insert_new(table: DeltaTable, path: str, rows: DataFrame, span: _Span, *, created: bool) -> None:
    """Insert the ``rows`` (distinct event ids) whose event id the silver ``table`` at ``path`` lacks.

    A table this batch ``created`` gets a plain append: nothing to deduplicate against, and the
    MERGE's join took about half of the first batch's write time (1e6 events). Silver has one
    writer (the stream of ``update_silver``), so the table cannot gain rows in between. (A rerun
    of a batch that died after creating a table but before writing it MERGEs into the empty
    table: the same rows, once.)
    """
    if created:
        rows.write.format("delta").mode("append").save(path)
        return
    table.alias("t").merge(rows.alias("s"), _same_event(span)).whenNotMatchedInsertAll().execute()


def _same_event(span: _Span) -> str:
    """The MERGE condition matching a silver row to the same event among the batch's rows.

    Copies of one event carry one ``emitted_at_ms`` (it is part of the event), so the condition
    also bounds the table's emission times by the batch's, as literals: Delta then reads only the
    files whose statistics overlap the batch's time span (silver files hold stretches of
    state-topic order) instead of every event id of the table, whose scan grew with history and
    was broadcast whole (1.2 GiB at 1e7 events). A batch with an event lacking the time (not a
    valid event; none decodes so) falls back to the id alone.
    """
    if span.low is None or span.high is None:
        return "t.event_id = s.event_id"
    return (
        f"t.emitted_at_ms >= {span.low} AND t.emitted_at_ms <= {span.high}"
        " AND t.emitted_at_ms = s.emitted_at_ms AND t.event_id = s.event_id"
    )


def _quarantine(spark: SparkSession, paths: LakehousePaths, parts: list[DataFrame]) -> None:
    rejected = parts[0]
    for part in parts[1:]:
        rejected = rejected.unionByName(part)
    table, _ = _ensure_table(spark, str(paths.quarantine), QUARANTINE_SCHEMA)
    if rejected.isEmpty():
        return  # the usual batch: no MERGE (a job and a commit) for nothing
    # checkpointed: one timestamp for both passes of the MERGE (its source is not materialized)
    rejected = rejected.withColumn("quarantined_at", F.current_timestamp()).localCheckpoint()
    key = " AND ".join(f"t.{c} = s.{c}" for c in LINEAGE_COLUMNS)
    table.alias("t").merge(rejected.alias("s"), key).whenNotMatchedInsertAll().execute()


def update_silver(spark: SparkSession, paths: LakehousePaths) -> None:
    """Bring every silver table and quarantine up to date with bronze (one availableNow run), and
    record the bronze version it reached (``lakehouse.silver_progress``): the one read before the
    run, which the run reads at least to."""
    if not DeltaTable.isDeltaTable(spark, str(paths.bronze)):
        _log.info("no bronze table yet at %s: nothing to decode", paths.bronze)
        return
    _enable_change_feed(spark, paths)
    progress = read_progress(paths)
    reached = bronze_version(paths.bronze)
    if progress is not None and progress.bronze_version >= reached:
        return  # delta-rs decoded it all already
    checkpoint, start = spark_checkpoint(paths, progress)
    reader = spark.readStream.format("delta").option("maxBytesPerTrigger", _MAX_BATCH_BYTES)  # bounded memory
    if start is not None:
        reader = reader.option("startingVersion", start)  # where delta-rs stopped: nothing read twice
    query = (
        reader.load(str(paths.bronze))
        .writeStream.foreachBatch(lambda df, batch_id: _merge_batch(spark, paths, df, batch_id))
        .option("checkpointLocation", str(paths.checkpoint(checkpoint)))
        .trigger(availableNow=True)
        .queryName("silver")
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"silver update failed: {query.exception()}")
    write_progress(paths, SilverProgress(reached, checkpoint))
