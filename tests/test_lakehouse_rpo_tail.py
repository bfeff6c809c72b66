"""The incremental rpo table when an older row's deleted copies change: it equals a full rebuild.

rpo counts, per watermark observation, the replicated records whose every copy lies below the
target's log start, under the mapping *as it is now*. An incremental build recomputes only the
tail of a touched partition, so older rows need their own pass (``lakehouse.rpo._deleted_again``)
where the target's log start lies above the partition's first copy: here a replay copies records
the target had deleted once more at offsets above its log start, and the older row's count must
drop with it.
"""

from __future__ import annotations

import pytest

from tests import lakehouse_support as ev

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


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


def test_an_older_rows_deleted_copies_follow_the_mapping_in_an_incremental_build(
    kafka_clusters, unique_topic, spark, tmp_path
):
    from ingest.paths import LakehousePaths
    from lakehouse.build import build_lakehouse
    from lakehouse.gold import GoldInputs
    from lakehouse.incremental import silver_versions
    from lakehouse.rpo import TABLE as RPO
    from mirrorlake.traffic import ensure_topic

    b = kafka_clusters.bootstrap("B")
    state_topic = unique_topic("mirrorlake.rpo-tail")
    ensure_topic(b, state_topic, 1)
    config = kafka_clusters.config(
        flows=[{"source": "A", "target": "B", "topics": [ev.TOPIC]}],
        state_topic=state_topic,
        lakehouse={"path": str(tmp_path / "lakehouse")},
    )
    paths = LakehousePaths(config.lakehouse.path.resolve())
    deleted: list[dict[int, int]] = []
    modes = []
    for events in _rounds():
        ev.produce(b, state_topic, events)
        report = build_lakehouse(spark, config)
        modes.append({u.table: u.mode for u in report.gold_updates}["rpo"])
        incremental = spark.read.format("delta").load(str(paths.gold("rpo")))
        full = RPO.compute(GoldInputs(spark, paths, silver_versions(spark, paths), None, None))
        ev.assert_same_rows(incremental, full, f"rpo after round {len(modes)}")
        rows = incremental.where("partition = 0").collect()
        deleted.append({r.observed_at_ms - ev.T0: r.records_deleted_on_target for r in rows})
    assert modes == ["full", "tail"]
    assert deleted[0] == {500: 50}  # 0..49 have no copy at or above the log start 50
    assert deleted[1] == {500: 30, 800: 30}  # 30..49 were copied again above it: only 0..29 are gone
