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
from replicator.events.model import (
    EVENT_TYPES,
    AuditWindow,
    Checkpoint,
    ConfigSnapshot,
    Event,
    Failover,
    FailoverOffset,
    GroupSync,
    Heartbeat,
    Lifecycle,
    OffsetSync,
    SyncReason,
    Watermark,
)

__all__ = [
    "EVENT_TYPES",
    "MAGIC",
    "AuditWindow",
    "Checkpoint",
    "ConfigSnapshot",
    "Event",
    "Failover",
    "FailoverOffset",
    "GroupSync",
    "Heartbeat",
    "Watermark",
    "Lifecycle",
    "OffsetSync",
    "SyncReason",
    "SchemaRegistry",
    "SchemaVersion",
    "decode",
    "decode_record",
    "encode",
    "registry",
]
