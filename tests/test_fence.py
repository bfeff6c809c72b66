"""The fenced cutover's pure parts: the fence's bindings as text and back, what a cluster with no
authorizer is told, what a settle window reports, and which steps a rerun continues after.
(The fence on real brokers: ``tests/test_secured_clusters.py``.)"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AclOperation, AclPermissionType, ResourcePatternType, ResourceType

from replicator.config import parse_config
from replicator.errors import FailoverError
from replicator.events import Cutover
from replicator.failover.cutover import current_run
from replicator.failover.fence import Settle, _filter_of, _refusal, binding_text, fence_bindings
from replicator.failover.state import flow_state_from_events


def test_the_fence_denies_write_to_every_principal_once_per_topic_and_travels_as_text():
    bindings = fence_bindings(["orders", "acct", "orders"])
    assert [binding_text(b) for b in bindings] == [
        "TOPIC|LITERAL|acct|User:*|*|WRITE|DENY",
        "TOPIC|LITERAL|orders|User:*|*|WRITE|DENY",
    ]
    back = _filter_of(binding_text(bindings[0]))
    assert (back.restype, back.name, back.resource_pattern_type, back.principal, back.host) == (
        ResourceType.TOPIC, "acct", ResourcePatternType.LITERAL, "User:*", "*"
    )  # fmt: skip
    assert (back.operation, back.permission_type) == (AclOperation.WRITE, AclPermissionType.DENY)
    with pytest.raises(FailoverError, match="names an ACL binding that is not one: 'TOPIC|LITERAL|x'"):
        _filter_of("TOPIC|LITERAL|x")


def test_a_cluster_without_an_authorizer_is_refused_in_words_and_other_errors_keep_their_reason():
    disabled = _refusal("A", KafkaException(KafkaError(KafkaError.SECURITY_DISABLED)), "create the fence")
    assert "cluster A runs no authorizer" in str(disabled) and "without --fence" in str(disabled)
    other = _refusal("A", KafkaException(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED, "denied")), "create it")
    assert str(other).startswith("cannot create it on A: ")


def test_a_settle_window_holds_only_with_no_growth_and_no_open_transaction():
    assert Settle({("t", 0): 5}, {}, ()).held()
    grew = Settle({("t", 0): 9}, {("t", 0): 4}, ())
    assert not grew.held() and grew.reason() == "written past the fence: t[0] +4"
    opened = Settle({("t", 1): 9}, {}, (("t", 1),))
    assert not opened.held() and opened.reason() == "a transaction is still open on t[1]"


def _step(step: str, at: int) -> Cutover:
    acl = "TOPIC|LITERAL|orders|User:*|*|WRITE|DENY"
    return Cutover(flow="A->B", replicator_id="cutover@h-1", emitted_at_ms=at, source_cluster="A",
                   target_cluster="B", step=step, topics=("orders",), acls=(acl,), host="h", user="u")  # fmt: skip


def test_a_rerun_continues_the_run_after_the_last_unfenced():
    config = parse_config({"clusters": {"A": {"bootstrap_servers": "a:1"}, "B": {"bootstrap_servers": "b:1"}},
                           "flows": [{"source": "A", "target": "B"}]})  # fmt: skip
    flow = config.flow("A->B")
    first = [_step(s, 1000 + i) for i, s in enumerate(["fenced", "settled", "caught_up"])]
    state = flow_state_from_events(flow, [*reversed(first)], 5000)  # any order in the log
    assert [e.step for e in current_run(state)] == ["fenced", "settled", "caught_up"]
    lifted = [*first, _step("unfenced", 2000), _step("fenced", 3000)]
    assert [e.step for e in current_run(flow_state_from_events(flow, lifted, 5000))] == ["fenced"]
    assert current_run(flow_state_from_events(flow, [*first, _step("unfenced", 2000)], 5000)) == []
