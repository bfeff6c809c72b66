"""Partitions the group hands a process: their copies are recovered before they are copied.

A process killed with SIGKILL leaves copies past its last commit (with a durable sync, or none,
``tail_recovery``); copying from the commit would make each of them a second time (issue 39 item 1:
"a partition is recovered only by the process that owns it"). So, at-least-once, every partition
assigned without a start of its own is held back from the consumer (the rebalance callback assigns
the others) until the flow's loop has recovered it against the state log as it stands then, and is
then assigned at its resume point (``resume``). A process's first assignment is no exception: a
recovery made at its start, before the group assigned anything, can be overtaken by the owner it
replaces, still copying until it is killed (seed 197 of the soak). A re-created topic's partition
not moved to its new start yet is held too (its new life's copies are matched first,
``topics.topic_lives``). A held partition revoked before its recovery ran is dropped: its next
owner recovers it.

What can still be copied twice: a peer that lost its partitions (session expired) but still runs
keeps copying until it notices; only exactly-once fences it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from confluent_kafka import OFFSET_INVALID, TopicPartition

from replicator.flow.syncs.sync_ledger import TP

__all__ = ["Takeovers"]


class Takeovers:
    """Which assigned partitions wait for their recovery (single-threaded: the flow's loop and its
    rebalance callbacks, which run inside its ``poll``)."""

    def __init__(self) -> None:
        self._held: dict[TP, None] = {}  # in assignment order

    def split(self, starts: Sequence[TopicPartition], hold: Iterable[TP] = ()) -> tuple[list[TopicPartition], list[TP]]:
        """(the starts to assign now, the partitions held for recovery) of one assignment; ``hold``:
        held whatever their start (a re-created topic's, matched before they are copied)."""
        now: list[TopicPartition] = []
        held: list[TP] = []
        always = set(hold)
        for tp in starts:
            key = (tp.topic, tp.partition)
            if key not in always and tp.offset != OFFSET_INVALID:
                now.append(tp)
            else:
                self._held[key] = None
                held.append(key)
        return now, held

    @property
    def pending(self) -> list[TP]:
        return list(self._held)

    def revoked(self, keys: Iterable[TP]) -> set[TP]:
        """Drop ``keys`` (revoked or lost); the ones that were held, never assigned to the consumer."""
        keys = list(keys)
        out = {k for k in keys if k in self._held}
        for k in keys:
            self._held.pop(k, None)
        return out

    def release(self, keys: Iterable[TP]) -> None:
        """``keys`` were recovered and are being assigned."""
        for k in keys:
            self._held.pop(k, None)
