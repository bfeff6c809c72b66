"""``mirrorlake lakehouse serve`` as a real subprocess: it ingests new events while running and
stops cleanly on SIGTERM (waits are polls with a bound, never timing assertions)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mirrorlake.traffic import ensure_topic
from tests import lakehouse_support as ev
from tests.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _mapping_rows(root: Path) -> int:
    from lakehouse.api import Lakehouse
    from replicator.errors import MirrorlakeError

    try:
        return Lakehouse.at(root).table("offset_mapping").num_rows
    except MirrorlakeError:
        return -1  # not built yet


def write_config(kafka_clusters, state_topic: str, root: Path, path: Path) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": {a: {"bootstrap_servers": kafka_clusters.bootstrap(a)} for a in ("A", "B")},
                "flows": [{"source": "A", "target": "B", "topics": ["orders"]}],
                "state_topic": state_topic,
                "lakehouse": {"path": str(root)},
                "spark": {"master": "local[2]"},
            }
        )
    )
    return path


def test_serve_ingests_new_events_and_stops_on_sigterm(kafka_clusters, unique_topic, tmp_path):
    state_topic = unique_topic("mirrorlake.events")
    b = kafka_clusters.bootstrap("B")
    root = tmp_path / "lake"
    conf = write_config(kafka_clusters, state_topic, root, tmp_path / "conf.yaml")
    ensure_topic(b, state_topic, 1)
    ev.produce(b, state_topic, [ev.sync(0, 0, 0, 100, "first")])
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mirrorlake.cli",
            "lakehouse",
            "serve",
            "-c",
            str(conf),
            "--interval",
            "1",
            "--trigger",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    try:
        wait_for(lambda: proc.poll() is not None or _mapping_rows(root) == 1, "the first event in gold", 300)
        assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
        # a new event while serving: a replay (a second segment) must show up without a restart
        ev.produce(b, state_topic, [ev.sync(0, 0, 5, 200, "first")])
        wait_for(lambda: proc.poll() is not None or _mapping_rows(root) == 2, "the event produced while serving", 300)
        assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    assert proc.returncode == 0, (tmp_path / "serve.log").read_text()[-3000:]
    assert "lakehouse serve stopped after" in out
    assert "Traceback" not in (tmp_path / "serve.log").read_text()
