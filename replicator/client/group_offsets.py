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
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential, wait_fixed

from replicator.kafka.clients import new_consumer
from replicator.kafka.errors import kafka_error
from replicator.kafka.positions_guard import real_positions

__all__ = ["GroupOffset", "committed_offsets", "commit_offsets", "COORDINATOR_MOVING"]

_TIMEOUT_S = 30
COORDINATOR_MOVING = frozenset(
    (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE)
)


def _coordinator_busy(exc: BaseException) -> bool:
    err = kafka_error(exc) if isinstance(exc, KafkaException) else None
    return isinstance(err, KafkaError) and (err.retriable() or err.code() in COORDINATOR_MOVING)


def commit_offsets(consumer: Consumer, offsets: list[TopicPartition], *, timeout_s: float = _TIMEOUT_S) -> None:
    """Commit ``offsets`` for ``consumer``'s group and wait for the answer, asking again while the
    group's coordinator loads or moves (a new cluster, a broker restart) for up to ``timeout_s``.

    Raises the last ``KafkaException`` when the error is not retriable or the time is up.
    """
    retrying = Retrying(
        retry=retry_if_exception(_coordinator_busy),
        stop=stop_after_delay(timeout_s),
        wait=wait_fixed(0.2),
        reraise=True,
    )
    real_positions(offsets, "offset commit")
    for attempt in retrying:
        with attempt:
            consumer.commit(offsets=offsets, asynchronous=False)


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
    consumer = new_consumer(
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
    retrying = Retrying(
        retry=retry_if_exception(_coordinator_busy),
        stop=stop_after_delay(max(0.0, deadline - time.monotonic())),
        wait=wait_exponential(multiplier=0.2, max=2.0),
        reraise=True,
    )
    for attempt in retrying:
        with attempt:
            return consumer.committed(partitions, timeout=max(1.0, deadline - time.monotonic()))
    raise AssertionError("unreachable: tenacity re-raises the last error")
