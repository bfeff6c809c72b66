"""Each gold table's incremental build, on its DuckDB twin and on Spark, equals a full Spark compute
after each incremental round of ``lakehouse_support.rounds`` (gaps, an at-least-once replay,
duplicates, a late sync, a change that deletes a row, heartbeats over two paths, a failover and a
failback; a round of events seen before, which must change nothing) and of one more (copies deleted
on the target). One bronze and silver (no Kafka); each engine builds its own gold tables from that
silver (the second lakehouse's silver is a link to the first's), but for the first round's full
build, the same on either engine, made once and copied (``EngineLakehouses.round``)."""

from __future__ import annotations

from typing import Literal

import pytest

from replicator.events import encode
from tests import lakehouse_support as ev

pytestmark = pytest.mark.spark

ENGINES: tuple[Literal["duckdb", "spark"], ...] = ("duckdb", "spark")


def test_an_incremental_build_on_either_engine_equals_a_full_compute(spark, tmp_path):
    from lakehouse.duck.tables import TWINS
    from lakehouse.gold_tables import GOLD_TABLES

    assert set(TWINS) == {spec.name for spec in GOLD_TABLES}  # every table has a twin
    lakes = ev.EngineLakehouses(tmp_path)
    paths = lakes.paths
    engines: dict[str, list[dict[str, str]]] = {engine: [] for engine in ENGINES}
    reasons: dict[str, list[dict[str, str]]] = {engine: [] for engine in ENGINES}
    # a fifth round: retention on the target deletes copies (rpo, rpo_groups, divergence count them)
    rounds = [*ev.rounds(), [ev.watermark(0, 120, 210, 1000, side="target")]]
    for n, events in enumerate(rounds):
        built = lakes.round(spark, [encode(e) for e in events])
        for engine in ENGINES:
            updates = built.get(engine, [])  # round 1: built once, on Spark, and copied (EngineLakehouses.round)
            engines[engine].append({u.table: f"{u.mode} on {u.engine}" for u in updates})
            reasons[engine].append({u.table: u.reason for u in updates})
        if n in (0, 3):
            continue  # round 1 is a full build; round 4 changes nothing (asserted below)
        lakes.assert_equal_to_full_builds(spark, f"round {n + 1}")
    deleted = spark.read.format("delta").load(str(paths["duckdb"].gold("divergence")))
    assert deleted.where("kind = 'target_records_deleted'").count() == 1
    assert set(engines["spark"][0].values()) == {"full on spark"}  # a new lakehouse
    for engine, modes in engines.items():
        assert set(modes[3].values()) == {"unchanged on spark"}, engine  # events seen before
    # one flow, one topic: any new event touches every key of divergence, so a MERGE on Spark would
    # recompute the whole table and then compare it; Spark overwrites it instead
    assert (engines["spark"][1]["divergence"], reasons["spark"][1]["divergence"]) == (
        "full on spark",
        "every key touched",
    )
    # every table gets new rows in round 2 or 3; on duckdb its twin builds them (Spark may merge or rebuild)
    built_by = {"duckdb": {"tail on duckdb"}, "spark": {"tail on spark", "merge on spark", "full on spark"}}
    for engine, modes in engines.items():
        for name in TWINS:
            later = {m[name] for m in modes[1:3]}
            assert later & built_by[engine] and later <= built_by[engine] | {"unchanged on spark"}, (name, modes)


