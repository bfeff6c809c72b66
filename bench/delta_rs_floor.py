"""What a small-increment gold engine on delta-rs and DuckDB would pay per table, beside Spark, in one run.

#13 asks an incremental gold build of 1e5 new events to be 10x faster than a full rebuild, also at
1e6 events. On Spark every touched table pays fixed costs that do not shrink with the increment
(``bench.delta_floor``: a MERGE of 100 rows is about 1.5 s), and three tables depend on each other,
so 10x at 1e6 is out of reach there. This bench measures the same small operations with delta-rs
(the ``deltalake`` package, Rust, no JVM) and DuckDB on tables Spark wrote, interleaved with
Spark's, in one process:

- a MERGE of 100 rows (60 updates, 40 inserts) into a gold-sized table (20,000 rows, 100
  partitions), each engine on its own copy of the table, Spark with mirrorlake's settings;
- the change feed of one silver commit of 100,000 rows (of 1,100,000), grouped per partition
  (what ``lakehouse.incremental`` reads to find the touched keys);
- then Spark reads the table delta-rs merged into and finds the rows its own MERGEs gave.

Last lines: ``merge_spark_over_delta_rs=<ratio>`` and ``change_feed_spark_over_delta_rs=<ratio>``.

    .venv/bin/python -m bench.delta_rs_floor [--reps 7]
"""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from bench.measure import interleaved

ROWS, PARTITIONS, CHANGED = 20_000, 100, 100
SILVER_BASE, SILVER_NEW = 1_000_000, 100_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=7, help="runs of each operation (the first is left out)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    import duckdb
    import pyarrow as pa
    from delta.tables import DeltaTable as SparkDeltaTable
    from deltalake import DeltaTable, __version__
    from pyspark.sql import functions as F

    from ingest.spark import spark_session
    from replicator.config import SparkConfig

    spark = spark_session(SparkConfig(master="local[2]"), app_name="bench-delta-rs-floor")
    work = Path(tempfile.mkdtemp(prefix="delta-rs-floor-"))
    gold = {engine: str(work / f"gold-{engine}") for engine in ("spark", "delta-rs")}
    silver = str(work / "silver")

    def rows(start: int, end: int, bump: int = 0):  # noqa: ANN202 - a DataFrame
        ids = spark.range(start, end)
        return ids.select("id", (F.col("id") % PARTITIONS).alias("partition"), (F.col("id") + bump).alias("v"))

    for path in gold.values():
        rows(0, ROWS).coalesce(1).write.format("delta").save(path)

    def syncs(start: int, end: int):  # noqa: ANN202 - a DataFrame
        ids = spark.range(start, end)
        return ids.select(
            (F.col("id") % PARTITIONS).cast("int").alias("partition"),
            (F.col("id") * 3).alias("upstream_offset"),
            (F.col("id") * 3 + 7).alias("downstream_offset"),
        )

    syncs(0, SILVER_BASE).write.format("delta").option("delta.enableChangeDataFeed", "true").save(silver)
    syncs(SILVER_BASE, SILVER_BASE + SILVER_NEW).write.format("delta").mode("append").save(silver)
    low = ROWS - CHANGED * 6 // 10  # 60 existing rows updated, 40 inserted

    def spark_merge(i: int) -> None:
        source = rows(low, low + CHANGED, i + 1).localCheckpoint()
        table = SparkDeltaTable.forPath(spark, gold["spark"]).alias("t")
        table.merge(source.alias("s"), "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()

    def delta_rs_merge(i: int) -> None:
        ids = range(low, low + CHANGED)
        source = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "partition": pa.array([x % PARTITIONS for x in ids], pa.int64()),
                "v": pa.array([x + i + 1 for x in ids], pa.int64()),
            }
        )
        merger = DeltaTable(gold["delta-rs"]).merge(source, "t.id = s.id", source_alias="s", target_alias="t")
        merger.when_matched_update_all().when_not_matched_insert_all().execute()

    def spark_change_feed(i: int) -> None:
        new = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 1)
        per_partition = new.option("endingVersion", 1).load(silver).groupBy("partition").count().collect()
        assert sum(r["count"] for r in per_partition) == SILVER_NEW

    def delta_rs_change_feed(i: int) -> None:
        new = pa.table(DeltaTable(silver).load_cdf(starting_version=1, ending_version=1).read_all())
        per_partition = duckdb.from_arrow(new).aggregate("partition, count(*)", "partition").fetchall()
        assert sum(n for _, n in per_partition) == SILVER_NEW

    pairs: list[tuple[str, Callable[[int], None], Callable[[int], None]]] = [
        (f"MERGE {CHANGED} rows into {ROWS}", spark_merge, delta_rs_merge),
        (f"change feed of {SILVER_NEW:,} new rows, per partition", spark_change_feed, delta_rs_change_feed),
    ]
    print(
        f"# delta_rs_floor: Spark local[2] (mirrorlake's settings) and delta-rs {__version__} + DuckDB "
        f"{duckdb.__version__}, {args.reps} runs each, interleaved (median of all but the first)"
    )
    ratios = []
    for name, on_spark, on_delta_rs in pairs:
        medians, times = interleaved({"Spark": on_spark, "delta-rs": on_delta_rs}, args.reps)
        for engine, t in times.items():
            print(
                f"{name:47} {engine:9} {medians[engine] * 1000:8.1f} ms   runs {' '.join(f'{x * 1000:.0f}' for x in t)}"
            )
        ratios.append(medians["Spark"] / medians["delta-rs"])

    by_spark = spark.read.format("delta").load(gold["spark"])
    by_delta_rs = spark.read.format("delta").load(gold["delta-rs"])
    same = by_spark.exceptAll(by_delta_rs).count() == 0 and by_delta_rs.exceptAll(by_spark).count() == 0
    engines = {r[0] for r in SparkDeltaTable.forPath(spark, gold["delta-rs"]).history().select("engineInfo").collect()}
    writers = ", ".join(sorted(map(str, engines)))
    print(f"Spark reads the table delta-rs merged into (commits by {writers}): equal to Spark's own: {same}")
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)
    print(f"merge_spark_over_delta_rs={ratios[0]:.1f}")
    print(f"change_feed_spark_over_delta_rs={ratios[1]:.1f}")


if __name__ == "__main__":
    main()
