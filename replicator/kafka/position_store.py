"""Source positions of exactly-once flows, kept in a compacted topic on the target.

Kafka cannot commit consumer offsets for a topic that does not exist on the committing cluster,
so a flow cannot put ``orders@A`` positions into the target's ``__consumer_offsets``. Like
Kafka Connect's offset storage for exactly-once source connectors, each position is a record
(key ``<flow>|<topic>|<partition>``, value the next source offset in ASCII) written in the same
transaction as the records it covers; the newest committed record per key is the position.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

from replicator.errors import ReplicationError
from replicator.kafka.clients import new_consumer
from replicator.kafka.errors import AUTHORIZATION_CODES, kafka_error_reason
from replicator.kafka.log_bounds import topic_bounds
from replicator.kafka.settings import BOUNDED_READ_WAIT_S, RDKAFKA_LOG

__all__ = ["PositionStore", "READ_TIMEOUT_S"]

_log = logging.getLogger(__name__)
READ_TIMEOUT_S = 60.0  # a read of the positions at an assignment: past a broker's restart, not forever


class PositionStore:
    """One flow's positions in ``topic``. ``topic_exists``: the caller made sure the topic exists
    (an exactly-once flow creates it as it starts), so an answer that it does not is a broker's
    moment (a restart), asked again until ``timeout_s``, never "nothing committed"."""

    def __init__(
        self,
        topic: str,
        flow: str,
        target_conf: dict[str, str],
        *,
        topic_exists: bool = False,
        timeout_s: float = READ_TIMEOUT_S,
    ) -> None:
        self._topic = topic
        self._flow = flow
        self._conf = target_conf
        self._topic_exists = topic_exists
        self._timeout_s = timeout_s

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
        """The last committed position of each wanted partition (absent: never committed).

        Raises ``ReplicationError`` rather than answer from part of the topic: a position missed
        is a partition copied again from its start. Only the end of a partition ends its read; a
        moment's error (a broker restarting) is read past until the store's ``timeout_s``.
        """
        if not wanted:
            return {}
        keys = {self._key(t, p): (t, p) for t, p in wanted}
        consumer = new_consumer(
            {**self._conf, "group.id": f"mirrorlake.positions-reader.{self._flow}", "enable.auto.commit": False,
             "isolation.level": "read_committed", "enable.partition.eof": True, "logger": RDKAFKA_LOG}
        )  # fmt: skip
        try:
            bounds = self._bounds(consumer)
            if bounds is None:
                _log.info("flow %s: no positions topic %s yet: nothing committed", self._flow, self._topic)
                return {}
            ends = {p: high for p, (low, high) in bounds.items() if high > low}
            consumer.assign([TopicPartition(self._topic, p, bounds[p][0]) for p in ends])
            return self._read_to_ends(consumer, ends, keys)
        except KafkaException as exc:
            raise ReplicationError(
                f"flow {self._flow}: cannot read positions from {self._topic}: {kafka_error_reason(exc)}"
            ) from exc
        finally:
            consumer.close()

    def _bounds(self, consumer: Consumer) -> dict[int, tuple[int, int]] | None:
        if not self._topic_exists:
            return topic_bounds(consumer, self._topic, timeout_s=self._timeout_s)
        retrying = Retrying(
            retry=retry_if_result(lambda bounds: bounds is None),
            stop=stop_after_delay(self._timeout_s),
            wait=wait_fixed(0.5),
            retry_error_callback=lambda _state: None,
        )
        bounds = retrying(topic_bounds, consumer, self._topic, timeout_s=self._timeout_s)
        if bounds is None:
            raise ReplicationError(
                f"flow {self._flow}: the target reports no positions topic {self._topic} for "
                f"{self._timeout_s:g} s after the flow made sure it exists; not starting from scratch"
            )
        return bounds

    def _read_to_ends(
        self, consumer: Consumer, ends: dict[int, int], keys: dict[bytes, tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        found: dict[tuple[str, int], int] = {}
        remaining = set(ends)
        last_error: KafkaError | None = None
        deadline = time.monotonic() + self._timeout_s
        while remaining:
            if time.monotonic() > deadline:
                raise ReplicationError(
                    f"flow {self._flow}: reading positions from {self._topic} did not reach the end of "
                    f"partition(s) {sorted(remaining)} within {self._timeout_s:g} s"
                    + (f" (last error: {last_error.str()})" if last_error is not None else "")
                )
            for msg in consumer.consume(1000, timeout=BOUNDED_READ_WAIT_S):
                partition = msg.partition()
                if (err := msg.error()) is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        remaining.discard(partition)  # type: ignore[arg-type]
                    elif err.fatal() or err.code() in AUTHORIZATION_CODES:
                        raise KafkaException(err)  # the flow stops, naming the ACL to grant
                    else:
                        last_error = err
                    continue
                if (key := msg.key()) in keys and (value := msg.value()) is not None:
                    found[keys[key]] = int(value)
                if partition in ends and (msg.offset() or 0) + 1 >= ends[partition]:
                    remaining.discard(partition)
        return found


def _ignore(_err: object, _msg: object) -> None:
    return None
