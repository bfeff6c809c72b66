"""Read-only admin queries shared by the client core and the runtime."""

from __future__ import annotations

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from replicator.errors import ReplicationError
from replicator.kafka.errors import kafka_error_reason

__all__ = ["ADMIN_TIMEOUT_S", "partition_counts"]

ADMIN_TIMEOUT_S = 30.0


def partition_counts(admin: AdminClient) -> dict[str, int]:
    """Every topic the cluster lists without an error, with its partition count."""
    try:
        md = admin.list_topics(timeout=ADMIN_TIMEOUT_S)
    except KafkaException as exc:
        raise ReplicationError(f"cannot list topics: {kafka_error_reason(exc)}") from exc
    return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}
