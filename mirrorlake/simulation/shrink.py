"""A failing schedule cut down to the actions it needs, so a person can read why it fails.

Delta debugging (Zeller's ddmin, simplified): remove chunks of the schedule, halving their size,
and keep each removal after which the schedule still fails the same way (a violation of the same
kind). Replays skip actions that no longer apply, so any subset is a schedule.
"""

from __future__ import annotations

from collections.abc import Sequence

from mirrorlake.simulation.actions import Action
from mirrorlake.simulation.world import Outcome, SimSettings, run_schedule

__all__ = ["shrink"]


def shrink(settings: SimSettings, failing: Outcome, *, budget: int = 2_000) -> Outcome:
    """The shortest schedule found (within ``budget`` replays) that fails with ``failing``'s first
    violation's kind; ``failing`` itself when nothing shorter does."""
    kind = failing.violations[0].kind
    best = failing
    actions: list[Action] = list(failing.actions)
    replays = 0

    def fails(candidate: Sequence[Action]) -> Outcome | None:
        nonlocal replays
        replays += 1
        outcome = run_schedule(settings, candidate, seed=failing.seed)
        return outcome if any(v.kind == kind for v in outcome.violations) else None

    chunk = max(1, len(actions) // 2)
    while chunk >= 1 and replays < budget:
        i, removed = 0, False
        while i < len(actions) and replays < budget:
            candidate = actions[:i] + actions[i + chunk :]
            found = fails(candidate)
            if found is not None:
                actions, best, removed = list(found.actions), found, True
            else:
                i += chunk
        if not removed:
            chunk //= 2
    return best
