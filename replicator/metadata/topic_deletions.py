"""What a flow does when a source topic it copies is deleted: keep the remote topic, or (opt-in) delete it.

MM2 never deletes a remote topic, and says nothing when its source topic goes. Broker-side mirrors
(WarpStream Orbit, Redpanda Shadowing) can delete it. Here a topic that leaves the flow's selection
is first confirmed deleted on the source (DescribeTopics answers UNKNOWN_TOPIC_OR_PARTITION: a
topic that only looked absent, a broker restarting, is not taken for deleted), then, with
``sync_topic_deletions`` on, its remote topic is deleted on the target. Each outcome is a decision
the flow records as a ``metadata_change`` event: ``deleted``, ``kept`` (deletions off, or the
identity policy, where the target's topic of that name may hold records of its own) or ``failed``.
A topic deleted and created again between two refreshes never leaves the selection: that is a new
life of the same topic (``topic_recreated``), not a deletion. A topic deleted while no process of
the flow ran is found at the next start, from the topics the flow's mapping says it copied.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from replicator.kafka.admin import ADMIN_TIMEOUT_S
from replicator.kafka.errors import kafka_error
from replicator.metadata.topic_ids import topic_ids

__all__ = ["TopicDecision", "RemoteTopicDeletions"]

_log = logging.getLogger(__name__)

_OFF = "deleted on the source; sync_topic_deletions is off"
_IDENTITY = "deleted on the source; identity policy: the target's topic of that name may hold records of its own"


@dataclass(frozen=True)
class TopicDecision:
    """What became of a deleted source topic's remote topic: ``deleted``, ``kept`` or ``failed``."""

    action: str
    topic: str  # the remote topic
    source_topic: str
    reason: str


class RemoteTopicDeletions:
    """``decide(gone)``: for source topics that left the selection (source topic -> remote topic)."""

    def __init__(self, source: AdminClient, target: AdminClient, *, enabled: bool) -> None:
        self._source = source
        self._target = target
        self._enabled = enabled

    def decide(self, gone: Mapping[str, str]) -> list[TopicDecision]:
        """The decisions for the topics confirmed deleted on the source (others are left alone:
        a topic a filter dropped, or one that came back). Raises ``KafkaException`` when the source
        cannot say (the caller tries again at its next refresh)."""
        if not gone:
            return []
        existing = topic_ids(self._source, list(gone))
        deleted = {s: r for s, r in gone.items() if s not in existing}
        out = []
        for source_topic, remote in sorted(deleted.items()):
            if not self._enabled:
                out.append(TopicDecision("kept", remote, source_topic, _OFF))
            elif remote == source_topic:
                out.append(TopicDecision("kept", remote, source_topic, _IDENTITY))
            else:
                out.extend(self._delete(source_topic, remote))
        for d in out:
            _log.warning("source topic %s deleted: remote topic %s %s: %s", d.source_topic, d.topic, d.action, d.reason)
        return out

    def _delete(self, source_topic: str, remote: str) -> list[TopicDecision]:
        future = self._target.delete_topics([remote], operation_timeout=ADMIN_TIMEOUT_S)[remote]
        try:
            future.result(timeout=ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            err = kafka_error(exc)
            if isinstance(err, KafkaError) and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return []  # another process of the flow deleted it first
            return [TopicDecision("failed", remote, source_topic, f"delete: {exc}")]
        return [TopicDecision("deleted", remote, source_topic, "deleted on the source; sync_topic_deletions is on")]
