"""Two replicator processes share a flow through the consumer group; metrics and health endpoints."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from bench.translation_vs_mm2 import commit_groups
from mirrorlake.groundtruth import read_partition
from mirrorlake.traffic import ensure_topic
from replicator.flow.runtime import Replicator
from tests.test_grafana_dashboard import strimzi_mm2_board
from tests.waiting import wait_for

pytestmark = pytest.mark.kafka
PARTITIONS = 6


def assigned(replicator: Replicator) -> set[str]:
    return set(replicator.health()["flows"]["A->B"]["assigned"])


def flow_stats(replicator: Replicator):
    return replicator._running[0].runner.stats


def leads(replicator: Replicator) -> str:
    return str(replicator.health()["flows"]["A->B"]["state_tasks"])


def test_two_processes_share_a_flow_and_rebalances_move_only_what_must_move(kafka_clusters, unique_topic):
    topic = unique_topic("scale")
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    ensure_topic(a, topic, PARTITIONS)
    stop = threading.Event()
    produced = []

    def produce() -> None:
        producer = Producer({"bootstrap.servers": a, "enable.idempotence": True, "linger.ms": 5})
        i = 0
        while not stop.is_set():
            producer.produce(topic, key=f"k{i}".encode(), value=b"v", partition=i % PARTITIONS)
            i += 1
            if i % 200 == 0:
                producer.poll(0)
                time.sleep(0.2)  # ~1,000 records/s: moves under traffic, without reading back a million
        producer.flush(30)
        produced.append(i)

    # no heartbeats: the flow then selects exactly ``topic``, and the partition counts below are exact
    config = kafka_clusters.config(flows=[{"source": "A", "target": "B", "topics": [topic], "emit_heartbeats": False}])
    first = Replicator(config.model_copy(update={"replicator_id": "one"}), status_port=None)
    second = Replicator(config.model_copy(update={"replicator_id": "two"}), status_port=None)
    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    first.start()
    try:
        wait_for(lambda: len(assigned(first)) == PARTITIONS, "the first process to own every partition")
        second.start()
        wait_for(lambda: len(assigned(first)) == len(assigned(second)) == PARTITIONS // 2, "an even split")
        assert assigned(first) | assigned(second) == {f"{topic}[{p}]" for p in range(PARTITIONS)}
        assert flow_stats(first).revoked == PARTITIONS // 2  # cooperative: it gave up only what moved
        wait_for(lambda: [leads(first), leads(second)].count("leading") == 1, "one process to run the state tasks")
        second.stop()
        second.wait(60)
        wait_for(lambda: len(assigned(first)) == PARTITIONS, "the first process to take everything back")
        assert flow_stats(first).revoked == PARTITIONS // 2  # taking partitions back revokes nothing
    finally:
        stop.set()
        writer.join(30)
        second.stop()
        first.stop()
        second.wait(60)
        first.wait(60)
    Replicator(config, status_port=None).run_until_caught_up()
    total = 0
    for p in range(PARTITIONS):
        records = read_partition(a, topic, p)
        total += len(records)
        assert {r.key for r in read_partition(b, f"A.{topic}", p)} == {r.key for r in records}  # nothing lost
    assert total == produced[0]


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_metrics_and_health_endpoints(kafka_clusters, unique_topic):
    topic = unique_topic("metrics")
    a = kafka_clusters.bootstrap("A")
    ensure_topic(a, topic, 2)
    producer = Producer({"bootstrap.servers": a})
    for i in range(500):
        producer.produce(topic, key=str(i).encode(), value=b"x" * 100, partition=i % 2)
    producer.flush(10)
    group = f"{topic}-app"
    commit_groups(a, topic, {group: {0: 100, 1: 100}})  # checkpointed: MM2's checkpoint latency
    flow = {
        "source": "A", "target": "B", "topics": [topic], "emit_heartbeats": False,  # exact counts below
        "groups": [group], "emit_checkpoints_interval_seconds": 1,
        "metric_names_formats": ["legacy", "new"],  # Kafka 4.3's both layouts (KIP-1280)
    }  # fmt: skip
    replicator = Replicator(kafka_clusters.config(flows=[flow]), status_port=0)
    replicator.start()
    try:
        port = replicator.status_port
        wait_for(lambda: replicator.health()["flows"]["A->B"]["records"] == 500, "the records to be copied")
        wait_for(lambda: 'mirrorlake_record_lag{flow="A->B"' in get(f"http://127.0.0.1:{port}/metrics")[1], "lag")
        wait_for(lambda: f'group="{group}"' in get(f"http://127.0.0.1:{port}/metrics")[1], "checkpoint latency")
        code, text = get(f"http://127.0.0.1:{port}/metrics")
        assert code == 200
        assert_mm2_metrics(text, topic, group)
        assert_connect_metrics(text, topic)
        assert 'mirrorlake_records_total{flow="A->B"} 500.0' in text
        assert 'mirrorlake_bytes_total{flow="A->B"}' in text
        assert 'mirrorlake_replication_latency_seconds_count{flow="A->B"}' in text
        assert "mirrorlake_record_age_seconds" in text
        code, body = get(f"http://127.0.0.1:{port}/health")
        health = json.loads(body)
        assert code == 200 and health["status"] == "ok"
        assert health["flows"]["A->B"]["state"] == "running"
        assert health["flows"]["A->B"]["state_tasks"] == "leading"
        assert health["flows"]["A->B"]["copy_path"] == "compiled"  # copy_engine auto, built here
        assert sorted(health["flows"]["A->B"]["assigned"]) == [f"{topic}[0]", f"{topic}[1]"]
        assert get(f"http://127.0.0.1:{port}/nope")[0] == 404
    finally:
        replicator.stop()
        replicator.wait(60)
    assert replicator.health()["status"] == "degraded"  # stopped flows are not healthy


def assert_connect_metrics(text: str, topic: str) -> None:
    """The Connect worker/task and Java client series an MM2 board charts, from the flow's own numbers."""
    samples = [s for family in text_string_to_metric_families(text) for s in family.samples]

    def values(name: str) -> list[tuple[dict[str, str], float]]:
        return [(s.labels, s.value) for s in samples if s.name == name]

    # this process leads the flow: its source and checkpoint connectors (heartbeats are off), one task each
    for name in ("kafka_connect_worker_connector_count", "kafka_connect_worker_task_count"):
        assert values(name) == [({}, 2.0)]
    for name in ("kafka_connect_coordinator_assigned_connectors", "kafka_connect_coordinator_assigned_tasks"):
        assert values(name) == [({"clientid": "connect-1"}, 2.0)]
    assert values("kafka_connect_worker_rebalance_rebalancing") == [({}, 0.0)]  # both partitions assigned
    task = {"connector": '"A->B.MirrorSourceConnector"', "task": "0"}
    [(labels, active)] = values("kafka_connect_source_task_source_record_active_count")
    assert labels == task and active >= 0
    [(labels, commit_ms)] = values("kafka_connect_connector_task_offset_commit_avg_time_ms")
    assert labels == task and commit_ms >= 0
    lag = {(s.labels["topic"], s.labels["partition"]): s.value for s in samples if s.name == "mirrorlake_record_lag"}
    records_lag = values("kafka_consumer_fetch_manager_records_lag")
    assert {(labels["topic"], labels["partition"]): v for labels, v in records_lag} == lag
    assert lag and all(t == topic for t, _p in lag)
    assert all(labels["clientid"].endswith('replication-consumer"') for labels, _ in records_lag)
    copied = next(s.value for s in samples if s.name == "mirrorlake_bytes_total")
    assert copied == sum(len(str(i)) + 100 for i in range(500))
    [(_, incoming)] = values("kafka_consumer_incoming_byte_total")
    [(labels, outgoing)] = values("kafka_producer_outgoing_byte_total")
    assert incoming >= copied and outgoing >= copied
    assert labels == {"clientid": '"connector-producer-A->B.MirrorSourceConnector-0"'}


