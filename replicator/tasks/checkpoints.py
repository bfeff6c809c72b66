"""Checkpoints: each consumer group's committed source offsets, translated exactly to the target.

Every ``emit_checkpoints_interval_seconds`` the task lists the source's consumer groups that match
the flow's group filter, reads their committed offsets, and translates each one through the exact
offset mapping (``replicator.client.mapping.translate``) kept from the state topics. A ``Checkpoint``
event is emitted when a group's translated position of a partition changes (the log then holds
every position the group ever had, once).

Topics that came *from* the target (``B.orders`` on A, for flow A->B) are renamed back
(``orders``) and translated through the reverse flow's mapping, as MM2 does: a consumer of the
replica resumes on the original. ``error_bound`` is 0 for every method here: a consumer resuming
at the checkpoint re-reads nothing that was replicated and loses nothing.

With ``sync_group_offsets`` the checkpoints are also written to the target's group offsets
(``replicator.tasks.group_sync``). With ``emit_checkpoints`` and ``emit_mm2_checkpoints`` (the
default) each emitted checkpoint is also written, from the same decision, as MM2's record to
``<source>.checkpoints.internal`` on the target (name from the replication policy), where MM2's
``RemoteClusterUtils.translateOffsets`` finds it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaException

from replicator.client.group_offsets import GroupOffset, committed_offsets
from replicator.client.mapping import Translation, TranslationMethod
from replicator.client.policy import ReplicationPolicy
from replicator.events import Checkpoint
from replicator.events.model import now_ms
from replicator.kafka.admin import admin_client
from replicator.kafka.settings import consumer_group_id
from replicator.metadata.filters import RegexGroupFilter
from replicator.mm2.events import mm2_checkpoint
from replicator.mm2.records import encode_checkpoint
from replicator.mm2.writer import Mm2TopicWriter
from replicator.tasks.base import STATE_LANE, TaskContext
from replicator.tasks.group_sync import GroupOffsetSync

__all__ = ["CheckpointTask"]

_log = logging.getLogger(__name__)
_TIMEOUT_S = 30


class CheckpointTask:
    name = "checkpoints"
    in_final_round = True
    lane = STATE_LANE

    def __init__(
        self, ctx: TaskContext, source_conf: dict[str, Any], target_conf: dict[str, Any], policy: ReplicationPolicy
    ) -> None:
        self._ctx = ctx
        self._policy = policy
        self.interval_s = ctx.flow.emit_checkpoints_interval_seconds
        self._source = admin_client(source_conf)
        self._source_conf = source_conf
        self._filter = RegexGroupFilter.for_flow(ctx.flow)
        self._own_group = consumer_group_id(ctx.flow)
        self._last: dict[tuple[str, str, int], tuple[int, int]] = {}
        target_admin = admin_client(target_conf)
        self.group_sync = GroupOffsetSync(ctx, target_conf) if ctx.flow.sync_group_offsets else None
        self.mm2 = (
            Mm2TopicWriter(ctx.state.producer, target_admin, policy.checkpoints_topic(ctx.flow.source))
            if ctx.flow.emit_checkpoints and ctx.flow.emit_mm2_checkpoints
            else None
        )

    def groups(self) -> list[str]:
        listing = self._source.list_consumer_groups(request_timeout=_TIMEOUT_S).result(timeout=_TIMEOUT_S)
        return sorted(
            g.group_id
            for g in listing.valid
            if g.group_id != self._own_group and self._filter.should_replicate_group(g.group_id)
        )

    def run(self) -> None:
        if self.mm2 is not None:
            self.mm2.ensure_topic()  # as MM2's connector does at start: translateOffsets then finds it
        groups = self.groups()
        if not groups:
            return  # nothing to translate: the mapping is read when a group appears (it keeps its place)
        self._ctx.view.refresh()
        for group in groups:
            try:
                offsets = committed_offsets(self._source_conf, group)
            except KafkaException as exc:
                _log.warning("flow %s: cannot read offsets of group %s: %s", self._ctx.flow.name, group, exc)
                continue
            checkpoints = [c for o in offsets if (c := self.checkpoint(group, o)) is not None]
            _log.debug("flow %s: group %s: %d checkpoints", self._ctx.flow.name, group, len(checkpoints))
            for c in checkpoints:
                key = (group, c.source_topic, c.partition)
                if self._last.get(key) != (c.upstream_offset, c.downstream_offset):
                    self._ctx.emit(c, self._latency_of(c))
                    if self.mm2 is not None:
                        self.mm2.write(*encode_checkpoint(mm2_checkpoint(c)), timestamp_ms=c.emitted_at_ms)
                    self._last[key] = (c.upstream_offset, c.downstream_offset)
            if self.group_sync is not None:
                self.group_sync.sync(group, checkpoints, self._unmapped(offsets, checkpoints))

    def _latency_of(self, c: Checkpoint) -> Callable[[], None]:
        """MM2's checkpoint-latency-ms of ``c``: its decision to the state topic's acknowledgement."""
        key = (c.group, c.target_topic, c.partition)
        return lambda: self._ctx.metrics.checkpoint_written(key, max(0, now_ms() - c.emitted_at_ms))

    def _unmapped(self, offsets: list[GroupOffset], checkpoints: list[Checkpoint]) -> list[GroupOffset]:
        done = {(c.source_topic, c.partition) for c in checkpoints}
        return [o for o in offsets if (o.topic, o.partition) not in done and self._target_topic(o.topic)]

    def _from_target(self, topic: str) -> bool:
        """A replica on the source of a topic of the target (``B.orders`` on A for A->B)."""
        return self._policy.topic_source(topic) == self._ctx.flow.target

    def _target_topic(self, topic: str) -> str | None:
        """The topic's name on the target, when this flow (or its reverse) relates the two."""
        flow = self._ctx.flow
        if self._from_target(topic):
            return self._policy.upstream_topic(topic)
        remote = self._ctx.remote_topics().get(topic)
        return remote.target_topic if remote is not None else self._ctx.view.index.target_topic(flow.name, topic)

    def checkpoint(self, group: str, offset: GroupOffset) -> Checkpoint | None:
        flow = self._ctx.flow
        target_topic = self._target_topic(offset.topic)
        if target_topic is None:
            return None
        index = self._ctx.view.index
        translation: Translation | None
        if self._from_target(offset.topic):
            reverse = f"{flow.target}->{flow.source}"
            back = index.reverse(reverse, target_topic, offset.partition, offset.offset)
            translation = (
                None
                if back is None
                else Translation(back.downstream, back.upstream, TranslationMethod(back.method).reversed())
            )
        else:
            translation = index.translate(flow.name, offset.topic, offset.partition, offset.offset)
        if translation is None:
            return None
        return Checkpoint(
            flow=flow.name,
            replicator_id=self._ctx.replicator_id,
            source_cluster=flow.source,
            target_cluster=flow.target,
            group=group,
            source_topic=offset.topic,
            target_topic=target_topic,
            partition=offset.partition,
            upstream_offset=offset.offset,
            downstream_offset=translation.downstream,
            method=translation.method,
            error_bound=0,
            metadata=offset.metadata,
        )

    def close(self) -> None:
        pass
