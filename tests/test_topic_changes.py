"""While a flow runs: new matching topics and partition increases are followed without restart."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions

from mirrorlake.groundtruth import read_partition
from mirrorlake.traffic import ensure_topic
from replicator.flow.runtime import Replicator
from tests.waiting import wait_for

pytestmark = pytest.mark.kafka


def count(bootstrap: str, topic: str, partition: int) -> int:
    return len(read_partition(bootstrap, topic, partition))


def partitions_of(bootstrap: str, topic: str) -> int:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return len(md.topics[topic].partitions) if md.topics[topic].error is None else 0


def test_new_topic_and_partition_increase_are_picked_up_while_running(kafka_clusters, unique_topic):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    prefix = unique_topic("live")
    first, second = f"{prefix}-one", f"{prefix}-two"
    ensure_topic(a, first, 1)
    producer = Producer({"bootstrap.servers": a})
    for i in range(20):
        producer.produce(first, key=f"f{i}".encode(), value=b"x", partition=0)
    producer.flush(10)
    config = kafka_clusters.config(flows=[{"source": "A", "target": "B", "topics": [f"{prefix}-.*"]}])
    replicator = Replicator(config)
    replicator.start()
    try:
        wait_for(lambda: partitions_of(b, f"A.{first}") == 1 and count(b, f"A.{first}", 0) == 20, "the first topic")
        # a new topic matching the regex
        ensure_topic(a, second, 2)
        for i in range(10):
            producer.produce(second, key=f"s{i}".encode(), value=b"y", partition=i % 2)
        producer.flush(10)
        wait_for(lambda: partitions_of(b, f"A.{second}") == 2, "the new topic on the target")
        wait_for(lambda: count(b, f"A.{second}", 0) + count(b, f"A.{second}", 1) == 10, "the new topic's records")
        # more partitions on the source
        admin = AdminClient({"bootstrap.servers": a})
        admin.create_partitions([NewPartitions(first, 3)])[first].result(30)
        wait_for(lambda: partitions_of(b, f"A.{first}") == 3, "the partition increase on the target")
        producer.list_topics(first, timeout=10)  # our own producer must see the new partition too
        for i in range(5):
            producer.produce(first, key=f"n{i}".encode(), value=b"z", partition=2)
        producer.flush(10)
        wait_for(lambda: count(b, f"A.{first}", 2) == 5, "records of the new partition, in the same partition")
    finally:
        replicator.stop()
        replicator.wait(60)
    assert [r.key for r in read_partition(b, f"A.{first}", 2)] == [f"n{i}".encode() for i in range(5)]
