"""A remote topic deleted (and created again) on the target, on real clusters (issue 39, item 2, the
target side). Before: a flow restarted after its remote topic was re-created copied on from its
position into the new topic (offset 0) and said nothing: the target lacked every record before it,
and the mapping translated a group of the source through the old copies' syncs into the new
topic's offsets. Deleted while the flow ran, the flow failed with "Local: Unknown partition".

Judged by the target's contents: every source record once, in source order, after the recopy; a
group planned exactly by content in the new life.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from mirrorlake.groundtruth import copies_by_content, read_partition
from mirrorlake.traffic import ensure_topic
from replicator.client.mapping_index import MappingIndex
from replicator.client.state_reader import read_state_log
from replicator.errors import ReplicationError
from replicator.events import OffsetSync, SyncReason, TopicRecreated
from replicator.flow.runtime import Replicator
from replicator.metadata.topic_ids import topic_ids
from tests.test_topic_lives import PARTITIONS, _config, _ends, _events, _produce, _recreate, planned_at
from tests.waiting import wait_for

pytestmark = pytest.mark.kafka
OLD, NEW = 1_000, 500


def _on_target(bootstrap: str, remote: str) -> list[list[str]]:
    """Each partition's keys on the target, in offset order."""
    return [[r.key.decode() for r in read_partition(bootstrap, remote, p)] for p in range(PARTITIONS)]


def _whole(p: int) -> list[str]:
    return [f"old-{p}-{i}" for i in range(OLD)] + [f"new-{p}-{i}" for i in range(OLD, OLD + NEW)]


def _planned_exactly(config, kafka_clusters, topic: str, group: str, committed: int) -> None:
    """A group of the source at ``committed``: the plan's target offset is where a consumer of B finds
    the first record it has not read, and its figures say nothing is lost or read twice."""
    b = kafka_clusters.bootstrap("B")
    for row in planned_at(config, kafka_clusters.bootstrap("A"), topic, group, committed).partitions:
        on_b = read_partition(b, f"A.{topic}", row.partition)
        after = [r.key.decode() for r in on_b if r.offset >= row.target_offset]
        assert after == _whole(row.partition)[committed:], row  # resumes at the first unread record, no other
        assert (row.method, row.records_lost, row.records_reread) == ("exact", 0, 0), row


def test_a_remote_topic_recreated_while_the_flow_was_stopped_is_said_then_recopied_whole(kafka_clusters, unique_topic):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic = unique_topic("rt")
    remote = f"A.{topic}"
    ensure_topic(a, topic, PARTITIONS)
    config = _config(kafka_clusters, unique_topic, topic)
    _produce(a, topic, "old", OLD)
    Replicator(config, status_port=None).run_until_caught_up()
    _recreate(b, remote)  # empty again: the old copies are gone
    _produce(a, topic, "new", NEW, start=OLD)
    # stop: the flow fails naming the remote topic, after the event, and copies nothing
    stopping = _config(kafka_clusters, lambda _prefix: config.state_topic, topic, on_remote_topic_recreated="stop")
    with pytest.raises(ReplicationError, match=f"remote topic '{remote}' on B was deleted and created again"):
        Replicator(stopping, status_port=None).run_until_caught_up()
    assert _ends(b, remote) == [0] * PARTITIONS
    (said,) = _events(config, TopicRecreated)
    assert (said.side, said.topic, said.source_topic) == ("target", remote, topic)
    assert (said.policy, said.noticed) == ("stop", "start")
    assert said.previous_topic_id and said.topic_id != said.previous_topic_id
    # started again with stop still set: it holds (nothing recopied, no second event)
    with pytest.raises(ReplicationError, match=f"remote topic '{remote}' on B .* stop still holds"):
        Replicator(stopping, status_port=None).run_until_caught_up()
    assert _ends(b, remote) == [0] * PARTITIONS
    assert len(_events(config, TopicRecreated)) == 1
    # recopy (the default): the source again from its log start, once, in order
    replicator = Replicator(config, status_port=None)
    replicator.run_until_caught_up()
    assert _on_target(b, remote) == [_whole(p) for p in range(PARTITIONS)]
    assert replicator.flow_stats()["A->B"].remote_topics_recreated == 0  # said by the stopped run, same id
    _planned_exactly(config, kafka_clusters, topic, unique_topic("rt-app"), 700)


def test_a_remote_topic_deleted_under_a_running_flow_stops_it_naming_the_topic_and_the_restart_recopies(
    kafka_clusters, unique_topic
):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic = unique_topic("rt-live")
    remote = f"A.{topic}"
    ensure_topic(a, topic, PARTITIONS)
    config = _config(kafka_clusters, unique_topic, topic)
    _produce(a, topic, "old", OLD)
    replicator = Replicator(config, status_port=None)
    replicator.start()
    try:
        wait_for(lambda: _ends(b, remote) == [OLD] * PARTITIONS, "the old records copied")
        admin = AdminClient({"bootstrap.servers": b})
        admin.delete_topics([remote])[remote].result(timeout=30)
        _produce(a, topic, "new", NEW, start=OLD)
        wait_for(lambda: not replicator.alive, "the flow stopped by its failed writes", timeout_s=120)
    finally:
        replicator.stop()
    with pytest.raises(ReplicationError, match=f"remote topic '{remote}' on B was deleted while the flow ran"):
        replicator.wait(timeout=60)
    restarted = Replicator(config, status_port=None)
    restarted.run_until_caught_up()  # creates the remote topic again, says so, recopies
    assert _on_target(b, remote) == [_whole(p) for p in range(PARTITIONS)]
    (said,) = _events(config, TopicRecreated)
    assert (said.side, said.policy, said.noticed, said.log_end_offsets) == ("target", "recopy", "start", (0, 0))
    assert restarted.flow_stats()["A->B"].remote_topics_recreated == 1


