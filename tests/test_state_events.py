"""Replication state as events, on real clusters: checkpoints against ground truth, group sync
decisions, heartbeats over two hops, watermarks, config snapshots and audit windows."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid

import pytest
import yaml
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorlake.groundtruth import GroundTruth, Rec, read_partition, state_events
from mirrorlake.traffic import ensure_topic
from replicator.client.group_offsets import committed_offsets
from replicator.client.translation import (
    checkpoint_topics,
    heartbeat_topics,
    replication_hops,
    translate_offsets,
    upstream_clusters,
)
from replicator.events import AuditWindow, ConfigSnapshot, GroupSync, Heartbeat, Watermark
from replicator.flow.runtime import Replicator
from replicator.tasks.watermarks import partition_watermarks
from tests.waiting import wait_for

pytestmark = pytest.mark.kafka


def _commit(bootstrap: str, group: str, offsets: list[tuple[str, int, int]]) -> None:
    """Commit for an inactive group, retried while a fresh cluster still loads its offsets topic."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tps = [TopicPartition(t, p, o) for t, p, o in offsets]

    def committed() -> bool:
        try:
            done = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)])[group]
            return all(tp.error is None for tp in done.result(timeout=30).topic_partitions)
        except (KafkaException, TimeoutError):
            return (
                False  # NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS; a fresh cluster under load: no answer in 30 s
            )

    wait_for(committed, f"offsets of {group} committed")


def _produce(bootstrap: str, topic: str, records: list[tuple[int, bytes, bytes]]) -> None:
    """(partition, key, value) records, in order, each with a distinct timestamp."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    base = int(time.time() * 1000) - 100_000  # recent: old timestamps fall to time-based retention
    for i, (partition, key, value) in enumerate(records):
        producer.produce(topic, value, key, partition, timestamp=base + i, headers=[("i", str(i).encode())])
    producer.flush(30)


def _transactions(bootstrap: str, topic: str, partitions: int, tag: str) -> None:
    """Committed and aborted transactions: markers and aborted records leave gaps in the offsets."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{tag}"})
    producer.init_transactions(30)
    for n in range(6):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, f"tx-{tag}-{n}-{i}".encode(), f"tx-{n}-{i}".encode(), (n + i) % partitions)
        producer.flush(30)
        (producer.commit_transaction if n % 3 != 1 else producer.abort_transaction)(30)


def _copies(source: list[Rec], target: list[Rec]) -> list[tuple[int, int]]:
    """(u, d) for every copy, matching records by key and value (keys repeat in a compacted topic)."""
    by_content = {(r.key, r.value): r.offset for r in source}
    return [(by_content[(r.key, r.value)], r.offset) for r in target if (r.key, r.value) in by_content]


def _hb() -> str:
    return f"heartbeats-{uuid.uuid4().hex[:8]}"  # this test's own: other tests' flows share the clusters


