"""What can happen in the simulated world, one action at a time.

Each action names what it acts on (a process slot, a partition) and carries its own numbers, so a
schedule replays the same way; ``apply`` returns a line for the trace ("" for an action too common
to trace, a loop's turn), or None when the action does not apply to the world as it is (it is then
skipped: a shrunk schedule still replays).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from mirrorlake.simulation.logs import ABORTED, DATA, MARKER
from mirrorlake.simulation.process import SimProcess

if TYPE_CHECKING:
    from mirrorlake.simulation.world import World

__all__ = [
    "Action",
    "AutoCommit",
    "CoordinatorAway",
    "CoordinatorBack",
    "Expire",
    "Freeze",
    "Kill",
    "LandCopies",
    "LandState",
    "Produce",
    "Start",
    "Step",
    "Term",
    "Thaw",
    "draw",
]


class Action(Protocol):
    def apply(self, world: World) -> str | None: ...


def _running(world: World, slot: int) -> SimProcess | None:
    proc = world.slots[slot]
    return proc if proc is not None and not proc.done else None


@dataclass(frozen=True)
class Produce:
    """The source application appends ``n`` records to ``partition``; in a transaction, committed
    (a marker after them) or aborted."""

    partition: int
    n: int
    transaction: str = ""  # "", "commit" or "abort"

    def apply(self, world: World) -> str | None:
        kind = ABORTED if self.transaction == "abort" else DATA
        first = world.source.end(self.partition)
        for _ in range(self.n):
            world.source.append(self.partition, kind, world.now_ms)
        if self.transaction:
            world.source.append(self.partition, MARKER, world.now_ms)
        what = f" in a transaction, {self.transaction}ed" if self.transaction else ""
        return f"produce {self.n} to [{self.partition}] at {first}{what}"


@dataclass(frozen=True)
class Start:
    slot: int

    def apply(self, world: World) -> str | None:
        if _running(world, self.slot) is not None:
            return None
        world.incarnations[self.slot] += 1
        proc = SimProcess(world, self.slot, world.incarnations[self.slot])
        world.slots[self.slot] = proc
        return f"start p{self.slot}.{proc.incarnation}"


@dataclass(frozen=True)
class Step:
    """The process runs on to the next point where it waits."""

    slot: int

    def apply(self, world: World) -> str | None:
        proc = _running(world, self.slot)
        if proc is None or proc.frozen:
            return None
        proc.step()
        return "" if proc.waiting == "loop" and not proc.done else f"p{self.slot} waits: {proc.waiting or 'exited'}"


@dataclass(frozen=True)
class LandCopies:
    """The target acknowledges up to ``n`` of the process's copies of ``partition``."""

    slot: int
    partition: int
    n: int

    def apply(self, world: World) -> str | None:
        proc = world.slots[self.slot]
        if proc is None or proc.done:
            return None
        done = proc.land_copies(self.partition, self.n)
        return f"target lands {done} copies of p{self.slot} in [{self.partition}]" if done else None


@dataclass(frozen=True)
class LandState:
    """The state topic acknowledges up to ``n`` of the process's events."""

    slot: int
    n: int

    def apply(self, world: World) -> str | None:
        proc = world.slots[self.slot]
        if proc is None or proc.done:
            return None
        queued = list(proc.state.queue)[: self.n]
        done = proc.land_state(self.n)
        if not done:
            return None
        kinds = ", ".join(_event_text(p.event) for p in queued[:done])
        return f"state lands {done} of p{self.slot}: {kinds}"


def _event_text(event: object) -> str:
    from replicator.events import Lifecycle, OffsetSync

    if isinstance(event, OffsetSync):
        return f"sync [{event.partition}] {event.upstream_offset}->{event.downstream_offset} ({event.reason})"
    if isinstance(event, Lifecycle):
        return f"{event.state}{' (' + event.reason + ')' if event.reason else ''}"
    return type(event).__name__


@dataclass(frozen=True)
class AutoCommit:
    slot: int

    def apply(self, world: World) -> str | None:
        proc = _running(world, self.slot)
        if proc is None or proc.frozen or not proc.joined:
            return None
        before = dict(world.group.committed)
        if not proc.auto_commit() or world.group.committed == before:
            return None
        return f"p{self.slot} auto-commits {dict(sorted(proc.stored.items()))}"


@dataclass(frozen=True)
class Term:
    """SIGTERM: the process stops cleanly at its next turn."""

    slot: int

    def apply(self, world: World) -> str | None:
        proc = _running(world, self.slot)
        if proc is None or proc.term:
            return None
        proc.term = True
        return f"SIGTERM p{self.slot}"