def test_a_remote_topic_recreated_under_a_running_flow_is_recopied_in_the_new_life(kafka_clusters, unique_topic):
    """Deleted and created again between two writes: the flow's next topic check finds the new id and
    copies the source again from its log start. Records copied into the new topic before that check
    come first and are copied again: every record is there, and the new life maps it exactly."""
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic = unique_topic("rt-again")
    remote = f"A.{topic}"
    ensure_topic(a, topic, PARTITIONS)
    config = _config(kafka_clusters, unique_topic, topic)
    _produce(a, topic, "old", OLD)
    replicator = Replicator(config, status_port=None)
    replicator.start()
    try:
        wait_for(lambda: _ends(b, remote) == [OLD] * PARTITIONS, "the old records copied")
        _recreate(b, remote)
        _produce(a, topic, "new", NEW, start=OLD)
        wait_for(lambda: bool(_events(config, TopicRecreated)), "the topic_recreated event", timeout_s=60)
        wait_for(lambda: min(_ends(b, remote)) >= OLD + NEW, "the source copied again", timeout_s=120)
    finally:
        replicator.stop()
        replicator.wait(timeout=60)
    (said,) = _events(config, TopicRecreated)
    assert (said.side, said.policy, said.noticed) == ("target", "recopy", "running")
    for p, keys in enumerate(_on_target(b, remote)):
        whole = _whole(p)
        assert keys[-len(whole) :] == whole  # the recopy: every record once, in order, last
        assert set(keys[: -len(whole)]) <= set(whole[OLD:])  # before it, only new records copied before the check
    _planned_exactly(config, kafka_clusters, topic, unique_topic("rt-again-app"), 700)


def test_copies_recovered_before_a_remote_topic_was_recreated_stay_in_its_old_life(kafka_clusters, unique_topic):
    """Seed 197 of the soak: a takeover's tail recovery matched a killed process's copies in the remote
    topic, which was deleted later; the recovered syncs carried no topic ids, so a reader that met them
    after the re-creation's event (the state topic's partitions interleave processes' events) put
    them into the recopied topic's mapping, where their offsets are other records' (198 offsets of
    one partition translated off). Recovered syncs now carry the ids of the topics they were read
    from. The old remote topic starts with foreign records, so its copies' offsets differ from the
    new life's: a misplaced sync would show."""
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic = unique_topic("rt-recovered")
    remote = f"A.{topic}"
    ensure_topic(a, topic, PARTITIONS)
    ensure_topic(b, remote, PARTITIONS)
    foreign = Producer({"bootstrap.servers": b})
    for p in range(PARTITIONS):
        for i in range(37):
            foreign.produce(remote, key=f"foreign-{p}-{i}".encode(), value=b"f", partition=p)
    assert foreign.flush(30) == 0
    config = _config(kafka_clusters, unique_topic, topic)
    _produce(a, topic, "old", OLD)
    Replicator(config, status_port=None).run_until_caught_up()
    _produce(a, topic, "new", NEW, start=OLD)
    _copy_by_hand(a, b, topic, remote, OLD, OLD + 100)  # a killed process's copies: no sync
    ids = (_topic_id(a, topic), _topic_id(b, remote))
    Replicator(config, status_port=None).run_until_caught_up()  # recovers them, copies the rest
    recovered = [s for s in _events(config, OffsetSync) if s.reason == SyncReason.RECOVERED]
    assert recovered and {(s.source_topic_id, s.target_topic_id) for s in recovered} == {ids}
    _recreate(b, remote)
    Replicator(config, status_port=None).run_until_caught_up()  # says it, recopies from the log start
    events = read_state_log(config.cluster("B").client_config(), config.state_topic).events
    said_first = [e for e in events if isinstance(e, TopicRecreated)] + [
        e for e in events if not isinstance(e, TopicRecreated)
    ]
    for order in (events, said_first):
        index = MappingIndex()
        index.add(order)
        for p in range(PARTITIONS):
            copies = copies_by_content(read_partition(a, topic, p), read_partition(b, remote, p))
            assert copies == [(u, u) for u in range(OLD + NEW)]  # the recopy, once, in order
            segments = index.segments("A->B", topic, p)
            assert [(s.upstream_start, s.upstream_end, s.downstream_start) for s in segments] == [
                (0, OLD + NEW - 1, 0)
            ], p
    _planned_exactly(config, kafka_clusters, topic, unique_topic("rt-recovered-app"), OLD + 50)


def _topic_id(bootstrap: str, topic: str) -> str:
    (found,) = topic_ids(AdminClient({"bootstrap.servers": bootstrap}), [topic]).values()
    return found


def _copy_by_hand(a: str, b: str, topic: str, remote: str, start: int, stop: int) -> None:
    """A's records [start, stop) of each partition written to ``remote`` on B as a copy would be: no sync."""
    producer = Producer({"bootstrap.servers": b, "enable.idempotence": True})
    for p in range(PARTITIONS):
        for r in read_partition(a, topic, p)[start:stop]:
            producer.produce(remote, value=r.value, key=r.key, partition=p, timestamp=r.timestamp,
                             headers=list(r.headers))  # fmt: skip
    assert producer.flush(30) == 0
