"""Each gold table's incremental build, on its DuckDB twin and on Spark, equals a full Spark compute
after each incremental round of ``lakehouse_support.rounds`` (gaps, an at-least-once replay,
duplicates, a late sync, a change that deletes a row, heartbeats over two paths, a failover and a
failback; a round of events seen before, which must change nothing) and of one more (copies deleted
on the target). One bronze and silver (no Kafka); each engine builds its own gold tables from that
silver (the second lakehouse's silver is a link to the first's)."""

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
        for engine, updates in lakes.round(spark, [encode(e) for e in events]).items():
            engines[engine].append({u.table: f"{u.mode} on {u.engine}" for u in updates})
            reasons[engine].append({u.table: u.reason for u in updates})
        if n in (0, 3):
            continue  # round 1 is a full build on both; round 4 changes nothing (asserted below)
        lakes.assert_equal_to_full_builds(spark, f"round {n + 1}")
    deleted = spark.read.format("delta").load(str(paths["duckdb"].gold("divergence")))
    assert deleted.where("kind = 'target_records_deleted'").count() == 1
    for engine, modes in engines.items():
        assert set(modes[0].values()) == {"full on spark"}, engine  # a new lakehouse
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
