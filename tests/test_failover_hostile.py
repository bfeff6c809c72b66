"""Failover against odd and hostile input on real clusters (issue 33, items 1 and 2).

``--at``: every time resolves to a real position.
Kafka's ListOffsets reads -1 as "latest" and -2 as "earliest": a time before 1970 passed on as it is
sent every group to the log end (``committed 200, resume at 500, lost 300``). Here 3,000 records
stamped from three days ago are copied to B and a group committed 1,000 of them on A; each figure is
held to what B holds, read record by record (``mirrorlake.groundtruth``), and ``apply``'s written
offset to the group's committed offset read back from B.

Forged state: checkpoints of partition -1, of an illegal topic name, of a partition the target
lacks, or translated to -1, written into the flow's state topic beside the real ones. Each is
skipped with its coordinates in a warning (or, for a partition the target lacks, planned as
``no_target_partition``), never fed to Kafka, and the group's real partition is planned as before.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorlake.cli import main
from mirrorlake.groundtruth import read_partition
from mirrorlake.traffic import ensure_topic
from replicator.config import parse_config
from replicator.errors import FailoverError
from replicator.events import Checkpoint
from replicator.events.codec import encode
from replicator.events.validity import MAX_PARTITION
from replicator.failover import apply_failover, plan_failover
from replicator.failover.state import read_flow_state
from replicator.flow.runtime import Replicator
from replicator.kafka.state_log import StateLog
from replicator.tasks.base import StateView, TaskContext, task_producer
from replicator.tasks.group_sync import GroupOffsetSync
from tests.test_state_events import _commit
from tests.test_target_deletions import _produce_old

pytestmark = pytest.mark.kafka
RECORDS, COMMITTED = 3000, 1000
BEFORE_EVERY_RECORD = ["1969-12-31T23:59:59.999Z", "-2", "0001-01-01T00:00:00+14:00", "1970-01-01T00:00:00-12:00"]


def _cli(monkeypatch, *args: str) -> int:
    """``mirrorlake ARGS`` in-process; its exit code."""
    monkeypatch.setattr(sys, "argv", ["mirrorlake", *args])
    try:
        main()
    except SystemExit as done:
        return int(done.code or 0)
    return 0


def _target_offset(bootstrap: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        (tp,) = consumer.committed([TopicPartition(topic, 0)], timeout=30)
        return tp.offset
    finally:
        consumer.close()


def _cost(on_b, on_a, committed: int, resume: int) -> tuple[int, int]:
    """(lost, re-read) of resuming at ``resume`` on B, by content: the brief's definitions."""
    upstream = {r.key: r.offset for r in on_a}
    after = [upstream[r.key] for r in on_b if r.offset >= resume]
    copied = {upstream[r.key] for r in on_b}
    lost = len({u for u in copied if u >= committed} - set(after))
    return lost, sum(1 for u in after if u < committed)


@pytest.fixture
def copied(kafka_clusters, unique_topic, tmp_path: Path):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic, group = unique_topic("at"), unique_topic("at-app")
    ensure_topic(a, topic, 1)
    _produce_old(a, topic)
    _commit(a, group, [(topic, 0, COMMITTED)])
    data = {
        "clusters": {"A": {"bootstrap_servers": a}, "B": {"bootstrap_servers": b}},
        "flows": [{"source": "A", "target": "B", "topics": [topic], "groups": [group], "emit_heartbeats": False,
                   "audit": False}],
        "state_topic": unique_topic("mirrorlake.at"),
        "replicator_id": "at-test",
    }  # fmt: skip
    config = parse_config(data, source="test_failover_times")
    Replicator(config, status_port=None).run_until_caught_up()
    path = tmp_path / "at.yaml"
    path.write_text(yaml.safe_dump(data))
    return config, path, topic, group


def test_a_time_before_every_record_resumes_at_the_first_record_not_the_log_end(
    copied, kafka_clusters, capsys, monkeypatch
):
    config, path, topic, group = copied
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    on_a, on_b = read_partition(a, topic, 0), read_partition(b, f"A.{topic}", 0)
    assert len(on_b) == RECORDS and on_b[0].offset == 0
    first = (0, *_cost(on_b, on_a, COMMITTED, 0))  # resume at the first record: re-read what it read
    assert first == (0, 0, COMMITTED)
    for text in BEFORE_EVERY_RECORD:
        code = _cli(
            monkeypatch, "failover", "plan", "-c", str(path), "--flow", "A->B", "--at", text, "--format", "json"
        )
        assert code == 0, capsys.readouterr().err
        (row,) = json.loads(capsys.readouterr().out)["groups"][0]["partitions"]
        assert (row["target_offset"], row["records_lost"], row["records_reread"]) == first, (text, row)
        assert row["method"] == "timestamp"

    # a time in the future names no record: refused, exit 21, nothing looked up or written
    for text in ["9999-12-31T23:59:59Z", str(int(time.time() * 1000) + 3_600_000)]:
        code = _cli(monkeypatch, "failover", "apply", "-c", str(path), "--flow", "A->B", "--at", text)
        err = capsys.readouterr().err
        assert code == FailoverError.exit_code and "in the future" in err, err
    assert _target_offset(b, group, f"A.{topic}") < 0  # nothing committed on B yet

    # apply writes the first record, and a consumer of B resumes there
    result = apply_failover(config, "A->B", groups=group, at_ms=-1, stale_after_s=0)
    assert [g.outcome for g in result.groups] == ["moved"]
    assert result.event is not None and result.event.at_ms == -1 and result.event.records_reread == COMMITTED
    assert _target_offset(b, group, f"A.{topic}") == 0


