"""The exact offset mapping of every partition of every flow, kept from offset-sync events.

Feed it ``OffsetSync`` events in any order (from the state log, a replay, an MM2 import); it keeps
their points per (flow, source topic, partition) and rebuilds a partition's segments only when
that partition got new points. ``translate`` is ``replicator.client.mapping.translate`` on them.

A partition started from segments (``seed``: a snapshot, or ``compact``) keeps them as its
``base`` and only the points added since. A rebuild redoes the tail of the base from the last
segment that ends before the earliest new point, not the whole history: each base segment starts
with a boundary point, so the segments before it come out of ``build_segments`` unchanged
(the property tests hold both ways equal). At 1e7 state events (180k segments) this took a
failover plan's CPU from 1.0 s to 0.2 s.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass, field

from replicator.client.mapping import (
    BOUNDARY,
    CONTINUES,
    Point,
    Segment,
    Translation,
    TranslationMethod,
    build_segments,
    points_from_sync,
    translate,
)
from replicator.events import Event, OffsetSync

__all__ = ["MappingIndex", "PartitionKey"]

PartitionKey = tuple[str, str, int]  # flow, source topic, partition


@dataclass
class _Partition:
    base: list[Segment] = field(default_factory=list)  # seeded segments, ordered by downstream offset
    points: list[Point] = field(default_factory=list)  # added since the seed
    segments: list[Segment] | None = None  # None: stale, rebuild on demand
    target_topic: str = ""


def _as_points(segments: Iterable[Segment]) -> list[Point]:
    """Each segment's two end points, the first a boundary: ``build_segments`` gives them back."""
    points = []
    for seg in segments:
        points.append(Point(seg.upstream_start, seg.downstream_start, BOUNDARY))
        if (seg.upstream_end, seg.downstream_end) != (seg.upstream_start, seg.downstream_start):
            points.append(Point(seg.upstream_end, seg.downstream_end, CONTINUES))
    return points


def _extend(base: list[Segment], points: list[Point]) -> list[Segment]:
    """``build_segments(_as_points(base) + points)``, rebuilding only from the base segment before
    the earliest new point on (segments of one partition never share a downstream offset, so
    ``downstream_end`` grows along ``base``)."""
    if not points:
        return list(base)
    first_new = min(p.downstream for p in points)
    redo = max(0, bisect_left(base, first_new, key=lambda s: s.downstream_end) - 1)
    return base[:redo] + build_segments(_as_points(base[redo:]) + points)


class MappingIndex:
    def __init__(self) -> None:
        self._partitions: dict[PartitionKey, _Partition] = {}

    def add(self, events: Iterable[Event]) -> int:
        """Take the offset syncs among ``events``; returns how many there were."""
        n = 0
        for e in events:
            if not isinstance(e, OffsetSync):
                continue
            part = self._partitions.setdefault((e.flow, e.source_topic, e.partition), _Partition())
            part.points += points_from_sync(
                e.upstream_offset,
                e.downstream_offset,
                e.reason,
                e.previous_upstream_offset,
                e.previous_downstream_offset,
            )
            part.segments = None
            part.target_topic = e.target_topic
            n += 1
        return n

    def seed(self, flow: str, source_topic: str, partition: int, target_topic: str, segments: list[Segment]) -> None:
        """Start a partition from segments (a snapshot) instead of the syncs that made them.

        The segments stand for their two end points, the first a boundary (``_as_points``):
        ``build_segments`` gives the same segments back, and syncs added later extend or split
        them as they would have extended or split the original points.
        """
        part = self._partitions.setdefault((flow, source_topic, partition), _Partition())
        if part.base or part.points:  # into a partition that has a mapping already: as points
            part.points = _as_points(part.base) + part.points + _as_points(segments)
            part.base = []
        else:
            part.base = list(segments)
        part.segments = None
        part.target_topic = target_topic

    def compact(self) -> None:
        """Keep only the segments (as a seed would): memory bounded by segments, not by syncs read."""
        for key, part in self._partitions.items():
            segments = self.segments(*key)
            part.base, part.points, part.segments = list(segments), [], segments

    def segments(self, flow: str, source_topic: str, partition: int) -> list[Segment]:
        part = self._partitions.get((flow, source_topic, partition))
        if part is None:
            return []
        if part.segments is None:
            part.segments = _extend(part.base, part.points)
        return part.segments

    def target_topic(self, flow: str, source_topic: str) -> str | None:
        for (f, t, _p), part in self._partitions.items():
            if f == flow and t == source_topic:
                return part.target_topic
        return None

    def partitions(self, flow: str | None = None) -> list[PartitionKey]:
        return sorted(k for k in self._partitions if flow is None or k[0] == flow)

    def translate(self, flow: str, source_topic: str, partition: int, upstream: int) -> Translation | None:
        """Where a consumer that committed ``upstream`` resumes on the target (None: nothing copied)."""
        return translate(self.segments(flow, source_topic, partition), upstream)

    def reverse(self, flow: str, source_topic: str, partition: int, downstream: int) -> Translation | None:
        """The source position of the target position ``downstream``: a consumer on the target at
        ``downstream`` resumes at the returned ``Translation.upstream`` on the source (failback).

        ``exact`` when ``downstream`` is a copy of the latest run that holds it; otherwise one past
        the last upstream record copied before ``downstream``.
        """
        segs = self.segments(flow, source_topic, partition)
        holding = [s for s in segs if s.downstream_start <= downstream <= s.downstream_end]
        if holding:
            seg = holding[0]
            return Translation(downstream - seg.delta, downstream, TranslationMethod.EXACT)
        before = [s for s in segs if s.downstream_end < downstream]
        if before:
            seg = max(before, key=lambda s: s.downstream_end)
            return Translation(seg.upstream_end + 1, downstream, TranslationMethod.AFTER_LAST_COPY)
        if segs:
            return Translation(min(s.upstream_start for s in segs), downstream, TranslationMethod.BEFORE_FIRST_COPY)
        return None
