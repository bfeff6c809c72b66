"""Incremental gold == full gold, over rounds of new events on a real state topic; gold contents.

Four rounds of hand-made events (gaps, an at-least-once replay, duplicate events, a late sync,
a change that must delete a gold row, a round with nothing new) are produced to a uuid state
topic on cluster B; after each round the lakehouse is built incrementally and every gold table is
compared with a full recomputation from silver. At the end a second lakehouse is built from the
same state topic in one go: every gold table must equal the incremental one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from replicator.client.mapping import build_segments, points_from_sync, translate
from replicator.config import MirrorlakeConfig
from tests import lakehouse_support as ev
from tests.lakehouse_support import DAVE, Built

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _table(spark, config: MirrorlakeConfig, name: str):
    return spark.read.format("delta").load(str(Path(config.lakehouse.path).resolve() / "tables" / "gold" / name))


def test_each_round_merges_only_what_changed(built: Built):
    assert set(built.modes[0].values()) == {"full"}  # a new lakehouse: nothing to merge into
    assert built.modes[1]["offset_mapping"] == "tail"  # recomputed from each partition's tail on
    assert built.modes[2]["offset_mapping"] == "tail"  # the late sync
    assert built.engines[1]["offset_mapping"] == built.engines[2]["offset_mapping"] == "duckdb"  # its twin
    assert built.modes[1]["rpo"] == built.modes[1]["group_offsets"] == "tail"
    # one flow, one topic: any new event touches every key of divergence; its twin replaces the
    # topic's rows (on Spark the table is overwritten: test_lakehouse_twins)
    assert (built.modes[1]["divergence"], built.engines[1]["divergence"]) == ("tail", "duckdb")
    # events seen before add no silver row, so no gold table is touched: the fourth round's
    # tables are the third's, which test_a_build_from_scratch_equals_the_incremental_one checks
    assert set(built.modes[3].values()) == {"unchanged"}


def test_a_build_from_scratch_equals_the_incremental_one(built: Built, built_fresh: MirrorlakeConfig, spark):
    from lakehouse.gold_tables import GOLD_TABLES

    for spec in GOLD_TABLES:
        ev.assert_same_rows(
            _table(spark, built.config, spec.name), _table(spark, built_fresh, spec.name), f"fresh {spec.name}"
        )


def test_every_new_event_type_has_a_silver_table(built: Built, spark):
    from replicator.events import registry

    silver = Path(built.config.lakehouse.path).resolve() / "tables" / "silver"
    distinct = {e.event_id: e for e in built.events}
    for event_type in registry().event_types():
        if event_type == "lifecycle" or event_type == "group_sync":
            continue  # none produced here
        count = spark.read.format("delta").load(str(silver / event_type)).count()
        assert count == sum(1 for e in distinct.values() if e.event_type == event_type), event_type


def test_failovers_one_row_per_offset_written(built: Built, spark):
    rows = _table(spark, built.config, "failovers").collect()
    got = sorted((r["group"], r["partition"], r["committed_offset"], r["target_offset"]) for r in rows)
    assert got == [("g1", 0, 170, 179), ("g2", 0, 120, 99), ("g2", 1, 80, 80)]
    assert {r["records_unreplicated"] for r in rows} == {5} and {r["user"] for r in rows} == {"u"}


def test_group_offsets_recompute_the_exact_translation(built: Built, spark):
    syncs = [e for e in built.events if e.event_type == "offset_sync" and e.partition == 0]
    points = [
        p
        for s in {s.event_id: s for s in syncs}.values()
        for p in points_from_sync(
            s.upstream_offset,
            s.downstream_offset,
            s.reason,
            s.previous_upstream_offset,
            s.previous_downstream_offset,
        )
    ]
    segments = build_segments(points)
    rows = {r["group"]: r for r in _table(spark, built.config, "group_offsets").where("partition = 0").collect()}
    assert set(rows) == {"g1", "g2"}
    g2 = rows["g2"]
    exact = translate(segments, 120)
    assert exact is not None
    assert (g2.committed_offset, g2.translated_offset, g2.method) == (120, 99, "mm2")
    assert (g2.exact_offset, g2.exact_method) == (exact.downstream, exact.method)
    assert g2.translation_error == 99 - exact.downstream
    g1 = rows["g1"]
    assert (g1.committed_offset, g1.translated_offset, g1.exact_offset) == (170, 179, 179)  # the latest checkpoint


def test_rpo_per_partition_and_group(built: Built, spark):
    rpo = {(r.partition, r.observed_at_ms - ev.T0): r for r in _table(spark, built.config, "rpo").collect()}
    assert set(rpo) == {(0, 500), (1, 500), (0, 800), (1, 800), (1, 950)}
    first = rpo[(0, 500)]
    assert (first.last_replicated_offset, first.records_behind, first.records_unreplicated) == (150, 49, 49)
    assert first.bytes_unreplicated is None
    # the oldest record not copied came after the last copy (timestamp T0 + 150) and by the newest (T0 + 199)
    assert (first.seconds_unreplicated, first.seconds_unreplicated_min) == (pytest.approx(0.35), pytest.approx(0.301))
    late = rpo[(1, 800)]
    assert late.last_replicated_offset == 90  # the late sync (emitted at 750) counts for the 800 observation
    assert late.records_unreplicated == 100 - 91
    expired = rpo[(1, 950)]
    assert (expired.records_expired_unreplicated, expired.records_unreplicated) == (95 - 91, 120 - 95)
    groups = {r.group: r for r in _table(spark, built.config, "rpo_groups").collect()}
    g2 = groups["g2"]
    # g2 committed 120 and resumes at 99 (MM2's lagging translation): it re-reads the copies of
    # 99..119 made at or after 99 (99, then 102..119 at 100..117), loses nothing replicated.
    assert (g2.records_reread, g2.records_lost, g2.records_reread_at_exact) == (1 + 18, 0, 0)
    assert g2.records_duplicated == 11  # 140..150 were copied twice, both copies after 99
    assert g2.records_unreplicated == 200 - 181  # source log-end 200, last copy 180
    assert groups["g1"].records_lost_total == 200 - 181


def test_divergence_reports_topics_configs_acls_and_data(built: Built, spark):
    rows = {(r.kind, r.item): r for r in _table(spark, built.config, "divergence").collect()}
    assert ("partition_count", None) not in rows  # reported in round 2, fixed in round 3
    assert rows[("config", "retention.ms")].expected is False
    mis = rows[("config", "min.insync.replicas")]
    assert mis.expected is True and "durability" in mis.exclusion_reason
    assert ("config", "cleanup.policy") not in rows
    assert ("acl_missing_on_target", "User:carol|*|READ|ALLOW|LITERAL|A.orders") in rows
    assert not any("bob" in (item or "") for _kind, item in rows)  # WRITE is never copied
    assert rows[("acl_extra_on_target", DAVE.format(ev.REMOTE))].expected is True
    data = [r for (kind, _), r in rows.items() if kind == "data"]
    assert [(r.partition, r.window_start, r.window_end) for r in data] == [(0, 100, 200)]
    # the topics' lives (issue 39): records deleted before their copy, a source topic created again
    lost = rows[("records_lost_before_copy", "source offsets [91, 95)")]
    assert (lost.source_topic, lost.partition, lost.window_start, lost.window_end) == (ev.TOPIC, 1, 91, 95)
    assert lost.source_value == "4 records"
    again = rows[("source_topic_recreated", "topic id old-id -> new-id")]
    assert (again.source_topic, again.source_value) == ("payments", "a new topic, log end offsets [7, 9]")


def test_heartbeat_latency_per_hop_and_topology(built: Built, spark):
    lat = {
        (r.path, r.origin_timestamp_ms - ev.T0): r for r in _table(spark, built.config, "heartbeat_latency").collect()
    }
    assert (lat[("A->B->C", 1000)].latency_ms, lat[("A->B->C", 1000)].hop_latency_ms) == (75, 45)
    assert (lat[("A->B", 2000)].latency_ms, lat[("A->B", 2000)].hop_latency_ms) == (40, 40)
    assert len(lat) == 5  # the origin's own heartbeat is not an observation
    topo = {(r.origin_cluster, r.cluster): r for r in _table(spark, built.config, "topology").collect()}
    assert set(topo) == {("A", "B"), ("A", "C")}
    c = topo[("A", "C")]
    assert (c.path, c.hops, c.last_seen_ms - ev.T0, c.latest_latency_ms, c.paths) == ("A->B->C", 2, 2090, 90, 2)


def test_restricting_by_key_values_equals_the_broadcast_join(spark):
    """Few touched keys are filtered by value (``GoldInputs.key_values``), many by a join: same rows,
    a null key column matching only a null, as the join's null-safe equality does."""
    from lakehouse.gold import GoldInputs

    rows = [("f", "t", p, n) for p in (0, 1, 2, 3) for n in range(3)] + [("f", None, 1, 9), (None, "t", 0, 8)]
    rows += [("f", "t", None, 7), ("f", None, None, 6)]
    df = spark.createDataFrame(rows, "flow string, source_topic string, partition int, n int")
    key_rows = [("f", "t", 1), ("f", "t", 3), ("f", "t", None), ("f", None, 1), ("g", "t", 0), (None, "t", 0)]
    keys = spark.createDataFrame(key_rows, "flow string, source_topic string, partition int")
    by_join = GoldInputs(spark, None, {}, keys).restrict(df)  # type: ignore[arg-type]
    by_value = GoldInputs(spark, None, {}, keys, key_values=key_rows).restrict(df)  # type: ignore[arg-type]
    expected = {("f", "t", p, n) for p in (1, 3) for n in range(3)} | {("f", None, 1, 9), (None, "t", 0, 8)}
    expected |= {("f", "t", None, 7)}
    assert {tuple(r) for r in by_join.collect()} == expected
    assert sorted(map(tuple, by_value.collect()), key=repr) == sorted(map(tuple, by_join.collect()), key=repr)
    assert GoldInputs(spark, None, {}, keys, key_values=[]).restrict(df).count() == 0  # type: ignore[arg-type]


