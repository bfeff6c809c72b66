"""Measuring a source partition's unreplicated tail by reading it: records, bytes, oldest timestamp.

An offset difference counts transaction markers and aborted records as records; reading the tail
``read_committed`` counts only what a consumer would see, which is what a failover can lose.
Bytes are the sum of key and value lengths (headers excluded), the measure ``FlowStats.bytes``
uses. Reads are bounded per call (``budget_records`` over all partitions, ``timeout_s``): a tail
that does not fit is reported as not measured (None), never as a guess.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from replicator.kafka.clients import new_consumer
from replicator.kafka.settings import BOUNDED_READ_WAIT_S, reader_config

__all__ = ["Tail", "TailReader"]

TP = tuple[str, int]


@dataclass(frozen=True)
class Tail:
    records: int
    bytes: int
    oldest_timestamp_ms: int | None


class TailReader:
    """One assign-only read_committed consumer, reused across observations."""

    def __init__(self, client_conf: dict[str, Any], name: str) -> None:
        self._conf = reader_config(client_conf, name)
        self._consumer: Consumer | None = None

    def measure(
        self, ranges: dict[TP, tuple[int, int]], *, budget_records: int = 200_000, timeout_s: float = 10.0
    ) -> dict[TP, Tail]:
        """The tail ``[start, end)`` of each partition; partitions not fully read are left out."""
        out: dict[TP, Tail] = {tp: Tail(0, 0, None) for tp, (start, end) in ranges.items() if start >= end}
        todo = {tp: r for tp, r in ranges.items() if r[0] < r[1]}
        if not todo:
            return out
        if sum(end - start for start, end in todo.values()) > budget_records:
            return out  # too far behind to read now: the offsets still bound it
        if self._consumer is None:
            self._consumer = new_consumer(self._conf)
        consumer = self._consumer
        counts: dict[TP, list[int]] = {tp: [0, 0] for tp in todo}
        oldest: dict[TP, int] = {}
        consumer.assign([TopicPartition(t, p, start) for (t, p), (start, _end) in todo.items()])
        try:
            pending = set(todo)
            deadline = time.monotonic() + timeout_s
            while pending and time.monotonic() < deadline:
                for msg in consumer.consume(10_000, timeout=BOUNDED_READ_WAIT_S):
                    if msg.error() is not None:
                        continue
                    tp = (msg.topic(), msg.partition())
                    if tp not in pending or msg.offset() >= todo[tp][1]:  # type: ignore[index,operator]
                        continue
                    value, key = msg.value(), msg.key()
                    counts[tp][0] += 1  # type: ignore[index]
                    counts[tp][1] += (len(value) if value else 0) + (len(key) if key else 0)  # type: ignore[index]
                    if tp not in oldest and msg.timestamp()[0]:
                        oldest[tp] = msg.timestamp()[1]  # type: ignore[index]
                for pos in consumer.position([TopicPartition(t, p) for t, p in pending]):
                    if pos.offset >= todo[(pos.topic, pos.partition)][1]:
                        pending.discard((pos.topic, pos.partition))
        except KafkaException:
            return out  # the source is failing: not measured
        finally:
            consumer.unassign()
        for tp in todo:
            if tp not in pending:
                out[tp] = Tail(counts[tp][0], counts[tp][1], oldest.get(tp))
        return out

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
