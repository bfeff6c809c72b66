"""What a compacted target partition still holds, and what a failover costs against it (pure Python).

The mapping says where every copy was written; on a target topic with ``cleanup.policy=compact``
the log cleaner later removes older records of a key from inside the log, so some of those
target offsets hold nothing any more. Neither the log start nor the mapping shows it: only reading
the partition does. ``PresentCopies`` is that reading (the target offsets still holding a record,
from the log start on), and its methods apply DESIGN.md's failover definitions to the copies that
are still there:

* lost = replicated source records ``>= c`` with no copy *still present* at or after ``t``;
* re-read = present copies at or after ``t`` of source records ``< c``;
* duplicated = extra present copies at or after ``t`` of records ``>= c``;
* ``compacted(since)``: replicated records ``>= since`` that have a copy at or above the log start
  in the mapping but none left on the target (records whose every copy is below the log start are
  ``deleted_on_target``'s, counted apart).

Cost: O(present records) per call; a compacted topic holds about one record per key.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field

from replicator.client.failover_cost import FailoverCost, interval_union, union_size
from replicator.client.mapping import Segment

__all__ = ["PresentCopies", "COMPACTED_ON_TARGET"]

# the cause a plan names for records counted by ``PresentCopies.compacted``
COMPACTED_ON_TARGET = "removed from the target by compaction (cleanup.policy=compact)"


@dataclass(frozen=True)
class PresentCopies:
    """The offsets of one target partition still holding a record, read in ``[log_start, end)``."""

    log_start: int
    end: int
    offsets: array = field(default_factory=lambda: array("q"))  # sorted, each in [log_start, end)

    def _upstreams(self, segments: Sequence[Segment], at_or_after: int) -> list[int]:
        """The source offset of each present copy at or after ``at_or_after`` (foreign records left out)."""
        by_start = sorted(segments, key=lambda s: s.downstream_start)
        starts = [s.downstream_start for s in by_start]
        out: list[int] = []
        first = bisect_right(self.offsets, at_or_after - 1)
        for i in range(first, len(self.offsets)):
            d = self.offsets[i]
            k = bisect_right(starts, d) - 1
            if k >= 0 and d <= by_start[k].downstream_end:
                out.append(d - by_start[k].delta)
        return out

    def cost(self, segments: Sequence[Segment], committed: int, resume_at: int) -> FailoverCost:
        """``failover_cost`` over the copies still present (``resume_at`` below the log start: from it)."""
        ups = self._upstreams(segments, resume_at)
        ge_c = [u for u in ups if u >= committed]
        distinct = len(set(ge_c))
        replicated = union_size((max(s.upstream_start, committed), s.upstream_end) for s in segments)
        return FailoverCost(lost=replicated - distinct, reread=len(ups) - len(ge_c), duplicated=len(ge_c) - distinct)

    def compacted(self, segments: Sequence[Segment], since: int = 0) -> int:
        """Replicated records ``>= since`` with a copy at or above the log start but none present."""
        above = interval_union(
            (max(s.upstream_start, since, self.log_start - s.delta), s.upstream_end)
            for s in segments
            if s.downstream_end >= self.log_start
        )
        expected = sum(hi - lo + 1 for lo, hi in above)
        present = {u for u in self._upstreams(segments, self.log_start) if u >= since}
        return expected - len(present)
