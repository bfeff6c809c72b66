"""Replication-state events as frozen dataclasses; each has a ``<event_type>.v<N>.avsc`` beside it.

Every event carries the common envelope (event id, type, schema version, flow, emitting replicator,
emitted-at). The dataclass field names equal the Avro field names, so encoding is a plain
attribute copy; the schema decides the wire order.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, ClassVar, Self

__all__ = [
    "Event",
    "OffsetSync",
    "Lifecycle",
    "Checkpoint",
    "GroupSync",
    "Heartbeat",
    "Watermark",
    "ConfigSnapshot",
    "AuditWindow",
    "Failover",
    "FailoverOffset",
    "Failback",
    "FailbackOffset",
    "FailbackRange",
    "TopicRecreated",
    "RecordsLostBeforeCopy",
    "ConsumerRelease",
    "Cutover",
    "EVENT_TYPES",
    "SyncReason",
    "fact_event_id",
    "new_event_id",
    "now_ms",
    "stamped_by",
]


# Where an event's id and time come from. Real processes: a random id and the wall clock. The
# deterministic simulator (``mirrorlake.simulation``) sets both for the events made inside its run
# (``stamped_by``), so the same seed makes the same events.
_STAMP: ContextVar[tuple[Callable[[], str], Callable[[], int]] | None] = ContextVar(
    "mirrorlake_event_stamp", default=None
)


@contextmanager
def stamped_by(event_id: Callable[[], str], clock_ms: Callable[[], int]) -> Iterator[None]:
    """Events made inside take their id from ``event_id`` and their time from ``clock_ms``."""
    token = _STAMP.set((event_id, clock_ms))
    try:
        yield
    finally:
        _STAMP.reset(token)


def new_event_id() -> str:
    stamp = _STAMP.get()
    return str(uuid.uuid4()) if stamp is None else stamp[0]()


def fact_event_id(*parts: object) -> str:
    """The same id for the same fact, whichever process states it: readers deduplicate on it."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "mirrorlake:" + "|".join(str(p) for p in parts)))


def now_ms() -> int:
    stamp = _STAMP.get()
    return time.time_ns() // 1_000_000 if stamp is None else stamp[1]()


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


