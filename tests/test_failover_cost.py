"""``replicator.client.failover_cost`` (interval arithmetic) against a per-record brute force."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from replicator.client.failover_cost import failover_cost
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
