"""The simulated world: clusters, group, state topic, processes, a clock, and a seeded schedule.

A schedule is a list of actions (``actions``), each applied to the world in turn; an action that
does not apply any more (a process already dead, say) is skipped, so a schedule cut down by the
shrinker still replays. ``run_seed`` draws a schedule with the seed's generator, choosing among
the actions that apply at each step; then the world heals (frozen processes thawed, dead ones'
sessions expired, the coordinator back, one process running) and must catch up; every process
stops cleanly; the checks judge what the clusters hold.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from mirrorlake.simulation import actions as act
from mirrorlake.simulation.checks import Violation, check_commits, check_end
from mirrorlake.simulation.group import Group
from mirrorlake.simulation.logs import SourceLog, TargetLog
from mirrorlake.simulation.process import InFlight, SimProcess
from mirrorlake.simulation.state_topic import StateTopic
from replicator.events import stamped_by

__all__ = ["SimSettings", "World", "Outcome", "run_seed", "run_schedule", "explore"]


@dataclass(frozen=True)
class SimSettings:
    """One flow ``A->B`` of topic ``orders`` into ``A.orders``, at least once."""

    flow: str = "A->B"
    partitions: int = 2
    slots: int = 2  # processes of the flow (one replicator id each)
    steps: int = 300  # actions drawn before the world heals
    batch: int = 3  # records a poll returns per partition
    offset_lag_max: int = 4
    sync_interval_steps: int = 3  # loop turns between the ledger's flushes
    heal_steps: int = 20_000  # a healed world that does not catch up within this many steps is a failure


@dataclass
class Outcome:
    """What one schedule did: its violations (empty: every check held) and its trace."""

    seed: int | None
    actions: list[act.Action]
    violations: list[Violation]
    trace: list[str]
    steps: int

    @property
    def ok(self) -> bool:
        return not self.violations


class World:
    def __init__(self, settings: SimSettings) -> None:
        self.settings = settings
        n = settings.partitions
        self.source = SourceLog("orders", "source-id-1", [[] for _ in range(n)])
        self.target = TargetLog("A.orders", "target-id-1", [[] for _ in range(n)])
        self.group = Group(n)
        self.state_topic = StateTopic()
        self.slots: list[SimProcess | None] = [None] * settings.slots
        self.incarnations = [0] * settings.slots
        self.step = 0
        self.now_ms = 1_000_000
        # (member, partition) -> the steps its session expired and it learnt it (None: not yet): the
        # copies it produced before learning and that landed after the expiry are a zombie's
        self.lost_at: dict[tuple[tuple[int, int], int], list[list[int | None]]] = {}
        self.trace: list[str] = []
        self._ids = itertools.count(1)

    # -- what processes and actions call ---------------------------------------------------------
    def note(self, text: str) -> None:
        self.trace.append(f"{self.step:5d} {text}")

    def next_event_id(self) -> str:
        return f"e{next(self._ids)}"

    def land_copy(self, copy: InFlight, writer: tuple[int, int]) -> int:
        steps = (copy.produced_step, self.step)
        return self.target.land(copy.partition, copy.upstream, copy.hash, copy.timestamp, writer, steps)

    def live(self) -> list[SimProcess]:
        return [p for p in self.slots if p is not None and not p.done]

    @property
    def now_s(self) -> float:
        return self.now_ms / 1000

    def data_end(self, partition: int) -> int:
        """One past the partition's last data record (0 without one)."""
        records = self.source.partitions[partition]
        return next((r.offset + 1 for r in reversed(records) if r.kind == "data"), 0)

    # -- running a schedule ----------------------------------------------------------------------
    def apply(self, action: act.Action) -> bool:
        self.step += 1
        self.now_ms += 7
        text = action.apply(self)
        if text is None:
            return False
        if text:
            self.note(text)
        return True

    def heal(self) -> list[Violation]:
        """Thaw, expire the dead, bring the coordinator back, run until caught up, stop every process."""
        self.note("-- heal: every fault ends, one process runs until caught up, then all stop")
        self.apply(act.CoordinatorBack())
        for slot, proc in enumerate(self.slots):
            if proc is not None and proc.frozen:
                self.apply(act.Thaw(slot))
        for member in list(self.group.members):
            proc = self.slots[member[0]]
            if proc is None or proc.member != member or proc.done:
                self.apply(act.Expire(member[0], member[1]))
        for _ in range(self.settings.heal_steps):
            if not self.live():  # every process stopped (or was stopping) as the faults ended
                self.apply(act.Start(0))
            if self._caught_up():
                break
            self._turn()
        else:
            return [Violation("stuck", "the healed world did not catch up", None)]
        for proc in self.live():
            self.apply(act.Term(proc.slot))
        for _ in range(self.settings.heal_steps):
            if not self.live():
                return []
            self._turn()
        return [Violation("stuck", "a process did not stop", None)]

    def _turn(self) -> None:
        """One round of a healed world: every live process lands what it sent, commits and steps."""
        for proc in self.live():
            for p in range(self.settings.partitions):
                self.apply(act.LandCopies(proc.slot, p, 1_000))
            self.apply(act.LandState(proc.slot, 1_000))
            self.apply(act.AutoCommit(proc.slot))
            self.apply(act.Step(proc.slot))

    def _caught_up(self) -> bool:
        if any(proc.queued() or proc.own.held for proc in self.live()):
            return False
        committed = self.group.committed
        return all(committed.get(p, 0) >= self.data_end(p) for p in range(self.settings.partitions))


def run_schedule(
    settings: SimSettings,
    actions: Sequence[act.Action] | None = None,
    *,
    seed: int | None = None,
) -> Outcome:
    """Apply ``actions`` (or draw ``settings.steps`` of them with ``seed``), heal, and check."""
    world = World(settings)
    rng = random.Random(seed)
    played: list[act.Action] = []
    violations: list[Violation] = []
    with stamped_by(world.next_event_id, lambda: world.now_ms):
        schedule = list(actions) if actions is not None else None
        count = len(schedule) if schedule is not None else settings.steps
        for i in range(count):
            action = schedule[i] if schedule is not None else act.draw(world, rng)
            if world.apply(action):
                played.append(action)
            violations = check_commits(world)
            if violations:
                break
        if not violations:
            violations = world.heal() or check_end(world)
    return Outcome(seed, played, violations, world.trace, world.step)


def run_seed(settings: SimSettings, seed: int) -> Outcome:
    return run_schedule(settings, seed=seed)


@dataclass
class Exploration:
    """Seeds run and the first failures found."""

    schedules: int = 0
    seconds: float = 0.0
    failures: list[Outcome] = field(default_factory=list)


def explore(
    settings: SimSettings,
    seeds: Sequence[int] | None = None,
    *,
    first_seed: int = 0,
    budget_s: float | None = None,
    stop_at_first: bool = True,
) -> Exploration:
    """Run ``seeds`` (or seeds from ``first_seed`` on until ``budget_s`` runs out)."""
    started = time.monotonic()
    out = Exploration()
    candidates = iter(seeds) if seeds is not None else itertools.count(first_seed)
    for seed in candidates:
        if budget_s is not None and time.monotonic() - started >= budget_s:
            break
        outcome = run_seed(replace(settings), seed)
        out.schedules += 1
        if not outcome.ok:
            out.failures.append(outcome)
            if stop_at_first:
                break
    out.seconds = time.monotonic() - started
    return out
