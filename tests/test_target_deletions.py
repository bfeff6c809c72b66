"""Records that vanish from the target after they were copied count as lost (issue 10, item 8).

The issue's case: records stamped three days ago, copied into a target topic created with a
one-hour ``retention.ms`` (config sync off), are deleted there; the plan must count them as lost
and name the cause. The first test makes the deletion deterministic with ``delete-records``
(AdminClient.delete_records), which moves the target's log start past the copies exactly as
retention does; the second lets the broker's time retention do it (the local brokers check
retention every second: ``mirrorlake.localkafka``). The third is compaction on the target: the
cleaner removes copies from inside the log, which neither the log start nor the mapping shows;
the plan's figures are checked against what a consumer of the target really reads after ``apply``.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorlake.groundtruth import read_partition
from mirrorlake.traffic import ensure_topic
from replicator.client.failover_cost import DELETED_ON_TARGET
from replicator.client.present_copies import COMPACTED_ON_TARGET
from replicator.client.state_reader import read_state_log
from replicator.config import parse_config
from replicator.events import AuditWindow
from replicator.failover import apply_failover, plan_failover
from replicator.flow.runtime import Replicator
from replicator.tasks.observe import observe_once
from tests.test_state_events import _commit
from tests.waiting import wait_for

pytestmark = pytest.mark.kafka
RECORDS = 3000
COMMITTED = 1000
THREE_DAYS_MS = 3 * 24 * 3600 * 1000


def _produce_old(bootstrap: str, topic: str) -> None:
    stamp = int(time.time() * 1000) - THREE_DAYS_MS
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(topic, key=f"k{i}".encode(), value=b"v" * 50, partition=0, timestamp=stamp + i)
    assert producer.flush(30) == 0


def _old_records_copied(kafka_clusters, unique_topic, name: str, target_configs: dict[str, str], **flow_settings):
    """3,000 records stamped three days ago, a group that read 1,000 of them, a target topic
    created beforehand with ``target_configs``, config sync off; returns after the copy."""
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic, group = unique_topic(name), unique_topic(f"{name}-app")
    ensure_topic(a, topic, 1)
    ensure_topic(b, f"A.{topic}", 1, target_configs)
    _produce_old(a, topic)
    _commit(a, group, [(topic, 0, COMMITTED)])
    data = {
        "clusters": {"A": {"bootstrap_servers": a}, "B": {"bootstrap_servers": b}},
        "flows": [
            {"source": "A", "target": "B", "topics": [topic], "groups": [group], "emit_heartbeats": False,
             "sync_topic_configs": False, **flow_settings}
        ],
        "replicator_id": "vanish-test",
    }  # fmt: skip
    config = parse_config(data, source="test_target_deletions")
    Replicator(config, status_port=None).run_until_caught_up()
    return config, topic, group


def test_copies_deleted_from_the_target_are_lost_in_the_plan_with_their_cause(kafka_clusters, unique_topic):
    b = kafka_clusters.bootstrap("B")
    # the target keeps them (default retention) until delete-records moves its log start
    config, topic, group = _old_records_copied(kafka_clusters, unique_topic, "vanish", {})
    assert len(read_partition(b, f"A.{topic}", 0)) == RECORDS
    before = plan_failover(config, "A->B", groups=group, stale_after_s=0)
    (row,) = before.groups[0].partitions
    assert (row.records_lost, row.records_deleted_on_target, row.lost_cause) == (0, 0, None)

    admin = AdminClient({"bootstrap.servers": b})
    (future,) = admin.delete_records([TopicPartition(f"A.{topic}", 0, RECORDS)]).values()
    assert future.result(timeout=30).low_watermark == RECORDS  # the target's log start is past every copy
    assert read_partition(b, f"A.{topic}", 0) == []
    assert observe_once(config, ["A->B"]) == {"A->B": {}}  # a watermark of the target after the deletion

    plan = plan_failover(config, "A->B", groups=group, stale_after_s=0)
    (risk,) = [p for p in plan.partitions if p.source_topic == topic]  # flow A->B is shared by other tests
    assert risk.records == 0  # nothing is pending: the records were copied, then deleted
    assert (risk.target_log_start, risk.deleted_on_target) == (RECORDS, RECORDS)
    assert (risk.deleted_source_range, risk.deleted_target_range) == ((0, RECORDS - 1), (0, RECORDS - 1))
    (row,) = plan.groups[0].partitions
    # ground truth: a consumer of the target finds none of the records the group has not read
    assert (row.target_offset, row.method) == (RECORDS, "log_start")
    assert (row.records_lost, row.records_deleted_on_target) == (RECORDS - COMMITTED, RECORDS - COMMITTED)
    assert row.records_reread == 0 and row.lost_cause == DELETED_ON_TARGET


def _log_start(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "log-start-probe"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[0]
    finally:
        consumer.close()


def test_the_issue_s_case_old_records_expire_on_a_one_hour_target_and_count_as_lost(kafka_clusters, unique_topic):
    """No delete-records: the target's own one-hour time retention deletes the three-day-old copies."""
    b = kafka_clusters.bootstrap("B")
    one_hour = {"retention.ms": "3600000"}
    config, topic, group = _old_records_copied(kafka_clusters, unique_topic, "expire", one_hour)
    wait_for(lambda: _log_start(b, f"A.{topic}") == RECORDS, "the target's retention to delete the copies")
    assert read_partition(b, f"A.{topic}", 0) == []  # ground truth: a consumer of the target finds none
    assert observe_once(config, ["A->B"]) == {"A->B": {}}  # the target's watermark after the deletion

    plan = plan_failover(config, "A->B", groups=group, stale_after_s=0)
    (risk,) = [p for p in plan.partitions if p.source_topic == topic]
    assert (risk.records, risk.target_log_start, risk.deleted_on_target) == (0, RECORDS, RECORDS)
    (row,) = plan.groups[0].partitions
    assert (row.target_offset, row.method, row.records_reread) == (RECORDS, "log_start", 0)
    assert (row.records_lost, row.records_deleted_on_target) == (RECORDS - COMMITTED, RECORDS - COMMITTED)
    assert row.lost_cause == DELETED_ON_TARGET and "retention" in row.lost_cause


