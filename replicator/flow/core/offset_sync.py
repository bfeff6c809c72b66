"""Decides, per copied record, whether an offset sync must be published, and makes the event.

Contract (per source partition, in delivery order, which the idempotent producer keeps):
- the first record copied in a producer session is a sync (``SyncReason.FIRST``);
- every record whose ``downstream - upstream`` differs from the previous record's is a sync
  (``DELTA_CHANGE``) carrying the previous record as ``previous_*``: the run that ends there has
  an exact end, which is what makes the offset mapping exact (MM2 keeps only a lossy sample);
- MM2's rule on top, so our syncs are a superset of MM2's: an upstream gap (``UPSTREAM_GAP``),
  a downstream rewind/truncation (``TRUNCATION``), and at least every ``offset_lag_max``
  downstream records (``LAG_MAX``);
- ``flush()`` returns the last copied record of every partition not yet published (``FLUSH``),
  so that the open run's end is known up to the flush interval.

The tracker returns ``OffsetSync`` events ready to publish (``SyncOrigin`` fills in who emits
them): there is no intermediate representation of a sync to copy field by field.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from replicator.events import OffsetSync, SyncReason

__all__ = ["SyncOrigin", "OffsetSyncTracker"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SyncOrigin:
    """The fields every sync of one flow shares (empty strings in pure tests of the rule)."""

    flow: str = ""
    replicator_id: str = ""
    source_cluster: str = ""
    target_cluster: str = ""


class _PartitionState:
    __slots__ = ("target_topic", "last_u", "last_d", "last_ts", "last_sync_d", "published")

    def __init__(self, target_topic: str, u: int, d: int, ts: int) -> None:
        self.target_topic = target_topic
        self.last_u = u
        self.last_d = d
        self.last_ts = ts
        self.last_sync_d = d
        self.published = True


class OffsetSyncTracker:
    """Pure state machine; one instance per flow, not thread-safe (call from one thread)."""

    def __init__(
        self,
        offset_lag_max: int = 100,
        origin: SyncOrigin | None = None,
        topic_ids: dict[str, str] | None = None,
        remote_ids: dict[str, str] | None = None,
    ) -> None:
        """``topic_ids`` (source topic -> Kafka topic id, kept current by ``flow.topic_lives``) and
        ``remote_ids`` (source topic -> its remote topic's id, ``flow.remote_lives``): each sync
        carries both, the life of the mapping it belongs to."""
        self._lag_max = offset_lag_max
        self._origin = origin or SyncOrigin()
        self._topic_ids = topic_ids if topic_ids is not None else {}
        self._remote_ids = remote_ids if remote_ids is not None else {}
        self._state: dict[tuple[str, int], _PartitionState] = {}

    def record(
        self, topic: str, partition: int, u: int, d: int, ts: int, target_topic: str | None = None
    ) -> OffsetSync | None:
        """Note that upstream ``u`` landed at downstream ``d``; return a sync to publish, if any.

        ``target_topic`` (default: ``topic``) names the remote topic in the syncs of this partition.
        """
        st = self._state.get((topic, partition))
        if st is None:
            self._state[(topic, partition)] = _PartitionState(target_topic or topic, u, d, ts)
            return self._sync(topic, partition, target_topic or topic, u, d, ts, SyncReason.FIRST, None, None)
        last_u, last_d = st.last_u, st.last_d
        st.last_u, st.last_d, st.last_ts = u, d, ts
        # the common case first: the next offset on both sides, well within offset_lag_max
        if u - last_u == 1 and d - last_d == 1 and d - st.last_sync_d < self._lag_max:
            st.published = False
            return None
        if d < last_d:
            reason = SyncReason.TRUNCATION
        elif d - u != last_d - last_u:
            reason = SyncReason.DELTA_CHANGE
        elif u - last_u != 1:
            reason = SyncReason.UPSTREAM_GAP
        elif d - st.last_sync_d >= self._lag_max:
            reason = SyncReason.LAG_MAX
        else:
            st.published = False
            return None
        st.last_sync_d = d
        st.published = True
        return self._sync(topic, partition, st.target_topic, u, d, ts, reason, last_u, last_d)

    def record_span(
        self, topic: str, partition: int, u: int, d: int, timestamps: list[int], target_topic: str | None = None
    ) -> list[OffsetSync]:
        """Note that upstream ``[u - n + 1, u]`` (``n = len(timestamps)``, their timestamps in order) were
        copied, in order, the last of them to ``d`` (run-length delivery tracking: only the last one's
        offset is reported); return the syncs to publish.

        When ``d`` moved by exactly ``n`` since the previous recorded copy, which is ``u - n``, the
        copies are contiguous on both sides: every downstream offset is known, and MM2's rule (a sync
        at least every ``offset_lag_max`` downstream records) is applied at the very copies a
        per-record report would have made syncs. Otherwise something else was written to the target
        partition among them, at offsets nobody reported: the sync then carries the previous recorded
        copy as its predecessor, so the mapping leaves the copies in between out (a translation inside
        them resumes after the last known copy: re-read, never lost) and a warning says how many.
        """
        n = len(timestamps)
        st = self._state.get((topic, partition))
        if n <= 1 or st is None:
            sync = self.record(topic, partition, u, d, timestamps[-1], target_topic)
            return [sync] if sync is not None else []
        if u - st.last_u == n and d - st.last_d == n:
            out = []
            while d - st.last_sync_d >= self._lag_max:
                dx = st.last_sync_d + self._lag_max
                ux = dx - (d - u)
                ts = timestamps[n - 1 - (d - dx)]
                out.append(
                    self._sync(topic, partition, st.target_topic, ux, dx, ts, SyncReason.LAG_MAX, ux - 1, dx - 1)
                )
                st.last_sync_d = dx
            st.last_u, st.last_d, st.last_ts = u, d, timestamps[-1]
            st.published = st.last_sync_d == d
            return out
        _log.warning(
            "%s[%d]: %d copies (source offsets %d..%d) landed among records written to %s by someone else; "
            "they are left out of the offset mapping (a translation inside them re-reads, never loses)",
            topic, partition, n - 1, u - n + 1, u - 1, st.target_topic,
        )  # fmt: skip
        sync = self.record(topic, partition, u, d, timestamps[-1], target_topic)
        return [sync] if sync is not None else []

    def flush(self) -> list[OffsetSync]:
        """The last copied record of each partition whose latest copy is not yet published."""
        out = []
        for (topic, partition), st in self._state.items():
            if not st.published:
                st.published = True
                st.last_sync_d = st.last_d
                out.append(
                    self._sync(
                        topic,
                        partition,
                        st.target_topic,
                        st.last_u,
                        st.last_d,
                        st.last_ts,
                        SyncReason.FLUSH,
                        None,
                        None,
                    )
                )
        return out

    def last_copy(self, topic: str, partition: int) -> tuple[int, int] | None:
        """``(upstream, downstream)`` of the last copy recorded for a partition in this session."""
        st = self._state.get((topic, partition))
        return (st.last_u, st.last_d) if st is not None else None

    def last_upstream(self, topic: str, partition: int) -> int | None:
        """The last upstream offset recorded for a partition in this session (None: none yet)."""
        st = self._state.get((topic, partition))
        return st.last_u if st is not None else None

    def partitions(self) -> list[tuple[str, int]]:
        """The partitions with a session in this tracker."""
        return list(self._state)

    def forget(self, topic: str, partition: int) -> None:
        """Drop a partition (revoked): its next record starts a new session with a ``FIRST`` sync."""
        self._state.pop((topic, partition), None)

    def _sync(
        self,
        topic: str,
        partition: int,
        target_topic: str,
        u: int,
        d: int,
        ts: int,
        reason: SyncReason,
        prev_u: int | None,
        prev_d: int | None,
    ) -> OffsetSync:
        origin = self._origin
        return OffsetSync(
            flow=origin.flow,
            replicator_id=origin.replicator_id,
            source_cluster=origin.source_cluster,
            target_cluster=origin.target_cluster,
            source_topic=topic,
            target_topic=target_topic,
            partition=partition,
            upstream_offset=u,
            downstream_offset=d,
            upstream_timestamp_ms=ts,
            reason=reason,
            previous_upstream_offset=prev_u,
            previous_downstream_offset=prev_d,
            source_topic_id=self._topic_ids.get(topic),
            target_topic_id=self._remote_ids.get(topic),
        )
