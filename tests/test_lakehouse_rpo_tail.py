"""The incremental rpo table when an older row's deleted copies change: it equals a full rebuild.

rpo counts, per watermark observation, the replicated records whose every copy lies below the
target's log start, under the mapping *as it is now*. An incremental build recomputes only the
tail of a touched partition, so older rows need their own pass (``lakehouse.tables.rpo.spark._deleted_again``)
where the target's log start lies above the partition's first copy: here a replay copies records
the target had deleted once more at offsets above its log start, and the older row's count must
drop with it. On either engine of the incremental build (Spark's tail, and its DuckDB twin).
"""

from __future__ import annotations

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


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_an_older_rows_deleted_copies_follow_the_mapping_in_an_incremental_build(spark, tmp_path, engine):
    from ingest.paths import LakehousePaths
    from lakehouse.gold import GoldInputs
    from lakehouse.incremental import silver_versions, update_gold
    from lakehouse.silver import update_silver
    from lakehouse.tables.offset_mapping.spark import TABLE as MAPPING
    from lakehouse.tables.rpo.spark import TABLE as RPO
    from replicator.events import encode

    paths = LakehousePaths(tmp_path / "lakehouse")
    deleted: list[dict[int, int]] = []
    modes = []
    offset = 0
    for events in _rounds():
        ev.append_bronze(spark, str(paths.bronze), offset, [encode(e) for e in events])
        offset += len(events)
        update_silver(spark, paths)
        updates = update_gold(spark, paths, config=ev.engine_config(engine), tables=[MAPPING, RPO])
        modes.append({u.table: f"{u.mode} on {u.engine}" for u in updates}["rpo"])
        incremental = spark.read.format("delta").load(str(paths.gold("rpo")))
        full = RPO.compute(GoldInputs(spark, paths, silver_versions(spark, paths), None, None))
        ev.assert_same_rows(incremental, full, f"rpo after round {len(modes)}")
        rows = incremental.where("partition = 0").collect()
        deleted.append({r.observed_at_ms - ev.T0: r.records_deleted_on_target for r in rows})
    assert modes == ["full on spark", f"tail on {engine}"]
    assert deleted[0] == {500: 50}  # 0..49 have no copy at or above the log start 50
    assert deleted[1] == {500: 30, 800: 30}  # 30..49 were copied again above it: only 0..29 are gone
