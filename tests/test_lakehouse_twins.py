"""Each gold table with a DuckDB twin: its incremental build on DuckDB and delta-rs, and on Spark,
equals a full Spark compute after every round of ``lakehouse_support.rounds`` (gaps, an
at-least-once replay, duplicates, a late sync, a change that deletes a row, a round of events
seen before), on one bronze table fed directly (no Kafka)."""

from __future__ import annotations

from typing import Literal

import pytest

from replicator.config import MirrorlakeConfig
from replicator.events import encode
from tests import lakehouse_support as ev

pytestmark = pytest.mark.spark


def _config(engine: Literal["duckdb", "spark"]) -> MirrorlakeConfig:
    return MirrorlakeConfig.model_validate(
        {"clusters": {"A": {"bootstrap_servers": "127.0.0.1:1"}}, "lakehouse": {"incremental_engine": engine}}
    )


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_an_incremental_build_equals_a_full_compute_on_either_engine(spark, tmp_path, engine):
    from ingest.paths import LakehousePaths
    from lakehouse.duck.tables import TWINS
    from lakehouse.gold import GoldInputs
    from lakehouse.gold_tables import GOLD_TABLES
    from lakehouse.incremental import silver_versions, update_gold
    from lakehouse.silver import update_silver

    twinned = [spec.name for spec in GOLD_TABLES if spec.name in TWINS]
    # the twins and the tables they read
    needed = {d for spec in GOLD_TABLES if spec.name in TWINS for d in spec.depends_on} | set(twinned)
    tables = [spec for spec in GOLD_TABLES if spec.name in needed]
    paths = LakehousePaths(tmp_path / "lake")
    engines: list[dict[str, str]] = []
    offset = 0
    for n, events in enumerate(ev.rounds()):
        ev.append_bronze(spark, str(paths.bronze), offset, [encode(e) for e in events])
        offset += len(events)
        update_silver(spark, paths)
        updates = update_gold(spark, paths, config=_config(engine), tables=tables)
        engines.append({u.table: f"{u.mode} on {u.engine}" for u in updates})
        versions = silver_versions(spark, paths)
        for spec in tables:
            table = spark.read.format("delta").load(str(paths.gold(spec.name)))
            full = spec.compute(GoldInputs(spark, paths, versions, None, None))
            ev.assert_same_rows(table, full, f"{engine}, round {n + 1}: {spec.name}")
    assert set(engines[0].values()) == {"full on spark"}  # a new lakehouse
    for name in twinned:  # rounds 2 and 3 bring new rows to every twinned table
        assert engines[1][name] == engines[2][name] == f"tail on {engine}", engines
    assert set(engines[3].values()) == {"unchanged on spark"}  # events seen before
