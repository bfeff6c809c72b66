"""bench.latency_paths: how a latency probe's stalls are found (pure)."""

from bench.latency_paths import stalls


def test_stalls_are_runs_of_consecutive_slow_records_with_their_peak():
    samples = [1.0, 25.0, 30.0, 2.0, 40.0, 1.0, 50.0]
    assert stalls(samples, 20.0) == [(1, 2, 30.0), (4, 1, 40.0), (6, 1, 50.0)]
    assert stalls([1.0, 2.0], 20.0) == []
    assert stalls([21.0, 22.0], 20.0) == [(0, 2, 22.0)]
