"""The simulated clusters' partitions: what the source holds and what the target holds, as truth.

A source record is data, a transaction marker or an aborted record (a read_committed consumer
returns only data, and its position passes the others). A target record is a copy: it knows the
source record it holds and the process incarnation that wrote it, and when it landed. Both sides
are read by the flow's core through ``SimLogs`` (the ``PartitionLogs`` port), as Kafka is by
``KafkaLogs``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from replicator.flow.core.logs import TP, Bounds, LogRecord

__all__ = ["SourceRecord", "Copy", "SourceLog", "TargetLog", "SimLogs", "content_hash"]

DATA, MARKER, ABORTED = "data", "marker", "aborted"


def content_hash(topic: str, partition: int, seq: int) -> int:
    """The content hash of the ``seq``-th record produced to a partition (unique per record)."""
    digest = hashlib.blake2b(f"{topic}/{partition}/{seq}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


@dataclass(frozen=True)
class SourceRecord:
    offset: int
    kind: str
    hash: int
    timestamp: int


@dataclass(frozen=True)
class Copy:
    """A record on the target: a copy of source ``upstream`` written by ``writer`` (slot, incarnation)."""

    offset: int
    upstream: int
    hash: int
    timestamp: int
    writer: tuple[int, int]
    produced_step: int
    landed_step: int


@dataclass
class SourceLog:
    """One source topic's partitions."""

    topic: str
    topic_id: str
    partitions: list[list[SourceRecord]] = field(default_factory=list)

    def append(self, partition: int, kind: str, timestamp: int) -> SourceRecord:
        records = self.partitions[partition]
        seq = len(records)
        record = SourceRecord(seq, kind, content_hash(self.topic, partition, seq), timestamp)
        records.append(record)
        return record

    def end(self, partition: int) -> int:
        return len(self.partitions[partition])

    def data_from(self, partition: int, position: int, most: int) -> tuple[list[SourceRecord], int]:
        """Up to ``most`` data records from ``position`` on, and the position after the last one read
        (past markers and aborted records, as a read_committed fetch moves)."""
        records = self.partitions[partition]
        out: list[SourceRecord] = []
        while position < len(records) and len(out) < most:
            if records[position].kind == DATA:
                out.append(records[position])
            position += 1
        return out, position


@dataclass
class TargetLog:
    """The remote topic's partitions."""

    topic: str
    topic_id: str
    partitions: list[list[Copy]] = field(default_factory=list)

    def land(
        self, partition: int, upstream: int, hash_: int, timestamp: int, writer: tuple[int, int], steps: tuple[int, int]
    ) -> int:
        """Append a copy of source ``upstream`` by ``writer``, produced and landed at ``steps``."""
        records = self.partitions[partition]
        records.append(Copy(len(records), upstream, hash_, timestamp, writer, *steps))
        return len(records) - 1


class SimLogs:
    """``PartitionLogs`` over one simulated topic (source or target)."""

    def __init__(self, log: SourceLog | TargetLog) -> None:
        self._log = log

    def bounds(self, keys: Sequence[TP]) -> dict[TP, Bounds]:
        return {
            (t, p): (0, len(self._log.partitions[p]))
            for t, p in keys
            if t == self._log.topic and 0 <= p < len(self._log.partitions)
        }

    def read(self, topic: str, partition: int, start: int, end: int) -> list[LogRecord]:
        if topic != self._log.topic:
            return []
        out = []
        for r in self._log.partitions[partition][max(0, start) : end]:
            if isinstance(r, Copy) or r.kind == DATA:
                out.append(LogRecord(r.offset, r.hash, r.timestamp, None))
        return out

    def topic_ids(self, topics: Sequence[str]) -> dict[str, str]:
        return {self._log.topic: self._log.topic_id} if self._log.topic in topics else {}
