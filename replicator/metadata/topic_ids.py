"""Kafka's topic ids: what tells a topic apart from one deleted and created again under its name."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Sequence

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient

from replicator.kafka.admin import ADMIN_TIMEOUT_S
from replicator.kafka.errors import kafka_error

__all__ = ["topic_ids"]


def topic_ids(admin: AdminClient, topics: Sequence[str], *, timeout_s: float = ADMIN_TIMEOUT_S) -> dict[str, str]:
    """Each existing topic's id (Kafka's Uuid, base64), in one DescribeTopics request; a topic that
    does not exist (deleted, not yet re-created) is left out. Other failures raise ``KafkaException``,
    an answer that does not come in time too (``_TIMED_OUT``: a broker restarting, which callers
    wait out as an outage; the future's own ``TimeoutError`` had ended a flow in the soak), naming
    the topic whether the future's wait or librdkafka's own request timeout ran out first."""
    if not topics:
        return {}
    futures = admin.describe_topics(TopicCollection(sorted(set(topics))), request_timeout=timeout_s)
    out: dict[str, str] = {}
    for name, future in futures.items():
        try:
            description = future.result(timeout=timeout_s)
        except KafkaException as exc:
            err = kafka_error(exc)
            if isinstance(err, KafkaError) and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            if isinstance(err, KafkaError) and err.code() == KafkaError._TIMED_OUT:
                raise _not_answered(name, timeout_s, err.str()) from exc
            raise
        except concurrent.futures.TimeoutError as exc:
            raise _not_answered(name, timeout_s) from exc
        out[name] = str(description.topic_id)
    return out


def _not_answered(topic: str, timeout_s: float, said: str | None = None) -> KafkaException:
    reason = f"DescribeTopics of {topic} not answered within {timeout_s:g} s" + (f" ({said})" if said else "")
    return KafkaException(KafkaError(KafkaError._TIMED_OUT, reason, retriable=True))
