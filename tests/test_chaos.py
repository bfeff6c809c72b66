"""The nemesis soak, short and seeded (``bench/chaos.py``): active/active flows (S->T at least once,
T->S exactly once) with two replicator processes each; replicators and brokers killed, frozen and
restarted, a replicator cut off from a broker (iptables), a partition added, records deleted before
their copy, a source topic deleted and created again, a target topic turned compacted; then judged
from the clusters' contents (issue 39 item 4).

Seed 197 by default: its schedule holds seven faults (a source topic re-created, two replicator
SIGKILLs, records deleted before their copy, the remote topic deleted on the target under the
running flows, a target compacted, the source broker killed together with a replicator). Its
runs found recovered syncs without topic ids (198 offsets translated through an old remote
topic's copies) and a start recovery overtaken by a peer that copied on (139 second copies);
before it, seed 91040 found a killed writer's batch landing after the flow had copied it again
(``replicator/flow/syncs/gap_recovery.py``). ``MIRRORLAKE_CHAOS_SEED`` replays another
seed, ``random`` draws one (the report, with its schedule, is printed); ``bench/chaos.py`` runs
longer schedules. Timing still varies between runs of one seed: a schedule is not a replay.

Asserted: nothing missing, nothing aborted copied, nothing copied twice on the exactly-once
flow (read_committed), the mapping equal to the real copies, every group's checkpoint at its
commit's exact translation, every failover plan made while S was down equal to the truth row by
row (when the seed's schedule has such a fault), a clean final run. Reported, not asserted:
``duplicated`` on the at-least-once flow (the aim is 0; what can still copy twice, a peer cut off
that copies on until it notices, is in docs/how-it-works.md) and records deleted before their copy
that a killed broker brought back (``revived``).
"""

from __future__ import annotations

import os
import random

import pytest

from bench.chaos import EXACTLY_ONCE, run_soak

pytestmark = pytest.mark.kafka
DEFAULT_SEED = 197


def test_a_short_seeded_soak_loses_nothing_and_the_mapping_and_groups_equal_the_truth(tmp_path):
    chosen = os.environ.get("MIRRORLAKE_CHAOS_SEED", str(DEFAULT_SEED))
    seed = random.randrange(100_000) if chosen == "random" else int(chosen)
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
