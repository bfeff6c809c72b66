"""``replicator.client.present_copies`` against a per-record brute force, and against the
mapping-only rule (``failover_cost``) when nothing was compacted."""

from __future__ import annotations

from array import array

from hypothesis import given
from hypothesis import strategies as st

from replicator.client.failover_cost import failover_cost
from replicator.client.mapping import Segment
from replicator.client.present_copies import PresentCopies


@st.composite
def target_log(draw: st.DrawFn) -> tuple[list[Segment], list[int]]:
    """Segments as a real target holds them (downstream ranges disjoint, in order; upstream ranges
    may repeat, as at-least-once replays do) and the target offsets a cleaner left in place."""
    segments, d = [], draw(st.integers(0, 5))
    for _ in range(draw(st.integers(0, 5))):
        us, n = draw(st.integers(0, 60)), draw(st.integers(0, 20))
        segments.append(Segment(d, us, us + n, d + n))
        d += n + 1 + draw(st.integers(0, 3))  # foreign records or markers between runs
    every = list(range(d + 3))
    present = sorted(draw(st.sets(st.sampled_from(every))) if every else set())
    return segments, present


def _copies(segments: list[Segment]) -> list[tuple[int, int]]:
    return [(u, u + s.delta) for s in segments for u in range(s.upstream_start, s.upstream_end + 1)]


@given(target_log(), st.integers(0, 10), st.integers(0, 100), st.integers(-5, 120))
def test_cost_over_present_copies_equals_the_per_record_count(log, log_start: int, committed: int, resume_at: int):
    segments, present = log
    kept = [d for d in present if d >= log_start]
    copies = _copies(segments)
    still = [(u, d) for u, d in copies if d in set(kept) and d >= resume_at]
    replicated = {u for u, _ in copies if u >= committed}
    seen = {u for u, _ in still if u >= committed}
    cost = PresentCopies(log_start, 10_000, array("q", kept)).cost(segments, committed, resume_at)
    assert cost.lost == len(replicated - seen)
    assert cost.reread == sum(1 for u, _ in still if u < committed)
    assert cost.duplicated == sum(1 for u, _ in still if u >= committed) - len(seen)


@given(target_log(), st.integers(0, 10), st.integers(0, 100))
def test_compacted_counts_records_with_a_copy_above_the_log_start_and_none_left(log, log_start: int, since: int):
    segments, present = log
    kept = {d for d in present if d >= log_start}
    copies = _copies(segments)
    above = {u for u, d in copies if d >= log_start and u >= since}
    left = {u for u, d in copies if d in kept}
    assert PresentCopies(log_start, 10_000, array("q", sorted(kept))).compacted(segments, since) == len(above - left)


@given(target_log(), st.integers(0, 100), st.integers(0, 120))
def test_with_every_copy_present_the_cost_is_the_mapping_s(log, committed: int, resume_at: int):
    segments, _ = log
    everything = array("q", sorted({d for _, d in _copies(segments)}))
    present = PresentCopies(0, 10_000, everything)
    assert present.cost(segments, committed, resume_at) == failover_cost(segments, committed, resume_at)
    assert present.compacted(segments) == 0