@dataclass(frozen=True)
class Kill:
    """SIGKILL: of what the process sent and had not had acknowledged, a share lands."""

    slot: int
    copies_share: float
    state_share: float

    def apply(self, world: World) -> str | None:
        proc = _running(world, self.slot)
        if proc is None:
            return None
        copies, events = proc.killed(self.copies_share, self.state_share)
        landed = ", ".join(_event_text(e) for e in events) or "none"
        name = f"p{self.slot}.{proc.incarnation}"
        return f"SIGKILL {name}: of what it had sent, {copies} copies land, and state events: {landed}"


@dataclass(frozen=True)
class Freeze:
    """SIGSTOP: nothing of the process runs (its sent writes may still land)."""

    slot: int

    def apply(self, world: World) -> str | None:
        proc = _running(world, self.slot)
        if proc is None or proc.frozen:
            return None
        proc.frozen = True
        return f"SIGSTOP p{self.slot}"


@dataclass(frozen=True)
class Thaw:
    slot: int

    def apply(self, world: World) -> str | None:
        proc = _running(world, self.slot)
        if proc is None or not proc.frozen:
            return None
        proc.frozen = False
        return f"SIGCONT p{self.slot}"


@dataclass(frozen=True)
class Expire:
    """The session of member ``(slot, incarnation)`` (killed, or frozen) expires."""

    slot: int
    incarnation: int

    def apply(self, world: World) -> str | None:
        member = (self.slot, self.incarnation)
        if member not in world.group.members:
            return None
        proc = world.slots[self.slot]
        alive = proc is not None and proc.member == member and not proc.done
        if alive and proc is not None and not proc.frozen:
            return None  # a running member heartbeats
        for p, owner in world.group.owner.items():
            if owner == member:
                world.lost_at.setdefault((member, p), []).append([world.step, None])
        world.group.expire(member, alive)
        return f"session of p{self.slot}.{self.incarnation} expires ({'frozen' if alive else 'dead'})"


@dataclass(frozen=True)
class CoordinatorAway:
    def apply(self, world: World) -> str | None:
        if not world.group.coordinator_up:
            return None
        world.group.coordinator_up = False
        return "the group coordinator is away: commits are refused"


@dataclass(frozen=True)
class CoordinatorBack:
    def apply(self, world: World) -> str | None:
        if world.group.coordinator_up:
            return None
        world.group.coordinator_up = True
        return "the group coordinator is back"


def draw(world: World, rng: random.Random) -> Action:
    """One action, among those that apply now, by weight."""
    s = world.settings
    slots = range(s.slots)
    live = [p.slot for p in world.live()]
    choices: list[tuple[float, Action]] = []

    def add(weight: float, action: Action) -> None:
        choices.append((weight, action))

    slot = rng.choice(slots)
    partition = rng.randrange(s.partitions)
    if live:
        add(40, Step(rng.choice(live)))
        add(16, LandCopies(rng.choice(live), partition, rng.randint(1, 6)))
        add(12, LandState(rng.choice(live), rng.randint(1, 4)))
        add(4, AutoCommit(rng.choice(live)))
        add(1.5, Term(rng.choice(live)))
        add(2.5, Kill(rng.choice(live), rng.choice((0.0, 0.5, 1.0)), rng.choice((0.0, 0.5, 1.0))))
        add(1, Freeze(rng.choice(live)))
    if any(p.frozen for p in world.live()):
        add(3, Thaw(rng.choice([p.slot for p in world.live() if p.frozen])))
    if len(live) < s.slots:
        add(4 if live else 12, Start(rng.choice([i for i in slots if i not in live])))
    expirable = [m for m in world.group.members if _expirable(world, m)]
    if expirable:
        add(4, Expire(*rng.choice(expirable)))
    add(6, Produce(partition, rng.randint(1, 8), rng.choice(("", "", "", "commit", "abort"))))
    add(0.5, CoordinatorAway() if world.group.coordinator_up else CoordinatorBack())
    del slot
    total = sum(w for w, _a in choices)
    pick = rng.uniform(0, total)
    for weight, action in choices:
        pick -= weight
        if pick <= 0:
            return action
    return choices[-1][1]


def _expirable(world: World, member: tuple[int, int]) -> bool:
    proc = world.slots[member[0]]
    return proc is None or proc.member != member or proc.done or proc.frozen
