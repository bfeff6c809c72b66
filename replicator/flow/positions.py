"""Source positions of exactly-once flows, kept in a compacted topic on the target.

Kafka cannot commit consumer offsets for a topic that does not exist on the committing cluster,
so a flow cannot put ``orders@A`` positions into the target's ``__consumer_offsets``. Like
Kafka Connect's offset storage for exactly-once source connectors, each position is a record
(key ``<flow>|<topic>|<partition>``, value the next source offset in ASCII) written in the same
transaction as the records it covers; the newest committed record per key is the position.
"""

from __future__ import annotations

import logging

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from replicator.errors import ReplicationError
from replicator.kafka.log_bounds import topic_bounds
from replicator.kafka.settings import BOUNDED_READ_WAIT_S, RDKAFKA_LOG

__all__ = ["PositionStore"]

_log = logging.getLogger(__name__)


class PositionStore:
    def __init__(self, topic: str, flow: str, target_conf: dict[str, str]) -> None:
        self._topic = topic
        self._flow = flow
        self._conf = target_conf

    def _key(self, topic: str, partition: int) -> bytes:
        return f"{self._flow}|{topic}|{partition}".encode()

    def write(self, producer: Producer, positions: dict[tuple[str, int], int]) -> None:
        """Produce positions into the producer's open transaction."""
        for (topic, partition), offset in positions.items():
            # its own (empty) callback: the producer's default one is for copied records only;
            # a failed write fails the transaction's commit
            producer.produce(
                self._topic, key=self._key(topic, partition), value=str(offset).encode(), on_delivery=_ignore
            )

    def read(self, wanted: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The last committed position of each wanted partition (absent: never committed)."""
        if not wanted:
            return {}
        keys = {self._key(t, p): (t, p) for t, p in wanted}
        consumer = Consumer(
            {**self._conf, "group.id": f"mirrorlake.positions-reader.{self._flow}", "enable.auto.commit": False,
             "isolation.level": "read_committed", "enable.partition.eof": True, "logger": RDKAFKA_LOG}
        )  # fmt: skip
        try:
            bounds = topic_bounds(consumer, self._topic, timeout_s=30) or {}  # no topic yet: nothing committed
            parts = [TopicPartition(self._topic, p, low) for p, (low, high) in bounds.items() if high > low]
            found: dict[tuple[str, int], int] = {}
            remaining = {tp.partition for tp in parts}
            consumer.assign(parts)
            while remaining:
                for msg in consumer.consume(1000, timeout=BOUNDED_READ_WAIT_S):
                    if msg.error():
                        remaining.discard(msg.partition())  # end of partition
                    elif (key := msg.key()) in keys and (value := msg.value()) is not None:
                        found[keys[key]] = int(value)
            return found
        except KafkaException as exc:
            raise ReplicationError(f"flow {self._flow}: cannot read positions from {self._topic}: {exc}") from exc
        finally:
            consumer.close()


def _ignore(_err: object, _msg: object) -> None:
    return None
