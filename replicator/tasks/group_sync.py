"""Writing translated group offsets to the target, with an event for every decision.

A group is synced only while it is inactive on the target (no members: Kafka refuses to alter
the offsets of an active group anyway, and a running consumer there owns its position). A
partition is never moved backwards: when the target already holds a larger offset (the group ran
on the target, or the source group was reset) the decision is ``skipped_rewind`` and says both
offsets. Decisions: ``synced``, ``unchanged``, ``skipped_active_on_target``,
``skipped_no_mapping`` (nothing of the partition was replicated yet), ``skipped_rewind``,
``skipped_invalid_offset`` (a negative offset or partition: Kafka would read it as a sentinel such
as "latest", so it is never written), ``failed``. A ``GroupSync`` event is emitted when a
partition's decision or offsets change, so the log has each decision once rather than once per
interval.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaException, TopicPartition

from replicator.access.permissions import AUTHORIZATION_CODES
from replicator.client.group_offsets import GroupOffset, committed_offsets
from replicator.events import Checkpoint, GroupSync
from replicator.kafka.admin import admin_client
from replicator.kafka.errors import kafka_error, kafka_error_reason
from replicator.kafka.positions_guard import is_real_position, real_positions

if TYPE_CHECKING:
    from replicator.tasks.base import TaskContext

__all__ = ["GroupOffsetSync", "INACTIVE_STATES", "Decision"]

_log = logging.getLogger(__name__)
_TIMEOUT_S = 30
# (the checkpoint decided about, decision, target offset before, after, why)
Decision = tuple[Checkpoint, str, int | None, int | None, str | None]
INACTIVE_STATES = frozenset({ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD, ConsumerGroupState.UNKNOWN})


class GroupOffsetSync:
    def __init__(self, ctx: TaskContext, target_conf: Mapping[str, Any]) -> None:
        self._ctx = ctx
        self._target = admin_client(target_conf)
        self._target_conf = target_conf
        self._last: dict[tuple[str, str, int], tuple[str, int | None, int | None, int | None]] = {}

    def _target_state(self, group: str) -> tuple[bool, dict[tuple[str, int], int]]:
        """(active on the target?, its committed offsets there)."""
        described = self._target.describe_consumer_groups([group], request_timeout=_TIMEOUT_S)[group]
        description = described.result(timeout=_TIMEOUT_S)
        active = bool(description.members) or description.state not in INACTIVE_STATES
        offsets = {(o.topic, o.partition): o.offset for o in committed_offsets(self._target_conf, group)}
        return active, offsets

    def sync(self, group: str, checkpoints: Sequence[Checkpoint], unmapped: Sequence[GroupOffset]) -> list[Decision]:
        """Decide for every checkpoint of ``group`` (and every committed partition with no mapping);
        returns the decisions about the checkpoints (empty when the target could not be asked)."""
        decisions: list[Decision] = []
        try:
            active, on_target = self._target_state(group)
        except KafkaException as exc:
            _log.warning("flow %s: cannot describe group %s on the target: %s", self._ctx.flow.name, group, exc)
            return []
        to_write: list[Checkpoint] = []
        for c in checkpoints:
            before = on_target.get((c.target_topic, c.partition))
            if not is_real_position(c.partition, c.downstream_offset):
                invalid = f"offset {c.downstream_offset} of partition {c.partition} is not a position in a log"
                decisions.append((c, "skipped_invalid_offset", before, before, invalid))
            elif active:
                decisions.append((c, "skipped_active_on_target", before, before, "the group has members on the target"))
            elif before is not None and before > c.downstream_offset:
                ahead = f"the target holds {before}, ahead of the translated {c.downstream_offset}"
                decisions.append((c, "skipped_rewind", before, before, ahead))
            elif before == c.downstream_offset:
                decisions.append((c, "unchanged", before, before, None))
            else:
                to_write.append(c)
        if to_write:
            decisions += self._write(group, to_write, on_target)
        for c, decision, before, after, why in decisions:
            self._emit(
                group,
                c.source_topic,
                c.target_topic,
                c.partition,
                decision,
                c.upstream_offset,
                c.downstream_offset,
                before,
                after,
                why,
            )
        for o in unmapped:
            self._emit(
                group,
                o.topic,
                "",
                o.partition,
                "skipped_no_mapping",
                o.offset,
                None,
                None,
                None,
                "no record of this partition has been replicated yet",
            )
        return decisions

    def _write(
        self, group: str, checkpoints: list[Checkpoint], on_target: dict[tuple[str, int], int]
    ) -> list[Decision]:
        """Alter the group's offsets; a partition the broker refused is ``failed`` with its reason.

        The broker answers per partition (a refused commit is not an exception of the request),
        so each partition's error is read. An authorization refusal is raised (as a
        ``KafkaException``): the caller names the ACL to grant rather than record a decision.
        """
        partitions = real_positions(
            [TopicPartition(c.target_topic, c.partition, c.downstream_offset) for c in checkpoints],
            f"group {group!r} on the target",
        )
        request = [ConsumerGroupTopicPartitions(group, partitions)]
        try:
            result = self._target.alter_consumer_group_offsets(request, request_timeout=_TIMEOUT_S)[group].result(
                timeout=_TIMEOUT_S
            )
        except KafkaException as exc:
            err = kafka_error(exc)
            if err is not None and err.code() in AUTHORIZATION_CODES:
                raise
            reason = kafka_error_reason(exc)
            return [(c, "failed", on_target.get((c.target_topic, c.partition)), None, reason) for c in checkpoints]
        refused = {(tp.topic, tp.partition): tp.error for tp in result.topic_partitions or [] if tp.error}
        for err in refused.values():
            if err.code() in AUTHORIZATION_CODES:
                raise KafkaException(err)
        out: list[Decision] = []
        for c in checkpoints:
            key, before = (c.target_topic, c.partition), on_target.get((c.target_topic, c.partition))
            if key in refused:
                out.append((c, "failed", before, None, f"{refused[key].name()}: {refused[key].str()}"))
            else:
                out.append((c, "synced", before, c.downstream_offset, None))
        return out

    def _emit(
        self,
        group: str,
        source_topic: str,
        target_topic: str,
        partition: int,
        decision: str,
        upstream: int | None,
        translated: int | None,
        before: int | None,
        after: int | None,
        detail: str | None,
    ) -> None:
        key = (group, source_topic, partition)
        # a partition synced last time reads "unchanged" now: the same state, not a new decision
        state = ("in_sync" if decision in ("synced", "unchanged") else decision, upstream, translated, after or before)
        if self._last.get(key) == state:
            return
        self._last[key] = state
        flow = self._ctx.flow
        self._ctx.emit(
            GroupSync(
                flow=flow.name,
                replicator_id=self._ctx.replicator_id,
                source_cluster=flow.source,
                target_cluster=flow.target,
                group=group,
                source_topic=source_topic,
                target_topic=target_topic,
                partition=partition,
                decision=decision,
                upstream_offset=upstream,
                translated_offset=translated,
                target_offset_before=before,
                target_offset_after=after,
                detail=detail,
            ),
        )
