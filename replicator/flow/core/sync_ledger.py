"""What a flow has copied and which offset syncs are pending or durable.

Fed from delivery callbacks (in delivery order per partition), it turns copies into ``OffsetSync``
events (``OffsetSyncTracker``), publishes them, and remembers per partition the last upstream
offset a *durable* sync covers: the highest source position at-least-once may commit.
Single-threaded: call it from the flow's thread (delivery callbacks run in ``poll``).

Invariants the commit gating relies on (unit-tested in tests/test_flow_units.py):
- ``commit_positions`` never passes a copy whose sync is not durable (acknowledged by the
  state topic): a crash replays, never skips, and every committed record has an exact mapping;
- ``settled(tp)`` holds exactly when every acknowledged copy of ``tp`` is covered by a durable sync;
- after ``forget``, a partition's next copy starts a new session (a ``first`` sync).

It also keeps the upstream gaps its syncs reveal (``gaps``): offsets the flow read past without
copying, which ``flow.topic_lives`` holds against the source's log start (records deleted before
their copy, or only transaction markers and aborted records).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from replicator.events import Event, OffsetSync
from replicator.flow.core.offset_sync import OffsetSyncTracker, SyncOrigin

__all__ = ["SyncLedger", "StateEmitter", "TP"]

TP = tuple[str, int]
_MARKER = 2  # a gap of one offset is a transaction marker: only wider gaps are worth a look


class StateEmitter(Protocol):
    """Where syncs go: ``replicator.kafka.state_log.StateLog`` (or a fake in unit tests)."""

    def emit(self, event: Event, on_durable: Callable[[], None] | None = None) -> None:
        """Produce ``event``; may raise ``BufferError`` when the producer's queue is full."""


class SyncLedger:
    def __init__(
        self,
        origin: SyncOrigin,
        offset_lag_max: int,
        state: StateEmitter,
        wait: Callable[[float], object],
        topic_ids: dict[str, str] | None = None,
        remote_ids: dict[str, str] | None = None,
    ) -> None:
        """``wait(seconds)`` serves deliveries while the producer's queue is full (``Producer.poll``);
        ``topic_ids``, ``remote_ids``: the source and remote topics' ids the syncs carry (``OffsetSyncTracker``)."""
        self._state = state
        self._wait = wait
        self._tracker = OffsetSyncTracker(offset_lag_max, origin, topic_ids, remote_ids)
        self.gaps: list[tuple[str, int, int, int]] = []  # (topic, partition, first skipped, first copied after)
        self._pending: list[OffsetSync] = []
        self._covered: dict[TP, int] = {}  # last upstream offset a durable sync covers
        self._advanced: set[TP] = set()  # partitions whose durable coverage moved since last asked
        self.published = 0

    def delivered(self, topic: str, partition: int, upstream: int, downstream: int, ts: int, target_topic: str) -> bool:
        """Record one acknowledged copy; True if it made a sync."""
        sync = self._tracker.record(topic, partition, upstream, downstream, ts, target_topic)
        if sync is None:
            return False
        self._pending.append(sync)
        return True

    def delivered_span(
        self, topic: str, partition: int, upstream: int, downstream: int, timestamps: list[int], target_topic: str
    ) -> bool:
        """Record an acknowledged copy and the untracked copies of the source offsets just before it,
        produced to the same partition before it (``timestamps``: all of theirs, oldest first; run-length
        tracking); True if it made a sync."""
        syncs = self._tracker.record_span(topic, partition, upstream, downstream, timestamps, target_topic)
        self._pending.extend(syncs)
        return bool(syncs)

    def flush(self) -> None:
        """Make the last copy of every partition a sync (the open run's end becomes known)."""
        self._pending.extend(self._tracker.flush())

    @property
    def has_pending(self) -> bool:
        return bool(self._pending)

    def publish(self) -> None:
        """Emit every pending sync; each becomes 'durable' when the state topic acknowledges it."""
        pending, self._pending = self._pending, []
        for sync in pending:
            prev = sync.previous_upstream_offset
            if prev is not None and sync.upstream_offset - prev > _MARKER:  # a gap, whatever the delta did
                self.gaps.append((sync.source_topic, sync.partition, prev + 1, sync.upstream_offset))
            durable = self._durable_callback((sync.source_topic, sync.partition), sync.upstream_offset)
            while True:
                try:
                    self._state.emit(sync, on_durable=durable)
                    break
                except BufferError:
                    self._wait(0.05)
            self.published += 1

    def _durable_callback(self, tp: TP, upstream: int) -> Callable[[], None]:
        def durable() -> None:
            if upstream > self._covered.get(tp, -1):
                self._covered[tp] = upstream
                self._advanced.add(tp)

        return durable

    def commit_positions(self, assigned: Iterable[TP]) -> dict[TP, int]:
        """Source positions safe to commit: one past the last copy a durable sync covers."""
        return {tp: self._covered[tp] + 1 for tp in assigned if tp in self._covered}

    def advanced_positions(self, assigned: set[TP] | frozenset[TP]) -> dict[TP, int]:
        """``commit_positions`` of the assigned partitions whose coverage moved since the last call."""
        if not self._advanced:
            return {}
        moved, self._advanced = self._advanced, set()
        return {tp: self._covered[tp] + 1 for tp in moved if tp in assigned and tp in self._covered}

    def last_copy(self, tp: TP) -> tuple[int, int] | None:
        """``(upstream, downstream)`` of the last acknowledged copy of ``tp`` in this session."""
        return self._tracker.last_copy(*tp)

    def settled(self, tp: TP) -> bool:
        """Every acknowledged copy of ``tp`` is covered by a durable sync."""
        last = self._tracker.last_upstream(*tp)
        return last is None or self._covered.get(tp, -1) >= last

    def forget(self, tps: Iterable[TP]) -> None:
        """Drop partitions (revoked, or a transaction aborted): their next copy starts a session."""
        for tp in tps:
            self._tracker.forget(*tp)
            self._covered.pop(tp, None)
            self._advanced.discard(tp)

    def forget_all(self) -> None:
        self.forget(list({*self._tracker.partitions(), *self._covered}))
        self._pending.clear()
