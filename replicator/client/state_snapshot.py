"""A compacted snapshot of what one flow's state log says, so readers need not replay its history.

The state topic is append-only and stays the source of truth; replaying it costs time and memory
linear in the age of the deployment. Beside it, ``<state topic>.snapshot`` (compacted, one
partition, on the same cluster) holds per flow:

- ``mapping``: the offset-mapping segments of each source partition (a few rows per partition,
  however many syncs made them);
- ``latest``: the latest event per identity of the types readers resume from (a group's
  checkpoint per partition, the furthest audit window per side and partition, the latest
  watermark per side, topic and partition, the latest lifecycle event per replicator) and every
  ``failover``, ``failback`` and ``records_lost_before_copy`` event (few: one per operation or loss);
- ``seen``: per replicator, the emission time of its latest event among ``SEEN_TYPES``;
- ``position``: the state-topic offsets up to which the records above are complete.

Contract: every ``mapping``/``latest`` record written before a flow's ``position`` record reflects
the log up to that position; records written after it reflect a later one. Merging is idempotent
(mapping points merge by offset, ``latest`` keeps the newest), so a reader loads the whole snapshot,
then reads the log from the last ``position`` on and gets exactly what a full replay would give.
No snapshot, or a snapshot of another version, means a full replay: the snapshot is a cache that
any reader may ignore and the next writer rebuilds. v2 added watermarks, lifecycle, failovers,
failbacks and ``seen`` (what ``replicator.failover`` plans from), v3 every
``records_lost_before_copy`` (a plan with the source down presumes no copy of those records); an
older snapshot lacks them, so readers ignore it and replay the log until a v3 writer has written
its first snapshot.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from replicator.client.mapping import Segment
from replicator.client.mapping_index import Life
from replicator.errors import EventDecodeError, ReplicationError
from replicator.events import (
    AuditWindow,
    Checkpoint,
    Cutover,
    Event,
    Failback,
    Failover,
    Lifecycle,
    MetadataChange,
    RecordsLostBeforeCopy,
    Watermark,
    decode,
    encode,
)
from replicator.events.validity import MAX_PARTITION, is_topic_name
from replicator.kafka.clients import new_consumer
from replicator.kafka.errors import kafka_error_reason
from replicator.kafka.log_bounds import partition_bounds
from replicator.kafka.settings import BOUNDED_READ_WAIT_S, reader_config

__all__ = [
    "FlowSnapshot",
    "snapshot_topic",
    "load_snapshot",
    "write_snapshot",
    "latest_key",
    "newer",
    "SNAPSHOT_CONFIG",
    "SEEN_TYPES",
    "SNAPSHOT_TYPES",
]

_log = logging.getLogger(__name__)

_VERSION = "v3"
SNAPSHOT_CONFIG = {"cleanup.policy": "compact", "min.compaction.lag.ms": "0", "segment.ms": "3600000"}

LatestKey = tuple[str, ...]

# A replicator's sign of life: its latest event of these types (``FlowSnapshot.seen``).
SEEN_TYPES = (
    "offset_sync",
    "checkpoint",
    "watermark",
    "lifecycle",
    "heartbeat",
    "failover",
    "failback",
    "topic_recreated",
    "records_lost_before_copy",
    "cutover",
)
# What a snapshot writer must decode from the log for its snapshot to be complete.
SNAPSHOT_TYPES = (*SEEN_TYPES, "audit_window", "metadata_change")


def snapshot_topic(state_topic: str) -> str:
    return f"{state_topic}.snapshot"


def latest_key(event: Event) -> LatestKey | None:
    """The identity under which a reader keeps only the newest event of this kind (None: not kept)."""
    if isinstance(event, Checkpoint):
        return ("checkpoint", event.group, event.target_topic, str(event.partition))
    if isinstance(event, AuditWindow):
        return ("audit_window", event.side, event.source_topic, str(event.partition))
    if isinstance(event, Watermark):
        topic = event.source_topic if event.side == "source" else event.topic
        return ("watermark", event.side, topic, str(event.partition))
    if isinstance(event, Lifecycle):
        return ("lifecycle", event.replicator_id)
    if isinstance(event, MetadataChange):  # the last decision about each binding or remote topic
        return ("metadata_change", event.kind, event.topic, event.acl or "")
    if isinstance(event, Failover | Failback | Cutover | RecordsLostBeforeCopy):  # all kept: its id is its identity
        return (event.event_type, event.event_id or f"{event.replicator_id}@{event.emitted_at_ms}")
    return None


def newer(candidate: Event, kept: Event | None) -> bool:
    """Whether ``candidate`` replaces ``kept`` under the same ``latest_key``."""
    if kept is None:
        return True
    if isinstance(candidate, AuditWindow) and isinstance(kept, AuditWindow):
        return candidate.window_start >= kept.window_start
    if isinstance(candidate, Watermark) and isinstance(kept, Watermark):
        return candidate.observed_at_ms >= kept.observed_at_ms
    return candidate.emitted_at_ms >= kept.emitted_at_ms


@dataclass
class FlowSnapshot:
    """One flow's compacted state: mapping segments, latest events, and the log position they cover."""

    flow: str
    positions: dict[int, int] = field(default_factory=dict)
    segments: dict[tuple[str, int], tuple[str, list[Segment]]] = field(default_factory=dict)
    latest: dict[LatestKey, Event] = field(default_factory=dict)
    seen: dict[str, int] = field(default_factory=dict)  # replicator id -> its latest event's emitted_at_ms
    # each partition's current life (``MappingIndex.life``): the segments' life
    lives: dict[tuple[str, int], Life] = field(default_factory=dict)

    def keep(self, event: Event) -> None:
        if event.replicator_id and event.event_type in SEEN_TYPES:
            self.seen[event.replicator_id] = max(self.seen.get(event.replicator_id, 0), event.emitted_at_ms)
        key = latest_key(event)
        if key is not None and newer(event, self.latest.get(key)):
            self.latest[key] = event


