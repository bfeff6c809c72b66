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

__all__ = ["FailoverCost", "failover_cost"]


@dataclass(frozen=True, slots=True)
class FailoverCost:
    lost: int
    reread: int
    duplicated: int


def _union_size(intervals: Iterable[tuple[int, int]]) -> int:
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
    distinct_after = _union_size(after_t_ge_c)
    return FailoverCost(
        lost=_union_size(all_ge_c) - distinct_after,
        reread=reread,
        duplicated=copies_ge_c - distinct_after,
    )
