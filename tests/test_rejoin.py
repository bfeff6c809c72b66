"""A flow that lost its partitions and was never given them back joins its consumer group again.

The hang itself (librdkafka not rejoining after a source restart, seen once in CI) cannot be
produced on demand, so this drives the runner's own rejoin path on real clusters: the watchdog
is told of a loss 31 s ago with no assignment since (``replicator.flow.control.rejoin``), the flow
unsubscribes and subscribes anew, gets its partitions back, and copies every record produced
before and after, none lost and none twice.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from confluent_kafka import Producer

from bench.faults import PARTITIONS, read_keys
from mirrorlake.traffic import ensure_topic
from replicator.flow.runtime import Replicator
from tests.waiting import wait_for

pytestmark = pytest.mark.kafka


def _produce(bootstrap: str, topic: str, keys: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in keys:
        producer.produce(topic, key=f"k{i}".encode(), value=b"v" * 100, partition=i % PARTITIONS)
    assert producer.flush(60) == 0


def test_a_forced_rejoin_gets_the_partitions_back_and_loses_nothing(kafka_clusters, unique_topic):
    topic = unique_topic("rejoin")
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    ensure_topic(a, topic, PARTITIONS)
    _produce(a, topic, range(0, 2_000))
    config = kafka_clusters.config(flows=[{"source": "A", "target": "B", "topics": [topic], "audit": False}])
    replicator = Replicator(config, status_port=None)
    replicator.start()
    try:
        runner = replicator._running[0].runner  # noqa: SLF001 - the test plays librdkafka's missing rejoin
        stats = runner.stats
        wait_for(lambda: stats.records >= 2_000, "the first records copied", timeout_s=120)
        runner._rejoin.lost(time.monotonic() - 31.0)  # noqa: SLF001
        wait_for(lambda: stats.rejoins == 1, "the watchdog's rejoin", timeout_s=60)
        wait_for(lambda: len(stats.assigned) == PARTITIONS, "the partitions assigned again", timeout_s=60)
        _produce(a, topic, range(2_000, 4_000))
        wait_for(lambda: stats.records >= 4_000, "the records produced after the rejoin", timeout_s=120)
    finally:
        replicator.stop()
        replicator.wait()
    copied = Counter(read_keys(b, f"A.{topic}"))
    assert set(copied) == {f"k{i}".encode() for i in range(4_000)}
    assert max(copied.values()) == 1
    assert not runner._rejoin.armed  # noqa: SLF001 - the new assignment disarmed it
