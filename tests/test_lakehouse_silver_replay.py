"""Silver keeps one row per event across batches, whatever the batch's time span.

The silver MERGE bounds the table's emission times by the batch's (``lakehouse.silver._same_event``)
so that Delta reads only the files of that span. A replay must still find its event: here a later
bronze append repeats events of the first one (same bytes, new state-topic offsets) beside new
events both older and newer than everything before, in a batch of its own and mixed with new
events, and a replayed event must keep the row (state offset) it first had.
"""

from __future__ import annotations

import pytest

from replicator.events import encode
from tests import lakehouse_support as ev

pytestmark = pytest.mark.spark


def test_replays_in_later_batches_keep_one_row_per_event(spark, tmp_path):
    from ingest.paths import LakehousePaths
    from lakehouse.silver import update_silver

    paths = LakehousePaths(tmp_path / "lake")
    first = [ev.sync(0, u, u + 1, 100 + u, "lag_max", (u - 1, u)) for u in range(1, 6)]
    ev.append_bronze(spark, str(paths.bronze), 0, [encode(e) for e in first])
    update_silver(spark, paths)

    older = ev.sync(1, 7, 7, 1, "first")  # emitted before every event of the first batch
    newer = ev.sync(1, 8, 8, 10_000, "lag_max", (7, 7))  # after all of them
    # one batch of replays alone (their own span), then replays mixed with new events
    ev.append_bronze(spark, str(paths.bronze), 5, [encode(e) for e in first[1:3]])
    update_silver(spark, paths)
    mixed = [older, first[0], first[4], newer, first[0]]
    ev.append_bronze(spark, str(paths.bronze), 7, [encode(e) for e in mixed])
    update_silver(spark, paths)

    rows = spark.read.format("delta").load(str(paths.silver("offset_sync"))).collect()
    by_id: dict[str, list[int]] = {}
    for r in rows:
        by_id.setdefault(r.event_id, []).append(r.state_offset)
    expected = {e.event_id: [i] for i, e in enumerate(first)}
    expected[older.event_id] = [7]
    expected[newer.event_id] = [10]
    assert by_id == expected
