"""The failover cost of resuming a group at a target offset, from the mapping segments (pure Python).

One rule for every engine: the lakehouse (``rpo_groups``, in a Spark UDF) and ``replicator.failover``
both call this.

Follows DESIGN.md's Definitions. For a group that committed source offset ``c`` and resumes at
target offset ``t``, over the copies the segments describe (segment ``s`` holds one copy of each
``u`` in ``[s.upstream_start, s.upstream_end]`` at ``d = u + s.delta``):

* lost = replicated source records ``>= c`` with no copy at or after ``t``;
* re-read = copies at or after ``t`` of source records ``< c``;
* duplicated = extra copies at or after ``t`` of records ``>= c`` (beyond the first of each).

Un-replicated records (beyond the last copy) are the RPO and are counted separately. Works on
intervals, never per record, so it costs O(segments log segments).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from replicator.client.mapping import Segment

__all__ = [
    "FailoverCost",
    "failover_cost",
    "DeletedCopies",
    "deleted_on_target",
    "DELETED_ON_TARGET",
    "interval_union",
    "union_size",
]

# the cause a plan and the divergence report name for records counted by ``deleted_on_target``
DELETED_ON_TARGET = "deleted from the target by retention/deletion"


@dataclass(frozen=True, slots=True)
class FailoverCost:
    lost: int
    reread: int
    duplicated: int


def union_size(intervals: Iterable[tuple[int, int]]) -> int:
    total, end = 0, None
    for lo, hi in sorted(i for i in intervals if i[0] <= i[1]):
        if end is None or lo > end:
            total += hi - lo + 1
            end = hi
        elif hi > end:
            total += hi - end
            end = hi
    return total


def failover_cost(segments: Sequence[Segment], committed: int, resume_at: int) -> FailoverCost:
    """Cost of resuming at target offset ``resume_at`` for a group that committed ``committed``."""
    c, t = committed, resume_at
    all_ge_c = [(max(s.upstream_start, c), s.upstream_end) for s in segments]
    after_t = [(max(s.upstream_start, t - s.delta), s.upstream_end) for s in segments]
    after_t_ge_c = [(max(lo, c), hi) for lo, hi in after_t]
    reread = sum(max(0, min(hi, c - 1) - lo + 1) for lo, hi in after_t)
    copies_ge_c = sum(max(0, hi - lo + 1) for lo, hi in after_t_ge_c)
    distinct_after = union_size(after_t_ge_c)
    return FailoverCost(
        lost=union_size(all_ge_c) - distinct_after,
        reread=reread,
        duplicated=copies_ge_c - distinct_after,
    )


@dataclass(frozen=True, slots=True)
class DeletedCopies:
    """Replicated source records whose every copy lies below the target's log start.

    ``upstream_first``/``upstream_last`` bound them on the source, ``downstream_first`` is the
    first target offset that held one of them (all of them lie in ``[downstream_first, log_start)``);
    all three are None when ``records`` is 0.
    """

    records: int
    upstream_first: int | None = None
    upstream_last: int | None = None
    downstream_first: int | None = None


def interval_union(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(i for i in intervals if i[0] <= i[1]):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _minus(have: list[tuple[int, int]], remove: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``have`` without ``remove`` (both sorted, disjoint, inclusive intervals)."""
    out: list[tuple[int, int]] = []
    for lo, hi in have:
        cur = lo
        for rlo, rhi in remove:
            if rhi < cur or rlo > hi:
                continue
            if rlo > cur:
                out.append((cur, rlo - 1))
            cur = max(cur, rhi + 1)
        if cur <= hi:
            out.append((cur, hi))
    return out


def deleted_on_target(segments: Sequence[Segment], log_start: int, since: int = 0) -> DeletedCopies:
    """The replicated records ``>= since`` that a consumer of the target can no longer read because
    every copy of them is below the target partition's ``log_start`` (time or size retention,
    ``delete-records``; compaction inside the log is not seen here). A failover loses them."""
    if log_start <= 0:
        return DeletedCopies(0)
    copied = interval_union((max(s.upstream_start, since), s.upstream_end) for s in segments)
    live = interval_union((max(s.upstream_start, since, log_start - s.delta), s.upstream_end) for s in segments)
    gone = _minus(copied, live)
    if not gone:
        return DeletedCopies(0)
    starts = ((max(s.upstream_start, since), s) for s in segments)
    first_d = min(lo + s.delta for lo, s in starts if lo <= s.upstream_end and lo + s.delta < log_start)
    return DeletedCopies(sum(hi - lo + 1 for lo, hi in gone), gone[0][0], gone[-1][1], first_d)
