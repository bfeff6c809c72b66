"""The fixed cost of one small Delta operation on this machine, and what it allows an incremental build.

An incremental gold build of a few new events touches six tables, and each pays fixed costs that
do not shrink with the data: reads of the Delta log, small Spark jobs, a MERGE and its commit.
This bench times those operations alone, in one warm session, on a table of gold's size (20,000
rows, 100 partitions), each repeated and reported as a median (the first, cold run left out):

- a ``localCheckpoint`` of 100 rows (a small job), a filtered read with a count;
- an append of 100 rows (one write and a commit);
- a MERGE of 100 rows (60 updates, 40 inserts) from a checkpointed source, with Delta's source
  materialization ``auto`` (Delta's default) and ``none`` (mirrorlake's, ``ingest.spark.LOCAL_TUNING``)
  interleaved, so both meet the same machine;
- ``replaceWhere`` of the same 100 rows (a delete and an append in one commit).

Last lines: ``merge_auto_over_none=<ratio>`` and ``merge_seconds_none=<median>``: with the
number of tables an incremental build touches, the best ratio it can reach against a full build
of known duration.

    .venv/bin/python -m bench.delta_floor [--reps 7] [--master 'local[2]']
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.measure import interleaved

ROWS, PARTITIONS, CHANGED = 20_000, 100, 100
MATERIALIZE = "spark.databricks.delta.merge.materializeSource"


def _median(run: Callable[[int], None], reps: int) -> tuple[float, list[float]]:
    times = []
    for i in range(reps):
        began = time.monotonic()
        run(i)
        times.append(time.monotonic() - began)
    return statistics.median(times[1:]), times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=7, help="runs of each operation (the first is left out)")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from ingest.spark import spark_session
    from replicator.config import SparkConfig

    spark = spark_session(SparkConfig(master=args.master), app_name="bench-delta-floor")
    work = Path(tempfile.mkdtemp(prefix="delta-floor-"))
    path = str(work / "table")

    def rows(start: int, end: int, bump: int = 0):  # noqa: ANN202 - a DataFrame
        ids = spark.range(start, end)
        return ids.select("id", (F.col("id") % PARTITIONS).alias("partition"), (F.col("id") + bump).alias("v"))

    rows(0, ROWS).coalesce(1).write.format("delta").save(path)
    low = ROWS - CHANGED * 6 // 10  # 60 existing rows updated, 40 inserted

    def merge(i: int) -> None:
        source = rows(low, low + CHANGED, i + 1).localCheckpoint()
        table = DeltaTable.forPath(spark, path).alias("t")
        table.merge(source.alias("s"), "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()

    def merge_with(mode: str) -> Callable[[int], None]:
        def run(i: int) -> None:
            spark.conf.set(MATERIALIZE, mode)
            merge(i)

        return run

    def checkpoint(i: int) -> None:
        spark.range(CHANGED).localCheckpoint()

    def read(i: int) -> None:
        spark.read.format("delta").load(path).where("partition = 3").count()

    def append(i: int) -> None:
        rows(ROWS * (i + 2), ROWS * (i + 2) + CHANGED).write.format("delta").mode("append").save(path)

    def replace_where(i: int) -> None:
        writer = rows(low, low + CHANGED, i).write.format("delta").mode("overwrite")
        writer.option("replaceWhere", f"id >= {low} AND id < {low + CHANGED}").save(path)

    operations: list[tuple[str, Callable[[int], None]]] = [
        ("localCheckpoint of 100 rows", checkpoint),
        ("filtered read and count", read),
        ("append 100 rows", append),
        ("replaceWhere 100 rows", replace_where),
    ]
    print(f"# delta_floor: {args.master}, table of {ROWS} rows, {args.reps} runs each (median of all but the first)")
    for name, run in operations:
        median, times = _median(run, args.reps)
        print(f"{name:32} {median:6.2f} s   runs {' '.join(f'{t:.2f}' for t in times)}", flush=True)
    medians, merges = interleaved({mode: merge_with(mode) for mode in ("auto", "none")}, args.reps)
    spark.conf.unset(MATERIALIZE)
    for mode, times in merges.items():
        name = f"MERGE 100 rows, materialize {mode}"
        print(f"{name:32} {medians[mode]:6.2f} s   runs {' '.join(f'{t:.2f}' for t in times)}")
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)
    print(f"merge_auto_over_none={medians['auto'] / medians['none']:.2f}")
    print(f"merge_seconds_none={medians['none']:.2f}")


if __name__ == "__main__":
    main()
