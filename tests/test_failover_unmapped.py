"""Failover after a replicator died between its copies and their offset syncs (issue 39, item 0).

The copies such a process leaves on the target have no mapping row. A plan that ignored them
resumed a group committed past the last mapped copy right after it and said "re-read 0", while a
consumer resuming there re-read every one of them. Now the plan matches them to the source by
content when it answers, and presumes them copies of the next source offsets when it is down
(``replicator.failover.unmapped``); every figure is held to what the clusters hold, by content.

The orphans are made by hand, deterministically (as ``tests/test_failback_orphans.py`` does): after
a caught-up run, X's next records are written to B's ``X.<topic>`` as the replicator would have
copied them, with no offset sync, and the watermark observed before them says they are
unreplicated; later records reach only X. Per partition: 0-49 mapped, 50-149 orphans, 150-199 only
on X. Three groups: one committed past every orphan (the issue's case), one among them, one among
the mapped copies. The source X is a cluster of this module's own, killed with SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
import yaml
from click.testing import CliRunner
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorlake.cli import cli
from mirrorlake.groundtruth import Rec, read_partition, resume_cost
from mirrorlake.traffic import ensure_topic
from replicator.config import parse_config
from replicator.errors import TranslationError
from replicator.events import RecordsLostBeforeCopy
from replicator.failover import apply_failover, plan_failover
from replicator.failover.state import read_flow_state
from replicator.flow.runtime import Replicator
from replicator.kafka.state_log import StateLog
from replicator.tasks.observe import observe_once
from tests.killable_source import Source, source_cluster  # noqa: F401 (the fixture ``source``: cluster X)
from tests.test_state_events import _commit
from tests.waiting import wait_for

pytestmark = pytest.mark.kafka
FLOW, PARTITIONS = "X->B", 2
MAPPED, ORPHANS, ONLY_ON_X = 50, 100, 50  # per partition, in this order
# one producer batch (20 records) per partition per fetch, one fetch per 500 ms: about 80 records/s
SLOW_FETCH = {"max.partition.fetch.bytes": 1000, "fetch.min.bytes": 100_000_000, "fetch.wait.max.ms": 500}
BACKLOG = 20_000  # per partition


def _produce(bootstrap: str, topic: str, prefix: str, per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(per_partition * PARTITIONS):
        producer.produce(topic, value=b"v" * (i % 40), key=f"{prefix}-{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def _copy_by_hand(x: str, b: str, topic: str, start: int, stop: int) -> None:
    """X's records [start, stop) of each partition written to B's remote topic as a copy would be: no sync."""
    producer = Producer({"bootstrap.servers": b, "enable.idempotence": True})
    for p in range(PARTITIONS):
        for r in read_partition(x, topic, p)[start:stop]:
            producer.produce(f"X.{topic}", value=r.value, key=r.key, partition=p, timestamp=r.timestamp,
                             headers=list(r.headers))  # fmt: skip
    assert producer.flush(30) == 0


def _mapped_then_more(x: str, b: str, topic: str, state_topic: str, more: int):
    """A flow X->B that copied ``MAPPED`` records per partition (with syncs), then ``more`` on X only."""
    ensure_topic(x, topic, PARTITIONS)
    config = parse_config(
        {
            "clusters": {"X": {"bootstrap_servers": x}, "B": {"bootstrap_servers": b}},
            "flows": [{"source": "X", "target": "B", "topics": [topic], "audit": False, "emit_heartbeats": False}],
            "state_topic": state_topic,
            "replicator_id": "unmapped-test",
        },
        source="test_failover_unmapped",
    )
    _produce(x, topic, "mapped", MAPPED)
    Replicator(config, status_port=None).run_until_caught_up()
    _produce(x, topic, "late", more)
    return config


def _truth(on_x: list[Rec], on_b: list[Rec], committed: int, resume: int) -> tuple[int, int]:
    """(lost, re-read) of resuming at ``resume`` for a group that committed ``committed``, by content."""
    cost = resume_cost(on_x, on_b, committed, resume)
    return cost.lost, cost.reread


def _resumed_reads(b: str, group: str, topic: str, partition: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": b, "group.id": group, "enable.auto.commit": False})
    try:
        (tp,) = consumer.committed([TopicPartition(topic, partition)], timeout=30)
        return [r.key for r in read_partition(b, topic, partition) if r.offset >= tp.offset]
    finally:
        consumer.close()


def test_a_plan_accounts_for_a_killed_replicator_s_copies_with_the_source_down_and_up(
    source: Source, kafka_clusters, unique_topic
):
    source.restart()
    x, b = source.bootstrap, kafka_clusters.bootstrap("B")
    topic = unique_topic("unmapped")
    ahead, among, behind, later = (unique_topic(f"unmapped-{n}") for n in ("ahead", "among", "behind", "later"))
    committed = {ahead: 180, among: 100, behind: 20, later: 120}
    config = _mapped_then_more(x, b, topic, unique_topic("mirrorlake.unmapped"), ORPHANS + ONLY_ON_X)
    for group in (ahead, among, behind):
        _commit(x, group, [(topic, p, committed[group]) for p in range(PARTITIONS)])
    assert observe_once(config) == {FLOW: {}}  # checkpoints, and a watermark: 150 per partition unreplicated
    _copy_by_hand(x, b, topic, MAPPED, MAPPED + ORPHANS)
    on_x = {p: read_partition(x, topic, p) for p in range(PARTITIONS)}
    on_b = {p: read_partition(b, f"X.{topic}", p) for p in range(PARTITIONS)}
    assert [len(on_b[p]) for p in range(PARTITIONS)] == [MAPPED + ORPHANS] * PARTITIONS
    source.kill()

    # the source down: the orphans are presumed copies of the next source offsets (true here)
    plan = plan_failover(config, FLOW, groups=f"{ahead}|{among}|{behind}", stale_after_s=0)
    methods = {ahead: "after_presumed_copies", among: "presumed_copy", behind: "exact"}
    expected_offset = {ahead: MAPPED + ORPHANS, among: committed[among], behind: committed[behind]}
    for g in plan.groups:
        for row in g.partitions:
            truth = _truth(on_x[row.partition], on_b[row.partition], committed[g.group], row.target_offset)
            assert (row.records_lost, row.records_reread) == truth == (0, 0), (g.group, row)
            assert (row.target_offset, row.method) == (expected_offset[g.group], methods[g.group]), row
            assert (row.unmapped_copies, row.copies_presumed) == (ORPHANS, True)
            assert row.records_unreplicated == MAPPED + ORPHANS + ONLY_ON_X - max(committed[g.group], 150)
    for risk in (r for r in plan.partitions if r.source_topic == topic):
        never = [r for r in on_x[risk.partition] if r.key not in {c.key for c in on_b[risk.partition]}]
        assert risk.records == len(never) == ONLY_ON_X, risk  # the watermark's 150, less the orphans
        assert (risk.unmapped_copies, risk.copies_presumed, risk.copied_since_observed) == (ORPHANS, True, ORPHANS)

    result = apply_failover(config, FLOW, groups=f"{ahead}|{among}", stale_after_s=0)
    assert result.event is not None and (result.event.records_lost, result.event.records_reread) == (0, 0)
    for group in (ahead, among):
        for p in range(PARTITIONS):  # a consumer resuming where apply put it: exactly the records >= c
            expected = [r.key for r in on_x[p] if r.offset >= committed[group] and r.offset < MAPPED + ORPHANS]
            assert _resumed_reads(b, group, f"X.{topic}", p) == expected, (group, p)
    assert max(s.upstream_end for s in read_flow_state(config, FLOW).index.segments(FLOW, topic, 0)) == MAPPED - 1

    # the source back: the orphans are matched by content, and apply publishes their syncs
    source.restart()
    _commit(x, later, [(topic, p, committed[later]) for p in range(PARTITIONS)])
    assert observe_once(config) == {FLOW: {}}
    (matched,) = plan_failover(config, FLOW, groups=later, stale_after_s=0).groups
    for row in matched.partitions:
        assert (row.target_offset, row.method, row.copies_presumed) == (committed[later], "exact", False), row
        assert (row.records_lost, row.records_reread, row.unmapped_copies) == (0, 0, ORPHANS)
    apply_failover(config, FLOW, groups=later, stale_after_s=0)
    state = read_flow_state(config, FLOW)
    for p in range(PARTITIONS):
        segments = state.index.segments(FLOW, topic, p)
        assert max(s.upstream_end for s in segments) == MAPPED + ORPHANS - 1  # the recovered syncs, durable
        assert _resumed_reads(b, later, f"X.{topic}", p) == [
            r.key for r in on_x[p] if committed[later] <= r.offset < MAPPED + ORPHANS
        ]


def test_the_issue_s_case_a_lagging_replicator_and_its_source_killed_together(
    source: Source, kafka_clusters, unique_topic, tmp_path
):
    """The issue's own steps: ``mirrorlake replicate`` copies far behind the source, a group committed
    at the source's end is checkpointed, and the source's broker and the replicator are SIGKILLed
    together. The plan (source down) and a consumer resuming where ``apply`` put the group agree,
    record by record. The flow is slowed by its fetch settings only (``SLOW_FETCH``)."""
    source.restart()
    x, b = source.bootstrap, kafka_clusters.bootstrap("B")
    topic, group = unique_topic("crash"), unique_topic("crash-app")
    ensure_topic(x, topic, PARTITIONS)
    producer = Producer({"bootstrap.servers": x, "enable.idempotence": True, "linger.ms": 5, "batch.num.messages": 20})
    for i in range(BACKLOG * PARTITIONS):
        producer.produce(topic, value=b"v" * 100, key=f"backlog-{i}".encode(), partition=i % PARTITIONS)
        producer.poll(0)
    assert producer.flush(60) == 0
    del producer  # its connections to X would outlive X's broker
    ends = {p: BACKLOG for p in range(PARTITIONS)}
    _commit(x, group, [(topic, p, e) for p, e in ends.items()])  # far ahead of the flow about to start
    data = {
        "clusters": {"X": {"bootstrap_servers": x, "client": SLOW_FETCH}, "B": {"bootstrap_servers": b}},
        # a sync at each partition's first copy and hardly ever after: whenever the kill comes, the copies
        # since the first are the killed replicator's unmapped ones
        "flows": [{"source": "X", "target": "B", "topics": [topic], "groups": [group], "audit": False,
                   "emit_checkpoints_interval_seconds": 1, "watermarks_interval_seconds": 1,
                   "offset_lag_max": 1_000_000, "sync_interval_seconds": 3600}],
        "state_topic": unique_topic("mirrorlake.crash"),
        "heartbeats_topic": unique_topic("heartbeats"),
    }  # fmt: skip
    path = tmp_path / "crash.yaml"
    path.write_text(yaml.safe_dump(data))
    config = parse_config(data, source="test_failover_unmapped")
    child = subprocess.Popen([sys.executable, "-m", "mirrorlake.cli", "replicate", str(path)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:

        def checkpointed() -> bool:
            found = {c.partition: c.upstream_offset for c in read_flow_state(config, FLOW).checkpoints.values()}
            return found == ends

        wait_for(checkpointed, "the group's checkpoints")
        wait_for(lambda: all(_end(b, f"X.{topic}", p) > 1 for p in range(PARTITIONS)), "copies past the first")
        os.kill(child.pid, signal.SIGKILL)
        source.kill()
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
    plan = plan_failover(config, FLOW, groups=group, stale_after_s=0)
    result = apply_failover(config, FLOW, groups=group, stale_after_s=0)
    assert [g.outcome for g in result.groups] == ["moved"]
    source.restart()  # only to read the ground truth
    for row in plan.groups[0].partitions:
        p = row.partition
        on_x, on_b = read_partition(x, topic, p), read_partition(b, f"X.{topic}", p)
        assert 0 < len(on_b) < BACKLOG  # the flow was behind the group when it died
        assert _truth(on_x, on_b, ends[p], row.target_offset) == (row.records_lost, row.records_reread), row
        upstream = {r.key: r.offset for r in on_x}
        resumed = _resumed_reads(b, group, f"X.{topic}", p)
        assert sum(1 for k in resumed if upstream[k] < ends[p]) == row.records_reread == 0, row
        print(f"partition {p}: {row.unmapped_copies} unmapped copies, method {row.method}, resume {row.target_offset}")
    # the case the issue measured: a group past the killed flow's unmapped copies, which it never re-reads
    assert any(r.method == "after_presumed_copies" and r.unmapped_copies for r in plan.groups[0].partitions), plan


def _end(bootstrap: str, topic: str, partition: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-probe"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)[1]
    except KafkaException:
        return 0
    finally:
        consumer.close()


def test_with_the_source_down_presumed_copies_leave_out_records_lost_before_copy(
    source: Source, kafka_clusters, unique_topic
):
    """The 5-minute soak's case: records deleted on the source before their copy (the flow said so and
    copied on from the new log start), then the flow killed with copies past its last sync, then the
    source down. Presuming those copies hold the offsets right after the last mapped copy made the
    plan say "lost 0" for a group that had not read them (truth 2,747); they hold the offsets after
    the deleted range. Per partition: 0-49 mapped; 50-99 deleted before their copy (said); 100-149
    copied without a sync; 150-199 only on X. Groups at 120 (among the copies past the gap) and 60
    (inside the deleted range)."""
    source.restart()
    x, b = source.bootstrap, kafka_clusters.bootstrap("B")
    topic = unique_topic("lostgap")
    among, inside = unique_topic("lostgap-among"), unique_topic("lostgap-inside")
    committed = {among: 120, inside: 60}
    config = _mapped_then_more(x, b, topic, unique_topic("mirrorlake.lostgap"), 150)
    for group in (among, inside):
        _commit(x, group, [(topic, p, committed[group]) for p in range(PARTITIONS)])
    assert observe_once(config) == {FLOW: {}}
    _copy_by_hand(x, b, topic, 100, 150)  # the copies past the gap, at B offsets 50-99
    admin = AdminClient({"bootstrap.servers": x})
    deleted = [TopicPartition(topic, p, 100) for p in range(PARTITIONS)]
    for future in admin.delete_records(deleted).values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": b})
    state = StateLog(producer, config.state_topic)
    for p in range(PARTITIONS):  # what the flow says when its position (50) is below the log start (100)
        state.emit(RecordsLostBeforeCopy(
            flow=FLOW, replicator_id="lostgap-test", source_cluster="X", target_cluster="B", source_topic=topic,
            partition=p, from_offset=MAPPED, to_offset=100, records=100 - MAPPED, noticed="start",
        ))  # fmt: skip
    assert producer.flush(30) == 0
    on_x = {p: read_partition(x, topic, p) for p in range(PARTITIONS)}
    on_b = {p: read_partition(b, f"X.{topic}", p) for p in range(PARTITIONS)}
    source.kill()

    plan = plan_failover(config, FLOW, groups=f"{among}|{inside}", stale_after_s=0)
    expected = {among: ("presumed_copy", MAPPED + 20), inside: ("after_last_copy", MAPPED)}
    for g in plan.groups:
        for row in g.partitions:
            truth = _truth(on_x[row.partition], on_b[row.partition], committed[g.group], row.target_offset)
            assert (row.records_lost, row.records_reread) == truth == (0, 0), (g.group, row)
            assert (row.method, row.target_offset) == expected[g.group], (g.group, row)


def test_positions_an_application_stored_itself_translate_like_a_group_with_the_source_down(
    source: Source, kafka_clusters, unique_topic, tmp_path
):
    """``mirrorlake translate --offsets`` (issue 37 item 1): an application that keeps its own offsets
    (Spark's checkpoint, a database) hands them over in the shape its tools write, and gets the exact
    target positions and each one's cost, from the target alone, held to the clusters' contents: JSON
    lines from a file, then Kafka's CSV on stdin as a table (every shape parses alike:
    tests/test_stored_positions.py)."""
    source.restart()
    x, b = source.bootstrap, kafka_clusters.bootstrap("B")
    topic = unique_topic("stored")
    config = _mapped_then_more(x, b, topic, unique_topic("mirrorlake.stored"), ORPHANS + ONLY_ON_X)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json", exclude_none=True)))
    _copy_by_hand(x, b, topic, MAPPED, MAPPED + ORPHANS)  # a killed flow's copies past its last sync
    stored = {0: 20, 1: 120}  # among the mapped copies; among the unmapped ones
    on_x = {p: read_partition(x, topic, p) for p in range(PARTITIONS)}
    on_b = {p: read_partition(b, f"X.{topic}", p) for p in range(PARTITIONS)}
    source.kill()

    jsonl = "\n".join(json.dumps({"topic": topic, "partition": p, "offset": o}) for p, o in stored.items())
    csv = "".join(f"{topic},{p},{o}\n" for p, o in stored.items())  # the same positions (test_stored_positions)
    (tmp_path / "offsets.jsonl").write_text(jsonl)
    run = CliRunner().invoke(
        cli, ["translate", "-c", str(path), "--flow", FLOW, "--offsets", str(tmp_path / "offsets.jsonl"), "--format",
              "json"],
    )  # fmt: skip
    assert run.exit_code == 0, run.output
    rows = json.loads(run.output)["positions"]
    for row in rows:
        p = row["partition"]
        assert (row["source_topic"], row["committed_offset"], row["target_topic"]) == (topic, stored[p], f"X.{topic}")
        truth = _truth(on_x[p], on_b[p], stored[p], row["target_offset"])
        assert (row["records_lost"], row["records_reread"]) == truth == (0, 0), row
        assert on_b[p][row["target_offset"]].key == on_x[p][stored[p]].key  # the copy of the next record to read
    assert [r["method"] for r in rows] == ["exact", "presumed_copy"]

    table = CliRunner().invoke(cli, ["translate", "-c", str(path), "--flow", FLOW, "--offsets", "-"], input=csv)
    assert table.exit_code == 0, table.output
    assert f"X.{topic}" in table.output and "presume" in table.output  # the source is down: said under the table
    unknown = CliRunner().invoke(cli, ["translate", "-c", str(path), "--flow", FLOW, "--offsets", "-"],
                                 input="elsewhere,0,5\n")  # fmt: skip
    error = unknown.exception  # main() turns it into "error: ..." and its exit code
    assert isinstance(error, TranslationError) and error.exit_code == 20, unknown.output
    assert "has copied nothing of 'elsewhere'" in str(error)