def assert_mm2_metrics(text: str, topic: str, group: str) -> None:
    """Every MM2 series Strimzi's board queries is there, per partition, and the counts are the copies."""
    samples = [s for family in text_string_to_metric_families(text) for s in family.samples]
    names = {s.name for s in samples}
    wanted, _ = strimzi_mm2_board()
    assert not wanted - names, f"missing: {sorted(wanted - names)}"

    def value(attribute: str, partition: int) -> float:
        name = f"kafka_connect_mirror_mirrorsourceconnector_{attribute}"
        labels = {"source": "A", "target": "B", "topic": f"A.{topic}", "partition": str(partition)}
        return next(s.value for s in samples if s.name == name and s.labels == labels)

    for p in (0, 1):
        assert value("record_count", p) == 250  # records copied of the partition
        assert value("byte_count", p) == sum(len(str(i)) + 100 for i in range(p, 500, 2))  # key + value
        assert value("record_rate", p) > 0 and value("byte_rate", p) > 0
        assert value("record_age_ms_max", p) >= value("record_age_ms_min", p) >= 0
        assert value("replication_latency_ms_max", p) >= value("replication_latency_ms_min", p) >= 0
    latency = [s for s in samples if s.name.endswith("checkpoint_latency_ms_max") and s.labels["group"] == group]
    assert {s.labels["topic"] for s in latency} == {f"A.{topic}"} and all(s.value >= 0 for s in latency)
    assert_new_metric_names(samples)


def assert_new_metric_names(samples: list) -> None:
    """KIP-1280's layout (kafka.connect:type=plugins,connector=C,task=T,...): each legacy series again,
    with the connector and task; the counts equal."""
    legacy = {
        "kafka_connect_mirror_mirrorsourceconnector_": '"A->B.MirrorSourceConnector"',
        "kafka_connect_mirror_mirrorcheckpointconnector_": '"A->B.MirrorCheckpointConnector"',
    }
    by_key = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in samples}
    compared = 0
    for s in samples:
        prefix = next((p for p in legacy if s.name.startswith(p)), None)
        if prefix is None:
            continue
        labels = {"connector": legacy[prefix], "task": "0", **s.labels}
        key = ("kafka_connect_plugins_" + s.name.removeprefix(prefix), tuple(sorted(labels.items())))
        assert key in by_key, key
        if s.name.endswith("_count"):
            assert by_key[key] == s.value, key
            compared += 1
    assert compared == 4  # record_count and byte_count of both partitions
