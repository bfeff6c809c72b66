"""An exactly-once flow whose producer is fenced fails with an error that names why (issue 39's soak).

The soak ran two processes of an exactly-once flow; both used the transactional id
``mirrorlake.T->S.main`` and fenced each other, and each exited 9 with librdkafka's words only. Each
process can now be named (``--replicator-id``, stable across its restarts); a fenced flow's error
names its transactional id and the two causes. The producer is fenced here the way Kafka does it:
a second ``init_transactions`` with the flow's transactional id, on real clusters while records flow.
"""

from __future__ import annotations

import threading
import uuid

import pytest
from confluent_kafka import Producer

from mirrorlake.groundtruth import read_partition
from mirrorlake.traffic import ensure_topic
from replicator.errors import ReplicationError
from replicator.flow.runtime import Replicator
from replicator.kafka.settings import transactional_id
from tests.waiting import wait_for

pytestmark = pytest.mark.kafka
PARTITIONS = 2


def _produce(bootstrap: str, topic: str, stop: threading.Event) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    i = 0
    while not stop.is_set():
        producer.produce(topic, key=f"k{i}".encode(), value=b"v", partition=i % PARTITIONS)
        i += 1
        if i % 50 == 0:
            producer.poll(0)
            stop.wait(0.05)
    producer.flush(30)


def test_a_fenced_exactly_once_flow_fails_naming_its_transactional_id_and_nothing_is_doubled(
    kafka_clusters, unique_topic
):
    topic = unique_topic("fenced")
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    ensure_topic(a, topic, PARTITIONS)
    instance = f"fenced-{uuid.uuid4().hex[:8]}"
    config = kafka_clusters.config(
        flows=[{"source": "A", "target": "B", "topics": [topic], "exactly_once": True,
                "transaction_interval_seconds": 0.2}],
        replicator_id=instance,
    )  # fmt: skip
    txn_id = transactional_id(config.flow("A->B"), instance)
    stop = threading.Event()
    writer = threading.Thread(target=_produce, args=(a, topic, stop), daemon=True)
    replicator = Replicator(config, status_port=None)
    replicator.start()
    try:
        writer.start()
        wait_for(lambda: replicator.flow_stats()["A->B"].records > 300, "copies before the fence")
        Producer({"bootstrap.servers": b, "transactional.id": txn_id}).init_transactions(30)  # a second process
        wait_for(lambda: not replicator.alive, "the fenced flow failing")
    finally:
        stop.set()
        writer.join(60)
        replicator.stop()
    with pytest.raises(ReplicationError) as failed:
        replicator.wait(60)
    said = str(failed.value)
    assert said.startswith("flow A->B: ") and f"transactional id {txn_id} was taken over" in said, said
    assert "--replicator-id" in said and "resumes from the positions committed on the target" in said, said
    for p in range(PARTITIONS):  # read_committed: what the fenced producer left open never shows
        keys = [r.key for r in read_partition(b, f"A.{topic}", p)]
        assert len(keys) == len(set(keys)), p
