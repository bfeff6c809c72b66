"""Reading a consumer group's committed offsets through the admin API."""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient

__all__ = ["GroupOffset", "committed_offsets"]

_TIMEOUT_S = 30


@dataclass(frozen=True)
class GroupOffset:
    topic: str
    partition: int
    offset: int
    metadata: str | None = None


def committed_offsets(admin: AdminClient, group: str) -> list[GroupOffset]:
    """The group's committed offsets (partitions without a commit are left out)."""
    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=_TIMEOUT_S)
    result = futures[group].result(timeout=_TIMEOUT_S)
    return [
        GroupOffset(tp.topic, tp.partition, tp.offset, tp.metadata or None)
        for tp in result.topic_partitions or []
        if tp.offset >= 0 and tp.error is None
    ]
