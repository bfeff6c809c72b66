"""The pure half of ``replicator.access.permissions``: which ACLs each feature needs, and how broker answers read.

The half that asks real brokers runs in ``tests/test_secured_clusters.py`` (a principal with one ACL
withheld, reported by ``mirrorlake check`` and by a failing run).
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from replicator.access.acl_needs import _literal
from replicator.access.permissions import (
    _status,
    authorization_failure,
    principal,
    required_permissions,
)
from replicator.config import parse_config
from replicator.errors import ReplicationError


def _config(**flow: object):
    return parse_config(
        {
            "clusters": {"A": {"bootstrap_servers": "127.0.0.1:1"}, "B": {"bootstrap_servers": "127.0.0.1:3"}},
            "flows": [{"source": "A", "target": "B", "topics": ["orders"], **flow}],
        }
    )


def _rows(config) -> set[tuple[str, str, str, str, str]]:
    return {
        (p.cluster, p.resource_type, p.name, p.operation, p.feature)
        for p in required_permissions(config, config.flows[0], source_groups=["app", "mirrorlake.x"])
    }


def test_each_feature_adds_its_acls_and_only_those():
    minimal = _config(
        sync_topic_configs=False, sync_topic_acls=False, emit_checkpoints=False, emit_heartbeats=False, audit=False
    )
    rows = _rows(minimal)
    assert ("A", "TOPIC", "orders", "READ", "copy") in rows
    assert ("A", "GROUP", "mirrorlake.A->B", "READ", "copy") in rows
    assert ("B", "TOPIC", "A.orders", "WRITE", "copy") in rows
    assert ("B", "TOPIC", "A.orders", "CREATE", "copy") in rows
    assert ("B", "TOPIC", "mirrorlake.events", "WRITE", "state topic") in rows
    assert not any(r[1] in ("CLUSTER", "TRANSACTIONAL_ID") for r in rows)
    assert not any(r[2] == "app" for r in rows)

    full = _rows(_config(exactly_once=True, sync_group_offsets=True, emit_mm2_offset_syncs=True))
    added = {(r[0], r[1], r[2], r[3]) for r in full - rows}
    assert ("B", "TRANSACTIONAL_ID", "mirrorlake.A->B.main", "WRITE") in added
    assert ("B", "TOPIC", "mirrorlake.positions", "WRITE") in added
    assert ("A", "CLUSTER", "kafka-cluster", "DESCRIBE") in added  # ACL sync reads the source's ACLs
    assert ("B", "CLUSTER", "kafka-cluster", "ALTER") in added  # and creates them on the target
    assert ("B", "TOPIC", "A.orders", "ALTER_CONFIGS") in added
    assert ("A", "GROUP", "app", "DESCRIBE") in added  # checkpoints of the groups the filter keeps
    assert ("B", "GROUP", "app", "READ") in added  # group sync commits them on the target
    assert not any(r[2] == "mirrorlake.x" for r in full)  # the default groups_exclude drops our own
    assert ("A", "TOPIC", "mm2-offset-syncs.B.internal", "WRITE") in added
    assert ("B", "TOPIC", "A.heartbeats", "READ") in added


def test_literal_names_of_patterns():
    assert _literal("orders") == "orders"
    assert _literal(r"orders\.v1") == "orders.v1"
    assert _literal("orders.*") is None
    assert _literal("a|b") is None


def test_a_denied_describe_hides_every_operation_that_implies_it():
    assert _status("READ", {"READ", "DESCRIBE"}, "") == ("OK", "")
    assert _status("WRITE", {"READ", "DESCRIBE"}, "")[0] == "MISSING"
    assert _status("DESCRIBE_CONFIGS", {"ALTER_CONFIGS"}, "")[0] == "OK"  # AlterConfigs implies DescribeConfigs
    assert _status("READ", None, "denied")[0] == "MISSING"
    assert _status("CREATE", None, "denied")[0] == "UNKNOWN"


def test_principal_names_the_sasl_user():
    assert principal({"sasl.username": "bob"}) == "User:bob"
    assert principal({}) == "User:ANONYMOUS"


def test_only_authorization_errors_become_missing_permission_errors():
    config = _config()
    other = ReplicationError("write failed")
    other.__cause__ = KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
    assert authorization_failure(config, config.flows[0], other) is None
    assert authorization_failure(config, config.flows[0], ValueError("x")) is None


def test_an_authorization_error_names_the_resource_kind_when_the_check_cannot_run():
    config = parse_config(
        {
            "clusters": {"A": {"bootstrap_servers": "127.0.0.1:1"}, "B": {"bootstrap_servers": "127.0.0.1:3"}},
            "flows": [{"source": "A", "target": "B"}],
            "connect_timeout_seconds": 0.5,
        }
    )
    refused = ReplicationError("consumer error")
    refused.__cause__ = KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))
    error = authorization_failure(config, config.flows[0], refused)
    assert error is not None and error.exit_code == 22
    assert "flow A->B: not authorized" in str(error) and "GROUP ACLs" in str(error)


def _command_rows(config, command: str) -> set[tuple[str, str, str, str]]:
    perms = required_permissions(config, config.flows[0], source_groups=["app"], commands=(command,))
    return {(p.cluster, p.resource_type, p.name, p.operation) for p in perms}


def test_the_operators_commands_need_no_write_on_the_source_and_only_what_they_do_on_the_target():
    config = _config()
    failover, translate = _command_rows(config, "failover"), _command_rows(config, "translate")
    assert {r[3] for r in failover if r[0] == "A"} == {"DESCRIBE"}  # A may be down; asked only when it answers
    assert {(r[1], r[2]) for r in failover if r[3] == "WRITE"} == {("TOPIC", "mirrorlake.events")}  # its events
    assert ("B", "GROUP", "app", "READ") in failover  # apply commits the group's offsets on the target
    assert ("B", "TOPIC", "A.orders", "READ") in failover  # an offset commit needs Read on the topic
    assert not any(r[3] in ("CREATE", "ALTER", "ALTER_CONFIGS") for r in failover)
    assert translate and {r[0] for r in translate} == {"B"} and {r[3] for r in translate} <= {"DESCRIBE", "READ"}
    observe = _command_rows(config, "observe")
    assert not any(r[3] in ("CREATE", "ALTER", "ALTER_CONFIGS") for r in observe)  # it creates nothing
    assert {(r[1], r[2]) for r in observe if r[3] == "WRITE"} == {("TOPIC", "mirrorlake.events"),
                                                                  ("TOPIC", "mirrorlake.events.snapshot")}  # fmt: skip
    mm2 = _command_rows(config, "import-mm2")
    assert ("A", "TOPIC", "mm2-offset-syncs.B.internal", "READ") in mm2
    assert ("B", "TOPIC", "A.checkpoints.internal", "READ") in mm2
    assert {("A", "GROUP", "mirrorlake.import-mm2.A->B", "READ"), ("B", "GROUP", "mirrorlake.import-mm2.A->B",
                                                                     "READ")} <= mm2  # fmt: skip
    assert _command_rows(config, "replicate") | failover == {
        (p.cluster, p.resource_type, p.name, p.operation)
        for p in required_permissions(
            config, config.flows[0], source_groups=["app"], commands=("replicate", "failover")
        )
    }  # several commands: the union, each row once


def test_an_unknown_command_is_named():
    config = _config()
    with pytest.raises(ValueError, match="failback.*failover"):
        required_permissions(config, config.flows[0], commands=("failback",))  # type: ignore[arg-type]
