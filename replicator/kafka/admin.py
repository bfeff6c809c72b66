"""Read-only admin queries shared by the client core and the runtime."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from replicator.errors import ReplicationError
from replicator.kafka.clients import new_admin
from replicator.kafka.errors import kafka_error_reason

__all__ = ["ADMIN_TIMEOUT_S", "admin_client", "partition_counts"]

ADMIN_TIMEOUT_S = 10.0  # then the caller treats the cluster as not answering (the flow backs off)


def partition_counts(admin: AdminClient) -> dict[str, int]:
    """Every topic the cluster lists without an error, with its partition count."""
    try:
        md = admin.list_topics(timeout=ADMIN_TIMEOUT_S)
    except KafkaException as exc:
        raise ReplicationError(f"cannot list topics: {kafka_error_reason(exc)}") from exc
    return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}


def admin_client(conf: Mapping[str, Any]) -> AdminClient:
    """An ``AdminClient`` that reconnects within a second and keeps librdkafka's log to CRITICAL.

    An AdminClient hands log lines to a Python ``logger`` only when polled, which admin calls do
    not do; without a level, librdkafka prints every refused connection to stderr while a broker
    is down. Its failures reach the caller as exceptions with librdkafka's reason instead.
    """
    return new_admin({"reconnect.backoff.max.ms": 1000, "log_level": 2, **conf})
