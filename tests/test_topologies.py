"""The five topologies from one config, under both policies, on three real clusters.

Each test uses its own uuid topic names; flows select them with a regex ending in that uuid, so
the shared clusters' other topics never interfere.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from mirrorlake.groundtruth import read_partition
from mirrorlake.traffic import ensure_topic
from replicator.client.provenance import PROVENANCE_HEADER, Provenance
from replicator.errors import ConfigError
from replicator.flow.runtime import Replicator

pytestmark = pytest.mark.kafka


def produce(bootstrap: str, topic: str, keys: list[str]) -> None:
    ensure_topic(bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, key in enumerate(keys):
        producer.produce(topic, key=key.encode(), value=b"v", partition=i % 2, headers=[("app", b"x")])
    producer.flush(30)


def keys_on(bootstrap: str, topic: str) -> list[str]:
    return sorted(r.key.decode() for p in range(2) for r in read_partition(bootstrap, topic, p))


def topics_on(bootstrap: str, suffix: str) -> set[str]:
    return {
        t for t in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics if t.endswith(suffix)
    }


def flows(*pairs: str, pattern: str) -> list[dict]:
    return [{"source": p[0], "target": p[-1], "topics": [pattern], "sync_interval_seconds": 0.2} for p in pairs]


def test_active_active_default_policy_never_loops(kafka_clusters, unique_topic):
    t = unique_topic("aa")
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    produce(a, t, [f"a{i}" for i in range(50)])
    produce(b, t, [f"b{i}" for i in range(30)])
    config = kafka_clusters.config(flows=flows("A->B", "B->A", pattern=f".*{t}"))
    for _ in range(2):  # a second round must find nothing new to copy
        stats = Replicator(config).run_until_caught_up()
    assert stats["A->B"].records == 0 and stats["B->A"].records == 0
    assert keys_on(b, f"A.{t}") == sorted(f"a{i}" for i in range(50))
    assert keys_on(a, f"B.{t}") == sorted(f"b{i}" for i in range(30))
    assert topics_on(a, t) == {t, f"B.{t}"} and topics_on(b, t) == {t, f"A.{t}"}  # no A.B.t, no B.A.t


def test_active_active_identity_policy_stops_loops_with_the_provenance_header(kafka_clusters, unique_topic):
    t = unique_topic("aai")
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    produce(a, t, [f"a{i}" for i in range(40)])
    produce(b, t, [f"b{i}" for i in range(20)])
    config = kafka_clusters.config(flows=flows("A->B", "B->A", pattern=t), replication_policy={"class": "identity"})
    first = Replicator(config).run_until_caught_up()
    assert (first["A->B"].records, first["B->A"].records) == (40, 20)
    second = Replicator(config).run_until_caught_up()
    assert second["A->B"].records == 0 and second["B->A"].records == 0
    assert second["A->B"].skipped_cycle == 20 and second["B->A"].skipped_cycle == 40
    everything = sorted([f"a{i}" for i in range(40)] + [f"b{i}" for i in range(20)])
    assert keys_on(a, t) == everything and keys_on(b, t) == everything  # each record exactly once
    copied = [r for p in range(2) for r in read_partition(b, t, p) if r.key.startswith(b"a")]
    assert all(Provenance.hops(list(r.headers)) == ["A"] for r in copied)
    assert all(("app", b"x") in r.headers for r in copied)


def test_identity_cycle_without_provenance_is_rejected(kafka_clusters):
    config = kafka_clusters.config(
        flows=flows("A->B", "B->C", "C->A", pattern="x"),
        replication_policy={"class": "identity"},
        provenance_header=False,
    )
    with pytest.raises(ConfigError, match="A -> B -> C -> A form a cycle"):
        Replicator(config)


def test_forwarding_chain_a_b_c(kafka_clusters, unique_topic):
    t = unique_topic("chain")
    a, c = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("C")
    produce(a, t, [f"k{i}" for i in range(25)])
    config = kafka_clusters.config(flows=flows("A->B", "B->C", pattern=f".*{t}"))
    Replicator(config, flows=["A->B"]).run_until_caught_up()
    Replicator(config, flows=["B->C"]).run_until_caught_up()
    assert keys_on(c, f"B.A.{t}") == sorted(f"k{i}" for i in range(25))


def test_forwarding_chain_identity_policy_records_each_hop(kafka_clusters, unique_topic):
    t = unique_topic("chaini")
    a, c = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("C")
    produce(a, t, [f"k{i}" for i in range(10)])
    config = kafka_clusters.config(flows=flows("A->B", "B->C", pattern=t), replication_policy={"class": "identity"})
    Replicator(config, flows=["A->B"]).run_until_caught_up()
    Replicator(config, flows=["B->C"]).run_until_caught_up()
    records = [r for p in range(2) for r in read_partition(c, t, p)]
    assert len(records) == 10
    assert all(Provenance.hops(list(r.headers)) == ["A", "B"] for r in records)
    assert all(sum(1 for h, _ in r.headers if h == PROVENANCE_HEADER) == 1 for r in records)


def test_aggregation_into_one_cluster(kafka_clusters, unique_topic):
    t = unique_topic("agg")
    a, b, c = (kafka_clusters.bootstrap(x) for x in "ABC")
    produce(a, t, ["a1", "a2"])
    produce(b, t, ["b1", "b2", "b3"])
    config = kafka_clusters.config(flows=flows("A->C", "B->C", pattern=t))
    Replicator(config).run_until_caught_up()
    assert keys_on(c, f"A.{t}") == ["a1", "a2"]
    assert keys_on(c, f"B.{t}") == ["b1", "b2", "b3"]


def test_fan_out_from_one_cluster(kafka_clusters, unique_topic):
    t = unique_topic("fan")
    a, b, c = (kafka_clusters.bootstrap(x) for x in "ABC")
    produce(c, t, [f"c{i}" for i in range(15)])
    config = kafka_clusters.config(flows=flows("C->A", "C->B", pattern=t))
    stats = Replicator(config).run_until_caught_up()
    assert stats["C->A"].records == stats["C->B"].records == 15
    assert keys_on(a, f"C.{t}") == keys_on(b, f"C.{t}") == sorted(f"c{i}" for i in range(15))


def test_clusters_option_runs_only_flows_targeting_that_cluster(kafka_clusters):
    config = kafka_clusters.config(flows=flows("A->B", "B->A", "A->C", pattern="x"))
    assert [f.name for f in Replicator(config, target_clusters=["B"]).flows] == ["A->B"]
    with pytest.raises(ConfigError, match="unknown cluster 'Z'"):
        Replicator(config, target_clusters=["Z"])


def test_mm2_properties_file_as_mm2_docs_write_it_runs_unchanged(kafka_clusters, unique_topic, tmp_path):
    """Kafka's own config/connect-mirror-maker.properties, only the hosts pointed at our clusters."""
    from pathlib import Path

    from replicator.config import load_config

    t = unique_topic("mm2file")
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    produce(a, t, [f"a{i}" for i in range(12)])
    produce(b, t, [f"b{i}" for i in range(7)])
    text = (Path(__file__).parent / "data" / "connect-mirror-maker.properties").read_text()
    text = text.replace("A_host1:9092, A_host2:9092, A_host3:9092", a).replace(
        "B_host1:9092, B_host2:9092, B_host3:9092", b
    )
    path = tmp_path / "connect-mirror-maker.properties"
    path.write_text(text)
    config = load_config(path)
    assert [f.name for f in config.enabled_flows()] == ["A->B", "B->A"]
    stats = Replicator(config).run_until_caught_up()
    assert stats["A->B"].records >= 12 and stats["B->A"].records >= 7  # `.*`: other tests' topics too
    assert keys_on(b, f"A.{t}") == sorted(f"a{i}" for i in range(12))
    assert keys_on(a, f"B.{t}") == sorted(f"b{i}" for i in range(7))
