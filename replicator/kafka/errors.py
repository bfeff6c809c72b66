"""The one place that unwraps librdkafka's errors.

confluent-kafka raises ``KafkaException(KafkaError)``; callers decide on the ``KafkaError``'s code
(retriable, already exists, fenced) and show its human-readable reason, never the repr.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

__all__ = ["kafka_error", "kafka_error_reason", "AUTHORIZATION_CODES"]

# A broker's refusal: asking again changes nothing until an ACL is granted.
AUTHORIZATION_CODES = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    }
)


def kafka_error(exc: BaseException) -> KafkaError | None:
    """The ``KafkaError`` a ``KafkaException`` carries, or ``None`` when it carries none."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def kafka_error_reason(exc: BaseException) -> str:
    """librdkafka's human-readable reason (``Local: Broker transport failure``), not the repr."""
    err = kafka_error(exc)
    return str(err.str()) if err is not None else str(exc)
