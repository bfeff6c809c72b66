"""Which source topics a flow mirrors, and making sure their remote topics exist on the target.

``TopicSelector`` is the flow's whole topic decision (filter, internal topics, cycle prevention by
name); ``TopicManager`` does the admin calls. Both run off the hot path, on a refresh interval.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import IsolationLevel, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic, OffsetSpec

from replicator.client.policy import ReplicationPolicy
from replicator.client.state_snapshot import snapshot_topic
from replicator.config import FlowConfig, MirrorlakeConfig
from replicator.errors import ReplicationError
from replicator.kafka.admin import offsets_of, partition_counts
from replicator.kafka.errors import kafka_error
from replicator.metadata.filters import RegexTopicFilter, TopicFilter

__all__ = [
    "TopicSelector",
    "flow_topic_selector",
    "TopicManager",
    "RemoteTopic",
    "STATE_TOPIC_CONFIG",
    "POSITIONS_TOPIC_CONFIG",
]

_log = logging.getLogger(__name__)

# The state topic is the source of truth every lakehouse table is rebuilt from: keep it forever.
STATE_TOPIC_CONFIG = {"retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "delete"}
# Exactly-once source positions: one record per partition, latest wins.
POSITIONS_TOPIC_CONFIG = {"cleanup.policy": "compact", "min.compaction.lag.ms": "0"}
STATE_TOPIC_PARTITIONS = 3
_ADMIN_TIMEOUT_S = 10.0  # the copy loop waits at most this long for an admin answer, then backs off


@dataclass(frozen=True)
class RemoteTopic:
    source_topic: str
    target_topic: str
    partitions: int

    def name_on(self, side: str) -> str:
        """The topic's name on the flow's ``source`` or ``target`` side."""
        return self.source_topic if side == "source" else self.target_topic


class TopicSelector:
    """Decides which source topics a flow ``source->target`` replicates and their remote names."""

    def __init__(
        self,
        policy: ReplicationPolicy,
        topic_filter: TopicFilter,
        *,
        source: str,
        target: str,
        own_topics: tuple[str, ...] = (),
        heartbeats_topic: str | None = None,
    ) -> None:
        self._policy = policy
        self._heartbeats = heartbeats_topic
        self._filter = topic_filter
        self._source = source
        self._target = target
        self._own_topics = frozenset(own_topics)  # mirrorlake's state and positions topics

    def should_replicate(self, topic: str) -> bool:
        if topic in self._own_topics or self._policy.is_internal_topic(topic):
            return False
        if self._policy.topic_source(topic) == self._target:
            return False  # it came from the target: replicating it back would close a cycle
        if self._heartbeats is not None and self._policy.is_heartbeats_topic(topic, self._heartbeats):
            return True  # heartbeats always travel (as in MM2), so every hop's latency is visible
        return self._filter.should_replicate_topic(topic)

    def select(self, source_partitions: Mapping[str, int]) -> dict[str, RemoteTopic]:
        return {
            t: RemoteTopic(t, self._policy.format_remote_topic(self._source, t), n)
            for t, n in sorted(source_partitions.items())
            if self.should_replicate(t)
        }


def flow_topic_selector(config: MirrorlakeConfig, flow: FlowConfig, policy: ReplicationPolicy) -> TopicSelector:
    """The selector of ``flow``: its filters, heartbeats, and mirrorlake's own topics left out."""
    return TopicSelector(
        policy,
        RegexTopicFilter.for_flow(flow),
        source=flow.source,
        target=flow.target,
        own_topics=(config.state_topic, snapshot_topic(config.state_topic), config.positions_topic),
        heartbeats_topic=config.heartbeats_topic if flow.emit_heartbeats else None,
    )


class TopicManager:
    """Admin operations of one flow: read source topics, create/grow remote topics."""

    def __init__(self, source_admin: AdminClient, target_admin: AdminClient) -> None:
        self._source = source_admin
        self._target = target_admin

    def source_partitions(self) -> dict[str, int]:
        return partition_counts(self._source)

    def source_end_offsets(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Last stable offsets (what read_committed can reach), in one request on the admin's connection.

        Asking the consumer instead would queue behind its long-polling fetches (~0.5 s each).
        """
        try:
            return offsets_of(self._source, partitions, OffsetSpec.latest(), isolation=IsolationLevel.READ_COMMITTED)
        except KafkaException as exc:
            raise ReplicationError(f"cannot list source end offsets: {exc}") from exc

    def ensure_remote_topics(self, wanted: list[RemoteTopic]) -> list[RemoteTopic]:
        """Create missing remote topics with the source's partition count; grow smaller ones.

        Returns the remote topics this call created (not one another process created first): what
        opt-in topic deletions may later remove is only what the flow made."""
        existing = partition_counts(self._target)
        create = [
            NewTopic(r.target_topic, num_partitions=r.partitions, replication_factor=-1)
            for r in wanted
            if r.target_topic not in existing
        ]
        grow = [
            NewPartitions(r.target_topic, r.partitions)
            for r in wanted
            if r.target_topic in existing and existing[r.target_topic] < r.partitions
        ]
        made: set[str] = set()
        if create:
            made = self._wait(self._target.create_topics(create, operation_timeout=_ADMIN_TIMEOUT_S), "create topic")
        if grow:
            self._wait(self._target.create_partitions(grow, operation_timeout=_ADMIN_TIMEOUT_S), "add partitions")
        return [r for r in wanted if r.target_topic in made]

    def ensure_state_topic(self, name: str, *, compacted: bool = False) -> None:
        """The state topic (kept forever) or, ``compacted``, the exactly-once positions topic."""
        if name in partition_counts(self._target):
            return
        config = dict(POSITIONS_TOPIC_CONFIG if compacted else STATE_TOPIC_CONFIG)
        topic = NewTopic(name, num_partitions=STATE_TOPIC_PARTITIONS, replication_factor=-1, config=config)
        self._wait(self._target.create_topics([topic], operation_timeout=_ADMIN_TIMEOUT_S), "create state topic")

    def ensure_single_partition_compacted(self, name: str) -> None:
        """A topic as MM2's ``MirrorUtils.createSinglePartitionCompactedTopic`` makes it (an existing one is kept)."""
        if name in partition_counts(self._target):
            return
        topic = NewTopic(name, num_partitions=1, replication_factor=-1, config={"cleanup.policy": "compact"})
        self._wait(self._target.create_topics([topic], operation_timeout=_ADMIN_TIMEOUT_S), "create topic")

    @staticmethod
    def _wait(futures: Mapping[str, object], what: str) -> set[str]:
        """Wait for each request; returns the names this call made (one that existed already is not)."""
        made = set()
        for name, future in futures.items():
            try:
                future.result(timeout=_ADMIN_TIMEOUT_S)  # type: ignore[attr-defined]
                _log.info("%s %s: done", what, name)
                made.add(name)
            except KafkaException as exc:
                err = kafka_error(exc)
                if isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    continue  # another replicator process won the race
                raise ReplicationError(f"{what} {name} failed: {err.str() if err else exc}") from exc
        return made
