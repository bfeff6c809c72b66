"""Which ACLs each mirrorlake command needs for one flow: the least-privilege table, as code.

``required_permissions`` lists every (cluster, resource, operation) that a command's clients use
for flow ``A->B``: ``replicate`` per enabled feature (copy, exactly-once, checkpoints, ...), and
the operator's commands that run beside or instead of it (``observe``, ``import-mm2``,
``failover`` plan and apply, ``cutover`` for ``failover apply --planned --fence``, ``translate``).
``mirrorlake check --for COMMAND`` asks the clusters for exactly these, and a command refused at
run time names the missing ones from the same list, so the documented table
(docs/reliability-and-security.md), the check and the error messages cannot drift apart.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from replicator.client.policy import ReplicationPolicy, policy_from_config
from replicator.client.state_snapshot import snapshot_topic
from replicator.config import FlowConfig, MirrorlakeConfig
from replicator.kafka.settings import (
    READER_GROUP_PREFIX,
    consumer_group_id,
    heartbeat_group_prefix,
    import_group_id,
    positions_group_id,
    transactional_id,
)
from replicator.metadata.filters import RegexGroupFilter
from replicator.metadata.topics import flow_topic_selector

__all__ = ["COMMANDS", "Command", "Permission", "required_permissions"]

Command = Literal["replicate", "observe", "import-mm2", "failover", "cutover", "translate"]
COMMANDS: tuple[Command, ...] = ("replicate", "observe", "import-mm2", "failover", "cutover", "translate")


@dataclass(frozen=True)
class Permission:
    """One ACL a flow needs: ``operation`` on ``resource_type`` ``name`` at cluster ``cluster``."""

    cluster: str
    resource_type: str  # TOPIC | GROUP | TRANSACTIONAL_ID | CLUSTER
    name: str
    operation: str  # AclOperation name: READ, WRITE, CREATE, DESCRIBE, ...
    feature: str
    flow: str
    pattern: str = "LITERAL"  # or PREFIXED: ``name`` is a prefix (of per-process group ids)

    @property
    def probe_name(self) -> str:
        """A concrete name to ask about: a PREFIXED permission is asked for one name it covers."""
        return self.name + "check" if self.pattern == "PREFIXED" else self.name


def _literal(pattern: str) -> str | None:
    """The name a topic/group pattern stands for when it is a plain name (``orders``, ``a\\.b``), else None."""
    return pattern.replace("\\.", ".") if re.fullmatch(r"(?:[A-Za-z0-9_\-.]|\\\.)+", pattern) else None


@dataclass
class _Needs:
    """The permissions of one flow, collected feature by feature."""

    config: MirrorlakeConfig
    flow: FlowConfig
    policy: ReplicationPolicy
    topics: list[str]  # the source topics the flow replicates
    groups: list[str]  # the source groups it checkpoints
    out: list[Permission] = field(default_factory=list)

    def need(self, cluster: str, kind: str, name: str, ops: str, feature: str, pattern: str = "LITERAL") -> None:
        self.out.extend(Permission(cluster, kind, name, op, feature, self.flow.name, pattern) for op in ops.split())

    @property
    def source(self) -> str:
        return self.flow.source

    @property
    def target(self) -> str:
        return self.flow.target

    def remote(self, topic: str) -> str:
        return self.policy.format_remote_topic(self.flow.source, topic)

    def state_topic(self, feature: str, ops: str = "DESCRIBE READ WRITE CREATE") -> None:
        """The target's state topic and its snapshot, read by assign-only readers."""
        for name in (self.config.state_topic, snapshot_topic(self.config.state_topic)):
            self.need(self.target, "TOPIC", name, ops, feature)
        self.need(self.target, "GROUP", READER_GROUP_PREFIX, "DESCRIBE", feature, "PREFIXED")

    def replicate(self) -> None:
        flow, s, t, config = self.flow, self.source, self.target, self.config
        self.need(s, "GROUP", consumer_group_id(flow), "READ DESCRIBE", "copy")
        self.state_topic("state topic")
        if flow.exactly_once:
            instance = config.replicator_id or "main"
            self.need(t, "TRANSACTIONAL_ID", transactional_id(flow, instance), "WRITE DESCRIBE", "exactly-once")
            self.need(t, "TOPIC", config.positions_topic, "DESCRIBE READ WRITE CREATE", "exactly-once")
            self.need(t, "GROUP", positions_group_id(flow), "DESCRIBE", "exactly-once")
        topics = sorted({*self.topics, *([config.heartbeats_topic] if flow.emit_heartbeats else [])})
        for topic in topics:  # heartbeats always travel, whatever the filter says
            remote = self.remote(topic)
            self.need(s, "TOPIC", topic, "DESCRIBE READ", "copy")
            self.need(t, "TOPIC", remote, "DESCRIBE CREATE WRITE", "copy")
            if flow.sync_topic_configs:
                self.need(s, "TOPIC", topic, "DESCRIBE_CONFIGS", "config sync")
                self.need(t, "TOPIC", remote, "DESCRIBE_CONFIGS ALTER_CONFIGS", "config sync")
            if flow.audit:
                self.need(t, "TOPIC", remote, "READ DESCRIBE_CONFIGS", "audit")  # compacted? re-audit
        if flow.audit:
            self.need(s, "GROUP", READER_GROUP_PREFIX, "DESCRIBE", "audit", "PREFIXED")
        if flow.sync_topic_acls:
            self.need(s, "CLUSTER", "kafka-cluster", "DESCRIBE", "ACL sync")
            self.need(t, "CLUSTER", "kafka-cluster", "ALTER", "ACL sync")
        if flow.emit_checkpoints:
            for group in self.groups:
                self.need(s, "GROUP", group, "DESCRIBE", "checkpoints")
                if flow.sync_group_offsets:
                    self.need(t, "GROUP", group, "READ DESCRIBE", "group sync")
            if flow.emit_mm2_checkpoints:
                self.need(t, "TOPIC", self.policy.checkpoints_topic(s), "DESCRIBE CREATE WRITE", "checkpoints")
        if flow.emit_mm2_offset_syncs:
            self.need(s, "TOPIC", self.policy.offset_syncs_topic(t), "DESCRIBE CREATE WRITE", "MM2 offset syncs")
        if flow.emit_heartbeats:
            heartbeats = config.heartbeats_topic
            self.need(t, "TOPIC", heartbeats, "DESCRIBE CREATE WRITE", "heartbeats")
            self.need(s, "TOPIC", heartbeats, "CREATE WRITE", "heartbeats")
            self.need(t, "TOPIC", self.remote(heartbeats), "READ", "heartbeats")
            self.need(t, "GROUP", heartbeat_group_prefix(flow), "DESCRIBE", "heartbeats", "PREFIXED")

    def observe(self) -> None:
        """The flow's state tasks once (watermarks, config and ACL snapshots, audits, checkpoints)."""
        flow, s, t = self.flow, self.source, self.target
        self.state_topic("observe", "DESCRIBE READ WRITE")
        self.need(s, "GROUP", consumer_group_id(flow), "DESCRIBE", "observe")  # the flow's committed positions
        self.need(s, "GROUP", READER_GROUP_PREFIX, "DESCRIBE", "observe", "PREFIXED")  # audit and tail readers
        for topic in self.topics:
            self.need(s, "TOPIC", topic, "DESCRIBE READ DESCRIBE_CONFIGS", "observe")
            self.need(t, "TOPIC", self.remote(topic), "DESCRIBE READ DESCRIBE_CONFIGS", "observe")
        for alias in (s, t):  # the ACL snapshot lists the topics' ACLs
            self.need(alias, "CLUSTER", "kafka-cluster", "DESCRIBE", "observe")
        if flow.exactly_once:
            self.need(t, "TOPIC", self.config.positions_topic, "DESCRIBE READ", "observe")
            self.need(t, "GROUP", positions_group_id(flow), "DESCRIBE", "observe")
        if flow.emit_checkpoints:
            for group in self.groups:
                self.need(s, "GROUP", group, "DESCRIBE", "observe")

    def import_mm2(self) -> None:
        """MM2's offset syncs (source), checkpoints and heartbeats (target), republished as events."""
        s, t, group = self.source, self.target, import_group_id(self.flow.name)
        self.state_topic("import-mm2")
        self.need(s, "TOPIC", self.policy.offset_syncs_topic(t), "DESCRIBE READ", "import-mm2")
        for name in (self.policy.checkpoints_topic(s), self.policy.heartbeats_topic()):
            self.need(t, "TOPIC", name, "DESCRIBE READ", "import-mm2")
        for alias in (s, t):  # progress is committed on both clusters
            self.need(alias, "GROUP", group, "DESCRIBE READ", "import-mm2")

    def failover(self) -> None:
        """``failover plan`` reads B only; ``apply`` also commits the groups' offsets and writes its events.

        On A (when it answers) the plan asks whether the flow's consumer group still has members;
        ``--planned`` reads the groups' committed offsets there too. On B the plan asks each target
        topic's ``cleanup.policy`` and reads the compacted ones (which copies they still hold).
        """
        s, t = self.source, self.target
        self.state_topic("failover plan", "DESCRIBE READ")
        self.need(t, "TOPIC", self.config.state_topic, "WRITE", "failover apply")
        for topic in self.topics:
            self.need(t, "TOPIC", self.remote(topic), "DESCRIBE DESCRIBE_CONFIGS", "failover plan")
            self.need(t, "TOPIC", self.remote(topic), "READ", "failover apply, plan of a compacted topic")
            self.need(s, "TOPIC", topic, "DESCRIBE", "failover --planned")
        for group in self.groups:
            self.need(t, "GROUP", group, "DESCRIBE", "failover plan")
            self.need(t, "GROUP", group, "READ", "failover apply")
            self.need(s, "GROUP", group, "DESCRIBE", "failover --planned")
        self.need(s, "GROUP", consumer_group_id(self.flow), "DESCRIBE", "failover plan")

    def cutover(self) -> None:
        """A fenced cutover is a planned failover that also creates (and ``--unfence`` deletes) DENY
        Write ACLs on the source topics, and asks the source for their log ends while it settles."""
        self.failover()
        self.need(self.source, "CLUSTER", "kafka-cluster", "ALTER", "failover --fence, failback --unfence")

    def translate(self) -> None:
        """The latest checkpoint of a group, read from the target's state topic and its snapshot."""
        self.state_topic("translate", "DESCRIBE READ")
        for topic in self.topics:
            self.need(self.target, "TOPIC", self.remote(topic), "DESCRIBE", "translate")


