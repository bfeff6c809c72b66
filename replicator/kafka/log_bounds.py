"""Where partitions' logs start and end, asked of the brokers: the one way mirrorlake does it.

Failover plans, failback scans, tail recovery, stop requests, stored positions and MM2 takeover all
need a partition's log start and end before they read; each used to open its own consumer and loop
over ``get_watermark_offsets``. These helpers give every caller the same contract: the brokers'
current answer (never librdkafka's cached value), a bounded timeout, and a partition whose topic is
gone either left out (``skip_missing``) or reported as an error naming the partition. A partition
whose leader is being elected (a topic created a moment ago, a broker restarting) is asked again
until the timeout: NOT_LEADER_FOR_PARTITION there is a moment, not an answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential

from replicator.kafka.clients import new_consumer
from replicator.kafka.errors import AUTHORIZATION_CODES, kafka_error
from replicator.kafka.settings import reader_config

__all__ = ["Bounds", "log_bounds", "partition_bounds", "topic_bounds", "throwaway_reader", "BOUNDS_TIMEOUT_S"]

_log = logging.getLogger(__name__)

BOUNDS_TIMEOUT_S = 10.0
Bounds = tuple[int, int]  # (log start offset, log end offset)
_LEADER_MOVING = frozenset((KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE))


def _leader_moving(exc: BaseException) -> bool:
    err = kafka_error(exc)
    return err is not None and err.code() in _LEADER_MOVING


def _leader_moving_or_unknown(exc: BaseException) -> bool:
    err = kafka_error(exc)
    return err is not None and (err.code() in _LEADER_MOVING or err.code() == KafkaError._UNKNOWN_PARTITION)


def _asked_again(moment: Callable[[BaseException], bool], timeout_s: float) -> Retrying:
    """Attempts, again while ``moment(error)`` says the error will pass, for up to ``timeout_s``;
    then the last error is raised."""
    return Retrying(
        retry=retry_if_exception(moment),
        stop=stop_after_delay(timeout_s),
        wait=wait_exponential(multiplier=0.1, max=1.0),
        reraise=True,
    )


def partition_bounds(
    consumer: Consumer, topic: str, partition: int, *, timeout_s: float = BOUNDS_TIMEOUT_S, listed: bool = False
) -> Bounds:
    """``(start, end)`` of one partition, the brokers' current answer, asked again while its leader
    moves (for up to ``timeout_s``). Raises the last ``KafkaException`` otherwise. ``listed``: the
    caller saw the partition in the metadata, so librdkafka's "unknown partition" is a broker that
    restarted a moment ago, asked again too (a state reader's start failed on it in the soak)."""
    for attempt in _asked_again(_leader_moving_or_unknown if listed else _leader_moving, timeout_s):
        with attempt:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=timeout_s, cached=False
            )
            return low, high
    raise AssertionError("unreachable: tenacity re-raises the last error")


@contextmanager
def throwaway_reader(conf: dict[str, Any], client_id: str) -> Iterator[Consumer]:
    """A read_committed consumer that only assigns, never commits, and is closed on exit."""
    consumer = new_consumer(reader_config(conf, client_id))
    try:
        yield consumer
    finally:
        consumer.close()


def log_bounds(
    consumer: Consumer,
    partitions: Iterable[tuple[str, int]],
    *,
    timeout_s: float = BOUNDS_TIMEOUT_S,
    skip_missing: bool = False,
) -> dict[tuple[str, int], Bounds]:
    """``(start, end)`` of each ``(topic, partition)``.

    ``skip_missing``: a partition that does not answer (typically: its topic was deleted) is left
    out and logged at INFO; otherwise its ``KafkaException`` reaches the caller.
    """
    out: dict[tuple[str, int], Bounds] = {}
    for topic, partition in partitions:
        try:
            low, high = partition_bounds(consumer, topic, partition, timeout_s=timeout_s)
        except KafkaException as exc:
            if not skip_missing:
                raise
            _log.info("no log bounds for %s[%d]: %s", topic, partition, exc)
            continue
        out[(topic, partition)] = (low, high)
    return out


def topic_bounds(consumer: Consumer, topic: str, *, timeout_s: float = BOUNDS_TIMEOUT_S) -> dict[int, Bounds] | None:
    """``(start, end)`` of every partition of ``topic``; ``None`` when the topic does not exist.

    Only the brokers' UNKNOWN_TOPIC_OR_PART means "does not exist". Any other error on the topic
    (a broker restarting, a leader being elected, no partitions listed yet) is asked again until
    ``timeout_s``, then raised as ``KafkaException``: callers read "no topic" as "nothing written
    yet", and an exactly-once flow that took a moment's error for that would copy everything again.
    """
    for attempt in _asked_again(_topic_moment, timeout_s):
        with attempt:
            meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
            if meta is None or (meta.error is not None and meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
                return None
            if meta.error is not None:
                raise KafkaException(meta.error)
            if not meta.partitions:
                raise KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE, f"{topic}: no partitions listed yet"))
            bounds = log_bounds(consumer, ((topic, p) for p in meta.partitions), timeout_s=timeout_s)
            return {p: b for (_t, p), b in bounds.items()}
    raise AssertionError("unreachable: tenacity re-raises the last error")


def _topic_moment(exc: BaseException) -> bool:
    """A topic-level error worth asking again: anything but a refusal (authorization) or a
    failure librdkafka calls fatal."""
    err = kafka_error(exc)
    return err is not None and not err.fatal() and err.code() not in AUTHORIZATION_CODES
