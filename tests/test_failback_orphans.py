"""Failback after a replicator was killed between its copies and their offset syncs.

The copies such a process left on the target have no mapping row until a replicator of the flow
starts again, which after a failover may never happen. ``failback plan`` must not list their
records as never replicated, and ``--recover`` must not copy them a second time: both match the
target's tail against the source by content first, and ``--recover`` publishes the syncs.

The orphans are made by hand, deterministically: after a caught-up run, records produced to A are
written to B's remote topic as the replicator would have copied them (same partition, key, value,
headers, timestamp), with no offset sync; later records reach only A.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from mirrorlake.groundtruth import copies_by_content, read_partition
from mirrorlake.traffic import ensure_topic
from replicator.failover import failback_plan, recover_never_replicated
from replicator.failover.state import read_flow_state
from replicator.flow.runtime import Replicator

pytestmark = pytest.mark.kafka

PARTITIONS = 2


def _produce(bootstrap: str, topic: str, prefix: str, n: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(n):
        producer.produce(topic, value=b"v" * (i % 40), key=f"{prefix}-{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def _copy_by_hand(a: str, b: str, topic: str, after: dict[int, int]) -> int:
    """Write A's records past ``after[p]`` to B's ``A.<topic>`` as the killed replicator did: no sync."""
    producer = Producer({"bootstrap.servers": b, "enable.idempotence": True})
    n = 0
    for p in range(PARTITIONS):
        for r in read_partition(a, topic, p):
            if r.offset >= after[p]:
                producer.produce(
                    f"A.{topic}", value=r.value, key=r.key, partition=p, timestamp=r.timestamp, headers=list(r.headers)
                )
                n += 1
    assert producer.flush(30) == 0
    return n


def test_failback_counts_a_killed_replicators_copies_as_copied_and_recover_maps_them(kafka_clusters, unique_topic):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic = unique_topic("orphans")
    ensure_topic(a, topic, PARTITIONS)
    config = kafka_clusters.config(
        flows=[{"source": "A", "target": "B", "topics": [topic], "audit": False}],
        state_topic=unique_topic("mirrorlake.orphans"),
        replicator_id="orphans-test",
    )
    _produce(a, topic, "copied", 100)
    Replicator(config).run_until_caught_up()
    ends = {p: len(read_partition(a, topic, p)) for p in range(PARTITIONS)}
    _produce(a, topic, "orphan", 30)
    assert _copy_by_hand(a, b, topic, ends) == 30
    _produce(a, topic, "left-behind", 20)

    rows = {(r.source_topic, r.partition): r for r in failback_plan(config, "A->B")}
    for p in range(PARTITIONS):
        row = rows[(topic, p)]
        assert row.orphan_copies == 15, row  # matched by content on B: not listed
        assert row.records == 10 and row.start_offset == ends[p] + 15, row

    recovery = recover_never_replicated(config, "A->B")
    assert recovery.event is not None and recovery.event.records == 20
    for p in range(PARTITIONS):
        source, target = read_partition(a, topic, p), read_partition(b, f"A.{topic}", p)
        assert sorted(r.key for r in target) == sorted(r.key for r in source), p  # each once: nothing twice
        # every copy the replicator made, the orphans included, has its mapping row now: reverse
        # translation names the record it holds (the recovered ones are in the failback event's ranges)
        index = read_flow_state(config, "A->B").index
        for upstream, downstream in copies_by_content(source, target):
            if upstream >= ends[p] + 15:
                continue
            found = index.reverse("A->B", topic, p, downstream)
            assert found is not None and found.upstream == upstream, (p, downstream, found)

    again = {(r.source_topic, r.partition): r for r in failback_plan(config, "A->B")}
    assert all(again[(topic, p)].records == 0 and again[(topic, p)].orphan_copies == 0 for p in range(PARTITIONS))
