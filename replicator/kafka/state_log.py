"""Publishing replication-state events to the state topic on a flow's target cluster.

The state topic is append-only and the source of truth of every lakehouse table. Events of one
partition of one flow share a key, so they keep their order in the state topic; callers that
need to know an event is durable pass ``on_durable``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from confluent_kafka import KafkaError, Message, Producer

from replicator.events import (
    AuditWindow,
    Checkpoint,
    ConfigSnapshot,
    Event,
    GroupSync,
    Heartbeat,
    OffsetSync,
    Watermark,
    encode,
)

__all__ = ["StateLog", "event_key", "key_of"]

_log = logging.getLogger(__name__)


def event_key(flow: str, topic: str | None = None, partition: int | None = None) -> bytes:
    """``flow`` or ``flow|topic|partition``: the unit whose events must stay in order."""
    if topic is None:
        return flow.encode()
    return f"{flow}|{topic}|{partition}".encode()


def key_of(event: Event) -> bytes:
    """The state-topic key of an event: per source partition, per group, per topic, or per flow.

    The one rule every emitter (and the MM2 importer) follows, so each unit keeps its order.
    """
    if isinstance(event, OffsetSync | Watermark | AuditWindow):
        return event_key(event.flow, event.source_topic, event.partition)
    if isinstance(event, Checkpoint | GroupSync):
        return f"{event.flow}|{event.group}".encode()
    if isinstance(event, ConfigSnapshot):
        return f"{event.flow}|{event.source_topic}".encode()
    if isinstance(event, Heartbeat):
        return f"{event.flow}|heartbeats".encode()
    return event_key(event.flow)


class StateLog:
    """Writes events through a producer the caller owns (the flow's target producer)."""

    def __init__(self, producer: Producer, topic: str) -> None:
        self._producer = producer
        self._topic = topic
        self.failed: KafkaError | None = None

    @property
    def topic(self) -> str:
        return self._topic

    @property
    def producer(self) -> Producer:
        return self._producer

    def emit(self, event: Event, on_durable: Callable[[], None] | None = None) -> None:
        """Produce ``event`` keyed by ``key_of``; ``on_durable`` runs once the state topic acknowledged it."""

        def delivered(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                self.failed = err
                _log.error("state event %s (%s) not written: %s", event.event_id, event.event_type, err.str())
            elif on_durable is not None:
                on_durable()

        self._producer.produce(self._topic, value=encode(event), key=key_of(event), on_delivery=delivered)

    def flushed(self, timeout_s: float = 30.0) -> bool:
        """Whether every event emitted so far was acknowledged within ``timeout_s`` (producing to a
        topic that does not exist fails in a delivery report, not in ``produce``)."""
        return self._producer.flush(timeout_s) == 0 and self.failed is None
