"""Reading a consumer group's committed offsets.

Through a consumer of the group (``committed``), never the admin API: librdkafka's
``ListConsumerGroupOffsets`` dereferences a NULL consumer group when the broker answers
NOT_COORDINATOR (librdkafka#5040, still open in 2.16), and kills the whole process with SIGSEGV.
That answer is routine: on a new cluster while ``__consumer_offsets`` is being created, and on
every cluster while a group's coordinator moves (a broker restart). A consumer that never
subscribes does not join the group, so reading its offsets leaves the group's members alone.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

__all__ = ["GroupOffset", "committed_offsets"]

_TIMEOUT_S = 30
# the group's coordinator is moving or loading (a new cluster, a broker restart): asked again
_COORDINATOR_MOVING = frozenset(
    {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE}
)


@dataclass(frozen=True)
class GroupOffset:
    topic: str
    partition: int
    offset: int
    metadata: str | None = None


def committed_offsets(conf: Mapping[str, Any], group: str, topics: Iterable[str] | None = None) -> list[GroupOffset]:
    """The group's committed offsets on the cluster of client settings ``conf`` (partitions
    without a commit are left out), over ``topics`` or every topic but Kafka's internal ones.

    Raises ``KafkaException`` when the cluster or the group's coordinator does not answer in time.
    """
    consumer = Consumer(
        {**conf, "group.id": group, "enable.auto.commit": False, "reconnect.backoff.max.ms": 1000, "log_level": 2}
    )
    try:
        metadata = consumer.list_topics(timeout=_TIMEOUT_S).topics
        names = [t for t in metadata if not t.startswith("__")] if topics is None else list(topics)
        partitions = [
            TopicPartition(name, p)
            for name in sorted(set(names))
            if name in metadata and metadata[name].error is None
            for p in sorted(metadata[name].partitions)
        ]
        if not partitions:
            return []
        committed = _committed(consumer, partitions, time.monotonic() + _TIMEOUT_S)
    finally:
        consumer.close()
    return [
        GroupOffset(tp.topic, tp.partition, tp.offset, tp.metadata or None)
        for tp in committed
        if tp.offset >= 0 and tp.error is None
    ]


def _committed(consumer: Consumer, partitions: list[TopicPartition], deadline: float) -> list[TopicPartition]:
    """``consumer.committed``, asked again (up to ``deadline``) while the group's coordinator moves."""
    delay = 0.2
    while True:
        try:
            return consumer.committed(partitions, timeout=max(1.0, deadline - time.monotonic()))
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if not isinstance(err, KafkaError) or err.code() not in _COORDINATOR_MOVING:
                raise
            if time.monotonic() + delay >= deadline:
                raise
            time.sleep(delay)
            delay = min(2.0, delay * 2)