def required_permissions(
    config: MirrorlakeConfig,
    flow: FlowConfig,
    *,
    source_topics: Iterable[str] = (),
    source_groups: Iterable[str] = (),
    policy: ReplicationPolicy | None = None,
    commands: Sequence[Command] = ("replicate",),
) -> list[Permission]:
    """Every permission ``commands`` need for ``flow`` with its features on, for the given topics and groups.

    ``source_topics``/``source_groups`` are the concrete names the flow replicates/checkpoints
    (from the source's listing); literal names in the flow's patterns are added when not given.
    A permission two commands need is listed once, under the first feature that named it.
    """
    unknown = [c for c in commands if c not in COMMANDS]
    if unknown:
        raise ValueError(f"unknown command(s) {unknown}: one of {', '.join(COMMANDS)}")
    policy = policy or policy_from_config(config.replication_policy)
    selector = flow_topic_selector(config, flow, policy)
    topics = set(source_topics) | {n for p in flow.topics if (n := _literal(p)) and selector.should_replicate(n)}
    group_filter = RegexGroupFilter.for_flow(flow)
    groups = {g for g in source_groups if group_filter.should_replicate_group(g)}
    groups |= {n for p in flow.groups if (n := _literal(p)) and group_filter.should_replicate_group(n)}
    needs = _Needs(config, flow, policy, sorted(topics), sorted(groups))
    for command in commands:
        getattr(needs, command.replace("-", "_"))()
    return _unique(needs.out)


def _unique(perms: list[Permission]) -> list[Permission]:
    seen: dict[tuple[str, str, str, str, str], Permission] = {}
    for p in perms:
        seen.setdefault((p.cluster, p.resource_type, p.name, p.operation, p.pattern), p)  # first feature wins
    return list(seen.values())
