"""The replicator as a library gives back what a run took: a process that runs flows one after
another (a test suite, a scheduler, a notebook) must not gather librdkafka clients.

A flow's parts hold one another, so before ``Replicator.wait`` collected them each finished run left
its clients (threads, sockets, about 60 descriptors) until Python's next cyclic collection: a CI
worker reached 1,024 descriptors and ``select`` refused the next one.
"""

from __future__ import annotations

import os

import pytest
from confluent_kafka import Producer

from mirrorlake.traffic import ensure_topic
from replicator.flow.runtime import Replicator

pytestmark = pytest.mark.kafka


def _descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_runs_one_after_another_do_not_gather_descriptors(kafka_clusters, unique_topic):
    a = kafka_clusters.bootstrap("A")
    topic = unique_topic("resources")
    ensure_topic(a, topic, 2)
    producer = Producer({"bootstrap.servers": a})
    for i in range(50):
        producer.produce(topic, b"v", f"k{i}".encode())
    assert producer.flush(30) == 0
    del producer
    config = kafka_clusters.config(
        flows=[{"source": "A", "target": "B", "topics": [topic], "audit": False, "emit_heartbeats": False}],
        state_topic=unique_topic("mirrorlake.resources"),
    )
    counts = []
    for _ in range(4):
        Replicator(config, status_port=None).run_until_caught_up()
        counts.append(_descriptors())
    assert counts[-1] <= counts[0] + 8, f"descriptors after each run: {counts}"
