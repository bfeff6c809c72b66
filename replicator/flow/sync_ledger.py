"""What a flow has copied and which offset syncs are pending or durable.

Fed from delivery callbacks (in delivery order per partition), it turns copies into sync points
(``OffsetSyncTracker``), publishes them as ``OffsetSync`` events, and remembers per partition the
last upstream offset a *durable* sync covers: the highest source position at-least-once may
commit. Single-threaded: call it from the flow's thread (delivery callbacks run in ``poll``).
"""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import Producer

from replicator.config import FlowConfig
from replicator.events import OffsetSync
from replicator.flow.offset_sync import OffsetSyncTracker, SyncPoint
from replicator.kafka.state_log import StateLog

__all__ = ["SyncLedger"]

TP = tuple[str, int]


class SyncLedger:
    def __init__(self, flow: FlowConfig, replicator_id: str, state: StateLog) -> None:
        self._flow = flow
        self._replicator_id = replicator_id
        self._state = state
        self._tracker = OffsetSyncTracker(flow.offset_lag_max)
        self._pending: list[SyncPoint] = []
        self._covered: dict[TP, int] = {}  # last upstream offset a durable sync covers
        self._copied: dict[TP, int] = {}  # last upstream offset the target acknowledged
        self.published = 0

    def delivered(self, topic: str, partition: int, upstream: int, downstream: int, ts: int) -> bool:
        """Record one acknowledged copy; True if it made a sync point."""
        self._copied[(topic, partition)] = upstream
        point = self._tracker.record(topic, partition, upstream, downstream, ts)
        if point is not None:
            self._pending.append(point)
            return True
        return False

    def flush(self) -> None:
        """Make the last copy of every partition a sync point (the open run's end becomes known)."""
        self._pending.extend(self._tracker.flush())

    @property
    def has_pending(self) -> bool:
        return bool(self._pending)

    def publish(self, target_topics: dict[str, str], producer: Producer) -> None:
        """Emit every pending sync; each becomes 'durable' when the state topic acknowledges it."""
        pending, self._pending = self._pending, []
        for point in pending:
            event = OffsetSync(
                flow=self._flow.name,
                replicator_id=self._replicator_id,
                source_cluster=self._flow.source,
                target_cluster=self._flow.target,
                source_topic=point.topic,
                target_topic=target_topics[point.topic],
                partition=point.partition,
                upstream_offset=point.upstream_offset,
                downstream_offset=point.downstream_offset,
                upstream_timestamp_ms=point.upstream_timestamp_ms,
                reason=point.reason,
                previous_upstream_offset=point.previous_upstream_offset,
                previous_downstream_offset=point.previous_downstream_offset,
            )
            tp = (point.topic, point.partition)
            while True:
                try:
                    self._state.emit(event, on_durable=self._durable_callback(tp, point.upstream_offset))
                    break
                except BufferError:
                    producer.poll(0.05)
            self.published += 1

    def _durable_callback(self, tp: TP, upstream: int):  # -> Callable[[], None]
        def durable() -> None:
            if upstream > self._covered.get(tp, -1):
                self._covered[tp] = upstream

        return durable

    def commit_positions(self, assigned: Iterable[TP]) -> dict[TP, int]:
        """Source positions safe to commit: one past the last copy a durable sync covers."""
        return {tp: self._covered[tp] + 1 for tp in assigned if tp in self._covered}

    def settled(self, tp: TP) -> bool:
        """Every acknowledged copy of ``tp`` is covered by a durable sync."""
        return self._covered.get(tp, -1) >= self._copied.get(tp, -1)

    def forget(self, tps: Iterable[TP]) -> None:
        """Drop partitions (revoked, or a transaction aborted): their next copy starts a session."""
        for tp in tps:
            self._tracker.forget(*tp)
            self._covered.pop(tp, None)
            self._copied.pop(tp, None)

    def forget_all(self) -> None:
        self.forget(list({*self._copied, *self._covered}))
        self._pending.clear()
