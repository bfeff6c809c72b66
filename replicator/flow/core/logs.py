"""The port through which the flow's decisions read a cluster's partitions.

``replicator.flow.syncs.kafka_logs.KafkaLogs`` reads real brokers; the simulator reads its model.
A decision never asks a cluster anything else: log bounds, records in offset order (with the
content hash replication preserves, ``replicator.tasks.audit.record_hash``), topic ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Headers", "LogRecord", "PartitionLogs", "TP", "Bounds", "hashed_range"]

TP = tuple[str, int]
Bounds = tuple[int, int]  # a partition's [log start, log end)
Headers = list[tuple[str, bytes | None]] | None

_CHUNK = 20_000  # records per read: memory holds hashes, not records


@dataclass(frozen=True)
class LogRecord:
    """One record as recovery sees it: its offset, content hash, timestamp and headers."""

    offset: int
    hash: int
    timestamp: int
    headers: Headers = None


class PartitionLogs(Protocol):
    """One cluster's partitions, read committed."""

    def bounds(self, keys: Sequence[TP]) -> dict[TP, Bounds]:
        """Each partition's ``[log start, log end)``; a partition that does not exist is left out."""
        ...

    def read(self, topic: str, partition: int, start: int, end: int) -> list[LogRecord]:
        """Records of ``[start, end)`` in offset order (markers and aborted records never appear); a
        read may stop short (a timeout): the caller goes on from the last offset returned."""
        ...

    def topic_ids(self, topics: Sequence[str]) -> dict[str, str]:
        """The id of each of ``topics`` that exists now."""
        ...


def hashed_range(logs: PartitionLogs, topic: str, partition: int, start: int, end: int) -> list[LogRecord]:
    """Every record of ``[start, end)`` a read returns, in chunks; stops at the first empty read."""
    out: list[LogRecord] = []
    position = start
    while position < end:
        records = logs.read(topic, partition, position, min(end, position + _CHUNK))
        if not records:
            break
        out.extend(records)
        position = records[-1].offset + 1
    return out
