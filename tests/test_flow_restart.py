"""A flow whose client failed for good starts over in the same process (``replicator.flow.runtime``).

The nemesis soak found it (issue 39 item 4): an exactly-once flow's producer fenced (its
transactional id taken over, or its epoch bumped by a restarted transaction coordinator) failed the
whole process, and every other flow of it with it. Here the producer is fenced the way Kafka does
it, by a second ``init_transactions`` with the flow's transactional id, on real clusters while
records flow: the flow starts again with new clients from the positions the target holds, beside
an at-least-once flow of the same process that never stops, and the target holds each record once
(read_committed). Fenced again and again, the flow fails after ``MAX_RESTARTS`` with the hint.
"""

from __future__ import annotations

import threading
import uuid

import pytest
from confluent_kafka import Producer

from mirrorlake.groundtruth import read_partition
from mirrorlake.traffic import ensure_topic
from replicator.errors import ReplicationError
from replicator.flow import runtime
from replicator.flow.runtime import Replicator
from replicator.kafka.settings import transactional_id
from tests.waiting import wait_for

pytestmark = pytest.mark.kafka
PARTITIONS = 2


def _produce(bootstrap: str, topic: str, stop: threading.Event, produced: dict[str, int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    i = 0
    while not stop.is_set():
        producer.produce(topic, key=f"k{i}".encode(), value=b"v", partition=i % PARTITIONS)
        i += 1
        if i % 50 == 0:
            producer.poll(0)
            stop.wait(0.05)
    assert producer.flush(30) == 0
    produced[topic] = i


def _fence(bootstrap: str, txn_id: str) -> None:
    """What a second process with the same transactional id does: the flow's producer is fenced."""
    Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id}).init_transactions(30)


def _fenced_once(replicator: Replicator, bootstrap: str, txn_id: str, copies: int) -> None:
    """``copies`` records copied, the producer fenced, the flow restarted and copying ``copies`` more."""
    flows = replicator.flow_stats
    wait_for(lambda: flows()["A->B"].records > copies, "copies before the fence")
    _fence(bootstrap, txn_id)
    wait_for(lambda: flows()["A->B"].restarts == 1 and flows()["A->B"].state == "running", "the restart")
    copied = flows()["A->B"].records
    wait_for(lambda: flows()["A->B"].records > copied + copies, "copies after the restart")


def test_a_fenced_exactly_once_flow_starts_over_and_the_target_holds_each_record_once(
    kafka_clusters, unique_topic, caplog, monkeypatch
):
    monkeypatch.setattr(runtime, "RESTART_DELAY_S", 0.1)
    monkeypatch.setattr(runtime, "MAX_RESTARTS", 2)
    eos, alo = unique_topic("fenced"), unique_topic("beside")
    a, b, c = (kafka_clusters.bootstrap(x) for x in "ABC")
    for topic in (eos, alo):
        ensure_topic(a, topic, PARTITIONS)
    instance = f"restart-{uuid.uuid4().hex[:8]}"
    config = kafka_clusters.config(
        flows=[
            {"source": "A", "target": "B", "topics": [eos], "exactly_once": True, "transaction_interval_seconds": 0.2},
            {"source": "A", "target": "C", "topics": [alo]},
        ],
        replicator_id=instance,
    )
    txn_id = transactional_id(config.flow("A->B"), instance)
    stop, produced = threading.Event(), {}
    writers = [threading.Thread(target=_produce, args=(a, t, stop, produced), daemon=True) for t in (eos, alo)]
    replicator = Replicator(config, status_port=None)
    replicator.start()
    try:
        for w in writers:
            w.start()
        _fenced_once(replicator, b, txn_id, 500)
        assert replicator.alive and replicator.flow_stats()["A->C"].restarts == 0  # the other flow never stopped
        stop.set()
        for w in writers:
            w.join(60)
        wait_for(
            lambda: sum(len(read_partition(b, f"A.{eos}", p)) for p in range(PARTITIONS)) >= produced[eos],
            "every record on the target",
        )
    finally:
        stop.set()
        replicator.stop()
        replicator.wait(120)
    for p in range(PARTITIONS):
        source = [r.key for r in read_partition(a, eos, p)]
        assert [r.key for r in read_partition(b, f"A.{eos}", p)] == source, p  # once each, in order
    (said,) = [r.getMessage() for r in caplog.records if "a client failed for good" in r.getMessage()]
    assert "flow A->B" in said and f"transactional id {txn_id} was taken over" in said, said


def test_a_flow_fenced_again_and_again_fails_after_its_restarts(kafka_clusters, unique_topic, monkeypatch):
    """Two processes of one id would fence each other for ever: after ``MAX_RESTARTS`` it is an error."""
    monkeypatch.setattr(runtime, "RESTART_DELAY_S", 0.1)
    monkeypatch.setattr(runtime, "MAX_RESTARTS", 1)
    topic = unique_topic("fenced-twice")
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    ensure_topic(a, topic, PARTITIONS)
    instance = f"twice-{uuid.uuid4().hex[:8]}"
    config = kafka_clusters.config(
        flows=[{"source": "A", "target": "B", "topics": [topic], "exactly_once": True,
                "transaction_interval_seconds": 0.2}],
        replicator_id=instance,
    )  # fmt: skip
    txn_id = transactional_id(config.flow("A->B"), instance)
    stop, produced = threading.Event(), {}
    writer = threading.Thread(target=_produce, args=(a, topic, stop, produced), daemon=True)
    replicator = Replicator(config, status_port=None)
    replicator.start()
    try:
        writer.start()
        _fenced_once(replicator, b, txn_id, 200)
        _fence(b, txn_id)
        wait_for(lambda: not replicator.alive, "the flow failing")
    finally:
        stop.set()
        writer.join(60)
        replicator.stop()
    with pytest.raises(ReplicationError, match="transaction failed|fenced|epoch"):
        replicator.wait(60)
