"""Fixes of the flow's core, reverted on purpose: the simulator must find each bug again.

Each entry puts back, for the duration of a ``with``, the behaviour a fix replaced (the function as
it was, or the rule it lacked), so ``python -m mirrorlake.simulation --revert NAME`` and
``tests/test_simulation.py`` show that a schedule exploring from seed 0 finds a counterexample, and
how soon. The bugs were found by soaks and CI runs (the commit or run named), or by this simulator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

from replicator.flow.core import ownership, resume, takeover
from replicator.flow.core.logs import TP

__all__ = ["Revert", "REVERTS"]


@dataclass(frozen=True)
class Revert:
    name: str
    found_by: str
    what: str
    patch: Callable[[], AbstractContextManager[None]]


@contextmanager
def _swapped(owner: object, name: str, value: object) -> Iterator[None]:
    before = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, before)


def _no_orphan_rule() -> AbstractContextManager[None]:
    def crash_left(_report: Sequence[takeover.Recovered]) -> set[TP]:
        return set()

    return _swapped(takeover, "crash_left", crash_left)


def _stale_takeover_view() -> AbstractContextManager[None]:
    def read_nothing(_view: takeover.StateReader) -> None:  # the view as the process read it at its start
        return None

    return _swapped(takeover, "read_now", read_nothing)


def _newest_word_of_the_id() -> AbstractContextManager[None]:
    def ended_cleanly(self: resume.PreviousRun, rid: str, at: int) -> bool:
        timeline = self._timeline.get(rid, [])
        if not timeline:
            return False
        ms, state, reason = timeline[-1]
        return state == "stopped" and ms >= at and reason != resume.LEFT_COPIES

    return _swapped(resume.PreviousRun, "_ended_cleanly", ended_cleanly)


def _flow_wide_stop() -> AbstractContextManager[None]:
    def verdict(self: resume.PreviousRun) -> Callable[[str, int], bool]:
        return resume.always_crashed if self.crashed else (lambda _t, _p: False)

    return _swapped(resume.PreviousRun, "verdict", verdict)


def _clean_despite_starts_due() -> AbstractContextManager[None]:
    return _swapped(ownership.Ownership, "clean", property(lambda self: not self.left_copies))


def _held_revoked_is_clean() -> AbstractContextManager[None]:
    def revoke(self: ownership.Ownership, keys: Iterable[TP]) -> set[TP]:
        keys = list(keys)
        held = self._drop_held(keys)  # and no word of them: the rule reverted
        self.forget(keys)
        return held

    return _swapped(ownership.Ownership, "revoke", revoke)


def _lost_is_clean() -> AbstractContextManager[None]:
    def lose(self: ownership.Ownership, keys: Iterable[TP]) -> set[TP]:
        keys = list(keys)
        held = self._drop_held(keys)
        self.forget(keys)
        return held

    return _swapped(ownership.Ownership, "lose", lose)


def _first_assignment_not_held() -> AbstractContextManager[None]:
    original = ownership.Ownership.assign

    def assign(self: ownership.Ownership, starts: object, relive: object = ()) -> list[ownership.Start]:
        if not self.assigned and not self.held and not getattr(self, "_assigned_once", False):
            self._assigned_once = True  # type: ignore[attr-defined]
            given = list(starts)  # type: ignore[call-overload]
            self.took([key for key, _offset in given])
            return given  # at their commits: a recovery at start was thought enough (seed 197)
        return original(self, starts, relive)  # type: ignore[arg-type]

    return _swapped(ownership.Ownership, "assign", assign)


REVERTS: dict[str, Revert] = {
    r.name: r
    for r in (
        Revert(
            "orphans-are-a-crash",
            "8b5fec6, the fresh-clone CI of 2026-12-06 (10,666 second copies)",
            "copies past a partition's last sync no longer make its copying a crash's",
            _no_orphan_rule,
        ),
        Revert(
            "takeover-reads-the-log-now",
            "618b1bf, a standby judged by a view a slow audit held",
            "a takeover judges by the state log as read at the process's start, not as it stands",
            _stale_takeover_view,
        ),
        Revert(
            "a-clean-stop-speaks-for-its-partitions",
            "the 2026-12-02 soak (23 second copies)",
            "one clean stop is taken as the whole flow's",
            _flow_wide_stop,
        ),
        Revert(
            "each-run-ends-on-its-own",
            "the simulator, seed 5 of its first sweep",
            "a run of a replicator id is judged by the id's newest word, a later run's stop included",
            _newest_word_of_the_id,
        ),
        Revert(
            "a-start-due-is-no-clean-stop",
            "the simulator, seed 324 of its first sweep",
            "a stop with a resume past known copies not committed yet is clean",
            _clean_despite_starts_due,
        ),
        Revert(
            "a-held-partition-taken-away-is-no-clean-stop",
            "the 2026-12-02 soak (a process revoked 3 ms after its assignment)",
            "a partition revoked while held for recovery leaves the stop clean",
            _held_revoked_is_clean,
        ),
        Revert(
            "a-lost-partition-is-no-clean-stop",
            "LEFT_COPIES, the soaks of 2026-11-29",
            "a partition lost to a session expiry leaves the stop clean",
            _lost_is_clean,
        ),
        Revert(
            "the-first-assignment-is-held-too",
            "seed 197 of the chaos soak (139 second copies)",
            "a process's first assignment is copied at its commits, unrecovered",
            _first_assignment_not_held,
        ),
    )
}
