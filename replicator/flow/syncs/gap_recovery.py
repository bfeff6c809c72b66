"""Second copies that reach the target between a flow's own copies get an offset sync too.

A writer killed while its batch was on the way (the target frozen or slow) can have that batch
appended after its successor already copied the same records again: the target then holds, between
two copies of the live flow, records no sync names. The live flow's syncs see only a jump in the
downstream offsets (a gap between two segments of the mapping), so the mapping keeps pointing at
the earlier copies while the latest copy of those records, the one the exact translation names
(DESIGN.md: "the downstream offset of the latest copy"), sits in the gap. A soak found it (seed
91040: 37 offsets of one partition translated 38 too low, the earlier copies then compacted away).

``GapRecovery`` reads each such gap of an at-least-once flow (exactly-once: a dead writer's
transaction is aborted, and every commit marker is a one-offset gap), matches its records to the
source by content (``core.matching.match_copies``, second copies included) and publishes their
syncs with reason ``recovered``, as the start does for the copies past the last sync. Records that
match nothing (another producer's, a marker of an earlier exactly-once run) stay a gap. Gaps are
examined once per process, partition by partition, at most ``max_gaps`` gaps and ``budget`` target
records a run (a flow that ran exactly-once before has a one-offset gap per transaction: many runs
then); a gap larger than ``max_gap`` is left and logged.
"""

from __future__ import annotations

import logging
from typing import Any

from replicator.client.mapping import Segment
from replicator.flow.core.logs import hashed_range
from replicator.flow.core.matching import TopicIds, match_copies, recovery_syncs
from replicator.flow.core.offset_sync import SyncOrigin
from replicator.flow.core.takeover import topic_pair_ids
from replicator.flow.syncs.kafka_logs import KafkaLogs
from replicator.tasks.base import STATE_LANE, TaskContext

__all__ = ["GapRecovery", "downstream_gaps"]

_log = logging.getLogger(__name__)

_LOOKBACK = 10_000  # source records before a gap that its records may be second copies of


def downstream_gaps(segments: list[Segment], after: int = -1) -> list[tuple[Segment, Segment]]:
    """Consecutive segments (by downstream offset) with target offsets between them that no copy
    the mapping knows holds; only those whose gap ends past ``after``."""
    ordered = sorted(segments, key=lambda s: s.downstream_start)
    return [
        (a, b)
        for a, b in zip(ordered, ordered[1:], strict=False)
        if b.downstream_start > a.downstream_end + 1 and b.downstream_start > after
    ]


