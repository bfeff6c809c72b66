"""Read-only admin queries shared by the client core and the runtime."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ListOffsetsResultInfo, OffsetSpec

from replicator.errors import ReplicationError
from replicator.kafka.clients import new_admin
from replicator.kafka.errors import kafka_error_reason

__all__ = ["ADMIN_TIMEOUT_S", "admin_client", "listed_offsets", "offsets_of", "partition_counts"]

_log = logging.getLogger(__name__)
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


def listed_offsets(
    admin: AdminClient,
    partitions: Iterable[tuple[str, int]],
    spec: OffsetSpec,
    *,
    isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
    timeout_s: float = ADMIN_TIMEOUT_S,
    skip_failed: bool = False,
) -> dict[tuple[str, int], ListOffsetsResultInfo]:
    """Each partition's offset for ``spec`` (log start, end, newest timestamp), in one ListOffsets
    request on the admin's own connection (a consumer's would queue behind its long-polling fetches).
    ``isolation``: READ_COMMITTED asks for the last stable offset. A partition that fails raises its
    ``KafkaException``, or is left out with ``skip_failed`` (a deleted topic: its absence is the news)."""
    asked = {TopicPartition(t, p): spec for t, p in partitions}
    if not asked:
        return {}
    out: dict[tuple[str, int], ListOffsetsResultInfo] = {}
    for tp, future in admin.list_offsets(asked, isolation_level=isolation, request_timeout=timeout_s).items():
        try:
            out[(tp.topic, tp.partition)] = future.result(timeout=timeout_s)
        except KafkaException as exc:
            if not skip_failed:
                raise
            _log.debug("offsets of %s[%d]: %s", tp.topic, tp.partition, kafka_error_reason(exc))
    return out


def offsets_of(
    admin: AdminClient, partitions: Iterable[tuple[str, int]], spec: OffsetSpec, **options: Any
) -> dict[tuple[str, int], int]:
    """``listed_offsets`` (same ``options``), the offsets only."""
    return {key: info.offset for key, info in listed_offsets(admin, partitions, spec, **options).items()}
