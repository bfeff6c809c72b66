"""The incremental rpo table when an older row's deleted copies change: it equals a full rebuild.

rpo counts, per watermark observation, the replicated records whose every copy lies below the
target's log start, under the mapping *as it is now*. An incremental build recomputes only the
tail of a touched partition, so older rows need their own pass (``lakehouse.tables.rpo.spark._deleted_again``)
where the target's log start lies above the partition's first copy: here a replay copies records
the target had deleted once more at offsets above its log start, and the older row's count must
drop with it. On either engine of the incremental build (Spark's tail, and its DuckDB twin); the
first round, a full build the same on either, is built once and copied for both (``first_round``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests import lakehouse_support as ev

pytestmark = pytest.mark.spark


def _rounds() -> list[list]:
    first = [
        ev.sync(0, 0, 0, 100, "first"),
        ev.sync(0, 99, 99, 200, "flush", (98, 98)),  # copies of 0..99 at 0..99
        ev.watermark(0, 0, 100, 500),
        ev.watermark(0, 50, 100, 500, side="target"),  # retention deleted 0..49 on the target
    ]
    replay = [
        ev.sync(0, 30, 100, 600, "first"),  # a restart copies 30..59 again, at 100..129
        ev.sync(0, 59, 129, 700, "flush", (58, 128)),
        ev.watermark(0, 0, 100, 800),
        ev.watermark(0, 50, 130, 800, side="target"),
    ]
    return [first, replay]


def _round(spark, paths, n: int, engine: str) -> str:  # noqa: ANN001 - SparkSession, LakehousePaths
    """Round ``n`` of ``_rounds()`` into bronze, silver, then mapping and rpo incrementally on
    ``engine``: how rpo was built; rpo must equal a full rebuild."""
    from lakehouse.gold import GoldInputs
    from lakehouse.incremental import silver_versions, update_gold
    from lakehouse.silver import update_silver
    from lakehouse.tables.offset_mapping.spark import TABLE as MAPPING
    from lakehouse.tables.rpo.spark import TABLE as RPO
    from replicator.events import encode

    rounds = _rounds()
    ev.append_bronze(spark, str(paths.bronze), sum(map(len, rounds[:n])), [encode(e) for e in rounds[n]])
    update_silver(spark, paths)
    updates = update_gold(spark, paths, config=ev.engine_config(engine), tables=[MAPPING, RPO])
    incremental = spark.read.format("delta").load(str(paths.gold("rpo")))
    full = RPO.compute(GoldInputs(spark, paths, silver_versions(spark, paths), None, None))
    ev.assert_same_rows(incremental, full, f"rpo after round {n + 1}")
    return {u.table: f"{u.mode} on {u.engine}" for u in updates}["rpo"]


def _deleted(spark, paths) -> dict[int, int]:  # noqa: ANN001
    rows = spark.read.format("delta").load(str(paths.gold("rpo"))).where("partition = 0").collect()
    return {r.observed_at_ms - ev.T0: r.records_deleted_on_target for r in rows}


@pytest.fixture(scope="module")
def first_round(spark, tmp_path_factory) -> Path:  # noqa: ANN001
    """The lakehouse after round 1, built once for both engines: a new lakehouse's tables are built
    in full on Spark whatever the engine (it only decides who does an incremental build)."""
    from ingest.paths import LakehousePaths

    paths = LakehousePaths(tmp_path_factory.mktemp("rpo-tail") / "lakehouse")
    assert _round(spark, paths, 0, "spark") == "full on spark"
    assert _deleted(spark, paths) == {500: 50}  # 0..49 have no copy at or above the log start 50
    return paths.root


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_an_older_rows_deleted_copies_follow_the_mapping_in_an_incremental_build(
    spark, tmp_path, engine, first_round: Path
):  # fmt: skip
    from ingest.paths import LakehousePaths

    paths = LakehousePaths(tmp_path / "lakehouse")
    shutil.copytree(first_round, paths.root)  # Delta tables and stream checkpoints name no absolute path
    assert _round(spark, paths, 1, engine) == f"tail on {engine}"
    assert _deleted(spark, paths) == {500: 30, 800: 30}  # 30..49 were copied again above it: only 0..29 are gone
