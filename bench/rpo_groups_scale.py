"""Gold ``rpo_groups`` with many consumer groups: the table as built vs the same rule as a Python UDF.

Not a test: prints times measured side by side in one Spark session. Reads a built lakehouse
(e.g. the one ``bench.lakehouse_scale --work-dir DIR`` leaves under ``DIR/lake-<n>``), copies its
``group_offsets`` rows under ``--groups-per-group`` new group names (its 3 groups become 102), and
builds ``rpo_groups`` from them twice per round, in alternating order: as the table is built
(``lakehouse.tables.rpo_groups.spark.rpo_groups``, the failover cost in Spark expressions), and with the cost
columns replaced by a Python UDF calling the reference rule ``failover_cost`` on all of the
partition's segments (what the table did until 2026-11-25). Both results must be equal; the run fails otherwise.

    .venv/bin/python -m bench.lakehouse_scale --sizes 10000000 --work-dir /tmp/ls
    .venv/bin/python -m bench.rpo_groups_scale /tmp/ls/lake-10000000

The last line is ``rpo_groups_udf_over_native=<UDF seconds / native seconds, best of the rounds>``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Any

_log = logging.getLogger("bench.rpo_groups_scale")


def _udf_cost() -> Any:
    """``failover_cost`` as a Python UDF with the columns ``failover_cost_column`` gives."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from replicator.client.failover_cost import failover_cost
    from replicator.client.mapping import Segment

    schema = T.StructType([T.StructField(n, T.LongType()) for n in ("lost", "reread", "duplicated")])

    def cost(segments, committed, resume_at):  # no type hints: pyspark would take it for an Arrow UDF
        if committed is None or resume_at is None:
            return None
        c = failover_cost([Segment(s["ds"], s["us"], s["ue"], s["de"]) for s in segments or []], committed, resume_at)
        return (c.lost, c.reread, c.duplicated)

    udf = F.udf(cost, returnType=schema)
    # as the table called it: over all of the partition's segments, not the ones rpo_groups keeps
    return lambda _near, committed, resume_at: udf(F.col("_segments"), committed, resume_at)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("lakehouse", type=Path, help="a built lakehouse (its tables/ directory's parent)")
    parser.add_argument("--groups-per-group", type=int, default=34, help="names each group's rows are copied under")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="3g")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if not (args.lakehouse / "tables" / "gold" / "group_offsets").is_dir():
        parser.error(f"{args.lakehouse} has no built gold tables (tables/gold/group_offsets)")

    from pyspark.sql import functions as F

    import lakehouse.tables.rpo_groups.spark as table
    from ingest.paths import LakehousePaths
    from ingest.spark import spark_session
    from lakehouse.gold import GoldInputs
    from lakehouse.incremental import silver_versions
    from replicator.config import SparkConfig

    conf = {"spark.driver.memory": args.driver_memory}
    spark = spark_session(SparkConfig(master=args.master, conf=conf), app_name="bench-rpo-groups")
    paths = LakehousePaths(args.lakehouse.resolve())
    inputs = GoldInputs(spark, paths, silver_versions(spark, paths))
    copies = spark.range(args.groups_per_group).withColumnRenamed("id", "_copy")
    groups = (
        inputs.gold("group_offsets")
        .crossJoin(copies)
        .withColumn("group", F.concat_ws("-", "group", "_copy"))
        .drop("_copy")
        .localCheckpoint()
    )
    mapping = inputs.gold("offset_mapping")
    segments = mapping.groupBy("flow", "source_topic", "partition").count().agg(F.avg("count")).first()
    tables = (groups, mapping, inputs.silver("watermark"))
    print(
        f"# rpo_groups_scale: {args.lakehouse}, {groups.select('group').distinct().count()} groups, "
        f"{groups.count()} group partitions, {segments[0] if segments else 0:.0f} segments per partition, "
        f"master {args.master}"
    )

    native_cost = table.failover_cost_column
    variants = {"native": native_cost, "python-udf": _udf_cost()}
    best: dict[str, float] = {}
    results = {}
    for rnd in range(args.rounds):
        order = list(variants) if rnd % 2 == 0 else list(reversed(variants))
        for name in order:
            table.failover_cost_column = variants[name]  # type: ignore[assignment]  # rpo_groups looks it up
            try:
                started = time.monotonic()
                rows = table.rpo_groups(*tables).localCheckpoint()
                count = rows.count()
                seconds = time.monotonic() - started
            finally:
                table.failover_cost_column = native_cost  # type: ignore[assignment]
            print(f"round {rnd} {name:<10} {seconds:7.1f} s  {count} rows", flush=True)
            best[name] = min(seconds, best.get(name, seconds))
            results[name] = rows
    native, udf = results["native"], results["python-udf"]
    differ = native.exceptAll(udf).count() + udf.exceptAll(native).count()
    if differ:
        print(f"the two results differ in {differ} rows", file=sys.stderr)
        return 1
    print("results equal")
    print(f"rpo_groups_udf_over_native={best['python-udf'] / best['native']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
