"""What a failover asks the target cluster directly (the state topic aside): group activity,
committed offsets, positions by timestamp, and which copies a compacted topic still holds. The
source is never contacted here."""

from __future__ import annotations

import time
from array import array
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from replicator.client.present_copies import PresentCopies
from replicator.errors import FailoverError, ReplicationError
from replicator.kafka.errors import kafka_error, kafka_error_reason
from replicator.kafka.log_bounds import log_bounds, throwaway_reader
from replicator.kafka.settings import BOUNDED_READ_WAIT_S
from replicator.tasks.group_sync import INACTIVE_STATES

__all__ = [
    "GroupActivity",
    "group_activity",
    "TimePosition",
    "positions_at",
    "read_present",
]

_TIMEOUT_S = 30
_ANSWER_S = _TIMEOUT_S + 5  # a future waited on past its request's own timeout: that error says more
_END_IDLE_S = 2.0  # a read that gets nothing for this long has reached what is readable


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
            d = future.result(timeout=_ANSWER_S)
        except TimeoutError as exc:
            raise ReplicationError(f"cannot describe group {group!r}: no answer in {_ANSWER_S} s") from exc
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
    """Where a consumer resuming at ``at_ms`` starts, per partition (Kafka's ``--to-datetime``).

    ``at_ms`` must be >= 0: ListOffsets reads -1 as "latest" and -2 as "earliest", so a time before
    1970 passed on as it is would send every group to the log end (``times.lookup_time`` resolves it).
    """
    if at_ms < 0:
        raise FailoverError(f"time {at_ms} ms is below 0, which Kafka reads as a sentinel, not a time")
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


def read_present(
    conf: dict[str, Any], ends: Mapping[tuple[str, int], int], *, timeout_s: float = 120.0
) -> dict[tuple[str, int], PresentCopies]:
    """The offsets still holding a record in ``[log start, end)`` of each partition (read_committed).

    Only offsets are kept (8 bytes a record). A partition whose read does not reach its end within
    ``timeout_s`` is an error naming it: a partial reading would count unread copies as compacted.
    """
    out: dict[tuple[str, int], PresentCopies] = {}
    if not ends:
        return out
    try:
        with throwaway_reader(conf, "mirrorlake-failover-present") as consumer:
            bounds = log_bounds(consumer, sorted(ends), timeout_s=_TIMEOUT_S)
            for (topic, partition), end in sorted(ends.items()):
                start, log_end = bounds[(topic, partition)]
                stop = min(end, log_end)
                out[(topic, partition)] = PresentCopies(
                    start, end, _offsets_in(consumer, topic, partition, start, stop, timeout_s)
                )
    except KafkaException as exc:
        raise ReplicationError(f"cannot read the target's compacted partitions: {kafka_error_reason(exc)}") from exc
    return out


def _offsets_in(consumer: Consumer, topic: str, partition: int, start: int, stop: int, timeout_s: float) -> array:
    offsets = array("q")
    if stop <= start:
        return offsets
    consumer.assign([TopicPartition(topic, partition, start)])
    deadline = time.monotonic() + timeout_s
    still_since, last_pos = time.monotonic(), None
    try:
        while True:
            batch = consumer.consume(10_000, timeout=BOUNDED_READ_WAIT_S)
            for msg in batch:
                if msg.error() is None and (o := msg.offset()) is not None and o < stop:
                    offsets.append(o)
            (pos,) = consumer.position([TopicPartition(topic, partition)])
            if pos.offset >= stop:
                return offsets
            now = time.monotonic()
            if batch or pos.offset != last_pos:
                still_since, last_pos = now, pos.offset
            elif now - still_since > _END_IDLE_S and _at_readable_end(consumer, topic, partition, pos.offset):
                # nothing readable in [pos, stop): a transaction marker at the log's end, or records of a
                # transaction still open (never mapped copies: the mapping holds only committed ones)
                return offsets
            if now > deadline:
                raise ReplicationError(
                    f"reading {topic}[{partition}] of the target to offset {stop} did not finish in {timeout_s:.0f} s "
                    f"(at {pos.offset})"
                )
    finally:
        consumer.unassign()


def _at_readable_end(consumer: Consumer, topic: str, partition: int, position: int) -> bool:
    """Whether ``position`` is at most one marker short of the end the last fetch reported (for a
    read_committed consumer librdkafka reports the last stable offset there): a slow fetch never
    passes for the end."""
    _low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
    return position >= 0 and high is not None and high >= 0 and position >= high - 1
