"""Publishing replication-state events to the state topic on a flow's target cluster.

The state topic is append-only and the source of truth of every lakehouse table. Events of one
partition of one flow share a key, so they keep their order in the state topic; callers that
need to know an event is durable pass ``on_durable``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from confluent_kafka import KafkaError, Message, Producer

from replicator.events import Event, encode

__all__ = ["StateLog", "event_key"]

_log = logging.getLogger(__name__)


def event_key(flow: str, topic: str | None = None, partition: int | None = None) -> bytes:
    """``flow`` or ``flow|topic|partition``: the unit whose events must stay in order."""
    if topic is None:
        return flow.encode()
    return f"{flow}|{topic}|{partition}".encode()


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

    def emit(self, event: Event, key: bytes, on_durable: Callable[[], None] | None = None) -> None:
        def delivered(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                self.failed = err
                _log.error("state event %s (%s) not written: %s", event.event_id, event.event_type, err.str())
            elif on_durable is not None:
                on_durable()

        self._producer.produce(self._topic, value=encode(event), key=key, on_delivery=delivered)
