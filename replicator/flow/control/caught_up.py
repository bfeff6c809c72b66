"""When a batch run may stop: the flow's caught-up check.

Caught up means: every assigned partition read to the end the source had when asked, every copy
acknowledged by the target, and every acknowledged copy covered by a durable offset sync (so the
positions committed at the end are exact). With several processes per flow each judges only its
own share of the partitions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from confluent_kafka import OFFSET_INVALID, TopicPartition

from replicator.flow.core.sync_ledger import TP, SyncLedger
from replicator.flow.syncs.commits import Commits

__all__ = ["CaughtUpCheck", "PositionReader"]


class PositionReader(Protocol):
    """What the check needs of the flow's consumer."""

    def assignment(self) -> list[TopicPartition]: ...

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]: ...


class CaughtUpCheck:
    """``__call__(in_flight, following)``: True once the flow's share is copied and its syncs durable.

    ``following``: the flow selects at least one topic (no assignment yet then means "not yet").
    A call that finds copies not yet covered flushes the ledger so that the next call can succeed;
    one that finds an open transaction commits it.
    """

    def __init__(
        self,
        consumer: PositionReader,
        commits: Commits,
        ledger: SyncLedger,
        end_offsets: Callable[[list[TP]], dict[TP, int]],
    ) -> None:
        self._consumer = consumer
        self._commits = commits
        self._ledger = ledger
        self._end_offsets = end_offsets

    def __call__(self, in_flight: int, following: bool) -> bool:
        if in_flight or self._ledger.has_pending:
            return False
        if self._commits.in_transaction:
            self._commits.after_batch(force=True)
            return False
        assignment = self._consumer.assignment()
        if not assignment and following:
            return False  # not assigned yet (with several processes, each judges its own share)
        positions = self._consumer.position(assignment)
        known = self._commits.positions()
        unread = [tp for tp in positions if tp.offset == OFFSET_INVALID and (tp.topic, tp.partition) not in known]
        committed = {(tp.topic, tp.partition): tp.offset for tp in self._commits.committed(unread)}
        ends = self._end_offsets([(tp.topic, tp.partition) for tp in positions])
        for tp in positions:
            key = (tp.topic, tp.partition)
            pos = tp.offset if tp.offset != OFFSET_INVALID else known.get(key, committed.get(key, OFFSET_INVALID))
            if pos < ends[key] and not (pos < 0 and ends[key] == 0):
                return False
            if not self._ledger.settled(key):
                self._ledger.flush()  # the tail is copied but its sync is not durable yet
                return False
        return True