class SyncReason(StrEnum):
    """Why an ``OffsetSync`` was published; its wire form is the value (an Avro string).

    A ``StrEnum``: a decoded event's plain string compares equal to its member, so readers compare
    against these members, never against bare strings.
    """

    FIRST = "first"  # the first record of a producer session: a mapping session starts here
    DELTA_CHANGE = "delta_change"  # downstream - upstream changed: the previous run ends exactly
    UPSTREAM_GAP = "upstream_gap"  # same delta, but offsets were skipped on both sides
    TRUNCATION = "truncation"  # the target partition was rewound (truncated)
    LAG_MAX = "lag_max"  # offset_lag_max records since the last sync (MM2's rule)
    FLUSH = "flush"  # the last copy of a partition at a flush: the open run's end is known
    MM2 = "mm2"  # imported from MirrorMaker 2's offset-syncs topic
    RECOVERED = "recovered"  # a copy found on the target at restart, written after the last durable sync


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetSync(Event):
    """Record ``upstream_offset`` of the source was copied to ``downstream_offset`` of the target.

    ``previous_*`` name the last record copied before it in the same producer session, so a run of
    constant ``downstream - upstream`` ends at a known point; they are None for the first record
    after a (re)start. ``reason``: a ``SyncReason`` value.
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
    source_topic_id: str | None = None  # v2: the source topic's life (``TopicRecreated``); None in v1 and MM2's
    target_topic_id: str | None = None  # v3: the remote topic's life (a re-created remote topic); None before

    @property
    def delta(self) -> int:
        return self.downstream_offset - self.upstream_offset


@dataclass(frozen=True, slots=True, kw_only=True)
class Lifecycle(Event):
    """A flow started, stopped, or failed (``reason`` says why)."""

    event_type: ClassVar[str] = "lifecycle"
    state: str
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint(Event):
    """Group ``group`` committed ``upstream_offset`` on the source; it resumes at ``downstream_offset``.

    ``method`` names how the offset was found (``replicator.client.mapping.Translation``); ``reverse_*``
    when the topic came from the target and the offset is renamed back through the reverse flow.
    ``error_bound``: the most records a consumer resuming there can re-read (0: exact).
    """

    event_type: ClassVar[str] = "checkpoint"
    source_cluster: str
    target_cluster: str
    group: str
    source_topic: str
    target_topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    method: str
    error_bound: int | None = None
    metadata: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupSync(Event):
    """What the replicator decided about writing ``group``'s offset of one partition on the target."""

    event_type: ClassVar[str] = "group_sync"
    source_cluster: str
    target_cluster: str
    group: str
    source_topic: str
    target_topic: str
    partition: int
    decision: str
    upstream_offset: int | None = None
    translated_offset: int | None = None
    target_offset_before: int | None = None
    target_offset_after: int | None = None
    detail: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Heartbeat(Event):
    """Emitted at ``origin_cluster`` (``hop_path`` = the origin alone), or observed further on.

    An observed heartbeat's ``hop_path`` runs from the origin to the cluster it was read on, and
    ``received_at_ms - origin_timestamp_ms`` is the replication latency along that path.
    """

    event_type: ClassVar[str] = "heartbeat"
    origin_cluster: str
    hop_path: tuple[str, ...]
    origin_timestamp_ms: int
    received_at_ms: int | None = None
    topic: str | None = None

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Self:
        return super(Heartbeat, cls).from_record({**record, "hop_path": tuple(record["hop_path"])})

    def to_record(self) -> dict[str, Any]:
        return {**super(Heartbeat, self).to_record(), "hop_path": list(self.hop_path)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Watermark(Event):
    """Log-start, log-end and newest timestamp of one partition, on the source or the target side.

    Source side (v2): ``read_position`` is where the flow stands (everything before it is on the
    target, or is a marker/aborted record); ``unreplicated_*`` measure ``[read_position, log end)``
    by reading it, so the records at risk are exact, not an offset difference.
    """

    event_type: ClassVar[str] = "watermark"
    cluster: str
    side: str
    topic: str
    source_topic: str
    partition: int
    log_start_offset: int
    log_end_offset: int
    observed_at_ms: int
    max_timestamp_ms: int | None = None
    max_timestamp_offset: int | None = None
    # v2, source side only (null on the target side and in v1 events): see watermark.v2.avsc
    read_position: int | None = None
    position_source: str | None = None
    unreplicated_records: int | None = None
    unreplicated_bytes: int | None = None
    oldest_unreplicated_timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigSnapshot(Event):
    """One topic's partitions, effective configs and ACLs on one cluster (``exists`` False: missing)."""

    event_type: ClassVar[str] = "config_snapshot"
    cluster: str
    side: str
    topic: str
    source_topic: str
    exists: bool
    partitions: int
    configs: dict[str, str]
    config_sources: dict[str, str]
    acls: tuple[str, ...]
    digest: str
    reason: str

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Self:
        return super(ConfigSnapshot, cls).from_record({**record, "acls": tuple(record["acls"])})

    def to_record(self) -> dict[str, Any]:
        return {**super(ConfigSnapshot, self).to_record(), "acls": list(self.acls)}


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditWindow(Event):
    """Count and checksum of source records ``[window_start, window_end)`` as found on one side.

    Both sides key the window by *upstream* offsets: the target side maps each target record back
    to its source offset through the offset mapping, so the two rows compare directly.
    """

    event_type: ClassVar[str] = "audit_window"
    side: str
    cluster: str
    source_topic: str
    target_topic: str
    partition: int
    window_start: int
    window_end: int
    record_count: int
    checksum: int
    first_offset: int | None = None
    last_offset: int | None = None
    extra_copies: int = 0


@dataclass(frozen=True, slots=True)
class FailoverOffset:
    """One group offset a failover wrote on the target, with what the plan said it costs."""

    group: str
    source_topic: str
    target_topic: str
    partition: int
    committed_offset: int | None
    offset: int
    records_lost: int
    records_reread: int
    records_unreplicated: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Failover(Event):
    """A failover applied on the target (``replicator.failover``): groups moved, offsets, figures, who."""

    event_type: ClassVar[str] = "failover"
    source_cluster: str
    target_cluster: str
    mode: str
    groups: tuple[str, ...]
    offsets: tuple[FailoverOffset, ...]
    records_lost: int
    records_reread: int
    host: str
    user: str
    at_ms: int | None = None
    records_unreplicated: int | None = None
    bytes_unreplicated: int | None = None
    seconds_unreplicated: float | None = None
    consistent_cut_ms: int | None = None

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Self:
        return super(Failover, cls).from_record(
            {
                **record,
                "groups": tuple(record["groups"]),
                "offsets": tuple(FailoverOffset(**o) for o in record["offsets"]),
            }
        )

    def to_record(self) -> dict[str, Any]:
        return {
            **super(Failover, self).to_record(),
            "groups": list(self.groups),
            "offsets": [{f.name: getattr(o, f.name) for f in fields(o)} for o in self.offsets],
        }


@dataclass(frozen=True, slots=True)
class FailbackRange:
    """Source offsets [start_offset, end_offset) re-produced to the target by ``failback --recover``."""

    source_topic: str
    target_topic: str
    partition: int
    start_offset: int
    end_offset: int
    records: int
    bytes: int
    target_start_offset: int | None = None  # where the first re-produced record landed on the target
    target_end_offset: int | None = None  # after the last one (exclusive); other producers may interleave


@dataclass(frozen=True, slots=True)
class FailbackOffset:
    """One group offset ``failback apply`` wrote on the source, translated from the target."""

    group: str
    topic: str
    partition: int
    target_offset: int | None
    offset: int
    method: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Failback(Event):
    """A failback step of a failed-over flow (``replicator.failover.failback``): ``recover`` (ranges the
    source never copied, re-produced to the target) or ``groups`` (groups moved back to the source)."""

    event_type: ClassVar[str] = "failback"
    source_cluster: str
    target_cluster: str
    action: str
    host: str
    user: str
    ranges: tuple[FailbackRange, ...] = ()
    groups: tuple[str, ...] = ()
    offsets: tuple[FailbackOffset, ...] = ()
    records: int = 0

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Self:
        return super(Failback, cls).from_record(
            {
                **record,
                "ranges": tuple(FailbackRange(**r) for r in record["ranges"]),
                "groups": tuple(record["groups"]),
                "offsets": tuple(FailbackOffset(**o) for o in record["offsets"]),
            }
        )

    def to_record(self) -> dict[str, Any]:
        def plain(items: tuple[Any, ...]) -> list[dict[str, Any]]:
            return [{f.name: getattr(i, f.name) for f in fields(i)} for i in items]

        return {
            **super(Failback, self).to_record(),
            "ranges": plain(self.ranges),
            "groups": list(self.groups),
            "offsets": plain(self.offsets),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicRecreated(Event):
    """A topic of the flow was deleted and created again (a new topic id): its partitions start a new
    life in the offset mapping. ``log_*_offsets`` are per partition of the new topic when noticed."""

    event_type: ClassVar[str] = "topic_recreated"
    source_cluster: str
    target_cluster: str
    side: str
    topic: str
    source_topic: str
    topic_id: str
    partitions: int
    log_start_offsets: tuple[int, ...]
    log_end_offsets: tuple[int, ...]
    policy: str
    noticed: str
    previous_topic_id: str | None = None

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Self:
        return super(TopicRecreated, cls).from_record(
            {
                **record,
                "log_start_offsets": tuple(record["log_start_offsets"]),
                "log_end_offsets": tuple(record["log_end_offsets"]),
            }
        )

    def to_record(self) -> dict[str, Any]:
        return {
            **super(TopicRecreated, self).to_record(),
            "log_start_offsets": list(self.log_start_offsets),
            "log_end_offsets": list(self.log_end_offsets),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordsLostBeforeCopy(Event):
    """Source offsets ``[from_offset, to_offset)`` of one partition were deleted before the flow copied
    them (the log start passed its position): lost to the target, counted."""

    event_type: ClassVar[str] = "records_lost_before_copy"
    source_cluster: str
    target_cluster: str
    source_topic: str
    partition: int
    from_offset: int
    to_offset: int
    records: int
    noticed: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerRelease(Event):
    """An operator's move of ``groups`` is about to start: their ``FailoverConsumer``s on ``cluster``
    commit what they consumed and leave, so the move reads final positions (``failover apply`` or
    ``failback apply --groups`` with ``--move-consumers``; ``reason`` says which)."""

    event_type: ClassVar[str] = "consumer_release"
    source_cluster: str
    target_cluster: str
    cluster: str
    groups: tuple[str, ...]
    reason: str
    host: str
    user: str

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Self:
        return super(ConsumerRelease, cls).from_record({**record, "groups": tuple(record["groups"])})

    def to_record(self) -> dict[str, Any]:
        return {**super(ConsumerRelease, self).to_record(), "groups": list(self.groups)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Cutover(Event):
    """One step of a fenced planned cutover of the flow (``failover apply --planned --fence``), in order:
    ``fenced`` (DENY Write ACLs on the source topics, ``acls`` as ``resource|pattern|principal|host|
    operation|permission``), ``settled`` (no record arrived for a settle time), ``caught_up`` (0 lag,
    current checkpoints), ``replication_stopped``, ``moved``; ``unfenced`` when ``failback apply
    --unfence`` deletes those ACLs. A rerun of the cutover continues after the last step recorded."""

    event_type: ClassVar[str] = "cutover"
    source_cluster: str
    target_cluster: str
    step: str
    topics: tuple[str, ...]
    acls: tuple[str, ...]
    detail: str | None = None
    host: str
    user: str

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Self:
        return super(Cutover, cls).from_record(
            {**record, "topics": tuple(record["topics"]), "acls": tuple(record["acls"])}
        )

    def to_record(self) -> dict[str, Any]:
        return {**super(Cutover, self).to_record(), "topics": list(self.topics), "acls": list(self.acls)}


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataChange(Event):
    """A decision of the flow's metadata sync about a remote topic or an ACL binding on the target:
    ``created``, ``deleted``, ``kept`` (a deletion not made, ``reason`` says why) or ``failed``.
    ACL creations are recorded always: deletions (opt-in) remove only bindings the flow created.
    ``acl``/``source_acl``: ``pattern_type|principal|host|operation|permission`` (``kind`` acl)."""

    event_type: ClassVar[str] = "metadata_change"
    source_cluster: str
    target_cluster: str
    kind: str
    action: str
    topic: str
    source_topic: str
    acl: str | None = None
    source_acl: str | None = None
    reason: str | None = None


EVENT_TYPES: dict[str, type[Event]] = {
    cls.event_type: cls
    for cls in (
        OffsetSync,
        Lifecycle,
        Checkpoint,
        GroupSync,
        Heartbeat,
        Watermark,
        ConfigSnapshot,
        AuditWindow,
        Failover,
        Failback,
        TopicRecreated,
        RecordsLostBeforeCopy,
        MetadataChange,
        ConsumerRelease,
        Cutover,
    )
}
