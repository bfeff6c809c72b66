"""A takeover judges the state log as it stands when it judges, not as the state lane last read it.

``PreviousRun`` (whether a partition's last copier stopped cleanly) was fed by the state tasks'
view alone, which their lane refreshes between tasks: an audit of a busy partition holds that lane
for seconds (23.6 s logged in a broker-fault run). A standby process handed a killed peer's
partitions in that window could judge them by a log without the peer's last syncs, and a clean
stop read before them would make it resume at the peer's commits: a second copy of everything the
peer copied past them (found by reading the code, not seen in a run). The loop's own view
(``StateView.fork`` with subscribers) is refreshed right before the judgement and hands
``PreviousRun`` what it reads. Real cluster, real state topic.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from mirrorlake.traffic import ensure_topic
from replicator.events import Lifecycle, OffsetSync, SyncReason
from replicator.flow.core.resume import PreviousRun
from replicator.kafka.state_log import StateLog
from replicator.tasks.base import StateView

pytestmark = pytest.mark.kafka


def _sync(topic: str, rid: str, at: int) -> OffsetSync:
    return OffsetSync(
        flow="A->B", replicator_id=rid, source_cluster="A", target_cluster="B", source_topic=topic,
        target_topic=f"A.{topic}", partition=0, upstream_offset=5, downstream_offset=5, upstream_timestamp_ms=0,
        reason=SyncReason.FLUSH, emitted_at_ms=at,
    )  # fmt: skip


def _emit(producer: Producer, state_topic: str, *events: Lifecycle | OffsetSync) -> None:
    log = StateLog(producer, state_topic)
    for event in events:
        log.emit(event)
    assert producer.flush(30) == 0


def test_the_loop_s_view_hands_the_previous_run_what_arrived_since_the_fork(kafka_clusters, unique_topic):
    topic, state_topic = unique_topic("verdict"), unique_topic("mirrorlake.events")
    b = kafka_clusters.bootstrap("B")
    ensure_topic(b, state_topic, 1)
    config = kafka_clusters.config(flows=[{"source": "A", "target": "B", "topics": [topic]}], state_topic=state_topic)
    flow = config.flow("A->B")
    producer = Producer({"bootstrap.servers": b})
    now = int(time.time() * 1000)
    # before this process started: r1 ran; r2 copied t[0] and stopped cleanly, the flow's newest word
    me = Lifecycle(flow="A->B", replicator_id="me", state="started", emitted_at_ms=now - 7_000)
    _emit(
        producer,
        state_topic,
        Lifecycle(flow="A->B", replicator_id="r1", state="started", emitted_at_ms=now - 10_000),
        Lifecycle(flow="A->B", replicator_id="r2", state="started", emitted_at_ms=now - 10_000),
        _sync(topic, "r2", now - 9_000),
        Lifecycle(flow="A->B", replicator_id="r2", state="stopped", emitted_at_ms=now - 8_000),
        me,
    )
    previous = PreviousRun(me)
    lane = StateView(config, flow)  # the state tasks' view: read at start, then by its busy lane
    for event_type in (Lifecycle.event_type, OffsetSync.event_type):
        lane.subscribe(event_type, previous.take)
    lane.refresh()
    loop = lane.fork({Lifecycle.event_type: [previous.take], OffsetSync.event_type: [previous.take]})
    try:
        assert not previous.verdict()(topic, 0)  # r2 stopped cleanly after its copies: its commit stands
        # r1 takes t[0] over, copies past its commits and is SIGKILLed
        _emit(producer, state_topic, _sync(topic, "r1", now - 5_000))
        assert not previous.verdict()(topic, 0)  # nothing has read it yet: a judgement now would be wrong
        loop.refresh()  # what the takeover does right before it judges
        assert previous.verdict()(topic, 0)  # r1's copies past its commits: resume past them
        lane.refresh()  # the lane catches up later and hands the same events again
        assert previous.verdict()(topic, 0)
        assert loop.index.segments("A->B", topic, 0) == lane.index.segments("A->B", topic, 0)
    finally:
        loop.close()
        lane.close()