def _key(kind: str, flow: str, *parts: object) -> bytes:
    return "|".join([_VERSION, kind, flow, *(str(p) for p in parts)]).encode()


_NO_LIFE = Life(None, None)


def _mapping_value(target_topic: str, segments: list[Segment], life: Life = _NO_LIFE) -> bytes:
    rows = [[s.downstream_start, s.upstream_start, s.upstream_end, s.downstream_end] for s in segments]
    doc: dict[str, Any] = {"target_topic": target_topic, "segments": rows}
    if life[:2] != (None, None):
        doc["topic_id"], doc["started_ms"] = life[:2]
    if life.target_topic_id is not None:
        doc["target_topic_id"] = life.target_topic_id
    return json.dumps(doc).encode()


def write_snapshot(producer: Producer, state_topic: str, snap: FlowSnapshot, previous: FlowSnapshot | None) -> int:
    """Write what changed since ``previous``, then the position marker; returns records written.

    The caller owns ``producer`` (idempotent); this flushes it, so a returned call is durable.
    """
    topic = snapshot_topic(state_topic)
    written = 0
    failed: list[KafkaError] = []

    def delivered(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failed.append(err)

    def send(key: bytes, value: bytes) -> None:
        nonlocal written
        producer.produce(topic, value=value, key=key, partition=0, on_delivery=delivered)
        producer.poll(0)
        written += 1

    old_segments = previous.segments if previous else {}
    old_lives = previous.lives if previous else {}
    for (source_topic, partition), (target_topic, segs) in sorted(snap.segments.items()):
        life = snap.lives.get((source_topic, partition), Life(None, None))
        changed = old_lives.get((source_topic, partition), Life(None, None)) != life
        if changed or old_segments.get((source_topic, partition)) != (target_topic, segs):
            send(_key("mapping", snap.flow, source_topic, partition), _mapping_value(target_topic, segs, life))
    old_latest = previous.latest if previous else {}
    for key, event in sorted(snap.latest.items()):
        if old_latest.get(key) != event:
            send(_key("latest", snap.flow, *key), encode(event))
    old_seen = previous.seen if previous else {}
    for replicator_id, ms in sorted(snap.seen.items()):
        if old_seen.get(replicator_id) != ms:
            send(_key("seen", snap.flow, replicator_id), json.dumps({"ms": ms}).encode())
    positions = {str(p): o for p, o in sorted(snap.positions.items())}
    send(_key("position", snap.flow), json.dumps({"positions": positions}).encode())
    if producer.flush(30) > 0 or failed:
        reason = failed[0].str() if failed else "not acknowledged within 30 s"
        raise ReplicationError(f"state snapshot {topic}: write failed: {reason}")
    return written


def load_snapshot(
    client_conf: Mapping[str, Any], state_topic: str, flow: str, *, timeout_s: float = 30.0, mapping: bool = True
) -> FlowSnapshot | None:
    """The flow's snapshot, or None when there is none (no topic, or no position marker of the flow).

    ``mapping=False`` leaves the segments out (a reader of checkpoints only does not parse them).

    A mapping or latest record that does not decode or names nothing real (a forged or damaged one)
    makes the whole snapshot unusable, logged: without it the snapshot would lack part of the state
    (a group's latest checkpoint, a partition's segments), so the reader replays the log from the
    beginning, the truth the snapshot only caches. An unreadable ``seen`` time is only ignored.
    """
    topic = snapshot_topic(state_topic)
    consumer = new_consumer(reader_config(dict(client_conf), f"snapshot-{flow}"))
    try:
        meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if meta is None or meta.error is not None or 0 not in meta.partitions:
            return None
        _low, end = partition_bounds(consumer, topic, 0, timeout_s=timeout_s, listed=True)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        records = _read_until(consumer, end, timeout_s)
    except KafkaException as exc:
        raise ReplicationError(f"cannot read state snapshot {topic}: {kafka_error_reason(exc)}") from exc
    finally:
        consumer.close()
    return _fold(records, flow, mapping=mapping)


def _read_until(consumer: Consumer, end: int, timeout_s: float) -> list[tuple[bytes, bytes | None]]:
    out: list[tuple[bytes, bytes | None]] = []
    position, deadline = 0, time.monotonic() + timeout_s
    while position < end and time.monotonic() < deadline:
        for msg in consumer.consume(10_000, timeout=BOUNDED_READ_WAIT_S):
            if msg.error() is None and msg.key() is not None:
                out.append((msg.key(), msg.value()))  # type: ignore[arg-type]
            position = max(position, (msg.offset() or 0) + 1)
        if position < end:
            position = max(position, next((tp.offset for tp in consumer.position(consumer.assignment())), 0))
    return out


def _fold(records: list[tuple[bytes, bytes | None]], flow: str, *, mapping: bool = True) -> FlowSnapshot | None:
    snap = FlowSnapshot(flow)
    marked = False
    handlers: dict[str, Callable[[list[str], bytes], None]] = {
        "mapping": lambda parts, value: _take_mapping(snap, parts, value),
        "latest": lambda _parts, value: snap.keep(decode(value)),
        "seen": lambda parts, value: _take_seen(snap, "|".join(parts), json.loads(value)["ms"]),
        "position": lambda _parts, value: snap.positions.update(
            {int(p): int(o) for p, o in json.loads(value)["positions"].items()}
        ),
    }
    for key, value in records:
        parts = key.decode("utf-8", "replace").split("|")
        if len(parts) < 3 or parts[0] != _VERSION or parts[2] != flow or value is None or parts[1] not in handlers:
            continue
        if parts[1] == "mapping" and not mapping:
            continue
        try:
            handlers[parts[1]](parts[3:], value)
        except (ValueError, KeyError, TypeError, EventDecodeError) as exc:
            if parts[1] == "seen":  # a sign of life, not state: the next event of that replicator says it again
                _log.warning("ignoring an unreadable state snapshot record %r: %s", key, exc)
                continue
            # a mapping or a latest event would be missing from the snapshot: the log replay is the truth
            _log.warning("state snapshot record %r is unreadable (%s): replaying the state log instead", key, exc)
            return None
        if parts[1] == "position":
            marked = True
    return snap if marked else None


def _take_mapping(snap: FlowSnapshot, parts: list[str], value: bytes) -> None:
    """One partition's segments; ``ValueError`` for a record that names nothing real (forged or damaged)."""
    source_topic, partition = "|".join(parts[:-1]), int(parts[-1])
    doc = json.loads(value)
    target_topic = doc["target_topic"]
    segments = [Segment(ds, us, ue, de) for ds, us, ue, de in doc["segments"]]
    if not (is_topic_name(source_topic) and isinstance(target_topic, str) and is_topic_name(target_topic)):
        raise ValueError("a topic name is not legal")
    if not 0 <= partition <= MAX_PARTITION:
        raise ValueError(f"partition {partition} is not a partition")
    for seg in segments:
        if not all(isinstance(v, int) and v >= 0 for v in (seg.downstream_start, seg.upstream_start)):
            raise ValueError(f"segment {seg} has a negative or non-integer start")
        if seg.upstream_end < seg.upstream_start or seg.downstream_end < seg.downstream_start:
            raise ValueError(f"segment {seg} ends before it starts")
    snap.segments[(source_topic, partition)] = (target_topic, segments)
    topic_id, started, target_id = doc.get("topic_id"), doc.get("started_ms"), doc.get("target_topic_id")
    if not all(v is None or isinstance(v, str) for v in (topic_id, target_id)) or not (
        started is None or isinstance(started, int)
    ):
        raise ValueError("a life's topic id or start is not of its type")
    snap.lives[(source_topic, partition)] = Life(topic_id, started, target_id)


def _take_seen(snap: FlowSnapshot, replicator_id: str, ms: object) -> None:
    if not isinstance(ms, int):
        raise TypeError(f"seen time {ms!r} is not an integer")
    snap.seen[replicator_id] = max(snap.seen.get(replicator_id, 0), ms)
