"""A ``mirrorlake lakehouse build`` killed with SIGKILL midway, then rerun, gives the tables of a
clean build: no lost and no duplicated rows in bronze, silver or gold.

Two kill points, found by polling the lakehouse's own progress files (not by timing): right
after bronze committed its first batch (silver and gold not done), and right after the first
gold table recorded its state (the other gold tables not done). The events are the session's
``built.events`` (the same event ids), so the clean build it is held to is ``built_fresh``: those
events built in one go from ``built``'s state topic.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from replicator.config import MirrorlakeConfig
from tests import lakehouse_support as ev
from tests.lakehouse_support import Built, write_config
from tests.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _build_killed_when(conf: Path, ready, what: str, log: Path) -> None:
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mirrorlake.cli", "lakehouse", "build", "-c", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        try:
            wait_for(lambda: ready() or proc.poll() is not None, what, timeout_s=600, every_s=0.05)
            assert proc.poll() is None, f"the build ended before {what}: {log.read_text()[-2000:]}"
            proc.send_signal(signal.SIGKILL)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL


def test_a_build_killed_midway_and_rerun_equals_a_clean_build(
    kafka_clusters, unique_topic, tmp_path, spark, built: Built, built_fresh: MirrorlakeConfig
):
    from lakehouse.build import build_lakehouse
    from lakehouse.gold_tables import GOLD_TABLES
    from mirrorlake.traffic import ensure_topic
    from replicator.config import load_config

    state_topic = unique_topic("mirrorlake.events")
    b = kafka_clusters.bootstrap("B")
    ensure_topic(b, state_topic, 2)
    events = built.events
    ev.produce(b, state_topic, events)
    root = tmp_path / "killed"
    conf = write_config(tmp_path / "killed.yaml", kafka_clusters.bootstraps, state_topic, root)

    bronze_committed = root / "checkpoints" / "bronze-B" / "commits" / "0"
    _build_killed_when(conf, bronze_committed.exists, "bronze's first commit", tmp_path / "build1.log")
    first_gold = root / "checkpoints" / "gold" / "offset_mapping.json"
    _build_killed_when(conf, first_gold.exists, "the first gold table's state", tmp_path / "build2.log")
    assert not (root / "checkpoints" / "gold" / "topology.json").exists()  # killed before the last table

    killed = load_config(conf)
    build_lakehouse(spark, killed)  # the rerun

    def table(config, *parts: str):
        return spark.read.format("delta").load(str(Path(config.lakehouse.path).resolve() / "tables" / Path(*parts)))

    assert table(killed, "bronze", "events").count() == len(events)
    for event_type in ("offset_sync", "checkpoint", "watermark", "heartbeat"):
        silver = table(killed, "silver", event_type)
        assert silver.count() == len({e.event_id for e in events if e.event_type == event_type})
        lineage = ("state_topic", "state_partition", "state_offset")  # where each event sat: other topics
        ev.assert_same_rows(silver.drop(*lineage), table(built_fresh, "silver", event_type).drop(*lineage), event_type)
    for spec in GOLD_TABLES:
        ev.assert_same_rows(table(killed, "gold", spec.name), table(built_fresh, "gold", spec.name), spec.name)