class GapRecovery:
    """A state task of an at-least-once flow (``replicator.tasks.base.StateTask``)."""

    name = "gap_recovery"
    in_final_round = True
    lane = STATE_LANE

    def __init__(
        self,
        ctx: TaskContext,
        *,
        interval_s: float = 30.0,
        budget: int = 200_000,
        max_gap: int = 100_000,
        max_gaps: int = 50,
    ):
        self._ctx = ctx
        self.interval_s = interval_s
        self._budget = budget
        self._max_gaps = max_gaps
        self._max_gap = max_gap
        flow = ctx.flow
        self._origin = SyncOrigin(flow.name, ctx.replicator_id, flow.source, flow.target)
        source_conf: dict[str, Any] = ctx.config.cluster(flow.source).client_config()
        target_conf: dict[str, Any] = ctx.config.cluster(flow.target).client_config()
        self._source = KafkaLogs(source_conf, f"{ctx.replicator_id}-{flow.name}-gaps-source")
        self._target = KafkaLogs(target_conf, f"{ctx.replicator_id}-{flow.name}-gaps-target")
        self._examined: dict[
            tuple[str, int, str | None, str | None], int
        ] = {}  # downstream offset examined up to, per life

    def run(self) -> None:
        view = self._ctx.view
        view.refresh()
        flow = self._ctx.flow.name
        budget, reads = self._budget, self._max_gaps
        known: dict[tuple[str, str], TopicIds] = {}
        for _f, topic, partition in view.index.partitions(flow):
            current = view.index.life(flow, topic, partition)
            life = (topic, partition, current.topic_id, current.target_topic_id)
            gaps = downstream_gaps(view.index.segments(flow, topic, partition), self._examined.get(life, -1))
            target_topic = view.index.target_topic(flow, topic)
            if not gaps or target_topic is None:
                continue
            ids = self._ids(known, topic, target_topic, (current.topic_id, current.target_topic_id))
            if ids is None:
                continue
            bounds = self._bounds(topic, target_topic, partition)  # once per partition, not per gap
            if bounds is None:
                continue
            for before, after in gaps:
                size = after.downstream_start - before.downstream_end - 1
                if size > budget or reads == 0:
                    return  # the next run goes on from here
                if size <= self._max_gap:
                    budget, reads = budget - size, reads - 1
                    self._recover(topic, target_topic, partition, before, after, bounds, ids)
                else:
                    _log.warning(
                        "flow %s: %s[%d]: %d target offsets between copies %d and %d not examined (over %d)",
                        flow, target_topic, partition, size, before.downstream_end, after.downstream_start,
                        self._max_gap,
                    )  # fmt: skip
                self._examined[life] = after.downstream_start

    def _ids(
        self, known: dict[tuple[str, str], TopicIds], topic: str, target_topic: str, life: TopicIds
    ) -> TopicIds | None:
        """The ids the gap's syncs carry: the life's, filled with the clusters' where it names none;
        None when a topic is not the one the life was copied from or into (created again, not noticed
        yet by the flow: the gap holds another topic's records)."""
        key = (topic, target_topic)
        if key not in known:
            known.update(topic_pair_ids(self._source, self._target, [key]))
        now = known[key]
        if any(a is not None and a != b for a, b in zip(life, now, strict=True)):
            return None
        return (life[0] or now[0], life[1] or now[1])

    def _bounds(self, topic: str, target_topic: str, partition: int) -> tuple[int, int, int] | None:
        """(source log start, source log end, target log start); None when either partition is gone."""
        source = self._source.bounds([(topic, partition)]).get((topic, partition))
        target = self._target.bounds([(target_topic, partition)]).get((target_topic, partition))
        return None if source is None or target is None else (source[0], source[1], target[0])

    def _recover(
        self,
        topic: str,
        target_topic: str,
        partition: int,
        before: Segment,
        after: Segment,
        bounds: tuple[int, int, int],
        ids: TopicIds,
    ) -> None:
        """Publish the syncs of the copies between ``before`` and ``after`` (the source as it is now)."""
        s_low, s_end, t_low = bounds
        start = max(t_low, before.downstream_end + 1)  # retention
        tail = hashed_range(self._target, target_topic, partition, start, after.downstream_start)
        gap = [(r.offset, r.hash) for r in tail]
        if not gap:
            return  # markers, aborted or compacted records only
        expect = before.upstream_end + 1
        lo = max(s_low, expect - len(gap) - _LOOKBACK)
        hi = min(s_end, max(expect, after.upstream_start) + len(gap))
        source = hashed_range(self._source, topic, partition, lo, hi)
        pairs = match_copies(gap, [(r.offset, r.hash) for r in source], expect_from=expect)
        if not pairs:
            return
        last = (before.upstream_end, before.downstream_end)
        timestamps = {r.offset: r.timestamp for r in source}
        for sync in recovery_syncs(self._origin, topic, target_topic, partition, last, pairs, timestamps, ids):
            self._ctx.emit(sync)
        _log.info(
            "flow %s: %s[%d]: %d of the %d records between copies %d and %d are copies of %s: offset syncs published",
            self._origin.flow, target_topic, partition, len(pairs), len(gap), before.downstream_end,
            after.downstream_start, f"{min(u for u, _d in pairs)}..{max(u for u, _d in pairs)}",
        )  # fmt: skip

    def close(self) -> None:
        self._source.close()
        self._target.close()
