"""The ``TopicRecreated`` event, as a flow states it for a topic of either side."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, OffsetSpec

from replicator.config import FlowConfig
from replicator.events import TopicRecreated, fact_event_id
from replicator.kafka.admin import offsets_of

__all__ = ["recreated_event", "stops_on"]


def recreated_event(
    flow: FlowConfig,
    replicator_id: str,
    admin: AdminClient,
    *,
    side: str,
    topic: str,
    source_topic: str,
    previous_topic_id: str | None,
    topic_id: str,
    partitions: int,
    policy: str,
    noticed: str,
) -> TopicRecreated:
    """``topic`` (on the ``side`` cluster, which ``admin`` reaches) is ``topic_id`` now, with its
    partitions' log bounds as they are (-1: unreadable). Its id is the fact's own, whichever process
    of the flow says it, so readers count it once."""
    keys = [(topic, p) for p in range(partitions)]
    starts = offsets_of(admin, keys, OffsetSpec.earliest(), skip_failed=True)
    ends = offsets_of(admin, keys, OffsetSpec.latest(), skip_failed=True)
    fact = (topic, topic_id) if side == "source" else ("target", topic, topic_id)
    return TopicRecreated(
        flow=flow.name,
        replicator_id=replicator_id,
        event_id=fact_event_id(flow.name, "topic_recreated", *fact),
        source_cluster=flow.source,
        target_cluster=flow.target,
        side=side,
        topic=topic,
        source_topic=source_topic,
        previous_topic_id=previous_topic_id,
        topic_id=topic_id,
        partitions=partitions,
        log_start_offsets=tuple(starts.get(k, -1) for k in keys),
        log_end_offsets=tuple(ends.get(k, -1) for k in keys),
        policy=policy,
        noticed=noticed,
    )


def stops_on(flow: FlowConfig, side: str) -> str | None:
    """Why ``flow`` stops on a re-created topic of ``side`` (for its error), None where it copies on:
    exactly-once flows always stop, others as ``on_topic_recreated`` / ``on_remote_topic_recreated`` say."""
    if flow.exactly_once:
        return "an exactly-once flow"
    if side == "source":
        return "on_topic_recreated: stop" if flow.on_topic_recreated == "stop" else None
    return "on_remote_topic_recreated: stop" if flow.on_remote_topic_recreated == "stop" else None
