"""Failover as an operation (no Spark): plan it from the target's state topic, then apply it.

``plan_failover(config, "A->B")`` says, per group and partition, where the group resumes on the
target, what it loses, re-reads and sees twice, whether it is active there, what was never
replicated, and the consistent cut across topics; ``apply_failover`` writes the offsets on the
target for groups inactive there and records a ``failover`` event. ``translate_positions`` does the
plan's work for offsets an application stored itself (``parse_positions`` reads them from the
shapes Kafka's tools and Spark write). The source cluster may be gone.
"""

from replicator.failover.api import (
    STORED_POSITIONS,
    AppliedGroup,
    FailoverResult,
    apply_failover,
    plan_failover,
    running_replicators,
    translate_positions,
)
from replicator.failover.failback import NeverReplicated, Recovery, failback_plan, recover_never_replicated
from replicator.failover.plan import FailoverPlan, GroupPartitionPlan, GroupPlan, PartitionRisk
from replicator.failover.reverse import (
    FailbackGroupsResult,
    GroupBack,
    ReverseStart,
    failback_groups,
    reverse_flow,
    seed_reverse_flow,
)
from replicator.failover.state import FlowState, read_flow_state
from replicator.failover.stored_positions import StoredPosition, parse_positions
from replicator.failover.times import parse_time

__all__ = [
    "STORED_POSITIONS",
    "StoredPosition",
    "parse_positions",
    "translate_positions",
    "FailbackGroupsResult",
    "GroupBack",
    "ReverseStart",
    "failback_groups",
    "reverse_flow",
    "seed_reverse_flow",
    "AppliedGroup",
    "FailoverPlan",
    "FailoverResult",
    "FlowState",
    "GroupPartitionPlan",
    "GroupPlan",
    "NeverReplicated",
    "PartitionRisk",
    "Recovery",
    "apply_failover",
    "failback_plan",
    "parse_time",
    "plan_failover",
    "read_flow_state",
    "recover_never_replicated",
    "running_replicators",
]
