"""Replication-state events as frozen dataclasses; each has a ``<event_type>.v<N>.avsc`` beside it.

Every event carries the common envelope (event id, type, schema version, flow, emitting replicator,
emitted-at). The dataclass field names equal the Avro field names, so encoding is a plain
attribute copy; the schema decides the wire order.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Self

__all__ = ["Event", "OffsetSync", "Lifecycle", "EVENT_TYPES", "new_event_id", "now_ms"]


def new_event_id() -> str:
    return str(uuid.uuid4())


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """The envelope. Subclasses set ``event_type`` and add their own fields."""

    event_type: ClassVar[str] = ""
    flow: str
    replicator_id: str
    event_id: str = ""
    emitted_at_ms: int = 0

    def __post_init__(self) -> None:
        # Stamp id and time at construction unless a decoder supplies them.
        if not self.event_id:
            object.__setattr__(self, "event_id", new_event_id())
        if not self.emitted_at_ms:
            object.__setattr__(self, "emitted_at_ms", now_ms())

    def to_record(self) -> dict[str, Any]:
        """The Avro record (without ``event_type``/``schema_version``: the codec adds those)."""
        return {name: getattr(self, name) for name in _field_names(type(self))}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Self:
        return cls(**{name: record[name] for name in _field_names(cls)})


_FIELDS_CACHE: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELDS_CACHE.get(cls)
    if names is None:
        names = tuple(f.name for f in fields(cls))
        _FIELDS_CACHE[cls] = names
    return names


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetSync(Event):
    """Record ``upstream_offset`` of the source was copied to ``downstream_offset`` of the target.

    ``previous_*`` name the last record copied before it in the same producer session, so a run of
    constant ``downstream - upstream`` ends at a known point; they are None for the first record
    after a (re)start. ``reason``: first | delta_change | lag_max | upstream_gap | flush.
    """

    event_type: ClassVar[str] = "offset_sync"
    source_cluster: str
    target_cluster: str
    source_topic: str
    target_topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    upstream_timestamp_ms: int
    reason: str
    previous_upstream_offset: int | None = None
    previous_downstream_offset: int | None = None

    @property
    def delta(self) -> int:
        return self.downstream_offset - self.upstream_offset


@dataclass(frozen=True, slots=True, kw_only=True)
class Lifecycle(Event):
    """A flow started, stopped, or failed (``reason`` says why)."""

    event_type: ClassVar[str] = "lifecycle"
    state: str
    reason: str | None = None


EVENT_TYPES: dict[str, type[Event]] = {cls.event_type: cls for cls in (OffsetSync, Lifecycle)}
