"""``replicator.client.failover_cost`` (interval arithmetic) against a per-record brute force."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from replicator.client.failover_cost import deleted_on_target, failover_cost
from replicator.client.mapping import Segment

segment = st.builds(
    lambda us, n, delta: Segment(us + delta, us, us + n, us + n + delta),
    st.integers(0, 60),
    st.integers(0, 25),
    st.integers(-10, 60),
)


def _brute(segments: list[Segment], c: int, t: int) -> tuple[int, int, int]:
    copies = [(u, u + s.delta) for s in segments for u in range(s.upstream_start, s.upstream_end + 1)]
    replicated_ge_c = {u for u, _ in copies if u >= c}
    after = [(u, d) for u, d in copies if d >= t]
    kept = {u for u, _ in after if u >= c}
    lost = len(replicated_ge_c - kept)
    reread = sum(1 for u, _ in after if u < c)
    duplicated = sum(1 for u, _ in after if u >= c) - len(kept)
    return lost, reread, duplicated


@given(st.lists(segment, max_size=6), st.integers(0, 100), st.integers(-5, 150))
def test_failover_cost_equals_the_per_record_count(segments: list[Segment], committed: int, resume_at: int):
    cost = failover_cost(segments, committed, resume_at)
    assert (cost.lost, cost.reread, cost.duplicated) == _brute(segments, committed, resume_at)


@given(st.lists(segment, max_size=6), st.integers(-5, 150), st.integers(0, 100))
def test_deleted_on_target_equals_the_per_record_count(segments: list[Segment], log_start: int, since: int):
    copies = [(u, u + s.delta) for s in segments for u in range(s.upstream_start, s.upstream_end + 1)]
    replicated = {u for u, _ in copies if u >= since}
    gone = sorted(replicated - {u for u, d in copies if d >= log_start}) if log_start > 0 else []
    got = deleted_on_target(segments, log_start, since)
    assert got.records == len(gone)
    if gone:
        assert (got.upstream_first, got.upstream_last) == (gone[0], gone[-1])
        assert got.downstream_first == min(d for u, d in copies if u >= since and d < log_start)
