"""A flow between two SASL_SSL clusters (TLS, SCRAM-SHA-512 and PLAIN, ACLs enforced) copies and checkpoints.

The two brokers are this module's own (``LocalBroker(sasl_users=...)``): TLS material made with
openssl in their cluster dirs, ``allow.everyone.if.no.acl.found=false``, ``admin`` the only super
user besides the controller listener. The flow runs as ``alice``, who holds only the ACLs granted
here; the source side authenticates with SCRAM-SHA-512 and the target side with PLAIN.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from mirrorlake.localkafka import LocalBroker, default_cache_root, resolve_kafka_jars
from replicator.client.state_reader import read_state_log
from replicator.config import LocalKafkaConfig, parse_config
from replicator.events import Checkpoint
from replicator.flow.outage import TRANSPORT_CODES
from replicator.flow.runtime import Replicator
from tests.conftest import find_free_port_pair
from tests.waiting import wait_for

pytestmark = pytest.mark.kafka
USERS = {"admin": f"admin-{uuid.uuid4().hex[:10]}", "alice": f"alice-{uuid.uuid4().hex[:10]}"}
RECORDS = 2000
ALLOW = AclPermissionType.ALLOW


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Iterator[dict[str, LocalBroker]]:
    lib_dir = resolve_kafka_jars(LocalKafkaConfig().version, default_cache_root())
    work = tmp_path_factory.mktemp("secured")
    taken: set[int] = set()
    brokers = {}
    for alias in ("S", "T"):
        port = find_free_port_pair(taken)
        taken |= {port, port + 1}
        brokers[alias] = LocalBroker(alias, port, work / alias, lib_dir, sasl_users=USERS)
    try:
        for broker in brokers.values():
            broker.start()
        for broker in brokers.values():
            broker.wait_ready(180)
            grant_alice(broker)
        yield brokers
    finally:
        for broker in brokers.values():
            broker.stop()


def grant_alice(broker: LocalBroker) -> None:
    """What a flow's principal needs on either side (topics, groups, transactional ids, cluster)."""
    admin = AdminClient(broker.client_config("admin", mechanism="PLAIN"))
    allow = [
        AclBinding(
            kind, name, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.ALL, AclPermissionType.ALLOW
        )
        for kind, name in (
            (ResourceType.TOPIC, "*"),
            (ResourceType.GROUP, "*"),
            (ResourceType.TRANSACTIONAL_ID, "*"),
            (ResourceType.BROKER, "kafka-cluster"),
        )
    ]
    for future in admin.create_acls(allow).values():
        future.result(timeout=30)


def committed(group: Consumer, topic: str) -> bool:
    try:
        group.commit(offsets=[TopicPartition(topic, 0, RECORDS // 2)], asynchronous=False)
    except KafkaException as exc:
        if exc.args[0].code() not in TRANSPORT_CODES:  # the group coordinator is not there yet
            raise
        return False
    return True


def keys(conf: dict[str, str], topic: str) -> list[bytes]:
    consumer = Consumer({**conf, "group.id": f"reader-{uuid.uuid4().hex}", "enable.partition.eof": True})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        consumer.assign([TopicPartition(topic, 0, low)])
        out: list[bytes] = []
        while len(out) < high - low:
            for msg in consumer.consume(1000, 5):
                if not msg.error() and msg.key() is not None:
                    out.append(msg.key())  # type: ignore[arg-type]
        return out
    finally:
        consumer.close()


def test_a_flow_over_sasl_ssl_copies_and_checkpoints_as_a_principal_with_acls(secured):
    source, target = secured["S"], secured["T"]
    alice_s = source.client_config("alice")  # SCRAM-SHA-512
    alice_t = target.client_config("alice", mechanism="PLAIN")
    topic = f"secured-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(alice_s)  # kept referenced: a collected client fails its pending futures
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=60)
    producer = Producer(alice_s)
    for i in range(RECORDS):
        producer.produce(topic, key=f"k{i}".encode(), value=b"v")
    assert producer.flush(60) == 0
    group = Consumer({**alice_s, "group.id": "app", "enable.auto.commit": False})
    wait_for(lambda: committed(group, topic), "group app's commit (its coordinator loads first)", every_s=1)
    group.close()

    def client(conf: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in conf.items() if k != "bootstrap.servers"}

    config = parse_config(
        {
            "clusters": {
                "S": {"bootstrap_servers": source.bootstrap, "client": client(alice_s)},
                "T": {"bootstrap_servers": target.bootstrap, "client": client(alice_t)},
            },
            "flows": [
                {"source": "S", "target": "T", "topics": [topic], "groups": ["app"], "sync_topic_acls": False,
                 "emit_checkpoints_interval_seconds": 1}
            ],
            "replicator_id": "secured-test",
        },
        source="tests/test_secured_clusters.py",
    )  # fmt: skip
    stats = Replicator(config, status_port=None).run_until_caught_up()
    assert stats["S->T"].records == RECORDS
    assert keys(alice_t, f"S.{topic}") == [f"k{i}".encode() for i in range(RECORDS)]
    events = read_state_log(alice_t, "mirrorlake.events").events
    checkpoints = [e for e in events if isinstance(e, Checkpoint) and e.group == "app" and e.source_topic == topic]
    assert checkpoints, "no checkpoint of group app in T's state topic"
    assert checkpoints[-1].upstream_offset == RECORDS // 2
    assert checkpoints[-1].downstream_offset == RECORDS // 2
