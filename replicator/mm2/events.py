"""MirrorMaker 2's internal records of one flow, as mirrorlake events (pure: no Kafka I/O).

``Mm2EventMapper`` knows, for a flow ``S->T`` configured with MM2's cluster aliases and MM2's
replication policy, which MM2 topics belong to it and what each record becomes:

* ``mm2-offset-syncs.T.internal`` on S (MM2's default ``offset-syncs.topic.location=source``) or
  ``mm2-offset-syncs.S.internal`` on T (``location=target``) -> ``OffsetSync(reason="mm2")``
  without ``previous_*``. ``upstream_timestamp_ms`` is the sync record's own timestamp: MM2's
  syncs do not carry the copied record's.
* ``S.checkpoints.internal`` on T -> ``Checkpoint(method="mm2", error_bound=None)``; MM2 names the
  *target* topic, the source topic is derived by the policy (renamed back when it came from T).
* ``heartbeats`` and its replicas (``A.heartbeats``, ...) on T -> ``Heartbeat`` whose hop path is
  the key's ``(sourceClusterAlias, targetClusterAlias)`` extended by every hop the topic name shows.
  A heartbeat belongs to the flow of its last hop (``S->T`` when the cluster before T is S);
  others are skipped, so importing several flows into one target never imports one twice.
  ``received_at_ms`` is the record's timestamp only under ``LogAppendTime``: MM2 writes heartbeats
  with their own timestamp as CreateTime and keeps it when it copies them, so a CreateTime says
  nothing about arrival.

Event ids are ``uuid5`` of the MM2 record's coordinates (cluster alias, topic, partition, offset):
an import that runs again, or replays after a crash, emits the same ids, and the lakehouse's
silver tables (MERGE on ``event_id``) keep one copy.

Translation semantics of imported syncs (``replicator.client.mapping``): a ``mm2`` sync is a CONTINUES
point, so two consecutive syncs with the same ``downstream - upstream`` join into one covered run.
That is right for MM2, which copies a partition in order and emits a sync on every upstream gap
and downstream truncation: between two syncs of equal delta every upstream offset landed at
``u + delta`` (or was a gap matched by an equal downstream gap, where resuming there loses
nothing). Offsets after the last sync of a run translate to right after that sync's record, as
MM2's own translation does, so imported translation never loses records and re-reads at most
what MM2 would.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

from replicator.client.mapping import TranslationMethod
from replicator.client.policy import ReplicationPolicy
from replicator.events import Checkpoint, Event, Heartbeat, OffsetSync, SyncReason
from replicator.events.codec import header_fingerprint
from replicator.mm2.records import Mm2Checkpoint, decode_checkpoint, decode_heartbeat, decode_offset_sync

__all__ = [
    "Mm2Record",
    "Mm2EventMapper",
    "Mm2Kind",
    "REPLICATOR_ID",
    "mm2_event_id",
    "mm2_hop_path",
    "mm2_checkpoint",
]

REPLICATOR_ID = "mm2-import"
Mm2Kind = Literal["offset_sync", "checkpoint", "heartbeat"]
_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://mirrorlake.dev/events/mm2-import")


@dataclass(frozen=True, slots=True)
class Mm2Record:
    """One record read from an MM2 internal topic on cluster ``cluster``."""

    cluster: str
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int | None
    log_append_time: bool = False


def mm2_event_id(cluster: str, topic: str, partition: int, offset: int) -> str:
    """The deterministic event id of the event imported from one MM2 record."""
    return str(uuid.uuid5(_NAMESPACE, f"{cluster}/{topic}/{partition}/{offset}"))


def mm2_hop_path(
    policy: ReplicationPolicy, topic: str, source_alias: str, target_alias: str, here: str
) -> tuple[str, ...]:
    """The clusters an MM2 heartbeat read from ``topic`` on ``here`` went through, origin first.

    ``heartbeats`` on B with key (A, B) -> (A, B); ``A.heartbeats`` on B with key (B, A) ->
    (B, A, B); ``C.A.heartbeats`` on B with key (X, A) -> (X, A, C, B). Under a policy that
    cannot track sources (identity) only the key and ``here`` are known.
    """
    path = [source_alias, target_alias]
    for alias in policy.source_chain(topic):
        if alias != path[-1]:
            path.append(alias)
    if path[-1] != here:
        path.append(here)
    return tuple(path)


def mm2_checkpoint(event: Checkpoint) -> Mm2Checkpoint:
    """The MM2 record of a mirrorlake checkpoint: MM2 keys it by the *target* topic (the inverse of ``to_event``)."""
    return Mm2Checkpoint(
        event.group,
        event.target_topic,
        event.partition,
        event.upstream_offset,
        event.downstream_offset,
        event.metadata or "",
    )


class Mm2EventMapper:
    """Which MM2 topics belong to flow ``source->target``, and each record as an event.

    ``to_event`` raises ``Mm2RecordError`` (an ``EventDecodeError``) for bytes that are not the
    record the topic holds, and returns None for a record that is not this flow's (a heartbeat
    that arrived through another flow, a mirrorlake event sharing the heartbeats topic).
    """

    def __init__(
        self, policy: ReplicationPolicy, source: str, target: str, *, replicator_id: str = REPLICATOR_ID
    ) -> None:
        self._policy = policy
        self.source, self.target = source, target
        self.flow = f"{source}->{target}"
        self._replicator_id = replicator_id
        self._syncs = {
            (source, policy.offset_syncs_topic(target)),  # offset-syncs.topic.location=source (default)
            (target, policy.offset_syncs_topic(source)),  # offset-syncs.topic.location=target
        }
        self._checkpoints = (target, policy.checkpoints_topic(source))

    def describe_topics(self) -> str:
        """The MM2 topics of this flow, for messages: ``A:mm2-offset-syncs.B.internal, ...``."""
        names = [f"{c}:{t}" for c, t in sorted(self._syncs)] + ["{}:{}".format(*self._checkpoints)]
        return ", ".join([*names, f"{self.target}:{self._policy.heartbeats_topic()} (and its replicas)"])

    def kind(self, cluster: str, topic: str) -> Mm2Kind | None:
        """What ``topic`` on ``cluster`` holds for this flow, or None if it is not one of its MM2 topics."""
        if (cluster, topic) in self._syncs:
            return "offset_sync"
        if (cluster, topic) == self._checkpoints:
            return "checkpoint"
        if cluster == self.target and self._policy.original_topic(topic) == self._policy.heartbeats_topic():
            return "heartbeat"
        return None

    def to_event(self, kind: Mm2Kind, record: Mm2Record) -> Event | None:
        event_id = mm2_event_id(record.cluster, record.topic, record.partition, record.offset)
        flow, replicator_id = self.flow, self._replicator_id
        if kind == "offset_sync":
            sync = decode_offset_sync(record.key, record.value)
            return OffsetSync(
                flow=flow,
                replicator_id=replicator_id,
                event_id=event_id,
                source_cluster=self.source,
                target_cluster=self.target,
                source_topic=sync.topic,
                target_topic=self._policy.format_remote_topic(self.source, sync.topic),
                partition=sync.partition,
                upstream_offset=sync.upstream_offset,
                downstream_offset=sync.downstream_offset,
                upstream_timestamp_ms=record.timestamp_ms or 0,
                reason=SyncReason.MM2,
            )
        if kind == "checkpoint":
            cp = decode_checkpoint(record.key, record.value)
            return Checkpoint(
                flow=flow,
                replicator_id=replicator_id,
                event_id=event_id,
                source_cluster=self.source,
                target_cluster=self.target,
                group=cp.group,
                source_topic=self._source_topic_of(cp.topic),
                target_topic=cp.topic,
                partition=cp.partition,
                upstream_offset=cp.upstream_offset,
                downstream_offset=cp.downstream_offset,
                method=TranslationMethod.MM2,
                error_bound=None,
                metadata=cp.metadata,
            )
        if header_fingerprint(record.value) is not None:
            return None  # a mirrorlake heartbeat in the same topic: the replicator reports those itself
        beat = decode_heartbeat(record.key, record.value)
        path = mm2_hop_path(self._policy, record.topic, beat.source_alias, beat.target_alias, self.target)
        if len(path) < 2 or path[-2] != self.source:
            return None  # it reached the target through another flow
        return Heartbeat(
            flow=flow,
            replicator_id=replicator_id,
            event_id=event_id,
            origin_cluster=beat.source_alias,
            hop_path=path,
            origin_timestamp_ms=beat.timestamp_ms,
            received_at_ms=record.timestamp_ms if record.log_append_time else None,
            topic=record.topic,
        )

    def _source_topic_of(self, target_topic: str) -> str:
        """The source topic MM2 renamed to ``target_topic`` (MirrorCheckpointTask.renameTopicPartition)."""
        if self._policy.topic_source(target_topic) == self.source:
            upstream = self._policy.upstream_topic(target_topic)
            if upstream is not None:
                return upstream
        return self._policy.format_remote_topic(self.target, target_topic)
