"""What a failover asks the target cluster directly (the state topic aside): group activity,
committed offsets, and positions by timestamp. The source is never contacted here."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from replicator.errors import ReplicationError
from replicator.kafka.errors import kafka_error, kafka_error_reason
from replicator.kafka.log_bounds import log_bounds, throwaway_reader
from replicator.tasks.group_sync import INACTIVE_STATES

__all__ = ["GroupActivity", "group_activity", "TimePosition", "positions_at"]

_TIMEOUT_S = 30


@dataclass(frozen=True)
class GroupActivity:
    members: int
    state: str

    @property
    def active(self) -> bool:
        return self.members > 0


def group_activity(admin: AdminClient, groups: Iterable[str]) -> dict[str, GroupActivity]:
    """Members and state of each group on the cluster (a group never seen there: 0 members)."""
    wanted = sorted(set(groups))
    if not wanted:
        return {}
    out: dict[str, GroupActivity] = {}
    for group, future in admin.describe_consumer_groups(wanted, request_timeout=_TIMEOUT_S).items():
        try:
            d = future.result(timeout=_TIMEOUT_S)
        except KafkaException as exc:
            err = kafka_error(exc)
            if isinstance(err, KafkaError) and err.code() == KafkaError.GROUP_ID_NOT_FOUND:
                out[group] = GroupActivity(0, "DEAD")  # never seen on this cluster
                continue
            raise ReplicationError(f"cannot describe group {group!r}: {kafka_error_reason(exc)}") from exc
        members = len(d.members or [])
        if not members and d.state not in INACTIVE_STATES:
            members = 1  # rebalancing with members on their way: count it as active
        out[group] = GroupActivity(members, str(d.state.name if d.state is not None else "UNKNOWN"))
    return out


@dataclass(frozen=True)
class TimePosition:
    offset: int  # the first record with timestamp >= the time (the end when there is none)
    log_start: int
    log_end: int


def positions_at(
    conf: dict[str, Any], partitions: Iterable[tuple[str, int]], at_ms: int
) -> dict[tuple[str, int], TimePosition]:
    """Where a consumer resuming at ``at_ms`` starts, per partition (Kafka's ``--to-datetime``)."""
    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    try:
        with throwaway_reader(conf, "mirrorlake-failover-times") as consumer:
            found = consumer.offsets_for_times([TopicPartition(t, p, at_ms) for t, p in wanted], timeout=_TIMEOUT_S)
            bounds = log_bounds(consumer, wanted, timeout_s=_TIMEOUT_S)
    except KafkaException as exc:
        raise ReplicationError(f"cannot look up offsets by time on the target: {kafka_error_reason(exc)}") from exc
    return {
        (tp.topic, tp.partition): TimePosition(
            tp.offset if tp.offset >= 0 else bounds[(tp.topic, tp.partition)][1], *bounds[(tp.topic, tp.partition)]
        )
        for tp in found
    }
