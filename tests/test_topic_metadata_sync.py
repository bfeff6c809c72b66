"""Topic config and ACL sync, following MM2's rules, on real clusters (and the rules alone)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourcePatternType,
    ResourceType,
)

from mirrorlake.traffic import ensure_topic
from replicator.flow.runtime import Replicator
from replicator.metadata.acls import target_binding
from replicator.metadata.topic_configs import DefaultConfigPropertyFilter
from tests.waiting import wait_for


def dynamic_configs(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = admin.describe_configs([ConfigResource("topic", topic)])
    try:
        result = next(iter(entries.values())).result(30)
    except KafkaException:
        return {}  # not created yet
    return {k: e.value for k, e in result.items() if ConfigSource(e.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG}


def acl(name: str, principal: str, operation: AclOperation, permission=AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, principal, "*", operation, permission)


def test_the_default_filter_keeps_target_durability_and_timestamps_its_own():
    f = DefaultConfigPropertyFilter()
    assert f.should_replicate_config_property("retention.ms")
    assert f.should_replicate_config_property("cleanup.policy")
    for name in ("min.insync.replicas", "message.timestamp.type", "unclean.leader.election.enable"):
        assert not f.should_replicate_config_property(name)


def test_acl_rules_follow_mm2():
    assert target_binding(acl("t", "User:a", AclOperation.READ), "A.t") == acl("A.t", "User:a", AclOperation.READ)
    assert target_binding(acl("t", "User:b", AclOperation.ALL), "A.t") == acl("A.t", "User:b", AclOperation.READ)
    assert target_binding(acl("t", "User:c", AclOperation.WRITE), "A.t") is None
    assert target_binding(acl("t", "User:d", AclOperation.READ, AclPermissionType.DENY), "A.t") is None


@pytest.mark.kafka
def test_configs_and_acls_are_synced_and_followed_while_running(kafka_clusters, unique_topic):
    topic = unique_topic("meta")
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    ensure_topic(
        a,
        topic,
        1,
        config={"retention.ms": "123456789", "max.message.bytes": "2000000", "min.insync.replicas": "1"},
    )
    admin_a = AdminClient({"bootstrap.servers": a})
    bindings = [
        acl(topic, "User:alice", AclOperation.READ),
        acl(topic, "User:bob", AclOperation.ALL),
        acl(topic, "User:carol", AclOperation.WRITE),
        acl(topic, "User:mallory", AclOperation.READ, AclPermissionType.DENY),
    ]
    for future in admin_a.create_acls(bindings).values():
        future.result(30)
    config = kafka_clusters.config(
        flows=[{"source": "A", "target": "B", "topics": [topic], "sync_topic_configs_interval_seconds": 1}]
    )
    replicator = Replicator(config, status_port=None)
    replicator.start()
    remote = f"A.{topic}"
    try:
        wait_for(lambda: dynamic_configs(b, remote).get("retention.ms") == "123456789", "the config sync")
        synced = dynamic_configs(b, remote)
        assert synced.get("max.message.bytes") == "2000000"
        assert "min.insync.replicas" not in synced  # excluded: the target's durability is its own
        # a change on the source is followed
        change = ConfigResource(
            "topic",
            topic,
            incremental_configs=[ConfigEntry("retention.ms", "987654321", incremental_operation=AlterConfigOpType.SET)],
        )
        next(iter(admin_a.incremental_alter_configs([change]).values())).result(30)
        wait_for(lambda: dynamic_configs(b, remote).get("retention.ms") == "987654321", "the changed config")

        admin_b = AdminClient({"bootstrap.servers": b})
        query = AclBindingFilter(
            ResourceType.TOPIC, remote, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
        )

        def target_acls() -> set[tuple[str, AclOperation, AclPermissionType]]:
            return {(x.principal, x.operation, x.permission_type) for x in admin_b.describe_acls(query).result(30)}

        wait_for(lambda: len(target_acls()) >= 2, "the ACL sync")
        assert target_acls() == {
            ("User:alice", AclOperation.READ, AclPermissionType.ALLOW),
            ("User:bob", AclOperation.READ, AclPermissionType.ALLOW),  # ALL becomes READ
        }  # no WRITE, no DENY
    finally:
        replicator.stop()
        replicator.wait(60)
