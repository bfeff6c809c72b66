"""The exact offset mapping of one source partition: segments of constant ``downstream - upstream``.

This is the reference implementation (pure Python) of what the lakehouse's ``offset_mapping``
table stores and what ``translate`` answers; the Spark build is tested against it.

Input: the points ``(u, d)`` the replicator published (each sync's record, and each sync's
``previous_*`` record). Every point is a record that is certainly copied. Within a producer
session, any gap in ``u`` or ``d`` and any change of delta publishes a sync that carries the
record before it, so two consecutive points (by ``d``) of one session with the same delta and no
boundary between them enclose only contiguous copies. A segment therefore covers exactly the
contiguous upstream range ``[upstream_start, upstream_end]`` at ``d = u + delta``; an offset in
a gap (transaction marker, compacted record) translates to right after the last copy before it.

At-least-once replays copy a range again at larger ``d``: segments then overlap in ``u``, and
translation picks the latest copy (largest ``downstream_start``) that covers the offset.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from replicator.events.model import SyncReason

__all__ = [
    "Segment",
    "Point",
    "points_from_sync",
    "build_segments",
    "translate",
    "reverse_translate",
    "Translation",
    "TranslationMethod",
]


@dataclass(frozen=True, slots=True, order=True)
class Segment:
    downstream_start: int
    upstream_start: int
    upstream_end: int  # inclusive: the last upstream offset known to be copied in this run
    downstream_end: int  # where upstream_end landed

    @property
    def delta(self) -> int:
        return self.downstream_start - self.upstream_start

    def covers(self, upstream: int) -> bool:
        return self.upstream_start <= upstream <= self.upstream_end


# How a point relates to the point before it (by downstream offset); larger wins on duplicates.
CONTINUES = 0  # same run as the previous point unless the delta differs
SESSION_START = 1  # first record of a producer session: same run only if exactly adjacent
BOUNDARY = 2  # a known gap or delta change right before it: always starts a run


@dataclass(frozen=True, slots=True)
class Point:
    upstream: int
    downstream: int
    start: int = CONTINUES


def points_from_sync(
    upstream: int,
    downstream: int,
    reason: str,
    previous_upstream: int | None,
    previous_downstream: int | None,
) -> list[Point]:
    """The copied-record points one offset-sync event proves (its record, and its predecessor)."""
    if previous_upstream is not None and previous_downstream is not None:
        adjacent = upstream - previous_upstream == 1 and downstream - previous_downstream == 1
        return [
            Point(previous_upstream, previous_downstream, CONTINUES),
            Point(upstream, downstream, CONTINUES if adjacent else BOUNDARY),
        ]
    return [Point(upstream, downstream, SESSION_START if reason == SyncReason.FIRST else CONTINUES)]


def build_segments(points: Iterable[Point]) -> list[Segment]:
    """Segments (ordered by downstream offset) from the points of every published sync."""
    merged: dict[tuple[int, int], int] = {}
    for p in points:
        key = (p.downstream, p.upstream)
        merged[key] = max(p.start, merged.get(key, CONTINUES))
    segments: list[Segment] = []
    first: tuple[int, int] | None = None
    last: tuple[int, int] = (0, 0)
    for (d, u), start in sorted(merged.items()):
        if first is not None and d - u == first[1] - first[0] and u > last[0]:
            joins = start == CONTINUES or (start == SESSION_START and u == last[0] + 1)
            if joins:
                last = (u, d)
                continue
        if first is not None:
            segments.append(Segment(first[1], first[0], last[0], last[1]))
        first = last = (u, d)
    if first is not None:
        segments.append(Segment(first[1], first[0], last[0], last[1]))
    return segments


class TranslationMethod(StrEnum):
    """How a translated offset was found; the same words in events, Spark and DuckDB.

    A checkpoint translated backwards (a topic that came *from* the target) carries ``reverse_``
    before the method; one imported from MirrorMaker 2 carries ``mm2`` (its lossy translation).
    """

    EXACT = "exact"
    AFTER_LAST_COPY = "after_last_copy"
    BEFORE_FIRST_COPY = "before_first_copy"
    MM2 = "mm2"

    def reversed(self) -> str:
        return f"reverse_{self.value}"


@dataclass(frozen=True, slots=True)
class Translation:
    """Where a consumer that committed ``upstream`` on the source resumes on the target.

    ``method``: ``exact`` (the offset's latest copy), ``after_last_copy`` (the offset has no
    copy: resume right after the latest copy of the last replicated record before it), or
    ``before_first_copy`` (nothing before it was replicated: the first copy at or after it).
    """

    upstream: int
    downstream: int
    method: str  # a TranslationMethod, or its reversed() form


def translate(segments: list[Segment], upstream: int) -> Translation | None:
    """Translate a committed source offset; None when the partition has no copies at all."""
    covering = [s for s in segments if s.covers(upstream)]
    if covering:
        seg = max(covering, key=lambda s: s.downstream_start)
        return Translation(upstream, upstream + seg.delta, TranslationMethod.EXACT)
    before = [s for s in segments if s.upstream_end < upstream]
    if before:
        seg = max(before, key=lambda s: (s.upstream_end, s.downstream_end))
        return Translation(upstream, seg.downstream_end + 1, TranslationMethod.AFTER_LAST_COPY)
    after = [s for s in segments if s.upstream_start > upstream]
    if after:
        seg = min(after, key=lambda s: (s.upstream_start, -s.downstream_start))
        return Translation(upstream, seg.downstream_start, TranslationMethod.BEFORE_FIRST_COPY)
    return None


def reverse_translate(segments: list[Segment], downstream: int) -> Translation | None:
    """The source position of target offset ``downstream``, the one meaning of reverse translation
    (failback, the reverse flow's checkpoints, the dashboard): a consumer on the target at
    ``downstream`` resumes at the returned ``Translation.upstream`` on the source.

    ``exact`` when ``downstream`` is a copy (downstream ranges of a partition never overlap: at most
    one segment holds it); otherwise ``after_last_copy``, one past the last source record copied
    before ``downstream``; ``before_first_copy`` (the first source record copied) when no copy lies
    before it; None when the partition has no copies at all.
    """
    holding = [s for s in segments if s.downstream_start <= downstream <= s.downstream_end]
    if holding:
        seg = holding[0]
        return Translation(downstream - seg.delta, downstream, TranslationMethod.EXACT)
    before = [s for s in segments if s.downstream_end < downstream]
    if before:
        seg = max(before, key=lambda s: s.downstream_end)
        return Translation(seg.upstream_end + 1, downstream, TranslationMethod.AFTER_LAST_COPY)
    if segments:
        return Translation(min(s.upstream_start for s in segments), downstream, TranslationMethod.BEFORE_FIRST_COPY)
    return None
