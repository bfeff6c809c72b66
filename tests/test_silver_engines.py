"""Silver written without Spark equals silver written by Spark, round after round (issue 38 item 5).

Two lakehouses get the same bronze rows, round by round: one decodes them with Spark's silver
(``lakehouse.silver``), the other as ``lakehouse build`` and ``serve`` now do, with delta-rs and
fastavro (``lakehouse.duck.silver``) where it can, from a new lakehouse's first round on, Spark
where it cannot. The rounds hold every event type
and every kind of bad record the Spark decoder test uses (``tests/test_lakehouse_decode.py``), a
watermark of the older schema, a state topic replayed (events seen before, events twice in one
round), forged events (partition -1), a type silver has no table for yet (delta-rs creates it, with the
schema Spark gives it), a round more than delta-rs holds in memory (Spark decodes it, and delta-rs
goes on after it from where Spark stopped) and a round with nothing new. After each round every
silver table and quarantine are equal row for row and in schema (but quarantine's time of writing);
a table whose Delta version on both sides is still the pair already held equal is not read again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from replicator.events import Lifecycle, encode
from tests import lakehouse_support as ev
from tests.test_lakehouse_decode import _records

pytestmark = pytest.mark.spark


def _rounds() -> list[tuple[list[bytes], bool, int]]:
    """(bronze rows, whether delta-rs decodes that round, the most rows it may hold) per round."""
    first = _records()
    seen = [first[name] for name in sorted(first)]
    again = [
        encode(ev.sync(0, 20, 22, 9, "lag_max", (10, 12))),
        encode(ev.checkpoint("g2", 1, 8, 9, 9, "exact")),
        encode(ev.watermark(1, 0, 50, 9, side="target")),
        encode(ev.sync(-1, 5, 5, 9, "first")),  # forged: partition -1
        b"\x00\x01 not an event either",
    ]
    dup = encode(ev.heartbeat(["A", "B", "C"], 10, 11))
    replayed = [*again, *seen[:5], dup, dup]  # a replay: earlier events again, one event twice
    lifecycle = encode(Lifecycle(flow=ev.FLOW, replicator_id="r1", state="started", emitted_at_ms=12))
    new_type = [encode(ev.sync(1, 30, 33, 12, "lag_max", (29, 32))), lifecycle]
    big = [encode(ev.sync(1, 35, 38, 12, "lag_max", (34, 37))), encode(ev.checkpoint("g2", 1, 9, 10, 10, "exact"))]
    after = [encode(ev.sync(1, 40, 43, 13, "lag_max", (39, 42))), lifecycle, seen[-1], first["truncated"] + b"x"]
    most = 1000
    return [(seen, True, most), (replayed, True, most), (new_type, True, most), (big, False, 1), (after, True, most),
            ([], True, most)]  # fmt: skip


def _versions(tables: list[Path]) -> tuple[int | None, ...]:
    return tuple(ev.delta_version(t) for t in tables)


def test_silver_on_delta_rs_equals_silver_on_spark_round_after_round(spark, tmp_path):
    from ingest.paths import LakehousePaths
    from lakehouse.duck.silver import update_silver_increment
    from lakehouse.silver import update_silver
    from lakehouse.silver_progress import read_progress
    from replicator.events import registry

    lakes = {engine: LakehousePaths(tmp_path / engine) for engine in ("spark", "rs")}
    # A Delta table's version never changes once written: a table whose latest version on both sides
    # is the pair last held equal is equal still, and is not read again (a pair of Spark reads each)
    equal: dict[str, tuple[int | None, ...]] = {}

    def unchanged_since_equal(name: str, tables: list[Path]) -> bool:
        return equal.get(name) == _versions(tables)

    offset = 0
    for i, (bodies, on_delta_rs, most) in enumerate(_rounds()):
        if bodies:
            for paths in lakes.values():
                ev.append_bronze(spark, str(paths.bronze), offset, bodies)
            offset += len(bodies)
        update_silver(spark, lakes["spark"])
        increment = update_silver_increment(lakes["rs"], most=most)
        assert (increment is not None) == on_delta_rs, f"round {i}"
        if increment is None:
            update_silver(spark, lakes["rs"])  # as a refresh does
        else:
            assert increment.bronze_rows == len(bodies), f"round {i}"
        for event_type in registry().event_types():
            tables = [paths.silver(event_type) for paths in lakes.values()]
            held = [t for t in tables if t.exists()]
            assert len(held) in (0, 2), f"round {i}: {event_type} has a table in one lakehouse only"
            if not held or unchanged_since_equal(event_type, held):
                continue  # no table yet, or both sides still at the versions held equal
            left, right = (spark.read.format("delta").load(str(t)) for t in held)
            assert left.schema == right.schema, f"round {i}: silver {event_type}'s schema"
            ev.assert_same_rows(left, right, f"round {i}: silver {event_type}")
            equal[event_type] = _versions(held)
        quarantines = [paths.quarantine for paths in lakes.values()]
        if not unchanged_since_equal("quarantine", quarantines):
            left, right = (spark.read.format("delta").load(str(t)).drop("quarantined_at") for t in quarantines)
            ev.assert_same_rows(left, right, f"round {i}: quarantine")
            equal["quarantine"] = _versions(quarantines)
    # after delta-rs moved on, Spark's silver went on from there with a stream of its own
    progress = read_progress(lakes["rs"])
    assert progress is not None and progress.spark_checkpoint is None
    names = sorted(p.name for p in lakes["rs"].checkpoint("").iterdir() if p.name.startswith("silver"))
    assert names == ["silver-from-3", "silver-progress.json"], names  # round 3, more than delta-rs held


def test_a_silver_spark_wrote_before_its_progress_was_recorded_is_left_to_spark(spark, tmp_path):
    """A lakehouse whose silver Spark built before ``silver-progress.json`` existed: how far it read
    bronze is only in Spark's stream checkpoint, so delta-rs must not decode bronze from its start."""
    from ingest.paths import LakehousePaths
    from lakehouse.duck.silver import update_silver_increment
    from lakehouse.silver import update_silver

    paths = LakehousePaths(tmp_path / "old")
    seen = _rounds()[0][0]
    ev.append_bronze(spark, str(paths.bronze), 0, seen)
    update_silver(spark, paths)
    paths.checkpoint("silver-progress.json").unlink()  # as before the record existed
    ev.append_bronze(spark, str(paths.bronze), len(seen), [encode(ev.sync(1, 60, 63, 14, "lag_max", (59, 62)))])
    assert update_silver_increment(paths) is None
    update_silver(spark, paths)  # Spark goes on from its checkpoint: the new sync once, nothing twice
    syncs = spark.read.format("delta").load(str(paths.silver("offset_sync")))
    assert syncs.count() == syncs.select("event_id").distinct().count()
    assert syncs.where("upstream_offset = 60").count() == 1
