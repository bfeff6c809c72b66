"""The deterministic simulator drives the flow's core through seeded crash schedules (issue 60 item 2).

Saved seeds (each once a counterexample, now a regression seed) and a fresh batch from a new base
seed each run must hold every check; each fix the simulator can take back (``reverts``) must be
found again within a fixed number of seeds, cut down to a short schedule a person can read; the
checks must see what they are there to see; the same seed must give the same run. Budgets are
counts of schedules, never seconds: ``python -m mirrorlake.simulation`` and ``bench/simulation.py``
measure the time.
"""

from __future__ import annotations

import os
import random

import pytest

from mirrorlake.simulation import SimSettings, run_seed
from mirrorlake.simulation.reverts import REVERTS
from mirrorlake.simulation.shrink import shrink
from replicator.flow.core.sync_ledger import SyncLedger

SETTINGS = SimSettings()
# counterexamples the simulator found (the commit that fixed each says which): regression seeds
SAVED_SEEDS = (5, 75, 298, 324, 612, 888, 1914, 2466, 3058)
FRESH_SCHEDULES = int(os.environ.get("MIRRORLAKE_SIM_SCHEDULES", "600"))
# reverted fixes the simulator finds again, and within how many seeds from 0 (a bound, not a time)
FOUND_WITHIN = {
    "orphans-are-a-crash": 100,
    "a-clean-stop-speaks-for-its-partitions": 100,
    "each-run-ends-on-its-own": 100,
    "a-start-due-is-no-clean-stop": 1_000,
    "a-lost-partition-is-no-clean-stop": 1_000,
    "the-first-assignment-is-held-too": 100,
}


@pytest.mark.parametrize("seed", SAVED_SEEDS)
def test_a_saved_seed_holds_every_check(seed: int):
    outcome = run_seed(SETTINGS, seed)
    assert outcome.ok, "\n".join([*map(str, outcome.violations), *outcome.trace[-40:]])


def test_fresh_schedules_hold_every_check():
    """A new base seed each run (printed on failure): the simulator explores beside the saved seeds."""
    base = random.SystemRandom().randrange(10**9)
    for seed in range(base, base + FRESH_SCHEDULES):
        outcome = run_seed(SETTINGS, seed)
        if not outcome.ok:
            small = shrink(SETTINGS, outcome)
            pytest.fail(f"seed {seed}: " + "\n".join([*map(str, small.violations), *small.trace]))


@pytest.mark.parametrize("name", sorted(FOUND_WITHIN))
def test_a_reverted_fix_is_found_again_and_cut_down_to_a_readable_schedule(name: str):
    with REVERTS[name].patch():
        failing = next((o for seed in range(FOUND_WITHIN[name]) if not (o := run_seed(SETTINGS, seed)).ok), None)
        assert failing is not None, f"{name}: no counterexample in {FOUND_WITHIN[name]} seeds"
        small = shrink(SETTINGS, failing)
    assert small.violations and len(small.actions) <= len(failing.actions)
    assert len(small.actions) <= 60, small.trace  # a schedule a person reads
    kinds = {v.kind for v in small.violations}
    assert kinds <= {"second copy", "lost", "commit", "mapping"}, kinds
    assert any(line.strip().split(" ", 1)[1].startswith(("start", "SIGKILL", "SIGTERM")) for line in small.trace)


def test_the_same_seed_makes_the_same_run():
    first, again = run_seed(SETTINGS, 4242), run_seed(SETTINGS, 4242)
    assert first.trace == again.trace and first.actions == again.actions


def test_the_checks_see_a_commit_past_a_record_never_copied(monkeypatch: pytest.MonkeyPatch):
    """Not vacuous: a ledger that lets a commit run ahead of its durable syncs is caught at once."""
    covered = SyncLedger.commit_positions

    def ahead(self: SyncLedger, assigned):  # noqa: ANN001
        return {tp: offset + 3 for tp, offset in covered(self, assigned).items()}

    monkeypatch.setattr(SyncLedger, "commit_positions", ahead)
    monkeypatch.setattr(SyncLedger, "advanced_positions", ahead)
    found = [o for seed in range(50) if not (o := run_seed(SETTINGS, seed)).ok]
    assert found and any(v.kind == "commit" for o in found for v in o.violations)


def test_the_checks_see_a_record_never_copied(monkeypatch: pytest.MonkeyPatch):
    """Not vacuous: a resume past a record the flow never copied is a loss the end check names."""
    from replicator.flow.core import takeover

    plan = takeover.plan_takeover

    def skipping(*args, **kwargs):  # noqa: ANN002, ANN003
        out = plan(*args, **kwargs)
        return takeover.TakeoverPlan(out.syncs, {k: v + 2 for k, v in out.resume_at.items()}, out.report, out.clean)

    monkeypatch.setattr("mirrorlake.simulation.process.plan_takeover", skipping)
    found = [o for seed in range(200) if not (o := run_seed(SETTINGS, seed)).ok]
    assert any(v.kind in ("lost", "commit") for o in found for v in o.violations)
