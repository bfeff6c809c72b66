"""Exact RPO on real clusters: watermark v2 carries the flow's position and the measured tail.

A topic whose partitions end in committed and aborted transactions (markers and aborted records
after the last copy) is replicated until caught up: the final source watermarks say 0 records and
0 bytes at risk. Then the replicator is stopped and N records arrive: ``observe`` says N, with
their exact bytes and the timestamp of the oldest, equal to the clusters' ground truth by content.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from mirrorlake.groundtruth import copies_by_content, read_partition, state_events
from mirrorlake.traffic import ensure_topic
from replicator.events import Watermark
from replicator.flow.runtime import Replicator
from replicator.tasks.observe import observe_once
from tests.test_state_events import _produce, _transactions

pytestmark = pytest.mark.kafka


def _latest_source_marks(bootstrap: str, state_topic: str, topic: str) -> dict[int, Watermark]:
    latest: dict[int, Watermark] = {}
    for e in state_events(bootstrap, state_topic):
        if not (isinstance(e, Watermark) and e.side == "source" and e.topic == topic):
            continue
        if e.partition not in latest or latest[e.partition].observed_at_ms <= e.observed_at_ms:
            latest[e.partition] = e
    return latest


def _abort_at_the_end(bootstrap: str, topic: str, tag: str, partitions: int = 2) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-end-{tag}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(6):
        producer.produce(topic, b"aborted", f"ab-{i}".encode(), i % partitions)
    producer.flush(30)
    producer.abort_transaction(30)


def test_caught_up_is_zero_and_stopped_is_exactly_what_arrived(kafka_clusters, unique_topic):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic = unique_topic("rpo-tx")
    ensure_topic(a, topic, 2)
    _produce(a, topic, [(i % 2, f"k{i}".encode(), f"v{i}".encode()) for i in range(40)])
    _transactions(a, topic, 2, topic[-8:])
    _abort_at_the_end(a, topic, topic[-8:])
    config = kafka_clusters.config(flows=[{"source": "A", "target": "B", "topics": [topic], "audit": False}])
    ensure_topic(a, config.heartbeats_topic, 1)  # as a continuous run's emitter leaves it on A
    Replicator(config, status_port=None).run_until_caught_up()

    marks = _latest_source_marks(b, config.state_topic, topic)
    assert sorted(marks) == [0, 1]
    for m in marks.values():
        assert m.position_source == "flow", m
        assert m.read_position == m.log_end_offset, m  # past the final abort marker
        assert (m.unreplicated_records, m.unreplicated_bytes, m.oldest_unreplicated_timestamp_ms) == (0, 0, None), m

    late = {0: 7, 1: 3}
    _produce(a, topic, [(p, f"late-{p}-{i}".encode(), b"x" * (10 + i)) for p, n in late.items() for i in range(n)])
    observed_from = int(time.time() * 1000)
    assert observe_once(config) == {"A->B": {}}
    observed = {
        e.topic
        for e in state_events(b, config.state_topic)
        if isinstance(e, Watermark)
        and e.side == "source"
        and e.emitted_at_ms >= observed_from
        and e.topic in (topic, config.heartbeats_topic)  # the clusters are shared: this test's topics
    }
    # the replicator's selection, heartbeats too: a partition the observer left out kept the
    # dashboard's "records at risk as of" at the replicator's last watermark during an incident
    assert observed == {topic, config.heartbeats_topic}
    marks = _latest_source_marks(b, config.state_topic, topic)
    for p, n in late.items():
        source = read_partition(a, topic, p)
        copied = {u for u, _d in copies_by_content(source, read_partition(b, f"A.{topic}", p))}
        left = [r for r in source if r.offset not in copied]
        assert len(left) == n
        m = marks[p]
        assert m.position_source == "committed", m
        assert m.unreplicated_records == n, m
        assert m.unreplicated_bytes == sum(len(r.key or b"") + len(r.value or b"") for r in left), m
        assert m.oldest_unreplicated_timestamp_ms == left[0].timestamp, m
