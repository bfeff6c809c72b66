"""RPO stays live while no replicator runs (issue 38 item 3): ``mirrorlake observe --follow``.

A flow copies and stops; the source takes more writes. The observer's round emits watermarks whose
figures are what the clusters hold (records on the source whose key is not on the target), under
its own replicator id; while a replicator of the flow runs, a round emits nothing (the replicator's
own figures are the true ones). The command form runs rounds until SIGTERM and exits 0.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer

from mirrorlake.groundtruth import read_partition
from mirrorlake.traffic import ensure_topic
from replicator.client.state_reader import read_state_log
from replicator.events import Lifecycle, Watermark
from replicator.failover.watch import observe_round, observer_id
from replicator.flow.runtime import Replicator
from tests.waiting import wait_for

pytestmark = pytest.mark.kafka
ROOT = Path(__file__).resolve().parents[1]
PARTITIONS = 2


def _produce(bootstrap: str, topic: str, prefix: str, per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(per_partition):
        for p in range(PARTITIONS):
            producer.produce(topic, key=f"{prefix}-{p}-{i}".encode(), value=b"v", partition=p)
        producer.poll(0)
    assert producer.flush(60) == 0


def _observer_watermarks(config, topic: str) -> list[Watermark]:
    events = read_state_log(config.cluster("B").client_config(), config.state_topic).events
    return [
        e
        for e in events
        if isinstance(e, Watermark) and e.side == "source" and e.source_topic == topic
        and e.replicator_id == observer_id(config)
    ]  # fmt: skip


def _not_on_target(a: str, b: str, topic: str, partition: int) -> int:
    """Ground truth: records of the source partition whose key the target's copy lacks."""
    copied = {r.key for r in read_partition(b, f"A.{topic}", partition)}
    return sum(1 for r in read_partition(a, topic, partition) if r.key not in copied)


def test_the_observer_measures_rpo_while_no_replicator_runs_and_leaves_a_running_one_alone(
    kafka_clusters, unique_topic, tmp_path
):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic = unique_topic("watched")
    ensure_topic(a, topic, PARTITIONS)
    config = kafka_clusters.config(
        flows=[{"source": "A", "target": "B", "topics": [topic], "audit": False, "emit_heartbeats": False,
                "watermarks_interval_seconds": 1}],
        state_topic=unique_topic("mirrorlake.watch"),
        replicator_id=unique_topic("watch"),
    )  # fmt: skip
    _produce(a, topic, "early", 100)
    Replicator(config, status_port=None).run_until_caught_up()
    _produce(a, topic, "late", 300)  # the replicator is stopped: nobody measures these

    (seen,) = observe_round(config)
    assert (seen.flow, seen.outcome) == ("A->B", "observed"), seen
    latest = {w.partition: w for w in _observer_watermarks(config, topic)}
    assert sorted(latest) == list(range(PARTITIONS))
    for p, w in latest.items():
        truth = _not_on_target(a, b, topic, p)
        assert truth == 300
        assert (w.unreplicated_records, w.log_end_offset) == (truth, 400), w

    replicator = Replicator(config, status_port=None)
    replicator.start()
    try:
        wait_for(
            lambda: any(
                isinstance(e, Lifecycle) and e.state == "started" and e.replicator_id == replicator.replicator_id
                for e in read_state_log(config.cluster("B").client_config(), config.state_topic).events
            ),
            "the running replicator's started event",
        )
        before = len(_observer_watermarks(config, topic))
        (seen,) = observe_round(config)
        assert seen.outcome == "skipped" and "replicator" in seen.detail, seen
        assert len(_observer_watermarks(config, topic)) == before
    finally:
        replicator.stop()
        replicator.wait(timeout=60)

    # the command: rounds until SIGTERM, exit 0; the flow stopped cleanly, so it observes at once
    _produce(a, topic, "later", 50)
    path = tmp_path / "watch.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json", exclude_none=True)))
    before = len(_observer_watermarks(config, topic))
    proc = subprocess.Popen(
        [sys.executable, "-m", "mirrorlake.cli", "observe", str(path), "--follow", "--interval", "0.5"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for(lambda: len({w.partition for w in _observer_watermarks(config, topic)[before:]}) == PARTITIONS
                 or proc.poll() is not None, "the observer's watermarks of every partition")  # fmt: skip
        assert proc.poll() is None, proc.communicate()
        latest = {w.partition: w for w in _observer_watermarks(config, topic)[before:]}
        for p, w in latest.items():
            assert w.unreplicated_records == _not_on_target(a, b, topic, p) >= 50, w
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    assert "observe stopped after" in out and "Traceback" not in err, (out, err[-3000:])
