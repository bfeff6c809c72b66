"""Replication-state events: frozen dataclasses, their Avro schemas, single-object codec."""

from replicator.events.codec import (
    MAGIC,
    SchemaRegistry,
    SchemaVersion,
    decode,
    decode_record,
    encode,
    registry,
)
from replicator.events.model import EVENT_TYPES, Event, Lifecycle, OffsetSync

__all__ = [
    "EVENT_TYPES",
    "MAGIC",
    "Event",
    "Lifecycle",
    "OffsetSync",
    "SchemaRegistry",
    "SchemaVersion",
    "decode",
    "decode_record",
    "encode",
    "registry",
]