def test_a_recreated_topic_s_new_life_is_what_gold_translates_through_on_every_engine(spark, tmp_path):
    """Issue 39 item 2 in the lakehouse, both sides, in one set of rounds.

    Source side: ``acct`` is copied (life ``old``), then deleted and created again: a
    ``topic_recreated`` event, no copy of the new topic yet, then its first copies (life ``new``).
    Target side: ``rt`` is copied into remote topic ``T1``; ``T1`` is deleted and created again
    (``T2``, an event of side target); the source is copied again into it from its log start, at the
    very offsets the lost copies had (a point of each life at the same (d, u)), in two rounds (the
    second an incremental tail of a partition with two remote lives).

    After each round, gold on both engines equals Spark's full compute; ``offset_mapping`` keeps
    the lives, each row naming its own; a group's ``exact_offset`` is what ``MappingIndex`` (the
    failover plan's mapping) gives: through the old copies before the re-creation, nothing between
    (the new topic's offset 5 is not the old one's; T1's copies are gone), the new copies after; and
    divergence says each re-creation."""
    from dataclasses import replace

    from replicator.client.mapping_index import MappingIndex
    from replicator.events import TopicRecreated

    def acct(event, life: str | None = None):
        named = replace(event, source_topic="acct", target_topic="A.acct")
        return replace(named, source_topic_id=life) if life else named

    def rt(event, remote: str | None = None):
        named = replace(event, source_topic="rt", target_topic="A.rt")
        return replace(named, source_topic_id="S", target_topic_id=remote) if remote else named

    old = [acct(ev.sync(p, u, u + 50 * p, 100, reason, prev), "old") for p in range(2)
           for u, reason, prev in ((0, "first", None), (9, "flush", (8, 8 + 50 * p)))]  # fmt: skip
    old += [
        rt(ev.sync(0, u, u, 100, reason, prev), "T1") for u, reason, prev in ((0, "first", None), (9, "flush", (8, 8)))
    ]
    recreated = TopicRecreated(
        flow=ev.FLOW, replicator_id="peer", emitted_at_ms=ev.T0 + 300, source_cluster="A", target_cluster="B",
        side="source", topic="acct", source_topic="acct", topic_id="new", previous_topic_id="old", partitions=2,
        log_start_offsets=(0, 0), log_end_offsets=(6, 0), policy="continue", noticed="running",
    )  # fmt: skip
    remote = replace(
        recreated, side="target", topic="A.rt", source_topic="rt", topic_id="T2", previous_topic_id="T1",
        partitions=1, log_start_offsets=(0,), log_end_offsets=(0,), policy="recopy", event_id="remote-recreated",
    )  # fmt: skip
    new = [acct(ev.sync(0, 0, 100, 400, "first"), "new"), acct(ev.sync(0, 4, 104, 400, "flush", (3, 103)), "new")]
    new += [rt(ev.sync(0, 0, 0, 400, "first"), "T2"), rt(ev.sync(0, 4, 4, 400, "flush", (3, 3)), "T2")]
    rounds = [
        [*old, acct(ev.checkpoint("app", 0, 5, 5, 150, "exact")), acct(ev.checkpoint("app", 1, 5, 55, 150, "exact")),
         rt(ev.checkpoint("app", 0, 7, 7, 150, "exact"))],
        [recreated, remote],
        [*new, acct(ev.checkpoint("app", 0, 3, 103, 450, "exact")), rt(ev.checkpoint("app", 0, 3, 3, 450, "exact"))],
        [rt(ev.sync(0, 9, 9, 500, "flush", (8, 8)), "T2"), rt(ev.checkpoint("app", 0, 7, 7, 550, "exact"))],
    ]  # fmt: skip
    expected = [  # per round: (topic, partition, committed) -> exact offset
        {("acct", 0, 5): 5, ("acct", 1, 5): 55, ("rt", 0, 7): 7},
        {("acct", 0, 5): None, ("acct", 1, 5): None, ("rt", 0, 7): None},
        {("acct", 0, 3): 103, ("acct", 1, 5): None, ("rt", 0, 3): 3},
        {("acct", 0, 3): 103, ("acct", 1, 5): None, ("rt", 0, 7): 7},
    ]
    lakes = ev.EngineLakehouses(tmp_path)
    index = MappingIndex()
    for n, events in enumerate(rounds):
        lakes.round(spark, [encode(e) for e in events])
        index.add(events)
        if n:
            lakes.assert_equal_to_full_builds(spark, f"lives round {n + 1}")
        for engine in ENGINES:
            groups = spark.read.format("delta").load(str(lakes.paths[engine].gold("group_offsets")))
            got = {
                (r.source_topic, r.partition, r.committed_offset): r.exact_offset
                for r in groups.where("source_topic IN ('acct', 'rt')").collect()
            }
            want = {}
            for t, p, c in got:
                found = index.translate(ev.FLOW, t, p, c)
                want[(t, p, c)] = found.downstream if found else None
            assert got == want == expected[n], (engine, n)
            # the last copy rpo_groups reads is the current life's (acct[0]: 4 of the new topic, not 9 of the old)
            rpo = spark.read.format("delta").load(str(lakes.paths[engine].gold("rpo_groups")))
            last = {(r.source_topic, r.partition): r.last_replicated_offset for r in rpo.collect()}
            assert last == {
                k: max((s.upstream_end for s in index.segments(ev.FLOW, *k)), default=None) for k in last
            }, (engine, n)
            if n == 2:
                assert last[("acct", 0)] == 4, engine
    mapping = spark.read.format("delta").load(str(lakes.paths["duckdb"].gold("offset_mapping")))
    lives = {
        (r.partition, r.source_topic_id, r.downstream_start) for r in mapping.where("source_topic = 'acct'").collect()
    }
    assert lives == {(0, "old", 0), (1, "old", 50), (0, "new", 100)}
    remote_lives = {
        (r.target_topic_id, r.downstream_start, r.downstream_end)
        for r in mapping.where("source_topic = 'rt'").collect()
    }
    assert remote_lives == {("T1", 0, 9), ("T2", 0, 9)}
    for engine in ENGINES:
        divergence = spark.read.format("delta").load(str(lakes.paths[engine].gold("divergence")))
        (row,) = divergence.where("kind = 'target_topic_recreated'").collect()
        assert (row.source_topic, row.target_topic, row.item) == ("rt", "A.rt", "topic id T1 -> T2"), engine
