"""The copying process's collector settings: frozen start-up heap, a raised young threshold."""

from __future__ import annotations

import gc

from replicator.flow.gc_tuning import tune_for_copying


def test_tuning_freezes_what_exists_and_raises_only_the_young_threshold():
    before = gc.get_threshold()
    try:
        old = tune_for_copying(young=12_345)
        assert old == before
        assert gc.get_threshold() == (12_345, before[1], before[2])
        assert gc.get_freeze_count() > 0  # modules, config, clients: out of every collection
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