def test_a_tails_rows_by_value_equal_those_by_the_join(spark):
    """``merge_keys`` replaces a key's rows from its tail start on (lexicographic over ``tail_order``);
    selected by value (few keys) or by a join with the scope (many), the rows are the same: ties
    on the first column decided by the second, a null in the table's columns before any start,
    a null start taking the whole key."""
    from lakehouse.gold import TAIL_FROM
    from lakehouse.incremental import in_scope

    key, order = ("flow", "partition"), ("d", "u")
    rows = [("f", p, d, u) for p in (0, 1, 2) for d in (5, 10, 15) for u in (1, 2, 3)]
    rows += [("f", 0, None, 9), ("f", 0, 10, None), ("f", 1, None, None), ("g", 0, 1, 1)]
    table = spark.createDataFrame(rows, "flow string, partition int, d long, u long")
    scope_rows = [("f", 0, (10, 2)), ("f", 1, None), ("f", 2, (15, 3)), ("h", 0, (0, 0))]
    scope = spark.createDataFrame(
        scope_rows, f"flow string, partition int, {TAIL_FROM} struct<d:long,u:long>"
    ).localCheckpoint()
    values = [tuple(r) for r in scope.collect()]
    by_join = sorted(map(tuple, in_scope(table, scope, key, order).collect()), key=repr)
    by_value = sorted(map(tuple, in_scope(table, scope, key, order, values).collect()), key=repr)
    expected = [("f", 0, 10, 2), ("f", 0, 10, 3), *[("f", 0, 15, u) for u in (1, 2, 3)]]
    expected += [("f", 1, d, u) for d in (5, 10, 15) for u in (1, 2, 3)] + [("f", 1, None, None)]
    expected += [("f", 2, 15, 3)]
    assert by_join == sorted(expected, key=repr)
    assert by_value == by_join