def test_a_time_before_a_trimmed_target_s_first_record_resumes_at_its_log_start(copied, kafka_clusters):
    """delete-records moves B's log start to 500: a time before every record resumes at 500 (the plan
    used to refuse it), and the figures are what resuming there costs, by content."""
    config, _path, topic, group = copied
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    admin = AdminClient({"bootstrap.servers": b})
    (future,) = admin.delete_records([TopicPartition(f"A.{topic}", 0, 500)]).values()
    assert future.result(timeout=30).low_watermark == 500
    on_a, on_b = read_partition(a, topic, 0), read_partition(b, f"A.{topic}", 0)
    assert on_b[0].offset == 500
    (row,) = plan_failover(config, "A->B", groups=group, at_ms=-1, stale_after_s=0).groups[0].partitions
    assert (row.target_offset, row.records_lost, row.records_reread) == (500, *_cost(on_b, on_a, COMMITTED, 500))
    assert row.records_reread == COMMITTED - 500


def test_an_offset_kafka_would_read_as_a_sentinel_is_never_written(copied, kafka_clusters):
    """The guard where offsets are written: a checkpoint translated to -1 (latest) or -2 (earliest),
    however it arose, is decided ``skipped_invalid_offset``; the group's offset on B stays where it was."""
    config, _path, topic, group = copied
    b = kafka_clusters.bootstrap("B")
    flow = config.flow("A->B")
    state = read_flow_state(config, "A->B")
    (good,) = [c for (g, _t, _p), c in state.checkpoints.items() if g == group]
    conf = config.cluster("B").client_config()
    producer = task_producer(conf, "sentinel-test")
    ctx = TaskContext(
        config, flow, "sentinel-test", StateLog(producer, config.state_topic), dict, StateView(config, flow)
    )
    syncer = GroupOffsetSync(ctx, conf)
    assert [d[1] for d in syncer.sync(group, [good], [])] == ["synced"]
    for sentinel in (-1, -2):
        forged = Checkpoint(**{**_fields(good), "downstream_offset": sentinel, "event_id": ""})
        (decision,) = syncer.sync(group, [forged], [])
        assert decision[1] == "skipped_invalid_offset" and decision[3] == good.downstream_offset, decision
    fresh = f"{group}-fresh"  # no offset on B: no rewind rule stands between a sentinel and the commit
    forged = Checkpoint(**{**_fields(good), "group": fresh, "downstream_offset": -1, "event_id": ""})
    assert [d[1] for d in syncer.sync(fresh, [forged], [])] == ["skipped_invalid_offset"]
    assert producer.flush(30) == 0
    assert _target_offset(b, group, f"A.{topic}") == good.downstream_offset
    assert _target_offset(b, fresh, f"A.{topic}") < 0  # nothing committed


def _fields(event: Checkpoint) -> dict:
    return event.to_record()


def test_forged_checkpoints_are_skipped_by_coordinates_and_never_reach_kafka(copied, kafka_clusters, caplog):
    config, _path, topic, group = copied
    before = plan_failover(config, "A->B", groups=group, stale_after_s=0)
    (good,) = before.groups[0].partitions
    assert (good.target_offset, good.method, good.records_lost, good.records_reread) == (COMMITTED, "exact", 0, 0)
    (real,) = [c for (g, _t, _p), c in read_flow_state(config, "A->B").checkpoints.items() if g == group]
    forged = {
        "checkpoint.partition -1 is not a partition": {"partition": -1},
        "checkpoint.partition 2147483647 is not a partition": {"partition": 2**31 - 1},
        "checkpoint.source_topic is not a legal Kafka topic name": {"source_topic": "orders\nforged | row"},
        "checkpoint.downstream_offset -1 is negative": {"downstream_offset": -1},  # newer than the real one
    }
    absent = {"partition": MAX_PARTITION}  # a legal number the target has no partition for
    producer = Producer({"bootstrap.servers": kafka_clusters.bootstrap("B")})
    for changes in [*forged.values(), absent]:
        event = Checkpoint(**{**real.to_record(), **changes, "event_id": "", "emitted_at_ms": 0})
        producer.produce(config.state_topic, encode(event))
    assert producer.flush(30) == 0

    caplog.set_level(logging.WARNING)
    plan = plan_failover(config, "A->B", groups=group, stale_after_s=0)
    rows = {p.partition: p for p in plan.groups[0].partitions}
    assert sorted(rows) == [0, MAX_PARTITION]
    assert rows[0] == good  # the real partition, planned exactly as before the forgeries
    assert (rows[MAX_PARTITION].method, rows[MAX_PARTITION].target_offset) == ("no_target_partition", None)
    skipped = [r.getMessage() for r in caplog.records if "skipping invalid state event" in r.getMessage()]
    for why in forged:
        (line,) = [m for m in skipped if why in m]
        assert f"{config.state_topic}[" in line and "]@" in line, line  # its coordinates in the state topic
    timed = plan_failover(config, "A->B", groups=group, at_ms=-1, stale_after_s=0)
    assert {p.partition: p.method for p in timed.groups[0].partitions} == {
        0: "timestamp",
        MAX_PARTITION: "no_target_partition",
    }

    result = apply_failover(config, "A->B", groups=group, stale_after_s=0)
    assert result.groups[0].outcome == "moved"
    assert _target_offset(kafka_clusters.bootstrap("B"), group, f"A.{topic}") == COMMITTED
