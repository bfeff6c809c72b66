"""A flow that copies nothing with records behind and no outage: said and mended (``flow.control.stall``).

Seen once in CI: after a 15 s freeze of the target, a flow copied nothing for eight minutes while
``/health`` said ok. The pure rule is tested on its own clock; on real clusters the stall is made
the way the suspected cause would make it (every assigned partition paused behind the flow's back),
and the flow must say so on ``/health`` and in its log, resume, and copy every record.
"""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import KafkaException, Producer

from mirrorlake.groundtruth import read_partition
from mirrorlake.traffic import ensure_topic
from replicator.flow.control.stall import REJOIN, RESUME, StallWatch
from replicator.flow.runtime import Replicator
from tests.waiting import wait_for


def test_a_stall_needs_records_behind_no_outage_and_no_progress():
    watch = StallWatch(10)
    assert watch.observe(0, (5, 5), 100, False) == 0
    assert watch.observe(9, (5, 5), 100, False) == 0
    assert watch.observe(10, (5, 5), 100, False) == RESUME
    assert watch.observe(15, (5, 5), 100, False) == 0  # each remedy once
    assert watch.stalled_s(15) == 15
    assert watch.observe(20, (5, 5), 100, False) == REJOIN
    assert watch.observe(40, (5, 5), 100, False) == 0
    assert watch.observe(41, (6, 5), 100, False) == 0  # progress ends it
    assert watch.stalled_s(41) == 0
    for behind, excused in ((0, False), (100, True)):  # nothing to copy, or an outage explains it
        fresh = StallWatch(10)
        assert [fresh.observe(t, (1, 1), behind, excused) for t in (0, 10, 20, 30)] == [0, 0, 0, 0]
        assert fresh.stalled_s(30) == 0


def test_a_stall_is_counted_from_the_last_excuse():
    watch = StallWatch(10)
    watch.observe(0, (1, 1), 50, True)  # the target was down until t=8
    watch.observe(8, (1, 1), 50, True)
    assert watch.observe(17, (1, 1), 50, False) == 0
    assert watch.observe(18, (1, 1), 50, False) == RESUME


def test_after_s_must_be_positive():
    with pytest.raises(ValueError, match="after_s"):
        StallWatch(0)


@pytest.mark.kafka
def test_a_flow_whose_partitions_stay_paused_says_so_resumes_and_copies_everything(
    kafka_clusters, unique_topic, monkeypatch, caplog
):
    import replicator.flow.clients as flow_clients
    from replicator.kafka.clients import new_consumer

    made = []
    monkeypatch.setattr(flow_clients, "new_consumer", lambda conf: made.append(new_consumer(conf)) or made[-1])
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic = unique_topic("stall")
    ensure_topic(a, topic, 2)
    config = kafka_clusters.config(
        flows=[{"source": "A", "target": "B", "topics": [topic], "audit": False, "emit_heartbeats": False,
                "refresh_topics_interval_seconds": 0.5, "stall_seconds": 2}],
        state_topic=unique_topic("mirrorlake.stall"),
        replicator_id="stall-test",
    )  # fmt: skip
    producer = Producer({"bootstrap.servers": a})

    def produce(first: int, n: int) -> None:
        for i in range(first, first + n):
            producer.produce(topic, b"v", f"k{i}".encode(), partition=i % 2)
        assert producer.flush(30) == 0

    def copied() -> set[bytes]:
        try:
            return {r.key for p in range(2) for r in read_partition(b, f"A.{topic}", p)}
        except KafkaException:  # the remote topic is not created yet
            return set()

    replicator = Replicator(config, status_port=None)
    seen: list[str] = []
    caplog.set_level(logging.WARNING, logger="replicator.flow.runner")
    replicator.start()
    try:
        produce(0, 200)
        wait_for(lambda: len(copied()) == 200, "the first records copied")
        (consumer,) = made
        consumer.pause(consumer.assignment())  # the fault: paused, and the flow does not know it
        produce(200, 200)

        def health_says_stalled() -> bool:
            flow = replicator.health()["flows"]["A->B"]
            seen.extend(why for side, why in flow["waiting_for"].items() if side == "loop")
            return any(why.startswith("stalled") for why in seen)

        wait_for(health_says_stalled, "/health saying the flow stalled", timeout_s=60)
        wait_for(lambda: len(copied()) == 400, "every record copied after the stall", timeout_s=60)
        wait_for(lambda: replicator.health()["status"] == "ok", "/health ok again", timeout_s=60)
    finally:
        replicator.stop()
        replicator.wait(60)
    assert copied() == {f"k{i}".encode() for i in range(400)}
    assert any("stalled: nothing copied for" in why and "records behind" in why for why in seen), seen
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("resuming every partition" in m for m in warnings), warnings
    assert any("copying again after a stall" in m for m in warnings), warnings