def test_checkpoints_equal_ground_truth_with_gaps_compaction_and_a_replay(kafka_clusters, unique_topic):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    gapped, compacted = unique_topic("gapped"), unique_topic("compacted")
    ensure_topic(a, gapped, 2)
    ensure_topic(
        a,
        compacted,
        1,
        {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01"},
    )
    _produce(a, gapped, [(i % 2, f"k{i}".encode(), f"v{i}".encode()) for i in range(300)])
    _transactions(a, gapped, 2, gapped[-8:])
    _produce(a, gapped, [(i % 2, f"k{i}".encode(), f"v{i}".encode()) for i in range(300, 500)])
    _produce(a, compacted, [(0, f"k{i % 20}".encode(), f"v{i}".encode()) for i in range(200)])
    wait_for(
        lambda: _produce(a, compacted, [(0, b"roll", b"roll")]) or len(read_partition(a, compacted, 0)) < 150,
        "the log cleaner to compact the topic",
        timeout_s=120,
        every_s=2,
    )

    # groups committed at every kind of offset: 0, inside, on gaps (markers/aborted), the end
    src = {tp: read_partition(a, *tp) for tp in [(gapped, 0), (gapped, 1), (compacted, 0)]}
    groups: dict[str, list[tuple[str, int, int]]] = {}
    for tp, records in src.items():
        present = [r.offset for r in records]
        missing = sorted(set(range(present[0], present[-1])) - set(present))
        candidates = [
            0,
            present[len(present) // 3],
            present[-1],
            present[-1] + 1,
            *missing[:: max(1, len(missing) // 6)],
        ]
        for i, c in enumerate(candidates):
            groups.setdefault(f"cp-{tp[0][-6:]}-{i}", []).append((*tp, c))
    for group, offsets in groups.items():
        _commit(a, group, offsets)

    config = kafka_clusters.config(
        flows=[{"source": "A", "target": "B", "topics": [gapped, compacted], "audit": False}],
        heartbeats_topic=_hb(),
    )
    Replicator(config, status_port=None).run_until_caught_up()
    # an at-least-once replay: the flow's position goes back, the range is copied again further on
    _commit(a, "mirrorlake.A->B", [(gapped, 0, 40), (gapped, 1, 60)])
    stats = Replicator(config, status_port=None).run_until_caught_up()
    assert stats["A->B"].records > 0

    for tp in src:
        source = read_partition(a, *tp)
        target = read_partition(b, f"A.{tp[0]}", tp[1])
        truth = GroundTruth(_copies(source, target))
        for group, offsets in groups.items():
            for topic, partition, c in offsets:
                if (topic, partition) != tp:
                    continue
                checkpoints = translate_offsets(config, "A->B", group)
                got = checkpoints[(f"A.{topic}", partition)]
                assert (got.upstream_offset, got.downstream_offset) == (c, truth.translate(c)), (group, tp, got)
                assert got.error_bound == 0


def test_group_sync_decisions_and_offsets_renamed_back(kafka_clusters, unique_topic):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic, empty, back = unique_topic("gs"), unique_topic("gs-empty"), unique_topic("gs-back")
    for t in (topic, empty):
        ensure_topic(a, t, 1)
    ensure_topic(b, back, 1)
    ensure_topic(b, f"A.{topic}", 1)
    _produce(a, topic, [(0, f"k{i}".encode(), b"v") for i in range(50)])
    _produce(b, back, [(0, f"b{i}".encode(), b"v") for i in range(30)])
    tag = topic[-6:]
    inactive, active, rewind, nomap, renamed = (f"{g}-{tag}" for g in ("inactive", "active", "rewind", "nomap", "ren"))
    _commit(a, inactive, [(topic, 0, 30)])
    _commit(a, active, [(topic, 0, 20)])
    _commit(a, rewind, [(topic, 0, 10)])
    _commit(a, nomap, [(empty, 0, 0)])
    _commit(b, rewind, [(f"A.{topic}", 0, 45)])  # the group already ran further on the target

    stop = threading.Event()
    joined = threading.Event()

    def member_on_target() -> None:
        consumer = Consumer({"bootstrap.servers": b, "group.id": active, "enable.auto.commit": False})
        consumer.subscribe([f"A.{topic}"], on_assign=lambda *_: joined.set())
        while not stop.is_set():
            consumer.poll(0.2)
        consumer.close()

    member = threading.Thread(target=member_on_target)
    member.start()
    try:
        wait_for(joined.is_set, "a member of the active group on the target")
        hb = _hb()
        flows = [
            {"source": "B", "target": "A", "topics": [back], "audit": False},
            {"source": "A", "target": "B", "topics": [topic, empty], "audit": False, "sync_group_offsets": True},
        ]
        config = kafka_clusters.config(flows=flows, heartbeats_topic=hb)
        Replicator(config, flows=["B->A"], status_port=None).run_until_caught_up()
        _commit(a, renamed, [(f"B.{back}", 0, 12)])  # a consumer of the replica on A
        Replicator(config, flows=["A->B"], status_port=None).run_until_caught_up()
    finally:
        stop.set()
        member.join()

    on_b = {
        g: {(o.topic, o.partition): o.offset for o in committed_offsets({"bootstrap.servers": b}, g)}
        for g in (inactive, active, rewind, renamed)
    }
    assert on_b[inactive] == {(f"A.{topic}", 0): 30}
    assert on_b[rewind] == {(f"A.{topic}", 0): 45}  # never moved backwards
    assert on_b[active] == {}  # a running consumer owns its position
    assert on_b[renamed] == {(back, 0): 12}  # B.<topic> on A is <topic> on B

    decisions = {
        e.group: e for e in state_events(b, "mirrorlake.events") if isinstance(e, GroupSync) and e.group.endswith(tag)
    }
    assert decisions[inactive].decision == "synced" and decisions[inactive].target_offset_after == 30
    assert decisions[active].decision == "skipped_active_on_target"
    assert decisions[rewind].decision == "skipped_rewind" and decisions[rewind].target_offset_before == 45
    assert decisions[nomap].decision == "skipped_no_mapping"
    assert decisions[renamed].decision == "synced" and decisions[renamed].target_topic == back
    checkpoint = translate_offsets(config, "A->B", renamed)[(back, 0)]
    assert checkpoint.method.startswith("reverse_") and checkpoint.downstream_offset == 12


def test_heartbeats_travel_two_hops_and_give_the_topology(kafka_clusters):
    hb = _hb()
    nothing = [f"no-data-{uuid.uuid4().hex[:6]}"]  # only the heartbeats travel
    flow = {"topics": nothing, "emit_heartbeats_interval_seconds": 0.2, "audit": False}
    config = kafka_clusters.config(
        flows=[{"source": "A", "target": "B", **flow}, {"source": "B", "target": "C", **flow}],
        heartbeats_topic=hb,
    )
    replicator = Replicator(config, status_port=None)
    replicator.start()

    def paths(alias: str) -> set[tuple[str, ...]]:
        return {
            e.hop_path
            for e in state_events(kafka_clusters.bootstrap(alias), "mirrorlake.events")
            if isinstance(e, Heartbeat) and e.topic and e.topic.endswith(hb)
        }

    try:
        wait_for(lambda: {("A", "B", "C"), ("B", "C")} <= paths("C"), "heartbeats from A and B on C", timeout_s=120)
        wait_for(lambda: ("A", "B") in paths("B"), "heartbeats from A on B")
    finally:
        replicator.stop()
        replicator.wait()
    beats = [
        e
        for e in state_events(kafka_clusters.bootstrap("C"), "mirrorlake.events")
        if isinstance(e, Heartbeat) and e.topic and e.topic.endswith(hb)
    ]
    assert all(e.received_at_ms is not None and e.received_at_ms >= e.origin_timestamp_ms for e in beats)
    assert {e.topic for e in beats if e.hop_path == ("A", "B", "C")} == {f"B.A.{hb}"}
    assert replication_hops(config, "C", "A") == 2
    assert replication_hops(config, "C", "B") == 1
    assert replication_hops(config, "A", "C") == -1
    assert {"A", "B"} <= upstream_clusters(config, "C")
    assert {f"B.{hb}", f"B.A.{hb}"} <= set(heartbeat_topics(config, "C"))
    assert "mirrorlake.events" in checkpoint_topics(config, "C")


def test_watermarks_snapshots_and_audits_agree_with_the_topics(kafka_clusters, unique_topic):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic, altered = unique_topic("audited"), unique_topic("altered")
    ensure_topic(a, topic, 2, {"retention.ms": "86400000"})
    ensure_topic(a, altered, 1)
    _produce(a, topic, [(i % 2, f"k{i}".encode(), f"v{i}".encode()) for i in range(200)])
    _transactions(a, topic, 2, topic[-8:])
    _produce(a, topic, [(i % 2, f"k{i}".encode(), f"v{i}".encode()) for i in range(200, 400)])
    _produce(a, altered, [(0, f"k{i}".encode(), f"v{i}".encode()) for i in range(20)])
    flow = {"source": "A", "target": "B", "topics": [topic], "audit_window_records": 50}
    config = kafka_clusters.config(flows=[flow], heartbeats_topic=_hb())
    Replicator(config, status_port=None).run_until_caught_up()

    events = state_events(b, "mirrorlake.events")
    marks = {(e.side, e.topic, e.partition): e for e in events if isinstance(e, Watermark) and e.source_topic == topic}
    for side, name, bootstrap in (("source", topic, a), ("target", f"A.{topic}", b)):
        now = partition_watermarks(AdminClient({"bootstrap.servers": bootstrap}), [(name, 0), (name, 1)])
        for p in (0, 1):
            e = marks[(side, name, p)]
            assert (e.log_start_offset, e.log_end_offset, e.max_timestamp_ms) == now[(name, p)][:3]

    snaps = {e.side: e for e in events if isinstance(e, ConfigSnapshot) and e.source_topic == topic}
    assert snaps["source"].exists and snaps["target"].exists and snaps["target"].topic == f"A.{topic}"
    assert snaps["source"].partitions == snaps["target"].partitions == 2
    assert snaps["source"].configs["retention.ms"] == snaps["target"].configs["retention.ms"] == "86400000"
    assert snaps["source"].config_sources["retention.ms"] == "DYNAMIC_TOPIC_CONFIG"
    assert "segment.bytes" in snaps["target"].configs  # a broker default, seen as effective config

    windows = [e for e in events if isinstance(e, AuditWindow) and e.source_topic == topic]
    for p in (0, 1):
        lso = marks[("source", topic, p)].log_end_offset
        by_side = {
            s: {e.window_start: e for e in windows if e.side == s and e.partition == p} for s in ("source", "target")
        }
        assert sorted(by_side["source"]) == list(range(0, lso // 50 * 50, 50))
        for start, src in by_side["source"].items():
            tgt = by_side["target"][start]
            assert (tgt.record_count, tgt.checksum) == (src.record_count, src.checksum), (p, start)
        expected = len([r for r in read_partition(a, topic, p) if r.offset < lso // 50 * 50])
        assert sum(w.record_count for w in by_side["source"].values()) == expected

    # a record altered on the target: copy without audits, rewrite the target, then audit
    flow2 = {"source": "A", "target": "B", "topics": [altered], "audit": False}
    Replicator(kafka_clusters.config(flows=[flow2], heartbeats_topic=_hb()), status_port=None).run_until_caught_up()
    remote = f"A.{altered}"
    admin_b = AdminClient({"bootstrap.servers": b})
    admin_b.delete_topics([remote])[remote].result(timeout=30)
    wait_for(lambda: remote not in admin_b.list_topics(timeout=10).topics, "topic deletion")
    ensure_topic(b, remote, 1)
    rewrite = Producer({"bootstrap.servers": b})
    for r in read_partition(a, altered, 0):
        value = b"tampered" if r.offset == 7 else r.value
        rewrite.produce(remote, value, r.key, 0, timestamp=r.timestamp, headers=list(r.headers))
    rewrite.flush(30)
    path = kafka_clusters.work_dir / f"audit-{altered}.yaml"
    data = {
        "clusters": {x: {"bootstrap_servers": kafka_clusters.bootstrap(x)} for x in ("A", "B", "C")},
        "flows": [{**flow2, "audit": True, "audit_window_records": 10}],
        "heartbeats_topic": _hb(),
    }
    path.write_text(yaml.safe_dump(data))
    # audited without copying: a replicator would find the remote topic created again (a new topic id)
    # and copy the source into it again past the copies matched by content (on_remote_topic_recreated:
    # recopy), mending the altered record
    run = subprocess.run(
        [sys.executable, "-m", "mirrorlake.cli", "observe", "-c", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    audits = {
        (e.side, e.window_start): e
        for e in state_events(b, "mirrorlake.events")
        if isinstance(e, AuditWindow) and e.source_topic == altered
    }
    assert audits[("source", 0)].record_count == audits[("target", 0)].record_count == 10
    assert audits[("source", 0)].checksum != audits[("target", 0)].checksum  # offset 7 differs
    assert audits[("source", 10)].checksum == audits[("target", 10)].checksum


def test_translate_cli_prints_json_and_fails_clearly_for_an_unknown_group(kafka_clusters, unique_topic, tmp_path):
    a = kafka_clusters.bootstrap("A")
    topic = unique_topic("cli-translate")
    ensure_topic(a, topic, 1)
    _produce(a, topic, [(0, f"k{i}".encode(), b"v") for i in range(20)])
    group = f"cli-{topic[-6:]}"
    _commit(a, group, [(topic, 0, 15)])
    data = {
        "clusters": {x: {"bootstrap_servers": kafka_clusters.bootstrap(x)} for x in ("A", "B", "C")},
        "flows": [{"source": "A", "target": "B", "topics": [topic], "audit": False}],
        "heartbeats_topic": _hb(),
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    base = [sys.executable, "-m", "mirrorlake.cli"]
    assert subprocess.run([*base, "replicate", str(path), "--until-caught-up"], timeout=300).returncode == 0
    ok = subprocess.run(
        [*base, "translate", "-c", str(path), "--flow", "A->B", "--group", group, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    (row,) = json.loads(ok.stdout)["offsets"]
    assert (row["topic"], row["partition"], row["offset"], row["method"]) == (f"A.{topic}", 0, 15, "exact")
    bad = subprocess.run(
        [*base, "translate", "-c", str(path), "--flow", "A->B", "--group", "no-such-group"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 20 and "no checkpoint of group 'no-such-group'" in bad.stderr
    assert "Traceback" not in bad.stderr