COMPACTED = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
             "min.compaction.lag.ms": "0"}  # fmt: skip


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_copies_compacted_away_on_the_target_are_lost_in_the_plan_and_for_a_consumer(
    kafka_clusters, unique_topic, exactly_once: bool
):
    """The 3,000 records (keys k0..k2999) copied into a compacted target (config sync off), then
    100 more whose keys k0..k49 come twice: the cleaner keeps the latest record of each key, so
    copies the group has not read (the first 50 of the 100) are gone from inside the target's log.
    The plan reads B, counts them as lost with the cause named, and a consumer of B resuming where
    ``apply`` put the group reads exactly the records the plan did not count as lost. Exactly-once
    copies (transaction markers between them, one at the end) read the same."""
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    config, topic, group = _old_records_copied(
        kafka_clusters, unique_topic, "compact", COMPACTED, exactly_once=exactly_once
    )
    producer = Producer({"bootstrap.servers": a, "enable.idempotence": True, "linger.ms": 5})
    for i in range(RECORDS, RECORDS + 100):
        producer.produce(topic, key=f"k{i % 50}".encode(), value=f"v{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    Replicator(config, status_port=None).run_until_caught_up()
    # records of new keys roll the target's segment (segment.ms 100): the copies above become cleanable
    for i in range(50):
        producer.produce(topic, key=f"late{i}".encode(), value=f"late{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    Replicator(config, status_port=None).run_until_caught_up()
    source, target_topic = read_partition(a, topic, 0), f"A.{topic}"
    keys = {r.key for r in source}
    wait_for(lambda: len(read_partition(b, target_topic, 0)) == len(keys), "the target's cleaner to compact the copies")

    plan = plan_failover(config, "A->B", groups=group, stale_after_s=0)
    (row,) = plan.groups[0].partitions
    (risk,) = [p for p in plan.partitions if p.source_topic == topic]
    held = {(r.key, r.value): r.offset for r in read_partition(b, target_topic, 0)}  # a copy -> its target offset
    # ground truth by content: the unread source records with no copy left at or after the resume point
    resume = row.target_offset if row.target_offset is not None else 0
    unread = [r for r in source if r.offset >= COMMITTED]
    lost = [r for r in unread if held.get((r.key, r.value), -1) < resume]
    read_before = {(r.key, r.value) for r in source if r.offset < COMMITTED}
    reread = [kv for kv, d in held.items() if d >= resume and kv in read_before]
    assert risk.records == 0 and risk.compacted_on_target == len(source) - len(held)
    assert (row.method, row.records_unreplicated) == ("exact", 0)
    assert (row.records_lost, row.records_reread, row.records_duplicated) == (len(lost), len(reread), 0)
    assert row.records_compacted_on_target == len(lost) == 50 and row.lost_cause == COMPACTED_ON_TARGET

    # the audit read window [0, 1000) on both sides before the cleaner ran; it reads it again now
    assert observe_once(config, ["A->B"]) == {"A->B": {}}
    audits = [e for e in read_state_log({"bootstrap.servers": b}, config.state_topic).events
              if isinstance(e, AuditWindow) and e.source_topic == topic and e.window_start == 0]  # fmt: skip
    latest = {e.side: e for e in sorted(audits, key=lambda e: e.emitted_at_ms)}
    in_window = sum(1 for r in source if r.offset < 1000 and (r.key, r.value) in held)
    assert (latest["source"].record_count, latest["target"].record_count) == (1000, in_window) and in_window < 1000

    applied = apply_failover(config, "A->B", groups=group, stale_after_s=0)
    assert applied.event is not None and applied.event.offsets[0].records_lost == len(lost)
    consumer = Consumer({"bootstrap.servers": b, "group.id": group, "enable.auto.commit": False,
                         "enable.partition.eof": True})  # fmt: skip
    consumer.subscribe([target_topic])
    seen: list[tuple[bytes | None, bytes | None] | None] = []
    try:
        while not seen or seen[-1] is not None:
            msg = consumer.poll(10)
            assert msg is not None, "the group's consumer on B got nothing"
            seen.append(None if msg.error() else (msg.key(), msg.value()))  # an error: the partition's end
    finally:
        consumer.close()
    # it reads the unread records the plan did not count as lost, and none it had read on A
    assert sorted(kv for kv in seen if kv is not None) == sorted((r.key, r.value) for r in unread if r not in lost)
