"""bench/lakehouse_scale.critical_path: the chain of gold tables that bounds a build's wall time."""

from __future__ import annotations

from bench.lakehouse_scale import critical_path


def test_the_longest_chain_of_dependent_tables_by_their_own_times() -> None:
    depends_on = {"mapping": (), "groups": ("mapping",), "rpo": ("mapping",), "rpo_groups": ("mapping", "groups")}
    seconds = {"mapping": 12.0, "groups": 11.0, "rpo": 17.0, "rpo_groups": 9.0, "failovers": 7.0}
    assert critical_path(seconds, depends_on) == (["mapping", "groups", "rpo_groups"], 32.0)
    # a slow table beside the chain is the path when it outweighs the chain's tail
    assert critical_path({**seconds, "rpo": 25.0}, depends_on) == (["mapping", "rpo"], 37.0)


def test_no_tables_is_an_empty_path() -> None:
    assert critical_path({}, {}) == ([], 0.0)
