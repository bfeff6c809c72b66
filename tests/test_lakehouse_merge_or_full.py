"""An incremental build MERGEs the touched keys of a table that holds others too.

``divergence`` (keyed by flow and source topic, no tail) is recomputed whole per touched key. When
new events touch one of its two topics, the build MERGEs that key, and the table equals a full
recompute. (When they touch every key a table holds, the build overwrites it instead: the built
lakehouse's one topic, ``test_each_round_merges_only_what_changed``.)
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from replicator.events import encode
from tests import lakehouse_support as ev

pytestmark = pytest.mark.spark

OTHER = "payments"


def _other(event):  # noqa: ANN001, ANN202 - an event of ``lakehouse_support`` on the second topic
    """The same event about the second topic, as a new event (its own id)."""
    if hasattr(event, "topic"):  # a config snapshot: the topic of its side
        topic = f"A.{OTHER}" if event.side == "target" else OTHER
        return replace(event, event_id="", source_topic=OTHER, topic=topic)
    return replace(event, event_id="", source_topic=OTHER, target_topic=f"A.{OTHER}")


def _rounds() -> list[list]:
    first = [
        ev.snapshot("source", 10, 2, {"retention.ms": "1000"}, []),
        ev.snapshot("target", 11, 2, {"retention.ms": "2000"}, []),  # differs: a divergence row
        ev.sync(0, 0, 0, 20, "first"),
        ev.sync(0, 9, 9, 30, "flush", (8, 8)),
    ]
    first += [_other(e) for e in first]
    orders_only = [
        ev.sync(0, 19, 19, 40, "flush", (18, 18)),
        ev.snapshot("target", 41, 3, {"retention.ms": "2000"}, []),
    ]
    return [first, orders_only]


def test_a_build_merges_only_the_touched_topic(spark, tmp_path):
    from ingest.paths import LakehousePaths
    from lakehouse.gold import GoldInputs
    from lakehouse.incremental import silver_versions, update_gold
    from lakehouse.silver import update_silver
    from lakehouse.tables.divergence.spark import TABLE as DIVERGENCE
    from lakehouse.tables.offset_mapping.spark import TABLE as MAPPING

    paths = LakehousePaths(tmp_path / "lake")
    updates = []
    offset = 0
    for events in _rounds():
        ev.append_bronze(spark, str(paths.bronze), offset, [encode(e) for e in events])
        offset += len(events)
        update_silver(spark, paths)
        # Spark's MERGE of touched keys (the DuckDB twin replaces whole keys: test_lakehouse_twins)
        updates_now = update_gold(spark, paths, config=ev.engine_config("spark"), tables=[MAPPING, DIVERGENCE])
        update = {u.table: u for u in updates_now}["divergence"]
        updates.append((update.mode, update.keys, update.reason))
        table = spark.read.format("delta").load(str(paths.gold("divergence")))
        full = DIVERGENCE.compute(GoldInputs(spark, paths, silver_versions(spark, paths), None, None))
        ev.assert_same_rows(table, full, f"divergence after round {len(updates)}")
        topics = {r.source_topic for r in table.select("source_topic").distinct().collect()}
        assert topics == {ev.TOPIC, OTHER}, updates  # both keys hold rows, so the rule is tested
    assert updates[0][0] == "full"  # a new table
    assert updates[1] == ("merge", 1, "")  # one of the two topics
