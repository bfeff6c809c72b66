"""Replication policies, topic selection and cycle prevention by name (pure logic)."""

from __future__ import annotations

import pytest

from replicator.client.policy import DefaultReplicationPolicy, IdentityReplicationPolicy, policy_from_config
from replicator.config import PolicyConfig, parse_config
from replicator.errors import ConfigError
from replicator.flow.core.offset_sync import OffsetSyncTracker
from replicator.metadata.filters import RegexGroupFilter, RegexTopicFilter
from replicator.metadata.topics import TopicSelector


def test_default_policy_names_and_recognises_remote_topics():
    policy = DefaultReplicationPolicy()
    assert policy.format_remote_topic("A", "orders") == "A.orders"
    assert policy.topic_source("A.orders") == "A"
    assert policy.upstream_topic("B.A.orders") == "A.orders"
    assert policy.original_topic("C.B.A.orders") == "orders"
    assert policy.topic_source("orders") is None


def test_separator_is_configurable():
    policy = policy_from_config(PolicyConfig(separator="__"))
    assert policy.format_remote_topic("A", "x.y") == "A__x.y"
    assert policy.topic_source("A__x.y") == "A"


def test_identity_policy_keeps_names_and_says_it_cannot_track_sources():
    policy = policy_from_config(PolicyConfig.model_validate({"class": "identity"}))
    assert isinstance(policy, IdentityReplicationPolicy)
    assert policy.format_remote_topic("A", "orders") == "orders"
    assert not policy.can_track_source()


def test_custom_policy_class_is_loaded_and_configured():
    policy = policy_from_config(PolicyConfig.model_validate({"class": "tests.custom_policy:Upper", "separator": "-"}))
    assert policy.format_remote_topic("a", "t") == "A-t"


@pytest.mark.parametrize(
    ("name", "needle"),
    [("nonsense", "neither"), ("no.such.module:X", "cannot load"), ("replicator.config:MirrorlakeConfig", "not a")],
)
def test_bad_policy_class_is_a_config_error(name, needle):
    with pytest.raises(ConfigError, match=needle):
        policy_from_config(PolicyConfig.model_validate({"class": name}))


def test_selector_skips_internal_state_and_topics_from_the_target():
    flow = parse_config(
        {
            "clusters": {"A": {"bootstrap_servers": "x:1"}, "B": {"bootstrap_servers": "y:1"}},
            "flows": [{"source": "A", "target": "B"}],
        }
    ).flows[0]
    selector = TopicSelector(
        DefaultReplicationPolicy(),
        RegexTopicFilter.for_flow(flow),
        source="A",
        target="B",
        own_topics=("mirrorlake.events",),
    )
    topics = {
        "orders": 3,
        "B.orders": 3,  # came from B: mirroring it back would loop
        "C.orders": 1,  # came from C through A: forwarded
        "__consumer_offsets": 50,
        "mirrorlake.events": 3,
        "mm2-offset-syncs.B.internal": 1,
        "x.internal": 1,
    }
    selected = selector.select(topics)
    assert {t: r.target_topic for t, r in selected.items()} == {"orders": "A.orders", "C.orders": "A.C.orders"}
    assert selected["orders"].partitions == 3


def test_topic_filter_matches_whole_names():
    f = RegexTopicFilter(("orders.*",), ("orders-private",))
    assert f.should_replicate_topic("orders-eu")
    assert not f.should_replicate_topic("orders-private")
    assert not f.should_replicate_topic("my-orders")


def test_tracker_reasons_follow_mm2_plus_exact_mode():
    t = OffsetSyncTracker(offset_lag_max=3)
    assert t.record("t", 0, 10, 0, 0).reason == "first"
    assert t.record("t", 0, 11, 1, 0) is None
    gap = t.record("t", 0, 13, 2, 0)  # upstream gap changes the delta
    assert (gap.reason, gap.previous_upstream_offset, gap.previous_downstream_offset) == ("delta_change", 11, 1)
    assert t.record("t", 0, 15, 4, 0).reason == "upstream_gap"  # same delta, gap on both sides
    assert t.record("t", 0, 16, 5, 0) is None
    assert t.record("t", 0, 17, 6, 0) is None
    assert t.record("t", 0, 18, 7, 0).reason == "lag_max"
    assert t.record("t", 0, 19, 8, 0) is None
    assert [(p.upstream_offset, p.reason) for p in t.flush()] == [(19, "flush")]
    assert t.flush() == []
    assert t.record("t", 0, 20, 2, 0).reason == "truncation"  # the target partition was truncated


@pytest.mark.parametrize(
    ("pattern", "yes", "no"),
    [
        (".*", ["orders", "a.b-c_9"], []),
        ("orders|payments", ["orders", "payments"], ["orders2", "xorders"]),
        ("topic-[0-9]+", ["topic-1", "topic-42"], ["topic-", "topic-x", "topic-1x"]),
        ("(?i)ORDERS\\..*", ["orders.eu", "Orders.us"], ["orders"]),
        ("\\Qa.b\\E", ["a.b"], ["axb"]),
        ("[[:alpha:]]+-\\d{2,}", ["eu-10"], ["eu-1", "10-eu"]),
        ("(a+)+$", ["a", "aaaa"], ["a" * 40 + "-x", ""]),
    ],
)
def test_mm2_users_patterns_match_whole_names(pattern: str, yes: list[str], no: list[str]):
    topics = RegexTopicFilter((pattern,), ())
    assert [t for t in yes + no if topics.should_replicate_topic(t)] == yes


def test_a_pattern_that_backtracks_elsewhere_matches_a_hostile_name_in_linear_time():
    """``(a+)+$`` against a long run of ``a`` then ``-x`` takes Python's backtracking engine 2^n steps
    (forty ``a``: minutes); RE2's automaton reads the name once. No clock here: the harness's
    timeout is the only bound, and on the old engine the call would never return."""
    hostile = "a" * 100_000 + "-x"
    assert not RegexTopicFilter(("(a+)+$", "(x|x)*y", "(.*a){20}"), ()).should_replicate_topic(hostile)
    assert RegexGroupFilter(("(a+)+$",), ("(a|aa)+b",)).should_replicate_group("a" * 100_000)
