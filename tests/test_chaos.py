"""The nemesis soak, short and seeded (``bench/chaos.py``): active/active flows (S->T at least once,
T->S exactly once) with two replicator processes each; replicators and brokers killed, frozen and
restarted, a replicator cut off from a broker (iptables), a partition added, records deleted before
their copy, a source topic deleted and created again, a target topic turned compacted; then judged
from the clusters' contents (issue 39 item 4).

A new seed each run (the report, with its schedule, is printed; ``MIRRORLAKE_CHAOS_SEED`` replays
one). Asserted: nothing missing, nothing aborted copied, nothing copied twice on the exactly-once
flow (read_committed), the mapping equal to the real copies, every group's checkpoint at its
commit's exact translation, every failover plan made while S was down equal to the truth row by
row (when the seed's schedule has such a fault), a clean final run. Reported, not asserted
(open in issue 39): ``duplicated`` (a partition a rebalance moves to another live process is copied
again from its commit) and the count of records deleted before their copy, which a run of this
soak left unsaid once in three (a restart after records were deleted showed no reset to the log
start: cause not found yet).
"""

from __future__ import annotations

import os
import random

import pytest

from bench.chaos import EXACTLY_ONCE, run_soak

pytestmark = pytest.mark.kafka


def test_a_short_seeded_soak_loses_nothing_and_the_mapping_and_groups_equal_the_truth(tmp_path):
    seed = int(os.environ.get("MIRRORLAKE_CHAOS_SEED", random.randrange(100_000)))
    verdict = run_soak(seed, seconds=90, processes=2, rate=200, work=tmp_path)
    print(verdict.report)
    assert verdict.final_exit == 0, verdict.report
    for f in verdict.figures:
        assert f.records > 0, verdict.report
        assert (f.flow, f.topic, f.missing, f.aborted, f.mapping_off) == (f.flow, f.topic, 0, 0, 0), verdict.report
    assert verdict.group_problems == [], verdict.report
    assert verdict.plan_problems == [], verdict.report  # each plan made with S down equals the truth
    for f in verdict.figures:
        if f.flow in EXACTLY_ONCE:
            assert f.duplicated == 0, verdict.report  # nothing visible twice to read_committed
