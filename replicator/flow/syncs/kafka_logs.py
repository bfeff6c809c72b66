"""``PartitionLogs`` over a real cluster: the port the flow's decisions read partitions through.

Log bounds from a throwaway read_committed consumer, records from a ``RangeReader`` (made on first
read, closed by ``close``), topic ids from one DescribeTopics request. Each record is hashed as
replication must preserve it (``record_hash``: key, value, headers without the provenance header,
timestamp).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from replicator.flow.core.logs import TP, Bounds, LogRecord
from replicator.kafka.admin import admin_client
from replicator.kafka.log_bounds import log_bounds, throwaway_reader
from replicator.metadata.topic_ids import topic_ids
from replicator.tasks.audit import RangeReader, record_hash

__all__ = ["KafkaLogs", "kafka_logs"]


class KafkaLogs:
    """One cluster's partitions as ``PartitionLogs`` (``conf``: its client settings)."""

    def __init__(self, conf: dict[str, Any], client_id: str) -> None:
        self._conf = dict(conf)
        self._client_id = client_id
        self._reader: RangeReader | None = None

    def bounds(self, keys: Sequence[TP]) -> dict[TP, Bounds]:
        if not keys:
            return {}
        with throwaway_reader(self._conf, self._client_id) as consumer:
            return log_bounds(consumer, keys, skip_missing=True)

    def read(self, topic: str, partition: int, start: int, end: int) -> list[LogRecord]:
        if self._reader is None:
            self._reader = RangeReader(self._conf, self._client_id)
        out = []
        for m in self._reader.read(topic, partition, start, end):
            ts = m.timestamp()[1]
            headers = m.headers()
            out.append(LogRecord(m.offset(), record_hash(m.key(), m.value(), headers, ts), ts, headers))  # type: ignore[arg-type]
        return out

    def topic_ids(self, topics: Sequence[str]) -> dict[str, str]:
        return topic_ids(admin_client(self._conf), list(topics))

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None


@contextmanager
def kafka_logs(conf: dict[str, Any], client_id: str) -> Iterator[KafkaLogs]:
    """``KafkaLogs`` closed on exit."""
    logs = KafkaLogs(conf, client_id)
    try:
        yield logs
    finally:
        logs.close()
