"""MirrorMaker 2's internal records (offset syncs, checkpoints, heartbeats), decoded from bytes.

MM2 writes them with Kafka's protocol ``Struct`` encoding (``org.apache.kafka.common.protocol.types``),
big endian, fields in schema order, no field tags:

* ``OffsetSync`` (``mm2-offset-syncs.<target alias>.internal``): key ``topic: STRING, partition:
  INT32``; value ``upstreamOffset: INT64, offset: INT64`` (no version header). ``topic`` is the
  *source* topic; ``offset`` is where record ``upstreamOffset`` landed in its remote topic.
* ``Checkpoint`` (``<source alias>.checkpoints.internal`` on the target): key ``group: STRING,
  topic: STRING, partition: INT32``; value ``version: INT16`` then, for version 0,
  ``upstreamOffset: INT64, offset: INT64, metadata: STRING``. ``topic`` is the *target* topic.
* ``Heartbeat`` (``heartbeats`` and its replicas ``<alias>.heartbeats``): key
  ``sourceClusterAlias: STRING, targetClusterAlias: STRING``; value ``version: INT16`` then, for
  version 0, ``timestamp: INT64``.

``STRING`` is an INT16 byte length (negative is an error) followed by that many UTF-8 bytes. As
Kafka's ``Schema.read`` does, bytes after the last field are ignored; a value version other than
0 (the only one Kafka 4.3 defines) is an error rather than a guess. Every malformed input raises
``Mm2RecordError`` naming the record kind, the part (key/value) and what is wrong.

The ``encode_*`` functions write the same bytes Kafka's ``recordKey()``/``recordValue()`` write
(version 0), so MM2's own ``MirrorClient`` reads what mirrorlake publishes; a string longer than
32767 UTF-8 bytes (Kafka's ``STRING`` limit) raises ``Mm2RecordError``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from replicator.errors import EventDecodeError

__all__ = [
    "Mm2RecordError",
    "Mm2OffsetSync",
    "Mm2Checkpoint",
    "Mm2Heartbeat",
    "decode_offset_sync",
    "decode_checkpoint",
    "decode_heartbeat",
    "encode_offset_sync",
    "encode_checkpoint",
    "encode_heartbeat",
    "SUPPORTED_VERSION",
]

SUPPORTED_VERSION = 0  # Checkpoint.VERSION and Heartbeat.VERSION in Kafka 4.3

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class Mm2RecordError(EventDecodeError):
    """Bytes in an MM2 internal topic that are not the record that topic holds."""


@dataclass(frozen=True, slots=True)
class Mm2OffsetSync:
    """Record ``upstream_offset`` of ``topic[partition]`` was copied to ``downstream_offset``."""

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int


@dataclass(frozen=True, slots=True)
class Mm2Checkpoint:
    """``group`` committed ``upstream_offset`` on the source; MM2 translated it to ``downstream_offset``.

    ``topic`` is the topic on the target (MM2 renames it before writing the checkpoint).
    """

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str


@dataclass(frozen=True, slots=True)
class Mm2Heartbeat:
    """Written at ``timestamp_ms`` by the heartbeat connector of flow ``source_alias->target_alias``."""

    source_alias: str
    target_alias: str
    timestamp_ms: int


class _Reader:
    """Reads Kafka protocol types from ``data``; errors name ``what`` (e.g. ``Checkpoint value``)."""

    def __init__(self, data: bytes | None, what: str) -> None:
        if data is None:
            raise Mm2RecordError(f"{what} is missing (null)")
        self._data = bytes(data)
        self._pos = 0
        self._what = what

    def _take(self, n: int, field: str) -> bytes:
        end = self._pos + n
        if end > len(self._data):
            raise Mm2RecordError(
                f"{self._what}: field {field!r} needs {n} bytes at position {self._pos}, "
                f"only {len(self._data) - self._pos} left (record is {len(self._data)} bytes)"
            )
        chunk = self._data[self._pos : end]
        self._pos = end
        return chunk

    def int16(self, field: str) -> int:
        value: int = _INT16.unpack(self._take(2, field))[0]
        return value

    def int32(self, field: str) -> int:
        value: int = _INT32.unpack(self._take(4, field))[0]
        return value

    def int64(self, field: str) -> int:
        value: int = _INT64.unpack(self._take(8, field))[0]
        return value

    def string(self, field: str) -> str:
        length = self.int16(field)
        if length < 0:
            raise Mm2RecordError(f"{self._what}: field {field!r} has negative string length {length}")
        raw = self._take(length, field)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Mm2RecordError(f"{self._what}: field {field!r} is not valid UTF-8: {exc.reason}") from exc

    def version(self) -> None:
        version = self.int16("version")
        if version != SUPPORTED_VERSION:
            raise Mm2RecordError(f"{self._what}: unsupported version {version} (known: {SUPPORTED_VERSION})")


def decode_offset_sync(key: bytes | None, value: bytes | None) -> Mm2OffsetSync:
    """Decode one record of ``mm2-offset-syncs.<alias>.internal`` (``OffsetSync.deserializeRecord``)."""
    k = _Reader(key, "OffsetSync key")
    topic, partition = k.string("topic"), k.int32("partition")
    v = _Reader(value, "OffsetSync value")
    return Mm2OffsetSync(topic, partition, v.int64("upstreamOffset"), v.int64("offset"))


def decode_checkpoint(key: bytes | None, value: bytes | None) -> Mm2Checkpoint:
    """Decode one record of ``<alias>.checkpoints.internal`` (``Checkpoint.deserializeRecord``)."""
    v = _Reader(value, "Checkpoint value")
    v.version()
    upstream, downstream, metadata = v.int64("upstreamOffset"), v.int64("offset"), v.string("metadata")
    k = _Reader(key, "Checkpoint key")
    group, topic, partition = k.string("group"), k.string("topic"), k.int32("partition")
    return Mm2Checkpoint(group, topic, partition, upstream, downstream, metadata)


def decode_heartbeat(key: bytes | None, value: bytes | None) -> Mm2Heartbeat:
    """Decode one record of a heartbeats topic (``Heartbeat.deserializeRecord``)."""
    v = _Reader(value, "Heartbeat value")
    v.version()
    timestamp = v.int64("timestamp")
    k = _Reader(key, "Heartbeat key")
    return Mm2Heartbeat(k.string("sourceClusterAlias"), k.string("targetClusterAlias"), timestamp)


def _string(value: str, what: str, field: str) -> bytes:
    raw = value.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise Mm2RecordError(f"{what}: field {field!r} is {len(raw)} UTF-8 bytes, Kafka's STRING holds 32767")
    return _INT16.pack(len(raw)) + raw


def encode_offset_sync(sync: Mm2OffsetSync) -> tuple[bytes, bytes]:
    """(key, value) of one ``mm2-offset-syncs.<alias>.internal`` record (``OffsetSync.recordKey/Value``)."""
    key = _string(sync.topic, "OffsetSync key", "topic") + _INT32.pack(sync.partition)
    return key, _INT64.pack(sync.upstream_offset) + _INT64.pack(sync.downstream_offset)


def encode_checkpoint(cp: Mm2Checkpoint) -> tuple[bytes, bytes]:
    """(key, value) of one ``<alias>.checkpoints.internal`` record (``Checkpoint.recordKey/Value``)."""
    key = (
        _string(cp.group, "Checkpoint key", "group")
        + _string(cp.topic, "Checkpoint key", "topic")
        + _INT32.pack(cp.partition)
    )
    value = (
        _INT16.pack(SUPPORTED_VERSION)
        + _INT64.pack(cp.upstream_offset)
        + _INT64.pack(cp.downstream_offset)
        + _string(cp.metadata, "Checkpoint value", "metadata")
    )
    return key, value


def encode_heartbeat(beat: Mm2Heartbeat) -> tuple[bytes, bytes]:
    """(key, value) of one heartbeats record (``Heartbeat.recordKey/Value``)."""
    key = _string(beat.source_alias, "Heartbeat key", "sourceClusterAlias") + _string(
        beat.target_alias, "Heartbeat key", "targetClusterAlias"
    )
    return key, _INT16.pack(SUPPORTED_VERSION) + _INT64.pack(beat.timestamp_ms)
