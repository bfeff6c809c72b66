"""Decides, per copied record, whether an offset sync must be published.

Contract (per source partition, in delivery order, which the idempotent producer keeps):
- the first record copied in a producer session is a sync (``first``);
- every record whose ``downstream - upstream`` differs from the previous record's is a sync
  (``delta_change``) carrying the previous record as ``previous_*``: the run that ends there has
  an exact end, which is what makes the offset mapping exact (MM2 keeps only a lossy sample);
- MM2's rule on top, so our syncs are a superset of MM2's: an upstream gap (``upstream_gap``),
  a downstream rewind/truncation (``truncation``), and at least every ``offset_lag_max``
  downstream records (``lag_max``);
- ``flush()`` returns the last copied record of every partition not yet published (``flush``),
  so that the open run's end is known up to the flush interval.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SyncPoint", "OffsetSyncTracker"]


@dataclass(frozen=True, slots=True)
class SyncPoint:
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    upstream_timestamp_ms: int
    reason: str
    previous_upstream_offset: int | None
    previous_downstream_offset: int | None


class _PartitionState:
    __slots__ = ("last_u", "last_d", "last_ts", "last_sync_d", "published")

    def __init__(self, u: int, d: int, ts: int) -> None:
        self.last_u = u
        self.last_d = d
        self.last_ts = ts
        self.last_sync_d = d
        self.published = True


class OffsetSyncTracker:
    """Pure state machine; one instance per flow, not thread-safe (call from one thread)."""

    def __init__(self, offset_lag_max: int = 100) -> None:
        self._lag_max = offset_lag_max
        self._state: dict[tuple[str, int], _PartitionState] = {}

    def record(self, topic: str, partition: int, u: int, d: int, ts: int) -> SyncPoint | None:
        """Note that upstream ``u`` landed at downstream ``d``; return a sync to publish, if any."""
        key = (topic, partition)
        st = self._state.get(key)
        if st is None:
            self._state[key] = _PartitionState(u, d, ts)
            return SyncPoint(topic, partition, u, d, ts, "first", None, None)
        if d < st.last_d:
            reason: str | None = "truncation"
        elif d - u != st.last_d - st.last_u:
            reason = "delta_change"
        elif u - st.last_u != 1:
            reason = "upstream_gap"
        elif d - st.last_sync_d >= self._lag_max:
            reason = "lag_max"
        else:
            reason = None
        prev_u, prev_d = st.last_u, st.last_d
        st.last_u, st.last_d, st.last_ts = u, d, ts
        if reason is None:
            st.published = False
            return None
        st.last_sync_d = d
        st.published = True
        return SyncPoint(topic, partition, u, d, ts, reason, prev_u, prev_d)

    def flush(self) -> list[SyncPoint]:
        """The last copied record of each partition whose latest copy is not yet published."""
        out = []
        for (topic, partition), st in self._state.items():
            if not st.published:
                st.published = True
                st.last_sync_d = st.last_d
                out.append(SyncPoint(topic, partition, st.last_u, st.last_d, st.last_ts, "flush", None, None))
        return out

    def forget(self, topic: str, partition: int) -> None:
        """Drop a partition (revoked): its next record starts a new session with a ``first`` sync."""
        self._state.pop((topic, partition), None)
