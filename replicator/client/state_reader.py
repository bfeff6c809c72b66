"""Reading the state topic back: every event up to the current end, bad records reported and skipped.

The state topic is the source of truth, so every reader of it (checkpoints, the translation API,
the MM2 importer's tests, audits) reads through here. A record that does not decode (foreign bytes,
an unknown fingerprint from a newer mirrorlake, a truncated body) or decodes to an event that names
nothing real (``replicator.events.validity``: partition -1, an illegal topic name) is logged with
its coordinates, counted in ``bad``, and skipped: one bad record never stops a reader, and never
reaches Kafka.

``StateLogFollower`` keeps its consumer and returns only what arrived since its last call, so a
long-running task pays for each event once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

from replicator.errors import EventDecodeError, InvalidEventError, ReplicationError
from replicator.events import EVENT_TYPES, Event, registry
from replicator.events.codec import decode_record, header_fingerprint
from replicator.kafka.clients import new_consumer
from replicator.kafka.log_bounds import partition_bounds
from replicator.kafka.settings import BOUNDED_READ_WAIT_S, reader_config

__all__ = ["BadEvent", "StateRead", "StateLogFollower", "read_state_log"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BadEvent:
    """A state-topic record that is not a readable event, and why."""

    topic: str
    partition: int
    offset: int
    reason: str


@dataclass
class StateRead:
    events: list[Event] = field(default_factory=list)
    bad: list[BadEvent] = field(default_factory=list)


class StateLogFollower:
    """Reads one cluster's state topic from the beginning (or ``start_offsets``), new events per ``poll``.

    ``event_types`` limits decoding to those types (others are skipped by fingerprint, cheaply).
    Reads ``read_committed``: events of an aborted exactly-once transaction never count.
    """

    def __init__(
        self,
        client_conf: dict[str, Any],
        topic: str,
        *,
        event_types: Collection[str] | None = None,
        name: str = "state-reader",
        start_offsets: Mapping[int, int] | None = None,
    ) -> None:
        self._topic = topic
        self._start = dict(start_offsets or {})
        reg = registry()
        wanted = set(event_types) if event_types is not None else set(reg.event_types())
        unknown = wanted - set(EVENT_TYPES)
        if unknown:
            raise ValueError(f"unknown event types: {', '.join(sorted(unknown))}")
        self._wanted_fps = {v.fingerprint for t in wanted for v in reg.versions(t)}
        self._known_fps = {v.fingerprint for t in reg.event_types() for v in reg.versions(t)}
        self._conf, self._name = client_conf, name
        self._consumer = new_consumer(reader_config(client_conf, name))
        self._assigned: set[int] = set()
        self._positions: dict[int, int] = {}

    def _new_partitions(self, timeout_s: float) -> list[int]:
        meta = self._consumer.list_topics(self._topic, timeout=timeout_s).topics.get(self._topic)
        if meta is None or meta.error is not None:
            return []  # no state topic yet: nothing was emitted
        return [p for p in meta.partitions if p not in self._assigned]

    def _assign(self, new: list[int]) -> None:
        """Assign at the position reached (after a reset), else the start offset, else the beginning."""
        if new:
            for p in new:
                if p in self._start:
                    self._positions.setdefault(p, self._start[p])
            self._consumer.incremental_assign(
                [TopicPartition(self._topic, p, self._positions.get(p, OFFSET_BEGINNING)) for p in new]
            )
            self._assigned.update(new)

    def _reset(self) -> None:
        """A new consumer after a failed read: one whose connections went bad in an outage (a frozen
        broker) can keep failing every request after the cluster is back. Positions are kept."""
        self._consumer.close()
        self._consumer = new_consumer(reader_config(self._conf, self._name))
        self._assigned.clear()

    def poll(self, timeout_s: float = 30.0) -> StateRead:
        """Everything appended since the last call, up to the end offsets seen at the start of this one.

        Returns early only when nothing arrives for ``timeout_s`` (an open transaction holds the
        end back: read_committed stops at the last stable offset); the next call goes on from there.
        A long log is read to its end however long that takes: a deadline on the whole read would
        return part of it, and a reader would take an old checkpoint for the latest.
        """
        try:
            new = self._new_partitions(timeout_s)
            # end offsets asked before new partitions are assigned: a broker answers a connection's
            # requests in order, so one behind a fetch's long poll would wait out fetch.wait.max.ms;
            # listed (metadata named them): "unknown partition" is a broker that just restarted
            ends = {
                p: partition_bounds(self._consumer, self._topic, p, timeout_s=timeout_s, listed=True)[1]
                for p in sorted(self._assigned | set(new))
            }
            self._assign(new)
        except KafkaException as exc:
            self._reset()
            raise ReplicationError(f"cannot read state topic {self._topic}: {exc}") from exc
        out = StateRead()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and any(self._positions.get(p, 0) < end for p, end in ends.items()):
            messages = self._consumer.consume(10_000, timeout=BOUNDED_READ_WAIT_S)
            if not messages:
                self._advance_past_markers(ends)
                continue
            deadline = time.monotonic() + timeout_s  # progress: the wait starts again
            for msg in messages:
                if msg.error() is not None:
                    _log.warning("state topic %s: %s", self._topic, msg.error())
                    continue
                partition: int = msg.partition()  # type: ignore[assignment]
                offset: int = msg.offset()  # type: ignore[assignment]
                self._positions[partition] = offset + 1
                self._take(msg.value(), partition, offset, out)
        return out

    @property
    def positions(self) -> dict[int, int]:
        """The next offset to read per state-topic partition: everything before it has been returned."""
        return dict(self._positions)

    def _advance_past_markers(self, ends: dict[int, int]) -> None:
        """A partition ending in transaction markers has no record to read at its end: use the position."""
        for tp in self._consumer.position([TopicPartition(self._topic, p) for p in ends]):
            if tp.offset >= 0:
                self._positions[tp.partition] = max(self._positions.get(tp.partition, 0), tp.offset)

    def _take(self, value: bytes | None, partition: int, offset: int, out: StateRead) -> None:
        fp = header_fingerprint(value) or b""
        if fp in self._known_fps and fp not in self._wanted_fps:
            return
        try:
            writer, record = decode_record(value)  # type: ignore[arg-type]
            out.events.append(EVENT_TYPES[writer.event_type].from_record(record))
        except (EventDecodeError, TypeError, KeyError) as exc:
            bad = BadEvent(self._topic, partition, offset, str(exc))
            what = "invalid" if isinstance(exc, InvalidEventError) else "undecodable"
            _log.warning("skipping %s state event %s[%d]@%d: %s", what, bad.topic, partition, offset, bad.reason)
            out.bad.append(bad)

    def close(self) -> None:
        self._consumer.close()


def read_state_log(
    client_conf: dict[str, Any],
    topic: str,
    *,
    event_types: Collection[str] | None = None,
    timeout_s: float = 30.0,
    start_offsets: Mapping[int, int] | None = None,
) -> StateRead:
    """Every event in ``topic`` (from ``start_offsets``, else the beginning) up to its current end."""
    follower = StateLogFollower(client_conf, topic, event_types=event_types, start_offsets=start_offsets)
    try:
        return follower.poll(timeout_s)
    finally:
        follower.close()
